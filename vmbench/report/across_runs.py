"""Several stored runs side by side, each against a baseline run (``vmbench compare``).

Pure: runs in, table models and refusals out.  The same group
(:meth:`~vmbench.results.key.MeasurementKey.group`: side, cell, stack, layer, job) of each
run is put in one row with its median IOPS, MB/s and p99, and each run's change from
the baseline run with its bootstrap interval and verdict (:mod:`vmbench.report.stats`), on
the job's metric (:func:`job_metric`: the baseline run's plan names it; a run stored before
jobs had one reads as IOPS).  A fixed-rate group that fell short of its rate is flagged and
compared with nothing.

A pair is compared only when it is the same experiment (METHOD rule 2): equal fio
parameters (job hash), the same layer, the same accelerator, on the same host
(:data:`HOST_IDENTITY_KEYS` of the recorded environments).  Anything else is refused, with
the difference named, and never silently compared; a run from another host is refused as a
whole unless ``allow_other_host``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields, replace
from typing import Any, Callable, Mapping, Sequence

from ..fio.histogram import Histogram
from ..fio.job import Metric
from ..results.db import RunRow
from ..results.environment import HOST_IDENTITY_KEYS, Environment
from ..results.key import MeasurementKey
from ..results.plan import LoadPlan
from ..results.records import CellRecord, Measurement, Settings
from ..scenario.axes import stored_setting
from . import stats
from .rows import Figures, aggregate, group, judge_change, metric_of
from .stats import Delta
from .tables import Column, Table, by_iops, delta_pct, f_int, f_mb, f_ms, f_text, metric_header, metric_notes, saturation_notes

__all__ = ["HOST_IDENTITY_KEYS", "compare_header", "compare_runs", "groups_of", "host_differences", "job_metric",
           "param_differences", "refusal_of"]

RunInput = tuple[RunRow, Sequence[Measurement], Sequence[CellRecord]]  # (run, its measurements, its cells)


def label(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"R{i + 1}"


def host_differences(base: Environment, other: Environment) -> list[str]:
    """``key 'a' vs 'b'`` for each host identity key that differs (other first, as "B vs A")."""
    out = []
    for k in HOST_IDENTITY_KEYS:
        a, b = base.fact(k), other.fact(k)
        if a != b:
            out.append(f"{k} {_v(b)} vs {_v(a)}")
    return out


def _v(value) -> str:
    if value is None:
        return "(not recorded)"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return repr(value) if isinstance(value, str) else str(value)


def param_differences(base: Mapping[str, Any], other: Mapping[str, Any]) -> list[str]:
    """``name other vs base`` for each stored fio parameter that differs."""
    out = []
    for k in sorted(set(base) | set(other)):
        if k == "name":
            continue
        a, b = (base[k] if k in base else _MISSING), (other[k] if k in other else _MISSING)
        if a != b:
            out.append(f"{k} {_p(b)} vs {_p(a)}")
    return out


_MISSING = object()


def _p(value) -> str:
    if value is _MISSING:
        return "(not stored)"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def groups_of(measurements: Sequence[Measurement], cells: Sequence[CellRecord],
              load: LoadPlan | None = None) -> dict[MeasurementKey, list[Measurement]]:
    """The run's measurements by group; invalid cells left out; a load run's rows as step
    aggregates (:func:`load_aggregates`)."""
    names = {c.id: c.name for c in cells if c.id is not None}
    valid = {c.name for c in cells if c.valid}
    rows = []
    for m in measurements:
        if m.cell is None and m.cell_id in names:  # a row read without its cell's name
            m = replace(m, cell=names[m.cell_id])
        if m.side == "guest" and m.cell not in valid:
            continue
        rows.append(m)
    if any(m.load_step > 0 for m in rows):
        rows = [m for m in rows if not m.load_step] + load_aggregates(rows, load)
    return group(rows)


@dataclass(frozen=True)
class StepAggregate(Measurement):
    """A load step's part in one repeat, as runs are compared: a new record of the part's
    included rows, IOPS and bandwidth summed, histograms merged, the part as ``vm`` (0: every
    peer, or the victim; 1: the aggressors); ``part_vms`` its size, ``step_name`` the step's
    name and ``part_words`` the part in words."""

    part_vms: int = 0
    step_name: str = ""
    part_words: str = ""


def step_part(rows: Sequence[Measurement]) -> tuple[int | None, str | None]:
    """(the part's size, the step's name) of a group's rows; (None, None) for a group that is
    not a load step's."""
    first = rows[0]
    return (first.part_vms, first.step_name) if isinstance(first, StepAggregate) else (None, None)


#: a load step's rows are compared as these parts: the VMs summed (scaling), or the victim
#: and the aggressors summed apart (noisy neighbour); the part is the aggregate's ``vm``
_PART = {"victim": 0, "aggressor": 1}
_MEASUREMENT_FIELDS = tuple(f.name for f in fields(Measurement))


def load_aggregates(rows: Sequence[Measurement], lp: LoadPlan | None) -> list[Measurement]:
    """A load run's rows as one :class:`StepAggregate` per step part and repeat.  Excluded
    rows are left out, and so is a repeat missing one of the part's VMs (a sum over some of
    the VMs is not the step's)."""
    parts: dict[tuple, dict[int, list[Measurement]]] = {}
    for m in rows:
        if m.load_step <= 0:
            continue
        part = _PART.get(str(m.role), 0)
        key = (m.side, m.cell, m.stack, m.layer, m.job, m.load_step, part)
        parts.setdefault(key, {}).setdefault(m.repeat, []).append(m)
    out: list[Measurement] = []
    for (side, cell, stack, layer, job, step, part), by_repeat in parts.items():
        sp = lp.step(step) if lp else None
        role = next((r.role for rs in by_repeat.values() for r in rs), None)
        if sp is not None:
            want = sorted(v.vm for v in sp.vms if _PART.get(str(v.role), 0) == part)
        else:
            want = sorted({r.vm for rs in by_repeat.values() for r in rs})
        for repeat, rs in sorted(by_repeat.items()):
            inc = [r for r in rs if not r.excluded]
            if sorted(r.vm for r in inc) != want:
                continue
            first = {name: getattr(inc[0], name) for name in _MEASUREMENT_FIELDS}
            out.append(StepAggregate(**dict(first, vm=part, repeat=repeat, iops=sum(float(r.iops) for r in inc),
                                            bw_bytes=sum(float(r.bw_bytes) for r in inc),
                                            clat=Histogram.merged(r.clat for r in inc)),
                                     part_vms=len(want), step_name=sp.name if sp else str(step),
                                     part_words=_part_words(role, len(want))))
    return out


def _part_words(role: object, n: int) -> str:
    if role == "victim":
        return "victim"
    if role == "aggressor":
        return f"aggressors ({n} summed)"
    return f"{n} VM{'s' if n != 1 else ''} summed"


def refusal_of(key: MeasurementKey, a_rows: Sequence[Measurement], b_rows: Sequence[Measurement], a_fig: Figures, b_fig: Figures,
               la: str, lb: str) -> str | None:
    """Why two groups must not be compared (None when they may)."""
    what = f"{key.describe()}: run {lb} vs {la}"
    (a_vms, a_step), (b_vms, b_step) = step_part(a_rows), step_part(b_rows)
    if (a_vms, a_step) != (b_vms, b_step):
        return f"{what}: load step {key.load_step} differs: {b_step} ({b_vms} VMs) vs {a_step} ({a_vms} VMs)"
    for fig, lab in ((a_fig, la), (b_fig, lb)):
        if fig.job_hash == "mixed":
            return f"{what}: fio parameters differ between the repeats of run {lab}"
    if a_fig.job_hash != b_fig.job_hash:
        diffs = param_differences(a_rows[0].job_params.stored, b_rows[0].job_params.stored)
        if diffs:
            return f"{what}: fio parameters differ: {', '.join(diffs)}"
        return f"{what}: fio job hashes differ ({b_fig.job_hash} vs {a_fig.job_hash}) though the stored parameters are equal"
    acc_a = sorted({str(m.accelerator) for m in a_rows})
    acc_b = sorted({str(m.accelerator) for m in b_rows})
    if acc_a != acc_b:
        return f"{what}: accelerator {'/'.join(acc_b)} vs {'/'.join(acc_a)}"
    return None


def _setting(settings: Settings, key: str) -> object:
    """A stored setting as compared across runs: a row without it reads as its axis's
    ``unset`` (left to the hypervisor, or stored before the axis existed), so an old and a
    new run that both leave it to the hypervisor are equal; else the :data:`_MISSING` marker."""
    value = stored_setting(settings, key)
    return _MISSING if value is None else value


def _settings_note(a_rows: Sequence[Measurement], b_rows: Sequence[Measurement], la: str, lb: str) -> str:
    a, b = a_rows[0].settings, b_rows[0].settings
    pairs = [(k, _setting(a, k), _setting(b, k)) for k in sorted(set(a) | set(b))]
    diffs = [f"{k} {_p(vb)} ({lb}) vs {_p(va)} ({la})" for k, va, vb in pairs if va != vb]
    return f"VM settings differ: {', '.join(diffs)}" if diffs else ""


def _layer_refusals(groups: list[dict[MeasurementKey, list[Measurement]]], baseline_index: int, excluded: set[int], labels: list[str],
                    refusals: list[str]) -> set[tuple[int, MeasurementKey]]:
    """A stack layer of the baseline that another run measured at the same depth of the same
    stack under another name (its stack was built differently) is refused, by name; returns
    the (run index, baseline key) pairs refused so."""
    by_depth: dict[tuple[MeasurementKey, object], dict[int, MeasurementKey]] = {}
    for i, g in enumerate(groups):
        for k, rows in g.items():
            if k.side == "guest" and k.stack is not None:  # the group's key but its layer, and the layer's depth
                by_depth.setdefault((replace(k, layer=""), rows[0].depth), {})[i] = k
    out: set[tuple[int, MeasurementKey]] = set()
    la = labels[baseline_index]
    for seen in by_depth.values():
        base_key = seen.get(baseline_index)
        for i, k in seen.items():
            if base_key is None or i in excluded or i == baseline_index or k.layer == base_key.layer:
                continue
            if k not in groups[baseline_index] and base_key not in groups[i]:
                refusals.append(f"{base_key.describe()}: run {labels[i]} vs {la}: layers differ: {k.layer} vs {base_key.layer}")
                out.add((i, base_key))
    return out


def job_metric(job: str, runs: Sequence[RunInput], baseline_index: int, rows: Sequence[Measurement] | None) -> Metric:
    """The metric ``job`` is compared on: the baseline run's plan's; else the first other
    run's plan that names one; else (a plan stored before jobs had one) as
    :func:`~vmbench.report.rows.metric_of` reads the stored fio parameters."""
    order = [baseline_index] + [i for i in range(len(runs)) if i != baseline_index]
    for i in order:
        named = next((j.metric for j in runs[i][0].plan.jobs if j.name == job and j.metric), None)
        if named is not None:
            return named
    return metric_of(job, rows, None)


def compare_runs(runs: Sequence[RunInput], baseline_index: int = 0, *,
                 allow_other_host: bool = False) -> tuple[list[Table], list[str]]:
    """One table with every run side by side and each run's change from the baseline run;
    and the refusals: what was not compared and why."""
    if len(runs) < 2:
        raise ValueError("compare_runs needs at least two runs")
    labels = [label(i) for i in range(len(runs))]
    la = labels[baseline_index]
    groups = [groups_of(meas, cells, run.plan.load) for run, meas, cells in runs]
    refusals: list[str] = []
    excluded = _other_hosts(runs, baseline_index, labels, allow_other_host, refusals)
    keys: list[MeasurementKey] = []
    for i, g in enumerate(groups):
        if i not in excluded:
            keys += [k for k in g if k not in keys]
    layer_refused = _layer_refusals(groups, baseline_index, excluded, labels, refusals)
    c = _Comparison(runs, baseline_index, labels, groups, excluded, layer_refused, refusals)

    records = []
    metrics: list[Metric] = []
    for key in keys:
        rec, metric = _record(c, key)
        records.append(rec)
        metrics.append(metric)

    used = list(dict.fromkeys(metrics))
    if by_iops(used):  # as before jobs had a metric
        for r in records:
            del r["metric"]
    cols = _columns(c, records, used)
    notes = _notes(records, labels, la, used)
    facts, missing = _facts(runs, labels, baseline_index, excluded, allow_other_host)
    title = "Runs compared: " + ", ".join(f"{lab} = run {r.id}" for lab, (r, _, _) in zip(labels, runs)) + f" (baseline {la})"
    return [Table("compare", title, cols, records, notes, facts, missing)], refusals


@dataclass(frozen=True)
class _Comparison:
    """What each row of a comparison is made from: the runs, their labels and groups, the
    runs left out (another host), the layers refused by name, and the refusals so far."""

    runs: Sequence[RunInput]
    baseline_index: int
    labels: list[str]
    groups: list[dict[MeasurementKey, list[Measurement]]]
    excluded: set[int]
    layer_refused: set[tuple[int, MeasurementKey]]
    refusals: list[str]

    @property
    def la(self) -> str:
        return self.labels[self.baseline_index]


def _other_hosts(runs: Sequence[RunInput], baseline_index: int, labels: list[str], allow_other_host: bool,
                 refusals: list[str]) -> set[int]:
    """The runs from another host than the baseline's, refused as a whole (none with
    ``allow_other_host``)."""
    base_run = runs[baseline_index][0]
    la = labels[baseline_index]
    excluded: set[int] = set()
    for i, (run, _, _) in enumerate(runs):
        if i == baseline_index:
            continue
        diffs = host_differences(base_run.environment, run.environment)
        if diffs and not allow_other_host:
            excluded.add(i)
            refusals.append(f"run {labels[i]} ({run.id}, {run.tag}): another host than baseline run {la} ({base_run.id}, {base_run.tag}): "
                            f"{'; '.join(diffs)} (--allow-other-host compares them anyway)")
    return excluded


def _record(c: _Comparison, key: MeasurementKey) -> tuple[dict, Metric]:
    """The row of ``key``: each run's figures and change from the baseline, and the notes;
    and the metric it is judged by."""
    rec: dict = {"job": key.job, "side": key.side, "cell": key.cell or "", "stack": key.stack or "", "layer": key.layer}
    notes: list[str] = []
    base_rows = c.groups[c.baseline_index].get(key)
    metric = job_metric(key.job, c.runs, c.baseline_index, base_rows or next(g[key] for g in c.groups if key in g))
    rec["metric"] = stats.label(metric)
    if key.load_step:
        first = (base_rows or next(g[key] for g in c.groups if key in g))[0]
        part = first if isinstance(first, StepAggregate) else None
        rec.update({"load_step": key.load_step, "step": f"{key.load_step}: {part.step_name if part else None}",
                    "vms": part.part_words if part else None})
    base_fig = aggregate(base_rows) if base_rows else None
    for i, lab in enumerate(c.labels):
        fig, delta = _judge_run(c, key, i, base_rows, base_fig, metric, notes)
        rec.update({f"{lab}_iops": fig.iops if fig else None, f"{lab}_mb_s": fig.mb_s if fig else None,
                    f"{lab}_p99_ms": fig.p99_ms if fig else None, f"{lab}_repeats": fig.repeats if fig else None})
        if metric not in (Metric.IOPS, Metric.MBPS, Metric.P99):  # a latency not in the table's columns
            rec[f"{lab}_metric_ms"] = fig.value_of(metric) if fig else None
        if i != c.baseline_index:
            d = f"{lab}_vs_baseline"
            rec.update({d: delta.value if delta else None, d + "_low": delta.low if delta else None,
                        d + "_high": delta.high if delta else None, d + "_verdict": delta.verdict if delta else None,
                        d + "_why": delta.why if delta else None})
    rec["note"] = "; ".join(filter(None, notes))
    return rec, metric


def _judge_run(c: _Comparison, key: MeasurementKey, i: int, base_rows: list[Measurement] | None, base_fig: Figures | None,
               metric: Metric, notes: list[str]) -> tuple[Figures | None, Delta | None]:
    """Run ``i``'s figures of ``key`` (None when it has none, or they were refused) and its
    change from the baseline's; what is said about them goes to ``notes``, a refusal also to
    the comparison's refusals."""
    lab = c.labels[i]
    rows = None if i in c.excluded else c.groups[i].get(key)
    fig = aggregate(rows) if rows else None
    delta = None
    if i in c.excluded:
        pass
    elif rows is None:
        notes.append(f"{lab}: layers differ (see below)" if (i, key) in c.layer_refused else f"not in {lab}")
    elif i != c.baseline_index and base_rows and base_fig is not None and fig is not None:
        why = refusal_of(key, base_rows, rows, base_fig, fig, c.la, lab)
        if why:
            c.refusals.append(why)
            notes.append(f"{lab} refused (see below)")
            fig = None
        else:
            delta = judge_change(fig, base_fig, metric)
            notes.append(_settings_note(base_rows, rows, c.la, lab))
    if fig is not None and fig.saturated:
        notes.append(f"{lab} {fig.saturated}: not compared")
    return fig, delta


def _columns(c: _Comparison, records: list[dict], used: list[Metric]) -> list[Column]:
    """The table's columns: the row's key, each compared run's figures, each change from the
    baseline, the note (no stack column when no row has a stack)."""
    cols = [Column("job", "job")] + ([Column("metric", "judged by", f_text)] if len(used) > 1 else [])
    cols += [Column("side", "side"), Column("cell", "cell"), Column("stack", "stack", f_text), Column("layer", "layer")]
    if any(r.get("load_step") for r in records):
        cols += [Column("step", "load step", f_text), Column("vms", "VMs", f_text)]
    for i, lab in enumerate(c.labels):
        if i in c.excluded:
            continue
        cols += [Column(f"{lab}_iops", f"IOPS {lab}", f_int), Column(f"{lab}_mb_s", f"MB/s {lab}", f_mb),
                 Column(f"{lab}_p99_ms", f"p99 ms {lab}", f_ms)]
        if any(f"{lab}_metric_ms" in r for r in records):
            cols.append(Column(f"{lab}_metric_ms", f"judged ms {lab}", row_fmt=_judged_ms(f"{lab}_metric_ms")))
    for i, lab in enumerate(c.labels):
        if i != c.baseline_index and i not in c.excluded:
            cols.append(Column(f"{lab}_vs_baseline", metric_header(f"{lab} vs {c.la}", used), row_fmt=delta_pct(f"{lab}_vs_baseline")))
    cols.append(Column("note", "note", f_text))
    if not any(r["stack"] for r in records):
        cols = [col for col in cols if col.key != "stack"]
    return cols


def _notes(records: list[dict], labels: list[str], la: str, used: list[Metric]) -> list[str]:
    """The notes under the table: what a change is, and each method the rows use."""
    of = "median IOPS" if by_iops(used) else "the job's metric"
    notes = [f"X vs {la} = change in {of} from the baseline run {la} for the same side, cell, stack, layer and job "
                 "(MB/s and p99 are medians and merged-histogram percentiles of each run's repeats)."]
    notes += metric_notes(used, f"X vs {la}", gap=False)
    if any(f"{lab}_metric_ms" in r for r in records for lab in labels):
        notes.append("judged ms X = the latency percentile the job is judged by, from run X's merged histograms.")
    notes += saturation_notes(records)
    if any(r.get("load_step") for r in records):
        notes.append("A load step is compared as its aggregate: per repeat, IOPS and MB/s summed over the step's VMs (the victim "
                     "and the aggressors apart), histograms merged; excluded rows and repeats missing a VM are left out; "
                     "steps are compared only with the same step of the same size.")
    if any(r.get(f"{lab}_vs_baseline_low") is not None for r in records for lab in labels):
        notes.append(stats.describe_method(metrics=used))
    if any(r.get(f"{lab}_vs_baseline_why") == stats.FEWER for r in records for lab in labels):
        notes.append(f"Changes carry no verdict where a run has {stats.FEWER} of that row: the repeats cannot tell a change from noise.")
    return notes


def _judged_ms(key: str) -> Callable[[dict], str]:
    """A run's figure of the latency its row is judged by: "p99.9 2.31"."""
    return lambda r: f"{r['metric']} {f_ms(r[key])}" if key in r else ""


def _facts(runs: Sequence[RunInput], labels: list[str], baseline_index: int, excluded: set[int],
           allow_other_host: bool) -> tuple[dict[str, str], list[str]]:
    base_env = runs[baseline_index][0].environment
    facts: dict[str, str] = {}
    missing: list[str] = []
    ident = ", ".join(f"{k} {_v(base_env.fact(k))}" for k in HOST_IDENTITY_KEYS)
    others = []
    for i, (run, _, _) in enumerate(runs):
        diffs = host_differences(base_env, run.environment) if i != baseline_index else []
        if diffs:
            others.append(f"{labels[i]} differs: {'; '.join(diffs)}" + ("" if allow_other_host else " (not compared)"))
        for k in HOST_IDENTITY_KEYS:
            if run.environment.fact(k) is None:
                missing.append(f"{k} of run {labels[i]}")
    facts["hosts"] = (f"{labels[baseline_index]}: {ident}" + ("; " + "; ".join(others) if others else "; every run on this host")
                      + ("; other hosts allowed (--allow-other-host)" if allow_other_host and others else ""))
    accs = []
    for i, (_, meas, _) in enumerate(runs):
        accs.append(f"{labels[i]} {'/'.join(sorted({str(m.accelerator) for m in meas if m.side == 'guest'})) or '-'}")
    facts["guest accelerator"] = ", ".join(accs)
    facts["repeats"] = ", ".join(f"{labels[i]} {run.plan.repeat_policy.label()}" for i, (run, _, _) in enumerate(runs))
    return facts, missing


def compare_header(runs: Sequence[RunInput], baseline_index: int, allow_other_host: bool) -> dict:
    """The header lines ``vmbench compare`` prints above the table."""
    labels = [label(i) for i in range(len(runs))]
    base_env = runs[baseline_index][0].environment
    header = {}
    for i, (run, _, _) in enumerate(runs):
        env = run.environment
        header[labels[i]] = (f"run {run.id} ({run.tag}), {run.scenario_name}, {run.status}, started {run.started_at}; "
                             f"host {_known(env.hostname)}, kernel {_known(env.host_kernel)}, QEMU {_known(env.qemu_version)}, "
                             f"fio {_known(env.host_fio)}" + (" [baseline]" if i == baseline_index else ""))
    other = [labels[i] for i, (run, _, _) in enumerate(runs) if i != baseline_index and host_differences(base_env, run.environment)]
    if other:
        header["hosts"] = (f"OTHER HOST in {', '.join(other)}: compared anyway (--allow-other-host)" if allow_other_host
                           else f"other host in {', '.join(other)}: not compared (see refusals)")
    return header


def _known(value: object) -> object:
    return "?" if value is None else value
