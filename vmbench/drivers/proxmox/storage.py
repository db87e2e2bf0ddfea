"""Scratch storage on a Proxmox VE node: the scenario's PVE storage, and for ZFS one
temporary zfspool storage entry per volblocksize (NOTES.md section 2).

PVE creates zvols itself (``zfs create [-s] [-b blocksize] -V SIZE pool/vm-N-disk-M``) and
has no API for dataset properties, so a volblocksize needs a storage entry whose
``blocksize`` says it: ``vmbench-<tag>-<size>`` (pool = the scenario's dataset, ``nodes`` =
this node), made before the scratch disk is allocated there and deleted only after its VMs
are destroyed (destroy needs the entry).  The other ZFS properties and ``vmbench:run=<tag>``
are set on the new zvol with ``zfs set`` over SSH, then everything is read back with
``zfs get -Hp``.
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from ...errors import CommandError, HypervisorError, PreflightError
from ...progress import Progress
from ...scenario.model import ZfsSettings
from ...scenario.backend import StorageType
from ...storage.rbd import RbdStorage
from ...storage.zfs import PROPERTY, ZfsStorage, destroy_owned, get_argv, parse_get, readback_problems, requested
from ...transport.base import Transport
from ...units import format_size
from .api import PveApi
from .entries import release_entry
from .errors import PveApiError
from .rbd import PveRbd

log = logging.getLogger(__name__)

#: zvols PVE names for a VM: <dataset>/vm-<vmid>-<name>
ZVOL_LEAF_RE = re.compile(r"^vm-(\d+)-[\w.-]+$")
RUN_TAG_RE = re.compile(r"^[rp][0-9a-f]{8}$")


def entry_id(run_tag: str, volblocksize: int, node: str = "") -> str:
    """``node``: the node of a run across several (its own entry), "" for one node."""
    return f"vmbench-{run_tag}-{format_size(volblocksize)}" + (f"-{node.lower()}" if node else "")


def entry_params(storage_id: str, dataset: str, volblocksize: int, sparse: bool, node: str) -> dict:
    """``POST /storage`` of a zfspool entry that creates zvols with this volblocksize."""
    return {"storage": storage_id, "type": "zfspool", "pool": dataset, "blocksize": format_size(volblocksize),
            "sparse": sparse, "content": "images", "nodes": node}


def zfs_set_argv(zvol: str, zfs: ZfsSettings, run_tag: str) -> list[str]:
    """``zfs set`` of the scenario's properties and vmbench's own on a zvol PVE made."""
    return ["zfs", "set", *(f"{k}={v}" for k, v in zfs.properties), f"{PROPERTY}={run_tag}", zvol]


def zvol_list_argv(dataset: str) -> list[str]:
    return ["zfs", "list", "-H", "-p", "-r", "-t", "volume", "-o", f"name,{PROPERTY}", dataset]


def parse_zvols(text: str, dataset: str) -> list[tuple[str, int, str]]:
    """(zvol, vmid, run tag) of every ``<dataset>/vm-N-...`` zvol carrying vmbench's property."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 2:
            continue
        name, tag = parts
        parent, _, leaf = name.rpartition("/")
        m = ZVOL_LEAF_RE.match(leaf)
        if parent == dataset and m and RUN_TAG_RE.match(tag):
            out.append((name, int(m.group(1)), tag))
    return out


class PveStorage:
    """The scenario's PVE storage as vmbench's :class:`~vmbench.storage.HostStorage`: its
    label, preflight, free space and facts.  It is not a
    :class:`~vmbench.storage.VolumeStorage`: Proxmox allocates, names and frees a VM's disks
    itself (through the VM's config and ``destroy-unreferenced-disks``), so the driver asks
    the API for disks and the driver lists the leftovers (VMs, storage entries, zvols)."""

    def __init__(self, api: Callable[[], PveApi], node: str, storage_id: str, zfs: ZfsStorage | None = None,
                 rbd: PveRbd | None = None) -> None:
        self._api = api
        self.node = node
        self.id = storage_id
        self.zfs = zfs
        self.rbd = rbd  # storage.type rbd: the node's rbd storage, its Ceph client
        self.label = f"Proxmox storage {storage_id} on {node}" + (f" (zvols under {zfs.dataset})" if zfs else "")
        self._status: dict | None = None
        self._ceph: RbdStorage | None = None

    def ceph(self) -> RbdStorage | None:
        """The storage's Ceph pool as vmbench's RBD storage (its client: what QEMU uses), on
        storage.type rbd; made on first use (it reads the storage's configuration)."""
        if self.rbd is not None and self._ceph is None:
            self._ceph = RbdStorage(self.rbd.client(), self.rbd.host)
        return self._ceph

    def status(self, fresh: bool = False) -> dict:
        if self._status is None or fresh:
            try:
                self._status = self._api().get(f"/nodes/{self.node}/storage/{self.id}/status") or {}
            except PveApiError as exc:
                if exc.gone or exc.status == 400:
                    raise PreflightError(f"Proxmox storage {self.id} does not exist on node {self.node} (hypervisor.storage): "
                                         f"{exc.reason or exc.message}", "pvesm status on the node lists the storages") from None
                raise
        return self._status

    @property
    def type(self) -> str:
        return str(self.status().get("type") or "")

    def prepare(self, progress: Progress) -> None:
        progress.step(f"checking {self.label}")
        st = self.status(fresh=True)
        content = set(str(st.get("content") or "").split(","))
        if "images" not in content:
            raise PreflightError(f"Proxmox storage {self.id} ({st.get('type')}) cannot hold VM disk images "
                                 f"(content: {st.get('content') or 'none'})",
                                 "pick a storage with content 'images' as hypervisor.storage, or add 'Disk image' to its "
                                 "content (Datacenter > Storage)")
        if str(st.get("enabled", 1)) in ("0", "False", "false") or str(st.get("active", 1)) in ("0", "False", "false"):
            raise PreflightError(f"Proxmox storage {self.id} is not active on node {self.node}",
                                 "pvesm status on the node says why (not mounted, disabled...)")
        if self.zfs is not None:
            self.zfs.prepare(progress)
        if st.get("type") == "rbd" and self.rbd is None:
            progress.warn(f"Proxmox storage {self.id} is an rbd storage, but the scenario does not say storage.type: rbd: "
                          "no RADOS ceiling, no Ceph telemetry, and no host reference (host fio needs fio's rbd engine); "
                          "add storage: {type: rbd} to measure them")
        ceph = self.ceph()
        if ceph is not None:  # the cluster healthy, the pool there, the user can write: as on libvirt
            ceph.prepare(progress)

    def free_bytes(self) -> int:
        if self.zfs is not None:
            return self.zfs.free_bytes()
        return int(self.status(fresh=True).get("avail") or 0)

    def facts(self) -> dict:
        out: dict = {"pool": self.id, "pve_storage": self.id}
        try:
            st = self.status(fresh=True)
            out.update(pve_storage_type=st.get("type"), pve_storage_content=st.get("content"),
                       pve_storage_total_bytes=st.get("total"), pve_storage_avail_bytes=st.get("avail"),
                       pve_storage_shared=st.get("shared"))
        except (PveApiError, PreflightError) as exc:
            out["pve_storage_error"] = exc.message
        if self.zfs is not None:
            out.update(self.zfs.facts())
        if self.rbd is not None:
            try:
                ceph = self.ceph()
            except PreflightError as exc:
                out["pve_storage_error"] = exc.message
            else:
                assert ceph is not None
                out.update({**ceph.facts(), "pve_krbd": self.rbd.krbd, "ceph_mon_host": ceph.cfg.mon_host,
                            "ceph_keyring": ceph.cfg.keyring})
        return out


class ZfsEntries:
    """The temporary zfspool entries of one run, and the zvols allocated on them."""

    def __init__(self, api: Callable[[], PveApi], host: Transport, node: str, dataset: str, sparse: bool,
                 per_node: bool = False) -> None:
        self._api = api
        self.host = host
        self.node = node
        self.per_node = per_node  # a run across several nodes: the entries' IDs name this node
        self.dataset = dataset
        self.sparse = sparse
        self.users: dict[str, set[str]] = {}  # entry -> VM names whose disks are on it

    def ensure(self, run_tag: str, volblocksize: int, vm_name: str) -> str:
        """The entry for ``volblocksize`` (made if missing), with ``vm_name`` as a user."""
        sid = entry_id(run_tag, volblocksize, self.node if self.per_node else "")
        if sid not in self.users:
            try:
                self._api().post("/storage", entry_params(sid, self.dataset, volblocksize, self.sparse, self.node))
            except PveApiError as exc:
                if "already defined" not in exc.reason and "already exists" not in exc.reason:
                    raise HypervisorError(f"cannot create the temporary zfspool storage {sid} (pool {self.dataset}, "
                                          f"blocksize {format_size(volblocksize)}): {exc.message}",
                                          exc.hint or "the token needs Datastore.Allocate on /storage") from None
            self.users[sid] = set()
        self.users[sid].add(vm_name)
        return sid

    def release(self, sid: str, vm_name: str) -> str | None:
        """``vm_name`` is destroyed: delete the entry once no VM of this run uses it (:func:`.entries.release_entry`)."""
        return release_entry(self._api(), self.users, sid, vm_name)

    def setup_zvol(self, zvol: str, zfs: ZfsSettings, run_tag: str) -> tuple[dict, list[str]]:
        """Set the scenario's properties and vmbench's on a new zvol; read everything back."""
        try:
            self.host.run(zfs_set_argv(zvol, zfs, run_tag), timeout=120)
            want = requested(StorageType.ZFS, zfs)
            got = parse_get(self.host.run(get_argv(zvol, [*want, PROPERTY, "refreservation"]), timeout=60).stdout)
        except CommandError as exc:
            raise HypervisorError(f"setting ZFS properties on {zvol} on {self.host.name} failed: "
                                  f"{exc.stderr.strip() or exc.message}") from None
        problems = readback_problems(want, got)
        if got.get(PROPERTY, {}).get("value") != run_tag:
            problems.append(f"the {PROPERTY} property of {zvol} did not take")
        return {k: v["value"] for k, v in got.items()}, problems

    def zvol_leftovers(self) -> list[tuple[str, int, str]]:
        got = self.host.run(zvol_list_argv(self.dataset), timeout=120, check=False)
        if got.returncode != 0:
            log.warning("zfs list on %s: %s", self.host.name, got.stderr.strip())
            return []
        return parse_zvols(got.stdout, self.dataset)

    def destroy_zvol(self, zvol: str, run_tag: str) -> None:
        """``zfs destroy`` of a zvol left behind, checked by name and vmbench's property."""
        parent, _, leaf = zvol.rpartition("/")
        if parent != self.dataset or not ZVOL_LEAF_RE.match(leaf):
            raise HypervisorError(f"{zvol} is not a zvol PVE made under {self.dataset}; left alone")
        destroy_owned(self.host, zvol, run_tag)
