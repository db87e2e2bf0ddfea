"""Closed sets of choices a scenario can name, each an Enum parsed with a clear error."""

from __future__ import annotations

import difflib
import enum
from typing import TypeVar

E = TypeVar("E", bound="Choice")


class Choice(str, enum.Enum):
    """A str Enum whose values are the spellings scenarios use."""

    @classmethod
    def parse(cls: type[E], value: object) -> E:
        if isinstance(value, cls):
            return value
        text = str(value).strip().lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        for member in cls:
            if text == member.value:
                return member
        close = difflib.get_close_matches(str(value), [m.value for m in cls], n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{value!r} is not one of: {cls.allowed()}{guess}")

    @classmethod
    def allowed(cls) -> str:
        return ", ".join(m.value for m in cls)

    def __str__(self) -> str:
        return self.value


class Bus(Choice):
    VIRTIO_BLK = "virtio-blk"
    VIRTIO_SCSI = "virtio-scsi"  # one controller per disk (like Proxmox virtio-scsi-single)
    VIRTIO_SCSI_SHARED = "virtio-scsi-shared"  # one controller for all disks, root included
    SATA = "sata"

    @property
    def takes_iothread(self) -> bool:
        return self is not Bus.SATA

    @property
    def is_scsi(self) -> bool:
        return self in (Bus.VIRTIO_SCSI, Bus.VIRTIO_SCSI_SHARED)


class Cache(Choice):
    NONE = "none"
    WRITETHROUGH = "writethrough"
    WRITEBACK = "writeback"
    DIRECTSYNC = "directsync"
    UNSAFE = "unsafe"

    @property
    def direct(self) -> bool:
        """O_DIRECT on the host file (bypasses the host page cache)."""
        return self in (Cache.NONE, Cache.DIRECTSYNC)

    @property
    def writeback(self) -> bool:
        """The guest sees a volatile write cache (and must flush)."""
        return self in (Cache.NONE, Cache.WRITEBACK, Cache.UNSAFE)


class Aio(Choice):
    NATIVE = "native"
    THREADS = "threads"
    IO_URING = "io_uring"


class ImageFormat(Choice):
    RAW = "raw"
    QCOW2 = "qcow2"


class Accel(Choice):
    AUTO = "auto"
    KVM = "kvm"
    TCG = "tcg"


class CpuMode(Choice):
    """How a CPU model is given to libvirt."""

    MODEL = "model"  # a named model libvirt knows (kvm64, qemu64, Haswell, ...)
    HOST_PASSTHROUGH = "host-passthrough"
    MAX = "max"


class Feature(Choice):
    """A CPU feature flag forced on or off, or left as the model has it."""

    ON = "on"
    OFF = "off"
    DEFAULT = "default"


class Filesystem(Choice):
    EXT2 = "ext2"
    EXT3 = "ext3"
    EXT4 = "ext4"
    XFS = "xfs"
    BTRFS = "btrfs"


class DriverName(Choice):
    """Hypervisor drivers, picked by name (vmbench.drivers.make_driver)."""

    LIBVIRT = "libvirt"
    PROXMOX = "proxmox"  # a Proxmox VE node, through its API (and SSH for host fio and evidence)
    NONE = "none"  # no hypervisor: a host-only scenario (host storage variants, no VM)


class StorageType(Choice):
    """Where scratch disks and the host's reference target live."""

    DIR = "dir"  # files in a directory storage pool
    ZFS = "zfs"  # zvols under a ZFS dataset
    ZFS_DATASET = "zfs-dataset"  # raw or qcow2 files on child datasets of a ZFS dataset

    @property
    def zfs(self) -> bool:
        return self in (StorageType.ZFS, StorageType.ZFS_DATASET)


class PlanMode(Choice):
    ONE_FACTOR = "one-factor"
    FACTORIAL = "factorial"
