"""CPU cycles of a VM's QEMU process while fio runs in its guest (issue 17): ``perf stat -e
cycles -p PID`` through the host transport, optional and never required.

Once per boot (:class:`~vmbench.run.cpucost.CpuCost`): :data:`PERF_PROBE_SCRIPT` tells
whether perf is installed and allowed (:func:`perf_access`), and a first count while the idle
VM is measured tells whether the host counts cycles at all (a virtual machine without a
virtual PMU prints ``<not supported>``) and what the idle VM costs in cycles a second.  Then,
for each run, :class:`PerfRun` counts in a thread, beside fio, for the job's ramp + runtime
(the window the run's I/Os are counted over), and :class:`PerfCycles` is stored in the run's
qemu-cpu row: the cycles, the idle rate times the window taken off (never below 0), cycles
per I/O, or why there are none.  ``perf stat -p`` counts the threads the process has when it
starts (one started later, e.g. a new thread-pool worker, is not counted).  Every "why"
starts with "perf: ".  Pure functions build the argv and read perf's output.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from ..errors import VmbenchError
from ..transport.base import Transport

log = logging.getLogger(__name__)

#: Prints "perf PATH" (or "perf -"), "paranoid N" (/proc/sys/kernel/perf_event_paranoid, or -),
#: "uid N" (ours) and "qemu_uid N" (the owner of /proc/$1, or -).
PERF_PROBE_SCRIPT = r"""p=$1
echo "perf $(command -v perf || echo -)"
v=-; { read -r v < /proc/sys/kernel/perf_event_paranoid; } 2>/dev/null; echo "paranoid $v"
echo "uid $(id -u)"
echo "qemu_uid $(stat -c %u "/proc/$p" 2>/dev/null || echo -)"
"""
#: how much longer than its window a perf run may take before it is given up
GRACE_S = 30.0


@dataclass(frozen=True)
class PerfAccess:
    available: bool
    why: str  # what allows it, or why not ("perf: ...")


def _pid(pid: int) -> str:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise ValueError(f"not a process id: {pid!r}")
    return str(pid)


def perf_probe_argv(pid: int) -> list[str]:
    """The command that tells whether perf may count process ``pid`` (:func:`perf_access`)."""
    return ["sh", "-c", PERF_PROBE_SCRIPT, "sh", _pid(pid)]


def perf_access(probe: str) -> PerfAccess:
    """Whether ``perf stat -p`` may count the QEMU process (:data:`PERF_PROBE_SCRIPT`'s output).
    kernel.perf_event_paranoid: -1 anything, 0 no raw tracepoints, 1 no CPU-wide events, 2 no
    kernel-side counting, 3 (Debian's patch) no perf at all, each for users without
    CAP_PERFMON/CAP_SYS_ADMIN; root is not restricted.  A user counts only its own processes."""
    v = dict((line.split(" ", 1) + [""])[:2] for line in probe.splitlines() if line.strip())
    if v.get("perf", "-") in ("-", ""):
        return PerfAccess(False, "perf: not installed (Debian: linux-perf)")
    if v.get("uid") == "0":
        return PerfAccess(True, "perf runs as root")
    try:
        paranoid = int(v.get("paranoid", ""))
    except ValueError:
        return PerfAccess(False, "perf: no /proc/sys/kernel/perf_event_paranoid (no perf events)")
    if paranoid >= 3:
        return PerfAccess(False, f"perf: perf_event_paranoid={paranoid} forbids perf to non-root")
    if v.get("qemu_uid") != v.get("uid"):
        return PerfAccess(False, f"perf: QEMU runs as uid {v.get('qemu_uid')}, perf as uid {v.get('uid')}")
    if paranoid == 2:
        return PerfAccess(True, "perf_event_paranoid=2: user-space cycles only (cycles:u)")
    return PerfAccess(True, f"perf_event_paranoid={paranoid}")


def perf_stat_argv(pid: int, seconds: float) -> list[str]:
    """``perf stat -e cycles -x, --log-fd 1 -p PID -- sleep N``: its CSV on stdout."""
    if not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"perf stat needs a positive number of seconds, not {seconds!r}")
    return ["perf", "stat", "-e", "cycles", "-x", ",", "--log-fd", "1", "-p", _pid(pid), "--", "sleep", f"{seconds:g}"]


def _cycles_line(text: str) -> list[str] | None:
    for line in text.splitlines():
        parts = line.split(",")
        if len(parts) >= 3 and re.fullmatch(r"cycles(:[ukh]+)?", parts[2].strip()):
            return parts
    return None


def parse_perf_stat(text: str) -> int | None:
    """The cycles ``perf stat -x,`` counted, None when it counted none (see :func:`perf_stat_why`)."""
    parts = _cycles_line(text)
    return int(parts[0]) if parts is not None and parts[0].strip().isdigit() else None


def perf_event(text: str) -> str | None:
    """The event perf counted ("cycles", or "cycles:u" where only user space is allowed)."""
    parts = _cycles_line(text)
    return parts[2].strip() if parts is not None else None


def perf_stat_why(text: str) -> str | None:
    """Why :func:`parse_perf_stat` found no cycles in ``text`` (None when it did)."""
    parts = _cycles_line(text)
    if parts is None:
        last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "no output")
        return f"perf: printed no cycles ({last[:120]})"
    value = parts[0].strip()
    if value == "<not supported>":
        return "perf: cycles <not supported> (no hardware counters: a virtual machine without a virtual PMU)"
    return None if value.isdigit() else f"perf: cycles {value or 'empty'}"


@dataclass(frozen=True)
class PerfCycles:
    """perf's count for one run (``cycles``, over ``seconds``), the idle VM's share of it taken
    off (``idle_cycles``, capped at the count), or why there is none (``why``)."""

    cycles: int | None
    seconds: float | None = None
    idle_cycles: float = 0.0
    event: str | None = None
    why: str | None = None

    @property
    def net_cycles(self) -> float | None:
        return None if self.cycles is None else self.cycles - self.idle_cycles

    def to_json(self, ios: float) -> dict[str, Any]:
        net = self.net_cycles
        return {"cycles": self.cycles, "seconds": self.seconds, "idle_cycles": self.idle_cycles, "event": self.event,
                "net_cycles": net, "cycles_per_io": None if net is None or ios <= 0 else net / ios, "why": self.why}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> PerfCycles:
        return cls(d.get("cycles"), d.get("seconds"), d.get("idle_cycles") or 0.0, d.get("event"), d.get("why"))

    @classmethod
    def missing(cls, why: str) -> PerfCycles:
        return cls(None, why=why)


def perf_result(text: str, seconds: float, *, idle_per_s: float | None = None) -> PerfCycles:
    """What ``perf stat`` printed (stdout and stderr) as a :class:`PerfCycles` of a
    ``seconds`` window, ``idle_per_s`` cycles a second taken off."""
    cycles = parse_perf_stat(text)
    if cycles is None:
        return PerfCycles(None, seconds, event=perf_event(text), why=perf_stat_why(text))
    idle = max(0.0, min(float(cycles), (idle_per_s or 0.0) * seconds))
    return PerfCycles(cycles, seconds, idle, perf_event(text))


class PerfRun:
    """``perf stat`` of process ``pid`` for ``seconds`` on ``host``, in a thread: started by the
    constructor, read by :meth:`result`.  Any error is a :class:`PerfCycles` with its why."""

    def __init__(self, host: Transport, pid: int, seconds: float) -> None:
        self.host = host
        self.seconds = seconds
        self.argv = perf_stat_argv(pid, seconds)
        self._text: str | None = None
        self._why: str | None = None
        self._thread = threading.Thread(target=self._count, name=f"perf-{pid}", daemon=True)
        self._thread.start()

    def _count(self) -> None:
        try:
            done = self.host.run(self.argv, timeout=self.seconds + GRACE_S, check=False)
            self._text = done.stdout + "\n" + done.stderr
        except (VmbenchError, OSError) as exc:
            self._why = f"perf: failed on {self.host.name}: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        except Exception as exc:  # a telemetry thread never takes the run down
            log.debug("perf stat failed", exc_info=True)
            self._why = f"perf: failed: {type(exc).__name__}: {exc}"

    def result(self, *, idle_per_s: float | None = None) -> PerfCycles:
        """Wait for perf (at most its window and :data:`GRACE_S`) and read its count."""
        self._thread.join(self.seconds + GRACE_S + 5)
        if self._thread.is_alive():
            return PerfCycles(None, self.seconds, why=f"perf: no answer within {self.seconds + GRACE_S:g} s")
        if self._text is None:
            return PerfCycles(None, self.seconds, why=self._why or "perf: no output")
        return perf_result(self._text, self.seconds, idle_per_s=idle_per_s)
