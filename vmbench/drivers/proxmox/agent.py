"""A Proxmox VE guest as a transport, through the API's guest-agent endpoints (no SSH into guests).

Semantics are :class:`~vmbench.transport.agent.GuestAgentTransport`'s; what differs is how
PVE carries them (qemu-server ``API2/Qemu/Agent.pm``):

- ``agent/exec`` takes ``command`` as an array (repeated form keys) and ``input-data`` as
  plain text of at most 64 KiB, which PVE base64-encodes for QGA after decoding the form as
  UTF-8.  Only printable ASCII survives that unchanged, so any other stdin (a LUKS key) is
  sent base64-encoded and decoded in the guest: ``sh -c 'base64 -d | "$@"'``.
- ``agent/exec-status`` is polled until ``exited``; QGA returns the output only then and
  forgets the pid once it said so, so that answer is read exactly once.  PVE decodes the
  base64 output and sends the bytes as JSON code points 0..255 (Perl byte strings), hence
  ``latin-1`` back to bytes.
- Every command runs under ``setsid -w``, so its pid is its process group: a timeout or
  :meth:`kill` runs ``kill -KILL -- -PGID`` (fio's workers too; procps kill, as dash's
  builtin takes no ``--``), the pid alone as fallback.
- ``agent/file-read`` returns a whole file (16 MiB at most; beyond that the rest is read
  with ``offset``/``count`` where qemu-server >= 9.1.5 has them, else with ``dd`` chunks).
- ``agent/file-write`` opens with mode ``wb`` and takes 61440 characters, so it cannot be
  chunked: small files go there (base64, ``encode=0``), larger ones through exec appends.
"""

from __future__ import annotations

import base64
import logging
import time
from typing import Any, Callable, Mapping, Protocol, Sequence

from ...command import Completed, format_argv, tail
from ...errors import CommandError, GuestError, VmbenchError
from ...transport.agent import is_true, wait_exited
from .errors import PveAnswerLost, PveApiError, PveParameterError

log = logging.getLogger(__name__)

INPUT_MAX = 64 * 1024  # characters of input-data PVE takes
B64_INPUT_RAW_MAX = INPUT_MAX // 4 * 3  # raw bytes whose base64 fits in input-data (48 KiB)
FILE_WRITE_MAX = 61440  # characters of file-write content
FILE_WRITE_RAW_MAX = FILE_WRITE_MAX // 4 * 3  # raw bytes whose base64 fits (45 KiB)
READ_MAX = 16 << 20  # file-read and exec output cap
DD_CHUNK = 8 << 20  # bytes per dd read when file-read cannot go on
PATH = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"


class AgentApi(Protocol):
    """The two calls this transport makes (:class:`~vmbench.drivers.proxmox.api.PveApi`)."""

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...

    def post(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


class PveAgentTransport:
    def __init__(self, name: str, api: AgentApi, node: str, vmid: int, *, poll_interval: float = 0.5,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self.name = name
        self.api = api
        self.base = f"/nodes/{node}/qemu/{int(vmid)}/agent"
        self.poll_interval = poll_interval
        self.clock = clock
        self.sleep = sleep

    def __repr__(self) -> str:
        return f"PveAgentTransport({self.name}, {self.base})"

    # ---- API calls ----------------------------------------------------------------------------

    def _call(self, method: str, endpoint: str, params: Mapping[str, Any]) -> Any:
        """One agent call; the agent's own failures (PVE's 500s) become GuestError, the
        rest (permissions, token, unreachable API) stay what they are."""
        try:
            if method == "GET":
                return self.api.get(f"{self.base}/{endpoint}", params)
            return self.api.post(f"{self.base}/{endpoint}", params)
        except PveApiError as exc:
            if exc.status == 500:
                raise GuestError(f"{self.name}: guest agent {endpoint}: {exc.reason or exc.message}",
                                 "is qemu-guest-agent running in the guest?") from None
            raise

    def _start(self, command: list[str], input_data: str | None = None) -> int:
        params: dict[str, Any] = {"command": command}
        if input_data is not None:
            params["input-data"] = input_data
        try:
            reply = self._call("POST", "exec", params) or {}
        except PveAnswerLost as exc:  # its pid is lost with the answer: nothing can wait for it or kill it
            raise GuestError(f"{self.name}: the guest command {format_argv(command)} may or may not have started: {exc.message}",
                             "the step cannot be sent again safely; the VM is removed with the run, and "
                             "`vmbench run --resume` measures what is missing") from None
        try:
            return int(reply["pid"])
        except (KeyError, TypeError, ValueError):
            raise GuestError(f"{self.name}: guest agent exec gave no pid") from None

    def _status(self, pid: int) -> dict:
        return self._call("GET", "exec-status", {"pid": pid}) or {}

    # ---- commands -----------------------------------------------------------------------------

    def _wrap(self, argv: list[str], input: bytes | None, env: Mapping[str, str] | None) -> tuple[list[str], str | None]:
        """The command PVE runs (its own process group) and its input-data."""
        envprefix = ["env", *(f"{k}={v}" for k, v in env.items()), PATH] if env else []
        if input is None:
            return ["setsid", "-w", *envprefix, *argv], None
        if _plain(input):
            if len(input) > INPUT_MAX:
                raise GuestError(f"{self.name}: stdin of {format_argv(argv)} is {len(input)} bytes; "
                                 f"the Proxmox agent API takes at most {INPUT_MAX}")
            return ["setsid", "-w", *envprefix, *argv], input.decode("ascii")
        if len(input) > B64_INPUT_RAW_MAX:
            raise GuestError(f"{self.name}: stdin of {format_argv(argv)} is {len(input)} bytes of binary data; "
                             f"the Proxmox agent API takes at most {B64_INPUT_RAW_MAX}")
        return (["setsid", "-w", "sh", "-c", 'base64 -d | "$@"', "sh", *envprefix, *argv],
                base64.b64encode(input).decode("ascii"))

    def _exec(self, argv: list[str], command: list[str], input_data: str | None, timeout: float | None,
              on_wait: Callable[[float], None] | None) -> tuple[int, bytes, bytes]:
        """Start, poll until exited (read once), return (exit code, stdout, stderr)."""
        started = self.clock()
        pid = self._start(command, input_data)
        def kill() -> None:
            self._kill(pid)
            self._collect(pid)

        try:
            status = wait_exited(self.name, argv, lambda: self._status(pid), kill,
                                 started=started, clock=self.clock, sleep=self.sleep, poll_interval=self.poll_interval,
                                 timeout=timeout, on_wait=on_wait)
        except (KeyboardInterrupt, SystemExit):  # Ctrl-C, SIGTERM: do not leave fio running in the guest
            self._kill(pid)
            raise
        if is_true(status.get("out-truncated")) or is_true(status.get("err-truncated")):
            raise GuestError(f"{self.name}: output of {format_argv(argv)} exceeded the guest agent's limit",
                             "vmbench bug: large outputs must be written to a file in the guest and read back")
        if status.get("exitcode") is not None:
            code = int(status["exitcode"])
        else:
            code = 128 + int(status.get("signal") or 0)
        return code, _bytes(status.get("out-data")), _bytes(status.get("err-data"))

    def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None,
            env: Mapping[str, str] | None = None, check: bool = True,
            on_wait: Callable[[float], None] | None = None) -> Completed:
        argv = [str(a) for a in argv]
        if not argv:
            raise ValueError("run() needs a non-empty argv")
        log.debug("guest %s: %s", self.name, format_argv(argv))
        command, input_data = self._wrap(argv, input, env)
        code, out_b, err_b = self._exec(argv, command, input_data, timeout, on_wait)
        out, err = out_b.decode("utf-8", errors="replace"), err_b.decode("utf-8", errors="replace")
        done = Completed(tuple(argv), code, out, err)
        if check and code != 0:
            log.error("guest %s: command failed (exit %d): %s", self.name, code, format_argv(argv))
            if err.strip():
                log.error("stderr:\n%s", tail(err))
            raise CommandError(f"{self.name}: command failed (exit {code}): {format_argv(argv)}"
                               + (f"\n{tail(err)}" if err.strip() else ""),
                               argv=argv, returncode=code, stdout=out, stderr=err)
        return done

    def spawn(self, argv: Sequence[str]) -> int:
        """Start argv in the guest without waiting (output discarded); returns its pid, which
        is also its process group."""
        argv = [str(a) for a in argv]
        log.debug("guest %s: spawn %s", self.name, format_argv(argv))
        return self._start(["setsid", "-w", "sh", "-c", 'exec "$@" >/dev/null 2>&1', "sh", *argv])

    def kill(self, handle: object) -> None:
        """Kill what :meth:`spawn` started (its process group), then collect its status once
        (so the agent forgets it)."""
        if not isinstance(handle, int):
            raise TypeError(f"not a pid from spawn: {handle!r}")
        pid = handle
        self._kill(pid)
        self._collect(pid)

    def _kill(self, pid: int) -> None:
        """``kill -KILL -- -PGID`` (procps kill: dash's builtin takes no ``--``), else the pid alone."""
        try:
            for argv in (["kill", "-KILL", "--", f"-{pid}"], ["kill", "-KILL", str(pid)]):
                if self._collect(self._start(argv), polls=40) == 0:
                    return
            log.warning("guest %s: could not kill pid %d (gone already?)", self.name, pid)
        except VmbenchError as exc:  # the guest or the API may be gone; the caller tears the VM down
            log.warning("guest %s: could not kill pid %d: %s", self.name, pid, exc)

    def _collect(self, pid: int, polls: int = 20) -> int | None:
        """Poll a pid until it exited (that answer is the last one asked for), bounded;
        its exit code, or None."""
        for _ in range(polls):
            try:
                status = self._status(pid)
            except VmbenchError:
                return None
            if is_true(status.get("exited")):
                return int(status["exitcode"]) if status.get("exitcode") is not None else None
            self.sleep(0.05)
        return None

    # ---- files --------------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        reply = self._call("GET", "file-read", {"file": path}) or {}
        data = _bytes(reply.get("content"))
        if not is_true(reply.get("truncated")):
            return data
        return data + self._read_rest(path, len(data))

    def _read_rest(self, path: str, offset: int) -> bytes:
        """Past file-read's 16 MiB: offset/count (qemu-server >= 9.1.5), else dd chunks."""
        chunks = []
        try:
            while True:
                reply = self._call("GET", "file-read", {"file": path, "offset": offset, "count": READ_MAX, "decode": False}) or {}
                part = base64.b64decode(reply.get("content") or "")
                chunks.append(part)
                offset += len(part)
                if not part or not is_true(reply.get("truncated")):
                    return b"".join(chunks)
        except PveParameterError:  # no offset/count on this PVE: read the rest with dd
            pass
        while True:
            argv = ["dd", f"if={path}", "iflag=skip_bytes,count_bytes", f"skip={offset}", f"count={DD_CHUNK}", "status=none"]
            code, out, err = self._exec(argv, ["setsid", "-w", *argv], None, 300, None)
            if code != 0:
                raise CommandError(f"{self.name}: reading {path} failed (exit {code})", argv=argv, returncode=code,
                                   stderr=err.decode("utf-8", errors="replace"))
            chunks.append(out)
            offset += len(out)
            if len(out) < DD_CHUNK:
                return b"".join(chunks)

    def write_file(self, path: str, data: bytes, mode: int | None = 0o600) -> None:
        """Write ``data`` to ``path``; ``mode=None`` leaves the file's mode alone (for /proc, /sys)."""
        if mode is not None:  # file-write creates files 0666 & ~umask: create it with the right mode first
            self.run(["install", "-m", f"{mode:o}", "/dev/null", path], timeout=30)
        if len(data) <= FILE_WRITE_RAW_MAX:
            self._call("POST", "file-write", {"file": path, "content": base64.b64encode(data).decode("ascii"),
                                              "encode": False})
            return
        for i in range(0, len(data), B64_INPUT_RAW_MAX):
            chunk = base64.b64encode(data[i:i + B64_INPUT_RAW_MAX])
            self.run(["sh", "-c", f'base64 -d {">" if i == 0 else ">>"} "$1"', "sh", path], input=chunk, timeout=120)


def _plain(data: bytes) -> bool:
    """Printable ASCII, tabs and newlines: what reaches the guest unchanged as input-data."""
    return all(32 <= b < 127 or b in (9, 10, 13) for b in data)


def _bytes(value: Any) -> bytes:
    """PVE's decoded agent output: code points 0..255 are the bytes (Perl byte strings as JSON)."""
    if not value:
        return b""
    text = str(value)
    try:
        return text.encode("latin-1")
    except UnicodeEncodeError:  # already text beyond latin-1: take it as UTF-8
        return text.encode("utf-8")
