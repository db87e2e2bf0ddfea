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
from typing import Any

from ..errors import ResultsError, UsageError
from ..paths import default_db_path

def epilog() -> str:
    """The help's last paragraph: the goals and the risks vmbench accepts, from their own types."""
    from ..scenario.goals import GoalMetric, Risk

    return (f"Goals: JOB:METRIC or METRIC, METRIC one of {GoalMetric.allowed()}. Without --goal: the scenario's advise: "
            "goals, else its targets, else each job on its own metric (and cpu-per-io where QEMU's CPU was sampled). "
            f"Risks (--allow): {Risk.allowed()}; a change that carries a risk is never the recommendation unless that risk "
            "is allowed. Exit status 0 when the advice is written, even when nothing could be judged (it says why); 2 for a "
            "bad argument (--goal, --allow, --format, a run the database does not have).")


def _fill(text: str) -> str:
    """A help paragraph wrapped as argparse would, but never inside a hyphenated name (zfs-checksum-off)."""
    import textwrap

    return textwrap.fill(text, 79, break_on_hyphens=False, break_long_words=False)


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("advise", help="which measured change to make for a goal, with its evidence",
                               description=_fill("Rank the changes a stored run measured by their effect on a goal (a job and a "
                                                 "metric), only where the verdict is significant, each with its evidence; say "
                                                 "what the evidence does not support, what was not tried, where the best cell "
                                                 "stands against the host, and the command or XML that applies the "
                                                 "recommendation (never applied by vmbench)."),
                               epilog=_fill(epilog()), formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("run", nargs="?", default="latest", metavar="RUN", help="run id, tag or 'latest' (default)")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--goal", action="append", default=[], metavar="JOB:METRIC", help="a goal (repeatable)")
    sp.add_argument("--allow", action="append", default=[], metavar="RISK", help="a risk to allow by name (repeatable)")
    sp.add_argument("--format", default="table", help="table, markdown or json")
    sp.add_argument("--wide", action="store_true", help="every column (the text tables fit 120 columns by default)")
    who = sp.add_mutually_exclusive_group()
    who.add_argument("--vmid", metavar="N", help="the Proxmox VMID the apply commands name")
    who.add_argument("--domain", metavar="NAME", help="the libvirt domain the apply snippets name")
    sp.add_argument("--read-vm", action="store_true",
                    help="read the --vmid/--domain VM (read only) through the run's stored scenario, so the snippets keep "
                         "its disk's other options")
    sp.set_defaults(func=cmd_advise)
    return sp


def parse_goals(texts: list[str]):
    from ..advice.model import Goal, GoalMetric

    goals = []
    for t in texts:
        try:
            goals.append(Goal.parse(t, "--goal"))
        except ValueError as exc:
            raise UsageError(f"--goal {t}: {exc}", f"write JOB:METRIC or METRIC, METRIC one of {GoalMetric.allowed()}") from None
    return goals


def parse_allow(names: list[str]):
    from ..advice.model import Risk
    from ..advice.risks import parse_allow as parse

    try:
        return parse(names, "--allow")
    except ValueError as exc:
        raise UsageError(str(exc), f"--allow takes one of: {Risk.allowed()}") from None


def cmd_advise(args: argparse.Namespace) -> int:
    from ..advice.rank import advise
    from ..advice.table import advice_json, advice_tables
    from ..report.load import load_run
    from ..report.render import Format, render
    from ..results.db import ResultsDB

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
    note = db.migration_note()
    if note:
        print(f"note: {note}", file=sys.stderr)
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
    from ..results.kind import RunKind
    from ..report.loadtables import load_header

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
    from pathlib import Path

    from ..drivers import read_current
    from ..scenario import parse_scenario
    from .common import on_hosts

    path = data.run.scenario_path
    scenario = parse_scenario(data.scenario_text, path, base_dir=Path(path).parent)
    return read_current(on_hosts(scenario, resume=data.run), ident)  # nodes: all: the nodes the run ran on
