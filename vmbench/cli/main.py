"""The ``vmbench`` command: the only place that prints.

Library errors (:class:`~vmbench.errors.VmbenchError`) become a message, a hint and an
exit code; ``--debug`` shows tracebacks and debug logs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Sequence

from .. import __version__
from ..errors import Interrupted, UsageError, VmbenchError
from ..paths import StatePaths, default_db_path
from ..units import format_duration
from .common import ConsoleProgress, cached_accelerator, log_to_file, on_hosts, run_alive, say_migrated
from .fit import error_lines, fitted, say
from ..scenario.axes import settings_of, settings_text, storage_settings_of

log = logging.getLogger("vmbench")




# ---- commands --------------------------------------------------------------------------------


def _print_host_only_plan(plan, est, wide: bool) -> int:
    s = plan.scenario
    where = s.hypervisor.ssh.label if s.hypervisor.ssh else "this machine"
    say(f"host only: no VM; fio on {where}, on {s.storage.describe()}; plan: {s.plan_mode}; repeats: {s.repeat_policy.describe()}",
        wide=wide)
    print()
    rows = [[b.seq, b.cells[0].name, settings_text(storage_settings_of(b.vm))] for b in plan.boots]
    print(fitted(rows, ["#", "cell", "storage settings (each a new zvol or dataset)"], wide=wide, right=["#"]))
    print()
    _print_jobs(s, wide)
    print()
    print(f"host only: storage variants: {len(plan.boots)}, host fio runs: {plan.host_measurements()}")
    print(f"estimated duration: {format_duration(est.total)} (host fio)")
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from ..run.plan import estimate, make_plan
    from ..scenario import load_scenario

    scenario = load_scenario(args.scenario)
    plan = make_plan(scenario)
    accel = args.accel or cached_accelerator(scenario)
    wide = args.wide
    if scenario.tune is not None and scenario.tune.round is None:  # each round is planned by the search
        from .tune import print_tune_plan

        return print_tune_plan(scenario, accel, args.json, wide)
    est = estimate(plan, accel or "tcg")
    if args.json:
        return _print_plan_json(plan, est)
    s = scenario
    policy = s.repeat_policy
    assert policy is not None  # a loaded scenario always has one
    say(f"scenario: {s.name} ({s.path})", rest=" " * 10, wide=wide)
    if s.description:
        say(s.description, "  ", wide=wide)
    if s.host_only:
        return _print_host_only_plan(plan, est, wide)
    where = (s.hypervisor.uri if len(s.hypervisor.members) == 1 else f"on {len(s.hypervisor.members)} hosts: "
             + ", ".join(f"{h.host_label} ({h.uri})" for h in s.hypervisor.members))
    if s.hypervisor.all_nodes:  # vmbench plan reads nothing from the cluster
        where = f"{s.hypervisor.uri}: on every online node of the cluster (nodes: all), read when the run starts"
    say(f"driver:   {s.hypervisor.driver} {where}, accelerator {s.hypervisor.accel.value}"
        + (f" (this host: {accel})" if accel else " (not yet probed on this host; assuming tcg for the estimate)"),
        rest=" " * 10, wide=wide)
    say(f"template: {s.template_label()}; {s.storage_label()}; plan: {s.plan_mode}; repeats: {policy.describe()}",
        rest=" " * 10, wide=wide)
    print()
    _print_boots(plan, wide)
    if s.load is not None:
        _print_load_plan(plan, wide)
    print()
    _print_jobs(s, wide)
    _print_plan_totals(plan, est, policy, wide)
    return 0


def _print_plan_json(plan, est) -> int:
    """``vmbench plan --json``: the plan's summary, its estimate and (with guests) its preconditioning."""
    doc = plan.summary()
    doc["estimate"] = {"accelerator": est.accelerator, "seconds": round(est.total), "boots_seconds": est.boots,
                       "guest_fio_seconds": est.guest_fio, "host_fio_seconds": est.host_fio}
    if not plan.scenario.host_only:
        from ..run.plan import precondition_lines

        doc["precondition"] = precondition_lines(plan)
    print(json.dumps(doc, indent=2))
    return 0


def _print_boots(plan, wide: bool) -> None:
    """Each boot's cells, their VM settings (the first cell's in full above the table, the
    others' changes from it; every setting with ``wide``) and the layers measured in them."""
    rows = []
    refs = {b.seq: name for b, name in plan.host_references()}
    first = settings_of(plan.cells[0].vm)
    if not wide:
        say(f"VM settings of cell {plan.cells[0].name}" + (" (the others: their changes from it)" if len(plan.cells) > 1 else "")
            + ": " + settings_text(first))
        print()
    for b in plan.boots:
        for c in b.cells:
            layers = _layers_text(c)
            if c is b.cells[0] and b.seq in refs:
                layers = ("rados, " if plan.rados_jobs() and b.seq == min(refs) else "") + "host, " + layers
            mine = settings_of(c.vm)
            shown = mine if wide else {k: v for k, v in mine.items() if first.get(k) != v}
            gone = [] if wide else [f"{k} left to the default" for k in first if k not in mine]
            rows.append([b.seq, c.name, ", ".join(filter(None, [settings_text(shown), *gone])) or "-", layers])
    headers = ["boot", "cell", "VM settings" if wide else "changes", "layers measured"]
    if not wide and len(plan.cells) == 1:
        rows, headers = [[r[0], r[1], r[3]] for r in rows], [headers[0], headers[1], headers[3]]
    print(fitted(rows, headers, wide=wide, right=["boot"], keep=["layers measured"]))
    if len(refs) > 1:
        say(plan.scenario.storage.backend.reference_note(any(c.vm.krbd for c in plan.cells)), wide=wide)
    for line in plan.file_job_layers():
        indent = line[:len(line) - len(line.lstrip())]
        say(line.lstrip(), indent, wide=wide)


def _layers_text(cell) -> str:
    """The layers measured in a cell: raw, then each stack: its name when it measures every
    layer (the stacks table lists them), else its one measured layer."""
    from ..run.plan import cell_layers

    out = ["raw"]
    for st in cell.stacks:
        measured = [path for path, stack, _ in cell_layers(cell) if stack is st]
        out.append(f"{st.name} (every layer)" if len(measured) > 1 else measured[-1] if measured else st.name)
    return ", ".join(out)


def _print_cache_buster(s, wide: bool) -> None:
    """How a cache-buster job that did not set its size was sized."""
    from ..scenario.jobs import cache_buster_of

    size, how = cache_buster_of(s.cells, s.storage)
    for j in s.jobs:
        if j.profile == "cache-buster" and j.size == size:
            say(f"{j.name}: working set {how}"
                + ("; on ZFS, state the host's ARC c_max as storage.arc_max" if s.storage.zfs and not s.storage.arc_max else ""),
                wide=wide)


def _print_jobs(s, wide: bool) -> None:
    """The jobs (a job file's rewrites for each target), the stacks, the cells left out, and a
    buffered job's note."""
    from ..fio.jobfile import describe_rewrites

    jrows = [[j.name, j.describe(), ("up to " if j.file_job else "") + format_duration(j.duration) if j.duration else "?"]
             for j in s.jobs]
    print(fitted(jrows, ["job", "what", "runtime+ramp"], wide=wide))
    _print_cache_buster(s, wide)
    for j in s.jobs:
        if j.jobfile is None:
            continue
        kinds = ["dir"] if j.file_job else ["block"] + (["file"] if any(st.filesystem for st in s.stacks) else [])
        print()
        say(f"job {j.name}: {j.jobfile.path} runs as a copy rewritten for each target:", wide=wide)
        for kind in kinds:
            say(f"on {'block devices (host, raw disk, partition, LVM, LUKS)' if kind == 'block' else 'filesystem layers'}"
                + (" only (a file job)" if kind == "dir" else "") + ":", "  ", wide=wide)
            for line in describe_rewrites(j, kind):
                say(line, "    ", wide=wide)
    if s.stacks:
        print()
        print(fitted([[st.name, st.describe(), "every layer" if st.measure_all else "the top layer"] for st in s.stacks],
                     ["stack", "layers", "measured"], wide=wide))
    for name, why in s.skipped_cells:
        say(f"left out of the factorial: {name}: {why}", wide=wide)
    if any(not j.direct for j in s.jobs):
        say("note: buffered jobs (direct: false) drop the page cache before each run, on the guest and on the whole host", wide=wide)


def _print_plan_totals(plan, est, policy, wide: bool) -> None:
    """The preconditioning, the counts of VMs, cells and fio runs, and the estimated duration."""
    from ..run.plan import precondition_lines

    s = plan.scenario
    print("\npreconditioning (written data before reads):")
    for line in precondition_lines(plan):
        indent = "  " + line[:len(line) - len(line.lstrip())]
        say(line.lstrip(), indent, wide=wide)
    print()
    guest = len(plan.guest_measurements()) * s.repeats
    vms = sum(u.step.size for u in plan.load_units()) if s.load else len(plan.boots)
    say(f"VMs: {vms}, boots: {vms}, cells: {len(plan.cells)}, "
        f"guest fio runs: {guest}, host fio runs: {plan.host_measurements()}"
        + (f", RADOS benches: {len(plan.rados_jobs()) * s.repeats}" if plan.rados_jobs() else ""), wide=wide)
    say(f"estimated duration: {format_duration(est.total)} with {est.accelerator} "
        f"(boots {format_duration(est.boots)}, guest fio {format_duration(est.guest_fio)}, host fio {format_duration(est.host_fio)}"
        + (f", layers {format_duration(est.layers)}" if est.layers else "") + (f", crypto {format_duration(est.crypto)}" if est.crypto else "") + ")"
        + (f"; up to {format_duration(est.total_max)} if every group needs {policy.max} repeats"
           if policy.adaptive else ""), wide=wide)


def _print_load_plan(plan, wide: bool) -> None:
    """The load steps: each VM configuration's steps, their VMs (role and own settings) and host reference."""
    from ..run.plan import placement_text

    load = plan.scenario.load
    hv = plan.scenario.hypervisor
    many = hv.several
    rows = []
    for u in plan.load_units():
        roles: dict[str, int] = {}
        for m in u.step.members:
            roles[m.role.value] = roles.get(m.role.value, 0) + 1
        own = sorted({f"{m.role.value}: " + settings_text(m.overrides.describe())
                      for m in u.step.members if m.overrides.axes})
        rows.append([u.boot.seq, u.step.index, u.step.name, u.step.size, ", ".join(f"{n} {r}" for r, n in roles.items()),
                     "; ".join(own) or "-", f"{u.step.size} volume(s)" if u.has_host else "-"]
                    + ([placement_text(u) if u.hosts else _round_robin(u.step.size)] if many else []))
    print()
    print(fitted(rows, ["boot", "step", "name", "VMs", "roles", "own settings", "host reference"] + (["hosts"] if many else []),
                 wide=wide, right=["boot", "step", "VMs"], keep=["hosts"]))
    say(f"each step's VMs boot {load.boot_parallel} at a time{' on each host' if many else ''} and start each job together; the load goes on "
        f"{load.tail_seconds:g}s after each measured window (fio's tail) so that every window is fully loaded", wide=wide)
    if hv.all_nodes:
        say("hosts: the cluster's online nodes (nodes: all), read from the API when the run starts, sorted by name; "
            "VMs placed round robin over them", wide=wide)


def _round_robin(size: int) -> str:
    """The placement of ``nodes: all`` before its nodes are read."""
    return "VM 0 on the first online node" if size == 1 else f"VMs 0-{size - 1} round robin over the online nodes"


#: what `vmbench` exits with (docs/guarantees.md says the same)
EXIT_CODES = ("exit codes: 0 done; 2 a mistake in the scenario or the command line; 3 the host cannot run it (nothing "
              "was created); 4 the hypervisor, a guest or a command failed; 5 the results database; 6 the run ended but "
              "some cells (or all) were not measured: a setting did not take effect; 7 (run --quiet) the run missed a target "
              "or stepped worse than the scenario's earlier runs; 130 interrupted")


def cmd_run(args: argparse.Namespace) -> int:
    from ..advice.table import report_with_advice
    from ..report.load import load_run
    from ..report.render import Format, render
    from ..report.summary import summary_lines
    from ..results.db import ResultsDB
    from ..run.runner import Runner
    from ..scenario import load_scenario, parse_scenario

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
        scenario = parse_scenario(db.scenario_text(resume.id), resume.scenario_path, base_dir=Path(resume.scenario_path).parent)
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
        from .unattended import quiet_summary

        code = quiet_summary(db, outcome.run_id, outcome.tag, outcome.status, scenario.name, args.db)
        return code if code or not outcome.invalid_cells else 6
    return 0 if not outcome.invalid_cells else 6


def cmd_report(args: argparse.Namespace) -> int:
    from ..advice.table import report_with_advice
    from ..report.load import load_run
    from ..report.render import Format, render, select_tables
    from ..report.summary import summary_lines
    from ..results.db import ResultsDB

    if args.format == "html":
        if not args.output:
            raise UsageError("--format html writes a file: name it with -o report.html")
        from ..report.html import write_html

        db = ResultsDB(args.db, create=False)
        say_migrated(db, ConsoleProgress())
        data = load_run(db, args.run)
        path = write_html(data, args.output, report_with_advice(data))
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
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}")
    else:
        sys.stdout.write(text)
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    from tabulate import tabulate

    from ..results.db import ResultsDB

    from ..report.build import hosts_line

    db = ResultsDB(args.db, create=False)
    say_migrated(db, ConsoleProgress())
    rows = [[r.id, ", ".join(r.tags), r.scenario_name, hosts_line(r.environment), r.status, r.attempts,
             r.started_at, r.finished_at or "-"] for r in db.runs()]
    print(tabulate(rows, headers=["run", "tag", "scenario", "host", "status", "attempts", "started", "finished"], tablefmt="simple"))
    return 0


def _drivers_for(args: argparse.Namespace) -> list:
    """(driver, host name) of every host of ``args.scenario`` (its hypervisor, storage and SSH
    settings; several for a run across hosts), or of ``--uri`` on this machine."""
    from ..drivers import make_driver
    from ..run.fleet import make_hosts
    from ..scenario import load_scenario
    from ..scenario.model import Hypervisor

    if getattr(args, "scenario", None):
        s = on_hosts(load_scenario(args.scenario), ConsoleProgress())  # nodes: all: the nodes online now
        return [(rh.driver, rh.label) for rh in make_hosts(s.hypervisor, s.storage, StatePaths.default()).values()]
    if args.uri and "+ssh://" in args.uri:
        raise UsageError(f"--uri {args.uri}: name the scenario instead, so its SSH settings are used",
                         "vmbench cleanup SCENARIO / vmbench doctor SCENARIO")
    return [(make_driver(Hypervisor(uri=args.uri or "qemu:///system")), "localhost")]


def cmd_cleanup(args: argparse.Namespace) -> int:
    """Every host of the scenario in turn, each under its own heading when there are several;
    what two hosts both see (a shared pool's image) is listed, and removed, once; the worst
    exit code."""
    drivers = _drivers_for(args)
    code = 0
    seen: set[tuple[str, str]] = set()
    try:
        for i, (driver, where) in enumerate(drivers):
            if len(drivers) > 1:  # the transport's name says how the host is reached ("host root@pve1")
                target = driver.host.name.removeprefix("host ") if driver.host.name != "host" else "this machine"
                print(f"{chr(10) if i else ''}== host {where} ({target}) ==")
            code = max(code, _cleanup(args, driver, where, seen))
    finally:
        for driver, _ in drivers:
            driver.close()
    return code


def _cleanup(args: argparse.Namespace, driver, where: str, seen: set[tuple[str, str]]) -> int:
    from .cleanup import find_leftovers, remove_leftovers

    found, skipped = find_leftovers(driver, StatePaths.default(), include_live=args.force)
    for tag, pid in skipped.items():
        print(f"skipping run {tag}: still running as pid {pid} (use --force to remove it anyway)")
    found, before = [l for l in found if (l.kind, l.name) not in seen], len(found)
    seen.update((l.kind, l.name) for l in found)
    if before > len(found):
        print(f"{before - len(found)} leftover(s) {where} sees too are listed under an earlier host")
    if not found:
        print(f"nothing to clean up on {where}: no vmbench domains, volumes or console logs found")
        return 0
    from tabulate import tabulate

    print(tabulate([[l.kind, l.name, l.run_tag, l.detail] for l in found], headers=["kind", "name", "run", "detail"], tablefmt="simple"))
    if args.dry_run:
        print(f"\n{len(found)} leftover(s); --dry-run: nothing removed")
        return 0
    errors = remove_leftovers(driver, found)
    for e in errors:
        print(f"could not remove: {e}", file=sys.stderr)
    print(f"\nremoved {len(found) - len(errors)} of {len(found)}")
    return 0 if not errors else 4


def cmd_doctor(args: argparse.Namespace) -> int:
    from .doctor import run_checks

    checks = run_checks(args.scenario, uri=args.uri, template=args.template, reprobe=args.probe, progress=ConsoleProgress())
    print(fitted([[c.name, c.status, c.detail] for c in checks], ["check", "status", "detail"], keep=["detail"]))
    hints = [c for c in checks if c.hint and c.status != "ok"]
    for c in hints:
        say(f"hint ({c.name}): {c.hint}")
    return 3 if any(c.status == "FAIL" for c in checks) else 0


# ---- wiring ----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="vmbench", description="Why is disk I/O in my VMs slower than on the host? Layer by layer, from real fio runs.",
                                epilog=EXIT_CODES)
    p.add_argument("--version", action="version", version=f"vmbench {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    p.add_argument("-v", "--verbose", action="store_true", help="log every command")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    db_help = f"results database (default: {default_db_path()})"

    sp = sub.add_parser("plan", help="show what a scenario would run; no side effects")
    sp.add_argument("scenario")
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")
    sp.add_argument("--accel", choices=["kvm", "tcg"], help="estimate for this accelerator")
    sp.add_argument("--wide", action="store_true", help="every VM setting of every cell and no wrapping (the plan fits 120 "
                    "columns by default)")
    sp.set_defaults(func=cmd_plan)

    sp = sub.add_parser("run", help="run a scenario and store its results")
    sp.add_argument("scenario", nargs="?")
    sp.add_argument("--resume", metavar="RUN", help="finish a failed or interrupted run (id, tag or 'latest'): "
                    "measurements already stored are kept, the missing ones run in new VMs")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.add_argument("--report", action=argparse.BooleanOptionalAction, default=False, help="print the report at the end")
    sp.add_argument("-q", "--quiet", action="store_true", help="for a timer: only errors and a summary; exit 7 when the run "
                    "missed a target or stepped worse than the scenario's earlier runs (docs/unattended.md)")
    sp.set_defaults(func=cmd_run)

    sp = sub.add_parser("report", help="print a run's gap tables")
    sp.add_argument("run", nargs="?", default="latest", help="run id, run tag or 'latest' (default)")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.add_argument("--format", default="table", help="table, markdown, csv, json or html (html needs -o)")
    sp.add_argument("-o", "--output", help="write to this file instead of standard output")
    sp.add_argument("--wide", action="store_true", help="every column of every table (the text report fits 120 columns "
                    "by default and names the columns it leaves out)")
    sp.add_argument("--section", action="append", metavar="NAME", help="only this table, whole (e.g. gaps, cpu-per-io, "
                    "layers, advice; a prefix naming one table will do); repeat for more")
    sp.set_defaults(func=cmd_report)

    sp = sub.add_parser("runs", help="list stored runs")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.set_defaults(func=cmd_runs)

    sp = sub.add_parser("cleanup", help="find and remove leftovers vmbench created (lists them first)")
    sp.add_argument("--dry-run", action="store_true", help="only list")
    sp.add_argument("--force", action="store_true", help="also remove resources of runs that are still running")
    sp.add_argument("scenario", nargs="?", help="clean up the host this scenario runs on (default: this machine)")
    sp.add_argument("--uri", default=None, help="libvirt URI on this machine (default qemu:///system)")
    sp.set_defaults(func=cmd_cleanup)

    sp = sub.add_parser("doctor", help="check a hypervisor host: reachable, libvirt, image, fio, KVM")
    sp.add_argument("scenario", nargs="?", help="check the host this scenario runs on (default: this machine)")
    sp.add_argument("--uri", default=None, help="libvirt URI on this machine (default qemu:///system)")
    sp.add_argument("--template", default="debian12")
    sp.add_argument("--probe", action="store_true", help="probe KVM again instead of using the cached answer")
    sp.set_defaults(func=cmd_doctor)

    from .advise import add_parser as add_advise_parser
    from .compare import add_parser as add_compare_parser
    from .export import add_parser as add_export_parser
    from .history import add_parser as add_history_parser
    from .hosts import add_parser as add_hosts_parser
    from .images import add_parser as add_images_parser
    from .setup import add_parser as add_setup_parser
    from .tune import add_parser as add_tune_parser

    add_images_parser(sub)

    add_compare_parser(sub)
    add_advise_parser(sub)
    add_tune_parser(sub)
    add_hosts_parser(sub)
    add_setup_parser(sub)
    add_history_parser(sub)
    add_export_parser(sub)
    return p


def _setup_logging(args: argparse.Namespace) -> None:
    root = logging.getLogger("vmbench")
    root.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.CRITICAL)
    root.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args)
    try:
        return int(args.func(args) or 0)
    except VmbenchError as exc:
        if args.debug:
            traceback.print_exc()
        print("\n".join(error_lines(exc.message, exc.hint)), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if args.debug:
            traceback.print_exc()
        print("interrupted", file=sys.stderr)
        return Interrupted.exit_code
    except BrokenPipeError:  # `vmbench plan ... | head`: the reader is gone, as with any Unix tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + signal.SIGPIPE
    except OSError as exc:  # a file or directory vmbench needs: say which, not a traceback
        if args.debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        if isinstance(exc, PermissionError):
            print("hint: vmbench needs root for qemu:///system, its state in /var/lib/vmbench and host fio on pool files", file=sys.stderr)
        return 1

