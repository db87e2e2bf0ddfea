"""``vmbench compare``: stored runs side by side, each against a baseline run.

    vmbench compare RUN_A RUN_B                      # B against A
    vmbench compare RUN_B RUN_C --baseline RUN_A     # B and C against A

A RUN is an id, a tag, ``latest``, or ``FILE.db:RUN`` for a run in another results
database (an older schema is upgraded on open, as ``vmbench report`` does).  Rows that are
not the same experiment are refused and listed after the table (on stderr for CSV; under
``refusals`` in JSON).  Exit status 0, or 1 when everything was refused (nothing compared).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..errors import UsageError
from ..report.across_runs import compare_header, compare_runs
from ..report.load import load_run
from ..report.render import Format, render
from ..results.db import ResultsDB
from .common import ConsoleProgress, say_migrated

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


def split_ref(ref: str, default_db: str) -> tuple[str, str]:
    """``FILE.db:RUN`` -> (FILE.db, RUN); anything else is a run of ``default_db``."""
    path, sep, run = ref.rpartition(":")
    if sep and path and (Path(path).suffix in DB_SUFFIXES or Path(path).is_file()):
        if not run:
            raise UsageError(f"{ref!r} names no run after the database", f"write {path}:RUN (an id, a tag or 'latest')")
        return path, run
    return default_db, ref


def cmd_compare(args: argparse.Namespace) -> int:
    try:
        fmt = Format.parse(args.format)
    except ValueError as exc:
        raise UsageError(f"--format: {exc}", "choose table, markdown, csv or json") from None
    refs = ([args.baseline] if args.baseline else []) + list(args.runs)
    if len(refs) < 2:
        raise UsageError("vmbench compare needs two runs or more",
                         "vmbench compare RUN_A RUN_B, or vmbench compare RUN_B --baseline RUN_A")
    dbs: dict[str, ResultsDB] = {}
    loaded = []
    seen_baseline = None
    try:
        for n, ref in enumerate(refs):
            path, run_ref = split_ref(ref, args.db)
            key = str(Path(path).resolve())
            if key not in dbs:
                dbs[key] = ResultsDB(path, create=False)
                say_migrated(dbs[key], ConsoleProgress())
            data = load_run(dbs[key], run_ref)
            run = data.run
            if args.baseline and n == 0:
                seen_baseline = (key, run.id)
            elif args.baseline and seen_baseline == (key, run.id) and n > 0:
                continue  # the baseline named again among the others
            loaded.append((run, data.measured, list(data.cells)))  # as measured, not the report's shared copies
    finally:
        for db in dbs.values():
            db.close()
    if len(loaded) < 2:
        raise UsageError("nothing to compare with the baseline: every other run named is the baseline itself",
                         "name another run")
    tables, refusals = compare_runs(loaded, 0, allow_other_host=args.allow_other_host)
    header = compare_header(loaded, 0, args.allow_other_host)
    if fmt is Format.JSON:
        doc = json.loads(render(tables, fmt, header))
        doc["refusals"] = refusals
        sys.stdout.write(json.dumps(doc, indent=2, default=str) + "\n")
    elif fmt is Format.CSV:
        sys.stdout.write(render(tables, fmt))
        for r in refusals:
            print(f"refused: {r}", file=sys.stderr)
    else:
        out = render(tables, fmt, header, wide=args.wide)
        if refusals:
            title = "Refused (not compared)"
            lines = ([f"## {title}"] if fmt is Format.MARKDOWN else [title, "=" * len(title)])
            lines += [("- " if fmt is Format.MARKDOWN else "  ") + r for r in refusals]
            out += "\n" + "\n".join(lines) + "\n"
        sys.stdout.write(out)
    compared = any(v is not None for t in tables for r in t.records for k, v in r.items() if k.endswith("_vs_baseline"))
    return 0 if compared or not refusals else 1
