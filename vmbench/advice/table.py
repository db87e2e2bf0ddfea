"""The report's advice section (issue 18): :class:`~vmbench.advice.model.Advice` laid out as two
tables, rendered like every other (text, Markdown, JSON by :mod:`vmbench.report.render`; HTML by
:mod:`vmbench.report.html`); :func:`report_with_advice` puts them after a run's report tables.

* ``advice``: per goal, the measured changes: the recommendation first, then the other
  improvements (the risky ones labelled), then what the evidence does not support (within
  noise, worse, not judged), each with its cells, figures, delta with interval and verdict,
  repeats, risks and evidence.
* ``advice-next``: where the best cell stands ("is my number good?"), what was not tried
  that commonly matters for the goal, the commands that apply the recommendation, and the
  notes (the accelerator and the load every figure was measured under).

:func:`advice_json` is the whole advice as plain data (``vmbench advise --format json``).
"""

from __future__ import annotations

from typing import Any, Sequence

from ..report.build import build_report, collector_paused
from ..report.load import RunData
from ..report.stats import FEWER, NOISE
from ..report.summary import CHANGE_NEXT
from ..report.tables import Column, Table, f_text
from .model import NOT_MEASURED, RISKS, Advice, GoalMetric, Recommendation, Snippet

STATUS_TOP = "recommended"


def report_with_advice(data: RunData) -> tuple[dict, list[Table]]:
    """A run's report (:func:`vmbench.report.build.build_report`) with its advice section last
    (the run's own goals and allowed risks, no VM read): what ``vmbench report`` prints."""
    with collector_paused():
        header, tables = build_report(data)
        return header, tables + advice_section(data, header)


def advice_section(data: RunData, header: dict) -> list[Table]:
    """The advice's tables of a run whose report's header is made (the run's own goals and
    allowed risks, no VM read)."""
    # the ranking is imported when advice is made: tune/search.py reads delta_text from here, and a
    # tune's plan ranks nothing (start-up time)
    from .rank import advise

    return advice_tables(advise(data), header)


def delta_text(r: Recommendation) -> str:
    """"+12.3% [+4.1, +20.2] faster"; CPU per I/O "-3.1 µs/IO [-4.0, -2.2] cheaper"."""
    d = r.delta
    if d.value is None:
        return f"- ({d.why})" if d.why else "-"
    if r.goal.metric is GoalMetric.CPU_PER_IO:
        def point(v: float) -> str:
            return f"{v:+.1f} µs/IO"

        def bound(v: float) -> str:
            return f"{v:+.1f}"
    else:
        def point(v: float) -> str:
            return f"{v * 100:+.1f}%"

        def bound(v: float) -> str:
            return f"{v * 100:+.1f}"
    if d.verdict is not None and d.low is not None and d.high is not None:
        return f"{point(d.value)} [{bound(d.low)}, {bound(d.high)}] {d.verdict}"
    return f"{point(d.value)} (no verdict: {d.why})" if d.why else point(d.value)


def status(r: Recommendation, top: bool = False) -> str:
    if r.improves:
        if top:
            return STATUS_TOP
        if r.suspect:
            return f"improves, but suspect: {r.suspect}"
        return "improves" if r.allowed else "improves, but risky: not allowed (--allow " + ", ".join(x.value for x in r.risks) + ")"
    d = r.delta
    if d.verdict is None:
        return f"not judged: {d.why}" if d.why else "not judged"
    if d.verdict == NOISE:
        return "not supported: within noise"
    return f"not supported: {d.verdict}"


def _num(v: float | None, r: Recommendation) -> str:
    if v is None:
        return "-"
    if r.goal.metric is GoalMetric.IOPS:
        return f"{v:,.0f}"
    if r.goal.metric in (GoalMetric.MBPS, GoalMetric.CPU_PER_IO):
        return f"{v:,.1f}"
    return f"{v:.3f}" if v < 1 else f"{v:.2f}"


def record(r: Recommendation, top: bool = False) -> dict:
    d = r.delta
    return {"goal": f"{r.job}:{r.goal.metric.value}", "goal_source": r.goal.source, "status": status(r, top),
            "change": r.label, "cell": r.cell, "reference": r.reference,
            "value": r.value, "reference_value": r.reference_value, "unit": r.unit,
            "figures": f"{_num(r.reference_value, r)} -> {_num(r.value, r)} {r.unit}",
            "delta": d.value, "delta_low": d.low, "delta_high": d.high, "delta_verdict": d.verdict, "delta_why": d.why,
            "delta_text": delta_text(r), "repeats": r.repeats,
            "risks": ", ".join(x.value for x in r.risks), "suspect": r.suspect, "evidence": "; ".join(r.evidence),
            "settings": dict(r.settings)}


def advice_tables(advice: Advice, header: dict | None = None) -> list[Table]:
    """The two tables of the advice section."""
    header = header or {}
    records = []
    for goal in advice.goals:
        top = advice.top(goal)
        mine = [r for r in advice.recommendations if r.goal == goal]
        records += [record(r, r is top) for r in mine]
        records += [record(r) for r in advice.unsupported if r.goal == goal]
    cols = [Column("goal", "goal (job:metric)"), Column("status", "status"), Column("change", "change", keep=True),
            Column("cell", "cell", keep=True), Column("reference", "against"),
            Column("figures", "figure (metric)", f_text, detail=True), Column("delta_text", "change [95% interval] verdict", f_text, keep=True),
            Column("repeats", "repeats", detail=True), Column("risks", "risks", f_text), Column("evidence", "evidence", f_text, detail=True)]
    notes = [f"goal {g}: from {g.source}" for g in advice.goals]
    notes.append("Each change is a cell against its reference on the goal's metric (the baseline cell; the step before in a "
                 "journey; the layer below or the baseline's same layer for stacks), with the report's bootstrap interval; "
                 "only a significant verdict in the goal's direction is an improvement. A change that risks data is never "
                 "recommended first unless its risk is allowed by name (vmbench advise --allow RISK).")
    risky = sorted({x for r in advice.recommendations + advice.unsupported for x in r.risks}, key=lambda x: list(RISKS).index(x))
    notes += [f"{x.value}: {RISKS[x]}" for x in risky]
    notes += list(advice.notes)
    facts = {k: str(header[k]) for k in ("accelerator", "load") if header.get(k)}
    changes = Table("advice", f"Advice for run {advice.run}: the changes measured, ranked for each goal", cols, records, notes, facts)
    nxt = [{"what": CHANGE_NEXT, "text": change_next(advice)}]
    nxt += [{"what": "is my number good?", "text": s} for s in advice.standing]
    nxt += [{"what": "not tried", "text": s} for s in grouped_not_tried(advice.not_tried)]
    top = advice.top()
    if top is not None:
        nxt.append({"what": "recommendation", "text": f"{top.job}:{top.goal.metric.value}: {top.label} ({delta_text(top)}, "
                                                       f"{top.cell} against {top.reference})"})
    nxt += [{"what": f"apply ({s.kind})", "text": s.text + (f"  # {s.note}" if s.note else "")} for s in advice.apply]
    if top is not None and not advice.apply:
        nxt.append({"what": "apply", "text": "no command: " + next((n for n in advice.notes if "apply" in n or "command" in n),
                                                                     "nothing to apply")})
    nxt_table = Table("advice-next", "Advice: where the run stands, what to try next, how to apply",
                      [Column("what", "what"), Column("text", "advice", f_text)], nxt,
                      ["vmbench never applies anything to a VM: the commands are for you to review and run."] if advice.apply else [],
                      facts)
    return [changes, nxt_table]


def change_next(advice: Advice) -> str:
    """What to change next, in one sentence: the recommendation with its effect and the command
    that applies it; or why there is none yet (fewer than 3 repeats) and, when the run measured
    no change worth making, the shipped scenario to run next."""
    top = advice.top()
    if top is not None:
        how = apply_text(advice.apply, advice.driver)
        return (f"{top.label} ({top.job} {top.unit} {delta_text(top)})" + (f"; apply: {how}" if how else ""))
    from .rank import changed_settings  # here, as report_with_advice's advise

    # the changes of a VM or storage setting (a layer's cost is measured, but is not a setting to change)
    measured = [r for r in advice.recommendations + advice.unsupported if changed_settings(r)]
    if measured and all(r.delta.why == FEWER for r in measured if not r.delta.judged) and not any(r.delta.judged for r in measured):
        return f"not judged yet ({FEWER}): add `repeats: 3` to the scenario and run it again"
    if not measured:
        said = "this run tried no setting change"
    else:
        held = [r for r in measured if r.improves]
        said = "keep the baseline's settings: no change measured was a clear improvement without a flag or a risk"
        if held:
            r = held[0]
            why = f"flagged: {r.suspect}" if r.suspect else "risky: " + ", ".join(x.value for x in r.risks)
            said += f" ({r.label} improved {r.job} {delta_text(r)}, but {why})"
    return said + (f"; {advice.next_run}" if advice.next_run else "")


def apply_text(snippets: Sequence[Snippet], driver: str) -> str:
    """How to apply the recommendation on the run's own hypervisor, in a line: its first
    command, and where the rest is."""
    mine = [s for s in snippets if s.kind == driver] or [s for s in snippets if s.kind == "zfs"] or list(snippets)
    if not mine:
        return ""
    first, more = mine[0], len(mine) - 1
    if "\n" in first.text:
        return f"the {first.kind} snippet under \"apply ({first.kind})\" below"
    return f"`{first.text}`" + (f" and the {more} more under \"apply ({first.kind})\" below" if more else "")


def grouped_not_tried(not_tried: Sequence[str]) -> list[str]:
    """"GOAL: not measured: WHAT" lines as one line per WHAT naming its goals, in first-seen order
    (the JSON keeps each line)."""
    goals: dict[str, list[str]] = {}
    for line in not_tried:
        goal, sep, what = line.partition(NOT_MEASURED)
        goals.setdefault(what if sep else line, []).append(goal if sep else "")
    return [f"{what}: not measured ({', '.join(g)})" if any(g) else what for what, g in goals.items()]


def advice_json(advice: Advice) -> dict[str, Any]:
    """The advice as plain data."""
    top = advice.top()
    return {
        "run": advice.run,
        "goals": [{"goal": str(g), "job": g.job, "metric": g.metric.value, "source": g.source,
                   "top": record(t, True) if (t := advice.top(g)) is not None else None} for g in advice.goals],
        "top": record(top, True) if top is not None else None,
        "recommendations": [record(r, r is top) for r in advice.recommendations],
        "unsupported": [record(r) for r in advice.unsupported],
        "change_next": change_next(advice),
        "next_run": advice.next_run or None,
        "standing": list(advice.standing),
        "not_tried": list(advice.not_tried),
        "apply": [{"kind": s.kind, "text": s.text, "note": s.note} for s in advice.apply],
        "notes": list(advice.notes),
        "risks": {x.value: RISKS[x] for r in advice.recommendations + advice.unsupported for x in r.risks},
    }
