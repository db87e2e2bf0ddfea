"""``vmbench run SCENARIO`` and ``vmbench run --resume RUN``: run a scenario (or finish a failed
or interrupted run) and store its results; ``--report`` prints the report at the end,
``--quiet`` only a summary and an exit status a timer reads (:mod:`.unattended`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..advice.table import report_with_advice
from ..errors import UsageError
from ..report.load import load_run
from ..report.render import Format, render
from ..report.summary import summary_lines
from ..results.db import ResultsDB
from ..run.runner import Runner
from ..scenario import load_scenario, parse_scenario
from .common import ConsoleProgress, log_to_file, on_hosts, run_alive, say_migrated
from .unattended import quiet_summary


def cmd_run(args: argparse.Namespace) -> int:
    progress = ConsoleProgress(quiet=args.quiet)
    resume = None
    if args.resume is not None:
        db = ResultsDB(args.db, create=False)
        say_migrated(db, progress)
        resume = db.resolve_run(args.resume)
        if resume.status in ("ok",):
            raise UsageError(f"run {resume.id} finished ({resume.status}); there is nothing to resume",
                             "`vmbench runs` lists runs; failed and interrupted ones can be resumed")
        if resume.status == "running" and run_alive(resume):
            raise UsageError(f"run {resume.id} is still running", "wait for it, or stop it first")
        scenario = parse_scenario(resume.scenario_text, resume.scenario_path, base_dir=Path(resume.scenario_path).parent)
        if args.scenario and Path(args.scenario).resolve() != Path(resume.scenario_path).resolve():
            raise UsageError(f"run {resume.id} ran {resume.scenario_path}, not {args.scenario}",
                             "leave the scenario out with --resume: the run's own scenario is used")
        scenario = on_hosts(scenario, progress, resume)
    else:
        if not args.scenario:
            raise UsageError("vmbench run needs a scenario file (or --resume RUN)")
        scenario = load_scenario(args.scenario)
        if scenario.plan_mode == "tune":  # a tune's rounds are runs `vmbench tune` makes and decides between
            raise UsageError(f"{args.scenario} is a tune (it has a tune: section): `vmbench run` would only measure its start",
                             f"run it with `vmbench tune {args.scenario}`; `vmbench plan {args.scenario}` shows its first round and budget")
        scenario = on_hosts(scenario, progress)  # nodes: all: the cluster's online nodes, before anything is made
        db = ResultsDB(args.db)
        say_migrated(db, progress)
    runner = Runner(scenario, db, progress, resume=resume)
    log_to_file(Path(args.db).parent / "logs" / f"run-{runner.tag}.log")
    outcome = runner.run()
    extra = f"; {outcome.skipped_steps} measurement(s) kept from earlier attempts" if resume else ""
    status = outcome.status
    if outcome.invalid_cells and len(set(outcome.invalid_cells)) >= len(scenario.cells):  # exit code 6, as below
        status = f"no cell measured: all {len(scenario.cells)} were invalid (a setting did not take effect)"
    progress.step(f"run {outcome.run_id} ({outcome.tag}) finished: {status}{extra}; results in {args.db}")
    if outcome.invalid_cells:
        progress.warn(f"{len(outcome.invalid_cells)} cell(s) not measured because a setting did not take effect: {', '.join(outcome.invalid_cells)}"
                      " (`vmbench report` says which; exit code 6)")
    if args.report:
        header, tables = report_with_advice(load_run(db, outcome.run_id))
        sys.stdout.write(render(tables, Format.TABLE, header, summary_lines(header, tables)))
    if args.quiet:  # for a timer: the summary, and an exit status that says whether it regressed
        code = quiet_summary(db, outcome.run_id, outcome.tag, outcome.status, scenario.name, args.db)
        return code if code or not outcome.invalid_cells else 6
    return 0 if not outcome.invalid_cells else 6

