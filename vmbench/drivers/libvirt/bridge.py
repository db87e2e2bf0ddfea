"""libvirt's remote protocol carried over vmbench's own SSH connection.

For ``qemu+ssh://USER@HOST/system`` vmbench does not let libvirt start its own ssh client
(which would check host keys and pick keys by its own rules): it opens a private local
socket and, for each libvirt connection to it, runs ``virt-ssh-helper qemu:///system`` on
the host over the verified SSH connection (as libvirt itself does) and copies bytes both
ways.  libvirt then connects to ``qemu+unix:///system?socket=<that socket>``.
"""

from __future__ import annotations

import logging
import select
import socket
import tempfile
import threading
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Sequence

log = logging.getLogger(__name__)
#: how long a connection waits for libvirt's socket when nothing moved: from IDLE_FIRST,
#: doubling to IDLE_MAX (s).  The SSH channel is polled, never select()ed: its fileno() makes
#: paramiko create a pipe its transport thread writes to and closes without a lock (paramiko
#: issue 692), which killed SSH connections (vmbench.transport.ssh polls its channels too).
IDLE_FIRST = 0.001
IDLE_MAX = 0.01


def remote_side_uri(uri: str) -> str:
    """``qemu+ssh://root@h:22/system`` -> ``qemu:///system`` (what the helper on the host opens)."""
    parts = urllib.parse.urlsplit(uri)
    return f"{parts.scheme.partition('+')[0]}://{parts.path}"


def helper_argv(uri: str) -> list[str]:
    return ["virt-ssh-helper", remote_side_uri(uri)]


class LibvirtBridge:
    """A local unix socket whose connections are piped to ``virt-ssh-helper`` on the host."""

    def __init__(self, open_stream: Callable[[Sequence[str]], Any], uri: str) -> None:
        self.open_stream = open_stream
        self.uri = uri
        self._dir = tempfile.TemporaryDirectory(prefix="vmbench-libvirt-")  # 0700, this machine only
        self.path = str(Path(self._dir.name) / "libvirt.sock")
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(self.path)
        self._server.listen(4)
        self._closed = threading.Event()
        self._open: set[socket.socket] = set()  # libvirt's connections to the socket, until they end
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, name="vmbench-libvirt-bridge", daemon=True)
        self._thread.start()

    @property
    def local_uri(self) -> str:
        parts = urllib.parse.urlsplit(self.uri)
        return f"{parts.scheme.partition('+')[0]}+unix://{parts.path}?socket={self.path}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                if self._closed.is_set():
                    conn.close()
                    return
                self._open.add(conn)
            threading.Thread(target=self._pipe, args=(conn,), name="vmbench-libvirt-pipe", daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        try:
            chan = self.open_stream(helper_argv(self.uri))
        except Exception as exc:  # noqa: BLE001 - libvirt sees the closed socket and reports it
            log.error("libvirt bridge: cannot start virt-ssh-helper: %s", exc)
            conn.close()
            return
        try:
            idle = IDLE_FIRST
            while not self._closed.is_set():
                moved = False
                if chan.recv_ready():
                    data = chan.recv(65536)
                    if not data:
                        break
                    conn.sendall(data)
                    moved = True
                # only libvirt's socket is select()ed: the channel is polled (see IDLE_MAX)
                ready, _, _ = select.select([conn], [], [], 0 if moved else idle)
                if ready:
                    data = conn.recv(65536)
                    if not data:
                        break
                    chan.sendall(data)
                    moved = True
                if chan.exit_status_ready() and not chan.recv_ready():
                    break
                idle = IDLE_FIRST if moved else min(idle * 2, IDLE_MAX)
        except (OSError, EOFError) as exc:
            log.debug("libvirt bridge: connection ended: %s", exc)
        except Exception as exc:  # noqa: BLE001 - paramiko's SSHException: the link dropped
            log.debug("libvirt bridge: connection ended: %s", exc)
        finally:
            with self._lock:
                self._open.discard(conn)
            for c in (chan, conn):
                try:
                    c.close()
                except Exception:  # noqa: BLE001 - closing something already dead
                    pass

    def close(self) -> None:
        """Stop accepting, and end every connection still open: a libvirt object that outlives
        its driver (a domain in a traceback) then gets an error at once when it is freed and
        libvirt says goodbye over it, instead of waiting for a reply no thread will carry (at
        interpreter exit the pipe threads are gone, and a run that had ended hung there)."""
        with self._lock:
            self._closed.set()
            still_open, self._open = list(self._open), set()
        try:
            self._server.close()
        except OSError:
            pass
        for conn in still_open:
            try:
                conn.shutdown(socket.SHUT_RDWR)
                conn.close()
            except OSError:
                pass
        self._dir.cleanup()
