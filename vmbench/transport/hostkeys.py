"""SSH host keys: fingerprints, known_hosts lookups and edits, and scanning a server's key.

vmbench never trusts a host key on its own: an unknown key stops a run and the admin
records it with ``vmbench hosts trust`` (which uses :func:`scan` and :func:`trust`).  Files
use OpenSSH's known_hosts format, so ``ssh`` and vmbench share one trust store.
"""

from __future__ import annotations

import base64
import hashlib
import os
import socket
from typing import Literal

import paramiko
from paramiko.hostkeys import HostKeyEntry

from ..errors import PreflightError
from .sshconfig import default_known_hosts as default_known_hosts  # re-exported

Status = Literal["known", "unknown", "changed"]


def known_hosts_name(host: str, port: int) -> str:
    """The name OpenSSH files a host's key under: ``host`` on port 22, else ``[host]:port``."""
    return host if port == 22 else f"[{host}]:{port}"


def fingerprint(key: paramiko.PKey) -> str:
    """``ssh-ed25519 SHA256:...``: the key type and the digest ``ssh-keygen -lf`` shows."""
    digest = base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")
    return f"{key.get_name()} SHA256:{digest}"


def scan(host: str, port: int = 22, timeout: float = 15.0) -> paramiko.PKey:
    """Fetch the server's host key (key exchange only, no login)."""
    where = f"{host}:{port}"
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except OSError as exc:
        raise PreflightError(f"cannot reach {where}: {exc.strerror or exc}", hint="check the host name, the port and that sshd runs there") from None
    transport = paramiko.Transport(sock)
    try:
        transport.start_client(timeout=timeout)
        return transport.get_remote_server_key()
    except (paramiko.SSHException, EOFError, OSError) as exc:
        raise PreflightError(f"SSH handshake with {where} failed: {exc}", hint="is an SSH server listening on that port?") from None
    finally:
        transport.close()


class UnknownHostKey(Exception):
    """Raised by :class:`RefuseUnknown` with the key (paramiko's RejectPolicy error has none)."""


class RefuseUnknown(paramiko.MissingHostKeyPolicy):
    """paramiko policy: never accept a key that known_hosts does not have."""

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        raise UnknownHostKey(key)


def refusal(exc: UnknownHostKey | paramiko.BadHostKeyException, where: str, target: str, known_hosts: str) -> PreflightError:
    """The error for a host key vmbench will not accept; ``target`` is what ``hosts trust`` takes."""
    if isinstance(exc, UnknownHostKey):
        return PreflightError(
            f"host key of {where} is not known: {fingerprint(exc.args[0])}",
            hint=f"check it and run `vmbench hosts trust {target}` (or add it to {known_hosts})",
        )
    return PreflightError(
        f"the host key of {where} has CHANGED: it now presents {fingerprint(exc.key)}, "
        f"{known_hosts} has {fingerprint(exc.expected_key)}; vmbench refuses to connect",
        hint="someone may be intercepting the connection, or the host was reinstalled: verify the new key, "
        f"then run `vmbench hosts trust --replace {target}`",
    )


def _load(path: str) -> paramiko.HostKeys:
    keys = paramiko.HostKeys()
    if os.path.exists(path):
        keys.load(path)
    return keys


def check(host: str, port: int, key: paramiko.PKey, known_hosts_path: str | None = None) -> Status:
    """Is ``key`` the one recorded for host:port?  ``changed`` means a different key of the
    same type is recorded (what ssh calls a possible man-in-the-middle)."""
    entries = _load(known_hosts_path or default_known_hosts()).lookup(known_hosts_name(host, port))
    if not entries:
        return "unknown"
    recorded = entries.get(key.get_name())
    if recorded is None:
        return "unknown"
    return "known" if recorded == key else "changed"


def trust(
    host: str,
    port: int,
    key: paramiko.PKey,
    known_hosts_path: str | None = None,
    *,
    replace: bool = False,
) -> Literal["added", "already known", "replaced"]:
    """Record ``key`` for host:port.  A different recorded key of the same type is refused
    unless ``replace``, which first drops every entry for that name."""
    path = known_hosts_path or default_known_hosts()
    name = known_hosts_name(host, port)
    status = check(host, port, key, path)
    if status == "known":
        return "already known"
    if status == "changed":
        if not replace:
            raise PreflightError(
                f"{path} already has a different {key.get_name()} key for {name}; "
                f"the key {host}:{port} presents now is {fingerprint(key)}",
                hint="if the host was reinstalled and you checked the new key, run again with --replace",
            )
    if replace:
        _remove_name(path, name)
    line = f"{name} {key.get_name()} {key.get_base64()}\n"
    _append(path, line)
    return "replaced" if status == "changed" else "added"


def _append(path: str, line: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "r+b") as f:
        size = os.fstat(f.fileno()).st_size
        if size:
            f.seek(size - 1)
            if f.read(1) != b"\n":
                line = "\n" + line
        f.write(line.encode())


def _matches(pattern: str, name: str) -> bool:
    if pattern.startswith("|1|"):
        salt = pattern[3:].split("|")[0]
        return paramiko.HostKeys.hash_host(name, salt) == pattern
    return pattern == name


def _remove_name(path: str, name: str) -> None:
    """Rewrite ``path`` without ``name`` (plain or hashed); other names on a line stay."""
    if not os.path.exists(path):
        return
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        lines = f.readlines()
    kept: list[str] = []
    for line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("#") or stripped.startswith("@"):
            kept.append(line)
            continue
        try:
            entry = HostKeyEntry.from_line(stripped)
        except Exception:  # paramiko cannot parse it (an unknown key type): keep it as is
            entry = None
        if entry is None or not any(_matches(h, name) for h in entry.hostnames):
            kept.append(line)
            continue
        others = [h for h in entry.hostnames if not _matches(h, name)]
        if others:
            fields = stripped.split(None, 1)
            kept.append(",".join(others) + " " + fields[1] + "\n")
    tmp = path + ".vmbench-tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.writelines(kept)
    os.chmod(tmp, os.stat(path).st_mode & 0o777)
    os.replace(tmp, path)
