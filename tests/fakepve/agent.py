"""Guest agent endpoints (qemu-server API2/Qemu/Agent.pm and QemuServer/Agent.pm).

Every call first asserts the agent is available as PVE does: "No QEMU guest agent
configured" (no ``agent`` key), "VM N is not running", then a guest-ping ("QEMU guest agent
is not running").  The fake's ``agent_pings`` makes the first pings after a start fail even if
the backend would answer.  A QGA error reply becomes PVE's "VM N qga command 'X' failed - D".
Guest output is returned the way PVE's JSON encoder does it: the decoded bytes as Latin-1
code points (non-ASCII UTF-8 output arrives double-encoded)."""

from __future__ import annotations

import base64
from typing import Any

from .backends import AgentUnavailable, BackendError
from .handlers import api, check_node, flag, is_running
from .model import State, Vm, die

MAX_READ = 16 * 1024 * 1024
CHUNK = 1024 * 1024


def assert_agent(s: State, vm: Vm) -> None:
    if vm.config.get("agent") is None:
        raise die("No QEMU guest agent configured")
    if not is_running(s, vm):
        raise die(f"VM {vm.vmid} is not running")
    vm.agent_calls += 1
    if not s.agent_enabled(vm.run_config) or vm.agent_calls < s.agent_pings:
        raise die("QEMU guest agent is not running")
    try:
        reply = s.backend.agent(s.view(vm, vm.run_config), {"execute": "guest-ping"}, 3)
    except AgentUnavailable:
        raise die("QEMU guest agent is not running") from None
    if "error" in reply:
        raise die("QEMU guest agent is not running")


def qga(s: State, vm: Vm, execute: str, args: dict | None = None, timeout: float = 30) -> Any:
    cmd: dict[str, Any] = {"execute": execute}
    if args is not None:
        cmd["arguments"] = args
    try:
        reply = s.backend.agent(s.view(vm, vm.run_config), cmd, timeout)
    except AgentUnavailable as exc:
        raise die(f"VM {vm.vmid} qga command '{execute}' failed - got timeout ({exc})") from None
    except BackendError as exc:
        raise die(f"VM {vm.vmid} qga command '{execute}' failed - {exc}") from None
    if "error" in reply:
        raise die(f"VM {vm.vmid} qga command '{execute}' failed - {reply['error'].get('desc', reply['error'])}")
    return reply.get("return")


def latin1(data: bytes) -> str:
    return data.decode("latin-1")


def vm_for_agent(s: State, p: dict) -> Vm:
    check_node(s, p)
    vm = s.vm(p["vmid"], p.get("node"))
    assert_agent(s, vm)
    return vm


@api("POST", "/nodes/{node}/qemu/{vmid}/agent/ping")
def ping(s: State, p: dict) -> dict:
    vm = vm_for_agent(s, p)
    return {"result": qga(s, vm, "guest-ping")}


@api("POST", "/nodes/{node}/qemu/{vmid}/agent/exec")
def exec_(s: State, p: dict) -> dict:
    vm = vm_for_agent(s, p)
    args: dict[str, Any] = {"capture-output": True}
    cmd = list(p.get("command") or [])
    if cmd:
        args["path"], args["arg"] = cmd[0], cmd[1:]
    if p.get("input-data") is not None:
        args["input-data"] = base64.b64encode(perl_bytes(str(p["input-data"]))).decode()
    if "path" not in args and "input-data" not in args:
        raise die("command or input-data (or both) required")
    return qga(s, vm, "guest-exec", args)


@api("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status")
def exec_status(s: State, p: dict) -> dict:
    vm = vm_for_agent(s, p)
    res = dict(qga(s, vm, "guest-exec-status", {"pid": int(p["pid"])}) or {})
    for key in ("out-data", "err-data"):
        if res.get(key):
            res[key] = latin1(base64.b64decode(res[key]))
    return {k: (int(v) if isinstance(v, bool) else v) for k, v in res.items()}


@api("GET", "/nodes/{node}/qemu/{vmid}/agent/file-read")
def file_read(s: State, p: dict) -> dict:
    vm = vm_for_agent(s, p)
    count = int(p["count"]) if p.get("count") is not None else MAX_READ
    offset = int(p.get("offset") or 0)
    decode = flag(p, "decode", True)
    handle = qga(s, vm, "guest-file-open", {"path": p["file"]})
    if offset > 0:
        qga(s, vm, "guest-file-seek", {"handle": handle, "offset": offset, "whence": "set"})
    read, eof, chunks = 0, False, []
    while read < count and not eof:
        r = qga(s, vm, "guest-file-read", {"handle": handle, "count": min(CHUNK, count - read)})
        data = r.get("buf-b64", "")
        chunks.append(latin1(base64.b64decode(data)) if decode else data)
        read += int(r.get("count", 0))
        eof = bool(r.get("eof"))
    try:
        qga(s, vm, "guest-file-close", {"handle": handle})
    except Exception:  # noqa: BLE001 - PVE only warns
        pass
    out: dict[str, Any] = {"content": "".join(chunks), "bytes-read": read}
    if not eof:
        out["truncated"] = 1
    return out


@api("POST", "/nodes/{node}/qemu/{vmid}/agent/file-write")
def file_write(s: State, p: dict) -> None:
    vm = vm_for_agent(s, p)
    content = str(p["content"])
    buf = base64.b64encode(perl_bytes(content)).decode() if flag(p, "encode", True) else content
    handle = qga(s, vm, "guest-file-open", {"path": p["file"], "mode": "wb"})
    qga(s, vm, "guest-file-write", {"handle": handle, "buf-b64": buf})
    qga(s, vm, "guest-file-close", {"handle": handle})
    return None


def perl_bytes(text: str) -> bytes:
    """What Perl's encode_base64 sees of a decoded parameter: characters <= U+00FF as single
    bytes; anything wider dies."""
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:
        raise die("Wide character in subroutine entry") from None
