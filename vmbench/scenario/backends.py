"""The built-in storage backends (:mod:`.backend`): a libvirt dir pool, zvols or files on
child datasets under a ZFS dataset, RBD images in a Ceph pool.  Registered in this order,
the order ``storage.type`` lists them in."""

from __future__ import annotations

import functools

from ..settings import DriverName, ImageFormat
from ..units import format_size
from .backend import STORAGE_KEYS, Storage, StorageBackend, StorageType, register
from .ceph import read_ceph
from .model import VmConfig, ZfsSettings
from .parsers import MiB, size_parser
from .reader import Section, as_bool, as_name
from .zfsprops import (DATASET, DEFAULT_RECORDSIZE, DEFAULT_VOLBLOCKSIZE, PROPERTY_BY_NAME, PROPERTY_NAMES, ZVOL,
                       parse_dataset, parse_property, parse_recordsize, parse_volblocksize)


class DirBackend(StorageBackend):
    """Files in a libvirt directory pool (the VMs' root disks are always in one)."""

    name = "dir"


class ZfsBackend(StorageBackend):
    """Volumes vmbench creates under a ZFS dataset, each with its cell's ZFS settings, read back."""

    volumes = "zfs"
    host_only = True

    def read(self, sec: Section, scratch_size: int, driver: DriverName | None) -> tuple[Storage, ZfsSettings]:
        pool = sec.get("pool", as_name, "vmbench")
        sec.done(STORAGE_KEYS)
        dataset = sec.get("dataset", parse_dataset,
                          hint="the parent dataset vmbench creates its zvols or datasets under, e.g. rpool/vmbench")
        if "/" not in dataset:
            raise sec.fail("dataset", f"{dataset!r} is a pool's root dataset; name a child dataset vmbench may create under",
                           f"e.g. {dataset}/vmbench (create it first: zfs create {dataset}/vmbench)")
        zvol = self.zfs_kind == ZVOL
        if zvol and sec.has("recordsize"):
            raise sec.fail("recordsize", "applies to datasets (type: zfs-dataset); zvols have volblocksize")
        if not zvol and sec.has("volblocksize"):
            raise sec.fail("volblocksize", "applies to zvols (type: zfs); datasets have recordsize")
        if not zvol and sec.has("sparse"):
            raise sec.fail("sparse", "applies to zvols (type: zfs); files on a dataset are always sparse")
        sparse = sec.get("sparse", as_bool, False)
        arc_max = sec.get("arc_max", size_parser(MiB), None)
        zfs = ZfsSettings(volblocksize=sec.get("volblocksize", parse_volblocksize, DEFAULT_VOLBLOCKSIZE) if zvol else None,
                          recordsize=None if zvol else sec.get("recordsize", parse_recordsize, DEFAULT_RECORDSIZE))
        if sec.has("properties"):
            zfs = _read_properties(sec, zfs)
        storage = Storage(type=StorageType(self.name), pool=pool, scratch_size=scratch_size, dataset=dataset, sparse=sparse,
                          arc_max=arc_max)
        problems = self.vm_problems(VmConfig(zfs=zfs), storage)
        if problems:
            raise sec.fail("properties", problems[0][0], problems[0][1])
        return storage, zfs

    def vm_problems(self, vm: VmConfig, storage: Storage) -> list[tuple[str, str]]:
        out = self.krbd_problems(vm)
        zfs, kind = vm.zfs, self.zfs_kind
        if kind == ZVOL and zfs.recordsize:
            out.append(("recordsize applies to datasets; zvols have volblocksize", "use volblocksize, or storage.type: zfs-dataset"))
        if kind == DATASET and zfs.volblocksize:
            out.append(("volblocksize applies to zvols; datasets have recordsize", "use recordsize, or storage.type: zfs"))
        for name, _ in zfs.properties:
            if kind not in PROPERTY_BY_NAME[name].applies:
                out.append((f"{name} does not apply to {kind}s", f"{name} is a property of datasets (storage.type: zfs-dataset)"))
        return out + self.format_problems(vm)


def _read_properties(sec: Section, zfs: ZfsSettings) -> ZfsSettings:
    """``storage.properties``: the baseline's ZFS properties."""
    props = sec.section("properties")
    if not isinstance(props.data, dict):
        raise sec.fail("properties", "is a mapping of ZFS properties, e.g. {compression: lz4, sync: standard}")
    for name in list(props.data):
        if name not in PROPERTY_BY_NAME:
            continue  # refused by done() below, with a suggestion
        zfs = zfs.with_property(str(name), props.get(name, functools.partial(parse_property, str(name))))
    props.done(PROPERTY_NAMES)
    return zfs


class ZvolBackend(ZfsBackend):
    """zvols under a ZFS dataset (on Proxmox: through temporary zfspool entries on it)."""

    name = "zfs"
    zfs_kind = ZVOL
    formats = (ImageFormat.RAW,)
    proxmox_type = "zfspool"
    advice_kind = "zvol"
    described_as = ("zvols",)

    def describe(self, storage: Storage) -> str:
        return (f"zvols under {storage.dataset}" + (" (sparse)" if storage.sparse else "")
                + f", scratch {format_size(storage.scratch_size)}")

    def proxmox_label(self, storage: Storage) -> str:
        return f" (zfspool: zvols under {storage.dataset})"

    def format_problems(self, vm: VmConfig) -> list[tuple[str, str]]:
        if vm.format in self.formats:
            return []
        return [(f"format {vm.format.value} is not possible on a zvol (a raw block device)",
                 "use format: raw, or storage.type: zfs-dataset for qcow2 files on a dataset")]


class DatasetBackend(ZfsBackend):
    """Raw or qcow2 files on child datasets of a ZFS dataset (libvirt only)."""

    name = "zfs-dataset"
    zfs_kind = DATASET
    advice_kind = "dataset"
    described_as = ("files on child datasets",)

    def describe(self, storage: Storage) -> str:
        return f"files on child datasets of {storage.dataset}, scratch {format_size(storage.scratch_size)}"

    def driver_problem(self, driver: DriverName, *, qualified: bool = False) -> tuple[str, str] | None:
        if driver is not DriverName.PROXMOX:
            return None
        if qualified:
            return ("storage.type zfs-dataset is not supported with driver proxmox",
                    "use storage.type zfs (zvols, volblocksize through temporary zfspool storages) or leave "
                    "storage out (scratch disks on hypervisor.storage)")
        return ("zfs-dataset is not supported with driver proxmox",
                "use type: zfs (zvols; volblocksize through temporary zfspool storages) or leave storage out "
                "(scratch disks on hypervisor.storage)")


class RbdBackend(StorageBackend):
    """RBD images in a Ceph pool, opened by QEMU through librbd (on Proxmox: the node's rbd
    storage, its pool and client read from PVE)."""

    name = "rbd"
    formats = (ImageFormat.RAW,)
    ceph = True
    host_page_cache = False
    own_reference_volume = False
    volumes = "rbd"
    proxmox_type = "rbd"
    advice_kind = "rbd"

    def read(self, sec: Section, scratch_size: int, driver: DriverName | None) -> tuple[Storage, ZfsSettings]:
        ceph = read_ceph(sec, proxmox=driver is DriverName.PROXMOX)
        return Storage(type=StorageType(self.name), scratch_size=scratch_size, ceph=ceph), ZfsSettings()

    def describe(self, storage: Storage) -> str:
        if storage.ceph is not None:
            return (f"RBD images in Ceph pool {storage.ceph.pool} (client.{storage.ceph.user}), "
                    f"scratch {format_size(storage.scratch_size)}")
        # Proxmox: the pool and the client are the node's rbd storage's
        return f"RBD images on the Proxmox rbd storage (hypervisor.storage), scratch {format_size(storage.scratch_size)}"

    def proxmox_label(self, storage: Storage) -> str:
        return " (rbd)"

    def vm_problems(self, vm: VmConfig, storage: Storage) -> list[tuple[str, str]]:
        return self.format_problems(vm) + self.zfs_problems(vm)  # krbd applies here

    def format_problems(self, vm: VmConfig) -> list[tuple[str, str]]:
        if vm.format in self.formats:
            return []
        return [(f"format {vm.format.value} is not possible on RBD (an RBD image is a raw block device)",
                 "use format: raw on type rbd")]

    def jobfile_problem(self) -> str | None:
        return "on RBD storage the host runs fio's rbd engine, which vmbench does not write into a job file"

    def reference_key(self, vm: VmConfig) -> str:
        """On RBD also the same librbd client cache (which QEMU sets from the disk's cache mode),
        or the same kernel mapping (krbd: fio's libaio on the mapped device, no librbd)."""
        return f"{vm.storage_key()}|krbd" if vm.krbd else f"{vm.storage_key()}|rbd_cache={vm.cache.librbd_cache}"

    def reference_note(self, krbd: bool) -> str:
        return ("the host is measured once per librbd cache setting (QEMU turns rbd_cache off with cache none and directsync)"
                + (" and once on the kernel's mapping (krbd: fio's libaio on the mapped image)" if krbd else "")
                + ", before the first boot with it")

    def no_host_filesystem(self) -> str:
        return "the host's target is a shared RBD image, not a volume of its own"


for _backend in (DirBackend(), ZvolBackend(), DatasetBackend(), RbdBackend()):
    register(_backend)
