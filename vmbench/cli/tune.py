"""``vmbench tune``: find better VM settings round by round (issue 18).

``vmbench tune SCENARIO`` runs a tune scenario's rounds (each a stored one-factor run, see
:mod:`vmbench.tune`) and prints the journey, the final settings against the start and the
snippets that apply them; ``--resume [TUNE-ID]`` finishes an interrupted round and goes on;
``--show TUNE-ID`` prints a stored tune (``vmbench plan`` of a tune scenario is :mod:`.tuneplan`).
The CLI prints; the search is :mod:`vmbench.tune.search`, the rounds :mod:`vmbench.tune.engine`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..advice.apply import snippets
from ..advice.rank import advise
from ..drivers import read_current
from ..errors import ScenarioError, UsageError
from ..report.render import Format, render
from ..report.summary import summary_lines
from ..results.db import ResultsDB
from ..run.runner import Runner
from ..scenario import load_scenario, parse_scenario
from ..scenario.axes import settings_of, settings_text
from ..scenario.backend import storage_problems
from ..scenario.tune import start_from
from ..scenario.vm import vm_problems
from ..tune.engine import Tune, Tuner, current_json, current_vm, latest_tune, load_tune, tune_runs
from ..tune.report import tune_tables
from .common import ConsoleProgress, cached_accelerator, log_to_file, run_alive, say_migrated

def cmd_tune(args: argparse.Namespace) -> int:
    try:
        fmt = Format.parse(args.format)
    except ValueError as exc:
        raise UsageError(f"--format: {exc}") from None
    if args.show is not None:
        if args.resume is not None:
            raise UsageError("--show prints a stored tune; --resume runs one: give one of them")
        db = ResultsDB(args.db, create=False)
        tune_id = latest_tune(db, args.scenario) if args.show == "latest" else args.show
        sys.stdout.write(render_tune(load_tune(db, tune_id, _judge(), accel=_accel_of_rounds(db, tune_id)), fmt))
        return 0
    progress = ConsoleProgress(quiet=args.quiet)
    if args.resume is not None:
        db = ResultsDB(args.db, create=False)
        say_migrated(db, progress)
        tune_id = latest_tune(db, args.scenario) if args.resume == "latest" else args.resume
        rows = tune_runs(db, tune_id)
        path = rows[-1].scenario_path
        if args.scenario and Path(args.scenario).resolve() != Path(path).resolve():
            raise UsageError(f"tune {tune_id} ran {path}, not {args.scenario}",
                             "leave the scenario out with --resume: the tune's own (stored) scenario is used")
        scenario = parse_scenario(rows[-1].scenario_text, path, base_dir=Path(path).parent)
        tune = _tuner(args, scenario, db, progress).resume(tune_id, rows, alive=run_alive)
    else:
        if not args.scenario:
            raise UsageError("vmbench tune needs a tune scenario (or --resume / --show TUNE-ID)",
                             "scenarios/tune.yaml is one to copy")
        scenario = load_scenario(args.scenario)
        if scenario.tune is None:
            raise UsageError(f"{args.scenario} has no tune: section; vmbench tune searches the settings a tune: names",
                             "see scenarios/tune.yaml; `vmbench run` runs other scenarios")
        db = ResultsDB(args.db)
        say_migrated(db, progress)
        start, source, current = _start(scenario, progress)
        tune = _tuner(args, scenario, db, progress).run(start=start, start_source=source, current=current_json(current))
    sys.stdout.write(render_tune(tune, fmt))
    return 0


def _start(scenario, progress):
    """The start: the scenario's vm: settings, or those of the user's VM named by tune.from
    (read only), with what could not be read said."""
    spec = scenario.tune
    if spec.source is None:
        return scenario.baseline, "the scenario's vm: settings", None
    current = read_current(scenario, spec.source.ident, spec.source.disk)
    start = start_from(scenario.baseline, current.vm, scenario.storage)
    problems = vm_problems(start, scenario.hypervisor) + storage_problems(start, scenario.storage)
    if problems:
        raise ScenarioError(f"{scenario.path}: tune.from: the settings of {current.source} cannot be measured here: "
                            f"{problems[0][0]}", problems[0][1])
    progress.step(f"start: {current.source} (read only), disk {current.disk}: "
                  + settings_text(settings_of(start)))
    for what in current.unknown:
        progress.warn(f"{current.source}: not a vmbench axis, not part of the tune: {what}")
    return start, current.source, current


def _tuner(args: argparse.Namespace, scenario, db, progress):
    def run_round(s, resume) -> int:
        runner = Runner(s, db, progress, resume=resume)
        log_to_file(Path(args.db).parent / "logs" / f"run-{runner.tag}.log")
        outcome = runner.run()
        if outcome.invalid_cells:
            progress.warn(f"{len(outcome.invalid_cells)} cell(s) not measured because a setting did not take effect: "
                          f"{', '.join(outcome.invalid_cells)}")
        return outcome.run_id

    return Tuner(scenario, db, progress, run_round, _judge(), accel=cached_accelerator(scenario) or "tcg")


def _judge():
    """What decides each round: the advice's ranking (a function, so that a test can script it)."""
    return advise


def _accel_of_rounds(db, tune_id: str) -> str:
    """The accelerator the tune's rounds ran with (for the estimates asked again)."""
    accel = tune_runs(db, tune_id)[-1].environment.accelerator
    return accel if accel in ("kvm", "tcg") else "tcg"


def render_tune(tune: Tune, fmt) -> str:
    """The journey, the final settings and the snippets that apply them."""
    changed = tune.changed()
    snips: tuple = ()
    if changed:
        current = current_vm(tune.current, tune.start)
        vmid = current.ident if current is not None and current.kind == "proxmox" else "VMID"
        snips = tuple(snippets(changed, current, vmid=vmid))
    head, tables = tune_tables(tune, snips)
    return render(tables, fmt, head, summary_lines(head, tables))

