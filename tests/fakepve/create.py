"""Creating a VM (``POST /nodes/{node}/qemu``), disks imported with ``import-from``, and the
conversion to a template (``POST .../template``), as qemu-server does them (API2/Qemu.pm
create_vm, $check_drive_param, $check_storage_access, create_disks, template;
QemuServer/ImportDisk.pm do_import):

- ``import-from`` is taken only in the form ``STORAGE:0,import-from=SOURCE`` (a 400 otherwise);
- SOURCE is a volume id of content type ``images`` or ``import`` (a 400 naming the wrong
  type otherwise) or an absolute path, which only root@pam may pass (never a token);
- the new disk is the source's content (its virtual size, qemu-img convert) in the target
  storage's format (``format=`` if given), and ``import-from`` is not kept in the config;
- a drive qemu-server's parse_drive refuses after the schema (I/O limits: a total with its
  read or write rate, a burst without its rate; :func:`.qemu.drive_parses`) is a 400
  ``{KEY: "unable to parse drive options"}``, on create and on config updates alike;
- the template conversion locks nothing new, refuses a running VM or a template, sets
  ``template: 1`` and turns each disk into a base volume (``base-N-disk-M``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from . import qemu, vmperms
from .handlers import api, check_node, normalize_tags
from .model import DRIVE_RE, NEW_DISK_RE, ApiError, State, Task, TaskError, Vm, die, param_exc
from .schema import SchemaError
from .validate import truthy

#: create_vm parameters that are not config options
NOT_CONFIG = {"node", "vmid", "archive", "start", "storage", "force", "unique", "pool", "bwlimit", "live-restore",
              "import-working-storage", "ha-managed"}
IMPORT_SYNTAX = "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"


def check_import(s: State, key: str, drive: dict) -> None:
    """$check_drive_param and $check_storage_access for a drive with ``import-from``."""
    source = drive.get("import-from")
    if not source:
        return
    m = NEW_DISK_RE.match(str(drive["file"]))
    if not m or float(m.group(3)) != 0:
        raise param_exc({key: IMPORT_SYNTAX})
    if source.startswith("/"):
        if s.user != "root@pam":
            raise die("Only root can pass arbitrary filesystem paths.")
        raise SchemaError("import-from an absolute path is not modelled by the fake (only root@pam may use it)")
    st, vol = s.resolve(source)
    if vol.vtype not in ("images", "import"):
        raise param_exc({key: f"{source} has wrong type '{vol.vtype}' - needs to be 'images' or 'import'"})
    if vol.vtype == "import" and vol.fmt in ("ova", "ovf"):
        raise SchemaError("importing from an OVA/OVF (extraction) is not modelled by the fake")


def check_new_disk(s: State, key: str, drive: dict) -> None:
    if not qemu.drive_parses(drive):  # qemu-server's parse_drive, after the schema (API2/Qemu.pm $check_drive_param)
        raise param_exc({key: "unable to parse drive options"})
    m = NEW_DISK_RE.match(str(drive["file"]))
    if m:
        if not m.group(2):
            raise die("no storage ID specified (and no default storage)")
        st = s.storage(m.group(2))
        if "images" not in st.content:
            raise param_exc({"storage": f"storage '{st.id}' does not support vm images"})
        check_import(s, key, drive)
    elif drive.get("import-from"):
        raise param_exc({key: IMPORT_SYNTAX})
    elif s.is_disk(drive):
        s.resolve(drive["file"])


def make_disk(s: State, t: Task, key: str, drive: dict, vmid: int) -> str:
    """create_disks for one new disk (``STORAGE:GiB`` or ``STORAGE:0,import-from=SRC``): the
    stored drive string, ``import-from`` and ``format`` not kept."""
    m = NEW_DISK_RE.match(str(drive["file"]))
    assert m is not None
    st = s.storage(m.group(2))
    fmt = drive.pop("format", None) or st.default_format()
    source = drive.pop("import-from", None)
    if source:
        _, src = s.resolve(source)
        vol = s.import_into(st, vmid, fmt if st.path_based else "raw", Path(src.path))
        t.log.append(f"transferred {source} into {s.volid(st, vol)}")
    else:
        vol = s.allocate(st, vmid, int(float(m.group(3)) * (1 << 30)), fmt)
    drive.update(file=s.volid(st, vol), size=vol.size)
    value = s.print_drive(key, drive)
    t.log.append(f"{key}: successfully created disk '{value}'")
    return value


@api("POST", "/nodes/{node}/qemu")
def create_vm(s: State, p: dict) -> str:
    check_node(s, p)
    vmid = int(p["vmid"])
    for key in ("archive", "start", "pool", "live-restore", "ha-managed"):
        if p.get(key):
            raise SchemaError(f"create_vm with '{key}' is not modelled by the fake")
    if s.user != "root@pam" and not s.allowed(f"/vms/{vmid}", ["VM.Allocate"]):
        raise ApiError("Permission check failed", 403)  # raise_perm_exc(): no path, no privilege named
    changes = {k: v for k, v in p.items() if k not in NOT_CONFIG}
    vmperms.check_storage_access(s, vmid, changes)
    vmperms.check_modify_config(s, vmid, changes)
    vmperms.check_serial(s, vmid, changes)
    vmperms.check_bridges(s, changes)
    if vmid in s.vms:
        raise die(f"unable to create VM {vmid} - VM {vmid} already exists on node '{s.node_of(s.vms[vmid])}'")
    drives = {}
    for key, value in changes.items():
        if DRIVE_RE.match(key):
            drive = s.parse_drive(key, str(value))
            check_new_disk(s, key, drive)
            drives[key] = drive
    s.vms[vmid] = Vm(vmid, {"lock": "create"}, node=p["node"])  # the config file exists (locked) while the task runs

    def action(t: Task) -> None:
        conf: dict[str, Any] = {}
        try:
            for key, value in changes.items():
                if key in drives:
                    drive = drives[key]
                    conf[key] = make_disk(s, t, key, drive, vmid) if NEW_DISK_RE.match(str(drive["file"])) else str(value)
                elif key == "tags":
                    conf[key] = normalize_tags(str(value))
                else:
                    conf[key] = s.typed(key, value)
        except Exception as exc:
            for vol in [v for v in s.volumes.values() if v.vmid == vmid]:
                s.free(vol)
            s.vms.pop(vmid, None)
            raise TaskError(f"unable to create VM {vmid} - {getattr(exc, 'message', exc)}".strip()) from None
        s.vms[vmid].config = conf

    return s.task("qmcreate", vmid, action, p.get("node")).upid


@api("POST", "/nodes/{node}/qemu/{vmid}/template")
def template(s: State, p: dict) -> str:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    if p.get("disk"):
        raise SchemaError("converting a single disk to a base image is not modelled by the fake")

    def load_and_check() -> None:
        if vm.config.get("lock"):
            raise die(f"VM is locked ({vm.config['lock']})")
        if truthy(vm.config.get("template", 0)):
            raise die("you can't convert a template to a template")
        if vm.running:
            raise die("you can't convert a VM to template if VM is running")

    load_and_check()

    def action(t: Task) -> None:
        load_and_check()
        vm.config["template"] = 1
        for key, drive in s.drives(vm.config):
            if not s.is_disk(drive):
                continue
            st, vol = s.resolve(drive["file"])
            if vol.vmid != vm.vmid:
                continue
            base = s.make_base(st, vol)
            vm.config[key] = s.print_drive(key, {**drive, "file": s.volid(st, base)})
            t.log.append(f"{key}: {drive['file']} is now the base volume {s.volid(st, base)}")

    return s.task("qmtemplate", vm.vmid, action, p.get("node")).upid
