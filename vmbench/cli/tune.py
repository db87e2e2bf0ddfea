"""``vmbench tune``: find better VM settings round by round (issue 18).

``vmbench tune SCENARIO`` runs a tune scenario's rounds (each a stored one-factor run, see
:mod:`vmbench.tune`) and prints the journey, the final settings against the start and the
snippets that apply them; ``--resume [TUNE-ID]`` finishes an interrupted round and goes on;
``--show TUNE-ID`` prints a stored tune.  The CLI prints; the search is
:mod:`vmbench.tune.search`, the rounds :mod:`vmbench.tune.engine`.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import ScenarioError, UsageError
from ..paths import default_db_path
from ..scenario.axes import setting_text, settings_of, settings_text

if TYPE_CHECKING:
    from ..tune.engine import Tune

FORMATS = ("table", "markdown", "csv", "json")


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("tune", help="find better VM settings round by round: each round a one-factor run "
                                            "from the best settings so far, kept while they improve the goal significantly")
    sp.add_argument("scenario", nargs="?", help="a scenario with a tune: section (scenarios/tune.yaml)")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--resume", nargs="?", const="latest", metavar="TUNE-ID",
                    help="finish an interrupted tune (default: the latest, of SCENARIO when given): the stored rounds "
                         "are kept, an interrupted round is resumed, then the search goes on")
    sp.add_argument("--show", metavar="TUNE-ID", help="print a stored tune ('latest' for the newest); runs nothing")
    sp.add_argument("--format", default="table", help=f"{', '.join(FORMATS)} (default table)")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    sp.set_defaults(func=cmd_tune)
    return sp


def cmd_tune(args: argparse.Namespace) -> int:
    from ..report.render import Format
    from ..results.db import ResultsDB
    from ..tune.engine import latest_tune, load_tune, tune_runs

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
    from .common import ConsoleProgress, say_migrated

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
        from ..scenario import parse_scenario

        scenario = parse_scenario(db.scenario_text(rows[-1].id), path, base_dir=Path(path).parent)
        tune = _tuner(args, scenario, db, progress).resume(tune_id, rows, alive=_alive)
    else:
        if not args.scenario:
            raise UsageError("vmbench tune needs a tune scenario (or --resume / --show TUNE-ID)",
                             "scenarios/tune.yaml is one to copy")
        from ..scenario import load_scenario

        scenario = load_scenario(args.scenario)
        if scenario.tune is None:
            raise UsageError(f"{args.scenario} has no tune: section; vmbench tune searches the settings a tune: names",
                             "see scenarios/tune.yaml; `vmbench run` runs other scenarios")
        db = ResultsDB(args.db)
        say_migrated(db, progress)
        start, source, current = _start(scenario, progress)
        from ..tune.engine import current_json

        tune = _tuner(args, scenario, db, progress).run(start=start, start_source=source, current=current_json(current))
    sys.stdout.write(render_tune(tune, fmt))
    return 0


def _start(scenario, progress):
    """The start: the scenario's vm: settings, or those of the user's VM named by tune.from
    (read only), with what could not be read said."""
    spec = scenario.tune
    if spec.source is None:
        return scenario.baseline, "the scenario's vm: settings", None
    from ..drivers import read_current
    from ..scenario.backend import storage_problems
    from ..scenario.tune import start_from
    from ..scenario.vm import vm_problems

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
    from ..run.runner import Runner
    from ..tune.engine import Tuner
    from .common import cached_accelerator, log_to_file

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
    from ..advice.rank import advise

    return advise


def _alive(row) -> bool:
    from .common import run_alive

    return run_alive(row)


def _accel_of_rounds(db, tune_id: str) -> str:
    """The accelerator the tune's rounds ran with (for the estimates asked again)."""
    from ..tune.engine import tune_runs

    accel = tune_runs(db, tune_id)[-1].environment.accelerator
    return accel if accel in ("kvm", "tcg") else "tcg"


def render_tune(tune: "Tune", fmt) -> str:
    """The journey, the final settings and the snippets that apply them."""
    from ..report.render import render
    from ..report.summary import summary_lines
    from ..tune.engine import current_vm
    from ..tune.report import tune_tables

    changed = tune.changed()
    snips: tuple = ()
    if changed:
        from ..advice.apply import snippets

        current = current_vm(tune.current, tune.start)
        vmid = current.ident if current is not None and current.kind == "proxmox" else "VMID"
        snips = tuple(snippets(changed, current, vmid=vmid))
    head, tables = tune_tables(tune, snips)
    return render(tables, fmt, head, summary_lines(head, tables))


# ---- vmbench plan TUNE-SCENARIO ---------------------------------------------------------------


def print_tune_plan(scenario, accel: str | None, as_json: bool, wide: bool = False) -> int:
    """``vmbench plan`` of a tune scenario: the start, the candidate values, round 1's cells,
    the budget and the most rounds, boots and time the tune can take.  Reads nothing from any
    host (with tune.from the start is read when the tune starts: round 1 is shown from vm:)."""
    import json

    from ..run.plan import estimate, make_plan
    from .fit import fitted, say
    from ..scenario.axes import AXIS_BY_NAME
    from ..tune.engine import make_cost
    from ..tune.search import Stop, bounds, next_round, round_scenario
    from ..units import format_duration

    s, spec = scenario, scenario.tune
    used = accel or "tcg"
    cost = make_cost(s, used)
    first = next_round(spec, s.baseline, (), s.hypervisor, s.storage, cost)
    limit = bounds(spec, first, cost) if not isinstance(first, Stop) else None
    start_words = (f"read from {spec.source.describe()} when the tune starts (read only); round 1 below is from the "
                   "scenario's vm: settings" if spec.source else "the scenario's vm: settings")
    if as_json:
        doc: dict[str, Any] = {}
        if not isinstance(first, Stop):
            rs = round_scenario(s, first.baseline, first.variations)
            doc = make_plan(rs).summary()
            est = estimate(make_plan(rs), used)
            doc["estimate"] = {"accelerator": est.accelerator, "seconds": round(est.total)}
        doc["tune"] = {
            "goal": str(spec.goal), "allow": sorted(a.value for a in spec.allow), "start": settings_of(s.baseline),
            "start_source": start_words, "axes": {axis: [c.label for c in values] for axis, values in spec.axes},
            "budget": spec.budget.to_json(),
            "round1": None if isinstance(first, Stop) else {
                "cells": [v.name for v in first.variations], "left_out": [list(x) for x in first.left_out],
                "boots": first.boots, "seconds": round(first.seconds)},
            "stop": first.reason if isinstance(first, Stop) else None,
            "most": None if limit is None else {"rounds": limit.rounds, "boots": limit.boots, "seconds": round(limit.seconds)},
        }
        print(json.dumps(doc, indent=2))
        return 0
    policy = s.repeat_policy
    say(f"scenario: {s.name} ({s.path})", rest=" " * 10, wide=wide)
    if s.description:
        say(s.description, "  ", wide=wide)
    say(f"driver:   {s.hypervisor.driver} {s.hypervisor.uri}, accelerator {s.hypervisor.accel.value}"
        + (f" (this host: {accel})" if accel else " (not yet probed on this host; assuming tcg for the estimate)"), rest=" " * 10, wide=wide)
    say(f"template: {s.template}; {s.storage.describe()}; plan: tune, each round one-factor; repeats: {policy.describe()}",
        rest=" " * 10, wide=wide)
    print()
    say(f"tune:     goal {spec.goal} ({'higher' if spec.goal.metric.higher_is_better else 'lower'} is better); "
        f"allowed risks: {', '.join(sorted(a.value for a in spec.allow)) or 'none'}", rest=" " * 10, wide=wide)
    say(f"start:    {start_words}: " + settings_text(settings_of(s.baseline)), rest=" " * 10, wide=wide)
    say(f"budget:   {spec.budget.describe()}", rest=" " * 10, wide=wide)
    print()
    print(fitted([[axis, ", ".join(c.label for c in values)] for axis, values in spec.axes], ["axis", "values to try"], wide=wide))
    print()
    if isinstance(first, Stop):
        print(f"round 1 cannot run: {first.reason}")
        print("estimated duration: 0s (nothing to run)")
        return 0
    rows = [[1, "baseline", "the start above"]]
    rows += [[i + 2, v.name, f"{v.axis}={setting_text(AXIS_BY_NAME[v.axis].settings_key or v.axis, AXIS_BY_NAME[v.axis].setting(v.vm))}"]
             for i, v in enumerate(first.variations)]
    print("round 1:")
    print(fitted(rows, ["boot", "cell", "VM settings (a variation: what it changes)"], wide=wide, right=["boot"]))
    for name, why in first.left_out:
        say(f"left out of round 1: {name}: {why}", "  ", wide=wide)
    print()
    jrows = [[j.name, j.describe(), format_duration(j.duration) if j.duration else "?"] for j in s.jobs]
    print(fitted(jrows, ["job", "what", "runtime+ramp"], wide=wide))
    print()
    assert limit is not None
    say("each further round varies the values not yet measured against its new baseline (the best significant, "
        "safe or allowed improvement of the round before); the tune stops when a round improves nothing, "
        "no variation is left, or the budget cannot pay for another round", wide=wide)
    say(f"round 1: boots {first.boots}, estimated {format_duration(first.seconds)} with {used}", wide=wide)
    say(f"at most: {limit.rounds} round(s), {limit.boots} boots, {format_duration(limit.seconds)} within the budget "
        f"({spec.budget.describe()})", wide=wide)
    say(f"estimated duration: {format_duration(first.seconds)} for round 1; at most {format_duration(limit.seconds)} "
        f"for the whole tune, with {used}", wide=wide)
    return 0
