"""What kind of run a stored run is, decided once from its plan (every schema version) by
:func:`vmbench.results.plan.read_plan`: the
report's tables and plots, the advice's comparisons and ``vmbench advise`` dispatch on it.
CPU per I/O, crypto, targets and cells are extras any kind may have."""

from __future__ import annotations

import enum


class RunKind(enum.Enum):
    MATRIX = "matrix"  # one VM per cell: the baseline, one factor at a time, factorial, cells
    JOURNEY = "journey"  # one change per step, each step on top of the one before
    HOST_ONLY = "host-only"  # storage variants measured on the host, no VM
    SCALING = "scaling"  # 1, 2, ... VMs at once on the same storage
    NEIGHBOURS = "neighbours"  # a victim VM beside aggressors, phase by phase

    @property
    def many_vms(self) -> bool:
        """Several VMs at once: the load tables replace the one-VM gap and layer tables."""
        return self in (RunKind.SCALING, RunKind.NEIGHBOURS)
