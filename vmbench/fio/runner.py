"""Run one fio job on a transport (host or guest) and read back its json+ output.

fio writes its output to a file on the side it ran on (``--output=``), which is read back
afterwards: guest-agent replies are size-limited, files are not.
"""

from __future__ import annotations

import json
import logging
import secrets
from dataclasses import dataclass
from typing import Sequence

from ..errors import VmbenchError
from ..progress import NullProgress, Progress
from ..transport.base import Transport
from ..units import format_duration
from .job import FioJob, check_identical, fio_argv, fio_env, precondition_argv
from .result import FioResult, parse_fio_json

log = logging.getLogger(__name__)
MIN_TIMEOUT = 120.0


@dataclass(frozen=True)
class FioRun:
    argv: tuple[str, ...]
    target: str
    result: FioResult
    raw_json: str


def job_timeout(job: FioJob, slow: bool) -> float:
    """Generous: fio also lays out files and may be slowed by TCG; never unbounded."""
    d = job.duration or 600.0
    return max(MIN_TIMEOUT, d * (4 if slow else 2) + 60)


def run_fio(
    transport: Transport,
    job: FioJob,
    target: str,
    workdir: str,
    *,
    label: str,
    progress: Progress | None = None,
    slow: bool = False,
    must_match: Sequence[str] | None = None,
) -> FioRun:
    """Run ``job`` on ``target``.  ``must_match`` is the other side's argv for the same job:
    the run is refused unless every parameter but target and output is identical."""
    progress = progress or NullProgress()
    token = secrets.token_hex(4)
    output = f"{workdir}/fio-{token}.json"
    jobfile_path = None
    if job.jobfile is not None:
        jobfile_path = f"{workdir}/job-{token}.fio"
        transport.write_file(jobfile_path, job.jobfile.text.encode(), 0o644)
    argv = fio_argv(job, target, output, jobfile_path=jobfile_path)
    if must_match is not None:
        check_identical(must_match, argv)
    total = job.duration

    def tick(elapsed: float) -> None:
        if total is None:
            progress.status(f"{label}: {format_duration(elapsed)} elapsed")
        else:
            progress.status(f"{label}: {format_duration(max(0.0, total - elapsed))} left")

    try:
        transport.run(argv, env=fio_env(job, target), timeout=job_timeout(job, slow), on_wait=tick)
        raw = transport.read_file(output).decode("utf-8", errors="replace")
    finally:
        _remove(transport, [output] + ([jobfile_path] if jobfile_path else []))
    raw = raw[raw.find("{"):] if "{" in raw else raw
    result = parse_fio_json(raw)
    return FioRun(argv=tuple(argv), target=target, result=result, raw_json=raw)


def precondition(transport: Transport, job: FioJob, target: str, workdir: str, *, slow: bool = False) -> dict:
    """Write the job's whole region once so reads never measure unwritten (sparse) space."""
    output = f"{workdir}/pre-{secrets.token_hex(4)}.json"
    argv = precondition_argv(job, target, output)
    try:
        transport.run(argv, timeout=max(MIN_TIMEOUT, job.size / 1e6 / (20 if slow else 100) + 60))
        raw = transport.read_file(output).decode("utf-8", errors="replace")
    finally:
        _remove(transport, [output])
    data = json.loads(raw[raw.find("{"):])
    w = data["jobs"][0]["write"]
    return {"argv": argv, "bytes": w["io_bytes"], "bw_bytes": w["bw_bytes"], "runtime_ms": w["runtime"]}


def _remove(transport: Transport, paths: list[str]) -> None:
    """Best effort: never let removing a temporary file hide the error that matters."""
    try:
        transport.run(["rm", "-f", *paths], check=False, timeout=60)
    except VmbenchError as exc:
        log.warning("could not remove %s on %s: %s", " ".join(paths), transport.name, exc)
