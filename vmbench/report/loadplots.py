"""Plots of load runs (many VMs at once), as inline SVG with matplotlib (pure: data in, SVG out),
in the manner of :mod:`vmbench.report.plots` (its SVG output, colours, hatches, markers).

Scaling: the aggregate IOPS and the merged p99 against the number of VMs (the knee marked),
and each VM's IOPS per step.  Noisy neighbour: the victim's p50/p99/p99.9 per phase, and the
victim's latency over time beside the aggressors' summed IOPS, one column per phase.  Every
plot's title names its metric, the accelerator and the load; each has a text alternative.
"""

from __future__ import annotations

import math
import textwrap
from typing import Sequence

import matplotlib
import numpy as np

from .figures import Line
from .plots import COLOURS, HATCHES, LINESTYLES, MARKERS, RC, Plot, MS_FORMAT, THOUSANDS_FORMAT, longest_label, new_figure, label_text, fmt_num, to_svg

#: (VMs, aggregate IOPS, merged p99 ms, the knee?) of one step
ScalingPoint = tuple[int, "float | None", "float | None", bool]


def _wrap(text: str, width_in: float) -> tuple[str, float]:
    """A title wrapped to a width in inches, and the top margin (inches) it needs."""
    lines = textwrap.wrap(label_text(text, 200), max(int(width_in * 15), 20)) or [""]
    return "\n".join(lines), 0.2 + 0.17 * len(lines)


def scaling(title: str, series: Sequence[tuple[str, Sequence[ScalingPoint]]]) -> Plot:
    """Two panels against the number of VMs: the aggregate IOPS (sum of VMs) and the merged
    p99; one line per (cell, layer, job), the knee ringed and labelled."""
    with matplotlib.rc_context(RC):
        legend_w = 0.45 + 0.065 * longest_label(label_text(label) for label, _ in series)
        head, top = _wrap(title, 8.2 + legend_w)
        fig = new_figure(8.2 + legend_w, 3.1 + top, left=0.8, right=legend_w, bottom=0.5, top=top + 0.25, cols=2, gap_w=0.8)
        ax_iops, ax_p99 = fig.subplots(1, 2)
        alt = []
        for i, (label, points) in enumerate(series):
            style = dict(color=COLOURS[i % len(COLOURS)], linestyle=LINESTYLES[i % len(LINESTYLES)], marker=MARKERS[i % len(MARKERS)],
                         markersize=4, linewidth=1.3)
            xs = [p[0] for p in points]
            iops = [math.nan if p[1] is None else p[1] for p in points]
            p99 = [math.nan if p[2] is None else p[2] for p in points]
            ax_iops.plot(xs, iops, label=label_text(label), **style)
            ax_p99.plot(xs, p99, label=label_text(label), **style)
            for n, a, p, knee in points:
                if knee:
                    for ax, y in ((ax_iops, a), (ax_p99, p)):
                        if y is not None:
                            ax.plot([n], [y], marker="o", markersize=11, markerfacecolor="none", markeredgecolor="#000000", linewidth=0)
                            ax.annotate("knee", (n, y), textcoords="offset points", xytext=(6, -12), fontsize=7)
            alt.append(f"{label}: " + "; ".join(f"{n} VM{'s' if n > 1 else ''} {fmt_num(a)} IOPS, p99 {fmt_num(p)} ms"
                                                 + (" (knee)" if knee else "") for n, a, p, knee in points))
        vms = sorted({p[0] for _, points in series for p in points})
        for ax, what in ((ax_iops, "Aggregate IOPS (sum of VMs)"), (ax_p99, "Merged p99, ms")):
            ax.set_xticks(vms)
            ax.set_xlabel("VMs at once")
            ax.set_title(what)
            ax.set_ylim(bottom=0)
        ax_iops.yaxis.set_major_formatter(THOUSANDS_FORMAT)
        ax_p99.yaxis.set_major_formatter(MS_FORMAT)
        ax_p99.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
        fig.suptitle(head, fontsize=9.5, y=1 - 0.08 / (3.1 + top), va="top")
        return Plot(title, to_svg(fig, title), ". ".join(alt) + ".")


def per_vm_bars(title: str, steps: Sequence[tuple[str, Sequence[tuple[int, "float | None", bool]]]]) -> Plot:
    """Each VM's IOPS (mean over its included repeats), grouped by step; a VM with an excluded
    or not fully loaded repeat is hatched and marked "*"."""
    with matplotlib.rc_context(RC):
        most = max((len(vms) for _, vms in steps), default=1)
        width_in = max(4.2, 1.2 + 0.28 * most * len(steps))
        head, top_in = _wrap(title, width_in - 0.95)
        fig = new_figure(width_in, 2.9 + top_in, left=0.8, right=0.15, bottom=0.55, top=top_in)
        ax = fig.subplots()
        width = 0.8 / max(most, 1)
        top = 0.0
        alt = []
        for gi, (step, vms) in enumerate(steps):
            parts = []
            for vi, (vm, iops, flagged) in enumerate(vms):
                x = gi + (vi - (len(vms) - 1) / 2) * width
                v = iops or 0.0
                ax.bar([x], [v], width=width * 0.92, color=COLOURS[vm % len(COLOURS)], edgecolor="#222222", linewidth=0.5,
                       hatch="//" if flagged else "")
                ax.text(x, v, f"{vm}{'*' if flagged else ''}", ha="center", va="bottom", fontsize=6)
                top = max(top, v)
                parts.append(f"VM {vm} {fmt_num(iops)}{' (flagged)' if flagged else ''}")
            alt.append(f"{step}: " + ", ".join(parts))
        ax.set_xticks(range(len(steps)), [label_text(s) for s, _ in steps])
        ax.set_ylim(0, top * 1.2 or 1)
        ax.set_ylabel("IOPS per VM")
        ax.yaxis.set_major_formatter(THOUSANDS_FORMAT)
        ax.grid(axis="x", visible=False)
        ax.set_title(head)
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ". Bars above each VM carry its number; * = a repeat excluded or not fully loaded.")


def victim_percentiles(title: str, phases: Sequence[tuple[str, "float | None", "float | None", "float | None"]]) -> Plot:
    """The victim's p50, p99 and p99.9 (ms, merged histograms) per phase, as grouped bars (log scale)."""
    names = ("victim p50", "victim p99", "victim p99.9")
    with matplotlib.rc_context(RC):
        width_in = max(4.6, 1.8 + 0.9 * len(phases))
        head, top_in = _wrap(title, width_in - 0.95)
        fig = new_figure(width_in, 2.9 + top_in, left=0.8, right=1.3, bottom=0.5, top=top_in)
        ax = fig.subplots()
        width = 0.8 / len(names)
        alt = []
        positive = []
        for pi, (phase, *values) in enumerate(phases):
            for ni, v in enumerate(values):
                if v is None:
                    continue
                x = pi + (ni - 1) * width
                ax.bar([x], [v], width=width * 0.95, color=COLOURS[ni], hatch=HATCHES[ni + 1], edgecolor="#222222", linewidth=0.5,
                       label=names[ni])
                ax.text(x, v, fmt_num(v), ha="center", va="bottom", fontsize=6.5)
                positive.append(v)
            alt.append(f"{phase}: " + ", ".join(f"{n} {fmt_num(v)} ms" for n, v in zip(names, values)))
        if positive and max(positive) > 30 * min(positive):
            ax.set_yscale("log")
        handles, labels = ax.get_legend_handles_labels()
        uniq = dict(zip(labels, handles))
        ax.legend(uniq.values(), uniq.keys(), loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.set_xticks(range(len(phases)), [label_text(p[0]) for p in phases])
        ax.set_ylabel("completion latency, ms")
        ax.yaxis.set_major_formatter(MS_FORMAT)
        ax.grid(axis="x", visible=False)
        ax.set_title(head)
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")


def victim_timeline(title: str, phases: Sequence[tuple[str, "Line | None", "Line | None"]]) -> Plot:
    """One column per phase: the victim's completion latency over time (top) and the
    aggressors' summed IOPS (bottom), on one time axis per phase."""
    with matplotlib.rc_context(RC):
        cols = max(len(phases), 1)
        width_in = 0.9 + 3.0 * cols + 0.5 * (cols - 1)
        head, top_in = _wrap(title, width_in)
        fig = new_figure(width_in, 4.2 + top_in, left=0.9, right=0.15, bottom=0.5, top=top_in + 0.25, cols=cols, rows=2,
                   gap_w=0.5, gap_h=0.35)
        grid = fig.subplots(2, cols, squeeze=False, sharex="col")
        alt = []
        for ci, (phase, victim, aggr) in enumerate(phases):
            top, bottom = grid[0, ci], grid[1, ci]
            for ax, line, colour, what, unit in ((top, victim, COLOURS[0], "victim clat", "ms"),
                                                 (bottom, aggr, COLOURS[5], "aggressors' IOPS (sum)", "IOPS")):
                if line is None or not line[0]:
                    none = "not recorded" if line is None else "none in this phase"
                    ax.text(0.5, 0.5, none, transform=ax.transAxes, ha="center", va="center", fontsize=7)
                    ax.set_yticks([])
                    alt.append(f"{phase}: {what} {none}")
                    continue
                ts, vs = list(line[0]), [math.nan if v is None else float(v) for v in line[1]]
                ax.plot(ts, vs, color=colour, marker=MARKERS[0 if unit == "ms" else 1], markersize=3,
                        markevery=max(len(ts) // 8, 1), linewidth=1.0)
                finite = [v for v in vs if not math.isnan(v)]
                if finite:
                    alt.append(f"{phase}: {what} min {fmt_num(min(finite))}, median {fmt_num(float(np.median(finite)))}, "
                               f"max {fmt_num(max(finite))} {unit} over {fmt_num(max(ts) - min(ts))} s")
            top.set_title(label_text(phase))
            bottom.set_xlabel("time, s")
            bottom.yaxis.set_major_formatter(THOUSANDS_FORMAT)
            top.yaxis.set_major_formatter(MS_FORMAT)
            top.set_ylim(bottom=0)
            bottom.set_ylim(bottom=0)
        grid[0, 0].set_ylabel("victim clat, ms")
        grid[1, 0].set_ylabel("aggressors' IOPS (sum)")
        fig.suptitle(head, fontsize=9.5, y=1 - 0.08 / (4.2 + top_in), va="top")
        return Plot(title, to_svg(fig, title), "; ".join(alt) + ".")
