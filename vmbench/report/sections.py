"""The plot sections of the HTML page: which plots a run gets, drawn from its tables and its
loaded values (pure: :class:`~vmbench.report.load.RunData` and tables in, sections out).

Each :class:`PlotSection` says what it draws (:class:`~vmbench.report.figures.Drawing`: a
function of :mod:`vmbench.report.plots` and its arguments; a painter of that module draws them, in
this process or in worker processes), then holds its plots (inline SVG), what it left out, or why
it has none; ``templates/page.html.j2`` lays it out.  Plots per kind
are capped so that a 100-cell run renders in about a second; the tables always hold every
row, and each section says what it left out.
"""

from __future__ import annotations

import math
import re
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from ..fio.histogram import Histogram
from ..results.key import MeasurementKey
from ..results.plan import LoadPlan, PlannedLuks
from ..results.lines import has_points, line_points, line_unit, plain_lines
from ..results.records import CryptoRecord, Measurement
from .figures import IN_PROCESS, Drawing, Line, Painter, Plot, PlotModule
from .load import SAMPLED, RunData
from .rows import host_group, raw_group
from .tables import Table

MAX_WATERFALLS = 4  # (cell, stack) figures, each with one panel per job
MAX_LATENCY = 4  # figures
MAX_LATENCY_LINES = 8  # lines per figure
MAX_BAR_FIGURES = 4  # jobs
MAX_BAR_ROWS = 30  # cells per figure
MAX_CRYPTO = 4  # jobs
MAX_TIMELINES = 4  # jobs
MAX_TIMELINE_LINES = 6  # measurements per panel
MIB_TO_MB = 1.048576


@dataclass(frozen=True)
class Figure:
    plot: Plot
    max_width_px: str | None  # the SVG's own width (px), so the page never scales it up


@dataclass(frozen=True)
class Capped:
    """Only the first ``shown`` of ``total`` ``what`` are drawn."""

    shown: int
    total: int
    what: str


@dataclass(frozen=True)
class PlotSection:
    anchor: str  # the section's id: "plot-layers", "plot-latency", "plot-cells", "plot-cpu-per-io", "plot-crypto", "plot-timeline"
    heading: str
    drawings: tuple[Drawing, ...] = ()  # what to draw: the section's figures once drawn
    empty: str | None = None  # why there is no plot (the section shows only this)
    notable: bool = False  # an empty section the page keeps: its emptiness is news (a step gave no figures)
    notes: tuple[str, ...] = ()  # said before the plots
    capped: tuple[Capped, ...] = ()  # what was left out
    no_intervals: bool = False  # the bars show point figures only
    figures: tuple[Figure, ...] = ()  # its drawings drawn


def plot_sections(data: RunData, tables: Sequence[Table], painter: Painter = IN_PROCESS) -> list[PlotSection]:
    """The run's plot sections, their figures drawn by ``painter``."""
    return start_plot_sections(data, tables, painter)()


def start_plot_sections(data: RunData, tables: Sequence[Table], painter: Painter) -> Callable[[], list[PlotSection]]:
    """The page's figures started, all at once: the function returned gives the run's plot
    sections with their figures, once drawn (the page's tables are made meanwhile)."""
    sections = planned_sections(data, tables)
    pending = painter.start([d for s in sections for d in s.drawings])

    def drawn() -> list[PlotSection]:
        plots = iter(pending())
        return [replace(s, figures=tuple(figure(next(plots)) for _ in s.drawings)) for s in sections]
    return drawn


def planned_sections(data: RunData, tables: Sequence[Table]) -> list[PlotSection]:
    """The run's plot sections with what each draws (nothing drawn yet)."""
    by_name = {t.name: t for t in tables}
    if data.kind.many_vms and data.load is not None:  # many VMs at once: the load section replaces the single-VM plots
        return load_sections(data, data.load, by_name)
    out = [
        waterfalls(by_name.get("layers")),
        latency(data),
        cell_bars(by_name.get("gaps"), by_name.get("journey")),
    ]
    if "curves" in by_name:  # only where the run swept a job: older runs' pages unchanged
        out.append(sweep_curves(by_name["curves"]))
    if "cpu-per-io" in by_name:  # only where the run sampled QEMU's CPU: older runs' pages unchanged
        out.append(cpu_per_io(by_name["cpu-per-io"]))
    return out + [crypto(data, by_name.get("layers")), timelines(data)]


def drawing(module: PlotModule, function: str, *args: Any) -> Drawing:
    """``module.function(*args)`` (:mod:`vmbench.report.plots` or :mod:`~vmbench.report.loadplots`), to be drawn."""
    return Drawing(module, function, args)


def figure(plot: Plot) -> Figure:
    size = re.search(r'width="([0-9.]+)pt"', plot.svg[:400])
    return Figure(plot, f"{float(size.group(1)) * 4 / 3:.0f}" if size else None)


def _capped(*parts: tuple[int, int, str]) -> tuple[Capped, ...]:
    return tuple(Capped(shown, total, what) for shown, total, what in parts if total > shown)


def waterfalls(layers: Table | None) -> PlotSection:
    anchor, heading = "plot-layers", "Layer by layer (IOPS)"
    if layers is None or not layers.records:
        return PlotSection(anchor, heading, empty="no stacks in this run: nothing to show layer by layer")
    groups: "OrderedDict[tuple, OrderedDict[str, list[dict]]]" = OrderedDict()
    for r in layers.records:
        groups.setdefault((r.get("cell"), r.get("stack")), OrderedDict()).setdefault(str(r.get("job")), []).append(r)
    made = [drawing("plots", "waterfall", f"{cell} / {stack}: IOPS per layer", list(jobs.items()))
            for (cell, stack), jobs in list(groups.items())[:MAX_WATERFALLS]]
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(groups), "(cell, stack) waterfalls")))


def histograms(data: RunData) -> "OrderedDict[MeasurementKey, Histogram]":
    """Merged clat histograms per group, in run order, the host's under no cell (one host
    line per job); cells of one boot share their raw disk rows as in the tables."""
    groups: dict[MeasurementKey, list[Measurement]] = {}
    for m in data.measurements:
        key = m.group
        if key.side == "host":
            key = replace(key, cell=None)
        groups.setdefault(key, []).append(m)
    return OrderedDict((key, Histogram.merged(r.clat for r in rows)) for key, rows in groups.items())


def latency(data: RunData) -> PlotSection:
    anchor, heading = "plot-latency", "Latency percentiles"
    hists = histograms(data)
    if not any(h.count for h in hists.values()):
        return PlotSection(anchor, heading, empty="no latency histograms in this run")
    jobs = data.jobs or list(OrderedDict.fromkeys(k.job for k in hists))
    valid = [c.name for c in data.valid_cells]
    specs: list[tuple[str, list[tuple[str, Any]]]] = []
    with_stacks = any(k.stack for k in hists)
    by_cell: dict[Any, list[tuple[Any, Any]]] = {}  # each cell's histograms, in the stored order: one pass, not one per plot
    for k, h in hists.items():
        by_cell.setdefault(k.cell, []).append((k, h))
    stacks = {cell: {k.stack for k, _ in kh if k.stack} for cell, kh in by_cell.items()}
    for job in jobs:
        host = hists.get(host_group(None, job))
        base = [("host", host.bins)] if host is not None and host.count else []
        if with_stacks:
            for cell in valid:
                lines = list(base)
                multi = len(stacks.get(cell, ())) > 1
                for k, h in by_cell.get(cell, ()):
                    if k.side == "guest" and k.job == job and h.count:
                        lines.append((k.layer if k.stack is None or not multi else f"{k.stack}: {k.layer}", h.bins))
                if len(lines) > len(base):
                    specs.append((f"{job}, {cell}: host vs each layer", lines[:MAX_LATENCY_LINES]))
        else:
            raw = [(c, hists.get(raw_group(c, job))) for c in valid]
            lines = list(base) + [(f"guest {c}", h.bins) for c, h in raw if h is not None]
            if len(lines) > len(base):
                specs.append((f"{job}: host vs guest raw disk", lines[:MAX_LATENCY_LINES]))
    made = [drawing("plots", "latency", title, lines) for title, lines in specs[:MAX_LATENCY]]
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(specs), "latency plots")))


def cell_bars(gaps: Table | None, journey: Table | None) -> PlotSection:
    anchor, heading = "plot-cells", "Per cell: change and verdict"
    made: list[Drawing] = []
    capped: list[tuple[int, int, str]] = []
    total = 0
    no_intervals = False
    if gaps is not None:
        guest = [r for r in gaps.records if r.get("side") == "guest"]
        multi = len({r.get("cell") for r in guest}) > 1
        key = "vs_baseline" if multi else "gap"
        by_job: "OrderedDict[str, list[dict]]" = OrderedDict()
        for r in guest:
            by_job.setdefault(str(r.get("job")), []).append(r)
        total += len(by_job)
        what = "change from the baseline" if multi else "gap to the host"
        for job, recs in list(by_job.items())[:MAX_BAR_FIGURES]:
            metric = next((str(r["metric"]) for r in recs if r.get("metric")), None)
            made.append(drawing("plots", "cell_bars", f"{job}: {what} per cell" + (f" ({metric}: lower is better)" if metric and metric.startswith("p") and multi else ""),
                                        recs[:MAX_BAR_ROWS], key))
            capped.append((min(len(recs), MAX_BAR_ROWS), len(recs), f"cells of {job}"))
        no_intervals = bool(guest) and not any(r.get(f"{key}_low") is not None for r in guest)
    if journey is not None and journey.records:
        steps: "OrderedDict[str, list[dict]]" = OrderedDict()
        for r in journey.records:
            steps.setdefault(str(r.get("job")), []).append(r)
        total += len(steps)
        for job, recs in list(steps.items())[:MAX_BAR_FIGURES]:
            made.append(drawing("plots", "cell_bars", f"{job}: change per journey step", recs[:MAX_BAR_ROWS], "vs_previous", "step"))
            capped.append((min(len(recs), MAX_BAR_ROWS), len(recs), f"steps of {job}"))
    if not made:
        return PlotSection(anchor, heading, empty="no guest measurements in this run")
    return PlotSection(anchor, heading, tuple(made), capped=_capped(*capped, (len(made), total, "per-job bar plots")),
                       no_intervals=no_intervals)


def sweep_curves(table: Table) -> PlotSection:
    """Per swept job and cell, the host's and the guest's curves on one plot (p99 against IOPS)."""
    anchor, heading = "plot-curves", "Sweeps: latency against IOPS"
    groups: "OrderedDict[tuple, OrderedDict[str, list[dict]]]" = OrderedDict()
    for r in table.records:
        cell = r.get("cell") if r.get("side") == "guest" else None
        groups.setdefault((r.get("job"), r.get("swept")), OrderedDict()).setdefault(
            f"{r.get('side')} {cell}" if cell else str(r.get("side")), []).append(r)
    made = []
    for (job, swept), lines in list(groups.items())[:MAX_BAR_FIGURES]:
        drawn = [(label, [(int(r["value"]), float(r["iops"]), r.get("p99_ms")) for r in recs],
                  next((i for i, r in enumerate(recs) if r.get("knee")), None)) for label, recs in lines.items()]
        made.append(drawing("plots", "sweep_curve", f"{job}: p99 against IOPS by {swept}", drawn, str(swept)))
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(groups), "swept jobs")))


def cpu_per_io(table: Table | None) -> PlotSection:
    """Per job, a stacked bar per cell (and layer, where the job has several) of the CPU per I/O
    table: µs/IO by thread class and the rest of the host, the QEMU total's verdict against the
    baseline or the saturation flag written above, the accelerator in the title."""
    anchor, heading = "plot-cpu-per-io", "CPU per I/O, by where it is spent"
    if table is None or not table.records:
        return PlotSection(anchor, heading, empty="QEMU's CPU was not sampled in this run")
    by_job: "OrderedDict[str, list[dict]]" = OrderedDict()
    for r in table.records:
        by_job.setdefault(str(r.get("job")), []).append(r)
    made, capped = [], []
    for job, recs in list(by_job.items())[:MAX_BAR_FIGURES]:
        several = len({r.get("where") for r in recs}) > 1
        multi = len({r.get("cell") for r in recs}) > 1
        bars = [(f"{r.get('cell')} {r.get('where')}" if several else str(r.get("cell")), r, _cpu_annotation(r, multi))
                for r in recs[:MAX_BAR_ROWS]]
        accel = "/".join(dict.fromkeys(str(r.get("accel")) for r in recs))
        rate = next((r["fixed_rate"] for r in recs if r.get("fixed_rate")), None)
        made.append(drawing("plots", "cpu_stacked", f"{job}: host CPU per I/O ({accel}" + (f", fixed {rate}" if rate else ", rate not fixed") + ")",
                                      bars))
        capped.append((len(bars), len(recs), f"cells of {job}"))
    tcg = any("tcg" in str(r.get("accel")).lower() for r in table.records)
    notes = (("Under TCG the vCPU share is mostly instruction emulation; the split of the rest stays meaningful.",) if tcg else ())
    return PlotSection(anchor, heading, tuple(made), notes=notes,
                       capped=_capped(*capped, (len(made), len(by_job), "per-job CPU plots")))


def _cpu_annotation(r: Mapping, multi: bool) -> str:
    """What a bar says above its QEMU total: saturated, the baseline, or its verdict against it."""
    if r.get("saturated"):
        return "saturated: not compared"
    v = r.get("vs_baseline")
    if v is None:
        return "baseline" if multi and r.get("is_baseline") else ""
    return f"{v:+.1f} µs/IO" + (f", {r['vs_baseline_verdict']}" if r.get("vs_baseline_verdict") else "")


def crypto(data: RunData, layers: Table | None) -> PlotSection:
    anchor, heading = "plot-crypto", "Crypto ceiling and LUKS throughput"
    benches = data.crypto
    luks_of = data.plan.luks_of
    cpu_of = {c.name: c.settings.cpu for c in data.cells}
    luks_recs = [r for r in (layers.records if layers else [])
                 if r.get("stack") in luks_of and any(p.startswith("luks") for p in str(r.get("layer_path", "")).split("+"))]
    if not luks_recs and not benches:
        return PlotSection(anchor, heading, empty="no LUKS layer and no crypto benchmark in this run")

    def measured(c: CryptoRecord) -> list[tuple[str, float | None]]:
        return [(f"ceiling {k}", v * MIB_TO_MB) for k, v in (("encrypt", c.encrypt_mib_s), ("decrypt", c.decrypt_mib_s)) if v is not None]

    def ceiling(side: str, cpu: Any, luks: PlannedLuks) -> list[tuple[str, float | None]]:
        for c in benches:
            if c.side == side and (side == "host" or c.cpu == cpu) and c.cipher == luks.cipher \
                    and c.key_bits == luks.key_bits and measured(c):
                return measured(c)
        return []

    specs: list[tuple[str, list, float | None]] = []
    by_job: "OrderedDict[str, list[dict]]" = OrderedDict()
    for r in luks_recs:
        by_job.setdefault(str(r.get("job")), []).append(r)
    for job, recs in by_job.items():
        groups: "OrderedDict[tuple, list]" = OrderedDict()
        for r in recs:
            groups.setdefault((r["cell"], r["stack"]), []).append((f"layer {r['layer_path']}", r.get("mb_s")))
        out = []
        for (cell, stack), bars in groups.items():
            out.append((f"{cell} ({cpu_of.get(cell)})", bars + ceiling("guest", cpu_of.get(cell), luks_of[stack])))
        host = ceiling("host", None, next(iter(luks_of.values())))
        if host:
            out.append(("host (cryptsetup)", host))
        name = job.replace(" (sync)", "")
        targets = [t.min_mb_s for t in data.targets if t.job == name and t.min_mb_s is not None]
        specs.append((f"{job}: LUKS throughput and crypto ceiling", out[:12], targets[0] if targets else None))
    if not specs:  # crypto rows without a LUKS layer measured: the ceilings alone
        alone = [(f"{c.side} {c.cpu} {c.cipher}/{c.key_bits}", measured(c)) for c in benches if measured(c)]
        if alone:
            specs.append(("Crypto ceilings (no LUKS layer measured)", alone[:12], None))
    made = [drawing("plots", "crypto", title, groups_, target) for title, groups_, target in specs[:MAX_CRYPTO]]
    if not made:
        return PlotSection(anchor, heading, empty="the crypto benchmark gave no figures in this run (see the crypto table)",
                           notable=True)
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(specs), "crypto plots")))


# ---- over the run: fio's logs and the samplers' series ------------------------------------------

#: the samplers' panels of a timeline, in order (each where it saw anything)
SAMPLED_PANELS = ("dev-read", "dev-write", "pool-read", "pool-write", "arc-hit", "cpu-busy",
                  "host-dev-read", "host-dev-write", "host-cpu-busy")


def timeline_lines(data: RunData) -> list[dict]:
    """Every plain (t_s, values) line of fio's logs and the samplers, with its job, repeat and
    label (where it was measured, and its repeat when the run repeats)."""
    out = []
    repeats = data.plan.repeat_policy.min > 1
    for s in data.series:
        if not (s.source.startswith("fio-") or s.source in SAMPLED):
            continue
        k = s.key
        where = "" if k is None else "host" if k.side == "host" else " ".join(str(x) for x in (k.cell, k.stack, k.layer) if x)
        repeat = k.repeat if k is not None else None
        label = (where or "?") + (f" #{repeat}" if repeat and repeats else "")
        for flat_source, flat in plain_lines(s.source, s.series):
            if not has_points(flat):
                continue
            out.append({"source": flat_source, "series": flat, "job": (k.job if k else None) or "?", "repeat": repeat, "label": label})
    return out


def timelines(data: RunData) -> PlotSection:
    anchor, heading = "plot-timeline", "Over the run: fio logs and telemetry"
    rows = timeline_lines(data)
    if not rows:
        return PlotSection(anchor, heading, empty="no fio logs or telemetry in this run")
    order = {"fio-iops": 0, "fio-bw": 1, "fio-clat": 2, "fio-lat": 3, "fio-slat": 4}
    by_job: "OrderedDict[str, OrderedDict[str, list[dict]]]" = OrderedDict()
    for r in rows:
        by_job.setdefault(r["job"], OrderedDict()).setdefault(r["source"], []).append(r)
    made, notes = [], set()
    for job, sources in list(by_job.items())[:MAX_TIMELINES]:
        panels = []
        # IOPS and completion latency; fio's per-direction IOPS only when there is no total
        fio = [s for s in sources if s.startswith("fio-")]
        chosen = [s for s in ("fio-iops", "fio-clat") if s in sources] or sorted(fio, key=lambda s: (order.get(s, 9), s))[:2]
        chosen += [s for s in SAMPLED_PANELS if s in sources and any(
            v for r in sources[s] for v in r["series"]["values"] if v)]  # the sampler's, where it saw anything
        for source in chosen:
            lines = sources[source]
            if len(lines) > MAX_TIMELINE_LINES:  # many repeats: the first repeat of each measurement
                first = min((r["repeat"] or 1) for r in lines)
                lines = [r for r in lines if (r["repeat"] or 1) == first] or lines
                notes.add(f"Where a panel would have more than {MAX_TIMELINE_LINES} lines, it shows the first repeat "
                          "of each measurement (#1); the tables combine all repeats.")
            lines = lines[:MAX_TIMELINE_LINES]
            unit = line_unit(lines[0]["series"])
            panels.append((source, unit, [(r["label"], r["series"]["t_s"], r["series"]["values"]) for r in lines]))
        made.append(drawing("plots", "timeline", f"{job}: over the run", panels))
    return PlotSection(anchor, heading, tuple(made), notes=tuple(sorted(notes)),
                       capped=_capped((len(made), len(by_job), "jobs with fio logs")))



# ---- load runs: many VMs at once ----------------------------------------------------------------

MAX_LOAD_PLOTS = 4  # figures per load section


def _where(r: Mapping) -> str:
    return " ".join(str(x) for x in (r.get("cell"), r.get("stack"), r.get("layer")) if x)


def load_sections(data: RunData, lp: LoadPlan, by_name: Mapping[str, Table]) -> list[PlotSection]:
    """The plots of a load run: scaling (aggregate and p99 against VMs, per-VM bars) or
    noisy neighbour (the victim's percentiles per phase, its latency over time)."""
    accel = "/".join(sorted({str(m.accelerator) for m in data.measurements
                             if m.side == "guest" and m.load_step})) or "accelerator not recorded"
    if lp.kind == "neighbours":
        return [victim_section(by_name.get("load-neighbours"), lp, accel), victim_timeline_section(data, lp, accel)]
    out = [scaling_section(by_name.get("load-scaling"), accel), per_vm_section(by_name.get("load-vms"), accel)]
    if "curves" in by_name:  # only where the run swept a job: a curve per load step
        out.append(sweep_curves(by_name["curves"]))
    return out


def scaling_section(table: Table | None, accel: str) -> PlotSection:
    anchor, heading = "plot-load-scaling", "Scaling: aggregate IOPS and p99 against VMs"
    if table is None or not table.records:
        return PlotSection(anchor, heading, empty="no load step was measured in this run")
    by_job: "OrderedDict[str, OrderedDict[str, list[dict]]]" = OrderedDict()
    for r in table.records:
        by_job.setdefault(str(r["job"]), OrderedDict()).setdefault(_where(r), []).append(r)
    made = [drawing("loadplots", "scaling", f"{job}: aggregate IOPS (sum of VMs) and merged p99 against VMs ({accel}, scaling load)",
                              [(where, [(int(r["vms"]), r.get("iops"), r.get("p99_ms"), r.get("knee") == "knee") for r in recs])
                               for where, recs in lines.items()][:MAX_LATENCY_LINES])
            for job, lines in list(by_job.items())[:MAX_LOAD_PLOTS]]
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(by_job), "jobs")))


def per_vm_section(table: Table | None, accel: str) -> PlotSection:
    anchor, heading = "plot-load-vms", "Per VM: IOPS of each VM per step"
    if table is None or not table.records:
        return PlotSection(anchor, heading, empty="no VM of a load step was measured in this run")
    groups: "OrderedDict[tuple, OrderedDict[str, list]]" = OrderedDict()
    for r in table.records:
        flagged = r.get("loaded") == "no" or bool(r.get("excluded"))
        groups.setdefault((str(r["job"]), _where(r)), OrderedDict()).setdefault(str(r["step"]), []).append(
            (int(r["vm"]), r.get("iops"), flagged))
    made = [drawing("loadplots", "per_vm_bars", f"{job}, {where}: IOPS per VM, mean of included repeats ({accel})", list(steps.items()))
            for (job, where), steps in list(groups.items())[:MAX_LOAD_PLOTS]]
    return PlotSection(anchor, heading, tuple(made), capped=_capped((len(made), len(groups), "(job, layer) bar plots")))


def victim_section(table: Table | None, lp: LoadPlan, accel: str) -> PlotSection:
    anchor, heading = "plot-load-victim", "Noisy neighbour: the victim's latency per phase"
    if table is None or not table.records:
        return PlotSection(anchor, heading, empty="no phase was measured in this run")
    groups: "OrderedDict[str, list[dict]]" = OrderedDict()
    for r in table.records:
        groups.setdefault(_where(r), []).append(r)
    made = [drawing("loadplots", "victim_percentiles", f"Victim ({lp.victim_job}) p50/p99/p99.9 per phase, {where} ({accel}, aggressors {lp.aggressor_job})",
                                         [(str(r["phase"]), r.get("p50_ms"), r.get("p99_ms"), r.get("p999_ms")) for r in recs])
            for where, recs in list(groups.items())[:MAX_LOAD_PLOTS]]
    return PlotSection(anchor, heading, tuple(made), notes=tuple(r["sentence"][0].upper() + r["sentence"][1:] + "."
                                                                    for recs in groups.values() for r in recs if not r.get("reference")),
                       capped=_capped((len(made), len(groups), "(cell, layer) plots")))


def _series_by_key(data: RunData) -> dict[tuple[MeasurementKey, str], Any]:
    """The run's series by (measurement, source) (the last stored, should there be two)."""
    return {(s.key, s.source): s.series for s in data.series if s.key is not None and isinstance(s.series, dict)}


def victim_timeline_section(data: RunData, lp: LoadPlan, accel: str) -> PlotSection:
    """Per (cell, layer): each phase's first repeat with an included victim row: the victim's
    fio-clat beside the aggressors' fio-iops summed, aligned by the windows' host-clock start
    (``load.window.measured_from_ms``) where recorded, else by fio's own t_s."""
    anchor, heading = "plot-load-timeline", "Noisy neighbour: the victim's latency over time beside the aggressors' IOPS"
    series = _series_by_key(data)
    rows = [m for m in data.measurements if m.load_step and m.side == "guest"]
    wheres: "OrderedDict[tuple, None]" = OrderedDict(((m.cell, m.stack, m.layer), None) for m in rows)
    made = []
    aligned = False
    for where in list(wheres)[:MAX_LOAD_PLOTS]:
        phases = []
        for sp in lp.steps:
            mine = [m for m in rows if (m.cell, m.stack, m.layer) == where and m.load_step == sp.index]
            victims = sorted((m for m in mine if m.role == "victim" and not m.excluded), key=lambda m: m.repeat)
            if not victims:
                continue
            v = victims[0]
            aggr = [m for m in mine if m.role == "aggressor" and m.repeat == v.repeat and not m.excluded]
            starts = [m.load.measured_from_ms for m in [v] + aggr]
            known = [float(s) for s in starts if s is not None]
            origin = min(known) if len(known) == len(starts) else None
            aligned = aligned or origin is not None

            def offset(m: Measurement, start: Any) -> float:
                return 0.0 if origin is None else (float(start) - origin) / 1000.0

            vline = line_points(series.get((v.key, "fio-clat")))
            if vline is not None:
                off = offset(v, starts[0])
                vline = [t + off for t in vline[0]], vline[1]
            parts = [(offset(m, s), line) for m, s in zip(aggr, starts[1:])
                     if (line := line_points(series.get((m.key, "fio-iops")))) is not None]
            summed = sum_lines(parts) if aggr else ([], [])  # no aggressor in this phase: an empty line
            phases.append((f"{sp.name} (repeat {v.repeat})", vline, summed))
        if phases:
            label = " ".join(str(x) for x in where if x)
            made.append(drawing("loadplots", "victim_timeline", f"Victim ({lp.victim_job}) clat over time and aggressors' IOPS (sum), {label} ({accel})",
                                                  phases[:6]))
    if not made:
        return PlotSection(anchor, heading, empty="no victim measurement in this run")
    note = ("Times are seconds from the earliest start of the round's measured windows (host clock)." if aligned
            else "The windows' host-clock times were not recorded: each series is drawn on fio's own time axis.")
    return PlotSection(anchor, heading, tuple(made), notes=(note,), capped=_capped((len(made), len(wheres), "(cell, layer) timelines")))


def sum_lines(lines: Sequence[tuple[float, Line]]) -> Line | None:
    """Several series summed on one time axis: each shifted by its offset (s), then binned to
    whole seconds (a series' points within one second averaged) and the bins added."""
    total: dict[int, float] = {}
    for offset, (ts, vs) in lines:
        per: dict[int, list[float]] = {}
        for t, v in zip(ts, vs):
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                per.setdefault(int(math.floor(float(t) + offset)), []).append(float(v))
        for b, values in per.items():
            total[b] = total.get(b, 0.0) + sum(values) / len(values)
    if not total:
        return None
    keys = sorted(total)
    return [k + 0.5 for k in keys], [total[k] for k in keys]
