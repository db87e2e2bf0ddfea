"""A tune as report tables (pure): the journey (each round: what it kept, the goal's figure
before and after, the effect with its interval and verdict, repeats, boots), the final
settings against the start, and the snippets that apply them.  Rendered by
:func:`vmbench.report.render.render` (text, Markdown, CSV, JSON).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..advice.model import GoalMetric, Recommendation, Snippet
from ..report.tables import Column, Table, delta_pct, f_int, f_mb, f_ms, f_text
from ..scenario.axes import settings_of, stored_setting
from ..units import format_duration
from .engine import Tune
from ..advice.table import delta_text as effect
from .search import Round, risk_words, spent


def _figure(metric: GoalMetric, value: float | None) -> str:
    if value is None:
        return "-"
    if metric is GoalMetric.IOPS:
        return f_int(value)
    if metric is GoalMetric.MBPS:
        return f_mb(value)
    if metric is GoalMetric.CPU_PER_IO:
        return f"{value:.1f}"
    return f_ms(value)


def _unit(metric: GoalMetric) -> str:
    return {GoalMetric.IOPS: "IOPS", GoalMetric.MBPS: "MB/s", GoalMetric.CPU_PER_IO: "µs/IO"}.get(metric, f"ms ({metric.value})")


def header(tune: Tune) -> dict[str, str]:
    boots, seconds = spent(tune.rounds)
    return {
        "tune": f"{tune.id} ({tune.name}, {tune.path})",
        "goal": f"{tune.goal} ({'higher' if tune.goal.metric.higher_is_better else 'lower'} is better)",
        "allowed risks": ", ".join(sorted(r.value for r in tune.allow)) or "none",
        "start": tune.start_source or "the scenario's vm: settings",
        "budget": f"{tune.budget.describe()}; spent {boots} boots, {format_duration(seconds)} (estimated)",
        "rounds": str(len(tune.rounds)),
        "stopped": tune.stop or f"not finished: `vmbench tune --resume {tune.id}` goes on",
    }


def journey_table(tune: Tune) -> Table:
    metric = tune.goal.metric
    records = [_record(r, metric) for r in tune.rounds]
    cols = [
        Column("round", "round"), Column("run", "run"), Column("tried", "tried", f_text), Column("kept", "kept", f_text),
        Column("before", f"{tune.goal.job} {_unit(metric)} before", lambda v: _figure(metric, v)),
        Column("after", "after", lambda v: _figure(metric, v)),
        Column("effect", f"effect on {tune.goal}", row_fmt=delta_pct("effect")),
        Column("repeats", "repeats", f_text), Column("boots", "boots", f_text),
    ]
    notes = ["Each round is a stored one-factor run: its baseline and one variation per value tried; the variation kept "
             "is the best significant improvement of the goal that is safe or allowed, and the next round's baseline.",
             "before/after: the goal's figure in the round's baseline and in the variation kept (or, where nothing was kept, "
             "the variation with the largest effect); effect: its change with the 95% interval and verdict."]
    for r in tune.rounds:
        if r.decision is None:
            continue
        if r.decision.chosen is None:
            notes.append(f"round {r.number}: {r.decision.why}")
            continue
        for h in r.decision.held_back:
            notes.append(f"round {r.number}: {h.label} improved {tune.goal} ({effect(h)}) but was not taken: "
                         + "; ".join(risk_words(h)) + f" (allow: [{', '.join(k.value for k in h.risks)}] to take it)")
    notes += [f"next round would have left out {name}: {why}" for name, why in tune.left_out]
    notes += list(tune.notes)
    return Table("tune-journey", f"Tuning journey: {tune.goal}", cols, records, notes)


def _record(r: Round, metric: GoalMetric) -> dict[str, Any]:
    d = r.decision
    rec: Recommendation | None = (d.top or d.best) if d else None
    if d is None:
        kept = f"(unfinished: {r.status})"
    elif d.chosen:
        kept = rec.label if rec else d.chosen
    else:
        kept = f"nothing (best: {rec.label})" if rec else "nothing"
    return {
        "round": r.number, "run": r.run, "tried": ", ".join(v.name for v in r.variations), "kept": kept,
        "before": rec.reference_value if rec else None, "after": rec.value if rec else None,
        "repeats": rec.repeats if rec else None, "boots": r.boots,
        "effect": rec.delta.value if rec else None, "effect_low": rec.delta.low if rec else None,
        "effect_high": rec.delta.high if rec else None, "effect_verdict": rec.delta.verdict if rec else None,
        "effect_why": rec.delta.why if rec else None, "decision": d.why if d else None,
    }


def _on_off(value: object) -> str:
    """A switch as the report's cells table shows it (on/off), anything else as stored."""
    return ("on" if value else "off") if isinstance(value, bool) else f_text(value)


def settings_table(tune: Tune) -> Table:
    start, final = settings_of(tune.start), settings_of(tune.final)
    keys = list(dict.fromkeys([*start, *final]))
    records = [{"setting": k, "start": stored_setting(start, k), "final": stored_setting(final, k),
                "changed": "changed" if start.get(k) != final.get(k) else ""} for k in keys]
    cols = [Column("setting", "setting"), Column("start", "start", _on_off), Column("final", "final", _on_off),
            Column("changed", "", f_text)]
    notes = [] if tune.changed() else ["The tune kept the start: nothing it tried improved the goal significantly."]
    return Table("tune-settings", "Final settings against the start", cols, records, notes)


def apply_table(tune: Tune, snippets: Sequence[Snippet]) -> Table:
    records = [{"kind": s.kind, "apply": s.text, "note": s.note} for s in snippets]
    cols = [Column("kind", "where"), Column("apply", "to apply (vmbench never runs it)", f_text), Column("note", "note", f_text)]
    notes = []
    if not tune.changed():
        notes.append("Nothing to apply: the start is the best setting found.")
    elif not snippets:
        notes.append("No snippet could be written for these settings.")
    return Table("tune-apply", "Applying the final settings", cols, records, notes)


def tune_tables(tune: Tune, snippets: Sequence[Snippet] = ()) -> tuple[dict[str, str], list[Table]]:
    """The header and tables of a tune, for :func:`vmbench.report.render.render`."""
    return header(tune), [journey_table(tune), settings_table(tune), apply_table(tune, snippets)]
