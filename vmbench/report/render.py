"""Render table models as text (tabulate's simple table, written by
:func:`~vmbench.report.textfit.text_table`), Markdown (tabulate), CSV or JSON.

Under each table: its notes, then its admissibility facts and what is not stated, each said
once per report.  The text report fits a 120-column terminal: a wide table leaves out its detail
columns (:attr:`~vmbench.report.tables.Column.detail`) and says which (``--wide`` and
``--section`` show them).  JSON carries every field (``facts``, ``missing``); CSV has the
records only.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from typing import Any, Sequence

from ..settings import Choice
from .tables import NOTE_COLUMNS, Table
from .textfit import WIDTH, Fit, fit_columns, text_table


class Format(Choice):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"


#: what a fitted table says it left out (``{columns}``, ``{name}``)
HIDDEN = "not shown, to fit {width} columns: {columns} (--wide shows them; vmbench report --section {name} this table whole)"


def render(tables: Sequence[Table], fmt: Format, header: dict | None = None, summary: Sequence[str] = (),
           wide: bool = False, show_empty: bool = False) -> str:
    """The report; ``summary`` (:func:`~vmbench.report.summary.summary_lines`) opens it.  Text and
    Markdown leave out tables with no rows (unless ``show_empty``) and say each note and fact once (under the first table
    with it); text fits :data:`WIDTH` columns unless ``wide``.  JSON keeps everything."""
    if fmt is Format.JSON:
        doc: dict[str, Any] = {"summary": list(summary)} if summary else {}
        doc.update({"run": header or {}, "tables": [{"name": t.name, "title": t.title, "records": t.records, "notes": t.notes,
                                                     "facts": t.facts, "missing": t.missing} for t in tables]})
        return json.dumps(doc, indent=2, default=str) + "\n"
    if fmt is Format.CSV:
        return _csv(tables)
    markdown = fmt is Format.MARKDOWN
    width = None if wide or markdown else WIDTH
    parts = []
    if summary:
        if markdown:
            parts.append("## Summary\n\n" + "\n".join(f"- {line}" for line in summary))
        else:
            parts.append("Summary\n=======\n" + "\n".join(_wrap(line, WIDTH, "", "  ") for line in summary))
    if header:
        if markdown:
            parts.append("\n".join(f"- **{k}**: {v}" for k, v in header.items()))
        else:
            parts.append("\n".join(_wrap(f"{k + ':':<14} {v}", width, "", " " * 15) for k, v in header.items()))
    said: set[str] = set()
    for t in tables:
        if t.records or show_empty:
            parts.append(_markdown_table(t, said) if markdown else _text_table(t, said, width))
    return "\n\n".join(parts) + "\n"


def select_tables(tables: Sequence[Table], names: Sequence[str]) -> list[Table]:
    """The tables named (by name, or a prefix naming one table: ``cpu`` for ``cpu-per-io``), in
    the report's order; an unknown or ambiguous name is a :class:`ValueError` listing them."""
    chosen: list[str] = []
    for name in names:
        exact = [t.name for t in tables if t.name == name]
        found = exact or sorted({t.name for t in tables if t.name.startswith(name)})
        if len(found) != 1:
            what = "is in no table" if not found else f"names {len(found)} tables"
            raise ValueError(f"section {name!r} {what} of this report; its sections: {', '.join(t.name for t in tables)}")
        chosen.append(found[0])
    return [t for t in tables if t.name in chosen]


def _text_table(t: Table, said: set[str], width: int | None) -> str:
    cells = [[c.text(r) for c in t.columns] for r in t.records]
    headers = [c.header for c in t.columns]
    fit = fit_table(t, cells, width) if width else Fit(tuple(range(len(headers))), (None,) * len(headers), ())
    rows, kept_headers = [[row[i] for i in fit.kept] for row in cells], [headers[i] for i in fit.kept]
    body = text_table(rows, kept_headers, fit.wrap)
    if body is None:
        from tabulate import tabulate  # only here and for Markdown: 30 ms of every text report's start

        body = tabulate(rows, headers=kept_headers, tablefmt="simple", disable_numparse=True, maxcolwidths=list(fit.wrap))
    notes = [n for n in t.notes if NOTE_COLUMNS.get(n) not in fit.hidden and _first(n, said)]
    if fit.hidden:
        notes.append(HIDDEN.format(width=width, columns=", ".join(fit.hidden), name=t.name))
    lines = [f"{t.title}\n{'=' * len(t.title)}", body] + [_wrap(n, width, "  ", "    ") for n in notes]
    return "\n".join(lines + _text_facts(t, said, width))


def _markdown_table(t: Table, said: set[str]) -> str:
    from tabulate import tabulate  # imported when asked for (see _text_table)

    body = tabulate([[c.text(r) for c in t.columns] for r in t.records], headers=[c.header for c in t.columns],
                    tablefmt="github", disable_numparse=True)
    notes = "\n".join("- " + n for n in t.notes if _first(n, said))
    facts = [f"- **{k}**: {v}" for k, v in _new_facts(t, said)]
    return "\n".join(filter(None, [f"## {t.title}", body, notes, ("\n**Facts**\n\n" + "\n".join(facts)) if facts else ""]))


def _text_facts(t: Table, said: set[str], width: int | None) -> list[str]:
    facts = _new_facts(t, said)
    repeated = [k for k in t.facts if k not in dict(facts)]
    if repeated:
        facts.append(("as above", ", ".join(repeated)))
    pad = max((len(k) for k, _ in facts), default=0) + 1
    return [_wrap(f"  {k + ':':<{pad}} {v}", width, "", " " * (pad + 3)) for k, v in facts]


def _new_facts(t: Table, said: set[str]) -> list[tuple[str, str]]:
    """The table's facts, and what it does not state, not yet said in the report."""
    facts = list(t.facts.items()) + ([("not stated", "; ".join(t.missing))] if t.missing else [])
    return [(k, v) for k, v in facts if _first(f"{k}: {v}", said)]


def _first(text: str, said: set[str]) -> bool:
    """Whether ``text`` is said here for the first time in the report (and remember it)."""
    if text in said:
        return False
    said.add(text)
    return True


def _wrap(line: str, width: int | None, first: str, rest: str) -> str:
    if width is None:
        return first + line
    return textwrap.fill(line, width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False)


def fit_table(t: Table, cells: Sequence[Sequence[str]], width: int) -> Fit:
    """Fit a table into ``width`` columns (:func:`~vmbench.report.textfit.fit_columns`)."""
    return fit_columns(t.columns, cells, width)


def _csv(tables: Sequence[Table]) -> str:
    buf = io.StringIO()
    keys: list[str] = []
    for t in tables:
        for r in t.records:
            for k in r:
                if k not in keys:
                    keys.append(k)
    w = csv.DictWriter(buf, fieldnames=["table"] + keys, lineterminator="\n")
    w.writeheader()
    for t in tables:
        for r in t.records:
            w.writerow({"table": t.name, **{k: ("" if v is None else v) for k, v in r.items()}})
    return buf.getvalue()
