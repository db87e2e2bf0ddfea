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


class Telemetry(Choice):
    """Whether vmbench samples the layers below fio while it runs (the devices, the CPU, a ZFS
    pool, a Ceph pool): ``off`` leaves fio alone on the host and in the guest, for a figure with
    no observer at all (fio's own logs and status stay; so does the watch on a Ceph cluster)."""

    ON = "on"
    OFF = "off"

    @classmethod
    def parse(cls, value: object) -> "Telemetry":  # YAML reads on/off as booleans
        if isinstance(value, bool):
            return cls.ON if value else cls.OFF
        return super().parse(value)


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
    """QEMU's cache modes.  What each one means is written here once, as the three flags
    QEMU reports (``query-block``'s ``cache``, a ``-blockdev``'s ``cache.direct`` and
    ``cache.no-flush`` and the device's ``write-cache``), and used by the evidence readers,
    the guest checks and the report."""

    NONE = "none"
    WRITETHROUGH = "writethrough"
    WRITEBACK = "writeback"
    DIRECTSYNC = "directsync"
    UNSAFE = "unsafe"

    @property
    def direct(self) -> bool:
        """O_DIRECT on the host file (bypasses the host page cache): ``cache.direct``."""
        return self in (Cache.NONE, Cache.DIRECTSYNC)

    @property
    def writeback(self) -> bool:
        """The guest sees a volatile write cache (and must flush): the device's ``write-cache``."""
        return self in (Cache.NONE, Cache.WRITEBACK, Cache.UNSAFE)

    @property
    def no_flush(self) -> bool:
        """The guest's flushes are ignored: ``cache.no-flush``."""
        return self is Cache.UNSAFE

    @property
    def host_page_cache(self) -> bool:
        """Reads and writes go through the host page cache (so reads may come from host RAM)."""
        return not self.direct

    @property
    def librbd_cache(self) -> bool:
        """librbd's client cache (``rbd_cache``) on a disk QEMU opens through librbd: QEMU's rbd
        driver turns it off with ``cache.direct`` (none, directsync) and on otherwise."""
        return not self.direct

    @property
    def guest_write_cache(self) -> str:
        """The guest kernel's ``/sys/block/*/queue/write_cache`` under this mode."""
        return "write back" if self.writeback else "write through"

    @property
    def flags(self) -> tuple[bool, bool, bool]:
        """(writeback, direct, no-flush), the way QEMU states a cache mode."""
        return self.writeback, self.direct, self.no_flush

    @classmethod
    def from_flags(cls, writeback: bool, direct: bool, no_flush: bool) -> "Cache | None":
        """The mode QEMU's three flags make; None for a combination no mode has."""
        return next((m for m in cls if m.flags == (writeback, direct, no_flush)), None)

    def with_write_cache(self, on: bool) -> "Cache | None":
        """This mode with the device's ``write-cache`` set (a legacy ``-drive cache=`` plus
        ``-device ...,write-cache=off`` is writethrough or directsync)."""
        return Cache.from_flags(on, self.direct, self.no_flush)


class Aio(Choice):
    NATIVE = "native"
    THREADS = "threads"
    IO_URING = "io_uring"


class DetectZeroes(Choice):
    """QEMU's ``detect-zeroes``: whether writes of zeroes become write-zeroes requests
    (``on``) or discards (``unmap``, which needs ``discard: unmap``)."""

    OFF = "off"
    ON = "on"
    UNMAP = "unmap"

    @property
    def rank(self) -> int:
        """How far zero writes are turned into something else (off < on < unmap)."""
        return (DetectZeroes.OFF, DetectZeroes.ON, DetectZeroes.UNMAP).index(self)


class Discard(Choice):
    """QEMU's ``discard``: whether the guest's discard (TRIM/UNMAP) requests reach the storage."""

    IGNORE = "ignore"
    UNMAP = "unmap"

    @classmethod
    def parse(cls, value: object) -> "Discard":
        """``unmap``/``ignore``, also as libvirt and Proxmox spell them (``on``/``off``)."""
        if isinstance(value, str) and value.strip().lower() in ("on", "off"):
            return cls.UNMAP if value.strip().lower() == "on" else cls.IGNORE
        return super().parse(value)


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


#: per-VM CPU flags Proxmox accepts (qemu-server CPUConfig.pm); nested-virt exists only in 9.x
PVE_CPU_FLAGS = ("pcid", "spec-ctrl", "ibpb", "ssbd", "virt-ssbd", "amd-ssbd", "amd-no-ssb", "pdpe1gb", "md-clear",
                 "hv-tlbflush", "hv-evmcs", "aes")
#: CPU flags a stored CPU label may name: Proxmox's and others whose names hold a dash or a dot
#: (so ``kvm64+spec-ctrl`` is one flag), longest first
KNOWN_CPU_FLAGS = tuple(sorted(set(PVE_CPU_FLAGS) | {"nested-virt", "tsc-deadline", "arch-capabilities", "x2apic", "pclmulqdq",
                                                     "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "rdrand", "vmx", "svm",
                                                     "hypervisor", "invtsc"}, key=len, reverse=True))


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


class PlanMode(Choice):
    ONE_FACTOR = "one-factor"
    FACTORIAL = "factorial"
