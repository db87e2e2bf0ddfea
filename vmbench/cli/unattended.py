"""``vmbench run --quiet``: a run for a timer (systemd, cron), which prints only errors and a
summary, and says by its exit status whether the run regressed.

Exit status: 0 the run finished and nothing regressed; :data:`REGRESSION` (7) it finished
and missed a scenario target or stepped worse beyond noise against the earlier runs of the
same scenario in the database (``vmbench history``); 6 a cell was not measured because a
setting did not take effect; anything else (1-5, 130) the run failed.
"""

from __future__ import annotations

import textwrap

from ..advice.table import report_with_advice
from ..report.load import load_run
from ..report.regression import target_misses, targets_met, worse_steps
from ..report.summary import summary_lines
from ..results.db import ResultsDB
from .history import load_history

REGRESSION = 7


def regression_report(db: ResultsDB, run_id: int, scenario: str) -> tuple[list[str], list[str]]:
    """(the summary lines, the regressions) of a finished run."""
    header, tables = report_with_advice(load_run(db, run_id))
    summary = summary_lines(header, tables)
    misses = target_misses(tables)
    history, _ = load_history(db, scenario)
    steps = worse_steps(history, run_id) if any(r.id == run_id for r in history.runs) else []
    followed = len(history.runs)
    met = targets_met(tables)
    summary.append(f"targets: {met} met, {len(misses)} missed" if met or misses else "targets: none in the scenario")
    summary.append(f"history: {followed} comparable run(s) of {scenario} in this database; "
                   + (f"{len(steps)} step(s) worse at this run" if steps else "no step worse at this run"))
    return summary, misses + steps


def quiet_summary(db: ResultsDB, run_id: int, tag: str, status: str, scenario: str, db_path: str) -> int:
    """Print the run's summary and its regressions (if any) on standard output; the exit status."""
    summary, regressions = regression_report(db, run_id, scenario)
    print(f"vmbench: run {run_id} ({tag}) of {scenario}: {status}; results in {db_path}")
    for line in summary:
        print("\n".join(textwrap.wrap(line, 120, initial_indent="  ", subsequent_indent="    ", break_on_hyphens=False)))
    if regressions:
        print(f"REGRESSION ({len(regressions)}):")
        for entry in regressions:
            for i, line in enumerate(entry.splitlines()):
                print("\n".join(textwrap.wrap(line, 120, initial_indent="  " if i == 0 else "    ",
                                               subsequent_indent="      ", break_on_hyphens=False)))
        return REGRESSION
    print("no regression")
    return 0
