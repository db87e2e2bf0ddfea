"""Host storage: where scratch disks and the host's reference target live.

Two small Protocols: :class:`HostStorage` (label, preflight, free space, facts: what the
runner and ``vmbench doctor`` see of every driver's storage) and :class:`VolumeStorage`
(a host storage on which vmbench creates and deletes its own volumes by name).  Each type
is one implementation picked by the scenario's ``storage.type``: ``dir`` (a libvirt
directory pool, in the libvirt driver) and ``zfs``/``zfs-dataset`` (:mod:`.zfs`, through
the host transport only, so host-only runs need no hypervisor).  Drivers that create
volumes ask a volume storage for them and never create disks any other way; the Proxmox
driver's storage is a host storage only (Proxmox allocates a VM's disks itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import HostStorage, Volume, VolumeRole, VolumeStorage, volume_name, VOLUME_RE

if TYPE_CHECKING:
    from ..scenario.model import Storage
    from ..transport.base import Transport
    from .zfs import ZfsStorage

__all__ = ["HostStorage", "Volume", "VolumeRole", "VolumeStorage", "volume_name", "VOLUME_RE", "make_zfs_storage"]


def make_zfs_storage(storage: "Storage", host: "Transport") -> "ZfsStorage":
    """The ZFS storage of a scenario (``storage.type`` zfs or zfs-dataset) on ``host``."""
    from .zfs import ZfsStorage

    return ZfsStorage(storage, host)
