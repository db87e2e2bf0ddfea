"""Finding and removing what vmbench created and left behind (after a hard kill).

Only things that carry vmbench's tag are considered: domains named ``vmbench-<tag>-...``
with vmbench metadata, volumes named ``vmbench-<tag>-<n>-<role>.<fmt>``, console logs in
vmbench's own state directory.  Resources of a run whose process is still alive are
skipped unless forced.
"""

from __future__ import annotations

from ..drivers.base import HypervisorDriver, Leftover
from ..errors import VmbenchError
from ..run.ledger import live_runs
from ..paths import StatePaths


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
