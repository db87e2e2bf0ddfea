"""The host storage Protocols and the names of what they create."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from .leftover import Leftover
from ..progress import Progress
from ..settings import ImageFormat

if TYPE_CHECKING:
    from ..scenario.model import ZfsSettings

#: every volume vmbench creates: vmbench-<run tag>-<seq>-<role>.<format>
VOLUME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-\d+-(root|scratch|hostref)\.(qcow2|raw)$")


class VolumeRole(str, enum.Enum):
    ROOT = "root"  # the VM's root disk: a linked clone (overlay) of the template
    SCRATCH = "scratch"  # the disk fio and the in-guest stacks use
    HOSTREF = "hostref"  # a raw volume on the same storage, for host fio when the scratch isn't raw


def volume_name(run_tag: str, seq: int, role: VolumeRole, fmt: ImageFormat) -> str:
    return f"vmbench-{run_tag}-{seq}-{role.value}.{fmt.value}"


@dataclass(frozen=True)
class Volume:
    """A volume on the host: its name, the path QEMU and host fio open, and whether that
    path is a file or a block device (``<disk type='file'|'block'>``)."""

    name: str
    path: str
    format: ImageFormat
    kind: str = "file"  # "file" or "block"
    zfs_name: str | None = None  # the zvol, or the dataset holding the file (ZFS storage)
    readback: dict = field(default_factory=dict, compare=False)  # the storage's properties as read back
    problems: tuple[str, ...] = ()  # settings that did not take: the cells on it are invalid
    #: where each of its effective ZFS properties comes from, as ``zfs get`` says it
    #: ("local", "default", "inherited from tank/parent"); {} when not read
    sources: dict = field(default_factory=dict, compare=False)


class HostStorage(Protocol):
    """Where scratch disks live on the hypervisor host, as the runner and ``vmbench doctor``
    see it: every driver's storage (dir pool, ZFS, a Proxmox storage) is one."""

    #: for messages: "dir pool vmbench"
    label: str

    def prepare(self, progress: Progress) -> None:
        """Preflight: the storage exists and is usable (vmbench's own pool is created)."""
        ...

    def free_bytes(self) -> int:
        ...

    def facts(self) -> dict:
        """What is recorded with the run about this storage."""
        ...


class VolumeStorage(HostStorage, Protocol):
    """Host storage on which vmbench itself creates and deletes volumes by name (dir pool,
    ZFS).  Everything it creates is named by :func:`volume_name`; :meth:`leftovers` lists
    only such volumes.  (A Proxmox storage is not one: Proxmox allocates, names and frees a
    VM's disks itself, through the VM's configuration.)"""

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None,
                      zfs: "ZfsSettings | None" = None) -> Volume:
        """A new volume; ``backing`` (qcow2 only) makes it a linked clone of that image;
        ``zfs``: the ZFS settings it is created with (ZFS storage), read back into it."""
        ...

    def delete_volume(self, name: str) -> None:
        """Delete a vmbench volume by name; a volume already gone is fine."""
        ...

    def leftovers(self) -> list[Leftover]:
        ...

    def delete_path(self, path: str) -> None:
        """Remove a leftover :meth:`leftovers` listed (its ``name``), if it is vmbench's."""
        ...
