"""A loaded run -> one self-contained HTML page: the report's header and tables, flags,
plots (inline SVG, :mod:`vmbench.report.sections`) and the recorded environment.

The page comes from the Jinja2 templates in ``templates/`` (``page.html.j2``, ``parts.html.j2``,
``page.css``): changing the page is editing them, but for a table's rows (:func:`table_body`).
This module prepares plain values for them.  The page loads nothing: no scripts, no
stylesheets, fonts or images from anywhere; CSS is inline, plots are inline SVG.  Autoescaping
is on, with :func:`esc` as the escape: every piece of text from the database is escaped (and a
``scheme://`` in it is written ``scheme&#58;//``, so the page source holds no URL outside the
SVG namespace declarations); only the plots' SVG, made by matplotlib, and the tables' rows,
escaped cell by cell by :func:`table_body`, go in as they are.  The tables carry every figure;
plots only illustrate them, and each has a text alternative beside it.
"""

from __future__ import annotations

import html
import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

import jinja2
from markupsafe import Markup

from .build import build_report, collector_paused
from .figures import IN_PROCESS, Painter
from .load import RunData
from .sections import PlotSection, start_plot_sections
from .summary import summary_lines
from .tables import Table

TEMPLATES = Path(__file__).resolve().parent / "templates"


def esc(value: Any) -> str:
    """Text from the database, safe in HTML text and attribute values."""
    return html.escape("" if value is None else str(value), quote=True).replace("://", "&#58;//")


#: Markdown's code span, as the report's text writes a command or a key (`repeats: 3`)
CODE_SPAN = re.compile(r"`([^`\n]+)`")


def code_spans(escaped: str) -> str:
    """Escaped text with each `code span` as <code> (its text is escaped already: backticks are not)."""
    return CODE_SPAN.sub(r"<code>\1</code>", escaped) if "`" in escaped else escaped


def _code(value: Any) -> Markup:
    """The ``code`` filter of the templates: text escaped, code spans as <code>."""
    return Markup(code_spans(esc(value)))


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` of the templates, escaped by :func:`esc` (Markup passes as it is)."""
    return value if isinstance(value, Markup) else Markup(esc(value))


@lru_cache(maxsize=1)
def _jinja() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES)), autoescape=True, finalize=_finalize,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["svg"] = Markup  # the plots' SVG: made by matplotlib, its text escaped there
    env.filters["code"] = _code
    return env


# ---- the page's values ------------------------------------------------------------------------


@dataclass(frozen=True)
class TableView:
    anchor: str
    title: str
    headers: tuple[Markup, ...]
    body: Markup  # the rows, made by :func:`table_body`
    notes: tuple[str, ...]
    facts: tuple[tuple[str, str], ...]
    missing: str


#: tables added below a report's own when the page is made (the advice section: advice/ is above report/)
MoreTables = Callable[[RunData, dict], Sequence[Table]]


def write_html(data: RunData, path: str | os.PathLike, painter: Painter = IN_PROCESS, more: MoreTables | None = None) -> Path:
    """Write the run's report page (:func:`render_html`) to ``path`` (replaced atomically);
    returns the path."""
    out = Path(path)
    text = render_html(data, painter, more)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(out)
    return out


def render_html(data: RunData, painter: Painter = IN_PROCESS, more: MoreTables | None = None) -> str:
    """The loaded run's report as one self-contained HTML page, ``more`` tables (made from the
    run and the report's header) below its own; ``painter`` draws the figures, which start
    as soon as the report's tables are made."""
    with collector_paused():
        header, tables = build_report(data)
        sections = start_plot_sections(data, tables, painter)
        return _page(data, header, [*tables, *(more(data, header) if more else ())], sections)


def render_page(data: RunData, header: dict, tables: Sequence[Table], painter: Painter = IN_PROCESS) -> str:
    """The page of a run whose header and tables are made."""
    with collector_paused():
        return _page(data, header, tables, start_plot_sections(data, tables, painter))


def _page(data: RunData, header: dict, tables: Sequence[Table], sections: Callable[[], Sequence[PlotSection]]) -> str:
    """The page: tables with no rows and plot sections with nothing to show are left out (a
    crypto benchmark that gave no figures stays); ``sections`` gives the plot sections once
    their figures are drawn (the tables are made meanwhile)."""
    run = data.run
    title = f"vmbench report: run {header.get('run', run.id)}, {run.scenario_name}"
    environment_text = (("Environment (as recorded by the run)", json.dumps(run.environment.to_row(), indent=2, sort_keys=True, default=str)),
                        ("Plan", json.dumps(run.plan_json, indent=2, sort_keys=True, default=str)),
                        ("Scenario file as run", data.scenario_text))
    views = [table_view(t) for t in tables if t.records]
    return _jinja().get_template("page.html.j2").render(
        title=title, summary=summary_lines(header, tables), header=header, tables=views,
        sections=[s for s in sections() if not s.empty or s.notable], flags=flags(data, header, tables),
        environment=environment_text)


def anchor(name: str) -> str:
    return "table-" + re.sub(r"[^a-z0-9-]+", "-", name.lower())


#: tables whose row notes go under the table, each naming its row, instead of in a column: a
#: table of many figures (CPU per I/O) keeps to the page's width, and its notes are on how the
#: sampler measured, not on what a reader acts on
NOTES_UNDER = ("cpu-per-io",)


def table_view(t: Table) -> TableView:
    """A table as the page shows it: its headers, rows (:func:`table_body`), notes and facts."""
    facts = getattr(t, "facts", None) or {}
    missing = getattr(t, "missing", None)
    notes = list(t.notes)
    if t.name in NOTES_UNDER and any(c.key == "note" for c in t.columns):
        notes = [f"{row_name(r)}: {r['note']}" for r in t.records if r.get("note")] + notes
        t = Table(t.name, t.title, [c for c in t.columns if c.key != "note"], t.records, t.notes, facts, getattr(t, "missing", []))
    return TableView(anchor(t.name), t.title, tuple(header_html(c.header) for c in t.columns), table_body(t), tuple(notes),
                     tuple((k, plain(v)) for k, v in facts.items()), plain(missing) if missing else "")


def row_name(r: dict) -> str:
    """A row in words, for a note or flag about it: its job, cell (or side), stack and layer."""
    return " ".join(str(x) for x in (r.get("job"), r.get("cell") or r.get("side"), r.get("stack"), r.get("layer")) if x)


def header_html(header: str) -> Markup:
    """A column's header, escaped, that may break after a "/" or a "+" ("other+exited µs/IO",
    "switches/IO"): a table of many figures then fits the page on narrower columns."""
    return Markup(esc(header).replace("/", "/<wbr>").replace("+", "+<wbr>"))


def table_body(t: Table) -> Markup:
    """The table's rows, one ``<tr>`` a line: each cell's text escaped (:func:`esc`) with its
    classes (numbers right-aligned, long text wrapped, verdicts, a target's result coloured),
    the host's rows bold.  Made here rather than in parts.html.j2, whose expressions cost half a
    second for the 60,000 cells of a 1,000-cell run; the markup is the same."""
    columns = [_ColumnView(c, t.records) for c in t.columns]
    lines = []
    for r in t.records:
        cells = "".join(c.cell(r) for c in columns)
        lines.append(f'<tr class="host">{cells}</tr>\n' if r.get("side") == "host" else f"<tr>{cells}</tr>\n")
    return Markup("".join(lines))


#: a cell's text longer than this wraps at its spaces (shorter text, and numbers, stay on one line)
WRAP_FROM = 12


class _ColumnView:
    """One column's cells: the text (the column's own format, or the value as it is when that
    fails) and classes."""

    def __init__(self, c: Any, records: Sequence[dict]) -> None:
        self.key = c.key
        # Column.text(record) formats a delta with its interval and verdict; older Columns have fmt only
        self.text: Callable[[dict], str] = c.text if hasattr(c, "text") else lambda r: c.fmt(r.get(c.key))
        numeric = any(isinstance(r.get(c.key), (int, float)) and not isinstance(r.get(c.key), bool) for r in records)
        self.classes = ["num"] if numeric else []
        self.verdict = c.key.endswith("_verdict")
        self.result = c.key == "result"
        # the cell's opening tag, by whether its text wraps (the result's own class aside)
        self.opening = {wrap: _td(self.classes + (["wrap"] if wrap else []) + (["verdict"] if self.verdict else []))
                        for wrap in (False, True)}

    def cell(self, r: dict) -> str:
        try:
            text = self.text(r)
        except (TypeError, ValueError):
            text = str(r.get(self.key))
        wrap = len(text) > WRAP_FROM and " " in text
        if self.result and text in RESULT_CLASSES:
            opening = _td(self.classes + (["wrap"] if wrap else []) + (["verdict"] if self.verdict else []) + [RESULT_CLASSES[text]])
        else:
            opening = self.opening[wrap]
        # most cells are numbers or plain words: escaped (and code spans looked for) only when they need it
        shown = code_spans(esc(text)) if NEEDS_ESCAPE.search(text) else text
        return f"{opening}{shown}</td>"


#: a target's result and its cell's class
RESULT_CLASSES = {"PASS": "pass", "FAIL": "fail", "NOT MEASURED": "notmeasured"}
#: text that :func:`esc` or :func:`code_spans` would change
NEEDS_ESCAPE = re.compile(r"[&<>\"'`]|://")


def _td(classes: list[str]) -> str:
    return f'<td class="{" ".join(classes)}">' if classes else "<td>"  # the classes are the names above


def plain(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple, set)):
        return "; ".join(plain(x) for x in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}: {plain(x)}" for k, x in v.items())
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "-" if v is None else str(v)


#: the order flags are listed in: what a reader must act on first, notes on how vmbench measured last
FLAG_ORDER = ("problem", "warning", "note", "measurement note")


def flags(data: RunData, header: dict, tables: Sequence[Table]) -> list[tuple[str, str]]:
    """What a reader must not miss, most important first (:data:`FLAG_ORDER`): the run's
    status, unmeasured cells, targets, what a table lacks to be judged, the accelerator, notes
    on figures (caches, CPU-bound, shared disks), then the CPU sampler's notes on its own
    measurement (counters that lost ticks, repeats not sampled)."""
    found = _flags(data, header, tables)
    return sorted(found, key=lambda f: FLAG_ORDER.index(f[0]) if f[0] in FLAG_ORDER else len(FLAG_ORDER))


def _flags(data: RunData, header: dict, tables: Sequence[Table]) -> list[tuple[str, str]]:
    run = data.run
    out: list[tuple[str, str]] = []
    if run.status != "ok":
        out.append(("problem", f"run status {run.status}" + (f": {run.error}" if run.error else "")))
    for c in data.cells:
        if not c.valid:
            out.append(("problem", f"cell {c.name} not measured: " + ("; ".join(c.problems) or "a setting did not take effect")))
    if "tcg" in str(header.get("accelerator", "")).lower():
        out.append(("note", "guests ran under TCG (software emulation, no KVM): guest figures include the emulation's cost"))
    if run.attempts > 1:
        out.append(("note", f"the run was resumed ({run.attempts} attempts); every measurement is kept once"))
    for t in tables:
        for r in t.records:
            if t.name == "targets" and r.get("result") in ("FAIL", "NOT MEASURED"):
                out.append(("problem" if r["result"] == "FAIL" else "warning",
                            f"target {r.get('target')} for {r.get('job')} at {r.get('layer') or r.get('stack') or r.get('cell')}: "
                            f"{r['result']}" + (f" ({r['why']})" if r.get("why") else "")))
            elif t.name.startswith("load-") and str(r.get("target") or "").startswith("FAIL"):  # a load step's target
                out.append(("problem", f"target for {r.get('job') or r.get('victim_job')} at "
                                       f"{r.get('step') or r.get('phase')} ({r.get('cell')} {r.get('layer')}): {r['target']}"))
            elif r.get("note"):
                out.append(("measurement note" if t.name == "cpu-per-io" else "note", f"{row_name(r)}: {r['note']}"))
        missing = getattr(t, "missing", None)
        if missing:
            out.append(("warning", f"{t.title}: missing {plain(missing)}"))
    return out
