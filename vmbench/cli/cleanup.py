"""``vmbench cleanup [SCENARIO]``: finding and removing what vmbench created and left behind (after
a hard kill).

Only things that carry vmbench's tag are considered: domains named ``vmbench-<tag>-...``
with vmbench metadata, volumes named ``vmbench-<tag>-<n>-<role>.<fmt>``, console logs in
vmbench's own state directory.  Resources of a run whose process is still alive are
skipped unless forced.
"""

from __future__ import annotations

import argparse
import sys

from tabulate import tabulate

from ..drivers import make_driver
from ..drivers.base import HypervisorDriver, Leftover
from ..errors import UsageError, VmbenchError
from ..run.fleet import make_hosts
from ..run.ledger import live_runs
from ..paths import StatePaths
from ..scenario import load_scenario
from ..scenario.model import Hypervisor
from .common import ConsoleProgress, on_hosts


def find_leftovers(driver: HypervisorDriver, state: StatePaths, *, include_live: bool = False) -> tuple[list[Leftover], dict[str, int]]:
    live = {} if include_live else live_runs(state.runs)
    everything = driver.leftovers()
    found = [l for l in everything if l.run_tag not in live]
    order = {"domain": 0, "vm": 0, "volume": 1, "zvol": 1, "dataset": 1, "storage": 2, "file": 2, "directory": 3}
    found.sort(key=lambda l: (order.get(l.kind, 9), l.name))
    skipped = {tag: pid for tag, pid in live.items() if any(l.run_tag == tag for l in everything)}
    return found, skipped


def remove_leftovers(driver: HypervisorDriver, items: list[Leftover], state: StatePaths | None = None) -> list[str]:
    """Domains first (they hold the volumes), then volumes and files.  Returns errors."""
    errors = []
    for item in items:
        try:
            driver.remove_leftover(item)
        except VmbenchError as exc:
            errors.append(f"{item.kind} {item.name}: {exc.message}")
    state = state or StatePaths.default()
    tags = {i.run_tag for i in items}
    for tag in tags:
        ledger = state.runs / f"{tag}.json"
        if ledger.exists() and not any(e for e in errors if tag in e):
            ledger.unlink()
    return errors


# ---- vmbench cleanup ---------------------------------------------------------------------------


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
    print(tabulate([[l.kind, l.name, l.run_tag, l.detail] for l in found], headers=["kind", "name", "run", "detail"], tablefmt="simple"))
    if args.dry_run:
        print(f"\n{len(found)} leftover(s); --dry-run: nothing removed")
        return 0
    errors = remove_leftovers(driver, found)
    for e in errors:
        print(f"could not remove: {e}", file=sys.stderr)
    print(f"\nremoved {len(found) - len(errors)} of {len(found)}")
    return 0 if not errors else 4


def _drivers_for(args: argparse.Namespace) -> list:
    """(driver, host name) of every host of ``args.scenario`` (its hypervisor, storage and SSH
    settings; several for a run across hosts), or of ``--uri`` on this machine."""
    if getattr(args, "scenario", None):
        s = on_hosts(load_scenario(args.scenario), ConsoleProgress())  # nodes: all: the nodes online now
        return [(rh.driver, rh.label) for rh in make_hosts(s.hypervisor, s.storage, StatePaths.default()).values()]
    if args.uri and "+ssh://" in args.uri:
        raise UsageError(f"--uri {args.uri}: name the scenario instead, so its SSH settings are used",
                         "vmbench cleanup SCENARIO / vmbench doctor SCENARIO")
    return [(make_driver(Hypervisor(uri=args.uri or "qemu:///system")), "localhost")]

