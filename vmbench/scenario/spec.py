"""The whole scenario as loaded: one frozen dataclass holding every section's spec.

Above :mod:`.model` (the values a section holds), :mod:`.load` (``load:``) and :mod:`.tune`
(``tune:`` and ``advise:``); :mod:`.loader` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..fio.job import FioJob
from ..settings import Telemetry
from .load import LoadSpec
from .model import Cell, Hypervisor, RepeatPolicy, Stack, Storage, Target, VmConfig
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
