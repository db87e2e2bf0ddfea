"""The ``hypervisor:`` section (driver, libvirt URI, SSH to a remote host) and ``storage:``."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

from ..settings import Accel, DriverName, StorageType
from .model import Hypervisor, SshConfig, Storage
from .parsers import MiB, _choice, _duration, _size
from .reader import Section, as_int, as_name, as_str

def _hypervisor(sec: Section) -> Hypervisor:
    driver = sec.get("driver", DriverName.parse, DriverName.LIBVIRT)
    uri = sec.get("uri", _libvirt_uri, "qemu:///system")
    accel = sec.get("accel", Accel.parse, Accel.AUTO)
    boot_timeout = sec.get("boot_timeout", _duration(10), None)
    machine = sec.get("machine", _choice(("pc", "q35")), "pc")
    state_dir = sec.get("state_dir", _abs_path, None)
    ssh = _ssh(sec, uri)
    sec.done(("driver", "uri", "accel", "boot_timeout", "machine", "state_dir", "ssh"))
    return Hypervisor(driver=driver, uri=uri, accel=accel, boot_timeout=boot_timeout, machine=machine, ssh=ssh,
                      state_dir=state_dir)


def _libvirt_uri(value: Any) -> str:
    text = as_str(value)
    if not re.match(r"^[a-z0-9+]+://", text):
        raise ValueError(f"{text!r} is not a libvirt URI (example: qemu:///system)")
    parts = urllib.parse.urlsplit(text)
    transport = parts.scheme.partition("+")[2]
    if parts.scheme.partition("+")[0] != "qemu":
        raise ValueError(f"{text!r}: vmbench drives QEMU through libvirt; the URI starts with qemu:// or qemu+ssh://")
    if transport not in ("", "unix", "ssh"):
        raise ValueError(f"{text!r}: transport {transport!r} is not supported; use qemu:///system (this machine) "
                         "or qemu+ssh://root@HOST/system (vmbench verifies the host key itself)")
    if transport == "ssh" and not parts.hostname:
        raise ValueError(f"{text!r} names no host (example: qemu+ssh://root@pve1.example.org/system)")
    if transport == "ssh" and parts.query:
        raise ValueError(f"{text!r}: leave URI parameters out; say key_file and known_hosts under hypervisor.ssh")
    if parts.path not in ("/system", "/session"):
        raise ValueError(f"{text!r}: the URI path is /system or /session")
    return text


def _ssh(sec: Section, uri: str) -> SshConfig | None:
    """SSH settings: from ``hypervisor.ssh``, defaulting to the URI's user, host and port."""
    parts = urllib.parse.urlsplit(uri)
    remote = parts.scheme.endswith("+ssh")
    if not sec.has("ssh"):
        if not remote:
            return None
        return SshConfig(host=parts.hostname or "", port=parts.port or 22, user=parts.username or "root")
    if not remote:
        raise sec.fail("ssh", f"the libvirt URI {uri} is this machine; ssh applies to qemu+ssh://USER@HOST/system URIs")
    sub = sec.section("ssh")
    if sub.has("password"):
        raise sub.fail("password", "vmbench never takes a password; use ssh-agent or key_file", "remove the key")
    host = sub.get("host", _hostname, parts.hostname or "")
    port = sub.get("port", as_int(1, 65535), parts.port or 22)
    user = sub.get("user", as_name, parts.username or "root")
    key_file = sub.get("key_file", _user_path, None)
    known_hosts = sub.get("known_hosts", _user_path, None)
    sub.done(("host", "port", "user", "key_file", "known_hosts"))
    return SshConfig(host=host, port=port, user=user, key_file=key_file, known_hosts=known_hosts)


def _hostname(value: Any) -> str:
    text = as_str(value)
    if not re.fullmatch(r"[A-Za-z0-9.:\-\[\]]+", text) or text.startswith("-"):
        raise ValueError(f"{text!r} is not a host name or address")
    return text


def _user_path(value: Any) -> str:
    text = as_str(value)
    if not text or "\0" in text:
        raise ValueError(f"{text!r} is not a file path")
    return str(Path(text).expanduser())


def _abs_path(value: Any) -> str:
    text = as_str(value)
    if not text.startswith("/") or "\0" in text or ".." in Path(text).parts:
        raise ValueError(f"{text!r} is not an absolute directory path")
    return text.rstrip("/") or "/"


def _storage(sec: Section) -> Storage:
    kind = sec.get("type", StorageType.parse, StorageType.DIR)
    pool = sec.get("pool", as_name, "vmbench")
    scratch = sec.get("scratch_size", _size(64 * MiB), 1 << 30)
    sec.done(("type", "pool", "scratch_size"))
    return Storage(type=kind, pool=pool, scratch_size=scratch)
