"""Run one fio job on a transport (host or guest) and read back its json+ output and logs.

fio writes its output to a file on the side it ran on (``--output=``), which is read back
afterwards: guest-agent replies are size-limited, files are not.  fio's own IOPS and latency
logs (``<workdir>/log-<token>...``) are read back the same way, removed, and parsed into
per-second series (:func:`parse_logs`; the measured job's only, not a tail's) and, with
epoch-stamped logs, into the run's measured and loaded times (:mod:`vmbench.fio.window`).
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
import secrets
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from ..telemetry import sampler as telemetry_
from ..telemetry.ceph import CephPool, CephSampler, CephWatch
from ..errors import VmbenchError
from ..progress import NullProgress, Progress
from ..transport import ops
from ..transport.base import Transport
from ..units import format_duration
from . import jobfile
from .gate import Gate
from .job import LOG_AVG_MSEC, FioJob, check_identical, fio_argv, fio_env, precondition_argv, precondition_seconds
from .result import FioResult, last_json, parse_fio_json
from .stall import STATUS_INTERVAL_S, StallWatch, read_tail
from .window import EPOCH_MS, FioWindow, measured_logs, window_from_logs

log = logging.getLogger(__name__)
MIN_TIMEOUT = 120.0
BIN_MS = LOG_AVG_MSEC  # the series' resolution
_LOG_KIND = re.compile(r"_(iops|clat)(?:\.\d+)?\.log$")


@dataclass(frozen=True)
class FioRun:
    argv: tuple[str, ...]
    target: str
    result: FioResult
    raw_json: str
    #: fio's own time series: "fio-iops", "fio-clat" (and "fio-iops-read"/"fio-iops-write" when
    #: both directions ran), each {"t_s": [...], "values": [...], "unit": "IOPS" | "ms"}; and
    #: the sampler's "disk" and "cpu" (:mod:`vmbench.telemetry.sampler`), with a ZFS pool also
    #: "zpool" and "arc" (:mod:`vmbench.telemetry.zfs`); with a host side (a guest run), the
    #: host sampler's "host-disk" and "host-cpu" (and the host pool's "zpool" and "arc")
    series: dict = field(default_factory=dict)
    jobfile_text: str | None = None  # the rewritten copy of a job file that ran
    rewrites: tuple[str, ...] = ()  # what vmbench changed in it, one line each
    #: when fio measured and loaded, in this side's epoch ms (run with epoch_logs, a built-in job)
    window: FioWindow | None = None


def job_timeout(job: FioJob, slow: bool, tail_seconds: float = 0) -> float:
    """Generous: fio also lays out files and may be slowed by TCG; never unbounded."""
    d = (job.duration or 600.0) + tail_seconds
    return max(MIN_TIMEOUT, d * (4 if slow else 2) + 60)


@dataclass(frozen=True)
class Sampling:
    """What is sampled beside fio while it runs; none of it ever fails the run.

    With ``telemetry`` a sampler records the devices under the target and the CPU while fio
    runs (the "disk" and "cpu" series, :mod:`vmbench.telemetry.sampler`); with ``zfs_pool``
    (the ZFS pool under the target on this side) also that pool's I/O, the ARC and the scrub
    state (the "zpool" and "arc" series, :mod:`vmbench.telemetry.zfs`).

    With ``host_side`` (fio runs in a guest whose scratch disk is ``host_target`` on that host,
    a /dev/zvol/... device or a file; None: every whole disk) a second sampler runs on the
    host, in ``host_workdir``, from just before fio until just after: its series are stored as
    "host-disk" and "host-cpu" (:func:`vmbench.telemetry.sampler.as_host`), and ``zfs_pool`` then names
    the host's pool, sampled there only ("zpool", "arc"): the guest's sampler gets no pool.
    With ``ceph_pool`` (the Ceph pool of an RBD target) the host (``host_side``, else this side)
    also samples that pool's client I/O and its OSDs' latency (the "ceph" series,
    :mod:`vmbench.telemetry.ceph`), which trail fio by a few seconds: the run waits them out."""

    telemetry: bool = True
    zfs_pool: str | None = None
    host_side: Transport | None = None
    host_workdir: str = ""
    host_target: str | None = None
    ceph_pool: CephPool | None = None


@dataclass(frozen=True)
class Together:
    """How a run starts and ends beside the runs started with it (a load step's).

    ``tail_seconds`` keeps the load on that long after the measured job (a built-in job only;
    see :func:`vmbench.fio.job.fio_argv`); it is in no figure and no fio series.  With
    ``epoch_logs`` fio stamps its logs in unix epoch ms and :attr:`FioRun.window` says when
    this run measured and loaded, on this side's clock (None for a job file).  ``before_start``
    is called just before fio starts (after the samplers; e.g. a barrier shared by the runs
    started together); what it raises ends the run like a failure of fio.  With ``armed`` (a
    built-in job) fio starts at once, sets the job up and waits on a gate
    (:mod:`vmbench.fio.gate`): ``before_start`` is then called once every clone of the job is
    set up, and the gate opens after it, so fio's start-up is no longer inside the start skew."""

    tail_seconds: float = 0
    epoch_logs: bool = False
    before_start: Callable[[], None] | None = None
    armed: bool = False


@dataclass(frozen=True)
class FioRequest:
    """One fio run: ``job`` on ``target`` (a file job's: a directory, made and removed here),
    its files in ``workdir``, said as ``label``; ``slow``: a TCG guest (longer deadlines).
    ``must_match`` is the other side's argv for the same job: the run is refused unless every
    parameter but target, output and log paths is identical (for a job file: the rewritten
    text, through the digest in the copy's name)."""

    job: FioJob
    target: str
    workdir: str
    label: str
    slow: bool = False
    must_match: Sequence[str] | None = None
    sampling: Sampling = Sampling()
    together: Together = Together()


def run_fio(transport: Transport, request: FioRequest, progress: Progress | None = None) -> FioRun:
    """Run ``request`` on ``transport``.  A job file runs as a copy rewritten for the target in
    the work directory; fio's logs are read back, parsed into :attr:`FioRun.series` and removed
    with the copy and the output; what is sampled beside fio (:class:`Sampling`) joins them.
    How it starts beside other runs: :class:`Together`."""
    progress = progress or NullProgress()
    r, s, together = request, request.sampling, request.together
    job, target, workdir = r.job, r.target, r.workdir
    token = secrets.token_hex(4)
    output = f"{workdir}/fio-{token}.json"
    text, rewrites, jobfile_path = _jobfile_copy(job, target, workdir, token)
    total = None if job.duration is None else job.duration + together.tail_seconds
    timeout = job_timeout(job, r.slow, together.tail_seconds)
    gate = Gate(f"{workdir}/gate-{token}", job.numjobs, timeout) if together.armed and job.jobfile is None else None
    argv = fio_argv(job, target, output, jobfile_path=jobfile_path, log_prefix=f"{workdir}/log-{token}",
                    tail_seconds=together.tail_seconds, epoch_logs=together.epoch_logs,
                    exec_prerun=gate.prerun() if gate else None, status_interval=STATUS_INTERVAL_S)
    if r.must_match is not None:
        check_identical(r.must_match, argv)
    host = s.host_side or transport  # where the Ceph pool is sampled and watched
    # a TCG guest's status is read every other dump: each read is the agent's work on the measured vCPUs
    stall = StallWatch(lambda size: read_tail(transport, output, size), first_io=together.armed or job.file_job,
                       every=STATUS_INTERVAL_S * (2 if r.slow else 1))
    tick = _ticker(progress, r.label, total, CephWatch(host, s.ceph_pool) if s.ceph_pool is not None else None, stall)
    finished = False
    try:
        _prepare(transport, job, target, jobfile_path, text)
        host_sampler, sampler = _samplers(transport, r, token, timeout)
        ceph = (_started(CephSampler(host, s.ceph_pool))
                if s.telemetry and s.ceph_pool is not None and (s.host_workdir or s.host_side is None) else None)
        try:
            def fio() -> object:
                return transport.run(argv, env=fio_env(job, target), timeout=timeout, on_wait=tick)

            if gate is None:
                sampled = _sampled(fio, sampler, host_sampler, together.before_start)
            else:  # before_start is called once fio is armed, just before the gate opens
                sampled = _sampled(lambda: gate.run_armed(transport, fio, together.before_start), sampler, host_sampler, None)
        finally:
            # the pool's I/O over fio's ramp and runtime (a time-based job's), else since the sampler started
            pool_series = ceph.stop(total if total and not job.file_job else None) if ceph is not None else {}
        sampled.update(pool_series)
        raw = transport.read_file(output).decode("utf-8", errors="replace")
        finished = True
    finally:
        logs = _collect_logs(transport, workdir, token, read=finished, remove=[output, *([jobfile_path] if jobfile_path else [])],
                             files_dir=target if job.file_job else None, gate=gate)
    raw = last_json(raw)  # the final status, after the ones fio wrote while it ran
    result = parse_fio_json(raw)
    window, logs = _measured(job, logs, together.tail_seconds, together.epoch_logs)
    return FioRun(argv=tuple(argv), target=target, result=result, raw_json=raw, series={**parse_logs(logs), **sampled},
                  jobfile_text=text, rewrites=rewrites, window=window)


def _remove_files_dir(transport: Transport, target: str) -> None:
    """A file job's directory and the files fio left in it (best effort, as the other files of a run)."""
    try:
        ops.remove_tree(transport, target, inside=posixpath.dirname(target.rstrip("/")))
    except (VmbenchError, ValueError) as exc:
        log.warning("could not remove %s on %s: %s", target, transport.name, exc)


def _started(sampler: CephSampler) -> CephSampler:
    sampler.start()
    return sampler


def _prepare(transport: Transport, job: FioJob, target: str, jobfile_path: str | None, text: str | None) -> None:
    """A file job's directory (its own, for this run) and a job file's copy, written before fio runs."""
    if job.file_job:
        ops.mkdir(transport, target, 0o755)
    if jobfile_path is not None and text is not None:
        transport.write_file(jobfile_path, text.encode(), 0o644)


def _collect_logs(transport: Transport, workdir: str, token: str, *, read: bool, remove: list[str],
                  files_dir: str | None = None, gate: Gate | None = None) -> dict[str, bytes]:
    """fio's logs of this run (read only when it finished), then its files removed, the logs
    with them, its gate's files, and a file job's directory with the files fio left in it."""
    listed = _listed(transport, workdir)
    names = [n for n in listed if n.startswith(f"log-{token}")]
    logs = _read_logs(transport, workdir, names) if read else {}
    _remove(transport, remove + [f"{workdir}/{n}" for n in listed if n in names or (gate is not None and gate.owns(n))])
    if files_dir is not None:
        _remove_files_dir(transport, files_dir)
    return logs


def _jobfile_copy(job: FioJob, target: str, workdir: str, token: str) -> tuple[str | None, tuple[str, ...], str | None]:
    """A job file's copy rewritten for ``target``: (its text, what was rewritten, its path in
    ``workdir``); (None, (), None) for a built-in job."""
    if job.jobfile is None:
        return None, (), None
    text, lines = jobfile.rewrite(job.jobfile.text, target, workdir, token)
    return text, tuple(lines), f"{workdir}/job-{token}-{jobfile.digest(job.jobfile.text)}.fio"


def _ticker(progress: Progress, label: str, total: float | None, watch: CephWatch | None = None,
            stall: StallWatch | None = None) -> Callable[[float], None]:
    """What is said while fio runs: the time left (the time elapsed when it is not known), or
    that fio is stalled (:mod:`.stall`) with what is known of why (the side answering or not,
    what Ceph reports); with ``watch``, a Ceph cluster that degrades under the run (an OSD down,
    a full pool) ends it (what ``watch`` raises), asked at once when fio stalls."""
    warned = [False]

    def say(stalled: float) -> None:
        assert stall is not None
        why = "; ".join(filter(None, [stall.unanswered(), watch.said if watch is not None else ""]))
        line = f"{label}: stalled for {stalled:.0f}s (no I/O completed{'; ' + why if why else ''})"
        progress.warn(line) if not warned[0] else progress.status(line)
        warned[0] = True

    def tick(elapsed: float) -> None:
        stalled = stall.check() if stall is not None else None
        try:
            if watch is not None:
                watch.check(stalled=stalled is not None)
        except Exception:  # what Ceph answered ends the run: a stall under way is said first, with it
            quiet = stall.quiet() if stall is not None and stalled is None else None
            if quiet is not None and stall is not None and quiet >= stall.every:
                stalled = quiet
            if stalled is not None:
                say(stalled)
            raise
        if stalled is not None:
            say(stalled)
            return
        warned[0] = False
        if total is None:
            progress.status(f"{label}: {format_duration(elapsed)} elapsed")
        else:
            progress.status(f"{label}: {format_duration(max(0.0, total - elapsed))} left")

    return tick


def _samplers(transport: Transport, request: FioRequest, token: str,
              timeout: float) -> tuple[telemetry_.Sampler | None, telemetry_.Sampler | None]:
    """The host's sampler and this side's (each None when not sampled; see :class:`Sampling`)."""
    s = request.sampling
    on_host = s.telemetry and s.host_side is not None
    if on_host and not s.host_workdir:
        log.warning("%s: host telemetry not recorded: no host work directory", request.label)
        on_host = False
    # fio in a guest: nothing of vmbench's runs beside it in the guest, nor on the host but for a ZFS pool's iostat
    host_sampler = (telemetry_.Sampler(s.host_side, s.host_target, s.host_workdir, token, timeout,  # type: ignore[arg-type]
                                       zfs_pool=s.zfs_pool, loop=s.zfs_pool is not None) if on_host else None)
    sampler = (telemetry_.Sampler(transport, request.target, request.workdir, token, timeout,
                                  zfs_pool=None if s.host_side is not None else s.zfs_pool,
                                  loop=s.host_side is None) if s.telemetry else None)
    return host_sampler, sampler


def _sampled(run: Callable[[], object], sampler: telemetry_.Sampler | None, host_sampler: telemetry_.Sampler | None,
             before_start: Callable[[], None] | None) -> dict[str, dict]:
    """``run`` fio between the samplers' start and stop (the host's around this side's);
    their series."""
    sampled: dict[str, dict] = {}
    if host_sampler is not None:
        host_sampler.start()
    try:
        if sampler is not None:
            sampler.start()
        try:
            if before_start is not None:
                before_start()
            run()
        finally:
            if sampler is not None:
                sampled = sampler.stop()
    finally:
        if host_sampler is not None:
            sampled = {**sampled, **telemetry_.as_host(host_sampler.stop())}
    return sampled


def _measured(job: FioJob, logs: dict[str, bytes], tail_seconds: float,
              epoch_logs: bool) -> tuple[FioWindow | None, dict[str, bytes]]:
    """A built-in job's window (with ``epoch_logs``) and its logs without the tail's; a job
    file's logs as they are, with no window."""
    window = None
    if job.jobfile is None:
        if epoch_logs:
            window = window_from_logs(logs, ramp_s=job.ramp, measured_jobs=job.numjobs, runtime_s=job.runtime,
                                      tail_s=tail_seconds)
        if tail_seconds:
            logs = measured_logs(logs, job.numjobs)
    return window, logs


def precondition(transport: Transport, job: FioJob, target: str, workdir: str, *, slow: bool = False,
                 write_rate: float | None = None) -> dict:
    """Write the job's whole region once so reads never measure unwritten (sparse) space;
    ``write_rate``: the bytes a second the target's I/O limits let 1 MiB writes through, which
    the deadline follows."""
    output = f"{workdir}/pre-{secrets.token_hex(4)}.json"
    argv = precondition_argv(job, target, output)
    try:
        transport.run(argv, timeout=max(MIN_TIMEOUT, precondition_seconds(job.size, write_rate, slow=slow)))
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


def _listed(transport: Transport, workdir: str) -> list[str]:
    """What is in the work directory (best effort: [] when the side cannot be listed)."""
    try:
        return ops.list_dir(transport, workdir)
    except (VmbenchError, OSError) as exc:
        log.warning("could not list fio logs in %s on %s: %s", workdir, transport.name, exc)
        return []


def _read_logs(transport: Transport, workdir: str, names: list[str]) -> dict[str, bytes]:
    out = {}
    for name in names:
        if _LOG_KIND.search(name):
            try:
                out[name] = transport.read_file(f"{workdir}/{name}")
            except (VmbenchError, OSError) as exc:
                log.warning("could not read fio log %s/%s on %s: %s", workdir, name, transport.name, exc)
    return out


def parse_logs(files: Mapping[str, bytes]) -> dict[str, dict]:
    """fio's per-job IOPS and completion-latency logs -> one series each, in 1 s bins.

    A log line is ``time_ms, value, direction, bs, offset[, ...]``; averaged lines (bs 0,
    from log_avg_msec) carry a rate or a mean latency, per-I/O lines (bs > 0) one I/O each.
    IOPS are summed over jobs and directions (per-I/O lines counted per second); latencies
    (ns) are averaged over every line of the bin and given in ms.  Logs in unix epoch time
    (log_unix_epoch) are shifted so their first window ends at 1 s."""
    rows: dict[str, list[list[tuple[int, float, int, bool]]]] = {"iops": [], "clat": []}
    for name, data in sorted(files.items()):
        kind = _LOG_KIND.search(name)
        if kind:
            parsed = _log_rows(data)
            if parsed:
                rows[kind.group(1)].append(parsed)
    epoch = min((r[0] for kind in rows.values() for f in kind for r in f if r[0] > EPOCH_MS), default=0)

    def bin_of(t: int, averaged: bool) -> int:
        if t > EPOCH_MS:
            t = t - epoch + (BIN_MS if averaged else 0)
        return max(1, round(t / BIN_MS)) if averaged else t // BIN_MS + 1

    total: dict[int, float] = defaultdict(float)
    by_dir: dict[int, dict[int, float]] = {0: defaultdict(float), 1: defaultdict(float)}
    for f in rows["iops"]:
        groups: dict[tuple[int, int, bool], list[float]] = defaultdict(list)
        for t, v, d, averaged in f:
            groups[(d, bin_of(t, averaged), averaged)].append(v)
        for (d, b, averaged), values in groups.items():
            rate = sum(values) / len(values) if averaged else sum(values) * 1000 / BIN_MS
            total[b] += rate
            if d in by_dir:
                by_dir[d][b] += rate
    lat: dict[int, list[float]] = defaultdict(list)
    for f in rows["clat"]:
        for t, v, _d, averaged in f:
            lat[bin_of(t, averaged)].append(v)
    series = {}
    if total:
        series["fio-iops"] = _series(total, "IOPS")
    if by_dir[0] and by_dir[1]:
        series["fio-iops-read"] = _series(by_dir[0], "IOPS")
        series["fio-iops-write"] = _series(by_dir[1], "IOPS")
    if lat:
        series["fio-clat"] = _series({b: sum(v) / len(v) / 1e6 for b, v in lat.items()}, "ms")
    return series


def _log_rows(data: bytes) -> list[tuple[int, float, int, bool]]:
    out = []
    for line in data.decode("ascii", errors="replace").splitlines():
        parts = line.split(",")
        try:
            t, v, d = int(parts[0]), float(parts[1]), int(parts[2])
            bs = int(parts[3]) if len(parts) > 3 else 0
        except (ValueError, IndexError):
            continue
        if d in (0, 1, 2) and t >= 0:
            out.append((t, v, d, bs == 0))
    return out


def _series(points: Mapping[int, float], unit: str) -> dict:
    bins = sorted(points)
    return {"t_s": [b * BIN_MS / 1000 for b in bins], "values": [round(points[b], 6) for b in bins], "unit": unit}
