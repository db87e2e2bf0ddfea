"""Removal for the Proxmox driver: a run's own VMs (stop, destroy with purge and
destroy-unreferenced-disks, no disk left behind, the temporary storage entry after its
VMs), and the leftovers ``vmbench cleanup`` finds: VMs named ``vmbench-<tag>-<n>`` that
carry the ``vmbench`` tag (never a VM without it), temporary storage entries
``vmbench-<tag>-<size>`` (zfspool) and ``vmbench-<tag>-krbd|librbd`` (rbd), zvols with ``vmbench:run`` whose VM is gone, host work directories."""

from __future__ import annotations

import logging
import re
from ...errors import HypervisorError, VmbenchError

from ..base import Leftover, VmResources
from ...storage.leftover import remove_work_leftover, work_leftovers
from ...storage.radosbench import BENCH_KIND
from .errors import PveApiError, PveLockedError
from .node import PveNode
from .entries import ENTRY_RE, ENTRY_TYPES, delete_entry

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-(\d+)$")
LOCK_WAIT = 120.0
TASK_TIMEOUT = 300.0


def split_tags(value: object) -> set[str]:
    return {t for t in re.split(r"[;, ]+", str(value or "")) if t}


class Removal(PveNode):
    """The removal half of :class:`~vmbench.drivers.proxmox.driver.ProxmoxDriver`."""

    def remove_vm(self, res: VmResources) -> None:
        """Stop, destroy (purge, destroy-unreferenced-disks), check no disk is left, then drop
        a temporary storage entry no VM uses.  Idempotent; never touches another VM."""
        errors: list[str] = []
        hints: list[str] = []
        rec = self.vms.get(res.name)
        destroyed = True
        try:
            vmid, node = (rec.vmid, rec.node) if rec and rec.vmid else self._find_own(res.name)
            if vmid is not None:
                self._destroy(vmid, node, res.name)
                for sid in sorted(rec.storages if rec else {self.cfg.storage}):
                    left = self._disks_left(node, sid, vmid)
                    if left:
                        errors.append(f"disks of VM {vmid} left on storage {sid}: {', '.join(left)}")
        except VmbenchError as exc:
            destroyed = False
            errors.append(f"{res.name}: {exc.message}")
            if exc.hint:
                hints.append(exc.hint)
        if destroyed and rec and rec.entry:
            for owner in (self.entries, self.rbd):
                err = owner.release(rec.entry, res.name) if owner is not None else None
                if err:
                    errors.append(err)
        if errors:
            raise HypervisorError("cleanup incomplete: " + "; ".join(errors), "; ".join([*hints, "run `vmbench cleanup` to retry"]))
        self.vms.pop(res.name, None)

    def _find_own(self, name: str) -> tuple[int | None, str]:
        """The VM named ``name`` (a name with this run's random tag) if it is vmbench's."""
        for row in self.api().get("/cluster/resources", {"type": "vm"}) or []:
            if row.get("type") == "qemu" and row.get("name") == name:
                if "vmbench" in split_tags(row.get("tags")):
                    return int(row["vmid"]), str(row.get("node") or self.node)
                config = self.api().get(f"/nodes/{row.get('node')}/qemu/{row['vmid']}/config") or {}
                m = NAME_RE.match(name)
                if m and f"vmbench-run: {m.group(1)}" in str(config.get("description") or ""):
                    return int(row["vmid"]), str(row.get("node") or self.node)
                raise HypervisorError(f"VM {row['vmid']} is named {name} but has no vmbench tag; left alone")
        return None, self.node

    def _status(self, node: str, vmid: int) -> dict | None:
        try:
            return self.api().get(f"/nodes/{node}/qemu/{vmid}/status/current") or {}
        except PveApiError as exc:
            if exc.gone:
                return None
            raise

    def _destroy(self, vmid: int, node: str, name: str) -> None:
        """Stop and destroy VM ``vmid`` if it is still ``name``; waits (bounded) for a lock."""
        status = self._status(node, vmid)
        if status is None:
            return
        if status.get("name") not in (None, name):
            raise HypervisorError(f"VMID {vmid} is now {status.get('name')}, not {name}; left alone")
        started = self.clock()
        while status.get("lock"):
            if self.clock() - started > LOCK_WAIT:
                raise HypervisorError(f"VM {vmid} ({name}) is still locked ({status['lock']}) after {LOCK_WAIT:g}s; left in place",
                                      f"wait for its task to end, or `qm unlock {vmid}` on {node} if none runs; then `vmbench cleanup`")
            self.sleep(2.0)
            status = self._status(node, vmid)
            if status is None:
                return
        base = f"/nodes/{node}/qemu/{vmid}"
        if status.get("status") == "running":
            self.wait_task(self.api().post(f"{base}/status/stop"), 120, f"stopping {name} (VMID {vmid})")
        try:
            upid = self.api().delete(base, {"purge": True, "destroy-unreferenced-disks": True})
        except PveLockedError as exc:
            raise HypervisorError(f"VM {vmid} ({name}) is locked ({exc.lock}); left in place: {exc.message}",
                                  f"wait for its task to end, or `qm unlock {vmid}` on {node}; then `vmbench cleanup`") from None
        except PveApiError as exc:
            if exc.gone:
                return
            raise
        self.wait_task(upid, 600, f"destroying {name} (VMID {vmid})")

    def _disks_left(self, node: str, sid: str, vmid: int) -> list[str]:
        try:
            rows = self.api().get(f"/nodes/{node}/storage/{sid}/content", {"vmid": vmid}) or []
        except PveApiError as exc:
            if exc.gone:
                return []
            raise
        return sorted(str(r.get("volid")) for r in rows if int(r.get("vmid") or vmid) == vmid)

    # ---- leftovers ----------------------------------------------------------------------------

    def leftovers(self) -> list[Leftover]:
        """vmbench's VMs (name and tag), temporary storage entries, zvols and work directories."""
        out: list[Leftover] = []
        rows = [r for r in (self.api().get("/cluster/resources", {"type": "vm"}) or []) if r.get("type") == "qemu"]
        for row in rows:
            m = NAME_RE.match(str(row.get("name") or ""))
            if m and "vmbench" in split_tags(row.get("tags")):
                out.append(Leftover("vm", str(row["name"]), m.group(1), f"VMID {row.get('vmid')} on {row.get('node')}, {row.get('status')}"))
        for row in self.api().get("/storage") or []:
            m = ENTRY_RE.match(str(row.get("storage") or ""))
            kind = str(row.get("type", "zfspool"))
            if m and kind in ENTRY_TYPES:
                out.append(Leftover("storage", str(row["storage"]), m.group(1), f"temporary {kind} storage (pool {row.get('pool')})"))
        if self.entries is not None:
            vmids = {int(r.get("vmid", -1)) for r in rows}
            for zvol, vmid, tag in self.entries.zvol_leftovers():
                if vmid not in vmids:
                    out.append(Leftover("zvol", zvol, tag, f"vmbench:run={tag}; VM {vmid} is gone"))
        ceph = self.storage.ceph()
        if ceph is not None:  # rados bench objects of a killed run (and a killed preflight's probe image)
            out += ceph.leftovers()
        return out + work_leftovers(self.host, self.paths.work)

    def remove_leftover(self, item: Leftover) -> None:
        if item.kind == "vm":
            self._remove_leftover_vm(item.name)
        elif item.kind == "storage":
            self._remove_leftover_entry(item.name, item.run_tag)
        elif item.kind == "zvol" and self.entries is not None:
            vmid = int(item.name.rsplit("/", 1)[-1].split("-")[1])
            if any(int(r.get("vmid", -1)) == vmid for r in self.api().get("/cluster/resources", {"type": "vm"}) or []):
                raise HypervisorError(f"{item.name} belongs to VM {vmid}, which exists; left alone")
            self.entries.destroy_zvol(item.name, item.run_tag)
        elif item.kind in ("rbd image", BENCH_KIND):
            ceph = self.storage.ceph()
            if ceph is not None:
                ceph.delete_path(item.name)  # checked there: vmbench's name and metadata, or its bench namespace
        elif item.kind == "directory":
            remove_work_leftover(self.host, self.paths.work, item)

    def _vm_row(self, name: str) -> dict | None:
        for row in self.api().get("/cluster/resources", {"type": "vm"}) or []:
            if row.get("type") == "qemu" and row.get("name") == name:
                return row
        return None

    def _remove_leftover_vm(self, name: str) -> None:
        row = self._vm_row(name)
        if row is None:
            return
        m = NAME_RE.match(name)
        if not m or "vmbench" not in split_tags(row.get("tags")):
            raise HypervisorError(f"VM {row.get('vmid')} ({name}) has no vmbench tag; left alone")
        self._destroy(int(row["vmid"]), str(row.get("node") or self.node), name)

    def _remove_leftover_entry(self, sid: str, run_tag: str) -> None:
        """A temporary storage entry: first the run's VMs and orphan volumes on it, then the entry."""
        m = ENTRY_RE.match(sid)
        if not m or m.group(1) != run_tag:
            raise HypervisorError(f"{sid} is not a vmbench storage entry; left alone")
        try:
            entry = self.api().get(f"/storage/{sid}") or {}
        except PveApiError as exc:
            if exc.gone:
                return
            raise
        node = (str(entry.get("nodes") or self.node).split(",") or [self.node])[0]
        for vol in self.api().get(f"/nodes/{node}/storage/{sid}/content") or []:
            volid, vmid = str(vol.get("volid")), int(vol.get("vmid") or 0)
            row = next((r for r in self.api().get("/cluster/resources", {"type": "vm"}) or []
                        if r.get("type") == "qemu" and int(r.get("vmid", -1)) == vmid), None)
            if row is not None:
                owner = NAME_RE.match(str(row.get("name") or ""))
                if not owner or owner.group(1) != run_tag or "vmbench" not in split_tags(row.get("tags")):
                    raise HypervisorError(f"storage {sid} holds {volid} of VM {vmid} ({row.get('name')}), not this run's; left alone")
                self._destroy(vmid, str(row.get("node") or node), str(row["name"]))
            else:  # a disk whose VM is gone: free it through PVE (zfs destroy of the zvol)
                self.wait_task(self.api().delete(f"/nodes/{node}/storage/{sid}/content/{volid}"), TASK_TIMEOUT, f"removing {volid}")
        delete_entry(self.api(), sid)
