"""``vmbench runs``: the stored runs of a results database, one line each."""

from __future__ import annotations

import argparse

from tabulate import tabulate

from ..report.build import hosts_line
from ..results.db import ResultsDB
from .common import ConsoleProgress, say_migrated


def cmd_runs(args: argparse.Namespace) -> int:
    db = ResultsDB(args.db, create=False)
    say_migrated(db, ConsoleProgress())
    rows = [[r.id, ", ".join(r.tags), r.scenario_name, hosts_line(r.environment), r.status, r.attempts,
             r.started_at, r.finished_at or "-"] for r in db.runs()]
    print(tabulate(rows, headers=["run", "tag", "scenario", "host", "status", "attempts", "started", "finished"], tablefmt="simple"))
    return 0

