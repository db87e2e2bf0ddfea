"""What a fake VM does: nothing (NullBackend) or a real guest under libvirt (LibvirtBackend).

The fake PVE model calls a backend with :class:`VmView` (the VM's configuration as PVE holds
it plus the resolved volume files).  ``agent`` takes raw QGA JSON (``{"execute": "guest-exec",
"arguments": {...}}``) and returns the raw QGA reply (``{"return": ...}`` or ``{"error":
{"class", "desc"}}``); it raises :class:`AgentUnavailable` when no agent answers."""

from __future__ import annotations

import base64
import itertools
import os
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from vmbench.fio.gate import ARMED_SCRIPT


def waits_on_gate(argv: list[str]) -> bool:
    """fio armed on its gate, or vmbench's wait for it (vmbench.fio.gate): both wait for
    another command, so the fake runs them in the background."""
    return any(a.startswith("--exec_prerun=") or a == ARMED_SCRIPT for a in argv)


class AgentUnavailable(Exception):
    """No guest agent answers (not connected yet, or it timed out)."""


class BackendError(Exception):
    """The backend could not do what a task asked (the task ends with this text)."""


@dataclass
class DriveView:
    key: str  # virtio1
    bus: str  # virtio | scsi | sata | ide
    index: int
    opts: dict  # the parsed property string (cache, iothread, serial, aio, ...)
    volid: str
    path: str  # the volume's file
    fmt: str  # raw | qcow2
    size: int
    boots_itself: bool = False  # its content came from an import: boot it from the disk (BIOS), not a given kernel


@dataclass
class VmView:
    vmid: int
    name: str
    config: dict  # the configuration the VM was started with
    drives: list[DriveView] = field(default_factory=list)
    root: DriveView | None = None  # the boot disk (first in 'boot: order=...')


class Backend(Protocol):
    def setup(self, root: Path) -> None: ...
    def template_volume(self, path: str, fmt: str) -> int: ...  # creates the template's base disk; its size
    def create_volume(self, path: str, size: int, fmt: str, backing: str | None = None) -> None: ...
    def import_volume(self, source: str, path: str, fmt: str) -> int: ...  # a copy of source's content; its virtual size
    def rename_volume(self, old: str, new: str) -> None: ...
    def remove_volume(self, path: str) -> None: ...
    def start(self, vm: VmView) -> int: ...  # pid
    def stop(self, vm: VmView) -> None: ...
    def running(self, vm: VmView) -> bool: ...
    def agent(self, vm: VmView, qga_command: dict, timeout: float) -> dict: ...
    def close(self) -> None: ...


def sparse_file(path: str, size: int) -> None:
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "xb") as f:
        f.truncate(size)


def virtual_size(path: str) -> int:
    """A disk image's virtual size: the qcow2 header's (big-endian u64 at byte 24), else the
    file's size (raw)."""
    with open(path, "rb") as f:
        head = f.read(32)
    if head[:4] == b"QFI\xfb" and len(head) >= 32:
        return int.from_bytes(head[24:32], "big")
    return os.path.getsize(path)


def remove_file(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


ExecResult = dict  # {"exitcode": 0, "out": str|bytes, "err": str|bytes, "signal": N}


class NullBackend:
    """No VM at all: the pid is this process's, volumes are sparse files, and the agent
    answers guest-ping, guest-exec(-status) and guest-file-* from canned data.

    ``exec_results`` maps an argv tuple (or its first word) to an ExecResult, or
    ``exec_handler(argv, input_data: bytes) -> ExecResult`` computes one; the default is
    exit code 0 and no output.  ``exec_polls`` exec-status reads report ``exited: 0`` before
    the result; after the result has been read once the pid is forgotten (as QGA does)."""

    TEMPLATE_SIZE = 2 << 30

    def __init__(self, exec_results: dict | None = None, exec_handler: Callable[[list, bytes], ExecResult] | None = None,
                 exec_polls: int = 1, files: dict[str, bytes] | None = None) -> None:
        self.exec_results = dict(exec_results or {})
        self.exec_handler = exec_handler
        self.exec_polls = exec_polls
        self.files: dict[tuple[int, str], bytes] = {}
        self._seed_files = dict(files or {})
        self.executed: list[tuple[int, list[str], bytes]] = []
        self._pids = itertools.count(1000)
        self._handles = itertools.count(1)
        self._procs: dict[tuple[int, int], dict] = {}
        self._open: dict[int, dict] = {}
        self._running: set[int] = set()

    def setup(self, root: Path) -> None:
        pass

    def template_volume(self, path: str, fmt: str) -> int:
        sparse_file(path, self.TEMPLATE_SIZE)
        return self.TEMPLATE_SIZE

    def create_volume(self, path: str, size: int, fmt: str, backing: str | None = None) -> None:
        sparse_file(path, size)

    def import_volume(self, source: str, path: str, fmt: str) -> int:
        """A sparse file of the source's virtual size (no content: nothing boots it)."""
        size = virtual_size(source)
        sparse_file(path, size)
        return size

    def rename_volume(self, old: str, new: str) -> None:
        os.rename(old, new)

    def remove_volume(self, path: str) -> None:
        remove_file(path)

    def start(self, vm: VmView) -> int:
        self._running.add(vm.vmid)
        for name, data in self._seed_files.items():
            self.files.setdefault((vm.vmid, name), data)
        return os.getpid()

    def stop(self, vm: VmView) -> None:
        self._running.discard(vm.vmid)
        for key in [k for k in self._procs if k[0] == vm.vmid]:
            del self._procs[key]

    def running(self, vm: VmView) -> bool:
        return vm.vmid in self._running

    def close(self) -> None:
        self._running.clear()

    # ---- the guest agent -----------------------------------------------------------------

    def _result(self, vm: VmView, argv: list[str], data: bytes) -> ExecResult:
        if self.exec_handler is not None:
            return self.exec_handler(argv, data)
        for key in (tuple(argv), argv[0] if argv else None):
            if key in self.exec_results:
                r = self.exec_results[key]
                return r(argv, data) if callable(r) else r
        return {"exitcode": 0}

    def _exec(self, proc: dict, vm: VmView, argv: list[str], data: bytes) -> None:
        try:
            result = self._result(vm, argv, data)
        except Exception as exc:  # noqa: BLE001 - the guest's command failed, as the fake says
            result = {"exitcode": 1, "err": f"{type(exc).__name__}: {exc}"}
        proc["result"] = result

    def agent(self, vm: VmView, qga_command: dict, timeout: float) -> dict:
        if vm.vmid not in self._running:
            raise AgentUnavailable("VM not running")
        cmd = qga_command["execute"]
        args = qga_command.get("arguments") or {}
        if cmd == "guest-ping":
            return {"return": {}}
        if cmd == "guest-exec":
            argv = [args["path"], *args.get("arg", [])] if "path" in args else []
            data = base64.b64decode(args.get("input-data", ""))
            self.executed.append((vm.vmid, argv, data))
            pid = next(self._pids)
            proc: dict[str, Any] = {"polls": self.exec_polls, "capture": bool(args.get("capture-output"))}
            self._procs[(vm.vmid, pid)] = proc
            if waits_on_gate(argv):  # runs on its own, as QGA's commands do: the request (and the fake's lock) is not held
                threading.Thread(target=self._exec, args=(proc, vm, argv, data), daemon=True).start()
            else:  # a quick command: its result is there before the pid is returned
                self._exec(proc, vm, argv, data)
            return {"return": {"pid": pid}}
        if cmd == "guest-exec-status":
            proc = self._procs.get((vm.vmid, args.get("pid")))
            if proc is None:
                return _qga_error("Invalid parameter 'pid'")
            if "result" not in proc:
                return {"return": {"exited": False}}
            if proc["polls"] > 0:
                proc["polls"] -= 1
                return {"return": {"exited": False}}
            del self._procs[(vm.vmid, args["pid"])]
            r = proc["result"]
            out: dict[str, Any] = {"exited": True}
            if "signal" in r:
                out["signal"] = r["signal"]
            else:
                out["exitcode"] = r.get("exitcode", 0)
            if proc["capture"]:
                for key, name in (("out", "out-data"), ("err", "err-data")):
                    data = r.get(key)
                    if data:
                        out[name] = base64.b64encode(data.encode() if isinstance(data, str) else data).decode()
            return {"return": out}
        if cmd == "guest-file-open":
            path, mode = args["path"], args.get("mode", "r")
            if mode.startswith("r") and (vm.vmid, path) not in self.files:
                return _qga_error(f"failed to open file '{path}' (mode: '{mode}'): No such file or directory")
            handle = next(self._handles)
            self._open[handle] = {"path": path, "pos": 0}
            if mode.startswith("w"):
                self.files[(vm.vmid, path)] = b""
            return {"return": handle}
        if cmd in ("guest-file-read", "guest-file-write", "guest-file-seek", "guest-file-close"):
            h = self._open.get(args.get("handle"))
            if h is None:
                return _qga_error(f"handle '{args.get('handle')}' has not been found")
            key = (vm.vmid, h["path"])
            if cmd == "guest-file-read":
                data = self.files.get(key, b"")[h["pos"]:h["pos"] + int(args.get("count", 4096))]
                h["pos"] += len(data)
                return {"return": {"count": len(data), "buf-b64": base64.b64encode(data).decode(),
                                   "eof": h["pos"] >= len(self.files.get(key, b""))}}
            if cmd == "guest-file-write":
                data = base64.b64decode(args["buf-b64"])
                self.files[key] = self.files.get(key, b"") + data
                return {"return": {"count": len(data), "eof": False}}
            if cmd == "guest-file-seek":
                h["pos"] = int(args["offset"])
                return {"return": {"position": h["pos"], "eof": False}}
            del self._open[args["handle"]]
            return {"return": {}}
        return {"error": {"class": "CommandNotFound", "desc": f"The command {cmd} has not been found"}}


def _qga_error(desc: str) -> dict:
    return {"error": {"class": "GenericError", "desc": desc}}


def qemu_img(*args: str) -> None:
    proc = subprocess.run(["qemu-img", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BackendError(f"qemu-img {' '.join(args)}: {proc.stderr.strip()}")


__all__ = ["AgentUnavailable", "Backend", "BackendError", "DriveView", "NullBackend", "VmView"]
