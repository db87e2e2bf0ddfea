"""What every subcommand of the ``vmbench`` command shares: progress on stderr, the log file of
a run, the cached accelerator of a scenario's host, whether a stored run's process is alive,
saying that the results database was migrated, and the hosts of a scenario that names them
when the run starts (``nodes: all``).  Every command module imports from here
(never from another command's private names)."""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from ..drivers import make_driver
from ..errors import VmbenchError
from ..paths import StatePaths
from ..progress import NullProgress, Progress
from ..run.ledger import live_runs
from ..scenario.pvenodes import PVE_NODE_RE, every_node
from ..transport.local import LocalTransport
from .fit import WIDTH, wrapped

if TYPE_CHECKING:
    from ..results.db import RunRow
    from ..scenario.spec import Scenario


# ---- progress on stderr ------------------------------------------------------------------------


class ConsoleProgress:
    """Steps always; status lines at most every few seconds (in place on a terminal)."""

    def __init__(self, stream=None, interval: float = 5.0, quiet: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.quiet = quiet
        self.started = time.monotonic()
        self.last_status = 0.0
        self.tty = self.stream.isatty()
        self.pending_newline = False

    def _stamp(self) -> str:
        e = int(time.monotonic() - self.started)
        return f"[{e // 60:02d}:{e % 60:02d}]"

    def _line(self, text: str) -> None:
        if self.pending_newline:
            self.stream.write("\n")
            self.pending_newline = False
        self.stream.write(f"{self._stamp()} {text}\n")
        self.stream.flush()

    def step(self, message: str) -> None:
        if not self.quiet:
            self._line(message)
        self.last_status = time.monotonic()

    def status(self, message: str) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        if self.tty:
            if now - self.last_status >= 0.5:
                self.stream.write(f"\r\033[K{self._stamp()}   {message}")
                self.stream.flush()
                self.pending_newline = True
                self.last_status = now
        elif now - self.last_status >= self.interval:
            self._line(f"  {message}")
            self.last_status = now

    def warn(self, message: str) -> None:
        self._line(f"warning: {message}")


def cached_accelerator(scenario) -> str | None:
    """What the last KVM probe found for this hypervisor (no probe, no connection)."""
    if scenario.hypervisor.accel.value != "auto":
        return scenario.hypervisor.accel.value
    # the probe cache is on this machine: no need to reach the host for it
    try:
        return make_driver(scenario.hypervisor, scenario.storage, host=LocalTransport()).cached_accelerator()
    except VmbenchError:  # e.g. no libvirt binding here: a plan needs none
        return None


def write_out(text: str, output: str | None) -> None:
    """A command's output: to the file ``--output`` names (saying so), else to stdout."""
    if output:
        Path(output).write_text(text)
        print(f"wrote {output}")
    else:
        sys.stdout.write(text)


def say_migrated(db, progress) -> None:
    """Say what opening ``db`` did to it, when it upgraded it (:meth:`ResultsDB.migration_note`), wrapped to
    fit the terminal."""
    note = db.migration_note() if getattr(db, "migrated_from", None) else None
    if note:  # after the progress line's "[00:00] ", its lines wrapped under it
        progress.step(wrapped(note, rest="          ", width=WIDTH - 8))


def run_alive(run) -> bool:
    """Whether the run's vmbench process is alive, by its tag (run ids are per database: run 1
    of another database may be running)."""
    return bool(set(run.tags) & set(live_runs(StatePaths.default().runs)))  # its last attempt's ledger


def log_to_file(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(path)
    except OSError:
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    logging.getLogger("vmbench").addHandler(handler)


# ---- the hosts of a run ------------------------------------------------------------------------


def on_hosts(scenario: "Scenario", progress: Progress | None = None, resume: "RunRow | None" = None) -> "Scenario":
    """``scenario`` as the node list it runs on: ``nodes: all`` read from the cluster (one GET
    /nodes, before anything is created), or, for a stored run (``resume``; advise reading a VM of
    one) that recorded its nodes, those nodes (its finished steps ran there; one of them offline
    now fails the preflight, naming it).  Any other scenario as it is."""
    if not scenario.hypervisor.all_nodes:
        return scenario
    progress = progress or NullProgress()
    names = stored_nodes(resume) if resume is not None else ()
    if resume is not None and names:
        progress.step(f"nodes: all: resuming run {resume.id} on the nodes it started with: {', '.join(names)}")
        return replace(scenario, hypervisor=every_node(scenario.hypervisor, names))
    # the Proxmox API client (requests, proxmoxer): imported for a scenario with nodes: all only, as the
    # commands that share this module (images build under Debian's python3 among them) need none of it
    from ..drivers.proxmox.cluster import resolve_nodes

    return resolve_nodes(scenario, progress=progress)


def stored_nodes(run: "RunRow") -> tuple[str, ...]:
    """The nodes a stored run ran on: its plan's hosts (a run across several), else its
    environment's node (one); () when it recorded none (it failed before measuring)."""
    hosts = run.plan_json.get("hosts") if isinstance(run.plan_json, dict) else None
    names = [str(h) for h in hosts] if isinstance(hosts, list) else []
    if not names and run.environment.pve_node:
        names = [str(run.environment.pve_node)]
    return tuple(names) if names and all(PVE_NODE_RE.fullmatch(n) for n in names) else ()
