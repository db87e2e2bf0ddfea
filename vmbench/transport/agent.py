"""A guest as a transport, through the QEMU guest agent (guest-exec, guest-file-*).

Works with any channel that can send one agent command and return its reply (libvirt's
``qemuAgentCommand``, Proxmox's agent API, or a fake in tests).  Commands are argv lists;
stdin goes in ``input-data`` so secrets never appear in the guest's process list.  Output
larger than the agent's limit is refused here; large results (fio's json+) are written to
a file in the guest and read back in chunks with :meth:`read_file`.
"""

from __future__ import annotations

import base64
import logging
import threading
import time
from typing import Any, Callable, Mapping, Protocol, Sequence

from ..command import Completed, format_argv, tail
from ..errors import CommandError, CommandTimeout, GuestError

log = logging.getLogger(__name__)

READ_CHUNK = 1 << 20  # bytes per guest-file-read; libvirt caps a reply at a few MiB
#: bytes per guest-file-write: with commands of 1 MiB, qemu-ga 7.2 under TCG stopped answering
#: (libvirt's 30 s timeout, then "agent not available") when 16 threads wrote 300 KB files and
#: ran commands at once; with 32 KiB the same took 7 s without an error (tests/stress.py)
WRITE_CHUNK = 1 << 15
#: a guest command running this long is polled every LONG_POLL_S seconds (was every 0.25 s)
LONG_AFTER_S = 5.0
LONG_POLL_S = 2.0


class AgentChannel(Protocol):
    def __call__(self, command: dict[str, Any], timeout: float) -> Any:
        """Send one agent command; return its ``return`` value; raise GuestError on failure."""
        ...


class OneAtATime:
    """An agent channel that sends one command at a time, whichever thread asks.  The agent
    answers one command at a time anyway; libvirt makes a second caller wait for the first
    (its agent job) and gives up after 30 s, which many threads on one guest reach.  Each
    command is bounded by its own timeout, so a waiting thread waits at most for the others'."""

    def __init__(self, channel: AgentChannel) -> None:
        self._channel = channel
        self._lock = threading.Lock()

    def __call__(self, command: dict[str, Any], timeout: float) -> Any:
        with self._lock:
            return self._channel(command, timeout)


class GuestAgentTransport:
    def __init__(
        self,
        name: str,
        channel: AgentChannel,
        *,
        poll_interval: float = 0.25,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.name = name
        self.channel: AgentChannel = channel if isinstance(channel, OneAtATime) else OneAtATime(channel)
        self.poll_interval = poll_interval
        self.clock = clock
        self.sleep = sleep

    # ---- commands ------------------------------------------------------------------------

    def run(
        self,
        argv: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        on_wait: Callable[[float], None] | None = None,
    ) -> Completed:
        argv = [str(a) for a in argv]
        args: dict[str, Any] = {"path": argv[0], "arg": argv[1:], "capture-output": True}
        if env:
            args["env"] = [f"{k}={v}" for k, v in env.items()] + ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"]
        if input is not None:
            args["input-data"] = base64.b64encode(input).decode()
        log.debug("guest %s: %s", self.name, format_argv(argv))
        started = self.clock()
        reply = self.channel({"execute": "guest-exec", "arguments": args}, 30)
        pid = int(reply["pid"])
        status = wait_exited(self.name, argv, lambda: self.channel({"execute": "guest-exec-status", "arguments": {"pid": pid}}, 30),
                             lambda: self._kill(pid), started=started, clock=self.clock, sleep=self.sleep,
                             poll_interval=self.poll_interval, timeout=timeout, on_wait=on_wait)
        out = _b64(status.get("out-data"))
        err = _b64(status.get("err-data"))
        if status.get("out-truncated") or status.get("err-truncated"):
            raise GuestError(
                f"{self.name}: output of {format_argv(argv)} exceeded the guest agent's limit",
                "vmbench bug: large outputs must be written to a file in the guest and read back",
            )
        code = int(status.get("exitcode", 128 + int(status.get("signal", 0) or 0)))
        done = Completed(tuple(argv), code, out, err)
        if check and code != 0:
            log.error("guest %s: command failed (exit %d): %s", self.name, code, format_argv(argv))
            if err.strip():
                log.error("stderr:\n%s", tail(err))
            raise CommandError(
                f"{self.name}: command failed (exit {code}): {format_argv(argv)}" + (f"\n{tail(err)}" if err.strip() else ""),
                argv=argv,
                returncode=code,
                stdout=out,
                stderr=err,
            )
        return done

    def spawn(self, argv: Sequence[str]) -> int:
        """Start argv in the guest without waiting (output discarded); returns its pid."""
        argv = [str(a) for a in argv]
        log.debug("guest %s: spawn %s", self.name, format_argv(argv))
        reply = self.channel({"execute": "guest-exec", "arguments": {"path": argv[0], "arg": argv[1:], "capture-output": False}}, 30)
        return int(reply["pid"])

    def kill(self, handle: object) -> None:
        """Kill what :meth:`spawn` started, then collect its status (so the agent forgets it)."""
        if not isinstance(handle, int):
            raise TypeError(f"not a pid from spawn: {handle!r}")
        pid = handle
        self._kill(pid)
        for _ in range(20):
            try:
                if self.channel({"execute": "guest-exec-status", "arguments": {"pid": pid}}, 10).get("exited"):
                    return
            except GuestError:
                return
            self.sleep(0.05)

    def _kill(self, pid: int) -> None:
        try:
            self.channel({"execute": "guest-exec", "arguments": {"path": "/bin/kill", "arg": ["-KILL", str(pid)]}}, 10)
        except GuestError as exc:  # the guest may be wedged; the caller tears the VM down
            log.warning("guest %s: could not kill pid %d: %s", self.name, pid, exc)

    # ---- files ---------------------------------------------------------------------------

    def read_file(self, path: str) -> bytes:
        handle = self.channel({"execute": "guest-file-open", "arguments": {"path": path, "mode": "r"}}, 10)
        chunks = []
        try:
            while True:
                part = self.channel({"execute": "guest-file-read", "arguments": {"handle": handle, "count": READ_CHUNK}}, 30)
                data = _b64bytes(part.get("buf-b64"))
                chunks.append(data)
                if part.get("eof") or not data:
                    break
        finally:
            self.channel({"execute": "guest-file-close", "arguments": {"handle": handle}}, 10)
        return b"".join(chunks)

    def read_tail(self, path: str, size: int) -> bytes:
        """The file's last ``size`` bytes (one seek from its end: fio's growing output read while it runs)."""
        handle = self.channel({"execute": "guest-file-open", "arguments": {"path": path, "mode": "r"}}, 10)
        try:
            at = self.channel({"execute": "guest-file-seek", "arguments": {"handle": handle, "offset": 0, "whence": "end"}}, 10)
            start = max(0, int(at.get("position") or 0) - size)
            self.channel({"execute": "guest-file-seek", "arguments": {"handle": handle, "offset": start, "whence": "set"}}, 10)
            part = self.channel({"execute": "guest-file-read", "arguments": {"handle": handle, "count": max(1, size)}}, 30)
            return _b64bytes(part.get("buf-b64"))
        finally:
            self.channel({"execute": "guest-file-close", "arguments": {"handle": handle}}, 10)

    def write_file(self, path: str, data: bytes, mode: int | None = 0o600) -> None:
        """Write ``data`` to ``path``; ``mode=None`` leaves the file's mode alone (for /proc, /sys)."""
        if mode is not None:
            # guest-file-open creates files 0666 & ~umask; create it with the right mode first.
            self.run(["install", "-m", f"{mode:o}", "/dev/null", path], timeout=30)
        handle = self.channel({"execute": "guest-file-open", "arguments": {"path": path, "mode": "w"}}, 10)
        try:
            for i in range(0, max(len(data), 1), WRITE_CHUNK):
                chunk = data[i : i + WRITE_CHUNK]
                self.channel(
                    {"execute": "guest-file-write", "arguments": {"handle": handle, "buf-b64": base64.b64encode(chunk).decode()}},
                    30,
                )
        finally:
            self.channel({"execute": "guest-file-close", "arguments": {"handle": handle}}, 10)


def is_true(value: Any) -> bool:
    """A guest agent boolean: JSON true/false from QGA; 1/0 (or "1"/"0") through Proxmox."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true")
    return bool(value)


def wait_exited(name: str, argv: Sequence[str], status: Callable[[], dict], kill: Callable[[], None], *,
                started: float, clock: Callable[[], float], sleep: Callable[[float], None], poll_interval: float,
                timeout: float | None, on_wait: Callable[[float], None] | None) -> dict:
    """Poll a guest command's status (QGA guest-exec-status, or Proxmox's agent/exec-status)
    with a growing interval until it exited, and return that status; past ``timeout``,
    ``kill`` it and raise CommandTimeout.  Both guest transports wait through this.  A command
    that has run :data:`LONG_AFTER_S` seconds (fio) is asked about every :data:`LONG_POLL_S`
    seconds: each question wakes the agent in the guest, on the vCPUs being measured."""
    interval = min(poll_interval, 0.05)
    while True:
        st = status()
        if is_true(st.get("exited")):
            return st
        elapsed = clock() - started
        if timeout is not None and elapsed > timeout:
            kill()
            log.error("guest %s: command timed out after %ss: %s", name, timeout, format_argv(argv))
            raise CommandTimeout(f"{name}: command timed out after {timeout:g}s: {format_argv(argv)}", argv=list(argv))
        if on_wait:
            try:
                on_wait(elapsed)
            except Exception:  # what the caller's watch raised ends the command too
                _kill_quietly(name, kill)
                raise
        sleep(interval)
        interval = min(interval * 2, poll_interval if elapsed < LONG_AFTER_S else max(poll_interval, LONG_POLL_S))


def _kill_quietly(name: str, kill: Callable[[], None]) -> None:
    """Kill a guest command on the way out of an error, which a failed kill must not hide."""
    try:
        kill()
    except Exception as exc:
        log.warning("guest %s: could not kill the command: %s", name, exc)


def _b64(data: str | None) -> str:
    return _b64bytes(data).decode("utf-8", errors="replace")


def _b64bytes(data: str | None) -> bytes:
    return base64.b64decode(data) if data else b""
