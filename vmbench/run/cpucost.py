"""What a guest's fio run cost the host's CPU, per thread of the VM's QEMU process (issue 17):
snapshots of the QEMU process's threads on the host (:mod:`vmbench.telemetry.qemu_cpu`)
before and after the run, the idle VM's own cost measured once per boot and subtracted, and
the guest's busy CPU beside it.  Stored as a "qemu-cpu" telemetry row of the measurement.
Where perf is installed and allowed (probed once per boot, :mod:`vmbench.telemetry.perf`), its
cycles of the QEMU process are counted in a thread beside each run for the job's ramp +
runtime, the idle VM's rate (counted while it is measured) taken off; otherwise the row says
why not.  Never fails a run: a snapshot that cannot be taken is a warning and no row.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Callable

from ..errors import VmbenchError
from ..telemetry import perf, qemu_cpu
from ..telemetry.perf import PerfCycles, PerfRun
from ..telemetry.qemu_cpu import IdleRate, QemuSnapshot
from ..transport.base import Transport

log = logging.getLogger(__name__)
#: how long the idle VM is watched before its first job (per boot).  2 s (was 3): an idle test
#: guest watched for 60 s (TCG, 2 vCPUs) had a cgroup CPU rate of 0.0044 CPU-s/s with a spread
#: (sd) of 0.0025 between 1 s windows, 0.0022 between 2 s, 0.0021 between 3 s and 6 s ones: the
#: guest's own bursts, not the window, make its spread (bench/README.md)
IDLE_SECONDS = 2.0
GUEST_HZ = 100  # USER_HZ: the unit of the guest's /proc/stat


@dataclass(frozen=True)
class Start:
    snapshot: QemuSnapshot
    guest_busy: float | None  # the guest's busy CPU seconds so far
    perf: PerfRun | None = None  # perf counting the QEMU process beside the run
    perf_why: str | None = None  # why perf is not counting


def guest_busy_seconds(text: str) -> float | None:
    """Busy CPU seconds (user, nice, system, irq, softirq, steal) from a /proc/stat's cpu line."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == "cpu":
            try:
                v = [int(x) for x in parts[1:9]]
            except ValueError:
                return None
            if len(v) < 8:
                return None
            return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / GUEST_HZ
    return None


class CpuCost:
    """Samples one VM's QEMU process (``pid``) on ``host`` around its guest's fio runs."""

    def __init__(self, host: Transport, pid: int, guest: Transport, *, sleep: Callable[[float], None] = time.sleep) -> None:
        self.host = host
        self.pid = pid
        self.guest = guest
        self.sleep = sleep
        self.idle: IdleRate | None = None
        self.idle_done = False
        #: why perf does not count this VM's QEMU process (None: it does, or not probed yet)
        self.perf_why: str | None = None
        self.perf_probed = False
        self.idle_cycles_per_s: float | None = None

    def probe_perf(self) -> str | None:
        """Whether perf may count the QEMU process (once; None: it may): installed, allowed."""
        if not self.perf_probed:
            self.perf_probed = True
            try:
                out = self.host.run(perf.perf_probe_argv(self.pid), timeout=60, check=False).stdout
                access = perf.perf_access(out)
                self.perf_why = None if access.available else access.why
            except (VmbenchError, OSError) as exc:
                self.perf_why = f"perf: cannot probe {self.host.name}: {str(exc).splitlines()[0] if str(exc) else exc!r}"
            if self.perf_why:
                log.info("CPU per I/O: no cycles of QEMU process %s: %s", self.pid, self.perf_why)
        return self.perf_why

    def _perf_run(self, seconds: float | None) -> tuple[PerfRun | None, str | None]:
        if self.probe_perf() is not None:
            return None, self.perf_why
        if seconds is None or seconds <= 0:
            return None, "perf: the job's duration is not known"
        try:
            return PerfRun(self.host, self.pid, seconds), None
        except (ValueError, RuntimeError) as exc:
            return None, f"perf: not started: {exc}"

    def _snapshot(self) -> QemuSnapshot | None:
        try:
            out = self.host.run(qemu_cpu.snapshot_argv(self.pid), timeout=60).stdout
            return qemu_cpu.parse_snapshot(out)
        except (VmbenchError, OSError, qemu_cpu.SnapshotError) as exc:
            log.warning("CPU per I/O: cannot sample QEMU process %s on %s: %s", self.pid, self.host.name, exc)
            return None

    def _guest_busy(self) -> float | None:
        try:
            return guest_busy_seconds(self.guest.read_file("/proc/stat").decode(errors="replace"))
        except (VmbenchError, OSError) as exc:
            log.warning("CPU per I/O: cannot read the guest's /proc/stat: %s", exc)
            return None

    def measure_idle(self, seconds: float = IDLE_SECONDS) -> IdleRate | None:
        """The idle VM's cost per second (once per boot, before its first job)."""
        if self.idle_done:
            return self.idle
        self.idle_done = True
        a = self._snapshot()
        if a is None:
            return None
        counting, _ = self._perf_run(seconds)  # perf's first count: does it count, what does the idle VM cost
        self.sleep(seconds)
        b = self._snapshot()
        if counting is not None:
            got = counting.result()
            if got.cycles is None:  # <not supported>, not allowed...: the same for every run of this boot
                self.perf_why = got.why
            else:
                self.idle_cycles_per_s = got.cycles / seconds
        if b is None:
            return None
        try:
            self.idle = qemu_cpu.idle_rate(a, b)
        except (ValueError, ZeroDivisionError) as exc:
            log.warning("CPU per I/O: idle measurement unusable: %s", exc)
        return self.idle

    def begin(self, seconds: float | None = None) -> Start | None:
        """Before a run: a snapshot, the guest's CPU, and perf started for ``seconds`` (the
        job's ramp + runtime, the window its I/Os are counted over)."""
        snap = self._snapshot()
        if snap is None:
            return None
        busy = self._guest_busy()
        counting, why = self._perf_run(seconds)
        return Start(snap, busy, counting, why)

    def end(self, start: Start | None, *, ios: float) -> dict | None:
        """The run's cost as stored (``CpuPerIo.to_json()``), or None when it was not sampled."""
        if start is None:
            return None
        after = self._snapshot()
        if after is None:
            return None
        busy = self._guest_busy()
        guest = None if busy is None or start.guest_busy is None else max(0.0, busy - start.guest_busy)
        cycles = (start.perf.result(idle_per_s=self.idle_cycles_per_s) if start.perf is not None
                  else PerfCycles.missing(start.perf_why or "perf: not started"))
        try:
            cost = qemu_cpu.account(start.snapshot, after, ios=ios, idle=self.idle, guest_busy_s=guest)
            return replace(cost, perf=cycles).to_json()
        except ValueError as exc:
            log.warning("CPU per I/O: snapshots of QEMU process %s unusable: %s", self.pid, exc)
            return None
