"""Host storage: where scratch disks and the host's reference target live.

Two small Protocols: :class:`HostStorage` (label, preflight, free space, facts: what the
runner and ``vmbench doctor`` see of every driver's storage) and :class:`VolumeStorage`
(a host storage on which vmbench creates and deletes its own volumes by name).  Each type
is one implementation picked by the scenario's ``storage.type``: ``dir`` (a libvirt
directory pool, in the libvirt driver), ``zfs``/``zfs-dataset`` (:mod:`.zfs`, through
the host transport only, so host-only runs need no hypervisor) and ``rbd`` (:mod:`.rbd`, Ceph's
tools through the host transport), picked by :func:`make_volume_storage`.  Drivers that create
volumes ask a volume storage for them and never create disks any other way; the Proxmox
driver's storage is a host storage only (Proxmox allocates a VM's disks itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .base import HostStorage, Volume, VolumeRole, VolumeStorage, volume_name, VOLUME_RE

if TYPE_CHECKING:
    from ..scenario.model import Storage
    from ..transport.base import Transport
    from .rbd import RbdStorage
    from .zfs import ZfsStorage

__all__ = ["HostStorage", "Volume", "VolumeRole", "VolumeStorage", "volume_name", "VOLUME_RE", "make_zfs_storage",
           "make_rbd_storage", "make_volume_storage"]


def make_zfs_storage(storage: "Storage", host: "Transport") -> "ZfsStorage":
    """The ZFS storage of a scenario (``storage.type`` zfs or zfs-dataset) on ``host``."""
    from .zfs import ZfsStorage

    return ZfsStorage(storage, host)


def make_rbd_storage(storage: "Storage", host: "Transport") -> "RbdStorage":
    """The RBD storage of a scenario (``storage.type`` rbd) on ``host``."""
    from .rbd import RbdStorage

    return RbdStorage(storage, host)


def make_volume_storage(storage: "Storage", host: "Transport") -> "VolumeStorage | None":
    """The volume storage a scenario's ``storage.type`` names, by name; None for ``dir`` (the
    libvirt driver's own dir pool)."""
    from ..settings import StorageType

    makers: dict[StorageType, Callable[["Storage", "Transport"], VolumeStorage]] = {
        StorageType.ZFS: make_zfs_storage, StorageType.ZFS_DATASET: make_zfs_storage, StorageType.RBD: make_rbd_storage}
    maker = makers.get(storage.type)
    return None if maker is None else maker(storage, host)
