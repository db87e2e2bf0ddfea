"""The ``hypervisor:`` section (driver, libvirt URI, SSH to a remote host) and ``storage:``."""

from __future__ import annotations

import re
import urllib.parse
from pathlib import Path
from typing import Any

from ..settings import Accel, DriverName, ImageFormat, StorageType
from .model import Hypervisor, SshConfig, Storage, VmConfig, ZfsSettings
from .parsers import MiB, _choice, _duration, _size
from .reader import Section, as_bool, as_int, as_name, as_str
from .zfsprops import (DATASET, PROPERTY_BY_NAME, PROPERTY_NAMES, ZVOL, parse_dataset, parse_property, parse_recordsize,
                       parse_volblocksize)

#: what vmbench states when the scenario does not (never ZFS's version-dependent default:
#: OpenZFS 2.2+ creates 16k zvols, 2.1 8k)
DEFAULT_VOLBLOCKSIZE = 16 << 10
DEFAULT_RECORDSIZE = 128 << 10

def _hypervisor(sec: Section, host_only: bool = False) -> Hypervisor:
    driver = sec.get("driver", DriverName.parse, DriverName.NONE if host_only else DriverName.LIBVIRT)
    if host_only and driver is not DriverName.NONE:
        raise sec.fail("driver", f"a host_only scenario runs no VM; leave driver out (or say none), not {driver.value}")
    if not host_only and driver is DriverName.NONE:
        raise sec.fail("driver", "driver none runs no VM; say host_only: true at the top to measure host storage only")
    default_uri = "qemu:///system"
    if sec.has("ssh") and not sec.has("uri") and isinstance(sec.raw("ssh"), dict) and sec.raw("ssh").get("host"):
        ssh_raw = sec.raw("ssh")  # the host named under ssh only: libvirt (if any) over that same SSH
        default_uri = f"qemu+ssh://{ssh_raw.get('user', 'root')}@{ssh_raw['host']}/system"
    uri = sec.get("uri", _libvirt_uri, default_uri)
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


STORAGE_KEYS = ("type", "pool", "scratch_size", "dataset", "volblocksize", "recordsize", "sparse", "properties")


def _storage(sec: Section) -> tuple[Storage, ZfsSettings]:
    """The storage and the baseline's ZFS settings (volblocksize/recordsize always stated)."""
    kind = sec.get("type", StorageType.parse, StorageType.DIR)
    pool = sec.get("pool", as_name, "vmbench")
    scratch = sec.get("scratch_size", _size(64 * MiB), 1 << 30)
    sec.done(STORAGE_KEYS)
    if not kind.zfs:
        for key in ("dataset", "volblocksize", "recordsize", "sparse", "properties"):
            if sec.has(key):
                raise sec.fail(key, f"applies to ZFS storage (type: zfs or zfs-dataset), not type {kind.value}")
        return Storage(type=kind, pool=pool, scratch_size=scratch), ZfsSettings()
    dataset = sec.get("dataset", parse_dataset, hint="the parent dataset vmbench creates its zvols or datasets under, e.g. rpool/vmbench")
    if "/" not in dataset:
        raise sec.fail("dataset", f"{dataset!r} is a pool's root dataset; name a child dataset vmbench may create under",
                       f"e.g. {dataset}/vmbench (create it first: zfs create {dataset}/vmbench)")
    zvol = kind is StorageType.ZFS
    if zvol and sec.has("recordsize"):
        raise sec.fail("recordsize", "applies to datasets (type: zfs-dataset); zvols have volblocksize")
    if not zvol and sec.has("volblocksize"):
        raise sec.fail("volblocksize", "applies to zvols (type: zfs); datasets have recordsize")
    if not zvol and sec.has("sparse"):
        raise sec.fail("sparse", "applies to zvols (type: zfs); files on a dataset are always sparse")
    sparse = sec.get("sparse", as_bool, False)
    zfs = ZfsSettings(volblocksize=sec.get("volblocksize", parse_volblocksize, DEFAULT_VOLBLOCKSIZE) if zvol else None,
                      recordsize=None if zvol else sec.get("recordsize", parse_recordsize, DEFAULT_RECORDSIZE))
    if sec.has("properties"):
        props = sec.section("properties")
        if not isinstance(props.data, dict):
            raise sec.fail("properties", "is a mapping of ZFS properties, e.g. {compression: lz4, sync: standard}")
        for name in list(props.data):
            if name not in PROPERTY_BY_NAME:
                continue  # refused by done() below, with a suggestion
            zfs = zfs.with_property(str(name), props.get(name, lambda v, n=str(name): parse_property(n, v)))
        props.done(PROPERTY_NAMES)
    storage = Storage(type=kind, pool=pool, scratch_size=scratch, dataset=dataset, sparse=sparse)
    problems = storage_problems(VmConfig(zfs=zfs), storage)
    if problems:
        raise sec.fail("properties", problems[0][0], problems[0][1])
    return storage, zfs


def storage_problems(vm: VmConfig, storage: Storage) -> list[tuple[str, str]]:
    """What ``vm``'s storage settings cannot be on ``storage``, as (message, hint)."""
    out = []
    zfs = vm.zfs
    if not storage.zfs:
        used = (["volblocksize"] if zfs.volblocksize else []) + (["recordsize"] if zfs.recordsize else []) + [k for k, _ in zfs.properties]
        if used:
            out.append((f"{', '.join(used)} applies to ZFS storage, but storage.type is {storage.type.value}",
                        "set storage.type: zfs (zvols) or zfs-dataset (files on datasets)"))
        return out
    kind = ZVOL if storage.type is StorageType.ZFS else DATASET
    if kind == ZVOL and zfs.recordsize:
        out.append(("recordsize applies to datasets; zvols have volblocksize", "use volblocksize, or storage.type: zfs-dataset"))
    if kind == DATASET and zfs.volblocksize:
        out.append(("volblocksize applies to zvols; datasets have recordsize", "use recordsize, or storage.type: zfs"))
    for name, _ in zfs.properties:
        if kind not in PROPERTY_BY_NAME[name].applies:
            out.append((f"{name} does not apply to {kind}s", f"{name} is a property of datasets (storage.type: zfs-dataset)"))
    if kind == ZVOL and vm.format is not ImageFormat.RAW:
        out.append((f"format {vm.format.value} is not possible on a zvol (a raw block device)",
                    "use format: raw, or storage.type: zfs-dataset for qcow2 files on a dataset"))
    return out

