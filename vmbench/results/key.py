"""What one measurement is: its identity, shared by the plan, the results database, the
report and the comparison of runs.

A measurement is one fio run of one job on one side (the host, or a guest), on the storage
of a cell (a VM configuration) or the host reference stored under one, at a layer of a
stack (or the raw disk), repeat ``repeat``.  A key without a repeat (``repeat=None``,
:meth:`MeasurementKey.group`) names a *group*: every repeat of the same job on the same
target, whose figures are combined and compared.

``vm`` is the VM within a load step (several VMs run at once: a scaling step's clones, a
noisy-neighbour phase's victim and aggressors; on the host, the volume within the step's
host reference) and ``load_step`` the step (1, 2, ...); a run without a ``load:`` section
measures VM 0 at load step 0 only.  The host a measurement ran on is stored beside it (the
``host`` column, every row) but is not part of what it is: within a run the VM and the step
tell its measurements apart, and the same measurement on another host is the one to compare.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping


@dataclass(frozen=True)
class MeasurementKey:
    side: str  # "host" or "guest"
    cell: str | None  # the cell's name; for the host, the cell its rows are stored under (None: the one host reference)
    stack: str | None  # None: the raw disk (or the host)
    layer: str  # "host", "raw", or a stack's layer path ("luks2+xfs")
    job: str
    repeat: int | None = None  # None: every repeat (a group)
    vm: int = 0  # the VM within a group of VMs run at once
    load_step: int = 0  # the step of a load ramp

    def group(self) -> "MeasurementKey":
        """This key without its repeat: the group whose repeats are combined and compared."""
        if self.repeat is None:
            return self
        # made directly, not by replace(): five times faster, and asked for every stored row
        return MeasurementKey(self.side, self.cell, self.stack, self.layer, self.job, None, self.vm, self.load_step)

    def with_repeat(self, repeat: int) -> "MeasurementKey":
        return replace(self, repeat=repeat)

    @classmethod
    def of(cls, row: Mapping[str, Any], *, repeat: bool = True) -> "MeasurementKey":
        """The key of a stored measurement row (``cell`` its cell's name); without
        ``repeat``, its group's key."""
        return cls(side=row["side"], cell=row.get("cell"), stack=row.get("stack"), layer=row["layer"], job=row["job"],
                   repeat=int(row["repeat"]) if repeat and row.get("repeat") is not None else None,
                   vm=int(row.get("vm") or 0), load_step=int(row.get("load_step") or 0))

    def describe(self) -> str:
        """The key in words, as the comparison of runs names a row: "4k-randwrite host",
        "4k-randwrite raw (baseline)", "4k-randwrite luks2 (baseline, stack luks)"."""
        if self.side == "host":
            return f"{self.job} host"
        inside = ", ".join(filter(None, [self.cell, f"stack {self.stack}" if self.stack else None]))
        return f"{self.job} {self.layer} ({inside})" if inside else f"{self.job} {self.layer}"
