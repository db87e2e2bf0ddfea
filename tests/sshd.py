"""A real OpenSSH sshd for tests, in a temporary directory, on a free port of 127.0.0.1 (or
another loopback address, 127.0.0.2... for several hosts, one sshd each).

Never the machine's own sshd service: it has its own host key, client key, config and pid
file.  ``hostname=`` runs it in its own UTS namespace with that host name, so a command over
its SSH (``hostname``) names the "machine" as a cluster node would (``unshare --uts``: the
same file systems and processes, only the name differs).  ``kill_sessions()`` kills the
per-connection sshd processes (the client sees the connection drop);
``regenerate_host_key()`` gives it a new host key (a "changed key").
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import paramiko

SSHD = "/usr/sbin/sshd"


def _free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _loopback(host: str) -> str:
    """``host`` if it is an IPv4 loopback address (127.0.0.0/8): tests listen nowhere else."""
    import ipaddress

    if not ipaddress.IPv4Address(host).is_loopback:
        raise ValueError(f"{host} is not a loopback address (127.0.0.0/8)")
    return host


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmbench-test", "-f", str(path)], check=True, capture_output=True)


def _children(pid: int) -> list[int]:
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rpartition(")")[2].split()[1]) == pid:
            kids.append(int(entry))
    return kids


class TestSshd:
    """``with TestSshd() as sshd:`` starts sshd; leaving the block stops it and removes its files."""

    __test__ = False  # not a pytest test class

    def __init__(self, user: str = "root", host: str = "127.0.0.1", hostname: str | None = None) -> None:
        if not os.path.exists(SSHD):
            raise RuntimeError(f"{SSHD} is missing: install openssh-server (apt-get install openssh-server)")
        self.user = user
        self.host = _loopback(host)
        self.hostname = hostname
        self.port = _free_port(self.host)
        self.dir = Path(tempfile.mkdtemp(prefix="vmbench-sshd-"))
        os.chmod(self.dir, 0o700)
        self.host_key_path = self.dir / "host_ed25519"
        self.client_key = str(self.dir / "client_ed25519")
        self.config = self.dir / "sshd_config"
        self.known_hosts = str(self.dir / "known_hosts")
        self.proc: subprocess.Popen[bytes] | None = None
        _keygen(self.host_key_path)
        _keygen(Path(self.client_key))
        shutil.copy(self.client_key + ".pub", self.dir / f"authorized_keys_{user}")
        self.config.write_text(
            "\n".join(
                [
                    f"ListenAddress {self.host}",
                    f"Port {self.port}",
                    f"HostKey {self.host_key_path}",
                    f"PidFile {self.dir / 'sshd.pid'}",
                    # %u: only the test user has keys (another user cannot log in)
                    f"AuthorizedKeysFile {self.dir}/authorized_keys_%u",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "Subsystem sftp internal-sftp",
                    "ClientAliveInterval 0",
                    "LogLevel ERROR",
                    "",
                ]
            )
        )
        self.write_known_hosts(self.known_hosts)

    # ---- keys ------------------------------------------------------------------------------

    @property
    def host_key(self) -> paramiko.PKey:
        kind, data = Path(str(self.host_key_path) + ".pub").read_text().split()[:2]
        return paramiko.PKey.from_type_string(kind, base64.b64decode(data))

    @property
    def host_key_fingerprint(self) -> str:
        """``ssh-ed25519 SHA256:...`` as ssh-keygen computes it."""
        out = subprocess.run(["ssh-keygen", "-lf", f"{self.host_key_path}.pub"], check=True, capture_output=True, text=True).stdout
        return "ssh-ed25519 " + out.split()[1]

    def known_hosts_line(self) -> str:
        pub = Path(str(self.host_key_path) + ".pub").read_text().split()
        return f"[{self.host}]:{self.port} {pub[0]} {pub[1]}\n"

    def write_known_hosts(self, path: str) -> str:
        Path(path).write_text(self.known_hosts_line())
        return path

    def regenerate_host_key(self) -> None:
        """A new host key, and sshd restarted to use it (the ``known_hosts`` file keeps the old one)."""
        for p in (self.host_key_path, Path(str(self.host_key_path) + ".pub")):
            p.unlink()
        _keygen(self.host_key_path)
        if self.proc is not None:
            self.stop()
            self.start()

    # ---- process ---------------------------------------------------------------------------

    def start(self) -> None:
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation dir
        self.log = self.dir / "sshd.log"
        argv = [SSHD, "-D", "-e", "-f", str(self.config)]
        if self.hostname:  # its own host name: unshare and sh exec, so the pid is sshd's
            argv = ["unshare", "--uts", "--", "sh", "-ec", 'hostname "$0"; exec "$@"', self.hostname, *argv]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.log.read_text(errors="replace")
                raise RuntimeError(f"test sshd exited ({self.proc.returncode}): {err}")
            if self._greets():
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"test sshd did not greet on {self.host}:{self.port} within 10 s")

    def _greets(self) -> bool:
        """Whether sshd answers a connection with its banner: listening alone is not enough (a
        connection it accepted while starting under load can still end before the banner, which
        a client reads as EOF)."""
        try:
            with socket.create_connection((self.host, self.port), timeout=2) as probe:
                return probe.recv(4).startswith(b"SSH-")
        except OSError:
            return False

    def stop(self) -> None:
        """Stop it and every connection it serves (clients see theirs drop, then refused)."""
        if self.proc is None:
            return
        self.kill_sessions()  # while self.proc still names the listener whose sessions they are
        proc, self.proc = self.proc, None
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (the listener's sshd descendants; with
        ``internal-sftp`` they serve SFTP themselves)."""
        if self.proc is None:
            return []
        todo, victims = [self.proc.pid], []
        while todo:
            for kid in _children(todo.pop()):
                try:
                    comm = Path(f"/proc/{kid}/comm").read_text().strip()
                except OSError:
                    continue
                if comm == "sshd":
                    victims.append(kid)
                    todo.append(kid)
        return victims

    def kill_sessions(self) -> int:
        """SIGKILL every per-connection sshd process (the listener's sshd descendants); the
        commands they ran keep running, as after a network drop.  Returns how many."""
        victims = self.session_pids()
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(victims)

    def __enter__(self) -> "TestSshd":
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
