"""What a guest's fio run cost the host's CPU, per thread of the VM's QEMU process (issue 17):
snapshots of the QEMU process's threads on the host (:mod:`vmbench.telemetry.qemu_cpu`)
before and after the run, the idle VM's own cost measured once per boot and subtracted, and
the guest's busy CPU beside it.  Stored as a "qemu-cpu" telemetry row of the measurement.
Never fails a run: a snapshot that cannot be taken is a warning and no row.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from ..errors import VmbenchError
from ..telemetry import qemu_cpu
from ..telemetry.qemu_cpu import IdleRate, QemuSnapshot
from ..transport.base import Transport

log = logging.getLogger(__name__)
#: how long the idle VM is watched before its first job (per boot)
IDLE_SECONDS = 3.0
GUEST_HZ = 100  # USER_HZ: the unit of the guest's /proc/stat


@dataclass(frozen=True)
class Start:
    snapshot: QemuSnapshot
    guest_busy: float | None  # the guest's busy CPU seconds so far


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
        self.sleep(seconds)
        b = self._snapshot()
        if b is None:
            return None
        try:
            self.idle = qemu_cpu.idle_rate(a, b)
        except (ValueError, ZeroDivisionError) as exc:
            log.warning("CPU per I/O: idle measurement unusable: %s", exc)
        return self.idle

    def begin(self) -> Start | None:
        snap = self._snapshot()
        return None if snap is None else Start(snap, self._guest_busy())

    def end(self, start: Start | None, *, ios: float) -> dict | None:
        """The run's cost as stored (``CpuPerIo.to_json()``), or None when it was not sampled."""
        if start is None:
            return None
        after = self._snapshot()
        if after is None:
            return None
        busy = self._guest_busy()
        guest = None if busy is None or start.guest_busy is None else max(0.0, busy - start.guest_busy)
        try:
            return qemu_cpu.account(start.snapshot, after, ios=ios, idle=self.idle, guest_busy_s=guest).to_json()
        except ValueError as exc:
            log.warning("CPU per I/O: snapshots of QEMU process %s unusable: %s", self.pid, exc)
            return None
