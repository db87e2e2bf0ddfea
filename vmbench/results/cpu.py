"""A measurement's stored qemu-cpu row (:meth:`vmbench.telemetry.qemu_cpu.CpuPerIo.to_json`,
a ``telemetry`` row of source "qemu-cpu") as a record: the figures the CPU-per-I/O report
reads, each None where the row does not have it or has something else than a number (a row
stored by an older release).  The report (:mod:`vmbench.report.cpurows`) reads attributes;
the stored keys are named here only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

#: the ``kind`` of a qemu-cpu row
QEMU_CPU_KIND = "qemu-cpu"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _part(d: Mapping[str, Any], *path: str) -> Mapping[str, Any]:
    """The nested mapping at ``path`` ({} where a part is missing or null)."""
    for key in path:
        got = d.get(key)
        d = got if isinstance(got, Mapping) else {}
    return d


def _switches(classes: Mapping[str, Any], ios: float) -> float | None:
    """Context switches per I/O, voluntary and involuntary, every class (the exited threads'
    are not kept anywhere), the idle VM's taken off."""
    if ios <= 0:
        return None
    total = 0.0
    for c in classes.values():
        v, n = _num(c.get("voluntary")), _num(c.get("involuntary"))
        if v is None or n is None:
            continue
        total += v + n - (_num(c.get("idle_voluntary")) or 0.0) - (_num(c.get("idle_involuntary")) or 0.0)
    return total / ios


def _perf(d: Mapping[str, Any], ios: float) -> tuple[float | None, str | None]:
    """(cycles per I/O, why not) from the row's ``perf`` entry (:class:`~vmbench.telemetry.perf.PerfCycles`:
    its cycles_per_io, else its cycles less idle_cycles over the row's I/Os; or its why)."""
    perf = d.get("perf")
    if not isinstance(perf, Mapping):
        return None, None
    per, cycles = _num(perf.get("cycles_per_io")), _num(perf.get("cycles"))
    if per is None and cycles is not None and ios > 0:
        per = (cycles - (_num(perf.get("idle_cycles")) or 0.0)) / ios
    if per is not None:
        return per, None
    return None, str(perf["why"]) if perf.get("why") else None


@dataclass(frozen=True)
class QemuCpuRecord:
    """One repeat's CPU per I/O as stored: the QEMU process, its thread classes, the rest of
    the host (and its ZFS threads), the VM's cgroup, the guest, perf's cycles, the idle VM's
    measurement, per I/O where the row says so."""

    ios: float = 0.0  # the I/Os counted over the row (0: none, or not stored)
    accel: str | None = None  # the accelerator its thread names showed ("kvm", "tcg")
    named: bool = False  # the accelerator was named by its threads
    accounted_share: float | None = None  # the threads' sum over the process's total
    class_us_per_io: Mapping[str, float | None] = field(default_factory=dict)  # by thread class ("vcpu", "exited"...)
    switches_per_io: float | None = None
    process_us_per_io: float | None = None
    process_idle_s: float | None = None
    host_rest_s: float | None = None
    host_rest_us_per_io: float | None = None
    host_idle_rest_s: float | None = None
    zfs_us_per_io: float | None = None
    cgroup_us_per_io: float | None = None
    guest_us_per_io: float | None = None
    idle_elapsed_s: float | None = None  # how long the idle VM was measured
    perf_cycles_per_io: float | None = None
    perf_why: str | None = None  # why perf counted no cycles

    @classmethod
    def from_row(cls, d: Mapping[str, Any]) -> "QemuCpuRecord":
        ios = _num(d.get("ios")) or 0.0
        classes = {str(k): v for k, v in _part(d, "classes").items() if isinstance(v, Mapping)}
        per, why = _perf(d, ios)
        return cls(
            ios=ios, accel=str(d["accel"]) if d.get("accel") else None, named=bool(d.get("named")),
            accounted_share=_num(d.get("accounted_share")),
            class_us_per_io={k: _num(v.get("us_per_io")) for k, v in classes.items()},
            switches_per_io=_switches(classes, ios),
            process_us_per_io=_num(_part(d, "process").get("us_per_io")), process_idle_s=_num(_part(d, "process").get("idle_s")),
            host_rest_s=_num(_part(d, "host").get("rest_s")), host_rest_us_per_io=_num(_part(d, "host").get("rest_us_per_io")),
            host_idle_rest_s=_num(_part(d, "host").get("idle_rest_s")), zfs_us_per_io=_num(_part(d, "host", "zfs").get("us_per_io")),
            cgroup_us_per_io=_num(_part(d, "cgroup").get("us_per_io")), guest_us_per_io=_num(_part(d, "guest").get("us_per_io")),
            idle_elapsed_s=_num(_part(d, "idle").get("elapsed_s")), perf_cycles_per_io=per, perf_why=why)

    @classmethod
    def of(cls, stored: Mapping[str, Any] | None) -> "QemuCpuRecord | None":
        """The record of a stored qemu-cpu row; None for none, or a row of another kind."""
        return cls.from_row(stored) if stored is not None and stored.get("kind") == QEMU_CPU_KIND else None

    def us_per_io(self, thread_class: str) -> float | None:
        """A thread class's CPU per I/O (None: not in the row)."""
        return self.class_us_per_io.get(thread_class)

    def per_io(self, seconds: float | None) -> float | None:
        """``seconds`` of CPU over the row's I/Os, in µs per I/O."""
        return None if seconds is None or self.ios <= 0 else seconds * 1e6 / self.ios
