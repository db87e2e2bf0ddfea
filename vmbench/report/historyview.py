"""``vmbench history`` as text (fits 120 columns) and as JSON; pure.

Text: the runs followed (date, tag, host in a few words) and the runs left out with the
reason; then one block per series (job, side, cell, stack, layer): a column per run with the
judged figure, its interval, and the change from the previous comparable run with its
interval and verdict; the steps found in it, each with what changed in the stored
environment between the runs either side.  A block wider than the terminal wraps: the runs go
on in the next block of columns under the same row names.
"""

from __future__ import annotations

import textwrap
from typing import Any

from ..fio.job import Metric
from . import stats
from .history import History, Point, Series, Step
from .tables import f_int, f_mb, f_ms

WIDTH = 120
NAME = 14  # the row names' column
COLUMN = 17  # a run's column

NO_CHANGE = ("no environment change recorded between these runs: the cause is not in what vmbench stores "
             "(the disk or file system underneath, a limit set outside vmbench, another load on the host)")


def figure(metric: Metric, v: float | None) -> str:
    if v is None:
        return "-"
    return f_int(v) if metric is Metric.IOPS else f_mb(v) if metric is Metric.MBPS else f_ms(v)


def unit(metric: Metric) -> str:
    return stats.label(metric) + ("" if metric.higher_is_better else " ms")


def interval_text(metric: Metric, p: Point) -> str:
    if p.low is None or p.high is None:
        return "(<3 repeats)" if p.figures.repeats < stats.MIN_REPEATS else "-"
    return f"{figure(metric, p.low)}-{figure(metric, p.high)}"


def change_cells(p: Point) -> tuple[str, str]:
    """(the change and its verdict, its interval) of a point against the previous one."""
    if p.refused:
        return "not compared", "(see below)"
    d = p.change
    if d is None or d.value is None:
        return "-", ""
    text = f"{d.value * 100:+.1f}%"
    if d.verdict is None:
        return text + " no verdict", f"({d.why})" if d.why and d.why != stats.FEWER else ""
    short = {stats.NOISE: "noise"}.get(d.verdict, d.verdict.split(",")[0])
    return f"{text} {short}", f"[{d.low * 100:+.1f}, {d.high * 100:+.1f}]" if d.low is not None and d.high is not None else ""


def describe_step(h: History, s: Series, st: Step) -> list[str]:
    """A step in words, and what changed in the environment there."""
    d = st.delta
    before, after = h.runs[st.before[-1]], h.runs[st.after[0]]
    pooled = (f"runs {h.runs[st.before[0]].label}-{before.label}" if len(st.before) > 1 else f"run {before.label}") + " vs " + (
        f"runs {after.label}-{h.runs[st.after[-1]].label}" if len(st.after) > 1 else f"run {after.label}")
    assert d.value is not None and d.low is not None and d.high is not None  # a step is judged
    lines = [f"STEP at {after.label} ({after.date}): {unit(s.metric)} {d.value * 100:+.1f}% "
             f"[{d.low * 100:+.1f}, {d.high * 100:+.1f}] {d.verdict} ({pooled}, repeats pooled)"]
    if st.changes:
        lines += [f"  changed between {before.label} and {after.label}: " + "; ".join(c.describe() for c in st.changes)]
    else:
        lines += [f"  {NO_CHANGE}"]
    return lines


def render_text(h: History, width: int = WIDTH) -> str:
    out = [f"History of scenario {h.scenario}: {len(h.runs)} run(s) compared"]
    for r in h.runs:
        out.append(f"  {r.label:>5}  {r.started_at[:16].replace('T', ' ')}  {r.tag}  {r.short}")
    if h.left_out:
        out.append("left out:")
        out += [f"  {why}" for why in h.left_out]
    steps = h.steps
    out.append(f"steps found: {len(steps)}" + (": " + "; ".join(f"{s.key.describe()} at {h.runs[st.after[0]].label} "
                                                                   f"({st.delta.value * 100:+.1f}%)"
                                                                   for s, st in steps if st.delta.value is not None)
                                                 if steps else " (no figure moved beyond noise)"))
    for s in h.series:
        out.append("")
        out += _series_block(h, s, width)
    out.append("")
    out += _notes()
    return "\n".join(wrapped for line in out for wrapped in _fit(line, width)) + "\n"


def _fit(line: str, width: int) -> list[str]:
    """A line as it fits ``width``: wrapped, the rest indented under it."""
    if len(line) <= width:
        return [line]
    indent = " " * (len(line) - len(line.lstrip()) + 2)
    return textwrap.wrap(line, width, subsequent_indent=indent, break_on_hyphens=False)


def _series_block(h: History, s: Series, width: int) -> list[str]:
    out = [s.title + f" (judged by {unit(s.metric)}: median of the repeats, 95% interval)", "-" * min(width, len(s.title) + 40)]
    per = max(1, (width - NAME) // COLUMN)
    pts = list(s.points)
    for first in range(0, len(pts), per):
        chunk = pts[first:first + per]
        rows: list[list[str]] = [["run"], ["date"], [unit(s.metric)], ["  interval"], ["vs previous"], ["  interval"]]
        for p in chunk:
            r = h.runs[p.run]
            change, band = change_cells(p)
            for row, cell in zip(rows, [r.label + (" STEP" if any(st.at == pts.index(p) for st in s.steps) else ""),
                                        r.date, figure(s.metric, p.value), interval_text(s.metric, p), change, band]):
                row.append(cell)
        for row in rows:
            out.append(row[0].ljust(NAME) + "".join(c[:COLUMN - 1].ljust(COLUMN) for c in row[1:]).rstrip())
        if first + per < len(pts):
            out.append("")
    for p in pts:
        if p.refused:
            out.append(f"not compared with the run before {h.runs[p.run].label}: {p.refused}")
    for st in s.steps:
        out += describe_step(h, s, st)
    return out


def _notes() -> list[str]:
    return [
        "Each figure is the median of the run's repeats of the job's metric; interval = 95% bootstrap interval of that median.",
        "vs previous = change from the previous comparable run: " + stats.describe_method(),
        "STEP = the figure moved beyond noise there: the repeats of the runs before and after it, pooled, differ with an interval "
        "that excludes no change, by at least 10% and by more than any run-to-run change on either side (one side needs two "
        "runs or more: two runs alone never make a step).",
    ]


def to_json(h: History) -> dict[str, Any]:
    """The history as plain values."""
    def delta(d: stats.Delta | None) -> dict | None:
        return None if d is None else {"value": d.value, "low": d.low, "high": d.high, "verdict": d.verdict, "why": d.why}

    return {
        "scenario": h.scenario,
        "runs": [{"id": r.id, "tag": r.tag, "started_at": r.started_at, "environment": r.short} for r in h.runs],
        "left_out": list(h.left_out),
        "series": [{
            "job": s.key.job, "side": s.key.side, "cell": s.key.cell, "stack": s.key.stack, "layer": s.key.layer,
            "load_step": s.key.load_step, "vm": s.key.vm, "metric": s.metric.value,
            "points": [{"run": h.runs[p.run].id, "value": p.value, "low": p.low, "high": p.high, "repeats": p.figures.repeats,
                        "iops": p.figures.iops, "mb_s": p.figures.mb_s, "p99_ms": p.figures.p99_ms,
                        "vs_previous": delta(p.change), "refused": p.refused} for p in s.points],
            "steps": [{"run": h.runs[st.after[0]].id, "before": [h.runs[i].id for i in st.before],
                       "after": [h.runs[i].id for i in st.after], "change": delta(st.delta),
                       "environment_changes": [{"name": c.name, "key": c.key, "before": c.before, "after": c.after} for c in st.changes]}
                      for st in s.steps],
        } for s in h.series],
    }


def step_lines(h: History) -> list[str]:
    """Every step of the history in words (for ``vmbench run --quiet``'s summary)."""
    out = []
    for s, st in h.steps:
        out += [f"{s.title}: " + line if i == 0 else line for i, line in enumerate(describe_step(h, s, st))]
    return out

