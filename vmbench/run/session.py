"""What a run's parts share while it runs: its outcome so far, and the sessions a load step
and a boot group are driven with (the runner satisfies :class:`RunSession` and
:class:`BootSession`; the load step and the boot group need no more of it)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..drivers.base import Accelerator, Guest, HypervisorDriver, VmResources
from ..guest.disk import ScratchDisk
from ..progress import Progress
from ..results.db import ResultsDB
from ..results.records import BootRecord, CellRecord
from ..scenario.model import Cell
from ..scenario.spec import Scenario
from ..transport.base import Transport
from .fleet import RunHost
from .ledger import Ledger
from .measure import Measurer
from .plan import Plan


@dataclass
class RunOutcome:
    run_id: int
    tag: str
    status: str
    invalid_cells: list[str] = field(default_factory=list)
    error: str | None = None
    skipped_steps: int = 0  # already stored by an earlier attempt (resume)


class RunSession(Protocol):
    """The run a load step belongs to: its driver, database, records and progress."""

    scenario: Scenario
    plan: Plan
    db: ResultsDB
    progress: Progress
    driver: HypervisorDriver
    host: Transport
    tag: str
    run_id: int
    attempt: int
    host_workdir: str
    accel: Accelerator | None
    outcome: RunOutcome | None
    ledger: Ledger | None
    measurer: Measurer | None
    created: list[VmResources]
    boots_started: int
    step: str  # what the run is doing, named in errors

    hosts: dict[str, RunHost]  # every host of the run by name, the primary first
    placed: dict[str, str]  # VM name -> the name of the host it was created on

    def record_cell(self, cell: Cell, boot_id: int | None, found: list[str], evidence: dict,
                    stored: CellRecord | None = None) -> CellRecord:
        """Store ``cell`` (once per run) with what was found; its record as stored (with its id)."""

    def driver_for(self, host: str) -> HypervisorDriver:
        """The driver of host ``host`` (the primary's for '' or a name not in :attr:`hosts`)."""

    def host_of(self, host: str) -> RunHost:
        """Host ``host`` of the run (the primary for '' or a name not in :attr:`hosts`)."""

    def inspect(self, guest: Guest, boot: BootRecord) -> tuple[ScratchDisk, dict, dict]:
        """Find the scratch disk in ``guest`` and read back its settings: (disk, evidence, effective)."""


class BootSession(RunSession, Protocol):
    """The run a boot group belongs to (:mod:`.bootgroup`): a load step's session, and what
    the run knows of the guests' cryptsetup benchmarks."""

    crypto_done: set[str]  # the CPUs (labels) whose guest benchmark is stored
    broken_crypto: bool  # the guest read back last has aes without ssse3/pclmulqdq under TCG
