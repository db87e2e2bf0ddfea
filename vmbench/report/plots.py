"""Plots for the HTML report, as inline SVG made with matplotlib (pure: data in, SVG out).

Figures are built with :class:`matplotlib.figure.Figure` directly, never through pyplot, so
nothing global (backend, open-figure registry) changes and nothing needs closing.  Text stays
text in the SVG (``svg.fonttype: none``): smaller, faster, searchable.  Every SVG gets a
``<title>`` and an ``aria-label``; every plot comes with a text alternative; meaning never
rests on colour alone (hatches, markers, line styles and labels carry it too).
"""

from __future__ import annotations

import hashlib
import html
import io
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping, Sequence

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..fio.histogram import Histogram
from .figures import Plot
from .ticks import drawn_ticks_only

# Okabe-Ito: distinguishable with the common colour-vision deficiencies
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#999999", "#000000"]
HATCHES = ["", "//", "\\\\", "xx", "--", "||", "++", "/"]  # line hatches only: dot hatches make huge SVG
MARKERS = ["o", "s", "^", "D", "v", "P", "X", "*"]
LINESTYLES = ["-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)), (0, (1, 2)), (0, (8, 2))]
NINES = (50.0, 90.0, 99.0, 99.9, 99.99)

RC: dict[Any, Any] = {  # matplotlib's rcParams (its stubs name every key in a Literal)
    "svg.fonttype": "none", "font.size": 8.5, "axes.titlesize": 9.5, "axes.titley": 1.0, "axes.titlepad": 5.0,
    "axes.spines.top": False, "axes.spines.right": False, "hatch.linewidth": 0.8, "legend.fontsize": 7.5,
    "legend.frameon": False, "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.5,
}


# ---- SVG output -------------------------------------------------------------------------------

def to_svg(fig: Figure, title: str) -> str:
    """The figure as one <svg> element for inline use: no prologue or metadata (which carry
    URLs), ids prefixed by a hash of the figure (unique within the page, and the same page
    for the same data), a <title> and an aria-label."""
    for ax in fig.axes:
        if ax.get_visible():
            drawn_ticks_only(ax.xaxis)
            drawn_ticks_only(ax.yaxis)
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "vmbench"}):
        fig.savefig(buf, format="svg")
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"\s*<metadata>.*?</metadata>", "", svg, count=1, flags=re.S)
    prefix = "f" + hashlib.sha1((title + svg).encode()).hexdigest()[:8] + "-"
    svg = re.sub(r'(\bid="|url\(#|href="#)', r"\g<1>" + prefix, svg)
    label = html.escape(title, quote=True)
    head_end = svg.index(">") + 1
    return (svg[:head_end - 1] + f' role="img" aria-label="{label}">'
            + f"\n <title>{html.escape(title)}</title>" + svg[head_end:])


def new_figure(width: float, height: float, *, left: float = 0.7, right: float = 0.15, bottom: float = 0.5, top: float = 0.3,
         cols: int = 1, rows: int = 1, gap_w: float = 0.7, gap_h: float = 0.3) -> Figure:
    """A figure with fixed margins in inches (a layout engine cost about a third of the
    rendering time); callers size the margins from their labels.  At the SVG backend's 72 dpi,
    which saving sets (the same SVG; made at another dpi, the save redid a tenth of the work)."""
    fig = Figure(figsize=(width, height), dpi=72)
    aw = max((width - left - right - (cols - 1) * gap_w) / cols, 0.5)
    ah = max((height - top - bottom - (rows - 1) * gap_h) / rows, 0.3)
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height, top=1 - top / height,
                        wspace=gap_w / aw, hspace=gap_h / ah)
    return fig


def longest_label(labels: Iterable[object]) -> int:
    return max((len(str(x)) for x in labels), default=0)


# ---- measured text: nothing clipped, no layout engine ---------------------------------------

_MEASURE = TextToPath()
#: a browser draws the SVG's text in its own copy of the font (or a fallback): room kept for it
FONT_SLACK = 1.1


def text_inches(text: str, size: float) -> float:
    """The width of ``text``'s longest line at ``size`` points, in inches, as matplotlib lays it
    out (its font's own metrics, no figure drawn: a fraction of a millisecond)."""
    return max((_line_inches(line, size) for line in str(text).split("\n") if line), default=0.0)


@lru_cache(maxsize=4096)
def _line_inches(line: str, size: float) -> float:
    return _MEASURE.get_text_width_height_descent(line, FontProperties(size=size), ismath=False)[0] / 72 * FONT_SLACK


def legend_width(labels: Iterable[object]) -> float:
    """The right margin (inches) a legend beside the axes needs: its longest label and the marker before it."""
    return 0.55 + max((text_inches(str(x), float(matplotlib.rcParams["legend.fontsize"])) for x in labels), default=0.0)


def wrap_inches(text: str, width: float, size: float) -> list[str]:
    """``text`` in lines no wider than ``width`` inches at ``size`` points (a word longer than
    that on a line of its own)."""
    space = _line_inches("a b", size) - _line_inches("ab", size)
    lines: list[str] = []
    used = 0.0
    for word in str(text).split(" "):
        w = _line_inches(word, size) if word else 0.0
        if lines and used + space + w <= width:
            lines[-1] += " " + word
            used += space + w
        else:
            lines.append(word)
            used = w
    return lines or [""]


def fit_title(ax: Any, title: str) -> None:
    """``title`` over the axes, centred, on as many lines as keep it inside the figure; the
    figure grows by the lines added so that every axes keeps its size and place."""
    fig = ax.figure
    size = float(matplotlib.rcParams["axes.titlesize"])
    width, height = fig.get_size_inches()
    pos = ax.get_position()
    centre = (pos.x0 + pos.x1) / 2 * width
    lines = wrap_inches(label_text(title, 300), 2 * min(centre, width - centre) - 0.1, size)
    ax.set_title("\n".join(lines))
    grow_top(fig, (len(lines) - 1) * size * 1.25 / 72)


def grow_top(fig: Figure, extra: float) -> None:
    """The figure ``extra`` inches taller at the top, its axes where they were (in inches from the bottom)."""
    if extra <= 0:
        return
    width, height = fig.get_size_inches()
    axes = [(ax, ax.get_position()) for ax in fig.axes]
    fig.set_size_inches(width, height + extra)
    for ax, pos in axes:
        ax.set_position((pos.x0, pos.y0 * height / (height + extra), pos.width, pos.height * height / (height + extra)))


def label_text(s: object, limit: int = 40) -> str:
    """Database text for matplotlib: never interpreted as mathtext (``$`` escaped), kept short."""
    s = str(s)
    s = s if len(s) <= limit else s[:limit - 3] + "..."
    return s.replace("$", r"\$")


THOUSANDS_FORMAT = FuncFormatter(lambda v, _pos: f"{v:,.0f}")
MS_FORMAT = FuncFormatter(lambda v, _pos: f"{v:g}")


def fmt_num(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) < 0.0005:
        v = 0.0  # never "-0.000"
    if abs(v) >= 100:
        return f"{v:,.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"


def fmt_change(v: float | None) -> str:
    return "" if v is None else f"{v * 100:+.1f}%"


def _interval(rec: Mapping, key: str, scale: float = 1.0) -> tuple[float, float] | None:
    lo, hi = rec.get(f"{key}_low"), rec.get(f"{key}_high")
    if lo is None or hi is None:
        return None
    return lo * scale, hi * scale


def _verdict(rec: Mapping, key: str, why: bool = True) -> str:
    """The report's verdict on a delta, or (``why``) why it has none, when it says."""
    v = rec.get(f"{key}_verdict")
    if v is not None:
        return str(v)
    reason = rec.get(f"{key}_why")
    return f"no verdict: {reason}" if why and reason and rec.get(key) is not None else ""


def _reasons(recs: Sequence[Mapping], key: str) -> list[str]:
    """Why deltas have no verdict, once per distinct reason."""
    seen = {str(r[f"{key}_why"]) for r in recs
            if r.get(key) is not None and r.get(f"{key}_verdict") is None and r.get(f"{key}_why")}
    return [f"No verdict: {w}" for w in sorted(seen)]


# ---- per-layer waterfall ----------------------------------------------------------------------


def waterfall(title: str, jobs: Sequence[tuple[str, Sequence[Mapping]]], rc: Mapping | None = None) -> Plot:
    """Per job: IOPS at each layer, host -> raw -> ... -> top, each bar labelled with its
    value and its change from the layer below (and the verdict when the report has one).
    ``jobs``: (job label, layer-table records in layer order)."""
    with matplotlib.rc_context({**RC, **(rc or {})}):
        n = len(jobs)
        bars_max = max((len(recs) for _, recs in jobs), default=1)
        rotate = bars_max > 5
        cols = min(n, 3 if bars_max <= 4 else 2)
        rows = math.ceil(n / cols)
        panel_w, panel_h = max(2.4, 0.62 * bars_max + 0.4), 2.7 + (0.3 if rotate else 0)
        bottom = 0.75 if rotate else 0.35
        fig = new_figure(0.75 + 0.1 + cols * panel_w + (cols - 1) * 0.8, 0.3 + bottom + rows * panel_h + (rows - 1) * (bottom + 0.4),
                   left=0.75, right=0.1, top=0.3, bottom=bottom, cols=cols, rows=rows, gap_w=0.8, gap_h=bottom + 0.4)
        grid = fig.subplots(rows, cols, squeeze=False).ravel()
        for ax in grid[n:]:
            ax.set_visible(False)
        axes = grid[:n]
        alt = []
        for ax, (job, recs) in zip(axes, jobs):
            labels = [label_text(r["layer"]) for r in recs]
            values = [r.get("iops") or 0 for r in recs]
            x = np.arange(len(recs))
            bars = ax.bar(x, values, color=[COLOURS[i % len(COLOURS)] for i in range(len(recs))],
                          edgecolor="#222222", linewidth=0.6)
            for i, b in enumerate(bars):
                b.set_hatch(HATCHES[i % len(HATCHES)])
            top = max(values) if values else 1
            parts = []
            for i, r in enumerate(recs):
                change = fmt_change(r.get("vs_below")) if i else ""
                verdict = _verdict(r, "vs_below", why=False) if i else ""
                text = fmt_num(values[i]) + (f"\n{change}" if change else "") + (f"\n{verdict}" if verdict else "")
                ax.text(i, values[i] + top * 0.02, label_text(text, 60), ha="center", va="bottom", fontsize=6.5)
                parts.append(f"{r['layer']} {fmt_num(values[i])} IOPS" + (f" ({change}{', ' + verdict if verdict else ''})" if change else ""))
            ax.set_xticks(x, labels, rotation=25 if rotate else 0, ha="right" if rotate else "center")
            judged = any(_verdict(r, "vs_below", why=False) for r in recs[1:])
            ax.set_ylim(0, top * (1.45 if judged else 1.3))
            ax.set_title(label_text(job))
            ax.set_ylabel("IOPS")
            ax.yaxis.set_major_formatter(THOUSANDS_FORMAT)
            ax.grid(axis="x", visible=False)
            alt.append(f"{job}: " + "; ".join(parts))
        reasons = _reasons([r for _, recs in jobs for r in recs[1:]], "vs_below")
        return Plot(title, to_svg(fig, title), ". ".join(alt + reasons) + ".")


# ---- latency percentile curves ----------------------------------------------------------------


def percentile_curve(bins: Mapping[int, int], points: Sequence[float] | np.ndarray) -> np.ndarray | None:
    """Latency (ms) at each percentile of ``points``, by fio's rule
    (:meth:`~vmbench.fio.histogram.Histogram.percentiles_ms`); None without samples."""
    got = Histogram(bins).percentiles_ms([float(p) for p in points])
    if not got or got[0] is None:
        return None
    return np.array(got, dtype=float)


def _nines(p: np.ndarray | float) -> Any:
    """The "nines" axis: 1 / (1 - p/100), for a percentile or an array of them."""
    return 1.0 / (1.0 - np.asarray(p) / 100.0)


def latency(title: str, lines: Sequence[tuple[str, Mapping[int, int]]]) -> Plot:
    """Completion-latency percentiles 50..99.99 (log-scaled "nines" axis), one line per
    (side or layer), each with its own marker and line style."""
    points = np.concatenate([np.linspace(50, 90, 9), 100 - np.logspace(1, -2, 25)[1:]])
    with matplotlib.rc_context(RC):
        legend_w = legend_width(label_text(label) for label, _ in lines)
        fig = new_figure(4.6 + legend_w, 3.4, left=0.75, right=legend_w, bottom=0.5, top=0.3)
        ax = fig.subplots()
        alt = []
        for i, (label, bins) in enumerate(lines):
            ys = percentile_curve(bins, points)
            if ys is None:
                continue
            ax.plot(_nines(points), ys, label=label_text(label), color=COLOURS[i % len(COLOURS)],
                    linestyle=LINESTYLES[i % len(LINESTYLES)], marker=MARKERS[i % len(MARKERS)],
                    markevery=[int(np.argmin(np.abs(points - p))) for p in NINES],
                    markersize=4, linewidth=1.3)
            key = percentile_curve(bins, [50.0, 99.0, 99.99])
            assert key is not None  # the same bins as ys
            alt.append(f"{label}: p50 {fmt_num(key[0])} ms, p99 {fmt_num(key[1])} ms, p99.99 {fmt_num(key[2])} ms")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(_nines(np.array(NINES)), [f"{p:g}" for p in NINES])
        ax.xaxis.set_minor_locator(LogLocator(subs=()))
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(MS_FORMAT)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.set_xlim(_nines(50.0) * 0.95, _nines(99.99) * 1.05)
        ax.set_xlabel("percentile (log-scaled: each step adds a nine)")
        ax.set_ylabel("completion latency, ms (log)")
        fit_title(ax, title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")


# ---- per-cell bars with intervals and verdicts ------------------------------------------------


def _lower_is_better(rec: Mapping) -> bool:
    """Whether the record's metric is a latency (its "metric": "p50", "p99", ...)."""
    return str(rec.get("metric") or "").startswith("p")


def cell_bars(title: str, recs: Sequence[Mapping], key: str, label_key: str = "cell") -> Plot:
    """One horizontal bar per record for ``key`` (a delta: vs_baseline, vs_previous, gap),
    whiskers from ``key_low``/``key_high`` when the report has them, the value and the
    verdict written at the bar's end.  A loss (below 0%, above 0% for a latency metric, or a
    gap above 1x) is hatched."""
    pct = key != "gap"
    scale, ref = (100.0, 0.0) if pct else (1.0, 1.0)
    reasons = _reasons(recs, key)
    shared = len(reasons) == 1 and not any(r.get(f"{key}_verdict") for r in recs)
    with matplotlib.rc_context(RC):
        left = 0.25 + max((text_inches(label_text(r.get(label_key) or ""), float(matplotlib.rcParams["font.size"])) for r in recs),
                          default=0.0)
        fig = new_figure(max(6.3, left + 4.5), 0.85 + 0.3 * max(len(recs), 2), left=left, right=0.15, bottom=0.5, top=0.3)
        ax = fig.subplots()
        ys = np.arange(len(recs))[::-1]
        vals = [None if r.get(key) is None else r[key] * scale for r in recs]
        # a change in a latency (the job's metric, "p99"...) is a loss when it goes up
        loss = [v is not None and ((v > ref if _lower_is_better(r) else v < ref) if pct else v > ref) for v, r in zip(vals, recs)]
        bars = ax.barh(ys, [0.0 if v is None else v for v in vals], color=[COLOURS[5] if lo else COLOURS[0] for lo in loss],
                       hatch=None, edgecolor="#222222", linewidth=0.5, height=0.7)
        lo_all: list[float] = [ref] + [v for v in vals if v is not None]
        hi_all = list(lo_all)
        alt, labels = [], []
        for y, r, v, b, lost in zip(ys, recs, vals, bars, loss):
            b.set_hatch("//" if lost else "")
            iv = _interval(r, key, scale)
            if iv is not None and v is not None:
                ax.errorbar([v], [y], xerr=[[max(v - iv[0], 0)], [max(iv[1] - v, 0)]], fmt="none", ecolor="#000000",
                            elinewidth=1.0, capsize=3)
                lo_all.append(iv[0])
                hi_all.append(iv[1])
            verdict = _verdict(r, key, why=not shared)
            if v is None:
                shown = "reference" if pct and y == ys[0] else "-"
            else:
                shown = f"{v:+.1f}%" if pct else f"{v:.2f}x"
            labels.append((y, v, iv, shown + (f"  {verdict}" if verdict else "")))
            ivtext = "" if iv is None else (f" [{iv[0]:.1f}%, {iv[1]:.1f}%]" if pct else f" [{iv[0]:.2f}x, {iv[1]:.2f}x]")
            alt.append(f"{r.get(label_key)}: {shown}{ivtext}{', ' + verdict if verdict else ''}")
        lo, hi = min(lo_all), max(hi_all)
        width = max(hi - lo, 1e-9)
        pad = width * 0.02
        placed = []
        for y, v, iv, text in labels:
            if v is None:
                right, end = True, 0.0
            else:
                right = v >= ref or not pct  # a gap's bar starts at 0: text after its end
                end = max(v, iv[1] if iv else v) if right else min(v, iv[0] if iv else v)
            ax.text(end + (pad if right else -pad), y, label_text(text, 60), va="center", ha="left" if right else "right", fontsize=7)
            placed.append((end, right, label_text(text, 60)))
        ax.set_yticks(ys, [label_text(r.get(label_key) or "") for r in recs])
        ax.axvline(ref, color="#000000", linewidth=0.8)
        ax.set_xlim(*_room_for(ax, placed, lo - width * 0.1 if pct and lo < 0 else 0.0, hi + width * 0.1, pad))  # a gap (ratio) starts at 0
        ax.set_xlabel({"gap": "gap: host IOPS / guest IOPS (1.00x = no loss; hatched = guest slower)",
                       "vs_baseline": "change in IOPS from the baseline, % (hatched = slower)",
                       "vs_previous": "change in IOPS from the previous step, % (hatched = slower)"}.get(key, key))
        ax.grid(axis="y", visible=False)
        fit_title(ax, label_text(title, 80) + (f" ({reasons[0][0].lower()}{reasons[0][1:]})" if shared else ""))
        return Plot(title, to_svg(fig, title), "; ".join(alt) + "." + (f" {reasons[0]}." if shared else ""))


def _room_for(ax: Any, placed: Sequence[tuple[float, bool, str]], low: float, high: float, pad: float) -> tuple[float, float]:
    """The x limits, from at least (``low``, ``high``), that leave room for each text written at
    a bar's end (end, after it?, text; at 7 points) inside the axes: each text's measured width
    is a share of the axes' width, so the limits that hold it are found in a few rounds."""
    fig = ax.figure
    axes_in = ax.get_position().width * fig.get_size_inches()[0]
    share = {text: min(text_inches(text, 7.0) / axes_in, 0.8) for _, _, text in placed}
    for _ in range(4):
        span = high - low
        for end, right, text in placed:
            need = share[text] * span * 1.03
            if right:
                high = max(high, end + pad + need)
            else:
                low = min(low, end - pad - need)
    return low, high


# ---- crypto ceiling beside LUKS throughput ----------------------------------------------------


def crypto(title: str, groups: Sequence[tuple[str, Sequence[tuple[str, float | None]]]], target: float | None) -> Plot:
    """Grouped bars in MB/s: per group (a cell), the LUKS layers' throughput and the crypto
    ceiling (encrypt, decrypt), with the target as a labelled line."""
    names: list[str] = []
    for _, bars in groups:
        for name, _v in bars:
            if name not in names:
                names.append(name)
    with matplotlib.rc_context(RC):
        legend_w = legend_width([label_text(n) for n in names] + ([f"target {target:g} MB/s"] if target is not None else []))
        rotate = len(groups) > 3
        fig = new_figure(max(4.8, 1.0 + legend_w + 0.5 * len(names) * len(groups)), 3.6 + (0.5 if rotate else 0),
                   left=0.7, right=legend_w, bottom=1.0 if rotate else 0.45, top=0.3)
        ax = fig.subplots()
        width = 0.8 / max(len(names), 1)
        top = target or 0.0
        alt = []
        for gi, (group, bars) in enumerate(groups):
            values = dict(bars)
            parts = []
            for ni, name in enumerate(names):
                v = values.get(name)
                if v is None:
                    continue
                x = gi + (ni - (len(names) - 1) / 2) * width
                ax.bar([x], [v], width=width * 0.95, color=COLOURS[ni % len(COLOURS)], hatch=HATCHES[(ni + 1) % len(HATCHES)],
                       edgecolor="#222222", linewidth=0.5, label=label_text(name))
                ax.text(x, v, fmt_num(v), ha="center", va="bottom", fontsize=6.5, rotation=90 if len(names) > 3 else 0)
                top = max(top, v)
                parts.append(f"{name} {fmt_num(v)} MB/s")
            alt.append(f"{group}: " + ", ".join(parts))
        if target is not None:
            ax.axhline(target, color="#000000", linestyle="--", linewidth=1.2, label=f"target {target:g} MB/s")
            alt.append(f"target {target:g} MB/s")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_xticks(range(len(groups)), [label_text(g) for g, _ in groups], rotation=25 if rotate else 0, ha="right" if rotate else "center")
        ax.set_ylim(0, top * 1.25 or 1)
        ax.set_ylabel("MB/s (ceiling converted from MiB/s)")
        ax.grid(axis="x", visible=False)
        fit_title(ax, title)
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")


# ---- IOPS and latency over the run (fio's own logs) -------------------------------------------


def timeline(title: str, panels: Sequence[tuple[str, str, Sequence[tuple[str, Sequence[float], Sequence[float]]]]]) -> Plot:
    """Stacked panels sharing the time axis: (source, unit, [(line label, t_s, values)])."""
    with matplotlib.rc_context(RC):
        legend_w = legend_width(label_text(label) for _, _, lines in panels for label, _, _ in lines)
        fig = new_figure(5.0 + legend_w, 0.8 + 1.9 * len(panels), left=_timeline_left(panels), right=legend_w, bottom=0.5, top=0.3,
                         rows=len(panels), gap_h=0.25)
        axes = fig.subplots(len(panels), 1, sharex=True, squeeze=False)[:, 0]
        alt = []
        for ax, (source, unit, lines) in zip(axes, panels):
            positive: list[float] = []
            for i, (label, ts, vs) in enumerate(lines):
                ts, vs = _thin(ts, vs, 600)
                ax.plot(ts, vs, label=label_text(label), color=COLOURS[i % len(COLOURS)], linestyle=LINESTYLES[i % len(LINESTYLES)],
                        marker=MARKERS[i % len(MARKERS)], markevery=max(len(ts) // 8, 1), markersize=3.5, linewidth=1.0)
                finite = [v for v in vs if v is not None and not math.isnan(v)]
                positive += [v for v in finite if v > 0]
                if finite:
                    alt.append(f"{source} {label}: {len(finite)} point{'s' if len(finite) > 1 else ''} over {fmt_num(max(ts) if ts else 0)} s, "
                               f"min {fmt_num(min(finite))}, median {fmt_num(float(np.median(finite)))}, max {fmt_num(max(finite))} {unit}")
            ax.set_ylabel({"fio-iops": "IOPS", "fio-clat": "completion\nlatency, ms", "dev-read": "device read,\nMB/s",
                           "dev-write": "device written,\nMB/s", "cpu-busy": "CPU busy, %", "pool-read": "pool read,\nMB/s",
                           "pool-write": "pool written,\nMB/s", "arc-hit": "ARC hits, %", "host-dev-read": "host device\nread, MB/s",
                           "host-dev-write": "host device\nwritten, MB/s", "host-cpu-busy": "host CPU\nbusy, %"
                           }.get(source, f"{source}\n{unit}"))
            if positive and max(positive) > 30 * min(positive):  # orders of magnitude apart (host vs LUKS): log scale
                ax.set_yscale("log")
                ax.yaxis.set_minor_formatter(NullFormatter())
                ax.set_ylabel(ax.get_ylabel() + " (log)")
            big = bool(positive) and max(positive) >= 10
            ax.yaxis.set_major_formatter(THOUSANDS_FORMAT if unit == "IOPS" or (unit in ("MB/s", "%") and big) else MS_FORMAT)
            ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        axes[-1].set_xlabel("time, s")
        fit_title(axes[0], title)
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")


def _timeline_left(panels: Sequence[tuple[str, str, Sequence[tuple[str, Sequence[float], Sequence[float]]]]]) -> float:
    """The left margin (inches) the panels' y labels need: two lines of label and the widest tick
    label, taken as the biggest value written with thousands separators (log scales write no wider)."""
    size = float(matplotlib.rcParams["font.size"])
    values = [abs(v) for _, _, lines in panels for _, _, vs in lines for v in vs if v is not None and not math.isnan(v)]
    widest = f"{max(values, default=0):,.0f}" if max(values, default=0) >= 10 else "0.000"
    return max(0.85, 0.2 + 2.4 * size / 72 + text_inches(widest, size) + 0.1)


def _thin(ts: Sequence[float], vs: Sequence[float], limit: int) -> tuple[list[float], list[float]]:
    """At most ``limit`` points (every k-th), so long logs stay quick to draw and small."""
    n = min(len(ts), len(vs))
    step = max(n // limit, 1)
    return list(ts[:n:step]), [math.nan if v is None else v for v in vs[:n:step]]


# ---- CPU per I/O, stacked by where it is spent --------------------------------------------------

#: the stacked parts of :func:`cpu_stacked`, bottom to top: (record key, legend label)
CPU_PARTS = (("vcpu_us", "vCPU threads"), ("iothread_us", "iothreads"), ("main_us", "QEMU main loop"),
             ("worker_us", "workers"), ("other_us", "other/exited threads"), ("host_rest_us", "rest of the host"))


def cpu_stacked(title: str, bars: Sequence[tuple[str, Mapping[str, Any], str]]) -> Plot:
    """One stacked bar per (label, record, annotation): µs of host CPU per I/O by class
    (:data:`CPU_PARTS`, each its own colour and hatch), the QEMU total and the annotation (a
    verdict against the baseline, "saturated") written above.  A part below 0 (the rest of the
    host can dip a tick under the idle figure) is drawn as 0; the text gives it as measured."""
    with matplotlib.rc_context(RC):
        legend_w = legend_width(label for _, label in CPU_PARTS)
        rotate = len(bars) > 4 or longest_label(label for label, _, _ in bars) > 14
        fig = new_figure(max(4.2, 1.2 + legend_w + 1.0 * len(bars)), 3.6 + (0.6 if rotate else 0), left=0.75, right=legend_w,
                   bottom=1.05 if rotate else 0.45, top=0.3)
        ax = fig.subplots()
        x = np.arange(len(bars))
        bottoms = np.zeros(len(bars))
        for i, (key, label) in enumerate(CPU_PARTS):
            heights = np.array([max(float(rec.get(key) or 0.0), 0.0) for _, rec, _ in bars])
            ax.bar(x, heights, bottom=bottoms, width=0.6, color=COLOURS[i % len(COLOURS)], hatch=HATCHES[i % len(HATCHES)],
                   edgecolor="#222222", linewidth=0.5, label=label)
            bottoms = bottoms + heights
        top = float(bottoms.max()) if len(bars) else 1.0
        alt = []
        for xi, (label, rec, note) in enumerate(bars):
            total = rec.get("qemu_us")
            text = f"QEMU {fmt_num(total)}" + ("\n" + note.replace(": ", "\n").replace(", ", "\n") if note else "")
            ax.text(xi, float(bottoms[xi]) + top * 0.02, label_text(text, 60), ha="center", va="bottom", fontsize=6.5)
            parts = ", ".join(f"{name} {fmt_num(rec.get(key))}" for key, name in CPU_PARTS)
            alt.append(f"{label}: {parts} µs/IO; QEMU total {fmt_num(total)} µs/IO" + (f" ({note})" if note else ""))
        ax.set_xticks(x, [label_text(label) for label, _, _ in bars], rotation=25 if rotate else 0, ha="right" if rotate else "center")
        ax.set_ylim(0, (top or 1.0) * 1.4)
        ax.set_ylabel("host CPU µs per I/O")
        ax.grid(axis="x", visible=False)
        fit_title(ax, title)
        handles, labels = ax.get_legend_handles_labels()
        ax.legend(handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.0, 1.0))  # top of the stack first
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")


# ---- a sweep's curves: latency against IOPS, one line per side ------------------------------

def sweep_curve(title: str, lines: Sequence[tuple[str, Sequence[tuple[int, float, float | None]], int | None]],
                swept: str) -> Plot:
    """Each line: (label, its points as (swept value, IOPS, p99 ms), the knee's index or None);
    p99 (log) against IOPS, each point labelled with its value, the knee ringed."""
    with matplotlib.rc_context(RC):
        legend_w = legend_width(label for label, _, _ in lines)
        fig = new_figure(4.6 + legend_w, 3.4, left=0.75, right=legend_w, bottom=0.5, top=0.3)
        ax = fig.subplots()
        alt = []
        for i, (label, points, knee) in enumerate(lines):
            shown = [(v, x, float(y)) for v, x, y in points if y is not None and y > 0]
            if not shown:
                continue
            colour = COLOURS[i % len(COLOURS)]
            ax.plot([x for _, x, _ in shown], [y for _, _, y in shown], label=label_text(label), color=colour,
                    linestyle=LINESTYLES[i % len(LINESTYLES)], marker=MARKERS[i % len(MARKERS)], markersize=4, linewidth=1.3)
            for v, x, y in shown:
                ax.annotate(str(v), (x, y), textcoords="offset points", xytext=(3, 3), fontsize=7, color=colour)
            knee_p99 = points[knee][2] if knee is not None else None
            if knee is not None and knee_p99:
                ax.plot([points[knee][1]], [float(knee_p99)], marker="o", markersize=11, markerfacecolor="none",
                        markeredgecolor=colour, linestyle="none")
            alt.append(f"{label}: " + ", ".join(f"{swept} {v}: {fmt_num(x)} IOPS, p99 {fmt_num(y)} ms" for v, x, y in shown)
                       + (f" (knee at {swept} {points[knee][0]})" if knee is not None else " (no knee)"))
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(MS_FORMAT)
        ax.set_xlabel("IOPS")
        ax.set_ylabel("p99 completion latency, ms (log)")
        fit_title(ax, title)
        ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")
