"""``vmbench plan SCENARIO``: what a scenario would run, and how long it would take; nothing is
created and no host is reached (the accelerator is the one a probe cached on this machine).
A tune scenario's plan is :mod:`.tuneplan`'s."""

from __future__ import annotations

import argparse
import json

from ..fio.jobfile import describe_rewrites
from ..run.plan import cell_layers, estimate, make_plan, placement_text, precondition_lines
from ..scenario import load_scenario
from ..scenario.axes import settings_of, settings_text, storage_settings_of
from ..scenario.jobs import cache_buster_of
from ..units import format_duration
from .common import cached_accelerator
from .fit import fitted, say


def cmd_plan(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    plan = make_plan(scenario)
    accel = args.accel or cached_accelerator(scenario)
    wide = args.wide
    if scenario.tune is not None and scenario.tune.round is None:  # each round is planned by the search
        # the tune engine judges rounds by the report and the advice (numpy, scipy): imported for a
        # tune scenario only, so that any other plan loads none of them (start-up time)
        from .tuneplan import print_tune_plan

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
        doc["precondition"] = precondition_lines(plan)
    print(json.dumps(doc, indent=2))
    return 0


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
    out = ["raw"]
    for st in cell.stacks:
        measured = [path for path, stack, _ in cell_layers(cell) if stack is st]
        out.append(f"{st.name} (every layer)" if len(measured) > 1 else measured[-1] if measured else st.name)
    return ", ".join(out)


def _print_cache_buster(s, wide: bool) -> None:
    """How a cache-buster job that did not set its size was sized."""
    size, how = cache_buster_of(s.cells, s.storage)
    for j in s.jobs:
        if j.profile == "cache-buster" and j.size == size:
            say(f"{j.name}: working set {how}"
                + ("; on ZFS, state the host's ARC c_max as storage.arc_max" if s.storage.zfs and not s.storage.arc_max else ""),
                wide=wide)


def _print_jobs(s, wide: bool) -> None:
    """The jobs (a job file's rewrites for each target), the stacks, the cells left out, and a
    buffered job's note."""
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

