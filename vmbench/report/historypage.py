"""``vmbench history --format html``: the history as one self-contained page (the report's
style, :mod:`.html`'s escaping): the runs followed and left out, the steps and what changed
at each, and per series a trend plot (each run's figure with its interval, the steps marked)
beside its table.  Nothing is loaded from anywhere; plots are inline SVG (:mod:`.plots`)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2
import matplotlib
from markupsafe import Markup

from .history import History, Series
from .historyview import NO_CHANGE, change_cells, describe_step, figure, interval_text, unit
from .html import TEMPLATES, esc
from .plots import COLOURS, RC, Plot, label_text, new_figure, to_svg


@lru_cache(maxsize=1)
def _templates() -> jinja2.Environment:
    """The report's templates, every value escaped by :func:`esc` as the report's page does."""
    def finalize(value: Any) -> Any:
        return value if isinstance(value, Markup) else Markup(esc(value))

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True, finalize=finalize,
                              undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)


def trend_plot(h: History, s: Series) -> Plot:
    """The series' figure per run (a point and its interval), steps as dashed lines before the
    run they start at, the runs by label on the x axis."""
    xs = list(range(len(s.points)))
    labels = [h.runs[p.run].label for p in s.points]
    values = [p.value for p in s.points]
    with matplotlib.rc_context(RC):
        fig = new_figure(max(4.0, 0.5 * len(xs) + 2.0), 2.6, left=0.9, bottom=0.45)
        ax = fig.add_subplot(1, 1, 1)
        for x, p in zip(xs, s.points):
            if p.value is None:
                continue
            if p.low is not None and p.high is not None:
                ax.errorbar([x], [p.value], yerr=[[p.value - p.low], [p.high - p.value]], fmt="o", color=COLOURS[0],
                            capsize=3, markersize=4)
            else:
                ax.plot([x], [p.value], marker="o", mfc="none", color=COLOURS[0], markersize=4)
        ax.plot([x for x, v in zip(xs, values) if v is not None], [v for v in values if v is not None], color=COLOURS[0],
                linewidth=0.8, alpha=0.6)
        for st in s.steps:
            ax.axvline(st.at - 0.5, color=COLOURS[5], linestyle="--", linewidth=1.2)
            d = st.delta.value or 0.0
            ax.annotate(f"step {d * 100:+.0f}%", (st.at - 0.5, 1.0), xycoords=("data", "axes fraction"), ha="center",
                        va="bottom", fontsize=7.5, color=COLOURS[5])
        ax.set_xticks(xs, [label_text(x) for x in labels])
        ax.set_xlim(-0.5, len(xs) - 0.5)
        ax.set_ylabel(unit(s.metric))
        ax.set_ylim(bottom=0)
        title = label_text(s.title, 90)
        svg = to_svg(fig, title)
    alt = "; ".join(f"{label} {figure(s.metric, v)}" for label, v in zip(labels, values))
    if s.steps:
        alt += "; steps before " + ", ".join(labels[st.at] for st in s.steps)
    return Plot(s.title, svg, alt)


def _rows(h: History, s: Series) -> list[list[str]]:
    out = []
    for i, p in enumerate(s.points):
        r = h.runs[p.run]
        change, band = change_cells(p)
        out.append([r.label + (" STEP" if any(st.at == i for st in s.steps) else ""), r.started_at[:16].replace("T", " "),
                    r.short, figure(s.metric, p.value), interval_text(s.metric, p), f"{change} {band}".strip(), p.refused or ""])
    return out


def render_history_page(h: History) -> str:
    series = []
    for s in h.series:
        plot = trend_plot(h, s)
        series.append({"title": s.title, "unit": unit(s.metric), "svg": Markup(plot.svg), "alt": plot.alt, "rows": _rows(h, s),
                       "steps": [describe_step(h, s, st) for st in s.steps]})
    title = f"vmbench history: {h.scenario}"
    return _templates().get_template("history.html.j2").render(
        title=title, runs=[(r.label, r.started_at, r.tag, r.short) for r in h.runs], left_out=list(h.left_out),
        steps=[f"{s.title}: " + " ".join(describe_step(h, s, st)) for s, st in h.steps], series=series, no_change=NO_CHANGE)


def write_history_html(h: History, path: str | Path) -> Path:
    out = Path(path)
    out.write_text(render_history_page(h), encoding="utf-8")
    return out
