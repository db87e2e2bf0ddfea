"""State of the fake node: storages, volumes (plain files), VMs (configs as PVE stores them)
and tasks (UPIDs that stay running for a few polls)."""

from __future__ import annotations

import hashlib
import itertools
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from .backends import BackendError, DriveView, VmView
from .perms import Access, InvalidPrivilege, PermissionDenied
from .validate import Checker, FormatDie, perl_str, print_property_string

DIR_TYPES = {"dir", "nfs", "cifs", "btrfs", "cephfs", "glusterfs"}  # volumes are files <path>/images/<vmid>/<name>
LINKED_CLONE_TYPES = DIR_TYPES | {"zfspool", "lvmthin", "rbd"}
#: storage types PVE always treats as shared (pve-storage Plugin.pm @SHARED_STORAGE)
SHARED_TYPES = {"iscsi", "nfs", "cifs", "rbd", "cephfs", "iscsidirect", "zfs", "drbd", "pbs", "glusterfs"}
DRIVE_RE = re.compile(r"^(ide|sata|scsi|virtio)(\d+)$")
NEW_DISK_RE = re.compile(r"^(([^/:\s]+):)?(\d+(\.\d+)?)$")
IMPORT_RE = re.compile(r"^import/([^/\s]+\.(ova|ovf|qcow2|raw|vmdk))$")  # pve-storage Plugin.pm parse_volname
CONTENT = {"dir": {"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "none", "import"},
           "zfspool": {"images", "rootdir"}, "rbd": {"images", "rootdir"}}
STORAGE_OPTIONS = {  # pve-storage <Plugin>::options (required ones without 'optional')
    "dir": {"path": True, "content-dirs": False, "nodes": False, "shared": False, "disable": False,
            "prune-backups": False, "max-protected-backups": False, "content": False, "format": False,
            "mkdir": False, "create-base-path": False, "create-subdirs": False, "is_mountpoint": False,
            "bwlimit": False, "preallocation": False, "snapshot-as-volume-chain": False},
    "zfspool": {"pool": True, "blocksize": False, "sparse": False, "nodes": False, "disable": False,
                "content": False, "bwlimit": False, "mountpoint": False},
    "rbd": {"nodes": False, "disable": False, "monhost": False, "pool": False, "data-pool": False, "namespace": False,
            "username": False, "content": False, "krbd": False, "keyring": False, "bwlimit": False},
}


class ApiError(Exception):
    """An HTTP error as PVE sends it: ``die "msg\\n"`` -> 500; raise_param_exc -> 400."""

    def __init__(self, message: str, status: int = 500, errors: dict | None = None) -> None:
        super().__init__(message)
        self.message = message if message.endswith("\n") else message + "\n"
        self.status = status
        self.errors = errors


def die(message: str, status: int = 500) -> ApiError:
    return ApiError(message, status)


def param_exc(errors: dict) -> ApiError:
    return ApiError("Parameter verification failed.", 400, errors)


class TaskError(Exception):
    """A task ends with this text as its exitstatus."""


@dataclass
class Storage:
    id: str
    type: str
    config: dict
    files: Path  # where its volume files live

    @property
    def path_based(self) -> bool:
        return self.type in DIR_TYPES

    @property
    def content(self) -> set[str]:
        return set(str(self.config.get("content", "")).split(",")) - {""}

    def default_format(self) -> str:
        return str(self.config.get("format", "raw")) if self.path_based else "raw"

    def volume_file(self, vmid: int, name: str) -> Path:
        return self.files / "images" / str(vmid) / name if self.path_based else self.files / name


@dataclass
class Volume:
    path: Path
    name: str  # vm-100-disk-1 (block) or vm-100-disk-1.raw (dir)
    vmid: int
    fmt: str
    size: int
    base: bool = False
    parent: "Volume | None" = None
    ctime: int = field(default_factory=lambda: int(time.time()))
    #: where the content came from: "image" (the backend's guest image, booted with its own
    #: kernel), "import" (a copy of an imported file: it boots by itself), "blank"
    origin: str = "blank"
    vtype: str = "images"  # or "import": a file in the storage's import/ directory

    def volname(self, storage: Storage) -> str:
        if self.vtype in ("import", "iso"):
            return f"{self.vtype}/{self.name}"
        own = f"{self.vmid}/{self.name}" if storage.path_based else self.name
        if self.parent is None:
            return own
        return f"{self.parent.volname(storage)}/{own}"


@dataclass
class Vm:
    vmid: int
    config: dict
    node: str = ""  # the node whose config directory holds it ("": the fake's first node)
    running: bool = False
    pid: int | None = None
    started: float = 0.0
    run_config: dict | None = None
    agent_calls: int = 0


@dataclass
class Task:
    upid: str
    node: str
    pid: int
    pstart: int
    starttime: int
    type: str
    id: str
    user: str
    action: Callable[["Task"], None] | None
    polls_left: int
    status: str = "running"
    exitstatus: str | None = None
    log: list[str] = field(default_factory=list)
    warnings: int = 0
    forced: str | None = None

    def warn(self, msg: str) -> None:
        self.log.append(f"WARN: {msg}")
        self.warnings += 1

    def finish(self) -> None:
        if self.status != "running":
            return
        try:
            if self.forced and not self.forced.startswith("WARNINGS"):
                raise TaskError(self.forced)
            if self.action is not None:
                self.action(self)
            if self.forced:
                self.warn("fakepve: forced " + self.forced)
        except (TaskError, ApiError, BackendError, FormatDie, OSError) as exc:
            text = exc.message if isinstance(exc, (ApiError, FormatDie)) else str(exc)
            if isinstance(exc, ApiError) and exc.status == 403:  # PVE::Exception in a worker: "403 Permission check failed (...)"
                text = f"403 {text}"
            text = text.strip().splitlines()[-1] if text.strip() else "unknown error"
            self.log.append(f"TASK ERROR: {text}")
            self.exitstatus = text
        else:
            if self.warnings:
                self.log.append(f"TASK WARNINGS: {self.warnings}")
                self.exitstatus = f"WARNINGS: {self.warnings}"
            else:
                self.log.append("TASK OK")
                self.exitstatus = "OK"
        self.status = "stopped"


class State:
    """The node's data; the API handlers (``handlers.py``) operate on it under one lock."""

    def __init__(self, *, version: str, node: str, root: Path, backend: Any, checker: Checker, api: Any,
                 user: str, task_polls: int, agent_pings: int, task_outcomes: dict | None,
                 nodes: tuple[str, ...] = ()) -> None:
        self.version = version
        self.node = node
        #: the cluster's nodes in order -> online (one node: a standalone node, no cluster)
        self.nodes: dict[str, bool] = {n: True for n in (nodes or (node,))}
        self.root = root
        self.backend = backend
        self.checker = checker
        self.api = api
        self.user = user
        self.task_polls = task_polls
        self.agent_pings = agent_pings
        self.task_outcomes = {k: (list(v) if isinstance(v, (list, tuple)) else v) for k, v in (task_outcomes or {}).items()}
        self.storages: dict[str, Storage] = {}
        #: rbd storages: their pool's images (tests.fakepve.rbd), shared by entries on the same pool and monitors
        self.rbd_images: dict[str, Any] = {}
        self.volumes: dict[Path, Volume] = {}
        self.vms: dict[int, Vm] = {}
        self.tasks: dict[str, Task] = {}
        self._pids = itertools.count(0x1F000)
        self._pstart = int(time.monotonic() * 100) & 0xFFFFFFF
        self.config_props = api.method("POST", "/nodes/{node}/qemu/{vmid}/config").parameters["properties"]
        self.access = Access(version)  # users, tokens, roles, ACLs (:mod:`.perms`)
        self.fingerprint = ""

    # ---- permission checks made inside a handler (rpcenv->check), as ``user`` ------------

    def allowed(self, path: str, privs: Any, *, any_of: bool = False, user: str | None = None) -> bool:
        try:
            return self.access.check(user or self.user, path, privs, any_of=any_of, noerr=True)
        except InvalidPrivilege as exc:
            raise die(str(exc)) from None

    def check_priv(self, path: str, *privs: str, any_of: bool = False, user: str | None = None) -> None:
        """rpcenv->check (``any_of``: check_any): a 403 naming the path and privilege(s)."""
        try:
            self.access.check(user or self.user, path, privs, any_of=any_of)
        except PermissionDenied as exc:
            raise ApiError(f"Permission check failed ({exc})", 403) from None
        except InvalidPrivilege as exc:
            raise die(str(exc)) from None

    def check_volume_access(self, st: "Storage", vol: "Volume", vmid: int | None = None, user: str | None = None) -> None:
        """PVE::Storage::check_volume_access (pve-storage): Datastore.Allocate on the storage
        is enough; an ISO/template/import file needs AllocateSpace or Audit there; a VM's own
        volume (``vmid``) nothing more; another VM's disk Audit there and VM.Config.Disk on it."""
        sid = f"/storage/{st.id}"
        if self.allowed(sid, ["Datastore.Allocate"], user=user):
            return
        if vol.vtype in ("iso", "vztmpl", "import"):
            self.check_priv(sid, "Datastore.AllocateSpace", "Datastore.Audit", any_of=True, user=user)
        elif vmid is not None and vol.vmid == vmid:
            return
        elif vol.vmid:
            self.check_priv(sid, "Datastore.Audit", user=user)
            self.check_priv(f"/vms/{vol.vmid}", "VM.Config.Disk", user=user)
        else:
            raise die(f"missing privileges to access {self.volid(st, vol)}")

    # ---- storages and volumes ------------------------------------------------------------

    def storage(self, storeid: str) -> Storage:
        st = self.storages.get(storeid)
        if st is None:
            raise die(f"storage '{storeid}' does not exist")
        return st

    def files_dir(self, storeid: str, stype: str, config: dict) -> Path:
        if stype == "zfspool":
            return self.root / "zvol" / str(config["pool"])
        if stype == "rbd":  # no files: the volumes' keys (their images are in the pool)
            return self.root / "rbd" / storeid
        return self.root / "storage" / storeid

    def add_storage(self, storeid: str, stype: str, config: dict, files: Path | None = None, images: Any = None) -> Storage:
        files = files or self.files_dir(storeid, stype, config)
        files.mkdir(parents=True, exist_ok=True, mode=0o755)
        st = Storage(storeid, stype, {"type": stype, **config}, files)
        if stype == "rbd":
            from . import rbd

            same = next((self.rbd_images[o.id] for o in self.storages.values() if o.type == "rbd"
                         and (rbd.pool(o.config), rbd.monitors(o.config)) == (rbd.pool(config), rbd.monitors(config))), None)
            self.rbd_images[storeid] = images or same or rbd.MemoryImages()
        self.storages[storeid] = st
        return st

    def storage_of(self, vol: "Volume") -> Storage | None:
        return next((st for st in self.storages.values() if vol.path.is_relative_to(st.files)), None)

    def path_text(self, st: Storage | None, vol: "Volume") -> str:
        """The volume's path as PVE::Storage::path gives it (an rbd image: QEMU's rbd: filename, or krbd's device)."""
        if st is not None and st.type == "rbd":
            from . import rbd

            return rbd.volume_path(st.id, st.config, vol.name)
        return str(vol.path)

    def create_image(self, st: Storage, path: Path, size: int, fmt: str, backing: str | None = None) -> None:
        """A new volume's content: an RBD image in the storage's pool, else the backend's file."""
        if st.type == "rbd":
            if backing is not None:
                raise TaskError("the fake's rbd storage holds no linked clones")
            self.rbd_images[st.id].create(path.name, size)
        else:
            self.backend.create_volume(str(path), size, fmt, backing)

    def remove_image(self, vol: "Volume") -> None:
        st = self.storage_of(vol)
        if st is not None and st.type == "rbd":
            self.rbd_images[st.id].remove(vol.name)
        else:
            self.backend.remove_volume(str(vol.path))

    def volid(self, storage: Storage, vol: Volume) -> str:
        return f"{storage.id}:{vol.volname(storage)}"

    def resolve(self, volid: str) -> tuple[Storage, Volume]:
        m = re.fullmatch(r"([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)", volid, re.I)
        if not m:
            raise die(f"unable to parse volume ID '{volid}'")
        st = self.storage(m.group(1))
        if IMPORT_RE.match(m.group(2)):
            return st, self.import_volume(st, m.group(2).split("/", 1)[1])
        if st.path_based and re.fullmatch(r"iso/[^/\s]+\.(iso|img)", m.group(2)):
            name = m.group(2).split("/", 1)[1]
            path = st.files / "template" / "iso" / name
            if not path.is_file():
                raise die(f"volume '{volid}' does not exist")
            return st, Volume(path, name, 0, "iso", path.stat().st_size, vtype="iso")
        parts = m.group(2).split("/")
        if st.path_based:
            if len(parts) < 2 or not parts[-2].isdigit():
                raise die(f"unable to parse directory volume name '{m.group(2)}'")
            path = st.volume_file(int(parts[-2]), parts[-1])
        else:
            path = st.volume_file(0, parts[-1])
        vol = self.volumes.get(path)
        if vol is None:
            raise die(f"volume '{volid}' does not exist")
        return st, vol

    def import_volume(self, st: Storage, name: str) -> Volume:
        """``STORAGE:import/NAME``: a file in a directory storage's ``import/`` (PVE lists
        and imports it whatever its size; the volume's size is the file's virtual size)."""
        if not st.path_based:
            raise die(f"unable to parse volume name 'import/{name}'")
        path = st.files / "import" / name
        if not path.is_file():
            raise die(f"volume '{st.id}:import/{name}' does not exist")
        fmt = name.rsplit(".", 1)[-1]
        return Volume(path, name, 0, fmt, path.stat().st_size, ctime=int(path.stat().st_mtime), vtype="import")

    def import_files(self, st: Storage) -> list[Volume]:
        d = st.files / "import"
        if not st.path_based or not d.is_dir():
            return []
        return [self.import_volume(st, p.name) for p in sorted(d.iterdir()) if IMPORT_RE.match(f"import/{p.name}")]

    def storage_volumes(self, st: Storage) -> list[Volume]:
        return [v for p, v in self.volumes.items() if p.is_relative_to(st.files) and (
            (st.path_based and p.parent.parent == st.files / "images") or (not st.path_based and p.parent == st.files))]

    def next_disk_name(self, st: Storage, vmid: int, fmt: str, base: bool = False) -> str:
        used = {re.sub(r"\.\w+$", "", v.name) for v in self.storage_volumes(st)}
        for n in itertools.count():
            stem = f"vm-{vmid}-disk-{n}"
            if stem not in used and f"base-{vmid}-disk-{n}" not in used:
                stem = f"base-{vmid}-disk-{n}" if base else stem
                return f"{stem}.{fmt}" if st.path_based else stem
        raise AssertionError

    def allocate(self, st: Storage, vmid: int, size: int, fmt: str, *, parent: Volume | None = None,
                 base: bool = False, image: bool = False) -> Volume:
        """A new volume file; ``image``: the backend's template disk (a guest image)."""
        name = self.next_disk_name(st, vmid, fmt, base)
        path = st.volume_file(vmid, name)
        origin = "image" if image else parent.origin if parent else "blank"
        if image:
            size = self.backend.template_volume(str(path), fmt)
        else:
            self.create_image(st, path, size, fmt, str(parent.path) if parent else None)
        vol = Volume(path, name, vmid, fmt, size, base=base, parent=parent, origin=origin)
        self.volumes[path] = vol
        return vol

    def import_into(self, st: Storage, vmid: int, fmt: str, source: Path) -> Volume:
        """A new disk with the content of ``source`` (qemu-server ImportDisk::do_import:
        vdisk_alloc of the source's virtual size, then qemu-img convert into it)."""
        name = self.next_disk_name(st, vmid, fmt)
        path = st.volume_file(vmid, name)
        size = self.backend.import_volume(str(source), str(path), fmt)
        vol = Volume(path, name, vmid, fmt, size, origin="import")
        self.volumes[path] = vol
        return vol

    def make_base(self, st: Storage, vol: Volume) -> Volume:
        """vdisk_create_base: ``vm-N-disk-M`` becomes ``base-N-disk-M`` (the file renamed)."""
        if vol.base:
            return vol
        name = vol.name.replace(f"vm-{vol.vmid}-", f"base-{vol.vmid}-", 1)
        path = st.volume_file(vol.vmid, name)
        self.backend.rename_volume(str(vol.path), str(path))
        self.volumes.pop(vol.path, None)
        vol.path, vol.name, vol.base = path, name, True
        self.volumes[path] = vol
        return vol

    def free(self, vol: Volume) -> None:
        self.remove_image(vol)
        self.volumes.pop(vol.path, None)
        try:
            vol.path.parent.rmdir() if vol.path.parent.name.isdigit() else None
        except OSError:
            pass

    # ---- VMs -----------------------------------------------------------------------------

    def vm(self, vmid: int | str, node: str | None = None) -> Vm:
        """The VM, looked for where PVE looks: in the config directory of ``node`` (the path's)."""
        vm = self.vms.get(int(vmid))
        node = node or self.node
        if vm is None or self.node_of(vm) != node:
            raise die(f"Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist")
        return vm

    def node_of(self, vm: Vm) -> str:
        return vm.node or self.node

    @property
    def clustered(self) -> bool:
        return len(self.nodes) > 1

    @property
    def quorate(self) -> bool:
        return sum(self.nodes.values()) * 2 > len(self.nodes)

    def storage_nodes(self, st: Storage) -> list[str]:
        """The nodes a storage is configured for (its ``nodes`` option; none: every node)."""
        listed = [n for n in str(st.config.get("nodes") or "").split(",") if n]
        return [n for n in self.nodes if not listed or n in listed]

    def shared(self, st: Storage) -> bool:
        """As pve-storage's parse_config sets it: the entry's flag, or a type always shared."""
        return st.type in SHARED_TYPES or str(st.config.get("shared", 0)) == "1"

    def check_lock(self, vm: Vm) -> None:
        if vm.config.get("lock"):
            raise TaskError(f"VM is locked ({vm.config['lock']})")

    def prop_schema(self, key: str) -> dict | None:
        from .schema import indexed_schema
        return self.config_props.get(key) or indexed_schema(self.config_props, key)

    def typed(self, key: str, value: Any) -> Any:
        """A config value as PVE's config parser returns it (integers and booleans as numbers)."""
        sub = self.prop_schema(key) or {}
        t = sub.get("type")
        if t in ("integer", "boolean"):
            return int(value)
        if t == "number":
            v = float(value)
            return int(v) if v.is_integer() else v
        return perl_str(value)

    def drive_format(self, key: str) -> dict:
        return self.prop_schema(key)["format"]

    def parse_drive(self, key: str, value: str) -> dict:
        return self.checker.parse_property_string(self.drive_format(key), value, key)

    def print_drive(self, key: str, drive: dict) -> str:
        return print_property_string(drive, self.drive_format(key))

    def drives(self, config: dict) -> list[tuple[str, dict]]:
        return [(k, self.parse_drive(k, str(v))) for k, v in sorted(config.items()) if DRIVE_RE.match(k)]

    @staticmethod
    def is_disk(drive: dict) -> bool:
        return drive.get("media", "disk") != "cdrom" and drive.get("file") not in ("none", "cdrom")

    def view(self, vm: Vm, config: dict | None = None) -> VmView:
        config = dict(config if config is not None else vm.config)
        out = VmView(vmid=vm.vmid, name=str(config.get("name", f"VM {vm.vmid}")), config=config)
        for key, drive in self.drives(config):
            if not self.is_disk(drive):
                continue
            st, vol = self.resolve(drive["file"])
            bus, index = DRIVE_RE.match(key).groups()
            out.drives.append(DriveView(key, bus, int(index), drive, drive["file"], self.path_text(st, vol), vol.fmt, vol.size,
                                        boots_itself=vol.origin == "import"))
        if out.drives:
            out.root = out.drives[0]
        return out

    @staticmethod
    def digest(config: dict) -> str:
        text = "".join(f"{k}: {config[k]}\n" for k in sorted(config))
        return hashlib.sha1(text.encode()).hexdigest()

    def agent_enabled(self, config: dict | None) -> bool:
        if not config or config.get("agent") is None:
            return False
        parsed = self.checker.parse_property_string(self.prop_schema("agent")["format"], str(config["agent"]), "agent")
        return str(parsed.get("enabled", 0)) == "1"

    # ---- tasks ---------------------------------------------------------------------------

    def task(self, ttype: str, tid: Any, action: Callable[[Task], None] | None, node: str | None = None) -> Task:
        """A task on ``node`` (default: the fake's first node), named so in its UPID."""
        node = node or self.node
        pid = next(self._pids)
        start = int(time.time())
        upid = f"UPID:{node}:{pid:08X}:{self._pstart:08X}:{start:08X}:{ttype}:{tid}:{self.user}:"
        forced = self.task_outcomes.get(ttype)
        if isinstance(forced, list):
            forced = forced.pop(0) if forced else None
        t = Task(upid, node, pid, self._pstart, start, ttype, str(tid), self.user, action, self.task_polls,
                 forced=forced)
        self.tasks[upid] = t
        return t

    def poll(self, upid: str) -> Task:
        t = self.tasks.get(upid)
        if t is None:
            if not re.fullmatch(r"UPID:[^:]+:[0-9A-F]{8}:[0-9A-F]{8,9}:[0-9A-F]{8}:[^:]+:[^:]*:[^:]+:", upid):
                raise ApiError("Parameter verification failed.", 400, {"upid": "unable to parse worker upid"})
            raise ApiError("Parameter verification failed.", 400, {"upid": "no such task"})
        return t

    def finish_all(self) -> None:
        for t in list(self.tasks.values()):
            t.finish()

    def cleanup(self) -> None:
        """Stop every VM and remove every volume (server close)."""
        for vm in list(self.vms.values()):
            if vm.running:
                try:
                    self.backend.stop(VmView(vm.vmid, "", dict(vm.run_config or {})))
                except Exception:  # noqa: BLE001 - best effort at teardown
                    pass
                vm.running = False
        for vol in list(self.volumes.values()):
            try:
                self.remove_image(vol)
            except Exception:  # noqa: BLE001
                pass
        self.volumes.clear()

