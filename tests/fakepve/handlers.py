"""The endpoints the fake implements, keyed by (METHOD, path template).  Each gets the
:class:`~.model.State` and the validated parameters (path parameters merged) and returns the
``data`` PVE would return; it raises :class:`~.model.ApiError` as PVE dies.  Messages are
PVE's own (qemu-server API2/Qemu.pm, Agent.pm; pve-storage; pve-manager)."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from typing import Any, Callable

from . import vmperms
from .model import DRIVE_RE, NEW_DISK_RE, ApiError, State, Task, TaskError, Vm, die, param_exc
from .schema import SchemaError
from .validate import split_list, truthy

H: dict[tuple[str, str], Callable[[State, dict], Any]] = {}
VERSION = {"8.4": ("8.4.1", "2a5fa54a8503f96d"), "9.1": ("9.1.2", "b03ba2b1bd2bc6f9")}
QEMU = {"8.4": ("9.2.0", "pc-i440fx-9.2+pve1"), "9.1": ("10.1.2", "pc-i440fx-10.1+pve0")}
CONTROL = {"node", "vmid", "digest", "delete", "revert", "skiplock", "background_delay", "force"}


def api(method: str, template: str):
    def reg(fn):
        H[(method, template)] = fn
        return fn
    return reg


def flag(p: dict, key: str, default: bool = False) -> bool:
    return truthy(p[key]) if p.get(key) is not None else default


def check_node(s: State, p: dict) -> None:
    """The path's node: one of the cluster's (else PVE's name lookup fails), and online (else
    pveproxy, proxying the call to it, cannot reach it: 595)."""
    node = p.get("node")
    if node is None:
        return
    if node not in s.nodes:
        raise die(f"hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known")
    if not s.nodes[node]:
        raise die("No route to host", 595)


# ---- cluster, version, nodes --------------------------------------------------------------


@api("GET", "/version")
def version(s: State, p: dict) -> dict:
    v, repoid = VERSION[s.version]
    return {"version": v, "release": s.version, "repoid": repoid}


@api("GET", "/nodes")
def nodes(s: State, p: dict) -> list:
    out = []
    for node, online in s.nodes.items():
        row: dict[str, Any] = {"node": node, "status": "online" if online else "offline", "id": f"node/{node}", "type": "node",
                               "level": "", "ssl_fingerprint": getattr(s, "fingerprint", "")}
        if online and s.allowed(f"/nodes/{node}", ["Sys.Audit"]):  # pvestatd's figures: none for a node that is gone
            row.update(maxcpu=os.cpu_count() or 1, cpu=0.01, maxmem=NODE_MEMORY, mem=NODE_MEMORY_USED, uptime=3600)
        out.append(row)
    return out


NODE_MEMORY, NODE_MEMORY_USED = 8 << 30, 1 << 30


@api("GET", "/cluster/status")
def cluster_status(s: State, p: dict) -> list:
    """A cluster: its row (quorate, node count) and one row per node; a standalone node: its own row only."""
    out: list[dict] = []
    if s.clustered:
        out.append({"type": "cluster", "id": "cluster", "name": "fakecluster", "nodes": len(s.nodes),
                    "quorate": int(s.quorate), "version": len(s.nodes) + 1})
    for i, (node, online) in enumerate(s.nodes.items(), start=1):
        out.append({"type": "node", "id": f"node/{node}", "name": node, "nodeid": i if s.clustered else 0,
                    "online": int(online), "local": int(node == s.node), "ip": f"127.0.0.{i + 1}", "level": ""})
    return out


def vm_resource(s: State, vm: Vm) -> dict:
    c = vm.config
    out = {"id": f"qemu/{vm.vmid}", "type": "qemu", "vmid": vm.vmid, "node": s.node_of(vm), "status": "running" if vm.running else "stopped",
           "template": int(c.get("template", 0) or 0), "maxcpu": int(c.get("cores", 1)) * int(c.get("sockets", 1)),
           "maxmem": memory_mib(c) << 20, "maxdisk": root_size(s, vm), "mem": 0, "cpu": 0, "disk": 0,
           "diskread": 0, "diskwrite": 0, "netin": 0, "netout": 0, "uptime": uptime(vm)}
    for key in ("name", "tags", "lock"):
        if c.get(key) is not None:
            out[key] = c[key]
    return out


def memory_mib(c: dict) -> int:
    return int(str(c.get("memory", "512")).split(",")[0].removeprefix("current="))


def uptime(vm: Vm) -> int:
    return int(time.time() - vm.started) if vm.running else 0


def root_size(s: State, vm: Vm) -> int:
    try:
        view = s.view(vm)
    except ApiError:
        return 0
    return view.root.size if view.root else 0


@api("GET", "/cluster/resources")
def resources(s: State, p: dict) -> list:
    kind = p.get("type")
    out: list[dict] = []
    if kind in (None, "node"):
        for node, online in s.nodes.items():
            row: dict[str, Any] = {"id": f"node/{node}", "type": "node", "node": node, "status": "online" if online else "offline"}
            if online and s.allowed(f"/nodes/{node}", ["Sys.Audit"]):  # extract_node_stats: no figures without it
                row.update(maxcpu=4, cpu=0.01, maxmem=NODE_MEMORY, mem=NODE_MEMORY_USED)
            out.append(row)
    if kind in (None, "vm"):  # only the VMs with VM.Audit, the storages with Datastore.Audit (pve-manager Cluster.pm)
        out += [vm_resource(s, vm) for vm in sorted(s.vms.values(), key=lambda v: v.vmid)
                if s.allowed(f"/vms/{vm.vmid}", ["VM.Audit"])]
    if kind in (None, "storage"):
        out += [storage_resource(s, st, node) for st in s.storages.values() for node in s.storage_nodes(st)
                if s.allowed(f"/storage/{st.id}", ["Datastore.Audit"])]
    return out


def storage_resource(s: State, st, node: str) -> dict:
    """One storage as one node reports it; ``shared`` only where the version's schema has it (9.x)."""
    row = {"id": f"storage/{node}/{st.id}", "type": "storage", "storage": st.id, "node": node,
           "status": "available" if s.nodes[node] else "unknown", "plugintype": st.type, "content": ",".join(sorted(st.content))}
    if s.nodes[node]:
        row.update(storage_space(st))
    if s.version != "8.4":
        row["shared"] = int(s.shared(st))
    return row


def storage_space(st) -> dict:
    usage = shutil.disk_usage(st.files)
    return {"disk": usage.used, "maxdisk": usage.total}


@api("GET", "/cluster/nextid")
def nextid(s: State, p: dict) -> str:
    if p.get("vmid") is not None:
        vmid = str(p["vmid"])
        if int(vmid) in s.vms:
            raise param_exc({"vmid": f"VM {vmid} already exists"})
        return vmid  # PVE returns the parameter as given (a JSON string)
    n = 100
    while n in s.vms:
        n += 1
    return str(n)  # Perl stringified it while checking: a JSON string, not a number


# ---- VM lifecycle ----------------------------------------------------------------------------


@api("GET", "/nodes/{node}/qemu")
def qemu_list(s: State, p: dict) -> list:
    check_node(s, p)
    out = []
    for vm in sorted((v for v in s.vms.values() if s.node_of(v) == p["node"] and s.allowed(f"/vms/{v.vmid}", ["VM.Audit"])),
                     key=lambda v: v.vmid):
        r = vm_resource(s, vm)
        e = {k: r[k] for k in ("vmid", "status", "maxmem", "maxdisk", "uptime", "name", "tags", "lock") if k in r}
        e["cpus"] = r["maxcpu"]
        if r["template"]:
            e["template"] = 1
        if vm.running:
            e["pid"] = vm.pid
        out.append(e)
    return out


@api("POST", "/nodes/{node}/qemu/{vmid}/clone")
def clone(s: State, p: dict) -> str:
    check_node(s, p)
    src = s.vm(p["vmid"], p.get("node"))
    newid = int(p["newid"])
    target = None if p.get("target") in (None, p["node"], "localhost") else str(p["target"])
    if target is not None and target not in s.nodes:
        raise die(f"no such cluster node '{target}'")
    if s.clustered and not s.quorate:
        raise die("cluster not ready - no quorum?")
    if p.get("pool"):
        raise die(f"pool '{p['pool']}' does not exist")
    if src.config.get("lock"):
        raise die(f"VM is locked ({src.config['lock']})")
    is_template = flag(src.config, "template")
    full = flag(p, "full", not is_template)
    if p.get("storage") is not None and not full:
        raise die("parameter 'storage' not allowed for linked clones")
    if p.get("format") is not None and not full:
        raise die("parameter 'format' not allowed for linked clones")
    if p.get("snapname"):
        raise die(f"snapshot '{p['snapname']}' does not exist")
    vmperms.check_clone_storage(s, src.config, p.get("storage"))
    if target is not None:
        check_shared_vm(s, src.config, target)
    if newid in s.vms:
        raise die(f"unable to create VM {newid}: config file already exists")
    disks = []
    for key, drive in s.drives(src.config):
        if not s.is_disk(drive):
            continue
        st, vol = s.resolve(drive["file"])
        if full:
            raise SchemaError("full clones are not modelled by the fake (use a template and full=0)")
        if not (vol.base and st.type in {"dir", "nfs", "cifs", "btrfs", "zfspool", "lvmthin", "rbd"}
                and (not st.path_based or vol.fmt == "qcow2")):
            raise die(f"Linked clone feature is not supported for '{drive['file']}' ({key})")
        disks.append((key, drive, st, vol))
    s.vms[newid] = Vm(newid, {"lock": "clone"}, node=target or p["node"])
    template = src.config

    def action(t: Task) -> None:
        t.log.append(f"create linked clone of VM {src.vmid} with ID {newid}")
        try:
            conf = {k: v for k, v in template.items()
                    if k not in ("template", "lock", "parent", "snaptime", "vmstate", "runningcpu", "runningmachine")
                    and not k.startswith("unused")}
            conf["name"] = p.get("name") or f"Copy-of-VM-{template.get('name', src.vmid)}"
            if p.get("description"):
                conf["description"] = p["description"]
            conf["smbios1"] = f"uuid={uuid.uuid4()}"
            if conf.get("vmgenid"):
                conf["vmgenid"] = str(uuid.uuid4())
            for key, drive, st, vol in disks:
                t.log.append(f"create linked clone of drive {key} ({drive['file']})")
                new = s.allocate(st, newid, vol.size, vol.fmt, parent=vol)
                conf[key] = s.print_drive(key, {**drive, "file": s.volid(st, new)})
            s.vms[newid].config = conf
        except Exception:
            for vol in [v for v in s.volumes.values() if v.vmid == newid]:
                s.free(vol)
            s.vms.pop(newid, None)
            raise

    return s.task("qmclone", src.vmid, action, p.get("node")).upid


def check_shared_vm(s: State, config: dict, target: str) -> None:
    """qemu-server clone_vm's $check_storage_access_clone: a clone to another node needs every
    volume, a CD-ROM image included, on shared storage."""
    for _key, drive in s.drives(config):
        volid = str(drive.get("file") or "")
        if volid in ("", "none", "cdrom") or ":" not in volid:
            continue
        if not s.shared(s.storage(volid.split(":", 1)[0])):
            raise die(f"can't clone VM to node '{target}' (VM uses local storage)")


@api("GET", "/nodes/{node}/qemu/{vmid}/config")
def config_read(s: State, p: dict) -> dict:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    if p.get("snapshot"):
        raise die(f"snapshot '{p['snapshot']}' does not exist")
    return {**vm.config, "digest": s.digest(vm.config)}


def normalize_tags(value: str) -> str:
    return ";".join(sorted({t.lower() for t in split_list(value)}))


def update_config(s: State, p: dict, sync: bool) -> str | None:
    from .create import check_new_disk, make_disk

    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    vmid = vm.vmid
    if p.get("skiplock") is not None:
        raise param_exc({"skiplock": "Only root may use this option."})
    if p.get("revert"):
        raise SchemaError("config 'revert' is not modelled by the fake")
    deletes = split_list(str(p.get("delete", "")))
    changes = {k: v for k, v in p.items() if k not in CONTROL}
    for k in deletes:
        if k in changes:
            raise die(f"you can't use '-{k}' and -delete {k}' at the same time")
    if not changes and not deletes:
        raise die("no options specified")
    vmperms.check_modify_config(s, vmid, deletes)
    vmperms.check_modify_config(s, vmid, changes)
    vmperms.check_storage_access(s, vmid, changes)
    for key, value in changes.items():
        if not DRIVE_RE.match(key):
            continue
        if vm.running:
            raise SchemaError("hotplugging drives into a running VM is not modelled by the fake")
        check_new_disk(s, key, s.parse_drive(key, str(value)))
    if p.get("digest") and p["digest"] != s.digest(vm.config):
        raise die("checksum mismatch (file change by other user?)")
    if vm.config.get("lock"):
        raise die(f"VM is locked ({vm.config['lock']})")

    def apply(t: Task) -> None:
        conf = vm.config
        for key in [*deletes, *changes]:
            if DRIVE_RE.match(key):
                vmperms.check_drive_perm(s, vmid, t.user)
            elif key == "tags":
                vmperms.check_tags(s, vmid, t.user)
        for key in deletes:
            old = conf.pop(key, None)
            if old is not None and DRIVE_RE.match(key):
                drive = s.parse_drive(key, str(old))
                if s.is_disk(drive):
                    n = next(i for i in range(256) if f"unused{i}" not in conf)
                    conf[f"unused{n}"] = drive["file"]
        for key, value in changes.items():
            if DRIVE_RE.match(key):
                drive = s.parse_drive(key, str(value))
                if NEW_DISK_RE.match(drive["file"]):
                    value = make_disk(s, t, key, drive, vmid)
                conf[key] = str(value)
            elif key == "tags":
                conf[key] = normalize_tags(str(value))
            else:
                conf[key] = s.typed(key, value)

    if sync:
        t = Task("", s.node, 0, 0, 0, "qmconfig", str(vmid), s.user, apply, 0)
        try:
            apply(t)
        except TaskError as exc:
            raise die(str(exc)) from None
        return None
    task = s.task("qmconfig", vmid, apply, p.get("node"))
    if p.get("background_delay"):
        task.finish()
        if task.exitstatus not in ("OK",) and not str(task.exitstatus).startswith("WARNINGS"):
            raise die(f"failed to update VM {vmid}: {task.exitstatus}")
        return None
    return task.upid


@api("POST", "/nodes/{node}/qemu/{vmid}/config")
def config_post(s: State, p: dict) -> str | None:
    return update_config(s, p, sync=False)


@api("PUT", "/nodes/{node}/qemu/{vmid}/config")
def config_put(s: State, p: dict) -> None:
    return update_config(s, p, sync=True)


def is_running(s: State, vm: Vm) -> bool:
    if vm.running and not s.backend.running(s.view(vm, vm.run_config)):
        vm.running, vm.pid = False, None  # the guest powered itself off
    return vm.running


@api("GET", "/nodes/{node}/qemu/{vmid}/status/current")
def status_current(s: State, p: dict) -> dict:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    running = is_running(s, vm)
    r = vm_resource(s, vm)
    out = {"vmid": vm.vmid, "status": r["status"], "qmpstatus": r["status"], "ha": {"managed": 0},
           "cpus": r["maxcpu"], "maxmem": r["maxmem"], "maxdisk": r["maxdisk"], "mem": 0, "cpu": 0, "disk": 0,
           "diskread": 0, "diskwrite": 0, "netin": 0, "netout": 0, "uptime": r["uptime"]}
    for key in ("name", "tags", "lock"):
        if key in r:
            out[key] = r[key]
    if r["template"]:
        out["template"] = 1
    if s.agent_enabled(vm.config):
        out["agent"] = 1
    if running:
        out["pid"] = vm.pid
        out["running-qemu"], out["running-machine"] = QEMU[s.version]
    if s.version != "8.4":
        out["memhost"] = 0
    return out


@api("POST", "/nodes/{node}/qemu/{vmid}/status/start")
def start(s: State, p: dict) -> str:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))

    def action(t: Task) -> None:
        s.check_lock(vm)
        if flag(vm.config, "template"):
            raise TaskError("you can't start a vm if it's a template")
        if is_running(s, vm):
            raise TaskError(f"VM {vm.vmid} already running")
        view = s.view(vm)
        for d in view.drives:
            if d.bus == "scsi" and str(d.opts.get("iothread", 0)) == "1" and vm.config.get("scsihw") != "virtio-scsi-single":
                t.warn("iothread is only valid with virtio disk or virtio-scsi-single controller, ignoring")
        vm.pid = s.backend.start(view)
        vm.running, vm.started, vm.run_config, vm.agent_calls = True, time.time(), dict(vm.config), 0

    return s.task("qmstart", vm.vmid, action, p.get("node")).upid


def _stop_task(s: State, p: dict, ttype: str) -> str:
    """Stop or shut down: a task either way; on a VM that is not running it does nothing and
    ends OK, as qemu-server's vm_stop/vm_shutdown (``_do_vm_stop`` returns when no QEMU runs,
    before looking at the lock)."""
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))

    def action(t: Task) -> None:
        if not is_running(s, vm):
            return
        s.check_lock(vm)
        view = s.view(vm, vm.run_config)
        shutdown = getattr(s.backend, "shutdown", None)
        if ttype == "qmshutdown" and shutdown is not None:
            shutdown(view, float(p.get("timeout") or 60))
        else:
            s.backend.stop(view)
        vm.running, vm.pid = False, None

    return s.task(ttype, vm.vmid, action, p.get("node")).upid


@api("POST", "/nodes/{node}/qemu/{vmid}/status/stop")
def stop(s: State, p: dict) -> str:
    return _stop_task(s, p, "qmstop")


@api("POST", "/nodes/{node}/qemu/{vmid}/status/shutdown")
def shutdown(s: State, p: dict) -> str:
    return _stop_task(s, p, "qmshutdown")


@api("DELETE", "/nodes/{node}/qemu/{vmid}")
def destroy(s: State, p: dict) -> str:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    if p.get("skiplock") is not None:
        raise param_exc({"skiplock": "Only root may use this option."})

    def early() -> None:
        if flag(vm.config, "protection"):
            raise die(f"can't remove VM {vm.vmid} - protection mode enabled")
        if is_running(s, vm):
            raise die(f"VM {vm.vmid} is running - destroy failed")

    early()

    def action(t: Task) -> None:
        early()
        s.check_lock(vm)
        owned = []
        for key, value in sorted(vm.config.items()):
            if DRIVE_RE.match(key) or key.startswith("unused"):
                file = s.parse_drive(key, str(value))["file"] if DRIVE_RE.match(key) else str(value)
                if file in ("none", "cdrom"):
                    continue
                st, vol = s.resolve(file)  # dies "storage 'X' does not exist" when the entry is gone
                if vol.vmid == vm.vmid:
                    owned.append(vol)
        if flag(p, "destroy-unreferenced-disks"):
            for st in list(s.storages.values()):
                owned += [v for v in s.storage_volumes(st) if v.vmid == vm.vmid and v not in owned]
        for vol in owned:
            if any(v.parent is vol for v in s.volumes.values()):
                raise TaskError(f"base volume '{vol.name}' is still in use by linked cloned")
            s.free(vol)
        if flag(p, "purge"):
            t.log.append(f"purging VM {vm.vmid} from related configurations..")
        s.vms.pop(vm.vmid, None)

    return s.task("qmdestroy", vm.vmid, action, p.get("node")).upid


# ---- tasks ---------------------------------------------------------------------------------


def check_task_owner(s: State, t: Task, node: str) -> None:
    """pve-manager Tasks.pm: the task's owner (its user, or a token of it) or Sys.Audit on the node."""
    if s.user not in (t.user, t.user.partition("!")[0]):
        s.check_priv(f"/nodes/{node}", "Sys.Audit")


@api("GET", "/nodes/{node}/tasks/{upid}/status")
def task_status(s: State, p: dict) -> dict:
    check_node(s, p)
    t = s.poll(p["upid"])
    check_task_owner(s, t, p["node"])
    if t.status == "running":
        if t.polls_left <= 0:
            t.finish()
        else:
            t.polls_left -= 1
    out = {"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart, "starttime": t.starttime,
           "type": t.type, "id": t.id, "user": t.user, "status": t.status}
    if t.status == "stopped":
        out["exitstatus"] = t.exitstatus
    return out


@api("GET", "/nodes/{node}/tasks/{upid}/log")
def task_log(s: State, p: dict) -> list:
    check_node(s, p)
    t = s.poll(p["upid"])
    check_task_owner(s, t, p["node"])
    lines = [line for line in t.log if line] or ["no content"]
    start = int(p.get("start") or 0)
    limit = int(p.get("limit") if p.get("limit") is not None else 50)
    return [{"n": i + 1, "t": line} for i, line in enumerate(lines)][start:start + limit if limit else None]


from . import access, agent, create, nodeinfo, storage  # noqa: E402  (they register their endpoints in H)

__all__ = ["H", "access", "agent", "create", "nodeinfo", "storage"]
