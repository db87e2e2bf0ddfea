"""A user's existing VM, read only: its disk and CPU settings as vmbench's axes (issue 18).

``vmbench tune`` starts from them and ``vmbench advise`` writes its apply snippets against
them.  Reading never changes the VM: libvirt's domain XML (``virDomainGetXMLDesc``) and the
Proxmox ``GET /nodes/{node}/qemu/{vmid}/config``, plus read-only ``zfs get`` of its disk's
zvol or dataset where the host transport reaches it.

This module holds what a reader gives (:class:`CurrentVm`) and the helpers both readers use;
the readers are :mod:`.libvirt.current` and :mod:`.proxmox.current`, picked by driver name in
:func:`vmbench.drivers.read_current`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, TypeVar

from ..scenario.model import VmConfig

T = TypeVar("T")


def read_choice(enum: Any, value: str | None, what: str, where: str, unknown: list[str]) -> Any:
    """``value`` as a member of the Choice ``enum``; None when the VM states none (absent, empty or
    "default"), or when it is not one vmbench knows (said in ``unknown``, naming ``where``)."""
    if value is None or value in ("", "default"):
        return None
    try:
        return enum.parse(value)
    except ValueError:
        unknown.append(f"{what}: {where} has {value!r}, not one of {enum.allowed()}")
        return None


def assume(value: T | None, default: T, note: str, assumed: list[str]) -> T:
    """``value``, or the hypervisor's ``default`` when the VM states none (said in ``assumed``)."""
    if value is not None:
        return value
    assumed.append(note)
    return default


@dataclass(frozen=True)
class CurrentVm:
    """What was read from one VM.

    ``vm``: its settings as a :class:`VmConfig` (bus, cache, aio, iothread, cpu, format,
    limits, detect_zeroes, discard, vcpus, memory; ZFS settings of its disk's storage where
    read).  ``disk``: the disk read (Proxmox ``scsi0``/``virtio0``..., libvirt target ``vda``);
    ``disk_spec``: that disk as configured (the Proxmox option string, or libvirt's ``<disk>``
    element) so an apply snippet keeps its other options.  ``unknown``: what could not be
    expressed as an axis, in words (said, never dropped silently)."""

    source: str  # "libvirt domain web1 (qemu:///system)", "Proxmox VM 101 on node pve1"
    vm: VmConfig
    disk: str
    disk_spec: str
    kind: str  # "libvirt" or "proxmox"
    ident: str  # the domain name or the VMID
    unknown: tuple[str, ...] = ()
    storage: Mapping[str, object] = field(default_factory=dict)  # e.g. {"volblocksize": "16K", "zvol": "rpool/data/vm-101-disk-0"}
    extra: Mapping[str, str] = field(default_factory=dict)  # Proxmox: scsihw, cpu line; libvirt: the <cpu> element
    #: settings the VM does not state, read as the hypervisor's default (said, like ``unknown``)
    assumed: tuple[str, ...] = ()
