"""The ``dir`` host storage: files in a libvirt directory pool.

vmbench's own pool (``vmbench`` or ``vmbench-*``) is created on first use in vmbench's
directory on the host; any other pool must exist.  Volumes are created and deleted through
libvirt; only names matching :data:`~vmbench.storage.VOLUME_RE` are ever deleted.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from typing import Callable

from ...errors import HypervisorError, PreflightError
from ...progress import Progress
from ...settings import ImageFormat
from ...storage import VOLUME_RE, Volume
from ...transport import ops
from ...transport.base import Transport
from ...units import human_size
from ...storage.leftover import Leftover
from .connection import hypervisor_errors, libvirt
from .xml import pool_xml, volume_xml

log = logging.getLogger(__name__)


def is_vmbench_pool(name: str) -> bool:
    return name == "vmbench" or name.startswith("vmbench-")


class DirPoolStorage:
    def __init__(self, conn: Callable[[], "libvirt.virConnect"], pool: str, host: Transport, default_path: str) -> None:
        self._conn = conn
        self.pool_name = pool
        self.host = host
        self.default_path = default_path
        self.label = f"dir pool {pool}"

    def _pool(self) -> "libvirt.virStoragePool":
        with hypervisor_errors(f"looking up the storage pool {self.pool_name}"):
            return self._conn().storagePoolLookupByName(self.pool_name)

    def prepare(self, progress: Progress) -> None:
        conn = self._conn()
        try:
            pool = conn.storagePoolLookupByName(self.pool_name)
        except libvirt.libvirtError:
            if not is_vmbench_pool(self.pool_name):
                raise PreflightError(f"libvirt on {self.host.name} has no storage pool named {self.pool_name!r}",
                                     "create it, or use storage.pool: vmbench (vmbench creates its own)") from None
            progress.step(f"creating the storage pool {self.pool_name} at {self.default_path} on {self.host.name}")
            ops.mkdir(self.host, self.default_path, 0o711)
            with hypervisor_errors(f"creating the storage pool {self.pool_name} at {self.default_path}"):
                pool = conn.storagePoolDefineXML(pool_xml(self.pool_name, self.default_path), 0)
                pool.setAutostart(1)
        with hypervisor_errors(f"reading the storage pool {self.pool_name}"):
            root = ET.fromstring(pool.XMLDesc(0))
        if root.get("type") != "dir":
            raise PreflightError(f"storage pool {self.pool_name} is of type {root.get('type')}, not dir",
                                 "storage.type: dir needs a directory pool")
        path = root.findtext("./target/path")
        if path and is_vmbench_pool(self.pool_name) and not ops.is_dir(self.host, path):
            ops.mkdir(self.host, path, 0o711)  # vmbench's own pool: recreate its directory if someone removed it
        if not pool.isActive():
            with hypervisor_errors(f"starting the storage pool {self.pool_name}"):
                pool.create(0)
        with hypervisor_errors(f"refreshing the storage pool {self.pool_name}"):
            pool.refresh(0)

    def free_bytes(self) -> int:
        """What root may still write on the filesystem under the pool (``df``, as every other
        free space vmbench reports; libvirt's pool figure counts the blocks reserved for root)."""
        with hypervisor_errors(f"reading the storage pool {self.pool_name}"):
            path = ET.fromstring(self._pool().XMLDesc(0)).findtext("./target/path")
        return ops.free_bytes(self.host, path or self.default_path)

    def survey(self) -> tuple[str, str, str]:
        """``vmbench doctor``'s look at the pool, creating nothing: (status, what it found,
        hint).  A missing vmbench pool is fine: the run creates it, and says where."""
        try:
            pool = self._conn().storagePoolLookupByName(self.pool_name)
        except libvirt.libvirtError:
            if not is_vmbench_pool(self.pool_name):
                return ("FAIL", f"libvirt on {self.host.name} has no storage pool named {self.pool_name!r}",
                        "create it, or use storage.pool: vmbench (vmbench creates its own)")
            parent = self.default_path
            while parent not in ("", "/") and not ops.exists(self.host, parent):
                parent = parent.rsplit("/", 1)[0] or "/"
            free = ops.free_bytes(self.host, parent or "/")
            return ("ok", f"{self.label}: not there yet; `vmbench run` creates it at {self.default_path} "
                          f"({human_size(free)} free)", "")
        with hypervisor_errors(f"reading the storage pool {self.pool_name}"):
            root = ET.fromstring(pool.XMLDesc(0))
        if root.get("type") != "dir":
            return ("FAIL", f"storage pool {self.pool_name} is of type {root.get('type')}, not dir",
                    "storage.type: dir needs a directory pool")
        path = root.findtext("./target/path") or self.default_path
        if not ops.is_dir(self.host, path):
            return ("ok" if is_vmbench_pool(self.pool_name) else "FAIL",
                    f"{self.label}: its directory {path} is missing" + ("; `vmbench run` makes it again" if is_vmbench_pool(self.pool_name) else ""),
                    "" if is_vmbench_pool(self.pool_name) else f"create {path}, or point the pool elsewhere")
        return ("ok", f"{self.label} at {path}: {human_size(ops.free_bytes(self.host, path))} free"
                      + ("" if pool.isActive() else " (inactive: `vmbench run` starts it)"), "")

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None,
                      zfs: object = None) -> Volume:
        pool = self._pool()
        xml = volume_xml(name, size, fmt.value, (backing, "qcow2") if backing else None)
        with hypervisor_errors(f"creating volume {name} in pool {self.pool_name}"):
            vol = pool.createXML(xml, 0)
        return Volume(name=name, path=vol.path(), format=fmt, kind="file")

    def delete_volume(self, name: str) -> None:
        if not VOLUME_RE.match(name):
            log.warning("not deleting %s: not a vmbench volume", name)
            return
        try:
            pool = self._conn().storagePoolLookupByName(self.pool_name)
            pool.refresh(0)
            vol = pool.storageVolLookupByName(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() in (libvirt.VIR_ERR_NO_STORAGE_VOL, libvirt.VIR_ERR_NO_STORAGE_POOL):
                return
            raise HypervisorError(f"looking up volume {name}: {exc.get_error_message()}") from None
        with hypervisor_errors(f"deleting volume {name}"):
            vol.delete(0)

    def delete_path(self, path: str) -> None:
        """Delete a vmbench volume found by path (``vmbench cleanup``)."""
        try:
            vol = self._conn().storageVolLookupByPath(path)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                return
            raise HypervisorError(f"looking up volume {path}: {exc.get_error_message()}") from None
        if not VOLUME_RE.match(vol.name()):
            log.warning("not deleting %s: not a vmbench volume", path)
            return
        with hypervisor_errors(f"deleting volume {path}"):
            vol.delete(0)

    def leftovers(self) -> list[Leftover]:
        """vmbench volumes in every active pool (a killed run may have used another pool)."""
        out = []
        with hypervisor_errors("listing storage pools"):
            pools = self._conn().listAllStoragePools(libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE)
        for pool in pools:
            try:
                pool.refresh(0)
                vols = pool.listAllVolumes(0)
            except libvirt.libvirtError:
                continue
            for vol in vols:
                try:
                    m = VOLUME_RE.match(vol.name())
                    if m:
                        out.append(Leftover("volume", vol.path(), m.group(1), f"pool {pool.name()}"))
                except libvirt.libvirtError:
                    continue  # removed since the listing (a run on this host cleaning up): not left over
        return out

    def facts(self) -> dict:
        try:
            pool = self._pool()
            root = ET.fromstring(pool.XMLDesc(0))
            info = pool.info()
        except (HypervisorError, libvirt.libvirtError):
            return {"storage_type": "dir", "pool": self.pool_name}
        return {"storage_type": "dir", "pool": self.pool_name, "pool_path": root.findtext("./target/path"),
                "pool_capacity_bytes": int(info[1]), "pool_free_bytes": int(info[3])}
