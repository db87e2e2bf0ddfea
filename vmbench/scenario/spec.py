"""The whole scenario as loaded: one frozen dataclass holding every section's spec.

Above :mod:`.model` (the values a section holds), :mod:`.load` (``load:``) and :mod:`.tune`
(``tune:`` and ``advise:``); :mod:`.loader` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fio.job import FioJob
from ..settings import Telemetry
from ..units import format_size
from .load import LoadSpec
from .backend import Storage
from .model import Cell, Hypervisor, RepeatPolicy, Stack, Target, VmConfig
from .tune import AdviseSpec, TuneSpec


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    text: str  # the YAML as read, stored with the run
    description: str
    hypervisor: Hypervisor
    storage: Storage
    template: str
    baseline: VmConfig
    cells: tuple[Cell, ...]
    jobs: tuple[FioJob, ...]
    stacks: tuple[Stack, ...] = ()
    targets: tuple[Target, ...] = ()
    repeats: int = 1  # always repeat_policy.min (set from it when a policy is given)
    host_baseline: bool = True
    plan_mode: str = "baseline"  # baseline, one-factor, factorial, cells, journey
    crypto_benchmark: tuple[tuple[str, int], ...] = field(default=())  # (cipher, key bits)
    skipped_cells: tuple[tuple[str, str], ...] = ()  # factorial combinations left out: (name, why)
    repeat_policy: RepeatPolicy | None = None  # None: fixed, ``repeats`` times
    host_only: bool = False  # no VM: every cell is a host storage variant measured on the host
    load: LoadSpec | None = None  # many VMs at once (scenario/load.py); None: one VM per cell
    tune: TuneSpec | None = None  # tune: (scenario/tune.py): a search run by vmbench tune; with .round, one round of it
    advise: AdviseSpec | None = None  # advise: the goals and allowed risks vmbench advise answers for this run
    telemetry: Telemetry = Telemetry.ON  # off: no sampler beside fio (settings.Telemetry)

    def __post_init__(self) -> None:
        if self.repeat_policy is None:
            object.__setattr__(self, "repeat_policy", RepeatPolicy(self.repeats, self.repeats))
        else:
            object.__setattr__(self, "repeats", self.repeat_policy.min)

    def template_label(self) -> str:
        """What the VMs are made from: a recipe of vmbench/images/recipes (libvirt), or the template VM
        a Proxmox node clones (``hypervisor.template``)."""
        pve = self.hypervisor.proxmox
        return f"Proxmox VM {pve.template}" if pve is not None else self.template

    def storage_label(self) -> str:
        """Where the scratch disks go: the libvirt storage, or the PVE storage (with its type
        where the scenario's ``storage:`` section says it: zvols, rbd; offline, nothing else is known)."""
        pve = self.hypervisor.proxmox
        if pve is None:
            return self.storage.describe()
        st = self.storage
        return f"PVE storage {pve.storage}{st.backend.proxmox_label(st)}, scratch {format_size(st.scratch_size)}"
