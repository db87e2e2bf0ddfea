"""The ``storage:`` section of type rbd: the Ceph pool and how a client reaches the cluster.

``storage: {type: rbd, pool: vmbench, ceph: {conf: /etc/ceph/ceph.conf, user: vmbench,
keyring: /etc/ceph/ceph.client.vmbench.keyring}}``: ``pool`` names the Ceph pool the scratch
images go to (the VMs' root disks stay in libvirt's ``vmbench`` dir pool); ``ceph.conf`` is a
client configuration (its ``mon_host``), ``ceph.user`` the cephx user without ``client.``, and
``ceph.keyring`` its keyring when the configuration does not name it.  Paths are on the
hypervisor host; the key itself is read there, handed to libvirt as a secret, and never
printed or stored.

With driver proxmox, ``storage: {type: rbd}`` says that ``hypervisor.storage`` is an rbd
storage of the node: its pool, monitors, user and keyring are PVE's (read from the storage's
configuration at preflight), so ``pool`` and ``ceph`` are refused here.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Any

from .model import CephConfig
from .parsers import pattern_parser
from .reader import Section, as_str
from .zfsprops import ZFS_STORAGE_KEYS

#: Ceph pool and cephx user names as vmbench accepts them (Ceph allows more; these are safe in
#: libvirt's XML, QEMU's option strings and fio's arguments)
CEPH_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
CEPH_NAME_CHARS = "(letters, digits, '_', '.', '-')"
CEPH_KEYS = ("conf", "user", "keyring")
RBD_KEYS = ("type", "pool", "scratch_size", "ceph")


def _host_file(value: Any) -> str:
    text = as_str(value)
    if not text.startswith("/") or "\0" in text or ".." in PurePosixPath(text).parts or ":" in text or "=" in text:
        raise ValueError(f"{text!r} is not an absolute file path on the host (without ':' or '=')")
    return text


def read_ceph(sec: Section, proxmox: bool = False) -> CephConfig | None:
    """The Ceph pool and client of ``storage:`` of type rbd (its other keys refused, naming what
    they apply to); on Proxmox none: only ``type`` and ``scratch_size`` are taken (the rest is
    the node's rbd storage's)."""
    for key in ZFS_STORAGE_KEYS:
        if sec.has(key):
            raise sec.fail(key, "applies to ZFS storage (type: zfs or zfs-dataset), not type rbd")
    sec.done(RBD_KEYS)
    if proxmox:
        for key in ("pool", "ceph"):
            if sec.has(key):
                raise sec.fail(key, "with driver proxmox the Ceph pool and client are the node's rbd storage's "
                                    "(hypervisor.storage: its pool, monhost, username and keyring), read from Proxmox",
                               f"remove storage.{key}; name the node's rbd storage in hypervisor.storage")
        return None
    pool = sec.get("pool", pattern_parser(CEPH_NAME_RE, f"a Ceph pool name {CEPH_NAME_CHARS}"), "rbd")
    if not sec.has("ceph"):
        raise sec.fail("ceph", "type rbd needs ceph: {conf: ..., user: ...}: how vmbench and QEMU reach the cluster",
                       "e.g. ceph: {conf: /etc/ceph/ceph.conf, user: vmbench}")
    ceph = sec.section("ceph")
    if not isinstance(ceph.data, dict):
        raise sec.fail("ceph", "is a mapping: {conf: /etc/ceph/ceph.conf, user: vmbench, keyring: ...}")
    cfg = CephConfig(pool=pool, conf=ceph.get("conf", _host_file, "/etc/ceph/ceph.conf"),
                     user=ceph.get("user", pattern_parser(CEPH_NAME_RE, f"a cephx user name {CEPH_NAME_CHARS}"), "admin"),
                     keyring=ceph.get("keyring", _host_file, None))
    if cfg.user.startswith("client."):
        raise ceph.fail("user", f"{cfg.user!r}: name the user without 'client.'", f"user: {cfg.user[len('client.'):]}")
    ceph.done(CEPH_KEYS)
    return cfg
