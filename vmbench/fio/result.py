"""fio ``--output-format=json+`` -> numbers, with exact percentiles from the histograms.

fio's json+ keeps, per direction, the completion-latency histogram (``clat_ns.bins``:
bucket value -> count), read into a :class:`~vmbench.fio.histogram.Histogram` (fio's
percentile rule and merging, written once there).
The tail job of a load step (``vmbench-tail``, :data:`vmbench.fio.job.TAIL_NAME`) only keeps
the load on: it is in no figure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import VmbenchError
from .histogram import PERCENTILES, Histogram
from .job import TAIL_NAME

DIRECTIONS = ("read", "write", "trim")


class FioOutputError(VmbenchError):
    """fio's output could not be read, or fio reported an error in it."""

    exit_code = 4


@dataclass(frozen=True)
class Direction:
    name: str
    iops: float
    bw_bytes: float
    io_bytes: int
    total_ios: int
    runtime_ms: int
    clat: Histogram


@dataclass(frozen=True)
class FioResult:
    """One fio run: per-direction figures and their sum; latency over every completion."""

    fio_version: str
    directions: tuple[Direction, ...]
    jobs: int

    @property
    def iops(self) -> float:
        return sum(d.iops for d in self.directions)

    @property
    def bw_bytes(self) -> float:
        return sum(d.bw_bytes for d in self.directions)

    @property
    def io_bytes(self) -> int:
        return sum(d.io_bytes for d in self.directions)

    @property
    def clat(self) -> Histogram:
        return Histogram.merged(d.clat for d in self.directions) if self.directions else Histogram()

    def percentiles(self) -> dict[float, int | None]:
        return dict(zip(PERCENTILES, self.clat.percentiles(PERCENTILES)))


_DUMP = re.compile(r'\{\s*"fio version"')


def last_json(text: str) -> str:
    """fio's final JSON document in its output: with ``--status-interval`` the file holds a
    status dump every few seconds before it (:mod:`vmbench.fio.stall`); anything fio printed
    before the first one is left out."""
    starts = [m.start() for m in _DUMP.finditer(text)]
    if starts:
        return text[starts[-1]:]
    return text[text.find("{"):] if "{" in text else text


def parse_fio_json(text: str | bytes) -> FioResult:
    """Parse fio's json/json+ output, leaving the tail job out.  Refuses output with a job
    error (the tail's included) or no I/O."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    # fio may print warnings before the JSON document when --output is not used, and status
    # dumps before the final one with --status-interval
    doc = last_json(text)
    if not doc.startswith("{"):
        raise FioOutputError("fio produced no JSON output", hint=_snippet(text))
    try:
        data = json.loads(doc)
    except json.JSONDecodeError as exc:
        raise FioOutputError(f"fio's JSON output is not readable: {exc}", hint=_snippet(text)) from None
    jobs = data.get("jobs") or []
    if not jobs:
        raise FioOutputError("fio's output has no jobs")
    for job in jobs:
        if job.get("error"):
            raise FioOutputError(f"fio job {job.get('jobname')} failed with error {job['error']}")
    jobs = [job for job in jobs if job.get("jobname") != TAIL_NAME]
    if not jobs:
        raise FioOutputError(f"fio's output has only the {TAIL_NAME} job")
    directions = []
    for name in DIRECTIONS:
        parts = [job[name] for job in jobs if job.get(name, {}).get("total_ios", 0) > 0]
        if not parts:
            continue
        hist = Histogram.merged(Histogram.from_json(part.get("clat_ns", {}).get("bins", {})) for part in parts)
        directions.append(
            Direction(
                name=name,
                iops=sum(float(p["iops"]) for p in parts),
                bw_bytes=sum(float(p["bw_bytes"]) for p in parts),
                io_bytes=sum(int(p["io_bytes"]) for p in parts),
                total_ios=sum(int(p["total_ios"]) for p in parts),
                runtime_ms=max(int(p["runtime"]) for p in parts),
                clat=hist,
            )
        )
    if not directions:
        raise FioOutputError("fio completed no I/O", hint="check the job's size and runtime")
    return FioResult(fio_version=str(data.get("fio version", "")), directions=tuple(directions), jobs=len(jobs))


def _snippet(text: str) -> str:
    text = text.strip()
    return text[:300] + ("..." if len(text) > 300 else "")


# ---- fio's output as a results database stored it (a measurement's ``fio_json``) -------------


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def stored_direction(fio: Mapping[str, Any], direction: str, what: str) -> float | None:
    """``what`` ("iops", "bw_bytes") in one direction from fio's stored output, every job clone
    summed and a load run's tail left out; None when the output has no jobs (not stored)."""
    jobs = fio.get("jobs")
    if not jobs:
        return None
    return sum(float((j.get(direction) or {}).get(what) or 0.0) for j in jobs if j.get("jobname") != TAIL_NAME)


def stored_steadystate(fio: Mapping[str, Any]) -> tuple[bool, float] | None:
    """What fio's steady-state detection found in its stored output: (attained, the job's runtime
    in s) of its first job; None when the job did not ask for it."""
    first = (fio.get("jobs") or [{}])[0]
    ss = first.get("steadystate")
    return (bool(ss.get("attained")), float(first.get("job_runtime") or 0) / 1000) if ss else None


def fio_cpu_us_per_io(fio: Any) -> float | None:
    """fio's own CPU per I/O in µs, from its json output: per job (each clone; a load run's tail
    left out) usr_cpu + sys_cpu (% of one CPU over job_runtime, ms), over every direction's
    total_ios.  None when fio's output does not say."""
    if not isinstance(fio, Mapping) or not isinstance(fio.get("jobs"), list):
        return None
    cpu_s = ios = 0.0
    for j in fio["jobs"]:
        if not isinstance(j, Mapping) or j.get("jobname") == TAIL_NAME:
            continue
        usr, sys_, runtime = _num(j.get("usr_cpu")), _num(j.get("sys_cpu")), _num(j.get("job_runtime"))
        if usr is None or sys_ is None or runtime is None:
            return None
        cpu_s += (usr + sys_) / 100.0 * runtime / 1000.0
        ios += sum(_num((j.get(d) or {}).get("total_ios")) or 0.0 for d in ("read", "write", "trim"))
    return cpu_s * 1e6 / ios if ios > 0 else None
