"""``vmbench report [RUN]``: a stored run's gap tables with the advice last, as text (fitted to
120 columns), Markdown, CSV, JSON, or an HTML page (``--format html -o FILE``)."""

from __future__ import annotations

import argparse

from ..advice.table import advice_section, report_with_advice
from ..errors import UsageError
from ..report.figures import painter
from ..report.load import load_run
from ..report.render import Format, render, select_tables
from ..report.summary import summary_lines
from ..results.db import ResultsDB
from .common import ConsoleProgress, say_migrated, write_out


def cmd_report(args: argparse.Namespace) -> int:
    if args.format == "html":
        if not args.output:
            raise UsageError("--format html writes a file: name it with -o report.html")
        # the page's templates (jinja2): imported for --format html only, so that the text report
        # does not load them (start-up time); matplotlib is loaded by whoever draws the figures
        from ..report.html import write_html

        db = ResultsDB(args.db, create=False)
        say_migrated(db, ConsoleProgress())
        run = db.resolve_run(args.run)  # a run that is not there is said before any worker starts
        with painter() as figures:  # worker processes load matplotlib while the run is read, then draw
            path = write_html(load_run(db, run.id), args.output, figures, advice_section)
        print(f"wrote {path}")
        return 0
    try:
        fmt = Format.parse(args.format)
    except ValueError as exc:
        raise UsageError(f"--format: {exc} (or html with -o FILE)") from None
    db = ResultsDB(args.db, create=False)
    say_migrated(db, ConsoleProgress())
    header, tables = report_with_advice(load_run(db, args.run))
    if args.section:
        try:
            text = render(select_tables(tables, args.section), fmt, wide=True, show_empty=True)
        except ValueError as exc:
            raise UsageError(f"--section: {exc}", "one table whole: vmbench report --section NAME") from None
    else:
        text = render(tables, fmt, header, summary_lines(header, tables), wide=args.wide)
    write_out(text, args.output)
    return 0

