"""What each VM setting costs the host CPU per I/O (issue 17): the rows of the "CPU per I/O"
table, from the guest measurements that carry a ``qemu-cpu`` row (the QEMU process sampled on
the host, :meth:`vmbench.telemetry.qemu_cpu.CpuPerIo.to_json`, attached by
:func:`vmbench.report.load.with_telemetry` as ``qemu_cpu``).

Pure: measurements in, :class:`CpuRow` out; :mod:`vmbench.report.cputables` lays them out.
Per (cell, stack, layer, job) group: the median over repeats of µs of CPU per I/O of each
thread class (vCPU, iothread, main loop, workers, other + exited), the QEMU process, the rest
of the host (and the part of it spent in the host's ZFS kernel threads, where there are any)
and the VM's cgroup, all with the idle VM's cost taken off; perf's cycles per I/O where perf
counted, else why not; context switches per
I/O; the guest's own CPU per I/O (its /proc/stat) and the guest fio's (fio's usr/sys CPU);
the host fio's for the same job as the reference; each with its per-repeat values.  Every
figure against the same group in the baseline (the first cell, as the gap table's
vs baseline) is a difference of medians with a bootstrap interval (the method of
:mod:`vmbench.report.stats`) and a verdict: "cheaper", "costlier" or "within noise".  A group
whose fixed-rate job fell short of its rate (:func:`~vmbench.report.facts.saturation`) is
flagged and compared with nothing.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..fio.result import fio_cpu_us_per_io
from ..results.cpu import QemuCpuRecord
from ..results.key import MeasurementKey
from ..results.records import CellRecord, JobParams, Measurement
from . import stats
from .facts import saturation
from .rows import group, host_group, host_key
from .stats import Delta

if TYPE_CHECKING:
    import numpy as np

#: the thread classes of the split, in the table's order ("other" holds QEMU's other and exited threads)
CLASSES = ("vcpu", "iothread", "main", "worker", "other")
#: every figure of a row: the classes, the QEMU process ("qemu"), the rest of the host and its
#: ZFS kernel threads' part ("zfs"), the VM's cgroup, context switches per I/O, the guest's own
#: CPU and the guest fio's, all per I/O
FIGURES = CLASSES + ("qemu", "host_rest", "zfs", "cgroup", "switches", "guest", "guest_fio")
#: what each figure is, in words (the deltas' names: "iothread: -3.1 µs/IO [...]")
NAMES = {"vcpu": "vCPU", "iothread": "iothread", "main": "main loop", "worker": "workers", "other": "other+exited",
         "qemu": "QEMU", "host_rest": "host rest", "zfs": "ZFS threads", "cgroup": "cgroup", "switches": "switches", "guest": "guest",
         "guest_fio": "guest fio"}
#: the unit of each figure
UNITS = {k: "switches/IO" if k == "switches" else "µs/IO" for k in FIGURES}
#: the stacked plot's parts, bottom to top: the QEMU process's classes, then the rest of the host
STACKED = CLASSES + ("host_rest",)

CHEAPER, COSTLIER, NOISE = "cheaper", "costlier", stats.NOISE


@dataclass(frozen=True)
class Figure:
    """One figure of a group: the median over the repeats that have it, and each repeat's value
    (in the order they ran) for intervals."""

    median: float | None
    samples: tuple[float, ...] = ()

    @classmethod
    def of(cls, values: Sequence[float | None]) -> Figure:
        got = tuple(float(v) for v in values if v is not None and math.isfinite(v))
        return cls(statistics.median(got) if got else None, got)


@dataclass(frozen=True)
class CpuRow:
    """One (cell, stack, layer, job) group of guest measurements with qemu-cpu rows."""

    job: str
    sync: bool
    cell: str
    stack: str | None
    layer: str
    job_hash: str
    accel: str  # as the vCPU threads name it ("KVM", "TCG"), else the measurement's accelerator
    repeats: int  # the group's measurements
    sampled: int  # of which with a qemu-cpu row and I/Os counted
    figures: Mapping[str, Figure]  # FIGURES
    host_fio: Figure | None  # the host fio's µs/IO for the same job (None: no host row of that job)
    accounted_share: float | None  # the live threads' share of the process's CPU, the lowest over repeats
    idle_s: tuple[float, ...]  # how long the idle VM was measured, per repeat
    idle_qemu: Figure  # the idle VM's QEMU CPU taken off, µs/IO
    idle_rest: Figure  # the idle host rest taken off, µs/IO
    ios: Figure  # the I/O count each per-I/O figure is divided by
    fixed_rate: str | None  # the job's fixed rate ("2,000 IOPS"), None: not a fixed-rate job (or not known)
    saturated: str | None  # "saturated (achieved X of Y)"
    named: bool  # every repeat's threads carried QEMU's names (debug-threads)
    perf_cycles: Figure  # cycles per I/O where perf counted (empty: not available)
    perf_why: tuple[str, ...]  # why perf did not count, as the runner stored it
    baseline: str | None  # the cell its deltas are against (None: it is the baseline, or not compared)
    deltas: Mapping[str, Delta] = field(default_factory=dict)  # per figure, vs the baseline
    notes: tuple[str, ...] = ()
    shared_from: str | None = None  # a raw disk measured once in another cell of the same VM
    is_baseline: bool = False  # a group of the baseline cell: the others are compared with it
    rest_undercounted: int = 0  # repeats whose host /proc/stat counted less busy CPU than QEMU's threads

    @property
    def tcg(self) -> bool:
        return "tcg" in self.accel.lower()

    def value(self, key: str) -> float | None:
        return self.figures[key].median


# ---- reading one stored row --------------------------------------------------------------------


def qemu_cpu(m: Measurement) -> QemuCpuRecord | None:
    """A measurement's qemu-cpu row (as :func:`~vmbench.report.load.with_telemetry` attaches it)."""
    return QemuCpuRecord.of(m.qemu_cpu)


def has_qemu_cpu(measurements: Sequence[Measurement]) -> bool:
    """Some single-VM guest measurement carries a qemu-cpu row."""
    return any(m.side == "guest" and not m.load_step and qemu_cpu(m) is not None for m in measurements)


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _cost(v: float | None) -> float | None:
    """A thread class's CPU per I/O with the idle VM's share taken off: a class that did
    almost nothing can dip under zero by the idle measurement's noise; a cost is never
    negative, so it is shown as 0."""
    return None if v is None else max(0.0, v)


#: a host whose /proc/stat counted this much less busy CPU than the QEMU process's own threads
#: (more than a few clock ticks): its rest cannot be told (a virtual machine's tick-sampled
#: counters lose ticks under load; the threads' runtime is measured, not sampled)
UNDERCOUNT_S = 0.1
UNDERCOUNT_NOTE = ("host rest not known: in {n} of {m} repeats the host's /proc/stat counted less busy CPU than the QEMU "
                   "process's own threads (a virtual machine's tick-sampled counters lose ticks under load)")


def rest_undercounted(d: QemuCpuRecord) -> bool:
    """The row's host busy CPU fell short of the QEMU process's (beyond :data:`UNDERCOUNT_S`)."""
    rest = d.host_rest_s
    return rest is not None and rest < -UNDERCOUNT_S


def repeat_figures(m: Measurement) -> dict[str, float | None]:
    """One measurement's figures (:data:`FIGURES`) from its qemu-cpu row and its fio output; all
    None but guest_fio when it has no qemu-cpu row or counted no I/O."""
    d = qemu_cpu(m)
    out: dict[str, float | None] = {k: None for k in FIGURES}
    out["guest_fio"] = fio_cpu_us_per_io(m.fio)
    if d is None or not d.ios > 0:
        return out
    cls = d.us_per_io

    out.update({c: _cost(cls(c)) for c in CLASSES[:-1]})
    out["other"] = _cost(_sum(cls("other"), cls("exited")))
    out["qemu"] = _cost(d.process_us_per_io)
    # the rest of the host, less than its idle figure by a tick or so: 0 (a few ticks more, rest_undercounted: not known)
    out["host_rest"] = None if rest_undercounted(d) else _cost(d.host_rest_us_per_io)
    out["zfs"] = _cost(d.zfs_us_per_io)
    out["cgroup"] = _cost(d.cgroup_us_per_io)
    out["switches"] = d.switches_per_io
    out["guest"] = d.guest_us_per_io
    return out


def fixed_rate(params: JobParams) -> str | None:
    """A built-in job's fixed rate in words ("2,000 IOPS", "50.0 MB/s"), None when it has none
    (a job file's is not read here)."""
    if params.file_job:
        return None
    if params.rate_iops is not None:
        return f"{float(params.rate_iops):,.0f} IOPS"
    if params.rate is not None:
        return f"{float(params.rate) / 1e6:,.1f} MB/s"
    return None


# ---- differences of medians ----------------------------------------------------------------------


def difference(a_samples: Sequence[float], b_samples: Sequence[float], *, seed: int = 0, confidence: float = 0.95,
               unit: str = "µs/IO") -> Delta:
    """``median(a) - median(b)`` (a against the reference b, lower is cheaper) with the
    percentile-bootstrap interval of :mod:`vmbench.report.stats` (two independent samples, its
    resamples and seed, :data:`stats.MIN_REPEATS` or more on both sides): "cheaper" when the
    whole interval is below 0, "costlier" when above, "within noise" when it includes 0."""
    a = [float(x) for x in a_samples]
    b = [float(x) for x in b_samples]
    if not a or not b:
        return Delta(None, None, None, None, "no measurements")
    point = float(stats.median(a) - stats.median(b))
    if min(len(a), len(b)) < stats.MIN_REPEATS:
        return Delta(point, None, None, None, stats.FEWER)
    if max(a) == min(a) and max(b) == min(b):
        low = high = point
        why: str | None = "no spread in the repeats: the interval is the point"
    else:
        low, high = stats.bootstrap_interval(a, b, _diff, seed=seed, confidence=confidence)  # numpy and scipy imported there
        if not (math.isfinite(low) and math.isfinite(high)):
            return Delta(point, None, None, None, "the bootstrap gave no finite interval")
        why = None
    verdict = NOISE if low <= 0.0 <= high else COSTLIER if low > 0.0 else CHEAPER
    where = "includes" if verdict == NOISE else "excludes"
    return Delta(point, low, high, verdict, why or f"the {confidence * 100:g}% interval {where} 0 {unit}")


def _diff(a: "np.ndarray", b: "np.ndarray", axis: int = -1) -> "np.ndarray":
    import numpy as np

    return np.median(a, axis=axis) - np.median(b, axis=axis)


def describe_delta(key: str, d: Delta) -> str:
    """A delta in words: "iothread: -3.1 µs/IO [-4.0, -2.2], cheaper"."""
    fmt: Callable[[float], str] = (lambda v: f"{v:+.2f}") if key == "switches" else (lambda v: f"{v:+.1f}")
    if d.value is None:
        return f"{NAMES[key]}: - ({d.why})" if d.why else f"{NAMES[key]}: -"
    text = f"{NAMES[key]}: {fmt(d.value)} {UNITS[key]}"
    if d.low is not None and d.high is not None and d.verdict is not None:
        return f"{text} [{fmt(d.low)}, {fmt(d.high)}], {d.verdict}"
    return f"{text} (no verdict: {d.why})" if d.why else text


# ---- the rows ----------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _accel(rows: Sequence[Measurement]) -> str:
    named = sorted({d.accel for r in rows if (d := qemu_cpu(r)) is not None and d.accel})
    if named:
        return "/".join(named)
    stored = sorted({str(r.accelerator) for r in rows if r.accelerator})
    return "/".join(stored) or "?"


def _group_row(key: MeasurementKey, rows: Sequence[Measurement], host_rows: Sequence[Measurement] | None) -> CpuRow:
    sampled = [r for r in rows if (d := qemu_cpu(r)) is not None and d.ios > 0]
    per = [repeat_figures(r) for r in rows]
    cpu = [d for r in sampled if (d := qemu_cpu(r)) is not None]
    undercounted = sum(rest_undercounted(d) for d in cpu)
    # one repeat whose host counters lost ticks makes the others' rest suspect too: none is shown
    figures = {k: Figure.of([] if k == "host_rest" and undercounted else [p[k] for p in per]) for k in FIGURES}
    shares = [s for d in cpu if (s := d.accounted_share) is not None]
    perf = [(d.perf_cycles_per_io, d.perf_why) for d in cpu]
    host_fio = None
    if host_rows and host_rows[0].job_hash == rows[0].job_hash:
        host_fio = Figure.of([fio_cpu_us_per_io(r.fio) for r in host_rows])
    return CpuRow(
        job=key.job, sync=rows[0].sync, cell=str(key.cell), stack=key.stack, layer=key.layer,
        job_hash=rows[0].job_hash, accel=_accel(rows),
        repeats=len(rows), sampled=len(sampled), figures=figures, host_fio=host_fio,
        accounted_share=min(shares) if shares else None,
        idle_s=tuple(e for d in cpu if (e := d.idle_elapsed_s) is not None),
        idle_qemu=Figure.of([d.per_io(d.process_idle_s) for d in cpu]),
        idle_rest=Figure.of([d.per_io(d.host_idle_rest_s) for d in cpu]),
        ios=Figure.of([d.ios for d in cpu]),
        fixed_rate=fixed_rate(rows[0].job_params), saturated=saturation(rows), named=all(d.named for d in cpu),
        perf_cycles=Figure.of([c for c, _ in perf]), perf_why=tuple(dict.fromkeys(w for _, w in perf if w)),
        baseline=None, shared_from=rows[0].shared_from, rest_undercounted=undercounted)


def cpu_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str]) -> list[CpuRow]:
    """Per job, per cell (``cells``: the valid ones, in scenario order), each group of guest
    measurements (raw disk first, then each stack's layers) that has a qemu-cpu row, with every
    figure's difference from the same group in the first cell (the baseline).  Load runs'
    measurements (several VMs at once) are not read here."""
    groups = group(m for m in measurements if not m.load_step and not m.vm)
    by_name = {c.name: c for c in cells}
    order = [c.name for c in cells]
    baseline = order[0] if order else None
    out: list[CpuRow] = []
    for job in list(jobs) + sorted({k.job for k in groups if k.job not in jobs}):
        made: dict[tuple[str | None, str], CpuRow] = {}  # the baseline cell's rows, by (stack, layer)
        for cell in order:
            mine = [(k, rows) for k, rows in groups.items()
                    if k.side == "guest" and k.cell == cell and k.job == job and any(qemu_cpu(r) is not None for r in rows)]
            mine.sort(key=lambda kv: kv[0].layer != "raw")  # stable: stacks in the order they ran
            for key, rows in mine:
                row = _group_row(key, rows, groups.get(host_group(host_key(by_name[cell]), job)))
                if cell == baseline:
                    made[(key.stack, key.layer)] = row
                    row = replace(_with_notes(row, None), is_baseline=True)
                else:
                    row = _compare(row, made.get((key.stack, key.layer)))
                out.append(row)
    return out


def _compare(row: CpuRow, base: CpuRow | None) -> CpuRow:
    """``row`` with its deltas against ``base`` (the same group in the baseline cell)."""
    if base is None:
        return _with_notes(row, None, ["no qemu-cpu figures in the baseline: not compared"])
    if row.job_hash != base.job_hash:
        return _with_notes(row, None, ["job differs from the baseline's: not compared"])
    if row.saturated:
        return _with_notes(row, None)
    if base.saturated:
        return _with_notes(row, None, ["baseline saturated: not compared"])
    deltas = {k: difference(row.figures[k].samples, base.figures[k].samples, unit=UNITS[k])
              for k in FIGURES if row.figures[k].samples and base.figures[k].samples}
    return _with_notes(replace(row, deltas=deltas), base.cell)


def _with_notes(row: CpuRow, baseline: str | None, extra: Sequence[str] = ()) -> CpuRow:
    notes = []
    if row.saturated:
        notes.append(f"{row.saturated}: left out of the comparison")
    if row.shared_from:
        notes.append(f"raw disk shared with {row.shared_from} (same VM)")
    if row.sampled < row.repeats:
        notes.append(f"QEMU sampled in {row.sampled} of {row.repeats} repeats")
    if not row.named:
        notes.append("QEMU threads unnamed (no debug-threads): the split by class is not known")
    if row.rest_undercounted:
        notes.append(UNDERCOUNT_NOTE.format(n=row.rest_undercounted, m=row.sampled))
    notes += list(extra)
    return replace(row, notes=tuple(notes), baseline=baseline)
