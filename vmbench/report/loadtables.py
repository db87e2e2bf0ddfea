"""Table models for load runs (many VMs at once), from the figures of :mod:`.loadrows` (pure).

A scaling run gets the scaling table (each step's aggregate, merged percentiles, fairness,
host reference, gap, skew and knee) and the per-VM table; a noisy-neighbour run the neighbour
table (the victim's latency per phase against the alone phase, the aggressors' throughput
and limits, the victim's targets) and the per-VM table.  Every table's notes name the metric,
the accelerator and the load, and state the rules of :mod:`.loadrows`.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from ..results.environment import Environment
from ..results.plan import LoadPlan
from ..results.records import CellRecord, Measurement
from ..scenario.axes import setting_text
from ..scenario.model import Target
from . import stats
from .facts import RepeatPolicy, admissibility
from .hostrows import host_steps, hosts_of, per_host_table
from .loadrows import (HELD_RULE, KNEE_RULE, LimitCheck, PhaseRow, ScalingRow, StepFigures, accelerators, latency_verdict,
                       neighbour_rows, scaling_rows)
from .stats import Delta
from .tables import Column, Table, delta_pct, f_int, f_mb, f_ms, f_text, f_whole

PERCENTILE_NOTE = ("p50/p99/p99.9 ms = fio's completion latency (clat), from the json+ histograms of every included VM and repeat "
                   "merged bin by bin (never averaged).")
EXCLUDED_NOTE = ("A row the runner marked excluded (its window was not covered by the others' load, or it failed) is listed "
                 "but left out of every figure; a repeat missing a VM's included row is left out of the step's aggregate.")


def _delta(key: str, d: Delta | None) -> dict:
    return {key: d.value if d else None, key + "_low": d.low if d else None, key + "_high": d.high if d else None,
            key + "_verdict": d.verdict if d else None, key + "_why": d.why if d else None}


def f_range(record: dict) -> str:
    lo, hi = record.get("vm_min_iops"), record.get("vm_max_iops")
    return "-" if lo is None else f"{f_int(lo)}-{f_int(hi)}"


def f_fair(v: Any) -> str:
    return "-" if v is None else f"{v:.3f}"


def f_target(failures: tuple[str, ...] | None) -> str | None:
    if failures is None:
        return None
    return "PASS" if not failures else "FAIL (" + "; ".join(failures) + ")"


def _load_words(plan: LoadPlan, accels: Sequence[str]) -> str:
    acc = "/".join(accels) or "not recorded"
    if plan.kind == "neighbours":
        phases = ", ".join(f"{s.name} ({s.count('aggressor')} aggressors)" for s in plan.steps)
        return (f"Load: noisy neighbour, victim job {plan.victim_job} beside aggressors running {plan.aggressor_job}, phases "
                f"{phases}; guests ran under {acc}.")
    steps = ", ".join(s.name for s in plan.steps)
    return f"Load: scaling, steps {steps} (clones of the cell's VM at once); guests ran under {acc}."


def _facts(measurements: Sequence[Measurement], cells: Sequence[CellRecord], env: Environment | None,
           policy: RepeatPolicy) -> tuple[dict[str, str], list[str]]:
    names = {c.name for c in cells}
    used = [m for m in measurements if m.load_step > 0 and (m.side == "host" or m.cell in names)]
    return admissibility(used, cells, env, policy)


def _excluded_text(fig: StepFigures | None) -> str:
    if fig is None:
        return ""
    parts = list(fig.excluded)
    if fig.incomplete:
        parts.append("repeat " + ", ".join(str(r) for r in fig.incomplete) + " not in the aggregate")
    return "; ".join(parts)


def scaling_table(rows: Sequence[ScalingRow], plan: LoadPlan, measurements: Sequence[Measurement], cells: Sequence[CellRecord],
                  *, env: Environment | None = None, policy: RepeatPolicy = RepeatPolicy(1, 1)) -> Table:
    records = []
    for r in rows:
        g, h = r.guest, r.host
        records.append({
            "cell": g.cell or "", "stack": g.stack or "", "layer": g.layer, "job": g.job, "step": g.name, "load_step": g.step,
            "vms": g.vms, "iops": g.iops, "mb_s": g.mb_s, "p50_ms": g.p50_ms, "p99_ms": g.p99_ms, "p999_ms": g.p999_ms,
            "iops_samples": list(g.samples), "repeats": len(g.samples), "vm_min_iops": g.min_iops, "vm_max_iops": g.max_iops,
            "fairness": g.fairness, "host_cpu_pct": g.host_cpu_pct, "host_iops": h.iops if h else None,
            "host_p99_ms": h.p99_ms if h else None, **_delta("gap", r.gap), "skew_ms": g.skew_ms,
            "excluded": _excluded_text(g), "knee": "knee" if r.knee else "", "target": f_target(r.target),
            "accelerator": "/".join(g.accelerators),
        })
    cols = [Column("cell", "cell"), Column("layer", "layer"), Column("job", "job"), Column("step", "step"), Column("vms", "VMs"),
            Column("iops", "IOPS (sum)", f_int), Column("mb_s", "MB/s (sum)", f_mb), Column("p50_ms", "p50 ms", f_ms),
            Column("p99_ms", "p99 ms", f_ms), Column("p999_ms", "p99.9 ms", f_ms, detail=True),
            Column("vm_min_iops", "per-VM IOPS min-max", row_fmt=f_range), Column("fairness", "fairness", f_fair),
            Column("host_cpu_pct", "host CPU %", f_whole, detail=True), Column("host_iops", "host IOPS (sum)", f_int),
            Column("gap", "gap % (guest vs host)", row_fmt=delta_pct("gap"), keep=True), Column("skew_ms", "skew ms", f_ms, detail=True),
            Column("excluded", "excluded", f_text), Column("knee", "knee", f_text, keep=True)]
    if any(r["stack"] for r in records):
        cols.insert(1, Column("stack", "stack", f_text))
    if any(r["target"] is not None for r in records):
        cols.append(Column("target", "target", f_text))
    notes = [_load_words(plan, accelerators(measurements)),
             "IOPS (sum) and MB/s (sum) = the sum over the step's VMs in each repeat, then the mean over the repeats; "
             "per-VM IOPS min-max = the slowest and the fastest VM's mean IOPS.",
             PERCENTILE_NOTE,
             "fairness = Jain's index over the VMs' IOPS, (sum x)^2 / (n x sum x^2): 1.000 when every VM got the same, 1/n when one got all.",
             "host IOPS (sum) = the host reference of the same step: the same job on as many host volumes at once; "
             "gap % = guest IOPS (sum) / host IOPS (sum) - 1 (-40%: the guests together get 60% of the host's).",
             "host CPU % = mean busy share of all the host's CPUs over the step's rounds (the host-cpu sampler, recorded with VM 0); "
             "skew ms = the largest start skew between the step's VMs over its rounds.",
             KNEE_RULE, EXCLUDED_NOTE]
    if any(r["target"] is not None for r in records):
        notes.append("target: min_iops and min_mb_s are judged on the slowest VM of the step (every VM should reach them), "
                     "max_p99_ms on the step's merged p99.")
    if any(r.get("gap_low") is not None for r in records):
        notes.append(stats.describe_method().replace("median IOPS", "the median per-repeat summed IOPS"))
    if any(r.get("gap_why") == stats.FEWER for r in records):
        notes.append(f"gap % carries no verdict where a side has {stats.FEWER}: run with repeats: 3 or more.")
    facts, missing = _facts(measurements, cells, env, policy)
    return Table("load-scaling", "Scaling: aggregate IOPS and latency as VMs are added", cols, records, notes, facts, missing)


def _vm_records(figs: Sequence[StepFigures]) -> list[dict]:
    out = []
    for f in figs:
        for v in f.per_vm:
            notes = [f"not fully loaded: {s}" for s in v.not_loaded] + [f"excluded {e}" for e in v.excluded]
            out.append({"cell": f.cell or "", "stack": f.stack or "", "layer": f.layer, "job": f.job, "step": f.name, "load_step": f.step,
                        "vm": v.vm, "role": v.role or "", "host": v.host or "", "iops": v.iops, "mb_s": v.mb_s, "p50_ms": v.p50_ms, "p99_ms": v.p99_ms,
                        "repeats": v.repeats, "iops_samples": list(v.samples), "loaded": "yes" if v.loaded else "no",
                        "excluded": "; ".join(v.excluded), "note": "; ".join(notes)})
    return out


def per_vm_table(figs: Sequence[StepFigures], plan: LoadPlan, measurements: Sequence[Measurement]) -> Table:
    records = _vm_records(figs)
    cols = [Column("cell", "cell"), Column("layer", "layer"), Column("job", "job"), Column("step", "step"), Column("vm", "VM"),
            Column("role", "role"), Column("iops", "IOPS", f_int), Column("mb_s", "MB/s", f_mb), Column("p50_ms", "p50 ms", f_ms),
            Column("p99_ms", "p99 ms", f_ms), Column("repeats", "repeats"), Column("loaded", "loaded"), Column("note", "note", f_text)]
    if any(r["stack"] for r in records):
        cols.insert(1, Column("stack", "stack", f_text))
    if any(r["host"] for r in records):
        cols.insert(cols.index(next(c for c in cols if c.key == "role")) + 1, Column("host", "host"))
    notes = [_load_words(plan, accelerators(measurements)),
             "Each VM's IOPS and MB/s = the mean over its included repeats; p50/p99 ms from its included repeats' histograms merged.",
             "loaded = every other VM of the step was loaded during this VM's whole measured window (host clock, each VM's clock "
             "offset corrected); otherwise by how much the worst other VM's load fell short.", EXCLUDED_NOTE]
    return Table("load-vms", "Per VM: each VM of each step", cols, records, notes)


def _limits_text(checks: Sequence[LimitCheck]) -> str:
    parts = []
    for c in checks:
        if c.achieved is None:
            parts.append(f"VM {c.vm} {c.key} {c.limit:g}: not measured in that direction")
            continue
        ratio = c.ratio or 0.0
        flag = " ABOVE its limit: not applied?" if ratio > 1.05 else ""
        parts.append(f"VM {c.vm} {c.key} {f_mb(c.achieved) if c.unit == 'MiB/s' else f_int(c.achieved)}/{c.limit:g} {c.unit} "
                     f"({ratio * 100:.0f}%){flag}")
    return "; ".join(parts)


def _overrides_text(over: Mapping, victim: Mapping) -> str:
    parts = [f"{k}={setting_text(k, v)}" for k, v in over.items()]
    if victim:
        parts.append("victim " + ", ".join(f"{k}={setting_text(k, v)}" for k, v in victim.items()))
    return ", ".join(parts)


def _state(r: PhaseRow, rows: Sequence[PhaseRow]) -> str:
    """The phase's word for the victim's p99: reference, held, recovered, did not recover, not judged."""
    if r.reference:
        return "reference"
    if r.held is None:
        return "not judged"
    if not r.held:
        return "did not recover"
    before = [p.held for p in rows if (p.cell, p.stack, p.layer) == (r.cell, r.stack, r.layer) and p.step < r.step]
    return "recovered" if any(h is False for h in before) else "held"


def neighbour_table(rows: Sequence[PhaseRow], plan: LoadPlan, measurements: Sequence[Measurement], cells: Sequence[CellRecord],
                    *, env: Environment | None = None, policy: RepeatPolicy = RepeatPolicy(1, 1)) -> Table:
    records = []
    for r in rows:
        v, a = r.victim, r.aggressors
        d = _delta("p99_change", r.change)
        d["p99_change_verdict"] = latency_verdict(r.change)
        records.append({
            "cell": r.cell or "", "stack": r.stack or "", "layer": r.layer, "phase": r.phase, "load_step": r.step,
            "aggressors": r.aggressors_planned, "overrides": _overrides_text(r.overrides, r.victim_overrides),
            "victim_job": v.job if v else plan.victim_job, "p50_ms": v.p50_ms if v else None, "p99_ms": v.p99_ms if v else None,
            "p999_ms": v.p999_ms if v else None, "victim_iops": v.iops if v else None, "p99_samples": list(r.p99_samples),
            "p99_median_ms": statistics.median(r.p99_samples) if r.p99_samples else None,
            "repeats": len(r.p99_samples), **d, "reference": r.reference,
            "aggr_iops": a.iops if a else None, "aggr_mb_s": a.mb_s if a else None,
            "limits": _limits_text(r.limits), "limit_checks": [{"vm": c.vm, "limit": c.key, "value": c.limit, "achieved": c.achieved,
                                                                 "unit": c.unit, "ratio": c.ratio} for c in r.limits],
            "target": f_target(r.target), "held": r.held, "sentence": r.sentence, "p99_state": _state(r, rows),
            "excluded": "; ".join(filter(None, [_excluded_text(v), _excluded_text(a)])),
        })
    cols = [Column("cell", "cell"), Column("layer", "layer"), Column("phase", "phase"), Column("aggressors", "aggressors"),
            Column("overrides", "settings", f_text), Column("p50_ms", "victim p50 ms", f_ms, detail=True),
            Column("p99_ms", "victim p99 ms", f_ms), Column("p999_ms", "victim p99.9 ms", f_ms, detail=True),
            Column("p99_median_ms", "median p99 ms", f_ms, keep=True),
            Column("p99_change", "victim p99 vs alone", row_fmt=lambda rec: "reference" if rec.get("reference") else delta_pct("p99_change")(rec), keep=True),
            Column("aggr_iops", "aggressors IOPS (sum)", f_int), Column("aggr_mb_s", "aggressors MB/s (sum)", f_mb, detail=True),
            Column("limits", "limit check (achieved/limit)", f_text), Column("p99_state", "victim p99", f_text, keep=True),
            Column("excluded", "excluded", f_text)]
    if any(r["stack"] for r in records):
        cols.insert(1, Column("stack", "stack", f_text))
    if any(r["target"] is not None for r in records):
        cols.insert(-1, Column("target", "victim target", f_text))
    alone = plan.alone()
    notes = [_load_words(plan, accelerators(measurements)),
             f"The victim runs {plan.victim_job}; its p50/p99/p99.9 are fio's completion latency (clat) from its histograms merged "
             "over the included repeats (never averaged).",
             "median p99 = the median of the included repeats' p99, each from its own histogram; settings = what the phase changed "
             "on the aggressors. "
             f"victim p99 vs alone = change of the victim's median p99 from the alone phase's ({alone.name if alone else '-'}: "
             "the first with no aggressor, else the first): this row's median p99 / the alone row's - 1, "
             "with a 95% bootstrap interval of that ratio "
             f"(each repeat's p99 from its own histogram; {stats.METHOD} method, {stats.RESAMPLES:,} resamples, fixed seed): "
             "higher / lower when the interval excludes no change, within noise when it includes it; "
             f"{stats.MIN_REPEATS} or more repeats on both sides are needed for a verdict.",
             HELD_RULE,
             "aggressors IOPS/MB/s (sum) = the sum over the phase's aggressors in each repeat, then the mean over the repeats; "
             "limit check = each aggressor's mean achieved rate against the limit its phase set (iops* in IOPS, mbps* in MiB/s).",
             EXCLUDED_NOTE]
    if any(r["target"] is not None for r in records):
        notes.append("victim target = the scenario's targets on the victim's job, judged on its mean IOPS, MB/s and merged p99.")
    if any(r.get("p99_change_why") == stats.FEWER for r in records):
        notes.append(f"victim p99 vs alone carries no verdict where a phase has {stats.FEWER}: run with repeats: 3 or more.")
    notes += [r["sentence"][0].upper() + r["sentence"][1:] + "." for r in records if not r["reference"]]
    facts, missing = _facts(measurements, cells, env, policy)
    return Table("load-neighbours", "Noisy neighbour: the victim's latency per phase", cols, records, notes, facts, missing)


def load_tables(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str], lp: LoadPlan, *,
                targets: Sequence[Target] = (), env: Environment | None = None,
                policy: RepeatPolicy = RepeatPolicy(1, 1)) -> list[Table]:
    """The tables of a load run; a run across several hosts adds the per-host table."""
    by_host = [per_host_table(host_steps(measurements, lp), lp, accelerators(measurements))] if len(hosts_of(measurements)) > 1 else []
    if lp.kind == "neighbours":
        phases = neighbour_rows(measurements, cells, lp, targets)
        figs = [f for p in phases for f in (p.victim, p.aggressors) if f is not None]
        return [neighbour_table(phases, lp, measurements, cells, env=env, policy=policy), per_vm_table(figs, lp, measurements), *by_host]
    rows = scaling_rows(measurements, cells, lp, jobs, targets)
    return [scaling_table(rows, lp, measurements, cells, env=env, policy=policy),
            per_vm_table([r.guest for r in rows], lp, measurements), *by_host]


def load_header(lp: LoadPlan) -> str:
    """The header's line for a load run."""
    if lp.kind == "neighbours":
        return (f"noisy neighbour: victim {lp.victim_job}, aggressors {lp.aggressor_job}; phases "
                + ", ".join(f"{s.name} ({s.count('aggressor')} aggressors)" for s in lp.steps))
    return "scaling: " + ", ".join(s.name for s in lp.steps) + " at once"
