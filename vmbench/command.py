"""The one place where vmbench runs external commands on the local machine.

Commands are argv lists, never shell strings.  ``run`` logs the exact command when it
fails and raises :class:`~vmbench.errors.CommandError` carrying argv, exit code and the
tail of stderr.  Secrets are passed with ``input=`` (stdin) so they never appear in argv,
in ``ps`` or in a log line.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from .errors import CommandError, CommandTimeout

log = logging.getLogger(__name__)

_TAIL_LINES = 20


@dataclass(frozen=True)
class Completed:
    """What a finished command left: exit status and decoded output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


def format_argv(argv: Sequence[str]) -> str:
    """Render an argv list the way a user would type it (for logs and messages only)."""
    return shlex.join(str(a) for a in argv)


def tail(text: str, lines: int = _TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def run(
    argv: Sequence[str],
    *,
    input: bytes | str | None = None,
    timeout: float | None = None,
    check: bool = True,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    capture: bool = True,
    on_wait: Callable[[float], None] | None = None,
) -> Completed:
    """Run ``argv`` and wait for it.

    ``input`` goes to stdin (use it for secrets).  ``env`` entries are added to the
    current environment.  With ``check`` (the default) a non-zero exit raises
    :class:`CommandError`; a timeout always raises :class:`CommandTimeout` (the command is
    killed).  ``on_wait(elapsed)`` is called about once a second while it runs.
    """
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("run() needs a non-empty argv")
    full_env = None
    if env:
        full_env = dict(os.environ)
        full_env.update(env)
    data = input.encode() if isinstance(input, str) else input
    log.debug("run: %s", format_argv(argv))
    proc = _start(argv, data, full_env, cwd, capture)
    out, err = _wait(proc, argv, data, timeout, on_wait)
    done = Completed(tuple(argv), proc.returncode, _decode(out), _decode(err))
    if check and proc.returncode != 0:
        raise _failed(done)
    return done


def _start(argv: list[str], data: bytes | None, env: dict[str, str] | None, cwd: str | os.PathLike[str] | None,
           capture: bool) -> subprocess.Popen:
    """Start ``argv`` in its own process group, stdin a pipe only when there is ``data``."""
    try:
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE if capture else None,
            stderr=subprocess.PIPE if capture else None,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: a timeout kills fio's workers too
        )
    except FileNotFoundError as exc:
        log.error("command not found: %s", format_argv(argv))
        raise CommandError(
            f"command not found: {argv[0]}",
            argv=argv,
            hint="install it (make demo / make test install everything vmbench needs)",
        ) from exc


def _wait(proc: subprocess.Popen, argv: list[str], data: bytes | None, timeout: float | None,
          on_wait: Callable[[float], None] | None) -> tuple[bytes | None, bytes | None]:
    """Feed ``data`` to the command and wait for its output, calling ``on_wait`` about once a
    second; at ``timeout`` the command is killed and :class:`CommandTimeout` raised; on any
    other exception (Ctrl-C included) it is killed and the exception raised again."""
    started = time.monotonic()
    pending = data
    while True:
        wait = 1.0 if on_wait else None
        if timeout is not None:
            left = timeout - (time.monotonic() - started)
            wait = max(0.01, min(wait, left)) if wait is not None else max(0.01, left)
        try:
            return proc.communicate(input=pending, timeout=wait)
        except subprocess.TimeoutExpired:
            pending = None  # communicate() keeps feeding stdin across calls
            elapsed = time.monotonic() - started
            if timeout is not None and elapsed >= timeout:
                raise _timed_out(proc, argv, timeout) from None
            if on_wait:
                on_wait(elapsed)
        except BaseException:
            _kill(proc)
            raise


def _timed_out(proc: subprocess.Popen, argv: list[str], timeout: float) -> CommandTimeout:
    """Kill the command that ran out of time; the error saying so, with what output it left."""
    killed_out, killed_err = _kill(proc)
    log.error("command timed out after %ss: %s", timeout, format_argv(argv))
    return CommandTimeout(
        f"command timed out after {timeout:g}s: {format_argv(argv)}",
        argv=argv,
        stdout=_decode(killed_out),
        stderr=_decode(killed_err),
    )


def _failed(done: Completed) -> CommandError:
    """Log a command that exited non-zero; the error saying so, with the tail of its stderr."""
    argv = list(done.argv)
    log.error("command failed (exit %d): %s", done.returncode, format_argv(argv))
    if done.stderr.strip():
        log.error("stderr:\n%s", tail(done.stderr))
    return CommandError(
        f"command failed (exit {done.returncode}): {format_argv(argv)}"
        + (f"\n{tail(done.stderr)}" if done.stderr.strip() else ""),
        argv=argv,
        returncode=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
    )


def spawn(argv: Sequence[str]) -> subprocess.Popen:
    """Start ``argv`` in the background in its own process group (no stdin, output
    discarded) and return at once; stop it with :func:`kill_spawned`."""
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("spawn() needs a non-empty argv")
    log.debug("spawn: %s", format_argv(argv))
    try:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
    except FileNotFoundError as exc:
        raise CommandError(f"command not found: {argv[0]}", argv=argv) from exc


def kill_spawned(proc: subprocess.Popen) -> None:
    """Kill a :func:`spawn`ed command's whole process group and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            proc.kill()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        log.warning("process %d did not exit after SIGKILL", proc.pid)


def _kill(proc: subprocess.Popen) -> tuple[bytes | None, bytes | None]:
    """Kill the command's whole process group; collect what output there is, bounded (a
    process stuck in the kernel may keep the pipes open)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    try:
        return proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        return b"", b""


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    if isinstance(data, str):
        return data
    return data.decode("utf-8", errors="replace")
