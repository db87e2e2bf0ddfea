"""Render table models as text (tabulate), Markdown, CSV or JSON.

Under each table: its notes, then its admissibility facts and what is not stated.  JSON
carries them as ``facts`` and ``missing``; CSV has the records only.
"""

from __future__ import annotations

import csv
import io
import json
import textwrap
from typing import Any, Sequence

from tabulate import tabulate

from ..settings import Choice
from .tables import Table


class Format(Choice):
    TABLE = "table"
    MARKDOWN = "markdown"
    CSV = "csv"
    JSON = "json"


#: the width the text summary is wrapped to (a 120-column terminal)
WIDTH = 120


def render(tables: Sequence[Table], fmt: Format, header: dict | None = None, summary: Sequence[str] = ()) -> str:
    """The report; ``summary`` (:func:`~vmbench.report.summary.summary_lines`) opens it."""
    if fmt is Format.JSON:
        doc: dict[str, Any] = {"summary": list(summary)} if summary else {}
        doc.update({"run": header or {}, "tables": [{"name": t.name, "title": t.title, "records": t.records, "notes": t.notes,
                                                     "facts": t.facts, "missing": t.missing} for t in tables]})
        return json.dumps(doc, indent=2, default=str) + "\n"
    if fmt is Format.CSV:
        return _csv(tables)
    tablefmt = "github" if fmt is Format.MARKDOWN else "simple"
    parts = []
    if summary:
        if fmt is Format.MARKDOWN:
            parts.append("## Summary\n\n" + "\n".join(f"- {line}" for line in summary))
        else:
            parts.append("Summary\n=======\n" + "\n".join(textwrap.fill(line, WIDTH, subsequent_indent="  ") for line in summary))
    if header:
        if fmt is Format.MARKDOWN:
            parts.append("\n".join(f"- **{k}**: {v}" for k, v in header.items()))
        else:
            parts.append("\n".join(f"{k + ':':<14} {v}" for k, v in header.items()))
    for t in tables:
        title = f"## {t.title}" if fmt is Format.MARKDOWN else f"{t.title}\n{'=' * len(t.title)}"
        body = tabulate(
            [[c.text(r) for c in t.columns] for r in t.records],
            headers=[c.header for c in t.columns],
            tablefmt=tablefmt,
            disable_numparse=True,
        )
        notes = "\n".join(("- " if fmt is Format.MARKDOWN else "  ") + n for n in t.notes)
        parts.append("\n".join(filter(None, [title, body, notes, _facts(t, fmt)])))
    return "\n\n".join(parts) + "\n"


def _facts(t: Table, fmt: Format) -> str:
    lines = []
    if fmt is Format.MARKDOWN:
        lines += [f"- **{k}**: {v}" for k, v in t.facts.items()]
        if t.missing:
            lines.append(f"- **not stated**: {'; '.join(t.missing)}")
        return ("\n**Facts**\n\n" + "\n".join(lines)) if lines else ""
    width = max((len(k) for k in list(t.facts) + (["not stated"] if t.missing else [])), default=0) + 1
    lines += [f"  {k + ':':<{width}} {v}" for k, v in t.facts.items()]
    if t.missing:
        lines.append(f"  {'not stated:':<{width}} {'; '.join(t.missing)}")
    return "\n".join(lines)


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
