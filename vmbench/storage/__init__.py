"""Host storage: where scratch disks and the host's reference target live.

Two small Protocols: :class:`HostStorage` (label, preflight, free space, facts: what the
runner and ``vmbench doctor`` see of every driver's storage) and :class:`VolumeStorage`
(a host storage on which vmbench creates and deletes its own volumes by name).  Each type
is one implementation named by the scenario's storage backend (:mod:`vmbench.scenario.backend`,
its ``volumes``): none for ``dir`` (a libvirt directory pool, in the libvirt driver),
``zfs`` for ``zfs``/``zfs-dataset`` (:mod:`.zfs`, through the host transport only, so host-only
runs need no hypervisor) and ``rbd`` (:mod:`.rbd`, Ceph's tools through the host transport),
made by :func:`make_volume_storage` from :data:`VOLUME_STORAGES`.  Drivers that create
volumes ask a volume storage for them and never create disks any other way; the Proxmox
driver's storage is a host storage only (Proxmox allocates a VM's disks itself).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from .base import HostStorage, Volume, VolumeRole, VolumeStorage, volume_name, VOLUME_RE

if TYPE_CHECKING:
    from ..scenario.backend import Storage
    from ..transport.base import Transport
    from .rbd import RbdStorage
    from .zfs import ZfsStorage

__all__ = ["HostStorage", "Volume", "VolumeRole", "VolumeStorage", "volume_name", "VOLUME_RE", "make_zfs_storage",
           "make_rbd_storage", "make_volume_storage", "VOLUME_STORAGES"]


def make_zfs_storage(storage: "Storage", host: "Transport") -> "ZfsStorage":
    """The ZFS storage of a scenario (``storage.type`` zfs or zfs-dataset) on ``host``."""
    # each volume storage's module is imported when a run makes one: every report loads this
    # package (report/rows.py reads storage.radosbench), and needs neither (start-up time)
    from .zfs import ZfsStorage

    return ZfsStorage(storage, host)


def make_rbd_storage(storage: "Storage", host: "Transport") -> "RbdStorage":
    """The RBD storage of a scenario (``storage.type`` rbd) on ``host``."""
    from .rbd import RbdStorage  # when a run makes one, as make_zfs_storage's

    return RbdStorage(storage, host)


#: what creates each backend's volumes (:attr:`vmbench.scenario.backend.StorageBackend.volumes`)
VOLUME_STORAGES: dict[str, Callable[["Storage", "Transport"], VolumeStorage]] = {
    "zfs": make_zfs_storage, "rbd": make_rbd_storage}


def make_volume_storage(storage: "Storage", host: "Transport") -> "VolumeStorage | None":
    """The volume storage the scenario's storage backend names; None where it names none (``dir``:
    the libvirt driver's own dir pool)."""
    name = storage.backend.volumes
    return None if name is None else VOLUME_STORAGES[name](storage, host)
