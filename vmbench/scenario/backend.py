"""Storage backends: what each ``storage.type`` is, answered once, by one object.

:class:`StorageType` names a backend as scenarios write it; ``StorageType.ZFS.backend()`` is
its :class:`StorageBackend`, which answers every question the code asks of a storage type:
what its ``storage:`` section holds, what it cannot hold, how the host reference reaches it,
what a driver makes of it, what is sampled beside fio and what the report states of it.
Call sites ask the backend; nothing outside :mod:`vmbench.storage` tests which type a
storage is.  The built-in backends (dir, zfs, zfs-dataset, rbd) are in :mod:`.backends`.

The layers: a backend lives here, in the scenario layer, because the scenario is read and
checked through it.  What a higher layer does with a backend (the volume storage that
creates its volumes, a hypervisor's storage entries) the backend names as data (``volumes``,
``proxmox_type``, ``ceph``...), which that layer dispatches on through a registry of its own
(:data:`vmbench.storage.VOLUME_STORAGES`).  A new backend is one subclass of
:class:`StorageBackend` and its :func:`register` (docs/layout.md).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import ClassVar, Iterator

from ..settings import DriverName, ImageFormat
from ..units import format_size
from .model import CephConfig, VmConfig, ZfsSettings
from .reader import Section, as_name
from .zfsprops import ZFS_STORAGE_KEYS

#: every key of the storage: section (each type takes some of them)
STORAGE_KEYS = ("type", "pool", "scratch_size", *ZFS_STORAGE_KEYS, "ceph")


class StorageType(str):
    """A storage backend's name as scenarios write it (``storage.type``): ``backend()`` is the
    backend :func:`register` made known by that name.  It reads like the closed choices of
    :mod:`vmbench.settings` (``parse``, ``allowed``, ``value``, a member per built-in type) but
    is open: a new backend registers its name instead of editing an Enum."""

    DIR: ClassVar[StorageType]
    ZFS: ClassVar[StorageType]
    ZFS_DATASET: ClassVar[StorageType]
    RBD: ClassVar[StorageType]

    def __new__(cls, value: str) -> StorageType:
        """One object per name, so ``is`` compares them as it does Enum members."""
        known = _TYPES.get(value)
        if known is None:
            known = _TYPES[value] = super().__new__(cls, value)
        return known

    @property
    def value(self) -> str:
        return str.__str__(self)

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"StorageType({self.value!r})"

    def __reduce__(self) -> tuple:
        return StorageType, (self.value,)

    def backend(self) -> StorageBackend:
        """This type's backend (KeyError: a name no backend registered)."""
        return _BACKENDS[self.value]

    @classmethod
    def parse(cls, value: object) -> StorageType:
        """A registered type by name, as :meth:`vmbench.settings.Choice.parse` reads a choice."""
        if isinstance(value, StorageType) and value.value in _BACKENDS:
            return _TYPES[value.value]
        text = str(value).strip().lower() if isinstance(value, (str, int)) and not isinstance(value, bool) else None
        if text in _BACKENDS:
            return _TYPES[text]
        close = difflib.get_close_matches(str(value), list(_BACKENDS), n=1)
        guess = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(f"{value!r} is not one of: {cls.allowed()}{guess}")

    @classmethod
    def allowed(cls) -> str:
        return ", ".join(_BACKENDS)

    @classmethod
    def all(cls) -> tuple[StorageType, ...]:
        """Every registered type, in the order they were registered."""
        return tuple(_TYPES[name] for name in _BACKENDS)


_TYPES: dict[str, StorageType] = {}
_BACKENDS: dict[str, StorageBackend] = {}
StorageType.DIR, StorageType.ZFS, StorageType.ZFS_DATASET, StorageType.RBD = (
    StorageType("dir"), StorageType("zfs"), StorageType("zfs-dataset"), StorageType("rbd"))  # their backends: .backends


@dataclass(frozen=True)
class Storage:
    """Where scratch disks live: a libvirt dir pool, zvols under a ZFS dataset, files on
    child datasets of one, or RBD images in a Ceph pool (``type``: its backend answers the
    rest).  The ZFS settings of each cell are in its ``VmConfig.zfs`` (the ``storage:``
    section gives the baseline's); ``pool`` is the libvirt dir pool that holds the VMs' root
    disks (and, type dir, the scratch disks)."""

    type: StorageType = StorageType.DIR
    pool: str = "vmbench"
    scratch_size: int = 1 << 30
    dataset: str | None = None  # zfs, zfs-dataset: the parent dataset vmbench creates children under
    sparse: bool = False  # zfs: thin zvols (zfs create -s)
    arc_max: int | None = None  # zfs: the host's ARC c_max as the user states it (sizes the cache-buster)
    ceph: CephConfig | None = None  # rbd: the cluster, the user and the pool

    @property
    def backend(self) -> StorageBackend:
        return self.type.backend()

    @property
    def zfs(self) -> bool:
        """Its volumes are ZFS's: the ZFS settings and the ARC apply."""
        return self.backend.zfs_kind is not None

    @property
    def zfs_pool(self) -> str | None:
        """The ZFS pool under the scratch disks, sampled beside fio (None: not ZFS)."""
        return self.dataset.split("/", 1)[0] if self.zfs and self.dataset else None

    def describe(self) -> str:
        return self.backend.describe(self)


class StorageBackend:
    """What one storage type is: each per-type question answered once.  The defaults are a
    plain directory of volume files (type dir); a backend overrides what differs."""

    #: the name scenarios give it (``storage.type``)
    name: ClassVar[str] = ""
    #: the image formats its scratch volumes may have (``vm.format``)
    formats: ClassVar[tuple[ImageFormat, ...]] = (ImageFormat.RAW, ImageFormat.QCOW2)
    #: "zvol" or "dataset" (:mod:`.zfsprops`): its volumes are ZFS's and take the ZFS settings; None: not ZFS
    zfs_kind: ClassVar[str | None] = None
    #: a Ceph pool is under its disks: the RADOS ceiling, Ceph telemetry, a Ceph client in each driver
    ceph: ClassVar[bool] = False
    #: QEMU's disks go through the host's page cache (cache modes that use it); False: librbd, its own cache
    host_page_cache: ClassVar[bool] = True
    #: the host reference is a raw volume of its own on the storage, on which the host can also
    #: make the cells' filesystems; False: it opens the scratch image itself (RBD: fio's rbd engine)
    own_reference_volume: ClassVar[bool] = True
    #: the volume storage (:data:`vmbench.storage.VOLUME_STORAGES`) that creates its volumes, lists
    #: what a run left of them (``vmbench cleanup``) and removes it; None: the driver's own (libvirt's dir pool)
    volumes: ClassVar[str | None] = None
    #: the Proxmox storage type its scratch disks go to when it is not hypervisor.storage as it
    #: is: "zfspool" (temporary zfspool entries on the dataset), "rbd" (an rbd storage); None
    proxmox_type: ClassVar[str | None] = None
    #: a host_only scenario can measure its variants (no VM: the host creates each volume)
    host_only: ClassVar[bool] = False
    #: the kind of storage the advice's candidates apply to ("zvol", "dataset", "rbd"; "": any)
    advice_kind: ClassVar[str] = ""
    #: how a stored plan's storage text begins when this backend described it (older runs lack the type)
    described_as: ClassVar[tuple[str, ...]] = ()

    # ---- the scenario ------------------------------------------------------------------------

    def read(self, sec: Section, scratch_size: int, driver: DriverName | None) -> tuple[Storage, ZfsSettings]:
        """The ``storage:`` section of this type (``type`` and ``scratch_size`` read already):
        the storage and the baseline's ZFS settings."""
        pool = sec.get("pool", as_name, "vmbench")
        sec.done(STORAGE_KEYS)
        for key in ZFS_STORAGE_KEYS:
            if sec.has(key):
                raise sec.fail(key, f"applies to ZFS storage (type: zfs or zfs-dataset), not type {self.name}")
        return Storage(type=StorageType(self.name), pool=pool, scratch_size=scratch_size), ZfsSettings()

    def describe(self, storage: Storage) -> str:
        return f"{self.name} pool {storage.pool}, scratch {format_size(storage.scratch_size)}"

    def proxmox_label(self, storage: Storage) -> str:
        """What the scratch disks on a Proxmox storage are, after its name: " (rbd)"; "": nothing known offline."""
        return ""

    def vm_problems(self, vm: VmConfig, storage: Storage) -> list[tuple[str, str]]:
        """What ``vm``'s storage settings cannot be on this storage, as (message, hint)."""
        return self.format_problems(vm) + self.krbd_problems(vm) + self.zfs_problems(vm)

    def format_problems(self, vm: VmConfig) -> list[tuple[str, str]]:
        if vm.format in self.formats:
            return []
        return [(f"format {vm.format.value} is not possible on storage type {self.name}",
                 f"use format: {' or '.join(f.value for f in self.formats)}")]

    def krbd_problems(self, vm: VmConfig) -> list[tuple[str, str]]:
        """krbd (the kernel's mapping of an RBD image) applies to RBD storage only."""
        if vm.krbd is None:
            return []
        return [(f"krbd applies to RBD images (a Proxmox rbd storage), but storage.type is {self.name}",
                 "set storage.type: rbd with driver proxmox and an rbd storage as hypervisor.storage, or remove krbd")]

    def zfs_problems(self, vm: VmConfig) -> list[tuple[str, str]]:
        """The ZFS settings apply to ZFS storage only."""
        zfs = vm.zfs
        used = (["volblocksize"] if zfs.volblocksize else []) + (["recordsize"] if zfs.recordsize else []) + [k for k, _ in zfs.properties]
        if not used:
            return []
        return [(f"{', '.join(used)} applies to ZFS storage, but storage.type is {self.name}",
                 "set storage.type: zfs (zvols) or zfs-dataset (files on datasets)")]

    def driver_problem(self, driver: DriverName, *, qualified: bool = False) -> tuple[str, str] | None:
        """Why this type cannot be used with ``driver`` (message, hint), the message naming the
        type alone (the storage section's ``type`` key) or, ``qualified``, as ``storage.type``; None: it can."""
        return None

    def jobfile_problem(self) -> str | None:
        """Why a job file cannot run on this storage's host reference; None: it can."""
        return None

    def reference_key(self, vm: VmConfig) -> str:
        """Equal keys mean one host reference serves both VMs (the same host storage settings)."""
        return vm.storage_key()

    def reference_note(self, krbd: bool) -> str:
        """``vmbench plan``'s note when the host is measured more than once."""
        return "the host is measured once per storage setting, before the first boot on it (a new storage setting needs a new boot)"

    def no_host_filesystem(self) -> str:
        """Why the host has no like-for-like filesystem row on this storage (``own_reference_volume`` False)."""
        return ""


def register(backend: StorageBackend) -> StorageType:
    """Make ``backend`` the one of its name: scenarios may name it as ``storage.type``."""
    if not backend.name:
        raise ValueError(f"{type(backend).__name__} has no name")
    _BACKENDS[backend.name] = backend
    return StorageType(backend.name)


def unregister(name: str) -> None:
    """Forget the backend of ``name`` (a test's made-up one)."""
    _BACKENDS.pop(name, None)
    _TYPES.pop(name, None)


def backends() -> Iterator[StorageBackend]:
    """Every registered backend, in the order they were registered."""
    return iter(tuple(_BACKENDS.values()))


def backend_named(name: object) -> StorageBackend | None:
    """The backend a stored run names (its environment's ``storage_type``); None for a name no
    backend has (a fake's, a Proxmox storage's before storage types were stored)."""
    return _BACKENDS.get(name) if isinstance(name, str) else None


def advice_kind(described: str, name: object) -> str:
    """The kind of storage a stored run measured, as the advice's candidates name them
    ("zvol", "dataset", "rbd"; "": another): from the stored type, or how its plan described
    the storage (runs stored before the type was)."""
    for b in backends():
        if b.advice_kind and (name == b.name or any(described.startswith(text) for text in b.described_as)):
            return b.advice_kind
    return ""


def host_reference_key(vm: VmConfig, storage: Storage) -> str:
    """Equal keys mean one host reference serves both VMs (:meth:`StorageBackend.reference_key`)."""
    return storage.backend.reference_key(vm)


def storage_problems(vm: VmConfig, storage: Storage) -> list[tuple[str, str]]:
    """What ``vm``'s storage settings cannot be on ``storage``, as (message, hint)."""
    return storage.backend.vm_problems(vm, storage)
