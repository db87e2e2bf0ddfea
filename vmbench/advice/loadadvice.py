"""Advice from a many-VM run (:mod:`vmbench.report.loadrows`).

* Noisy neighbours: a phase whose aggressors run under an I/O limit against the phase before
  it with aggressors and no such limit: the victim's p99 (each repeat's, from its own
  histogram, as the report keeps them) or IOPS, compared with :func:`vmbench.report.stats.change`.
  The change is the limit (``aggressor iops_wr: - -> 40``).
* Scaling: how many VMs share the storage is not a setting, so nothing is recommended; where
  each step stands against the host (as many host volumes at once) and the knee are.
"""

from __future__ import annotations

from ..fio.job import Metric
from ..report import stats
from ..report.loadrows import PhaseRow, neighbour_rows, scaling_rows
from ..results.plan import LoadPlan
from ..scenario.model import LIMIT_RATES
from ..report.stats import Delta
from .measured import Ctx, make
from .model import Change, Goal, GoalMetric, Recommendation


def _limits(row: PhaseRow) -> dict[str, object]:
    return {k: v for k, v in row.overrides.items() if k in LIMIT_RATES}


def from_neighbours(ctx: Ctx, goal: Goal, job: str, plan: LoadPlan) -> tuple[list[Recommendation], list[str], list[str]]:
    """(recommendations, standing, notes) for the victim's job."""
    if job != plan.victim_job:
        return [], [], [f"{job}: a noisy-neighbour run judges the victim's job ({plan.victim_job}) only"]
    if goal.metric not in (GoalMetric.P99, GoalMetric.IOPS):
        return [], [], [f"{goal}: a noisy-neighbour run compares the victim's p99 and IOPS per phase, not {goal.metric.value}"]
    rows = neighbour_rows(ctx.measurements, ctx.cells, plan, ctx.data.targets)
    recs: list[Recommendation] = []
    standing: list[str] = []
    for i, r in enumerate(rows):
        if r.victim is None:
            continue
        if r.reference or r.change is not None:
            alone = f" ({stats.label(Metric.P99)} change from alone {_pct(r.change)})" if r.change is not None else ""
            standing.append(f"{r.phase}: victim {job} p99 {_ms(r.victim.p99_ms)} ms, {r.victim.iops or 0:,.0f} IOPS{alone}; {r.sentence}")
        limits = _limits(r)
        if not limits or r.aggressors_planned == 0:
            continue
        ref = next((p for p in reversed(rows[:i]) if p.victim is not None and p.aggressors_planned > 0 and _limits(p) != limits
                    and (p.cell, p.stack, p.layer) == (r.cell, r.stack, r.layer)), None)
        if ref is None or ref.victim is None:
            continue
        before = _limits(ref)
        changes = [Change(f"aggressor {k}", before.get(k), v) for k, v in limits.items()]
        if goal.metric is GoalMetric.P99:
            d: Delta = stats.change(r.p99_samples, ref.p99_samples, metric=Metric.P99)
            value, ref_value = r.victim.p99_ms, ref.victim.p99_ms
            n = min(len(r.p99_samples), len(ref.p99_samples))
        else:
            d = stats.change(r.victim.samples, ref.victim.samples)
            value, ref_value = r.victim.iops, ref.victim.iops
            n = min(len(r.victim.samples), len(ref.victim.samples))
        evidence = [r.sentence] + [f"aggressor VM {c.vm} {c.key}: achieved {c.achieved:,.1f} of {c.limit:g} {c.unit}"
                                   for c in r.limits if c.achieved is not None]
        if r.aggressors is not None and ref.aggressors is not None and r.aggressors.iops is not None and ref.aggressors.iops is not None:
            evidence.append(f"aggressors' aggregate {ref.aggressors.iops:,.0f} -> {r.aggressors.iops:,.0f} IOPS")
        recs.append(make(ctx, goal, job, f"{r.cell} phase {r.phase}", f"{ref.cell} phase {ref.phase}", changes, value, ref_value, d, n,
                         evidence, settings={f"aggressor {k}": v for k, v in limits.items()}))
    return recs, standing, []


def scaling_standing(ctx: Ctx, goal: Goal, job: str, plan: LoadPlan) -> tuple[list[str], list[str]]:
    """(standing, notes): each step's aggregate against the host's, and the knee."""
    rows = [r for r in scaling_rows(ctx.measurements, ctx.cells, plan, ctx.data.jobs, ctx.data.targets) if r.guest.job == job]
    out = []
    for r in rows:
        g = r.guest
        name = g.name if str(g.vms) in g.name else f"{g.name} ({g.vms} VM{'s' if g.vms != 1 else ''})"
        line = f"{name}: aggregate {_n(g.iops)} IOPS, {_n(g.mb_s)} MB/s, merged p99 {_ms(g.p99_ms)} ms"
        if r.host is not None and r.gap is not None and r.gap.value is not None:
            line += f"; {_share(r.gap)} of the host's {_n(r.host.iops)} IOPS (as many host volumes at once)"
        if r.knee:
            line += "; the knee: adding VMs gains little while p99 grows"
        out.append(line)
    note = ("a scaling run measures how many VMs share the storage, not a setting: nothing to recommend from it; "
            "see where the aggregate stops growing (the knee)")
    return out, [note]


def _share(d: Delta) -> str:
    v = d.value or 0.0
    text = f"{(1 + v) * 100:.0f}%"
    if d.low is not None and d.high is not None:
        text += f" [{(1 + d.low) * 100:.0f}, {(1 + d.high) * 100:.0f}]"
    return text


def _pct(d: Delta | None) -> str:
    if d is None or d.value is None:
        return "-"
    text = f"{d.value * 100:+.1f}%"
    if d.low is not None and d.high is not None:
        text += f" [{d.low * 100:+.1f}, {d.high * 100:+.1f}]"
    return text + (f" {d.verdict}" if d.verdict else f" (no verdict: {d.why})")


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"
