"""What the drivers' codec tables share (pure).

Each VM driver spells every VM axis (vmbench.scenario.axes) in one table, one row per axis:
:data:`vmbench.drivers.libvirt.codec.CODECS` (the domain XML) and
:data:`vmbench.drivers.proxmox.codec.CODECS` (PVE's VM config).  A row writes its setting
into the configuration vmbench defines, reads it back from the live configuration and from
QEMU (for the run's evidence), reads it from a user's existing VM (``vmbench advise
--read-vm``, ``vmbench tune``), and edits it in the apply snippet the advice shows; the
drivers' builders, evidence and readers and vmbench.advice.apply iterate the table.  What
every driver's rows share is here: which axes a table must have (:func:`driver_axes`), how a
guest names a disk on each bus, an I/O limit set on a VmConfig.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..scenario import axes
from ..scenario.model import VmConfig
from ..settings import Bus

#: how the guest names a disk on each bus (the letter aside)
GUEST_NAME = {Bus.VIRTIO_BLK: "/dev/vdX", Bus.VIRTIO_SCSI: "/dev/sdX", Bus.VIRTIO_SCSI_SHARED: "/dev/sdX", Bus.SATA: "/dev/sdX"}
RENAME_NOTE = ("the guest sees the disk on another bus, so its name changes ({old} -> {new}): make sure /etc/fstab and "
               "the bootloader name it by UUID or label (and a Windows guest has the driver of the new bus) before "
               "the switch")


def driver_axes(driver: str) -> tuple[str, ...]:
    """The axes a driver's codec table must have a row for: every axis of the VM (not the
    host storage's) that the driver takes, in the axis table's order."""
    return tuple(a.name for a in axes.AXES if not a.storage and (not a.drivers or driver in a.drivers))


def with_limit(vm: VmConfig, name: str, value: float | None) -> VmConfig:
    """``vm`` with the I/O limit ``name`` (iops, mbps_rd_max, burst_length...) set to ``value``."""
    changes: dict[str, Any] = {name: value}
    return replace(vm, limits=replace(vm.limits, **changes))
