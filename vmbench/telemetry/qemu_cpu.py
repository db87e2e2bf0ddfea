"""What a VM's disk I/O costs the host CPU, per thread of its QEMU process (issue 17).

Two snapshots taken on the host before and after a fio run in the guest (:func:`snapshot_argv`,
one read-only command; :func:`parse_snapshot`) give every thread's CPU ticks and context
switches, the process total (exited threads included), the host's /proc/stat and the VM's
cgroup v2 ``cpu.stat`` (libvirt's ``.../emulator`` leaf is replaced by its parent, the machine
scope that holds the vCPUs too; Proxmox: ``qemu.slice/<vmid>.scope``).  Where the zfs module is
loaded, also each ZFS kernel thread (:mod:`vmbench.telemetry.zfs_threads`): their CPU is the
"zfs" part of the rest of the host (threads gone by the end are lost from it).

:func:`classify` knows QEMU's thread names (with ``-name ...,debug-threads=on``, which libvirt
and Proxmox pass): ``CPU <n>/<ACCEL>`` (system/cpus.c) and ``ALL CPUs/TCG`` (tcg-accel-ops-rr.c)
are vCPUs; ``IO <id>`` (iothread.c) iothreads, but QEMU's own ``IO mon_iothread``
(monitor/monitor.c, in every VM) is OTHER; ``worker`` (util/thread-pool.c, aio=threads) and the
process's io_uring workers (``iou-wrk-<tid>``, ``iou-sqp-<pid>``) are workers; tid == pid is the
main loop; the rest (``call_rcu``, unnamed as the process when created before naming,
``vnc_worker``, ``vhost-<pid>``, ...) is OTHER.  The kernel cuts names to 15 characters.

:func:`account`: per class user/system seconds, context switches, µs of CPU and switches per
I/O.  Threads gone by the second snapshot are lost from the per-thread sum: their time is the
class EXITED (process total - per-thread sum, in ticks), so the classes add up to the process
total exactly.  EXITED's user/system split can be a tick below 0 with no thread gone (the
kernel splits the process's and each thread's time separately); its total is what counts.
``accounted_share``: the per-thread sum's share of the total.  The rest of the host: its busy
CPU (user+nice+system+irq+softirq+steal) minus the process.  An :class:`IdleRate` (:func:`idle_rate`)
times the elapsed time is subtracted from every figure, never below 0, and stated.  Perf cycles
(:mod:`vmbench.telemetry.perf`) are optional, kept beside.  Unreadable output raises
:class:`SnapshotError` (a ValueError): the caller makes it a warning.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields, replace
from enum import Enum
from typing import Any, Mapping

from .perf import PerfCycles
from .zfs_threads import ZfsCpu, is_zfs_thread

#: the host cpu line's fields, in /proc/stat's order (guest time is already in user and nice)
HOST_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
HOST_BUSY = ("user", "nice", "system", "irq", "softirq", "steal")
#: QEMU's monitor iothread (monitor/monitor.c), in every VM with an out-of-band QMP monitor
MONITOR_IOTHREAD = "IO mon_iothread"
FORMAT = 1

#: One snapshot of process $1, lines "<key> <value>": "@qemu-cpu 1", pid, time (date +%s.%N),
#: clk_tck, host (/proc/stat's cpu line), proc (/proc/PID/stat); per thread "task TID", comm,
#: stat, "ctxt VOLUNTARY INVOLUNTARY"; cgroup (/proc/PID/cgroup lines); under cgroup v2
#: "cgroup_cpu DIR" and "cpustat KEY VALUE" lines; with the zfs module loaded, "zfs STAT" per
#: ZFS kernel thread (its /proc/PID/stat; kernel threads are processes); "." last.  Shell builtins read /proc (no
#: fork per thread: a millisecond or so).  Exit 3 when the process is gone.
SNAPSHOT_SCRIPT = r"""p=$1; d=/proc/$p
[ -r "$d/stat" ] || { echo "no process $p" >&2; exit 3; }
echo "@qemu-cpu 1"; echo "pid $p"; echo "clk_tck $(getconf CLK_TCK)"; echo "time $(date +%s.%N)"
IFS= read -r l < /proc/stat; echo "host $l"
{ IFS= read -r l < "$d/stat"; } 2>/dev/null || { echo "no process $p" >&2; exit 3; }
echo "proc $l"
for t in "$d"/task/*; do
  { IFS= read -r c < "$t/comm" && IFS= read -r s < "$t/stat"; } 2>/dev/null || continue
  v=; n=
  { while read -r k x; do case $k in voluntary_ctxt_switches:) v=$x;; nonvoluntary_ctxt_switches:) n=$x;; esac; done < "$t/status"; } 2>/dev/null
  [ -n "$v" ] && [ -n "$n" ] || continue
  echo "task ${t##*/}"; echo "comm $c"; echo "stat $s"; echo "ctxt $v $n"
done
cg=
{ while IFS= read -r l; do echo "cgroup $l"; case $l in 0::*) cg=${l#0::};; esac; done < "$d/cgroup"; } 2>/dev/null
case $cg in */emulator) cg=${cg%/emulator};; esac
if [ -n "$cg" ] && [ "$cg" != / ]; then
  for r in /sys/fs/cgroup /sys/fs/cgroup/unified; do
    [ -r "$r$cg/cpu.stat" ] || continue
    echo "cgroup_cpu $r$cg"
    { while read -r k x; do echo "cpustat $k $x"; done < "$r$cg/cpu.stat"; } 2>/dev/null
    break
  done
fi
if [ -d /sys/module/zfs ]; then
  for d in /proc/[0-9]*; do
    { IFS= read -r c < "$d/comm"; } 2>/dev/null || continue
    case $c in z_*|txg_*|zvol*|spa_*|arc_*|dbu_*|dbuf*|dp_*|l2arc*|zthr*) ;; *) continue;; esac
    { IFS= read -r s < "$d/stat"; } 2>/dev/null && echo "zfs $s"
  done
fi
echo .
"""


class SnapshotError(ValueError):
    """A snapshot (or perf's output) that cannot be read; telemetry turns it into a warning."""


class ThreadClass(Enum):
    """Where a QEMU process's CPU time is spent; EXITED is the time of threads gone by the end."""

    VCPU = "vcpu"
    IOTHREAD = "iothread"
    MAIN = "main"
    WORKER = "worker"
    OTHER = "other"
    EXITED = "exited"

    @classmethod
    def parse(cls, text: str) -> ThreadClass:
        if text not in (values := [c.value for c in cls]):
            raise ValueError(f"unknown thread class {text!r}: one of {', '.join(values)}")
        return cls(text)


_VCPU = re.compile(r"^(?:CPU \d+|ALL CPUs)/(\S+)$")
_IO_URING = re.compile(r"^iou-(?:wrk|sqp)-\d+$")


def classify(comm: str, main_comm: str | None, *, is_main: bool | None = None) -> ThreadClass:
    """The class of a thread named ``comm`` in a process named ``main_comm``.  ``is_main``: the
    thread is (True) or is not (False) the one whose tid is the pid; None: tell by the name
    only (a thread with the process's name is the main loop)."""
    if _VCPU.match(comm):
        return ThreadClass.VCPU
    if comm.startswith("IO ") and comm != MONITOR_IOTHREAD:
        return ThreadClass.IOTHREAD
    if comm == "worker" or _IO_URING.match(comm):
        return ThreadClass.WORKER
    if is_main or (is_main is None and main_comm is not None and comm == main_comm):
        return ThreadClass.MAIN
    return ThreadClass.OTHER


def accelerator(comm: str) -> str | None:
    """The accelerator a vCPU thread's name says ("KVM", "TCG", ...), None for other threads."""
    m = _VCPU.match(comm)
    return m.group(1) if m else None


@dataclass(frozen=True)
class ThreadSample:
    """One thread: its name, CPU clock ticks and context switches."""

    tid: int
    comm: str
    utime: int
    stime: int
    starttime: int  # with the tid, tells a reused tid from the same thread
    voluntary: int
    involuntary: int


@dataclass(frozen=True)
class CgroupCpu:
    """A cgroup v2 ``cpu.stat`` (the VM's scope) in seconds: in a snapshot, the counters; from
    :func:`account`, what was used between two snapshots, with ``idle_s`` to take off."""

    path: str
    usage_s: float
    user_s: float | None
    system_s: float | None
    idle_s: float = 0.0

    def to_json(self, ios: float) -> dict[str, Any]:
        net = self.usage_s - self.idle_s
        return {**asdict(self), "net_s": net, "us_per_io": _per_io(net * 1e6, ios)}


@dataclass(frozen=True)
class QemuSnapshot:
    """The QEMU process: CPU clock ticks of the whole process (exited threads included) and of
    each thread alive, the host's CPU, the VM's cgroup."""

    pid: int
    comm: str
    time_s: float  # epoch seconds (date +%s.%N)
    clk_tck: int
    host: tuple[int, ...]  # HOST_FIELDS, jiffies
    utime: int
    stime: int
    children: int  # waited-for children's cutime + cstime
    starttime: int
    threads: tuple[ThreadSample, ...]
    cgroups: tuple[str, ...] = ()  # /proc/<pid>/cgroup lines
    cgroup_cpu: CgroupCpu | None = None
    zfs: tuple[ThreadSample, ...] | None = None  # the host's ZFS kernel threads (None: there are none)

    @property
    def host_busy(self) -> int:
        return sum(self.host[HOST_FIELDS.index(k)] for k in HOST_BUSY)


def snapshot_argv(pid: int) -> list[str]:
    """The snapshot command for process ``pid``: :data:`SNAPSHOT_SCRIPT`, the pid its argument."""
    return ["sh", "-c", SNAPSHOT_SCRIPT, "sh", _pid(pid)]


def _pid(pid: int) -> str:
    if isinstance(pid, bool) or not isinstance(pid, int) or pid <= 0:
        raise ValueError(f"not a process id: {pid!r}")
    return str(pid)


def parse_stat(line: str) -> tuple[int, str, list[str]]:
    """A /proc/*/stat line: (pid, comm, the fields after comm, field 3 first).  The comm is in
    parentheses and may itself hold ") " or spaces: it ends at the LAST ')'."""
    open_, close = line.find(" ("), line.rfind(")")
    rest = line[close + 1:].split()
    if open_ < 0 or close < open_ or len(rest) < 20 or not line[:open_].isdigit():
        raise SnapshotError(f"not a /proc stat line: {line[:80]!r}")
    return int(line[:open_]), line[open_ + 2:close], rest


def _ints(rest: list[str], *idx: int) -> list[int]:
    try:
        return [int(rest[i]) for i in idx]
    except ValueError:
        raise SnapshotError(f"not a number in a /proc stat line: {' '.join(rest[:20])!r}") from None


# after the comm: rest[i] is field i + 3 of proc(5): utime 14, stime 15, cutime 16, cstime 17, starttime 22
_UTIME, _STIME, _CUTIME, _CSTIME, _START = 11, 12, 13, 14, 19


def parse_snapshot(text: str) -> QemuSnapshot:
    """One snapshot printed by :data:`SNAPSHOT_SCRIPT` (SnapshotError if it is not complete)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "@qemu-cpu 1":
        raise SnapshotError("not a QEMU CPU snapshot (no '@qemu-cpu 1' line)")
    if lines[-1].strip() != ".":
        raise SnapshotError("QEMU CPU snapshot cut short (no final '.')")
    values: dict[str, str] = {}
    threads: list[ThreadSample] = []
    cgroups: list[str] = []
    cpustat: dict[str, int] = {}
    task: dict[str, str] = {}
    zfs: list[ThreadSample] = []

    def end_task() -> None:
        if {"task", "comm", "stat", "ctxt"} <= task.keys():
            _, stat_comm, rest = parse_stat(task["stat"])
            u, s, start = _ints(rest, _UTIME, _STIME, _START)
            v, n = (task["ctxt"].split() + ["", ""])[:2]
            if not (task["task"].isdigit() and v.isdigit() and n.isdigit()):
                raise SnapshotError(f"bad thread {task['task']!r} in a QEMU CPU snapshot")
            threads.append(ThreadSample(int(task["task"]), task["comm"] or stat_comm, u, s, start, int(v), int(n)))
        task.clear()

    for line in lines[1:-1]:
        key, _, value = line.partition(" ")
        if key == "task":
            end_task()
            task["task"] = value
        elif key in ("comm", "stat", "ctxt"):
            task[key] = value
        elif key == "cgroup":
            cgroups.append(value)
        elif key == "cpustat":
            k, _, v = value.partition(" ")
            if v.strip().isdigit():
                cpustat[k] = int(v)
        elif key == "zfs":
            zt = _zfs_thread(value)
            if zt is not None:
                zfs.append(zt)
        else:
            values[key] = value
    end_task()
    for need in ("pid", "time", "clk_tck", "host", "proc"):
        if need not in values:
            raise SnapshotError(f"QEMU CPU snapshot without its {need!r} line")
    pid, comm, rest = parse_stat(values["proc"])
    host = values["host"].split()
    try:
        if host[0] != "cpu":
            raise ValueError
        jiffies = tuple(int(v) for v in host[1:len(HOST_FIELDS) + 1])
        jiffies += (0,) * (len(HOST_FIELDS) - len(jiffies))
        time_s, clk_tck = float(values["time"]), int(values["clk_tck"])
        if int(values["pid"]) != pid or clk_tck <= 0:
            raise ValueError
    except (ValueError, IndexError):
        raise SnapshotError("QEMU CPU snapshot with a bad pid, time, clk_tck or host line") from None
    cg = None
    if "usage_usec" in cpustat and "cgroup_cpu" in values:
        user, system = cpustat.get("user_usec"), cpustat.get("system_usec")
        cg = CgroupCpu(values["cgroup_cpu"], cpustat["usage_usec"] / 1e6, None if user is None else user / 1e6,
                       None if system is None else system / 1e6)
    u, s, cu, cs, start = _ints(rest, _UTIME, _STIME, _CUTIME, _CSTIME, _START)
    return QemuSnapshot(pid, comm, time_s, clk_tck, jiffies, u, s, cu + cs, start, tuple(threads), tuple(cgroups), cg,
                        tuple(zfs) or None)


def _zfs_thread(line: str) -> ThreadSample | None:
    """A ZFS kernel thread from its /proc stat line (None: not a kernel thread of ZFS's names)."""
    pid, comm, rest = parse_stat(line)
    flags, u, s, start = _ints(rest, 6, _UTIME, _STIME, _START)
    return ThreadSample(pid, comm, u, s, start, 0, 0) if is_zfs_thread(comm, flags) else None


@dataclass(frozen=True)
class ThreadCost:
    """One thread between two snapshots (``new``: not in the first one, counted from 0)."""

    tid: int
    comm: str
    cls: ThreadClass
    user_s: float
    system_s: float
    voluntary: int
    involuntary: int
    new: bool = False

    def to_json(self) -> dict[str, Any]:
        return {**{k: v for k, v in asdict(self).items() if k != "cls"}, "class": self.cls.value}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ThreadCost:
        return cls(**{**{k: v for k, v in d.items() if k != "class"}, "cls": ThreadClass.parse(d["class"])})


@dataclass(frozen=True)
class ClassRate:
    """An idle VM's cost in one class, per second of wall time."""

    user_per_s: float = 0.0
    system_per_s: float = 0.0
    voluntary_per_s: float = 0.0
    involuntary_per_s: float = 0.0


@dataclass(frozen=True)
class IdleRate:
    """What the idle VM costs per second (:func:`idle_rate`), subtracted by :func:`account`."""

    elapsed_s: float
    classes: Mapping[ThreadClass, ClassRate]
    host_rest_per_s: float
    cgroup_per_s: float | None = None
    zfs_per_s: float | None = None  # the host's ZFS kernel threads

    def to_json(self) -> dict[str, Any]:
        return {"elapsed_s": self.elapsed_s, "host_rest_per_s": self.host_rest_per_s, "cgroup_per_s": self.cgroup_per_s,
                "zfs_per_s": self.zfs_per_s, "classes": {c.value: asdict(r) for c, r in self.classes.items()}}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> IdleRate:
        return cls(float(d["elapsed_s"]), {ThreadClass.parse(k): ClassRate(**v) for k, v in d["classes"].items()},
                   float(d["host_rest_per_s"]), d.get("cgroup_per_s"), d.get("zfs_per_s"))


@dataclass(frozen=True)
class ClassCost:
    """One class between the snapshots: raw seconds and switches, and the idle rate's share taken
    off (``idle_*``: what was actually subtracted, capped so nothing goes below 0).  The switches
    are None for EXITED: a gone thread's switches are not kept anywhere."""

    threads: int  # alive at the end; for EXITED: the threads gone
    user_s: float
    system_s: float
    voluntary: int | None
    involuntary: int | None
    idle_user_s: float = 0.0
    idle_system_s: float = 0.0
    idle_voluntary: float = 0.0
    idle_involuntary: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s

    @property
    def net_cpu_s(self) -> float:
        return self.cpu_s - self.idle_user_s - self.idle_system_s

    @property
    def net_switches(self) -> float | None:
        v, n = self.voluntary, self.involuntary
        return None if v is None or n is None else v + n - self.idle_voluntary - self.idle_involuntary

    def to_json(self, ios: float) -> dict[str, Any]:
        sw = self.net_switches
        return {**asdict(self), "cpu_s": self.cpu_s, "net_cpu_s": self.net_cpu_s,
                "us_per_io": _per_io(self.net_cpu_s * 1e6, ios), "switches_per_io": None if sw is None else _per_io(sw, ios)}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ClassCost:
        return cls(**{f.name: d[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class CpuPerIo:
    """The QEMU process's CPU between two snapshots, split by class, per I/O (:func:`account`).
    Raw figures add up: the classes' ``cpu_s`` sum to ``process_s``; the ``net`` ones have the
    idle rate taken off, and the per-I/O figures use them."""

    pid: int
    ios: float
    elapsed_s: float
    clk_tck: int
    accel: str | None  # from the vCPU threads' names ("KVM", "TCG"); None: unnamed (no debug-threads)
    classes: Mapping[ThreadClass, ClassCost]
    threads: tuple[ThreadCost, ...]
    process_user_s: float
    process_system_s: float
    children_s: float  # QEMU's waited-for children (cutime + cstime), not in the process total
    host_busy_s: float
    idle_host_rest_s: float = 0.0
    cgroup: CgroupCpu | None = None
    guest_busy_s: float | None = None
    idle: IdleRate | None = None
    zfs: ZfsCpu | None = None  # the host's ZFS kernel threads (None: none on the host)
    perf: PerfCycles | None = None  # perf's cycles of the process, counted beside (None: not tried)

    @property
    def process_s(self) -> float:
        return self.process_user_s + self.process_system_s

    @property
    def threads_sum_s(self) -> float:
        """The raw sum of the per-thread deltas (threads alive at the end)."""
        return sum(t.user_s + t.system_s for t in self.threads)

    @property
    def accounted_share(self) -> float | None:
        """The per-thread sum's share of the process total (None when the process used none)."""
        return self.threads_sum_s / self.process_s if self.process_s > 0 else None

    @property
    def host_rest_s(self) -> float:
        """The host's busy CPU that is not this QEMU process (raw; may dip below 0 by a tick)."""
        return self.host_busy_s - self.process_s

    def to_json(self) -> dict[str, Any]:
        idle_p = sum(c.idle_user_s + c.idle_system_s for c in self.classes.values())
        ios, net_p, net_rest = self.ios, self.process_s - idle_p, self.host_rest_s - self.idle_host_rest_s
        return {
            "kind": "qemu-cpu", "format": FORMAT, "pid": self.pid, "accel": self.accel, "named": self.accel is not None,
            "ios": ios, "elapsed_s": self.elapsed_s, "clk_tck": self.clk_tck,
            "process": {"user_s": self.process_user_s, "system_s": self.process_system_s, "cpu_s": self.process_s,
                        "children_s": self.children_s, "idle_s": idle_p, "net_cpu_s": net_p,
                        "us_per_io": _per_io(net_p * 1e6, ios)},
            "classes": {c.value: self.classes[c].to_json(ios) for c in ThreadClass},
            "threads_sum_s": self.threads_sum_s, "accounted_share": self.accounted_share,
            "host": {"busy_s": self.host_busy_s, "rest_s": self.host_rest_s, "idle_rest_s": self.idle_host_rest_s,
                     "net_rest_s": net_rest, "rest_us_per_io": _per_io(net_rest * 1e6, ios),
                     "zfs": None if self.zfs is None else self.zfs.to_json(ios)},
            "cgroup": None if self.cgroup is None else self.cgroup.to_json(ios),
            "perf": None if self.perf is None else self.perf.to_json(ios),
            "guest": None if self.guest_busy_s is None else
            {"busy_s": self.guest_busy_s, "us_per_io": _per_io(self.guest_busy_s * 1e6, ios)},
            "idle": None if self.idle is None else self.idle.to_json(),
            "threads": [t.to_json() for t in self.threads],
        }

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> CpuPerIo:
        """A stored row (:meth:`to_json`) back; derived figures are recomputed, not read."""
        if d.get("kind") != "qemu-cpu" or d.get("format") != FORMAT:
            raise ValueError(f"not a qemu-cpu row of format {FORMAT}: kind {d.get('kind')!r}, format {d.get('format')!r}")
        p, h, cg, g = d["process"], d["host"], d.get("cgroup"), d.get("guest")
        return cls(
            pid=d["pid"], ios=d["ios"], elapsed_s=d["elapsed_s"], clk_tck=d["clk_tck"], accel=d.get("accel"),
            classes={ThreadClass.parse(k): ClassCost.from_json(v) for k, v in d["classes"].items()},
            threads=tuple(ThreadCost.from_json(t) for t in d["threads"]),
            process_user_s=p["user_s"], process_system_s=p["system_s"], children_s=p["children_s"],
            host_busy_s=h["busy_s"], idle_host_rest_s=h["idle_rest_s"],
            cgroup=None if cg is None else CgroupCpu(**{f.name: cg[f.name] for f in fields(CgroupCpu)}),
            guest_busy_s=None if g is None else g["busy_s"],
            idle=None if d.get("idle") is None else IdleRate.from_json(d["idle"]),
            zfs=None if h.get("zfs") is None else ZfsCpu.from_json(h["zfs"]),
            perf=None if d.get("perf") is None else PerfCycles.from_json(d["perf"]))


def _per_io(amount: float, ios: float) -> float | None:
    return amount / ios if ios > 0 else None


def _cap(amount: float, available: float) -> float:
    """What can be subtracted: ``amount``, but never more than is there, never below 0."""
    return max(0.0, min(amount, available))


def _deltas(before: tuple[ThreadSample, ...], after: tuple[ThreadSample, ...]) -> list[tuple[ThreadSample, tuple[int, ...], bool]]:
    """Per thread alive at the end: (sample, (utime, stime, voluntary, involuntary) deltas, new).
    A tid in both snapshots whose start time differs or whose counters went back is a new thread
    (a reused tid), counted from 0."""
    old = {t.tid: t for t in before}
    out = []
    for t in after:
        now = (t.utime, t.stime, t.voluntary, t.involuntary)
        b = old.get(t.tid)
        was = (b.utime, b.stime, b.voluntary, b.involuntary) if b is not None else (0, 0, 0, 0)
        new = b is None or b.starttime != t.starttime or any(x < y for x, y in zip(now, was))
        out.append((t, now if new else tuple(x - y for x, y in zip(now, was)), new))
    return out


def _thread_ticks(before: QemuSnapshot, after: QemuSnapshot) -> list[tuple[ThreadSample, ThreadClass, tuple[int, ...], bool]]:
    """:func:`_deltas` of the QEMU process's threads, each with its class."""
    return [(t, classify(t.comm, after.comm, is_main=t.tid == after.pid), d, new)
            for t, d, new in _deltas(before.threads, after.threads)]


def _zfs(before: QemuSnapshot, after: QemuSnapshot, tck: int, idle_s: float) -> ZfsCpu | None:
    """The ZFS kernel threads' CPU between the snapshots (None unless both have them)."""
    if before.zfs is None or after.zfs is None:
        return None
    rows = _deltas(before.zfs, after.zfs)
    cpu = sum(d[0] + d[1] for _, d, _ in rows) / tck
    return ZfsCpu(len(rows), sum(new for *_, new in rows), len({t.tid for t in before.zfs} - {t.tid for t in after.zfs}),
                  sum(d[0] for _, d, _ in rows) / tck, sum(d[1] for _, d, _ in rows) / tck, _cap(idle_s, cpu))


def account(before: QemuSnapshot, after: QemuSnapshot, *, ios: float, idle: IdleRate | None = None,
            guest_busy_s: float | None = None) -> CpuPerIo:
    """The QEMU process's CPU between two snapshots, split by class, per I/O (``ios``: the I/Os
    fio completed in between; ``guest_busy_s``: the guest's own busy CPU seconds, kept beside).
    With ``idle``, its rate times the elapsed time is taken off every class, the rest of the host
    and the cgroup, never below 0 (SnapshotError: snapshots of two processes, or out of order)."""
    if before.pid != after.pid or before.starttime != after.starttime:
        raise SnapshotError(f"snapshots of different processes: pid {before.pid} and {after.pid}")
    elapsed = after.time_s - before.time_s
    if before.clk_tck != after.clk_tck or elapsed <= 0:
        raise SnapshotError(f"snapshots out of order ({elapsed:.3f} s apart) or with different CLK_TCK")
    tck = after.clk_tck
    rows = _thread_ticks(before, after)
    pu, ps = after.utime - before.utime, after.stime - before.stime
    rates = idle.classes if idle is not None else {}
    classes: dict[ThreadClass, ClassCost] = {}
    for c in ThreadClass:
        mine = [d for _, k, d, _ in rows if k is c]
        u, s, v, n = (sum(d[i] for d in mine) for i in range(4))
        if c is ThreadClass.EXITED:
            gone = len({t.tid for t in before.threads} - {t.tid for t, *_ in rows})
            cost = ClassCost(gone, (pu - sum(d[0] for *_, d, _ in rows)) / tck,
                             (ps - sum(d[1] for *_, d, _ in rows)) / tck, None, None)
        else:
            cost = ClassCost(len(mine), u / tck, s / tck, v, n)
        r = rates.get(c)
        if r is not None:
            iu = _cap(r.user_per_s * elapsed, min(cost.user_s, cost.cpu_s))  # so the total stays >= 0 too
            cost = replace(cost, idle_user_s=iu, idle_system_s=_cap(r.system_per_s * elapsed, min(cost.system_s, cost.cpu_s - iu)),
                           idle_voluntary=_cap(r.voluntary_per_s * elapsed, cost.voluntary or 0),
                           idle_involuntary=_cap(r.involuntary_per_s * elapsed, cost.involuntary or 0))
        classes[c] = cost
    host_busy = (after.host_busy - before.host_busy) / tck
    rest = host_busy - (pu + ps) / tck
    cgroup = None
    a, b = after.cgroup_cpu, before.cgroup_cpu
    if a is not None and b is not None and a.path == b.path:
        usage = a.usage_s - b.usage_s
        cgroup = CgroupCpu(
            a.path, usage, None if a.user_s is None or b.user_s is None else a.user_s - b.user_s,
            None if a.system_s is None or b.system_s is None else a.system_s - b.system_s,
            _cap(idle.cgroup_per_s * elapsed, usage) if idle is not None and idle.cgroup_per_s is not None else 0.0)
    return CpuPerIo(
        pid=after.pid, ios=float(ios), elapsed_s=elapsed, clk_tck=tck,
        accel=next((x for t, *_ in rows if (x := accelerator(t.comm))), None), classes=classes,
        threads=tuple(ThreadCost(t.tid, t.comm, k, d[0] / tck, d[1] / tck, d[2], d[3], new) for t, k, d, new in rows),
        process_user_s=pu / tck, process_system_s=ps / tck,
        children_s=(after.children - before.children) / tck,
        host_busy_s=host_busy, idle_host_rest_s=_cap(idle.host_rest_per_s * elapsed, rest) if idle is not None else 0.0,
        cgroup=cgroup, guest_busy_s=guest_busy_s, idle=idle,
        zfs=_zfs(before, after, tck, (idle.zfs_per_s or 0.0) * elapsed if idle is not None else 0.0))


def idle_rate(before: QemuSnapshot, after: QemuSnapshot) -> IdleRate:
    """What the idle VM costs per second of wall time, per class (two snapshots, no I/O between)."""
    got = account(before, after, ios=0)
    e = got.elapsed_s
    return IdleRate(e, {c: ClassRate(k.user_s / e, k.system_s / e, (k.voluntary or 0) / e, (k.involuntary or 0) / e)
                        for c, k in got.classes.items()},
                    got.host_rest_s / e, None if got.cgroup is None else got.cgroup.usage_s / e,
                    None if got.zfs is None else got.zfs.cpu_s / e)
