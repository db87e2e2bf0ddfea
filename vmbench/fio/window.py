"""When a fio run measured and when it loaded the disk, from fio's own per-second logs; guest
clock offsets; and whether runs started in several VMs at once kept each other loaded.

A load step runs the same job in N guests (and host volumes) at once.  Every VM's *measured*
window must lie inside every other VM's *loaded* time, or some of its figures were taken on a
quieter disk.  Each run is the measured job (ramp, then runtime) followed in the same fio process
by a tail job (:data:`vmbench.fio.job.TAIL_NAME`) that keeps the load on; fio stamps its logs in
unix epoch milliseconds (``--log_unix_epoch=1``) on each side's own clock.

What fio 3.33 writes, by experiment (``--log_avg_msec=1000``): the logs' clock starts again
when the ramp ends, so a job's first stamp is 1000 ms after its measured time begins, and one
stamp follows every second; the last one (at the end of the runtime) is sometimes missing.  fio
numbers the log files of the measured job's ``numjobs`` clones 1..numjobs and the tail's after
them.  The stonewalled tail starts about 200 ms after the measured job ends (fio reaps the
jobs and starts the next group): the load pauses there.

Every function here is pure: the caller reads the logs and the clocks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping, Sequence

from .job import LOG_AVG_MSEC

EPOCH_MS = 10**11  # log stamps above this are unix epoch milliseconds
_IOPS_LOG = re.compile(r"_iops\.(\d+)\.log$")
_JOB_LOG = re.compile(r"_[a-z]+\.(\d+)\.log$")


@dataclass(frozen=True)
class FioWindow:
    """One fio run's times in its side's own unix epoch milliseconds: I/O from ``started_ms``
    (the ramp's start), measured from ``measured_from_ms`` to ``measured_to_ms``, loaded until
    ``loaded_to_ms``.  fio pauses between the measured job and the tail: the load resumes at
    ``tail_from_ms`` (``measured_to_ms`` when there is no tail, or no pause).  Every field is
    a number, so a window shifts and stores as it is."""

    started_ms: float
    measured_from_ms: float
    measured_to_ms: float
    loaded_to_ms: float
    tail_from_ms: float

    def shifted(self, ms: float) -> "FioWindow":
        """The same window with ``ms`` added to every time (e.g. minus a clock offset)."""
        return FioWindow(self.started_ms + ms, self.measured_from_ms + ms, self.measured_to_ms + ms,
                         self.loaded_to_ms + ms, self.tail_from_ms + ms)

    def loaded(self) -> tuple[tuple[float, float], ...]:
        """The intervals the disk was under this run's load: the ramp and measured job, and the tail."""
        if self.tail_from_ms <= self.measured_to_ms:
            return ((self.started_ms, max(self.loaded_to_ms, self.measured_to_ms)),)
        return ((self.started_ms, self.measured_to_ms), (self.tail_from_ms, self.loaded_to_ms))


@dataclass(frozen=True)
class Coverage:
    """Whether every other VM's load covered one VM's measured window (host time).

    ``loaded``: every other VM loaded the whole window; ``short_ms``: the most milliseconds of
    the window one other VM left unloaded (0 when loaded); ``short_of``: that VM, or the one
    with the least margin when every one covers it (None: no other VM); ``margin_ms``: the
    least slack at either end of the window over the other VMs (negative: one started after the
    window began or stopped before it ended; None: no other VM)."""

    loaded: bool
    short_ms: float
    short_of: int | None
    margin_ms: float | None


def job_number(name: str) -> int | None:
    """fio's job number in a log file's name (``log-ab12_iops.3.log`` -> 3)."""
    m = _JOB_LOG.search(name)
    return int(m.group(1)) if m else None


def measured_logs(files: Mapping[str, bytes], measured_jobs: int) -> dict[str, bytes]:
    """The logs of the measured job alone (numbers 1..measured_jobs): not the tail's."""
    return {n: d for n, d in files.items() if (k := job_number(n)) is None or k <= measured_jobs}


def window_from_logs(files: Mapping[str, bytes], *, ramp_s: float, measured_jobs: int,
                     runtime_s: float | None = None, tail_s: float = 0) -> FioWindow | None:
    """The run's :class:`FioWindow` from fio's IOPS logs (``<prefix>_iops.<n>.log``; other
    logs are ignored); None when the measured job logged nothing in epoch time.

    The measured window is [first measured stamp - 1000 ms, last measured stamp]; with
    ``runtime_s`` it ends no earlier than its start + runtime (fio sometimes leaves out the
    last stamp).  I/O started ``ramp_s`` before the measured window.  The load ends at the last
    tail stamp, or with ``tail_s`` no earlier than the tail's start + ``tail_s``; without tail
    logs, with the measured window."""
    measured: list[list[int]] = []
    tail: list[list[int]] = []
    for name, data in files.items():
        m = _IOPS_LOG.search(name)
        if m is None:
            continue
        stamps = _stamps(data)
        if stamps:
            (measured if int(m.group(1)) <= measured_jobs else tail).append(stamps)
    firsts = [s[0] for s in measured]
    if not firsts or min(firsts) <= EPOCH_MS:
        return None
    start = float(min(firsts) - LOG_AVG_MSEC)
    end = float(max(s[-1] for s in measured))
    if runtime_s is not None:
        end = max(end, start + runtime_s * 1000)
    tail_from = float(end)
    loaded_to = float(end)
    tail_firsts = [s[0] for s in tail if s[0] > EPOCH_MS]
    if tail_firsts:
        tail_from = max(float(min(tail_firsts) - LOG_AVG_MSEC), end)
        loaded_to = max(float(max(s[-1] for s in tail)), tail_from + tail_s * 1000, end)
    return FioWindow(started_ms=start - ramp_s * 1000, measured_from_ms=start, measured_to_ms=end,
                     loaded_to_ms=loaded_to, tail_from_ms=tail_from)


def _stamps(data: bytes) -> list[int]:
    out = []
    for line in data.decode("ascii", errors="replace").splitlines():
        try:
            out.append(int(line.split(",")[0]))
        except ValueError:
            continue
    return sorted(out)


def clock_offset(samples: Sequence[tuple[float, float, float]]) -> tuple[float, float]:
    """A guest clock's offset from the host's, in seconds, and its uncertainty: from readings
    (host before, guest, host after), the one with the smallest round trip; the guest read
    its clock somewhere in that round trip, so offset = guest - midpoint, +/- half of it."""
    if not samples:
        raise ValueError("no clock readings")
    for before, _guest, after in samples:
        if after < before:
            raise ValueError(f"a clock reading ends ({after}) before it starts ({before})")
    before, guest, after = min(samples, key=lambda s: s[2] - s[0])
    return guest - (before + after) / 2, (after - before) / 2


def _host(windows: Mapping[int, FioWindow], offsets_ms: Mapping[int, float]) -> dict[int, FioWindow]:
    missing = sorted(set(windows) - set(offsets_ms))
    if missing:
        raise ValueError(f"no clock offset for VM {', '.join(map(str, missing))}")
    return {vm: w.shifted(-offsets_ms[vm]) for vm, w in windows.items()}


def coverage(windows: Mapping[int, FioWindow], offsets_ms: Mapping[int, float]) -> dict[int, Coverage]:
    """For each VM, whether every other VM's load covered its measured window, in host time
    (a window's time minus its VM's offset, guest minus host; 0 for a host volume)."""
    host = _host(windows, offsets_ms)
    out = {}
    for i, wi in host.items():
        lo, hi = wi.measured_from_ms, wi.measured_to_ms
        worst: tuple[float, float, int] | None = None  # (short, -margin, vm)
        least: float | None = None
        for j, wj in host.items():
            if j == i:
                continue
            covered = sum(max(0.0, min(hi, b) - max(lo, a)) for a, b in wj.loaded())
            short = max(0.0, (hi - lo) - covered)
            margin = min(lo - wj.started_ms, wj.loaded_to_ms - hi)
            least = margin if least is None else min(least, margin)
            if worst is None or (short, -margin) > worst[:2]:
                worst = (short, -margin, j)
        short_ms = worst[0] if worst else 0.0
        out[i] = Coverage(loaded=short_ms == 0, short_ms=short_ms, short_of=worst[2] if worst else None, margin_ms=least)
    return out


def start_skew_ms(windows: Mapping[int, FioWindow], offsets_ms: Mapping[int, float]) -> float:
    """How far apart the VMs' measured windows began, in host time (0 with fewer than two)."""
    starts = [w.measured_from_ms for w in _host(windows, offsets_ms).values()]
    return max(starts) - min(starts) if starts else 0.0
