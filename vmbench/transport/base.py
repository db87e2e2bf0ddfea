"""Where commands run: the host (this machine or SSH) or a guest (QEMU guest agent, the
Proxmox agent API).

Drivers, fio runners and layer builders only see these Protocols, so a fake transport
makes them testable without a machine.  :class:`Transport` is what every side has;
:class:`HostTransport` adds what only the hypervisor host has (uploads, its connection
facts, a connection to close).
"""

from __future__ import annotations

from typing import Callable, Mapping, Protocol, Sequence

from ..command import Completed


class Transport(Protocol):
    #: a short name for messages: "host", "guest vmbench-r1a2b3c4-1"
    name: str

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
        """Run argv (never a shell string); ``input`` is stdin (use it for secrets)."""
        ...

    def spawn(self, argv: Sequence[str]) -> object:
        """Start argv in the background (no stdin, output discarded) and return a handle at
        once, for :meth:`kill`.  Only for commands that stop by themselves after a bounded
        time (the telemetry sampler), so a lost handle never leaves anything running.  The
        handle is opaque to callers (a process, a pid, a channel and process group)."""
        ...

    def kill(self, handle: object) -> None:
        """Kill what :meth:`spawn` started (its process group where the side has one)."""
        ...

    def read_file(self, path: str) -> bytes:
        ...

    def write_file(self, path: str, data: bytes, mode: int | None = 0o600) -> None:
        """Write a file; ``mode=None`` keeps an existing file's mode (for /proc, /sys)."""
        ...


class HostTransport(Transport, Protocol):
    """The hypervisor host: this machine, or a host reached over SSH."""

    def put_file(
        self,
        local_path: str,
        remote_path: str,
        mode: int = 0o644,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        """Copy a local file to ``remote_path`` (via ``.part`` and a rename: never half a file);
        ``progress(bytes_done, total)`` is called as it goes."""
        ...

    def describe(self) -> dict[str, object]:
        """How the host was reached, recorded with a run (SSH: host, port, user, host key;
        nothing for this machine)."""
        ...

    def close(self) -> None:
        """Close the connection (reopened on the next call); nothing for this machine."""
        ...
