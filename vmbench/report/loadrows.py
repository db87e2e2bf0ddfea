"""Load runs (many VMs at once): the figures of each load step, computed from the stored rows.

Pure: measurement records (as :func:`vmbench.report.load.load_run` reads them: ``load``,
``vm``, ``load_step``, ``role``, ``clat``, ``telemetry``) and the plan's ``load`` section in,
frozen dataclasses out; :mod:`vmbench.report.loadtables` lays them out.

The rules (each stated again in the tables' notes):

* A row whose ``load.excluded`` is set is kept and listed, but left out of every merged
  figure (aggregates, percentiles, per-VM figures, fairness, host CPU).
* A step's **aggregate** IOPS (MB/s) is, for each repeat, the sum over the step's VMs, then
  the mean over the repeats; a repeat counts only when every VM of the step has an included
  row in it (a sum over part of the VMs is not the step's aggregate); each counted repeat's
  sum is kept for intervals.
* **Percentiles** come from the fio completion-latency histograms of every included VM and
  repeat, merged (:meth:`~vmbench.fio.histogram.Histogram.merged`), never averaged.
* A VM's IOPS is the mean over its included repeats; **Jain's fairness index** over the VMs'
  IOPS is ``(sum x)^2 / (n * sum x^2)`` (1.0: every VM got the same).
* The **knee** (:func:`scaling_knee_index`): the first step k > 1 whose aggregate IOPS gained less than
  a quarter of what linear scaling would add, ``agg_k - agg_(k-1) < 0.25 * agg_(k-1) *
  (n_k - n_(k-1)) / n_(k-1)``, while its merged p99 is at least 1.2 x the previous step's.
* **Neighbours**: the victim's p99 in each phase against the "alone" phase (the first with 0
  aggressors, else the first): the per-repeat values are each repeat's p99 from its own
  histogram, compared with :func:`vmbench.report.stats.change` (bootstrap interval).  The
  victim's p99 **held** in a phase when that interval includes 0 or lies below it, or the
  change is at most +10%; it **recovered** in a phase that held after a phase that did not.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from ..fio.histogram import P50, P99, P999, Histogram
from ..fio.result import stored_direction
from ..results.key import MeasurementKey
from ..results.plan import LoadPlan, LoadStepPlan
from ..results.records import CellRecord, JobParams, Measurement
from ..scenario.model import LIMIT_RATES, Target
from . import stats
from .rows import READ_MODES, WRITE_MODES, host_key
from .stats import Delta

KNEE_GAIN = 0.25  # a step gaining under this share of linear scaling's gain...
KNEE_P99 = 1.2  # ...while its p99 grew at least this much is the knee
HELD_WITHIN = 0.10  # a victim's p99 within +10% of alone has held (recovered)
MIB = 1 << 20

KNEE_RULE = (f"knee = the first step k > 1 whose aggregate IOPS gained less than {KNEE_GAIN:g} of what linear scaling would add "
             f"(agg_k - agg_k-1 < {KNEE_GAIN:g} x agg_k-1 x (n_k - n_k-1) / n_k-1, n = VMs) while its merged p99 is at least "
             f"{KNEE_P99:g}x the previous step's.")
HELD_RULE = (f"The victim's p99 held in a phase when the interval of its change from alone includes 0 or lies below it, or the "
             f"change is at most +{HELD_WITHIN * 100:.0f}%; it recovered in a phase that held after one that did not.")


# ---- one step's figures ---------------------------------------------------------------------


def _merged(rows: Sequence[Measurement]) -> Histogram:
    return Histogram.merged(r.clat for r in rows) if rows else Histogram()


@dataclass(frozen=True)
class VmFigures:
    """One VM of a step: its IOPS and MB/s (means over its included repeats), p50/p99 from its
    merged histograms, and what was excluded or not fully loaded."""

    vm: int
    role: str | None
    iops: float | None
    mb_s: float | None
    p50_ms: float | None
    p99_ms: float | None
    repeats: int  # included
    excluded: tuple[str, ...] = ()  # "repeat 2: reason"
    not_loaded: tuple[str, ...] = ()  # "repeat 1: short by 120 ms (VM 2)"
    samples: tuple[float, ...] = ()  # each included repeat's IOPS
    host: str | None = None  # the host it ran on, in a run across several hosts

    @property
    def loaded(self) -> bool:
        return not self.not_loaded


@dataclass(frozen=True)
class StepFigures:
    """The figures of one step of one (side, cell, stack, layer, job), over the VMs given."""

    side: str
    cell: str | None
    stack: str | None
    layer: str
    job: str
    step: int
    name: str
    vms: int  # the VMs the aggregate sums over
    iops: float | None  # mean over complete repeats of the sum over VMs
    mb_s: float | None
    samples: tuple[float, ...]  # each complete repeat's summed IOPS
    p50_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    per_vm: tuple[VmFigures, ...]
    fairness: float | None
    host_cpu_pct: float | None
    skew_ms: float | None
    excluded: tuple[str, ...]  # "VM 1 repeat 2: reason"
    incomplete: tuple[int, ...]  # repeats left out of the aggregate (a VM missing or excluded)
    job_hash: str
    accelerators: tuple[str, ...]
    job_params: JobParams = field(default_factory=JobParams)

    @property
    def min_iops(self) -> float | None:
        return min((v.iops for v in self.per_vm if v.iops is not None), default=None)

    @property
    def max_iops(self) -> float | None:
        return max((v.iops for v in self.per_vm if v.iops is not None), default=None)


def jain(values: Sequence[float]) -> float | None:
    """Jain's fairness index (sum x)^2 / (n * sum x^2); None without values or when all are 0."""
    xs = [float(x) for x in values]
    sq = sum(x * x for x in xs)
    return None if not xs or sq == 0 else sum(xs) ** 2 / (len(xs) * sq)


def _vm_figures(vm: int, rows: Sequence[Measurement]) -> VmFigures:
    inc = [r for r in rows if not r.excluded]
    ex = tuple(f"repeat {r.repeat}: {r.excluded}" for r in rows if r.excluded)
    short = tuple(f"repeat {r.repeat}: short by {float(r.load.short_ms or 0):g} ms"
                  + (f" (VM {r.load.short_of_vm})" if r.load.short_of_vm is not None else "")
                  for r in rows if r.load.loaded is False)
    p50, p99 = _merged(inc).percentiles_ms((P50, P99))
    iops = [float(r.iops) for r in inc]
    return VmFigures(vm, rows[0].role if rows else None, statistics.mean(iops) if iops else None,
                     statistics.mean(float(r.bw_bytes) for r in inc) / 1e6 if inc else None,
                     p50, p99, len(inc), ex, short, tuple(iops), host=rows[0].load.host if rows else None)


def step_figures(rows: Sequence[Measurement], *, name: str = "", vms: Sequence[int] | None = None) -> StepFigures:
    """The figures of one step from its rows (every VM and repeat of one side, cell, stack,
    layer and job); ``vms``: the VMs the aggregate needs in each repeat (default: those with rows)."""
    first = rows[0]
    want = sorted(set(vms) if vms is not None else {r.vm for r in rows})
    by_vm: "OrderedDict[int, list[Measurement]]" = OrderedDict((v, []) for v in want)
    for r in rows:
        by_vm.setdefault(r.vm, []).append(r)
    per_vm = tuple(_vm_figures(v, rs) for v, rs in by_vm.items() if rs)
    inc = [r for r in rows if not r.excluded]
    repeats = sorted({r.repeat for r in rows})
    sums, mb_sums, incomplete = [], [], []
    for rep in repeats:
        of = [r for r in inc if r.repeat == rep]
        if sorted({r.vm for r in of}) != want or len(of) != len(want):
            incomplete.append(rep)
            continue
        sums.append(sum(float(r.iops) for r in of))
        mb_sums.append(sum(float(r.bw_bytes) for r in of) / 1e6)
    p50, p99, p999 = _merged(inc).percentiles_ms((P50, P99, P999))
    cpu = [float(r.telemetry.host_cpu_busy) for r in inc if r.telemetry is not None and r.telemetry.host_cpu_busy is not None]
    skews = [float(r.load.start_skew_ms) for r in rows if r.load.start_skew_ms is not None]
    hashes = {r.job_hash for r in rows}
    return StepFigures(
        side=first.side, cell=first.cell, stack=first.stack, layer=first.layer, job=first.job,
        step=first.load_step, name=name, vms=len(want),
        iops=statistics.mean(sums) if sums else None, mb_s=statistics.mean(mb_sums) if mb_sums else None, samples=tuple(sums),
        p50_ms=p50, p99_ms=p99, p999_ms=p999, per_vm=per_vm,
        fairness=jain([v.iops for v in per_vm if v.iops is not None]), host_cpu_pct=statistics.mean(cpu) if cpu else None,
        skew_ms=max(skews) if skews else None,
        excluded=tuple(f"VM {v.vm} {e}" for v in per_vm for e in v.excluded), incomplete=tuple(incomplete),
        job_hash=str(hashes.pop()) if len(hashes) == 1 else "mixed",
        accelerators=tuple(sorted({str(r.accelerator) for r in rows if r.accelerator})), job_params=first.job_params)


def step_groups(measurements: Sequence[Measurement]) -> "OrderedDict[MeasurementKey, list[Measurement]]":
    """Load rows (load_step > 0) by (side, cell, stack, layer, job, step): every VM and repeat
    of one step together (the key's vm is 0), in the order stored."""
    out: "OrderedDict[MeasurementKey, list[Measurement]]" = OrderedDict()
    for m in measurements:
        if m.load_step > 0:
            out.setdefault(replace(m.group, vm=0), []).append(m)
    return out


# ---- scaling ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ScalingRow:
    guest: StepFigures
    host: StepFigures | None  # the host reference of the same step (as many host volumes at once)
    gap: Delta | None  # guest aggregate IOPS vs the host's: a change (-0.4: the guest gets 60%)
    knee: bool = False
    target: tuple[str, ...] | None = None  # failures ("" none) of the targets on this job; None: no target


def scaling_knee_index(points: Sequence[tuple[int, float | None, float | None]]) -> int | None:
    """The knee of a scaling series ``[(VMs, aggregate IOPS, merged p99 ms)]`` in step order:
    the index of the first step k > 1 (one with a step before it) whose aggregate gained less
    than a quarter of what linear scaling would add, ``agg_k - agg_(k-1) < 0.25 * agg_(k-1) *
    (n_k - n_(k-1)) / n_(k-1)``, while its p99 is at least 1.2x the previous step's; None when
    no step is (or a figure is missing)."""
    for k in range(1, len(points)):
        (n0, a0, p0), (n1, a1, p1) = points[k - 1], points[k]
        if None in (a0, a1, p0, p1) or not n0 or n1 <= n0:
            continue
        assert a0 is not None and a1 is not None and p0 is not None and p1 is not None
        if a1 - a0 < KNEE_GAIN * a0 * (n1 - n0) / n0 and p1 >= KNEE_P99 * p0:
            return k
    return None


def _gap(guest: StepFigures, host: StepFigures | None) -> Delta | None:
    if host is None or host.job_hash != guest.job_hash or not guest.samples or not host.samples:
        return None
    return stats.change(guest.samples, host.samples)


def target_failures(targets: Sequence[Target], fig: StepFigures, *, iops: float | None, mb_s: float | None) -> tuple[str, ...] | None:
    """The failures of the targets on ``fig``'s job (and cell/stack/layer where a target names
    them), judged on ``iops`` and ``mb_s`` and the merged p99; None when no target applies."""
    mine = [t for t in targets if t.job == fig.job and (not t.cell or t.cell == fig.cell)
            and (not t.stack or t.stack == fig.stack) and (not t.layer or t.layer == fig.layer)]
    if not mine:
        return None
    out: list[str] = []
    if iops is None and mb_s is None and fig.p99_ms is None:
        return None  # nothing measured to judge (every row excluded): not judged, not failed
    for t in mine:
        if t.min_iops is not None:
            out += ["no IOPS to judge"] if iops is None else [f"{iops:,.0f} IOPS < {t.min_iops:g}"] if iops < t.min_iops else []
        if t.min_mb_s is not None:
            out += ["no MB/s to judge"] if mb_s is None else [f"{mb_s:.1f} MB/s < {t.min_mb_s:g}"] if mb_s < t.min_mb_s else []
        if t.max_p99_ms is not None:
            p = fig.p99_ms
            out += ["no latency histogram to judge p99"] if p is None else [f"p99 {p:.2f} ms > {t.max_p99_ms:g}"] if p > t.max_p99_ms else []
    return tuple(out)


def scaling_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], plan: LoadPlan,
                 jobs: Sequence[str] = (), targets: Sequence[Target] = ()) -> list[ScalingRow]:
    """Per valid cell, (stack, layer) and job, each step in order with its host reference,
    the gap and the knee.  A target is judged per step on its slowest VM (``min_iops``,
    ``min_mb_s``: every VM should reach it) and the step's merged p99 (``max_p99_ms``)."""
    groups = step_groups(measurements)
    names = [c.name for c in cells]
    by_name = {c.name: c for c in cells}
    order = {j: i for i, j in enumerate(jobs)}
    series: "OrderedDict[tuple, list[MeasurementKey]]" = OrderedDict()
    for k in groups:
        if k.side == "guest" and k.cell in by_name:
            series.setdefault((names.index(str(k.cell)), k.stack or "", k.layer, order.get(k.job, len(order)), k.job), []).append(k)
    out: list[ScalingRow] = []
    for sk in sorted(series, key=lambda s: s[:4]):
        keys = sorted(series[sk], key=lambda k: k.load_step)
        made = []
        for k in keys:
            sp = plan.step(k.load_step)
            guest = step_figures(groups[k], name=sp.name if sp else str(k.load_step),
                                 vms=[v.vm for v in sp.vms] if sp else None)
            hk = MeasurementKey("host", host_key(by_name[str(k.cell)]), None, "host", k.job, load_step=k.load_step)
            hrows = groups.get(hk)
            host = step_figures(hrows, name=guest.name, vms=[v.vm for v in sp.vms] if sp else None) if hrows else None
            per_mb = [v.mb_s for v in guest.per_vm if v.mb_s is not None]
            tf = target_failures(targets, guest, iops=guest.min_iops, mb_s=min(per_mb) if per_mb else None)
            made.append(ScalingRow(guest, host, _gap(guest, host), target=tf))
        knee = scaling_knee_index([(r.guest.vms, r.guest.iops, r.guest.p99_ms) for r in made])
        out += [replace(r, knee=i == knee) for i, r in enumerate(made)]
    return out


# ---- noisy neighbours ------------------------------------------------------------------------


@dataclass(frozen=True)
class LimitCheck:
    """An aggressor's achieved rate against a limit its phase set."""

    vm: int
    key: str  # "iops_wr", "mbps"...
    limit: float
    achieved: float | None  # IOPS, or MiB/s for an mbps limit (the limit's own unit)
    unit: str

    @property
    def ratio(self) -> float | None:
        return None if self.achieved is None or not self.limit else self.achieved / self.limit


@dataclass(frozen=True)
class PhaseRow:
    cell: str | None
    stack: str | None
    layer: str
    phase: str
    step: int
    aggressors_planned: int
    overrides: Mapping[str, Any]  # the phase's aggressors' overrides (the first aggressor's)
    victim: StepFigures | None
    p99_samples: tuple[float, ...]  # each included repeat's victim p99, from its own histogram (ms)
    change: Delta | None  # victim p99 vs the alone phase's (None for alone itself)
    reference: bool  # this is the alone phase
    aggressors: StepFigures | None
    limits: tuple[LimitCheck, ...]
    target: tuple[str, ...] | None
    held: bool | None  # the rule in HELD_RULE (None: alone, or not judged)
    sentence: str
    victim_overrides: Mapping[str, Any] = field(default_factory=dict)  # the phase's victim's overrides


def latency_verdict(d: Delta | None) -> str | None:
    """A p99 change's verdict in latency words: "higher", "lower" or "within noise"."""
    if d is None or d.verdict is None:
        return None
    return {stats.FASTER: "higher", stats.SLOWER: "lower"}.get(d.verdict, d.verdict)


def _direction(row: Measurement, direction: str, what: str) -> float | None:
    """A row's ``what`` ("iops", "bw_bytes") in one direction: from fio's stored output, else the
    row's total when its job only goes that way."""
    got = stored_direction(row.fio, direction, what)  # the tail that kept the load on after the window left out
    if got is not None:
        return got
    if row.job_params.rw in (READ_MODES if direction == "read" else WRITE_MODES):
        return float(getattr(row, what))
    return None


def limit_checks(rows: Sequence[Measurement], step: LoadStepPlan | None) -> tuple[LimitCheck, ...]:
    """Each aggressor's mean achieved rate (over its included repeats) against each rate limit
    its phase's overrides set (iops, iops_rd, iops_wr in IOPS; mbps, mbps_rd, mbps_wr in MiB/s)."""
    if step is None:
        return ()
    out = []
    for member in step.vms:
        if member.role != "aggressor":
            continue
        vm, over = member.vm, member.overrides
        inc = [r for r in rows if r.vm == vm and not r.excluded]
        for key in LIMIT_RATES:  # the rates a phase's override may set
            if over.get(key) is None:
                continue
            what = "iops" if key.startswith("iops") else "bw_bytes"
            direction = {"rd": "read", "wr": "write"}.get(key.rsplit("_", 1)[-1])
            vals = [float(getattr(r, what)) if direction is None else _direction(r, direction, what) for r in inc]
            known = [v for v in vals if v is not None]
            mean = statistics.mean(known) if known and len(known) == len(vals) else None
            if mean is not None and what == "bw_bytes":
                mean /= MIB
            out.append(LimitCheck(vm, key, float(over[key]), mean, "IOPS" if what == "iops" else "MiB/s"))
    return tuple(out)


def _p99_samples(rows: Sequence[Measurement]) -> tuple[float, ...]:
    by_rep: "OrderedDict[int, list[Measurement]]" = OrderedDict()
    for r in rows:
        if not r.excluded:
            by_rep.setdefault(r.repeat, []).append(r)
    out = [_merged(rs).percentiles_ms((P99,))[0] for _, rs in sorted(by_rep.items())]
    return tuple(v for v in out if v is not None)


def held(d: Delta | None) -> bool | None:
    """The rule of :data:`HELD_RULE` (None when there is no change to judge)."""
    if d is None or d.value is None:
        return None
    return (d.low is not None and d.low <= 0.0) or d.value <= HELD_WITHIN


def neighbour_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], plan: LoadPlan,
                   targets: Sequence[Target] = ()) -> list[PhaseRow]:
    """Per valid cell and (stack, layer) of the victim's job, each phase in order."""
    groups = step_groups(measurements)
    valid = {c.name for c in cells}
    alone = plan.alone()
    where: "OrderedDict[tuple, None]" = OrderedDict()
    for k in groups:
        if k.side == "guest" and k.cell in valid:
            where.setdefault((k.cell, k.stack, k.layer), None)
    out: list[PhaseRow] = []
    for cell, stack, layer in where:
        def rows_of(step: int, role: str) -> list[Measurement]:
            return [r for k, rs in groups.items() if (k.side, k.cell, k.stack, k.layer, k.load_step) == ("guest", cell, stack, layer, step)
                    for r in rs if r.role == role]
        ref_samples = _p99_samples(rows_of(alone.index, "victim")) if alone else ()
        before_held: list[bool] = []
        for sp in plan.steps:
            vrows, arows = rows_of(sp.index, "victim"), rows_of(sp.index, "aggressor")
            if not vrows and not arows:
                continue
            victim = step_figures(vrows, name=sp.name, vms=[v.vm for v in sp.members("victim")]) if vrows else None
            aggr = step_figures(arows, name=sp.name, vms=[v.vm for v in sp.members("aggressor")]) if arows else None
            samples = _p99_samples(vrows)
            is_ref = alone is not None and sp.index == alone.index
            change = None if is_ref or not samples or not ref_samples else stats.change(samples, ref_samples)
            h = None if is_ref else held(change)
            aggressors, victims = sp.members("aggressor"), sp.members("victim")
            overrides = dict(aggressors[0].overrides) if aggressors else {}
            vover = dict(victims[0].overrides) if victims else {}
            if is_ref:
                sentence = f"{sp.name} is the reference (the victim alone)" if sp.count("aggressor") == 0 else \
                    f"{sp.name} is the reference (no phase without aggressors)"
            elif h is None:
                sentence = f"the victim's p99 under {sp.name} is not judged (no change from alone)"
            elif h:
                sentence = (f"the victim's p99 recovered under {sp.name}" if any(not b for b in before_held)
                            else f"the victim's p99 stayed at its alone level under {sp.name}")
            else:
                sentence = f"the victim's p99 did not recover under {sp.name}"
            if h is not None:
                before_held.append(h)
            tf = None
            if victim is not None:
                tf = target_failures(targets, victim, iops=victim.iops, mb_s=victim.mb_s)
            out.append(PhaseRow(cell, stack, layer, sp.name, sp.index, sp.count("aggressor"), overrides, victim, samples, change,
                                is_ref, aggr, limit_checks(arows, sp), tf, h, sentence, vover))
    return out


def accelerators(measurements: Sequence[Measurement]) -> list[str]:
    """The guests' accelerators of the load rows."""
    return sorted({str(m.accelerator) for m in measurements if m.side == "guest" and m.load_step > 0 and m.accelerator})
