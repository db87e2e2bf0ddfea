"""A stored run -> one self-contained HTML page: the report's header and tables, flags,
plots (inline SVG from :mod:`vmbench.report.plots`) and the recorded environment.

The page loads nothing: no scripts, no stylesheets, fonts or images from anywhere; CSS is
inline, plots are inline SVG.  Every piece of text from the database is escaped (and a
``scheme://`` in it is written ``scheme&#58;//``, so the page source holds no URL outside
the SVG namespace declarations).  The tables carry every figure; plots only illustrate them,
and each has a text alternative beside it.
"""

from __future__ import annotations

import html
import json
import os
import re
import sqlite3
from collections import OrderedDict
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from ..fio.result import Histogram
from ..results.db import ResultsDB, RunRow
from . import plots
from .build import build_report, shared_raw_rows
from .tables import Table

# Plots per kind are capped so that a 100-cell run renders in about a second; the tables
# always hold every row, and each section says what it left out.
MAX_WATERFALLS = 4  # (cell, stack) figures, each with one panel per job
MAX_LATENCY = 4  # figures
MAX_LATENCY_LINES = 8  # lines per figure
MAX_BAR_FIGURES = 4  # jobs
MAX_BAR_ROWS = 30  # cells per figure
MAX_CRYPTO = 4  # jobs
MAX_TIMELINES = 4  # jobs
MAX_TIMELINE_LINES = 6  # measurements per panel
MIB_TO_MB = 1.048576

CSS = """
:root { --fg: #1b1b1b; --muted: #555; --line: #c8c8c8; --head: #eef2f6; --warn: #8a4b00; --bad: #a00000; --good: #005a2b; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", Arial, sans-serif; color: var(--fg);
       margin: 0 auto; padding: 1rem 1.5rem 3rem; max-width: 1400px; line-height: 1.4; font-size: 15px; }
h1 { font-size: 1.5rem; margin: 0.5rem 0 1rem; } h2 { font-size: 1.25rem; margin-top: 2.2rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1.05rem; margin-top: 1.6rem; }
dl.header { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 1rem; margin: 0; }
dl.header dt { font-weight: 600; } dl.header dd { margin: 0; overflow-wrap: anywhere; }
nav ul { columns: 2; padding-left: 1.2rem; } nav a { color: #0b4f8a; }
.scroll { overflow-x: auto; margin: 0.8rem 0; }
table { border-collapse: collapse; font-size: 0.86rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; font-size: 1rem; padding: 0.3rem 0; caption-side: top; }
th, td { border: 1px solid var(--line); padding: 0.2rem 0.45rem; vertical-align: top; }
th { background: var(--head); text-align: left; position: sticky; top: 0; }
td { white-space: nowrap; } td.wrap { white-space: normal; min-width: 16rem; }
td.num { text-align: right; } tbody tr:nth-child(even) { background: #f8f8f8; }
tr.host td { font-weight: 600; }
td.pass { color: var(--good); font-weight: 700; } td.fail { color: var(--bad); font-weight: 700; }
td.notmeasured { color: var(--warn); font-weight: 700; } td.verdict { font-style: italic; }
ul.notes { color: var(--muted); font-size: 0.88rem; margin: 0.2rem 0 0.6rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 0.8rem; font-size: 0.88rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.missing { color: var(--warn); font-size: 0.9rem; }
ul.flags li { margin: 0.2rem 0; } ul.flags .level { font-weight: 700; }
.figs { display: flex; flex-wrap: wrap; gap: 0 2rem; align-items: flex-start; }
figure { margin: 1rem 0 1.6rem; flex: 0 1 auto; max-width: 100%; } figure svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 0.85rem; color: var(--muted); }
figcaption b { color: var(--fg); }
p.empty, p.capped { color: var(--muted); font-style: italic; }
details { margin: 0.6rem 0; } summary { cursor: pointer; font-weight: 600; }
pre { background: #f6f6f6; border: 1px solid var(--line); padding: 0.6rem; overflow-x: auto; font-size: 0.8rem; }
@media print { th { position: static; } details > pre { white-space: pre-wrap; } }
"""


def esc(value: Any) -> str:
    """Text from the database, safe in HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True).replace("://", "&#58;//")


def write_html(db: ResultsDB, ref: str | int | None, path: str | os.PathLike) -> Path:
    """Write the run's report page to ``path`` (replaced atomically); returns the path."""
    out = Path(path)
    text = render_html(db, ref)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out


def render_html(db: ResultsDB, ref: str | int | None = "latest") -> str:
    """The run's report as one self-contained HTML page."""
    run = db.resolve_run(ref)
    header, tables = build_report(db, run.id)
    by_name = {t.name: t for t in tables}
    cells = sorted(db.rows("cells", run.id), key=lambda c: c["seq"])
    sections = [
        ("plot-layers", "Layer by layer (IOPS)", _waterfalls(by_name.get("layers"))),
        ("plot-latency", "Latency percentiles", _latency(db, run, cells)),
        ("plot-cells", "Per cell: change and verdict", _cell_bars(by_name.get("gaps"), by_name.get("journey"))),
        ("plot-crypto", "Crypto ceiling and LUKS throughput", _crypto(db, run, cells, by_name.get("layers"))),
        ("plot-timeline", "Over the run: fio logs and telemetry", _timelines(db, run)),
    ]
    title = f"vmbench report: run {header.get('run', run.id)}, {run.scenario_name}"
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           '<meta name="viewport" content="width=device-width, initial-scale=1">',
           "<meta name=\"referrer\" content=\"no-referrer\">",
           f"<title>{esc(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>",
           f"<h1>{esc(title)}</h1>", '<section id="run" aria-label="Run">', '<dl class="header">']
    out += [f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in header.items()]
    out += ["</dl>", "</section>", _nav(tables, sections), _flags(run, header, tables, cells)]
    out.append('<section id="tables"><h2>Tables</h2>')
    out += [_table(t) for t in tables]
    out.append("</section>")
    out.append('<section id="plots"><h2>Plots</h2><p>Every figure below is also in the tables above; '
               "each plot has its numbers written beside it.</p>")
    for anchor, heading, body in sections:
        out.append(f'<section id="{anchor}"><h3>{esc(heading)}</h3>{body}</section>')
    out.append("</section>")
    out.append(_environment(db, run))
    out += ["</body>", "</html>", ""]
    return "\n".join(out)


# ---- page parts -------------------------------------------------------------------------------


def _anchor(name: str) -> str:
    return "table-" + re.sub(r"[^a-z0-9-]+", "-", name.lower())


def _nav(tables: Sequence[Table], sections: Sequence[tuple[str, str, str]]) -> str:
    items = ['<li><a href="#flags">Flags and notes</a></li>']
    items += [f'<li><a href="#{_anchor(t.name)}">{esc(t.title)}</a></li>' for t in tables]
    items += [f'<li><a href="#{a}">Plot: {esc(h)}</a></li>' for a, h, _ in sections]
    items.append('<li><a href="#environment">Environment, plan and scenario</a></li>')
    return '<nav aria-label="Contents"><h2>Contents</h2><ul>' + "".join(items) + "</ul></nav>"


def _table(t: Table) -> str:
    numeric = {c.key for c in t.columns
               if any(isinstance(r.get(c.key), (int, float)) and not isinstance(r.get(c.key), bool) for r in t.records)}
    head = "".join(f'<th scope="col">{esc(c.header)}</th>' for c in t.columns)
    rows = []
    for r in t.records:
        tds = []
        for c in t.columns:
            try:  # Column.text(record) formats a delta with its interval and verdict; older Columns have fmt only
                text = c.text(r) if hasattr(c, "text") else c.fmt(r.get(c.key))
            except (TypeError, ValueError):
                text = str(r.get(c.key))
            cls = ["num"] if c.key in numeric else []
            if len(text) > 40:
                cls.append("wrap")
            if c.key.endswith("_verdict"):
                cls.append("verdict")
            if c.key == "result" and text in ("PASS", "FAIL", "NOT MEASURED"):
                cls.append(text.lower().replace(" ", ""))
            tds.append(f'<td class="{" ".join(cls)}">{esc(text)}</td>' if cls else f"<td>{esc(text)}</td>")
        tr = '<tr class="host">' if r.get("side") == "host" else "<tr>"
        rows.append(tr + "".join(tds) + "</tr>")
    parts = [f'<section id="{_anchor(t.name)}" aria-label="{esc(t.title)}"><div class="scroll"><table>',
             f"<caption>{esc(t.title)}</caption>", f"<thead><tr>{head}</tr></thead>",
             "<tbody>" + "\n".join(rows) + "</tbody></table></div>"]
    if t.notes:
        parts.append('<ul class="notes">' + "".join(f"<li>{esc(n)}</li>" for n in t.notes) + "</ul>")
    facts = getattr(t, "facts", None)
    if facts:
        parts.append('<dl class="facts">' + "".join(f"<dt>{esc(k)}</dt><dd>{esc(_plain(v))}</dd>" for k, v in facts.items()) + "</dl>")
    missing = getattr(t, "missing", None)
    if missing:
        parts.append(f'<p class="missing"><b>Missing:</b> {esc(_plain(missing))}</p>')
    parts.append("</section>")
    return "\n".join(parts)


def _plain(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, set)):
        return "; ".join(_plain(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}: {_plain(x)}" for k, x in v.items())
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "-" if v is None else str(v)


def _flags(run: RunRow, header: Mapping, tables: Sequence[Table], cells: Sequence[dict]) -> str:
    """What a reader must not miss: the run's status, unmeasured cells, targets, notes on
    figures (caches, shared disks), what a table lacks to be judged, the accelerator."""
    flags: list[tuple[str, str]] = []
    if run.status != "ok":
        flags.append(("problem", f"run status {run.status}" + (f": {run.error}" if run.error else "")))
    for c in cells:
        if not c["valid"]:
            flags.append(("problem", f"cell {c['name']} not measured: " + ("; ".join(c.get("problems") or []) or "a setting did not take effect")))
    if "tcg" in str(header.get("accelerator", "")).lower():
        flags.append(("note", "guests ran under TCG (software emulation, no KVM): guest figures include the emulation's cost"))
    if getattr(run, "attempts", 1) > 1:
        flags.append(("note", f"the run was resumed ({run.attempts} attempts); every measurement is kept once"))
    for t in tables:
        for r in t.records:
            if t.name == "targets" and r.get("result") in ("FAIL", "NOT MEASURED"):
                flags.append(("problem" if r["result"] == "FAIL" else "warning",
                              f"target {r.get('target')} for {r.get('job')} at {r.get('layer') or r.get('stack') or r.get('cell')}: "
                              f"{r['result']}" + (f" ({r['why']})" if r.get("why") else "")))
            elif r.get("note"):
                where = " ".join(str(x) for x in (r.get("job"), r.get("cell") or r.get("side"), r.get("layer")) if x)
                flags.append(("note", f"{where}: {r['note']}"))
        missing = getattr(t, "missing", None)
        if missing:
            flags.append(("warning", f"{t.title}: missing {_plain(missing)}"))
    items = "".join(f'<li><span class="level">{esc(level)}:</span> {esc(text)}</li>' for level, text in flags)
    body = f'<ul class="flags">{items}</ul>' if flags else '<p class="empty">nothing to flag</p>'
    return f'<section id="flags"><h2>Flags and notes</h2>{body}</section>'


def _environment(db: ResultsDB, run: RunRow) -> str:
    row = db.conn.execute("SELECT scenario_text FROM runs WHERE id = ?", (run.id,)).fetchone()
    parts = ['<section id="environment"><h2>Environment, plan and scenario</h2>']
    for summary, text in (("Environment (as recorded by the run)", json.dumps(run.environment, indent=2, sort_keys=True, default=str)),
                          ("Plan", json.dumps(run.plan, indent=2, sort_keys=True, default=str)),
                          ("Scenario file as run", row[0] if row else "")):
        parts.append(f"<details><summary>{esc(summary)}</summary><pre>{esc(text)}</pre></details>")
    parts.append("</section>")
    return "\n".join(parts)


def _figures(made: Iterable[plots.Plot]) -> str:
    out = []
    for p in made:
        size = re.search(r'width="([0-9.]+)pt"', p.svg[:400])
        style = f' style="max-width: {float(size.group(1)) * 4 / 3:.0f}px"' if size else ""
        out.append(f"<figure{style}>{p.svg}<figcaption><b>{esc(p.title)}.</b> {esc(p.alt)}</figcaption></figure>")
    return '<div class="figs">' + "\n".join(out) + "</div>" if out else ""


def _capped(shown: int, total: int, what: str) -> str:
    if total <= shown:
        return ""
    return f'<p class="capped">Showing the first {shown} of {total} {what}; the tables above hold all of them.</p>'


def _empty(text: str) -> str:
    return f'<p class="empty">{esc(text)}</p>'


# ---- plot sections ----------------------------------------------------------------------------


def _waterfalls(layers: Table | None) -> str:
    if layers is None or not layers.records:
        return _empty("no stacks in this run: nothing to show layer by layer")
    groups: "OrderedDict[tuple, OrderedDict[str, list[dict]]]" = OrderedDict()
    for r in layers.records:
        groups.setdefault((r.get("cell"), r.get("stack")), OrderedDict()).setdefault(r.get("job"), []).append(r)
    made = [plots.waterfall(f"{cell} / {stack}: IOPS per layer", list(jobs.items()))
            for (cell, stack), jobs in list(groups.items())[:MAX_WATERFALLS]]
    return _figures(made) + _capped(len(made), len(groups), "(cell, stack) waterfalls")


def _histograms(db: ResultsDB, run: RunRow, cells: Sequence[dict]) -> "OrderedDict[tuple, Histogram]":
    """Merged clat histograms per (side, cell, stack, layer, job), in run order; cells of one
    boot share their raw disk rows as in the tables."""
    rows = [dict(side=r[0], cell=r[1], stack=r[2], layer=r[3], job=r[4], bins=r[5]) for r in db.conn.execute(
        "SELECT m.side, c.name, m.stack, m.layer, m.job, m.clat_bins_json FROM measurements m "
        "LEFT JOIN cells c ON c.id = m.cell_id WHERE m.run_id = ? ORDER BY m.id", (run.id,))]
    rows += shared_raw_rows(list(cells), rows)
    out: "OrderedDict[tuple, Histogram]" = OrderedDict()
    for r in rows:
        key = (r["side"], r["cell"] if r["side"] != "host" else None, r["stack"], r["layer"], r["job"])
        out[key] = out.get(key, Histogram()).merge(Histogram.from_json(json.loads(r["bins"]) if isinstance(r["bins"], str) else r["bins"]))
    return out


def _latency(db: ResultsDB, run: RunRow, cells: Sequence[dict]) -> str:
    hists = _histograms(db, run, cells)
    if not any(h.count for h in hists.values()):
        return _empty("no latency histograms in this run")
    jobs = [j["name"] for j in run.plan.get("jobs", [])] or list(OrderedDict.fromkeys(k[4] for k in hists))
    valid = [c["name"] for c in cells if c["valid"]]
    specs: list[tuple[str, list[tuple[str, Any]]]] = []
    with_stacks = any(k[2] for k in hists)
    for job in jobs:
        host = hists.get(("host", None, None, "host", job))
        base = [("host", host.bins)] if host is not None and host.count else []
        if with_stacks:
            for cell in valid:
                lines = list(base)
                multi = len({k[2] for k in hists if k[1] == cell and k[2]}) > 1
                for (side, c, stack, layer, j), h in hists.items():
                    if side == "guest" and c == cell and j == job and h.count:
                        lines.append((layer if stack is None or not multi else f"{stack}: {layer}", h.bins))
                if len(lines) > len(base):
                    specs.append((f"{job}, {cell}: host vs each layer", lines[:MAX_LATENCY_LINES]))
        else:
            lines = list(base) + [(f"guest {c}", hists[("guest", c, None, "raw", job)].bins) for c in valid
                                  if hists.get(("guest", c, None, "raw", job)) is not None]
            if len(lines) > len(base):
                specs.append((f"{job}: host vs guest raw disk", lines[:MAX_LATENCY_LINES]))
    made = [plots.latency(title, lines) for title, lines in specs[:MAX_LATENCY]]
    note = "<p>Percentiles of fio's completion latency from the json+ histograms merged over repeats (the tables' rule).</p>"
    return note + _figures(made) + _capped(len(made), len(specs), "latency plots")


def _cell_bars(gaps: Table | None, journey: Table | None) -> str:
    made: list[plots.Plot] = []
    intro, capped, total = [], [], 0
    if gaps is not None:
        guest = [r for r in gaps.records if r.get("side") == "guest"]
        multi = len({r.get("cell") for r in guest}) > 1
        key = "vs_baseline" if multi else "gap"
        by_job: "OrderedDict[str, list[dict]]" = OrderedDict()
        for r in guest:
            by_job.setdefault(r.get("job"), []).append(r)
        total += len(by_job)
        what = "change from the baseline" if multi else "gap to the host"
        for job, recs in list(by_job.items())[:MAX_BAR_FIGURES]:
            made.append(plots.cell_bars(f"{job}: {what} per cell", recs[:MAX_BAR_ROWS], key))
            capped.append(_capped(min(len(recs), MAX_BAR_ROWS), len(recs), f"cells of {job}"))
        if guest and not any(r.get(f"{key}_low") is not None for r in guest):
            intro.append("<p>No intervals in this report (fewer than 3 repeats, or a report without them): "
                         "the bars show the point figure only, with no verdict.</p>")
    if journey is not None and journey.records:
        by_job = OrderedDict()
        for r in journey.records:
            by_job.setdefault(r.get("job"), []).append(r)
        total += len(by_job)
        for job, recs in list(by_job.items())[:MAX_BAR_FIGURES]:
            made.append(plots.cell_bars(f"{job}: change per journey step", recs[:MAX_BAR_ROWS], "vs_previous", "step"))
            capped.append(_capped(min(len(recs), MAX_BAR_ROWS), len(recs), f"steps of {job}"))
    if not made:
        return _empty("no guest measurements in this run")
    return "".join(intro) + _figures(made) + "".join(capped) + _capped(len(made), total, "per-job bar plots")


def _crypto(db: ResultsDB, run: RunRow, cells: Sequence[dict], layers: Table | None) -> str:
    crypto = db.rows("crypto", run.id)
    luks_of = {s["name"]: s.get("luks") for s in run.plan.get("stacks", []) if s.get("luks")}
    cpu_of = {c["name"]: (c.get("settings") or {}).get("cpu") for c in cells}
    luks_recs = [r for r in (layers.records if layers else [])
                 if r.get("stack") in luks_of and any(p.startswith("luks") for p in str(r.get("layer_path", "")).split("+"))]
    if not luks_recs and not crypto:
        return _empty("no LUKS layer and no crypto benchmark in this run")

    def measured(c: Mapping) -> list[tuple[str, float]]:
        return [(f"ceiling {k}", c[f"{k}_mib_s"] * MIB_TO_MB) for k in ("encrypt", "decrypt") if c.get(f"{k}_mib_s") is not None]

    def ceiling(side: str, cpu: Any, luks: Mapping) -> list[tuple[str, float]]:
        for c in crypto:
            if c["side"] == side and (side == "host" or c["cpu"] == cpu) and c["cipher"] == luks.get("cipher") \
                    and c["key_bits"] == luks.get("key_bits") and measured(c):
                return measured(c)
        return []

    specs: list[tuple[str, list, float | None]] = []
    by_job: "OrderedDict[str, list[dict]]" = OrderedDict()
    for r in luks_recs:
        by_job.setdefault(r.get("job"), []).append(r)
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
        name = str(job).replace(" (sync)", "")
        targets = [t["min_mb_s"] for t in run.plan.get("targets", []) if t.get("job") == name and t.get("min_mb_s") is not None]
        specs.append((f"{job}: LUKS throughput and crypto ceiling", out[:12], targets[0] if targets else None))
    if not specs:  # crypto rows without a LUKS layer measured: the ceilings alone
        groups_c = [(f"{c['side']} {c['cpu']} {c['cipher']}/{c['key_bits']}", measured(c)) for c in crypto if measured(c)]
        if groups_c:
            specs.append(("Crypto ceilings (no LUKS layer measured)", groups_c[:12], None))
    made = [plots.crypto(title, groups, target) for title, groups, target in specs[:MAX_CRYPTO]]
    if not made:
        return _empty("the crypto benchmark gave no figures in this run (see the crypto table)")
    return ("<p>Crypto ceiling = <code>cryptsetup benchmark</code> for the stack's cipher on one CPU, converted from MiB/s to MB/s "
            "to sit beside fio's MB/s.</p>" + _figures(made) + _capped(len(made), len(specs), "crypto plots"))


def _telemetry(db: ResultsDB, run: RunRow) -> list[dict]:
    try:
        rows = db.conn.execute(
            "SELECT t.source, t.series_json, m.side, c.name, m.stack, m.layer, m.job, m.repeat FROM telemetry t "
            "LEFT JOIN measurements m ON m.id = t.measurement_id LEFT JOIN cells c ON c.id = m.cell_id "
            "WHERE t.run_id = ? AND (t.source LIKE 'fio-%' OR t.source IN ('disk', 'cpu', 'zpool', 'arc', 'host-disk', 'host-cpu')) ORDER BY t.id", (run.id,)).fetchall()
    except sqlite3.Error:  # no telemetry table: nothing logged
        return []
    out = []
    for source, series, side, cell, stack, layer, job, repeat in rows:
        try:
            s = json.loads(series)
        except ValueError:
            continue
        where = "host" if side == "host" else " ".join(str(x) for x in (cell, stack, layer) if x)
        label = (where or "?") + (f" #{repeat}" if repeat and int(run.plan.get("repeats", 1)) > 1 else "")
        for flat_source, flat in _flatten(source, s):
            if not isinstance(flat, dict) or not flat.get("t_s") or not flat.get("values"):
                continue
            out.append({"source": flat_source, "series": flat, "job": job or "?", "repeat": repeat, "label": label})
    return out


def _flatten(source: str, s: Any) -> list[tuple[str, dict]]:
    """The sampler's series as plain (t_s, values) lines: the device under the target's MB/s
    read and written, the CPUs' busy share, a ZFS pool's MB/s read and written and the ARC's
    hit ratio; the host's own device and CPU under a guest run ("host-disk", "host-cpu") as
    "host-dev-read", "host-dev-write", "host-cpu-busy"; fio's logs as they are."""
    if not isinstance(s, dict):
        return []
    if source in ("host-disk", "host-cpu"):
        return [("host-" + name, line) for name, line in _flatten(source[len("host-"):], s)]
    if source == "zpool":
        return [("pool-read", {"t_s": s.get("t_s"), "values": s.get("read_mb_s"), "unit": "MB/s"}),
                ("pool-write", {"t_s": s.get("t_s"), "values": s.get("write_mb_s"), "unit": "MB/s"})]
    if source == "arc":
        ratio = s.get("hit_ratio") or []
        return [("arc-hit", {"t_s": s.get("t_s"), "values": [None if v is None else 100.0 * v for v in ratio], "unit": "%"})]
    if source == "disk":
        dev = (s.get("devices") or {}).get(s.get("primary") or "") or {}
        return [("dev-read", {"t_s": s.get("t_s"), "values": dev.get("read_mb_s"), "unit": "MB/s"}),
                ("dev-write", {"t_s": s.get("t_s"), "values": dev.get("write_mb_s"), "unit": "MB/s"})]
    if source == "cpu":
        idle = s.get("idle") or []
        return [("cpu-busy", {"t_s": s.get("t_s"), "values": [None if v is None else 100.0 - v for v in idle], "unit": "%"})]
    return [(source, s)]


#: the samplers' panels of a timeline, in order (each where it saw anything)
SAMPLED_PANELS = ("dev-read", "dev-write", "pool-read", "pool-write", "arc-hit", "cpu-busy",
                  "host-dev-read", "host-dev-write", "host-cpu-busy")


def _timelines(db: ResultsDB, run: RunRow) -> str:
    rows = _telemetry(db, run)
    if not rows:
        return _empty("no fio logs or telemetry in this run")
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
            unit = str(lines[0]["series"].get("unit") or "")
            panels.append((source, unit, [(r["label"], r["series"]["t_s"], r["series"]["values"]) for r in lines]))
        made.append(plots.timeline(f"{job}: over the run", panels))
    intro = ("<p>IOPS and mean completion latency per second, from fio's own logs of each measurement; where the run "
             "has telemetry, the device under the target's MB/s read and written and the CPUs' busy share, sampled "
             "beside fio once a second; on a ZFS host also the pool's MB/s read and written (zpool iostat) and the "
             "ARC's hit ratio; while fio ran in a guest whose scratch disk is on the host's storage, also the host's "
             "(the host panels, and the pool's).</p>")
    return intro + "".join(f"<p>{esc(n)}</p>" for n in sorted(notes)) + _figures(made) + _capped(len(made), len(by_job), "jobs with fio logs")
