"""The local machine as a transport (the host of a local libvirt)."""

from __future__ import annotations

import contextlib
import os
import subprocess
from pathlib import Path
from typing import Callable, Mapping, Sequence

from .. import command
from ..command import Completed


class LocalTransport:
    """The :class:`~vmbench.transport.base.HostTransport` of this machine."""

    name = "host"

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
        return command.run(argv, input=input, timeout=timeout, env=env, check=check, on_wait=on_wait)

    def spawn(self, argv: Sequence[str]) -> subprocess.Popen:
        return command.spawn(argv)

    def kill(self, handle: object) -> None:
        if not isinstance(handle, subprocess.Popen):
            raise TypeError(f"not a handle from LocalTransport.spawn: {handle!r}")
        command.kill_spawned(handle)

    def read_file(self, path: str) -> bytes:
        return Path(path).read_bytes()

    def read_tail(self, path: str, size: int) -> bytes:
        """The file's last ``size`` bytes."""
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - size))
            return f.read()

    def write_file(self, path: str, data: bytes, mode: int | None = 0o600) -> None:
        if mode is None:
            with open(path, "wb") as f:
                f.write(data)
            return
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)

    def put_file(
        self,
        local_path: str,
        remote_path: str,
        mode: int = 0o644,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Copy to ``remote_path.part`` (created with ``mode``), then rename into place."""
        part = remote_path + ".part"
        with open(local_path, "rb") as src:
            total = os.fstat(src.fileno()).st_size
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
            try:
                with os.fdopen(fd, "wb") as dst:
                    os.fchmod(dst.fileno(), mode)
                    done = 0
                    while chunk := src.read(1 << 20):
                        dst.write(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, total)
                os.replace(part, remote_path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(part)
                raise
        if progress and total == 0:
            progress(0, 0)

    def describe(self) -> dict[str, object]:
        return {}  # this machine: nothing about how it is reached

    def close(self) -> None:
        pass
