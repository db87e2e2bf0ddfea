"""Storage endpoints: the storage configuration (/storage), a node's storages and their
content (pve-storage API2/Storage/*.pm).  Volumes are files; ``content/{volume}`` returns the
file's path (for a zfspool storage: <root>/zvol/<pool>/<name>, standing for /dev/zvol/...).
``{volume}`` is the whole rest of the path, '/' included (a directory storage's
``local:100/vm-100-disk-0.qcow2``): the router joins it as PVE's fragmentDelimiter does."""

from __future__ import annotations

import re
import shutil
from typing import Any

from .handlers import api, check_node
from .model import CONTENT, STORAGE_OPTIONS, ApiError, State, Task, TaskError, Volume, die, param_exc
from .schema import SchemaError
from .validate import split_list, truthy


# ---- storage --------------------------------------------------------------------------------


def storage_entry(st) -> dict:
    return {"storage": st.id, **st.config}


def visible(s: State, st) -> bool:
    """The storage lists (/storage, /nodes/{node}/storage) show only the storages with
    Datastore.Audit or Datastore.AllocateSpace on /storage/<id>."""
    return s.allowed(f"/storage/{st.id}", ["Datastore.Audit", "Datastore.AllocateSpace"], any_of=True)


@api("GET", "/storage")
def storage_index(s: State, p: dict) -> list:
    return [storage_entry(st) for st in s.storages.values() if p.get("type") in (None, st.type) and visible(s, st)]


@api("GET", "/storage/{storage}")
def storage_read(s: State, p: dict) -> dict:
    st = s.storage(p["storage"])
    return {**storage_entry(st), "digest": s.digest(st.config)}


@api("POST", "/storage")
def storage_create(s: State, p: dict) -> dict:
    stype = p["type"]
    opts = STORAGE_OPTIONS.get(stype)
    if opts is None:
        raise SchemaError(f"storage type '{stype}' is not modelled by the fake")
    config: dict[str, Any] = {}
    for k, v in p.items():
        if k in ("storage", "type"):
            continue
        if k not in opts:
            raise die(f"unexpected property '{k}'")
        if k == "content":
            kept = [c for c in split_list(str(v)) if c in CONTENT[stype]]
            config[k] = ",".join(sorted(set(kept)))
        elif k in ("sparse", "disable", "shared", "mkdir", "krbd"):
            config[k] = 1 if truthy(v) else 0
        else:
            config[k] = v
    for k, required in opts.items():
        if required and config.get(k) is None:
            raise die(f"missing value for required option '{k}'")
    if p["storage"] in s.storages:
        raise die(f"storage ID '{p['storage']}' already defined")
    config.setdefault("content", "images,rootdir" if stype in ("zfspool", "rbd") else "images,rootdir,vztmpl,iso,backup,snippets")
    s.add_storage(p["storage"], stype, config)
    return {"storage": p["storage"], "type": stype}


@api("PUT", "/storage/{storage}")
def storage_update(s: State, p: dict) -> dict:
    """``pvesm set``: the options given replace the entry's (``delete`` drops some)."""
    st = s.storage(p["storage"])
    opts = STORAGE_OPTIONS.get(st.type) or {}
    for k in split_list(str(p.get("delete") or "")):
        st.config.pop(k, None)
    for k, v in p.items():
        if k in ("storage", "delete", "digest"):
            continue
        if k not in opts or opts[k]:  # fixed options (path, pool) cannot change
            raise die(f"unexpected property '{k}'")
        if k == "content":
            bad = [c for c in split_list(str(v)) if c not in CONTENT.get(st.type, set())]
            if bad:
                raise die(f"storage does not support content type '{bad[0]}'")
            v = ",".join(sorted(set(split_list(str(v)))))
        st.config[k] = v
    return {"storage": st.id, "type": st.type}


@api("DELETE", "/storage/{storage}")
def storage_delete(s: State, p: dict) -> None:
    s.storage(p["storage"])
    del s.storages[p["storage"]]  # only the entry: volumes stay (on_delete_hook does nothing)
    return None


@api("GET", "/nodes/{node}/storage")
def node_storage(s: State, p: dict) -> list:
    check_node(s, p)
    out = []
    for st in s.storages.values():
        usage = shutil.disk_usage(st.files)
        if p.get("storage") not in (None, st.id) or (p.get("content") and p["content"] not in st.content):
            continue
        if p["node"] not in s.storage_nodes(st):  # storage_info: only the storages enabled on the node
            continue
        if truthy(p.get("enabled") or 0) and truthy(st.config.get("disable") or 0):
            continue
        if not visible(s, st):
            continue
        out.append({"storage": st.id, "type": st.type, "content": ",".join(sorted(st.content)), "active": 1, "enabled": 1,
                    "shared": int(s.shared(st)), "total": usage.total, "used": usage.used, "avail": usage.free,
                    "used_fraction": usage.used / usage.total if usage.total else 0})
    return out


def volume_entry(s: State, st, vol) -> dict:
    used = vol.path.stat().st_blocks * 512 if vol.path.exists() else 0
    out = {"volid": s.volid(st, vol), "format": vol.fmt, "size": vol.size, "vmid": vol.vmid, "content": "images",
           "ctime": vol.ctime, "used": used}
    if vol.parent is not None:
        out["parent"] = vol.parent.volname(st)
    return out


@api("GET", "/nodes/{node}/storage/{storage}/content")
def content_list(s: State, p: dict) -> list:
    check_node(s, p)
    st = s.storage(p["storage"])
    out = []
    if p.get("content") in (None, "images"):
        vols = [v for v in s.storage_volumes(st) if p.get("vmid") is None or v.vmid == int(p["vmid"])]
        out += [volume_entry(s, st, v) for v in sorted(vols, key=lambda v: v.name) if accessible(s, st, v)]
    if p.get("content") in (None, "import") and p.get("vmid") is None and "import" in st.content:
        out += [import_entry(s, st, v) for v in s.import_files(st) if accessible(s, st, v)]
    return out


def accessible(s: State, st, vol) -> bool:
    """The content list leaves out what check_volume_access refuses."""
    try:
        s.check_volume_access(st, vol)
    except ApiError:
        return False
    return True


def import_entry(s: State, st, vol) -> dict:
    """A file in import/: PVE lists its file size and format (the extension)."""
    return {"volid": s.volid(st, vol), "format": vol.fmt, "size": vol.size, "content": "import", "ctime": vol.ctime}


@api("GET", "/nodes/{node}/storage/{storage}/content/{volume}")
def content_info(s: State, p: dict) -> dict:
    check_node(s, p)
    st, vol = s.resolve(real_volume_id(p.get("storage"), p["volume"]))
    s.check_volume_access(st, vol)
    e = import_entry(s, st, vol) if vol.vtype == "import" else volume_entry(s, st, vol)
    if vol.vtype == "import":
        e["used"] = vol.size
    return {"path": s.path_text(st, vol), "size": e["size"], "used": e["used"], "format": e["format"]}


def size_kib(text: str) -> int:
    m = re.fullmatch(r"(\d+)([MG]?)", text)
    if not m:
        raise param_exc({"size": f"unable to parse size '{text}'"})
    return int(m.group(1)) * {"": 1, "M": 1024, "G": 1024 * 1024}[m.group(2)]


@api("POST", "/nodes/{node}/storage/{storage}/content")
def content_create(s: State, p: dict) -> str:
    """vdisk_alloc with a given name (size in KiB, or with M/G)."""
    check_node(s, p)
    st = s.storage(p["storage"])
    kib = size_kib(str(p["size"]))
    name, vmid = str(p["filename"]), int(p["vmid"])
    m = re.search(r"\.(raw|qcow2|vmdk)$", name)
    if m and p.get("format") and p["format"] != m.group(1):
        raise param_exc({"format": f"different storage formats ({p['format']} != {m.group(1)})"})
    fmt = m.group(1) if m else (p.get("format") or st.default_format())
    if st.path_based:
        n = re.fullmatch(r"((base-)?[^/\s]+\.(raw|qcow2|vmdk|subvol))", name)
        if not n:
            raise die(f"unable to parse volume filename '{name}'")
        if n.group(3) != fmt:
            raise die(f"illegal name '{name}' - wrong extension for format ('{n.group(3)} != '{fmt}')")
        path = st.volume_file(vmid, name)
        if path.exists() or path in s.volumes:
            raise die(f"disk image '{path}' already exists")
    else:
        if fmt != "raw":
            raise die(f"unsupported format '{fmt}'")
        if not name.startswith(f"vm-{vmid}-"):
            raise die(f"illegal name '{name}' - should be 'vm-{vmid}-*'")
        path = st.volume_file(vmid, name)
        if path in s.volumes:
            raise die(f"zfs error: cannot create '{st.config.get('pool')}/{name}': dataset already exists")
    s.create_image(st, path, kib * 1024, fmt)
    vol = Volume(path, name, vmid, fmt, kib * 1024)
    s.volumes[path] = vol
    return s.volid(st, vol)


@api("DELETE", "/nodes/{node}/storage/{storage}/content/{volume}")
def content_delete(s: State, p: dict) -> str | None:
    check_node(s, p)
    volid = real_volume_id(p.get("storage"), p["volume"])
    st, vol = s.resolve(volid)
    s.check_priv(f"/storage/{st.id}", "Datastore.Allocate")

    def action(t: Task) -> None:
        if any(v.parent is vol for v in s.volumes.values()):
            raise TaskError(f"base volume '{vol.name}' is still in use by linked cloned")
        s.free(vol)
        t.log.append(f"Removed volume '{volid}'")

    task = s.task("imgdel", f"{vol.vmid}@{st.id}", action, p.get("node"))
    if p.get("delay"):
        task.finish()
        if task.exitstatus != "OK" and not str(task.exitstatus).startswith("WARNINGS"):
            raise die(str(task.exitstatus))
        return None
    return task.upid


def real_volume_id(storeid: str | None, volume: str) -> str:
    if ":" in volume:
        sid = volume.split(":", 1)[0]
        if storeid and sid != storeid:
            raise param_exc({"volume": f"storage ID mismatch ({sid} != {storeid})\n"})
        return volume
    if not storeid:
        raise param_exc({"volume": "no storage specified - incomplete volume ID"})
    return f"{storeid}:{volume}"


@api("GET", "/nodes/{node}/storage/{storage}/status")
def storage_status(s: State, p: dict) -> dict:
    check_node(s, p)
    st = s.storage(p["storage"])
    if p["node"] not in s.storage_nodes(st):
        raise die("No such storage.")  # pve-storage API2/Storage/Status.pm read_status: not in the node's storage_info
    usage = shutil.disk_usage(st.files)
    return {"type": st.type, "content": ",".join(sorted(st.content)), "active": 1, "enabled": 1, "shared": int(s.shared(st)),
            "total": usage.total, "used": usage.used, "avail": usage.free}
