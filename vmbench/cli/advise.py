"""``vmbench advise``: which measured change to make for a goal, with its evidence.

    vmbench advise                                   # the latest run, its own goals
    vmbench advise 12 --goal 4k-randread:p99 --goal 1m-write:mbps
    vmbench advise latest --allow cache-writeback --vmid 101
    vmbench advise latest --domain web1 --read-vm    # snippets keep web1's disk options (read only)

Reads a stored run only; applies nothing to any VM.  Exit status 0 when the advice is
written (also when nothing could be judged: the advice says why, and ``top`` is null in
JSON); 2 for a bad argument (--goal, --allow, --format, an unknown run).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..advice.model import Goal, GoalMetric, Risk
from ..advice.rank import advise
from ..advice.table import advice_json, advice_tables
from ..drivers import read_current
from ..errors import ResultsError, UsageError
from ..report.load import load_run
from ..report.loadtables import load_header
from ..report.render import Format, render
from ..results.db import ResultsDB
from ..results.kind import RunKind
from ..scenario import parse_scenario
from ..scenario.goals import parse_allow as risks_named
from .common import ConsoleProgress, on_hosts, say_migrated


def parse_goals(texts: list[str]):
    goals = []
    for t in texts:
        try:
            goals.append(Goal.parse(t, "--goal"))
        except ValueError as exc:
            raise UsageError(f"--goal {t}: {exc}", f"write JOB:METRIC or METRIC, METRIC one of {GoalMetric.allowed()}") from None
    return goals


def parse_allow(names: list[str]):
    try:
        return risks_named(names, "--allow")
    except ValueError as exc:
        raise UsageError(str(exc), f"--allow takes one of: {Risk.allowed()}") from None


def cmd_advise(args: argparse.Namespace) -> int:
    try:
        fmt = Format.parse(args.format)
    except ValueError as exc:
        raise UsageError(f"--format: {exc}", "choose table, markdown or json") from None
    if fmt is Format.CSV:
        raise UsageError("--format csv: advice is not a table of records", "choose table, markdown or json")
    goals = parse_goals(args.goal)
    allow = parse_allow(args.allow)
    if args.read_vm and not (args.vmid or args.domain):
        raise UsageError("--read-vm needs --vmid N or --domain NAME", "name the VM to read")
    db = ResultsDB(args.db, create=False)
    say_migrated(db, ConsoleProgress())
    try:
        db.resolve_run(args.run)
    except ResultsError as exc:  # a run this database does not have is a bad argument (exit 2, as the help says)
        raise UsageError(exc.message, exc.hint) from None
    data = load_run(db, args.run)
    jobs = set(data.jobs)
    for g in goals:
        if g.job is not None and g.job not in jobs:
            raise UsageError(f"--goal {g}: run {data.run.id} has no job {g.job!r}",
                             f"its jobs: {', '.join(data.jobs) or 'none'}")
    ident = args.vmid or args.domain
    current = _read_vm(data, ident) if args.read_vm and ident else None
    advice = advise(data, goals, allow, current, vm=ident)
    if fmt is Format.JSON:
        sys.stdout.write(json.dumps(advice_json(advice), indent=2, default=str) + "\n")
        return 0
    header = _header(data)
    sys.stdout.write(render(advice_tables(advice, header), fmt, header, wide=args.wide))
    return 0


def _header(data) -> dict:
    """The report header's lines that say what the figures are: the run, the accelerator, the load."""
    env, boots = data.environment, data.boots
    accels = sorted({str(b.accelerator) for b in boots}) or [env.accelerator if env.accelerator is not None else "?"]
    out = {"run": f"{data.run.id} ({data.run.tag})", "scenario": f"{data.run.scenario_name} ({data.run.scenario_path})",
           "status": data.run.status,
           "accelerator": "none (host only: no VM)" if data.kind is RunKind.HOST_ONLY else ", ".join(accels)}
    out["load"] = load_header(data.load) if data.load is not None else "one VM at a time"
    return out


def _read_vm(data, ident: str):
    """The user's VM, read only (:func:`vmbench.drivers.read_current`) through the run's
    stored scenario: its hypervisor, host and credentials as the run used them."""
    path = data.run.scenario_path
    scenario = parse_scenario(data.scenario_text, path, base_dir=Path(path).parent)
    return read_current(on_hosts(scenario, resume=data.run), ident)  # nodes: all: the nodes the run ran on

