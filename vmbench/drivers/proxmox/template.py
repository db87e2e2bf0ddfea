"""vmbench's own Proxmox template (``vmbench images push SCENARIO``): vmbench's image, as a
disk that boots by itself, imported into a new VM on the scenario's node and storage, with
the guest agent enabled, converted to a template, named and tagged as vmbench's, the recipe
hash in its description; reused while the hash matches, replaced only when asked.

The request sequence (paths under ``/api2/json``; every task waited on by its UPID):

1. ``GET /cluster/resources?type=vm``: the scenario's template (by name or VMID): vmbench's
   and current -> reused, nothing else happens; vmbench's but older -> replaced only with
   ``replace`` (``DELETE /nodes/N/qemu/V?purge=1&destroy-unreferenced-disks=1``); not
   vmbench's -> refused, never touched.
2. ``GET /nodes/N/storage?content=import&enabled=1``: a storage that takes imports (content
   ``import``); ``GET /storage/S`` for its directory; the disk is copied there over SSH
   (SFTP, ``S/import/<file>.part`` renamed when complete) unless
   ``GET /nodes/N/storage/S/content?content=import`` already lists it with its size.
   An API token may not import from a file path ("Only root can pass arbitrary filesystem
   paths"): the source is the volume ``S:import/<file>``, whose content type qemu-server
   accepts for ``import-from`` (``images`` or ``import``).
3. ``GET /cluster/nextid`` (unless the scenario names a VMID), ``POST /nodes/N/qemu`` with
   ``virtio0=STORAGE:0,import-from=S:import/<file>`` (the only form qemu-server takes;
   ``format=qcow2`` on file storages so linked clones work), ``agent=1``, ``boot=order=virtio0``,
   tags ``vmbench;vmbench-template``, the description; ``GET .../config``: the disk is on
   STORAGE and ``import-from`` is not kept.
4. ``POST /nodes/N/qemu/V/template``, ``GET .../config``: ``template: 1``.
5. The uploaded file is removed over SSH (the template holds its own copy).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any, Mapping

from ... import __version__
from ...errors import HypervisorError, PreflightError
from ...images import RecipeError, image_hash, load_recipe
from ...images.bootdisk import LAYOUT_VERSION
from ...progress import Progress
from ...transport import ops
from ...units import human_size
from .config import FILE_STORAGES, NO_LINKED_CLONE, agent_enabled, parse_disk, storage_of
from .cluster import config_shared, template_volumes
from ..base import Check
from .errors import PveApiError, PvePermissionError
from .node import PveNode
from .recipe import grant_hint
from .removal import split_tags
from .rights import Setup, Step, hidden_storages, major_of, needs
from .tokenrights import RightsReport, read_report

TEMPLATE_TAG = "vmbench-template"
TAGS = f"vmbench;{TEMPLATE_TAG}"
ROOT_DISK = "virtio0"
MARKER_RE = re.compile(r"^vmbench-template: (?P<recipe>[\w.-]+) (?P<hash>[0-9a-f]{64}) layout (?P<layout>[\w.-]+)$", re.M)
CREATE_TIMEOUT = 3600.0  # the import copies the whole disk
TASK_TIMEOUT = 300.0


@dataclass(frozen=True)
class TemplateIdentity:
    """What a vmbench template was made from: recipe, image (recipe) hash, disk layout."""

    recipe: str
    hash: str
    layout: str

    @property
    def marker(self) -> str:
        return f"vmbench-template: {self.recipe} {self.hash} layout {self.layout}"

    @property
    def short(self) -> str:
        return f"{self.recipe} {self.hash[:12]}"


class TemplateState(Enum):
    CURRENT = "current"  # vmbench's, from the recipe as it is now
    OUTDATED = "outdated"  # vmbench's, from another recipe hash or disk layout
    UNFINISHED = "unfinished"  # vmbench's, not (yet) converted to a template
    FOREIGN = "not vmbench's"


def template_name(recipe: str) -> str:
    return f"vmbench-{recipe}"


def import_file(identity: TemplateIdentity) -> str:
    """The uploaded disk's name in the storage's ``import/`` directory."""
    return f"vmbench-{identity.recipe}-{identity.hash[:12]}-l{identity.layout}.qcow2"


def description(identity: TemplateIdentity, created: str, version: str) -> str:
    return (f"vmbench's template: image {identity.recipe} (recipe hash {identity.hash}, disk layout {identity.layout}), "
            f"made {created} by vmbench {version} (`vmbench images push`).\n"
            "vmbench makes linked clones of it; `vmbench images push SCENARIO --replace` makes it anew after the recipe changed.\n"
            f"{identity.marker}\n")


def read_identity(config: Mapping[str, Any]) -> TemplateIdentity | None:
    """The identity a VM's config carries, if it is vmbench's (tag and marker both)."""
    if TEMPLATE_TAG not in split_tags(config.get("tags")):
        return None
    m = MARKER_RE.search(str(config.get("description") or ""))
    return TemplateIdentity(m.group("recipe"), m.group("hash"), m.group("layout")) if m else None


def template_state(config: Mapping[str, Any], want: TemplateIdentity) -> TemplateState:
    got = read_identity(config)
    if got is None:
        return TemplateState.FOREIGN
    if str(config.get("template", 0)) not in ("1", "True", "true"):
        return TemplateState.UNFINISHED
    return TemplateState.CURRENT if got == want else TemplateState.OUTDATED


def disk_option(storage: str, storage_type: str, source: str) -> str:
    """``STORAGE:0,import-from=SOURCE`` (qcow2 on file storages: linked clones need it)."""
    return f"{storage}:0,import-from={source}" + (",format=qcow2" if storage_type in FILE_STORAGES else "")


def create_params(vmid: int, name: str, identity: TemplateIdentity, storage: str, storage_type: str, source: str,
                  created: str, version: str = __version__) -> dict[str, Any]:
    """``POST /nodes/N/qemu``: one imported virtio disk, the agent, a serial console."""
    return {"vmid": vmid, "name": name, "description": description(identity, created, version), "tags": TAGS,
            "agent": "1", "ostype": "l26", "cores": 1, "memory": 512, "scsihw": "virtio-scsi-single",
            "serial0": "socket", ROOT_DISK: disk_option(storage, storage_type, source), "boot": f"order={ROOT_DISK}"}


@dataclass(frozen=True)
class PushResult:
    vmid: int
    name: str
    identity: TemplateIdentity
    made: bool  # False: the existing template was current and kept
    replaced: int | None = None  # the VMID of the template it replaced
    uploaded: bool = False
    node: str | None = None  # where it is, when not on the node pushed for (a shared template)


class TemplatePush:
    """``vmbench images push`` on one node (a :class:`~.node.PveNode`: API, SSH, settings)."""

    def __init__(self, node: PveNode, progress: Progress) -> None:
        self.n = node
        self.progress = progress
        self.api = node.api
        self.where = node.node

    def run(self, identity: TemplateIdentity, disk: Path, *, replace: bool = False, import_storage: str | None = None) -> PushResult:
        try:
            return self._run(identity, disk, replace, import_storage)
        except PvePermissionError as exc:
            raise HypervisorError(f"making the template: {exc.message}", exc.hint) from None

    def _run(self, identity: TemplateIdentity, disk: Path, replace: bool, import_storage: str | None) -> PushResult:
        cfg = self.n.cfg
        want = cfg.template
        name = want if isinstance(want, str) else template_name(identity.recipe)
        self.progress.step(f"looking for template {want} on {cfg.url}")
        self._version()
        rows = [r for r in (self.api().get("/cluster/resources", {"type": "vm"}) or []) if r.get("type") == "qemu"]
        row = self._find(want, rows)
        replaced = None
        shared = self._shared_elsewhere(want, identity, rows) if row is None and isinstance(want, str) else None
        if shared is not None:  # one template on shared storage serves every node (clones with target)
            self.progress.step(f"template {shared['vmid']} ({name}) on node {shared.get('node')} is vmbench's {identity.short}, "
                               f"current, on shared storage: kept for node {self.where} too")
            return PushResult(int(shared["vmid"]), name, identity, made=False, node=str(shared.get("node")))
        if row is not None:
            vmid = int(row["vmid"])
            config = self.api().get(f"/nodes/{row.get('node')}/qemu/{vmid}/config") or {}
            state = template_state(config, identity)
            got = read_identity(config)
            if state is TemplateState.CURRENT:
                if row.get("node") != self.where:
                    raise PreflightError(f"template {vmid} ({name}) is on node {row.get('node')}, not {self.where}",
                                         f"set hypervisor.node: {row.get('node')} (VMs run where the template is)")
                self.progress.step(f"template {vmid} ({name}) is vmbench's {identity.short}, current: kept")
                return PushResult(vmid, str(row.get("name") or name), identity, made=False)
            if state is TemplateState.FOREIGN:
                raise PreflightError(f"VM {vmid} ({row.get('name')}) exists and is not vmbench's template; vmbench leaves it alone",
                                     "name another template in hypervisor.template (vmbench makes it), or use this one as it is")
            if state is TemplateState.OUTDATED and not replace:
                assert got is not None
                raise PreflightError(f"template {vmid} ({name}) is vmbench's {got.short} (disk layout {got.layout}), not the "
                                     f"current {identity.short} (disk layout {identity.layout})",
                                     "add --replace to make it anew (its linked clones must be gone first)")
            replaced = vmid
        # read only, before anything changes: the target storage, the import storage, the token's rights
        storage_type = self._check_target_storage()
        sid = self._import_storage(import_storage)
        report = self.rights(sid)
        if report is not None and report.required:
            raise report.error("images push")
        path = self._import_dir(sid)
        if replaced is not None:
            self._destroy(replaced, str(row.get("node") or self.where) if row else self.where, name)
        volid, uploaded = self._upload(identity, disk, sid, path)
        vmid = want if isinstance(want, int) else replaced or int(self.api().get("/cluster/nextid"))
        params = create_params(vmid, name, identity, cfg.storage, storage_type, volid, time.strftime("%Y-%m-%dT%H:%M:%S%z"))
        self.progress.step(f"creating VM {vmid} ({name}) on {cfg.storage}, its disk imported from {volid}")
        upid = self.api().post(f"/nodes/{self.where}/qemu", params)
        self.n.wait_task(upid, CREATE_TIMEOUT, f"creating template VM {vmid} ({name}) with its disk imported from {volid}")
        base = f"/nodes/{self.where}/qemu/{vmid}"
        config = self.api().get(f"{base}/config") or {}
        disk_volid, opts = parse_disk(str(config.get(ROOT_DISK, "")))
        if storage_of(disk_volid) != cfg.storage or "import-from" in opts:
            raise HypervisorError(f"VM {vmid}: after the import its {ROOT_DISK} is {config.get(ROOT_DISK, 'missing')}, "
                                  f"not a disk on {cfg.storage}")
        if not agent_enabled(config.get("agent")):
            raise HypervisorError(f"VM {vmid}: the guest agent is not enabled after creating it (agent: {config.get('agent')})")
        self.progress.step(f"converting VM {vmid} ({name}) to a template")
        self.n.wait_task(self.api().post(f"{base}/template"), TASK_TIMEOUT, f"converting VM {vmid} ({name}) to a template")
        config = self.api().get(f"{base}/config") or {}
        if template_state(config, identity) is not TemplateState.CURRENT:
            raise HypervisorError(f"VM {vmid} ({name}) is not a template after converting it (template: {config.get('template')})")
        if uploaded:
            ops.remove_file(self.n.host, f"{path}/import/{import_file(identity)}")
        return PushResult(vmid, name, identity, made=True, replaced=replaced, uploaded=uploaded)

    def _shared_elsewhere(self, name: str, identity: TemplateIdentity, rows: list[dict]) -> dict | None:
        """vmbench's current template ``name`` on another node (of the cluster's VM ``rows``)
        with every volume on shared storage (a clone onto this node with target works), or None."""
        for row in [r for r in rows if r.get("name") == name and r.get("node") != self.where]:
            try:
                config = self.api().get(f"/nodes/{row.get('node')}/qemu/{row['vmid']}/config") or {}
                sids = {storage_of(v) for v in template_volumes(config).values()}
                if template_state(config, identity) is TemplateState.CURRENT and sids and all(
                        config_shared(self.api().get(f"/storage/{sid}") or {}, "") for sid in sids):
                    return row
            except PveApiError as exc:  # cannot tell (the token may not read it): this node gets its own
                self.progress.step(f"template {row['vmid']} on node {row.get('node')}: cannot tell whether it is shared "
                                   f"({exc.message}); making one on {self.where}")
        return None

    def _find(self, want: int | str, rows: list[dict]) -> dict | None:
        """The VM ``want`` names among the cluster's VM ``rows``: by VMID anywhere; by name, on
        this node (each node of a cluster on local storage has its own template of that name)."""
        found = [r for r in rows if (int(r.get("vmid", -1)) == want if isinstance(want, int)
                                     else r.get("name") == want and r.get("node") == self.where)]
        if len(found) > 1:
            raise PreflightError(f"{len(found)} VMs are named {want} (VMIDs {', '.join(str(r.get('vmid')) for r in found)})",
                                 "name the template by a name no other VM has (hypervisor.template)")
        return found[0] if found else None

    def _destroy(self, vmid: int, node: str, name: str) -> None:
        self.progress.step(f"removing vmbench's older template {vmid} ({name})")
        try:
            upid = self.api().delete(f"/nodes/{node}/qemu/{vmid}", {"purge": True, "destroy-unreferenced-disks": True})
            self.n.wait_task(upid, 600, f"removing the older template {vmid} ({name})")
        except PveApiError as exc:
            raise HypervisorError(f"cannot remove the older template {vmid} ({name}): {exc.message}",
                                  "linked clones of it (vmbench's or yours) keep it; remove them first") from None

    def _check_target_storage(self) -> str:
        """The scenario's storage holds images and can make linked clones (when asked)."""
        self.n.storage.prepare(self.progress)
        kind = self.n.storage.type
        if self.n.cfg.clone == "linked" and kind in NO_LINKED_CLONE:
            raise PreflightError(f"storage {self.n.cfg.storage} ({kind}) cannot make linked clones of a template",
                                 "set hypervisor.storage to a zfspool, lvmthin, rbd or directory storage, or hypervisor.clone: full")
        return kind

    def rights(self, import_storage: str | None) -> RightsReport | None:
        """The token's rights for the push (:mod:`.rights`, step images push); None when PVE does not say."""
        cfg = self.n.cfg
        template = cfg.template if isinstance(cfg.template, int) else None  # a name: the next free VMID
        setup = Setup(node=self.where, storage=cfg.storage, template=template, import_storage=import_storage)
        try:
            return read_report(self.api(), cfg.token_id, major_of(self.n.pve_version or self._version()), setup, [Step.PUSH])
        except PveApiError as exc:
            self.progress.step(f"cannot read the token's rights ({exc.message}): not checked before the push")
            return None

    def _version(self) -> str | None:
        self.n.pve_version = str((self.api().get("/version") or {}).get("version") or "") or None
        return self.n.pve_version

    def rights_line(self) -> Check | None:
        """``vmbench doctor``'s line about what a push would need (a warning when something
        is missing: a run of an existing template does not need it)."""
        name = "token rights (images push)"
        sid = self._import_storage(None)
        report = self.rights(sid)
        if report is None:
            return None
        line = report.check()
        if line.status == "ok":
            return Check(name, "ok", f"{self.n.cfg.token_id} may make vmbench's template (import storage {sid})")
        return Check(name, "warn", line.detail, line.hint)

    def _import_storage(self, wanted: str | None) -> str:
        """The storage on the node that takes imports (content ``import``) the push uploads to:
        ``wanted``, the scenario's storage, or the first.  None listed: why, naming a storage
        the token's ACLs hide (an ACL on it without Datastore.Audit or AllocateSpace replaces
        the one inherited, and the storage lists leave it out)."""
        rows = self.api().get(f"/nodes/{self.where}/storage", {"content": "import", "enabled": True}) or []
        ids = sorted(str(r.get("storage")) for r in rows if r.get("active", 1) in (1, "1", True))
        hidden = self._hidden() if (wanted is not None and wanted not in ids) or not ids else []
        if hidden and (wanted in hidden or not ids):
            sid = wanted if wanted in hidden else hidden[0]
            raise PreflightError(f"the token {self.n.cfg.token_id} cannot see storage {sid}: an ACL on /storage/{sid} gives "
                                 "it neither Datastore.Audit nor Datastore.AllocateSpace",
                                 f"that ACL replaces what the token inherits for /storage/{sid}; give it one role with all "
                                 "the push needs there (vmbench setup proxmox SCENARIO prints it):\n  "
                                 + "\n  ".join(grant_hint([f"/storage/{sid}"], needs(
                                     Setup(self.where, self.n.cfg.storage, import_storage=sid), [Step.PUSH],
                                     major_of(self.n.pve_version) or 9),
                                     self.n.cfg.token_id)))
        if wanted is not None and wanted not in ids:
            raise PreflightError(f"storage {wanted} on node {self.where} does not take imports (content 'import'), or is not active",
                                 f"add 'import' to its content: pvesm set {wanted} --content <its content>,import")
        if not ids:
            raise PreflightError(f"no storage on node {self.where} takes imports (content 'import'): vmbench uploads the "
                                 "template's disk to one", "add 'import' to the content of a directory storage: pvesm set "
                                 "local --content iso,vztmpl,backup,import (keep what it has), or in Datacenter > Storage; "
                                 "the token needs Datastore.Audit on it to see it")
        return wanted or (self.n.cfg.storage if self.n.cfg.storage in ids else ids[0])

    def _hidden(self) -> list[str]:
        try:
            return hidden_storages(self.api().get("/access/permissions") or {})
        except PveApiError:
            return []

    def _import_dir(self, sid: str) -> str:
        """The import storage's directory (``GET /storage/SID``: Datastore.Allocate there)."""
        try:
            entry = self.api().get(f"/storage/{sid}") or {}
        except PvePermissionError as exc:
            raise PreflightError(f"reading where storage {sid} keeps its files: {exc.message}",
                                 f"the token needs Datastore.Allocate on /storage/{sid}: vmbench doctor SCENARIO lists "
                                 "what it lacks and the pveum lines that grant it") from None
        path = str(entry.get("path") or "")
        if not path.startswith("/"):
            raise PreflightError(f"storage {sid} ({entry.get('type')}) has no directory on the node to upload into",
                                 "pick a directory storage that takes imports (--import-storage)")
        return path.rstrip("/")

    def _upload(self, identity: TemplateIdentity, disk: Path, sid: str, path: str) -> tuple[str, bool]:
        """The disk as the volume ``SID:import/<file>``: copied over SSH unless it is there."""
        fname = import_file(identity)
        volid = f"{sid}:import/{fname}"
        size = disk.stat().st_size
        listed = self.api().get(f"/nodes/{self.where}/storage/{sid}/content", {"content": "import"}) or []
        if any(str(v.get("volid")) == volid and int(v.get("size") or -1) == size for v in listed):
            self.progress.step(f"{volid} is already on {self.where}")
            return volid, False
        dest = f"{path}/import/{fname}"
        host = self.n.host
        self.progress.step(f"uploading {disk.name} ({human_size(size)}) to {host.name}:{dest}")
        ops.mkdir(host, f"{path}/import", 0o755)

        def tick(done: int, total: int) -> None:
            self.progress.status(f"uploading: {human_size(done)} of {human_size(total)}")

        host.put_file(str(disk), dest + ".part", mode=0o644, progress=tick)
        host.run(["mv", "-f", dest + ".part", dest], timeout=120)
        listed = self.api().get(f"/nodes/{self.where}/storage/{sid}/content", {"content": "import"}) or []
        if not any(str(v.get("volid")) == volid for v in listed):
            raise HypervisorError(f"uploaded {dest}, but storage {sid} does not list {volid}",
                                  f"is {path} the directory of storage {sid} on node {self.where}?")
        return volid, True


def wanted_identity(recipe: str) -> TemplateIdentity:
    """The identity a template of ``recipe`` has when made now (no build: the recipe's hash)."""
    return TemplateIdentity(recipe, image_hash(load_recipe(recipe)), LAYOUT_VERSION)


def template_check_line(config: Mapping[str, Any], vmid: int | None, recipe: str) -> tuple[str, str, str]:
    """``vmbench doctor``'s (status, detail, hint) about the scenario's template."""
    got = read_identity(config)
    name = f"template {vmid} ({config.get('name', '?')})"
    if got is None:
        return ("warn", f"{name} is not vmbench's: the guest's tools are checked at the first boot of a run",
                "`vmbench images push SCENARIO` makes vmbench's own template (set hypervisor.template to a new name first)")
    try:
        want = wanted_identity(recipe)
    except (RecipeError, OSError) as exc:
        return ("warn", f"{name} is vmbench's {got.short}; cannot tell whether it is current ({exc})", "")
    state = template_state(config, want)
    if state is TemplateState.CURRENT:
        return ("ok", f"{name} is vmbench's {got.short}, current", "")
    if state is TemplateState.UNFINISHED:
        return ("FAIL", f"{name} is vmbench's but was never converted to a template (an interrupted push)",
                "`vmbench images push SCENARIO` makes it anew")
    return ("warn", f"{name} is vmbench's {got.short} (layout {got.layout}), not the current {want.short} (layout {want.layout})",
            "`vmbench images push SCENARIO --replace` makes it anew from the current recipe")
