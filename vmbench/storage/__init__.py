"""Host storage: where scratch disks and the host's reference target live.

One small Protocol (:class:`HostStorage`); each type is one implementation picked by the
scenario's ``storage.type``: ``dir`` (a libvirt directory pool, in the libvirt driver) and
``zfs``/``zfs-dataset`` (:mod:`.zfs`, through the host transport only, so host-only runs
need no hypervisor).  Drivers ask their storage for volumes and never create disks any
other way.
"""

from .base import HostStorage, Volume, VolumeRole, volume_name, VOLUME_RE

__all__ = ["HostStorage", "Volume", "VolumeRole", "volume_name", "VOLUME_RE", "make_zfs_storage"]


def make_zfs_storage(storage, host):
    """The ZFS storage of a scenario (``storage.type`` zfs or zfs-dataset) on ``host``."""
    from .zfs import ZfsStorage

    return ZfsStorage(storage, host)
