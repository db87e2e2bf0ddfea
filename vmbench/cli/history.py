"""``vmbench history SCENARIO``: every stored run of a scenario, each figure run by run with its
change from the previous comparable run, the steps where it moved beyond noise and what
changed in the stored environment there.

    vmbench history scenarios/quick.yaml             # a scenario file (its name), or
    vmbench history quick --since 2026-01-01 --last 12
    vmbench history quick --format html -o history.html
    vmbench history quick --format influx --url https://influx:8086 --database vmbench --user u --password-file pw
    vmbench history quick --format openmetrics -o quick.om   # for promtool tsdb create-blocks-from openmetrics
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import date
from pathlib import Path
from ..errors import ResultsError, UsageError
from ..report.export import influx_lines, openmetrics_text, run_points
from ..report.history import HistoryRun, build_history
from ..report.historyview import render_text, to_json
from ..report.load import load_run
from ..results.db import ResultsDB
from ..scenario import load_scenario
from .common import ConsoleProgress, say_migrated, write_out
from .export import deliver, influx_target, refuse_secret_on_argv

FORMATS = ("table", "json", "html", "influx", "openmetrics")


def scenario_name(ref: str, stored: list[str]) -> str:
    """The scenario a SCENARIO argument names: a file's ``name:``, or a stored name."""
    path = Path(ref)
    if path.is_file():
        return load_scenario(str(path)).name
    if ref in stored:
        return ref
    known = ", ".join(sorted(set(stored))) or "(none: the database holds no runs)"
    raise UsageError(f"no scenario {ref!r}: not a file, and no run of that name in the database",
                     f"scenarios stored: {known}")


def _since(text: str | None) -> str | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text).isoformat()
    except ValueError:
        raise UsageError(f"--since {text}: not a day", "write it as YYYY-MM-DD") from None


def load_history(db, name: str, since: str | None = None, last: int | None = None, min_change: float | None = None):
    """The :class:`~vmbench.report.history.History` of scenario ``name`` in ``db``."""
    runs = [r for r in db.runs() if r.scenario_name == name and (since is None or r.started_at[:10] >= since)]
    if last is not None:
        runs = runs[-last:]
    loaded = []
    for r in runs:
        data = load_run(db, r.id)
        loaded.append(HistoryRun(data.run, data.measured, list(data.cells), list(data.boots)))
    kw = {} if min_change is None else {"min_change": min_change}
    return build_history(name, loaded, **kw), loaded


def cmd_history(args: argparse.Namespace) -> int:
    refuse_secret_on_argv(args)
    fmt = args.format or "table"
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: choose table, json, html, influx or openmetrics")
    if args.last is not None and args.last < 1:
        raise UsageError(f"--last {args.last}: give 1 or more runs")
    if fmt == "html" and not args.output:
        raise UsageError("--format html writes a file: name it with -o history.html")
    since = _since(args.since)
    target = influx_target(args) if fmt in ("influx", "openmetrics") else None
    if fmt not in ("influx", "openmetrics") and args.url:
        raise UsageError(f"--url sends InfluxDB line protocol: use --format influx, not {fmt}")
    db = ResultsDB(args.db, create=False)
    try:
        say_migrated(db, ConsoleProgress())
        name = scenario_name(args.scenario, [r.scenario_name for r in db.runs()])
        history, loaded = load_history(db, name, since, args.last)
    finally:
        db.close()
    if not history.runs:
        why = "; ".join(history.left_out) if history.left_out else "no run in the range asked"
        raise ResultsError(f"scenario {name}: no finished run to follow ({why})", "run it with `vmbench run SCENARIO`")
    if fmt in ("influx", "openmetrics"):
        return _export(args, fmt, history, loaded, target)
    if fmt == "json":
        sys.stdout.write(json.dumps(to_json(history), indent=2, default=str) + "\n")
    elif fmt == "html":
        # the page's template and plots (jinja2, matplotlib): imported for --format html only (start-up time)
        from ..report.historypage import write_history_html

        print(f"wrote {write_history_html(history, args.output)}")
    else:
        write_out(render_text(history), args.output)
    return 0


def _export(args: argparse.Namespace, fmt: str, history, loaded, target) -> int:
    """The runs the history follows, each as its export points (influx: one request per run)."""
    followed = {r.id for r in history.runs}
    per_run = [(r, run_points(r.run, r.measurements, r.cells)) for r in loaded if r.run.id in followed]
    if fmt == "influx":
        bodies = [(f"run {r.run.id}", influx_lines(pts)) for r, pts in per_run]
        whole = "".join(body for _, body in bodies)
    else:
        bodies = []
        whole = openmetrics_text([p for _, pts in per_run for p in pts], [r.run for r, _ in per_run], timestamps=True)
    said = deliver(args, bodies, whole, target)
    if said:
        print(said, file=sys.stderr)
    for why in history.left_out:
        print(f"left out: {why}", file=sys.stderr)
    return 0
