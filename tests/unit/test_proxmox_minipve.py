"""A small in-process Proxmox VE for the Proxmox driver's unit tests: a requests adapter
mounted on proxmoxer's session, so every request goes through the real PveApi seam
(encoding, error mapping) and proxmoxer.  It keeps just enough state (VMs, volumes,
storages, tasks that run for a few polls, locks, an agent that answers after a few pings,
exec-status that forgets a pid once read) and refuses what PVE refuses in the ways the
driver must handle (booleans other than 0/1, disk options per bus, locked VMs, protection).

The schema-validating fake server of the contract tests lives in tests/fakepve/; this one
only has to be faithful where the driver's logic depends on it.
"""

from __future__ import annotations

import base64
import itertools
import json
import re
import urllib.parse
from typing import Any, Callable

import requests
from requests.adapters import BaseAdapter

TOKEN = ("vmbench@pve!bench", "0a1b2c3d-4e5f-6789-abcd-ef0123456789")
BOOL_KEYS = {"full", "purge", "destroy-unreferenced-disks", "protection", "onboot", "kvm", "sparse", "encode", "decode"}
DISK_RE = re.compile(r"^(virtio|scsi|sata|ide)(\d+)$")
DISK_KEYS = {"virtio": {"file", "cache", "aio", "iothread", "serial", "detect_zeroes", "format", "size", "discard", "backup"},
             "scsi": {"file", "cache", "aio", "iothread", "serial", "detect_zeroes", "format", "size", "discard", "ssd", "backup"},
             "sata": {"file", "cache", "aio", "serial", "detect_zeroes", "format", "size", "discard", "ssd", "backup"}}
#: disk options with a closed set of values (QS Drive.pm: detect_zeroes is a boolean, discard ignore|on)
DISK_VALUES = {"detect_zeroes": ("0", "1"), "discard": ("ignore", "on"), "iothread": ("0", "1")}


class PveFault(Exception):
    def __init__(self, status: int, reason: str, errors: dict | None = None) -> None:
        super().__init__(reason)
        self.status, self.reason, self.errors = status, reason, errors


class MiniPve(BaseAdapter):
    def __init__(self, node: str = "pve1", version: str = "8.4", agent_pings: int = 2, task_polls: int = 2,
                 programs: dict[str, Callable[[list[str], bytes | None], tuple[int, bytes, bytes]]] | None = None) -> None:
        super().__init__()
        self.node = node
        self.version = version
        self.agent_pings = agent_pings
        self.task_polls = task_polls
        self.programs = dict(programs or {})
        self.requests: list[tuple[str, str, dict]] = []
        self.auth_headers: list[str] = []
        self.faults: list[tuple[str, str, PveFault]] = []  # (method, path regex, fault): raised once
        self.storages: dict[str, dict] = {
            "local-zfs": {"storage": "local-zfs", "type": "zfspool", "pool": "rpool/data", "content": "images,rootdir", "sparse": 1},
            "local": {"storage": "local", "type": "dir", "path": "/var/lib/vz", "content": "iso,vztmpl,backup,images"},
            "isos": {"storage": "isos", "type": "dir", "path": "/mnt/isos", "content": "iso"},
        }
        self.volumes: dict[str, dict] = {"local-zfs:base-9000-disk-0": {"vmid": 9000, "size": 4 << 30, "format": "raw"}}
        self.vms: dict[int, dict] = {9000: {"name": "debian12", "node": node, "template": 1, "status": "stopped", "lock": None,
                                            "config": {"name": "debian12", "agent": "1", "template": "1", "cores": "1",
                                                       "memory": "512", "scsihw": "virtio-scsi-single", "tags": "golden",
                                                       "boot": "order=scsi0", "scsi0": "local-zfs:base-9000-disk-0,size=4G"}}}
        self.tasks: dict[str, dict] = {}
        self.procs: dict[int, dict] = {}
        self.files: dict[str, bytes] = {}
        self.cpu_models = ["kvm64", "qemu64", "host", "max", "x86-64-v2-AES", "Westmere"]
        self._seq = itertools.count(1)

    # ---- transport --------------------------------------------------------------------------

    def send(self, request, **kwargs):  # noqa: ANN001 - requests' adapter signature
        url = urllib.parse.urlsplit(request.url)
        path = urllib.parse.unquote(url.path).split("/api2/json", 1)[1]
        params = _form(url.query)
        if request.body:
            body = request.body.decode() if isinstance(request.body, bytes) else request.body
            params.update(_form(body))
        self.requests.append((request.method, path, params))
        self.auth_headers.append(request.headers.get("Authorization", ""))
        try:
            if request.headers.get("Authorization") != f"PVEAPIToken={TOKEN[0]}={TOKEN[1]}":
                raise PveFault(401, "authentication failure")
            for i, (method, pattern, fault) in enumerate(self.faults):
                if method == request.method and re.fullmatch(pattern, path):
                    del self.faults[i]
                    raise fault
            for key in BOOL_KEYS & set(params):
                if params[key] not in ("0", "1"):
                    raise PveFault(400, "Parameter verification failed.", {key: f"type check ('boolean') failed - got '{params[key]}'"})
            data = self.route(request.method, path, params)
            return _response(request, 200, "OK", {"data": data})
        except PveFault as f:
            return _response(request, f.status, f.reason, {"data": None, "errors": f.errors, "message": f.reason + "\n"})

    def close(self) -> None:
        pass

    # ---- helpers ------------------------------------------------------------------------------

    def task(self, kind: str, ident: object, exitstatus: str = "OK", log: list[str] | None = None,
             done: Callable[[], None] | None = None) -> str:
        upid = f"UPID:{self.node}:{next(self._seq):08X}:0000ABCD:65B2C3D4:{kind}:{ident}:{TOKEN[0]}:"
        self.tasks[upid] = {"polls": self.task_polls, "exitstatus": exitstatus, "log": log or ["TASK OK"], "done": done}
        return upid

    def vm(self, vmid: int) -> dict:
        if vmid not in self.vms:
            raise PveFault(500, f"Configuration file 'nodes/{self.node}/qemu-server/{vmid}.conf' does not exist")
        return self.vms[vmid]

    def _unlocked(self, vm: dict) -> None:
        if vm["lock"]:
            raise PveFault(500, f"VM is locked ({vm['lock']})")

    def alloc(self, sid: str, vmid: int, size_gib: str, fmt: str | None = None, name: str | None = None) -> str:
        st = self.storages[sid]
        if "images" not in st["content"]:
            raise PveFault(500, f"storage '{sid}' does not support vm images")
        n = 0
        while True:
            if st["type"] in ("dir",):
                volname = name or f"{vmid}/vm-{vmid}-disk-{n}.{fmt or 'raw'}"
            else:
                volname = name or f"vm-{vmid}-disk-{n}"
            leaf = volname.split("/")[-1]
            same = [s for s, d in self.storages.items() if s == sid or (st.get("pool") and d.get("pool") == st.get("pool"))]
            if not any(v.split(":")[0] in same and v.split("/")[-1] == leaf for v in self.volumes):
                break  # zfspool storages on one pool share its namespace
            n += 1
        volid = f"{sid}:{volname}"
        self.volumes[volid] = {"vmid": vmid, "size": int(float(size_gib) * (1 << 30)), "format": fmt or "raw"}
        return volid

    def path(self, volid: str) -> str:
        sid, _, volname = volid.partition(":")
        st = self.storages[sid]
        if st["type"] == "zfspool":
            return f"/dev/zvol/{st['pool']}/{volname.split('/')[-1]}"
        return f"{st['path']}/images/{volname}"

    # ---- the API ------------------------------------------------------------------------------

    def route(self, method: str, path: str, p: dict) -> Any:  # noqa: C901 - one table, read top to bottom
        n = self.node
        if (method, path) == ("GET", "/version"):
            return {"version": f"{self.version}.1", "release": self.version, "repoid": "deadbeef"}
        if (method, path) == ("GET", "/nodes"):
            return [{"node": n, "status": "online"}]
        if (method, path) == ("GET", "/access/permissions"):  # a token with every privilege
            from tests.fakepve.perms import valid_privileges

            return {p.get("path", "/"): {priv: 1 for priv in valid_privileges(self.version)}}
        if (method, path) == ("GET", f"/nodes/{n}/status"):
            return {"current-kernel": {"release": "6.8.12-4-pve"}, "pveversion": f"pve-manager/{self.version}.1",
                    "cpuinfo": {"model": "Test CPU"}, "memory": {"total": 64 << 30}}
        if (method, path) == ("GET", "/cluster/resources"):
            return [{"id": f"qemu/{i}", "type": "qemu", "vmid": i, "name": v["name"], "node": v["node"], "status": v["status"],
                     "template": v["template"], **({"tags": v["config"]["tags"]} if v["config"].get("tags") else {})}
                    for i, v in self.vms.items()]
        if (method, path) == ("GET", "/cluster/nextid"):
            return str(next(i for i in itertools.count(100) if i not in self.vms))
        if (method, path) == ("GET", f"/nodes/{n}/capabilities/qemu/cpu"):
            return [{"name": m, "vendor": "default", "custom": 0} for m in self.cpu_models]
        if (method, path) == ("GET", "/storage"):
            return list(self.storages.values())
        if (method, path) == ("POST", "/storage"):
            if p["storage"] in self.storages:
                raise PveFault(500, f"create storage failed: storage ID '{p['storage']}' already defined")
            self.storages[p["storage"]] = dict(p)
            return {"storage": p["storage"], "type": p["type"]}
        m = re.fullmatch(r"/storage/([^/]+)", path)
        if m:
            if m.group(1) not in self.storages:
                raise PveFault(500, f"storage '{m.group(1)}' does not exist")
            if method == "DELETE":
                del self.storages[m.group(1)]
                return None
            return self.storages[m.group(1)]
        m = re.fullmatch(rf"/nodes/{n}/tasks/([^/]+)/(status|log)", path)
        if m:
            t = self.tasks[m.group(1)]
            if m.group(2) == "log":
                return [{"n": i + 1, "t": line} for i, line in enumerate(t["log"])]
            if t["polls"] > 0:
                t["polls"] -= 1
                return {"status": "running", "upid": m.group(1), "type": "x", "id": "1", "user": TOKEN[0], "node": n}
            if t["done"]:
                t["done"]()
                t["done"] = None
            return {"status": "stopped", "exitstatus": t["exitstatus"], "upid": m.group(1), "node": n}
        m = re.fullmatch(rf"/nodes/{n}/storage/([^/]+)/(status|content)(?:/(.+))?", path)
        if m:
            sid, what, volid = m.groups()
            if sid not in self.storages:
                raise PveFault(500, f"storage '{sid}' does not exist")
            st = self.storages[sid]
            if what == "status":
                return {"type": st["type"], "content": st["content"], "active": 1, "enabled": 1, "avail": 100 << 30,
                        "total": 200 << 30, "used": 100 << 30}
            if volid and method == "GET":
                if volid not in self.volumes:
                    raise PveFault(500, f"no such volume '{volid}'")
                return {"path": self.path(volid), "format": self.volumes[volid]["format"], "size": self.volumes[volid]["size"]}
            if volid and method == "DELETE":
                self.volumes.pop(volid, None)
                return self.task("imgdel", volid)
            if method == "POST":
                kib = int(p["size"])
                return self.alloc(sid, int(p["vmid"]), str(kib / (1 << 20)), p.get("format"),
                                  name=(f"{p['vmid']}/{p['filename']}" if st["type"] == "dir" else p["filename"]))
            return [{"volid": v, "vmid": d["vmid"], "format": d["format"], "size": d["size"]}
                    for v, d in self.volumes.items() if v.startswith(sid + ":") and ("vmid" not in p or int(p["vmid"]) == d["vmid"])]
        m = re.fullmatch(rf"/nodes/{n}/qemu/(\d+)(?:/(.*))?", path)
        if m:
            return self.qemu(method, int(m.group(1)), m.group(2) or "", p)
        raise PveFault(501, f"Method '{method} {path}' not implemented")

    def qemu(self, method: str, vmid: int, sub: str, p: dict) -> Any:  # noqa: C901
        vm = self.vm(vmid)
        if (method, sub) == ("GET", "config"):
            return dict(vm["config"], digest="0123")
        if (method, sub) == ("POST", "clone"):
            newid = int(p["newid"])
            if newid in self.vms:
                raise PveFault(500, f"unable to create VM {newid}: config file already exists")
            if not vm["template"] and p.get("full") != "1":
                raise PveFault(500, "Linked clone feature is not supported for 'local-zfs:vm-9000-disk-0'")
            config = {k: v for k, v in vm["config"].items() if k != "template"}
            config["name"] = p["name"]
            config["description"] = p.get("description", "")
            config["scsi0"] = f"local-zfs:base-9000-disk-0/vm-{newid}-disk-0,size=4G"
            self.volumes[f"local-zfs:base-9000-disk-0/vm-{newid}-disk-0"] = {"vmid": newid, "size": 4 << 30, "format": "raw"}
            self.vms[newid] = {"name": p["name"], "node": self.node, "template": 0, "status": "stopped", "lock": "clone",
                               "config": config}
            return self.task("qmclone", vmid, done=lambda: self.vms[newid].update(lock=None))
        if (method, sub) == ("POST", "config"):
            self._unlocked(vm)
            for key, value in p.items():
                d = DISK_RE.match(key)
                if d:
                    opts = dict(o.partition("=")[::2] for o in value.split(",")[1:])
                    bad = set(opts) - DISK_KEYS[d.group(1)]
                    if bad:
                        raise PveFault(400, "Parameter verification failed.",
                                       {key: f"invalid format - invalid key in comma-separated list property: {sorted(bad)[0]}"})
                    wrong = sorted(o for o, v in opts.items() if o in DISK_VALUES and v not in DISK_VALUES[o])
                    if wrong:
                        raise PveFault(400, "Parameter verification failed.",
                                       {key: f"invalid format - format error\n{key}.{wrong[0]}: value '{opts[wrong[0]]}' "
                                             f"is not one of {', '.join(DISK_VALUES[wrong[0]])}"})
                    target = value.split(",")[0]
                    sid, _, size = target.partition(":")
                    if re.fullmatch(r"\d+(\.\d+)?", size):
                        volid = self.alloc(sid, vmid, size, opts.get("format"))
                        value = ",".join([volid, *value.split(",")[1:], f"size={size}G"])
                vm["config"][key] = value
                if key == "name":
                    vm["name"] = value
            return self.task("qmconfig", vmid)
        if (method, sub) == ("POST", "status/start"):
            self._unlocked(vm)
            vm.update(status="running", pings=0, pid=4000 + vmid)
            return self.task("qmstart", vmid)
        if (method, sub) == ("POST", "status/stop"):
            vm["status"] = "stopped"
            return self.task("qmstop", vmid)
        if (method, sub) == ("GET", "status/current"):
            return {"status": vm["status"], "name": vm["name"], "vmid": vmid, "qmpstatus": vm["status"],
                    **({"pid": vm["pid"], "running-qemu": "9.0.2"} if vm["status"] == "running" else {}),
                    **({"lock": vm["lock"]} if vm["lock"] else {})}
        if (method, sub) == ("DELETE", ""):
            self._unlocked(vm)
            if vm["status"] == "running":
                raise PveFault(500, f"VM {vmid} is running - destroy failed")
            if vm["config"].get("protection") == "1":
                raise PveFault(500, "can't remove VM - protection mode enabled")

            def gone() -> None:
                self.vms.pop(vmid, None)
                if p.get("destroy-unreferenced-disks") == "1":
                    for volid in [v for v, d in self.volumes.items() if d["vmid"] == vmid]:
                        del self.volumes[volid]
            return self.task("qmdestroy", vmid, done=gone)
        if sub.startswith("agent/"):
            return self.agent(vm, sub[6:], p)
        raise PveFault(501, f"Method '{method} /nodes/{self.node}/qemu/{vmid}/{sub}' not implemented")

    def agent(self, vm: dict, cmd: str, p: dict) -> Any:
        if not vm["config"].get("agent"):
            raise PveFault(500, "No QEMU guest agent configured")
        if vm["status"] != "running":
            raise PveFault(500, f"VM {vm['name']} is not running")
        if vm["pings"] < self.agent_pings:
            vm["pings"] += 1
            raise PveFault(500, "QEMU guest agent is not running")
        if cmd == "ping":
            return {"result": {}}
        if cmd == "exec":
            argv = p["command"] if isinstance(p["command"], list) else [p["command"]]
            stdin = p.get("input-data")
            pid = 1000 + next(self._seq)
            prog = self.programs.get(argv[0])
            code, out, err = prog(argv, stdin.encode("latin-1") if stdin is not None else None) if prog else (127, b"", b"nope")
            self.procs[pid] = {"argv": argv, "code": code, "out": out, "err": err, "polls": 1}
            return {"pid": pid}
        if cmd == "exec-status":
            pid = int(p["pid"])
            if pid not in self.procs:
                raise PveFault(500, "Agent error: Invalid parameter 'pid'")
            proc = self.procs[pid]
            if proc["polls"] > 0:
                proc["polls"] -= 1
                return {"exited": 0}
            del self.procs[pid]  # QGA forgets it once it said it exited
            out = {"exited": 1, "exitcode": proc["code"]}
            if proc["out"]:
                out["out-data"] = proc["out"].decode("latin-1")
            if proc["err"]:
                out["err-data"] = proc["err"].decode("latin-1")
            return out
        if cmd == "file-read":
            if p["file"] not in self.files:
                raise PveFault(500, f"Agent error: failed to open file '{p['file']}': No such file or directory")
            return {"content": self.files[p["file"]].decode("latin-1"), "bytes-read": len(self.files[p["file"]])}
        if cmd == "file-write":
            content = p["content"]
            self.files[p["file"]] = base64.b64decode(content) if p.get("encode") == "0" else content.encode()
            return None
        raise PveFault(501, f"agent/{cmd} not implemented")


def _form(text: str) -> dict:
    out: dict = {}
    for key, values in urllib.parse.parse_qs(text, keep_blank_values=True).items():
        out[key] = values if key == "command" or len(values) > 1 else values[0]
    return out


def _response(request, status: int, reason: str, body: dict) -> requests.Response:  # noqa: ANN001
    r = requests.Response()
    r.status_code = status
    r.reason = reason
    r._content = json.dumps(body).encode()
    r.headers["Content-Type"] = "application/json;charset=UTF-8"
    r.url = request.url
    r.request = request
    return r


# ---- the fake's own checks --------------------------------------------------------------------


def test_minipve_refuses_python_booleans_and_wrong_tokens():
    from vmbench.drivers.proxmox.api import PveApi, Secret
    from vmbench.scenario.model import ProxmoxConfig

    cfg = ProxmoxConfig(host="pve.test", node="pve1", template=9000, storage="local-zfs", token_id=TOKEN[0], secret_env="X")
    pve = MiniPve()
    api = PveApi(cfg, Secret(TOKEN[1]))
    api.session.mount("https://", pve)
    assert api.get("/version")["release"] == "8.4"
    bad = PveApi(cfg, Secret("wrong"))
    bad.session.mount("https://", pve)
    from vmbench.drivers.proxmox.errors import PveAuthError

    try:
        bad.get("/version")
    except PveAuthError:
        pass
    else:  # pragma: no cover
        raise AssertionError("a wrong token must be refused")
