"""The fake node's rbd storage, as pve-storage's ``RBDPlugin.pm`` and ``CephConfig.pm`` (9.1.7)
make it: images in a Ceph pool, reached as the storage's client, and what QEMU gets for them.

* The client (ceph_connect_option): an external cluster (``monhost``) reads
  ``/etc/pve/priv/ceph/<storage>.conf`` with the monitors given apart, a hyperconverged one
  ``/etc/pve/ceph.conf``; the keyring is ``/etc/pve/priv/ceph/<storage>.keyring``, the user
  ``username`` (admin without one).  The fake assumes the keyring file exists (the tests write
  it on the node, as ``pvesm add rbd --keyring`` does).
* ``path`` (what ``GET .../content/{volume}`` says, and PVE 8's ``-drive file=``):
  ``rbd:<pool>/<image>:conf=<conf>[:mon_host=<h1>;<h2>:auth_supported=cephx]:id=<user>:keyring=<file>``
  with ':' in a monitor escaped ``\\:``; with ``krbd`` the mapped device
  ``/dev/rbd-pve/<fsid>/<pool>/<image>``.
* ``qemu_blockdev_options`` (PVE 9's ``-blockdev``): ``{"driver": "rbd", "pool", "image",
  "conf", "server": [{"host", "port"}] (port 3300 when none), "auth-client-required": ["cephx"],
  "user"}``; with ``krbd`` ``{"driver": "host_device", "filename": <the mapped device>}``.
* The images: :class:`MemoryImages` (a pool without a cluster, for unit tests) or
  :class:`CephImages` (a real cluster's pool: ``rbd create``/``rbd rm`` with RBDPlugin's
  ``rbd_cmd`` options).  A temporary entry on the same pool and monitors shares its images.
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import Mapping, Protocol

from .backends import BackendError

PVE_ETC = "/etc/pve"
#: the fake cluster's fsid (a krbd device path names it)
FSID = "5e1f0000-0000-4000-8000-00000000ce9f"


class Images(Protocol):
    def create(self, name: str, size: int) -> None: ...
    def remove(self, name: str) -> None: ...


class MemoryImages:
    """A pool with no cluster behind it: image names and sizes."""

    def __init__(self) -> None:
        self.images: dict[str, int] = {}

    def create(self, name: str, size: int) -> None:
        if name in self.images:
            raise BackendError(f"rbd: create error: (17) File exists: {name}")
        self.images[name] = size

    def remove(self, name: str) -> None:
        self.images.pop(name, None)


class CephImages:
    """A real cluster's pool, reached with ``argv`` (:func:`rbd_cmd`: RBDPlugin's rbd_cmd)."""

    def __init__(self, argv: list[str]) -> None:
        self.argv = list(argv)

    def _rbd(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([*self.argv, *args], capture_output=True, text=True, timeout=120)

    def create(self, name: str, size: int) -> None:
        done = self._rbd("create", "--image-format", "2", "--size", str((size + (1 << 20) - 1) >> 20), name)
        if done.returncode != 0:
            raise BackendError(f"rbd create '{name}' error: {done.stderr.strip()}")

    def remove(self, name: str) -> None:
        deadline = time.monotonic() + 75  # a killed QEMU's watch expires after 30 s
        while True:
            done = self._rbd("rm", "--no-progress", name)
            if done.returncode == 0 or "No such file" in done.stderr:
                return
            if "watchers" not in done.stderr or time.monotonic() > deadline:
                raise BackendError(f"rbd rm '{name}' error: {done.stderr.strip()}")
            time.sleep(2)


def external(scfg: Mapping[str, object]) -> bool:
    return bool(str(scfg.get("monhost") or "").strip())


def monitors(scfg: Mapping[str, object]) -> list[str]:
    return [m for m in re.split(r"[;,\s]+", str(scfg.get("monhost") or "")) if m]


def conf_path(storeid: str, scfg: Mapping[str, object]) -> str:
    return f"{PVE_ETC}/priv/ceph/{storeid}.conf" if external(scfg) else f"{PVE_ETC}/ceph.conf"


def keyring_path(storeid: str) -> str:
    return f"{PVE_ETC}/priv/ceph/{storeid}.keyring"


def user(scfg: Mapping[str, object]) -> str:
    return str(scfg.get("username") or "admin")


def pool(scfg: Mapping[str, object]) -> str:
    return str(scfg.get("pool") or "rbd")


def rbd_cmd(storeid: str, scfg: Mapping[str, object]) -> list[str]:
    """RBDPlugin's rbd_cmd, up to the operation."""
    out = ["rbd", "-p", pool(scfg), "-c", conf_path(storeid, scfg)]
    if external(scfg):
        out += ["-m", ",".join(monitors(scfg))]
    return out + ["--auth_supported", "cephx", "-n", f"client.{user(scfg)}", "--keyring", keyring_path(storeid)]


def krbd(scfg: Mapping[str, object]) -> bool:
    return str(scfg.get("krbd", 0)) in ("1", "true")


def volume_path(storeid: str, scfg: Mapping[str, object], image: str) -> str:
    """RBDPlugin::path."""
    if krbd(scfg):
        return f"/dev/rbd-pve/{FSID}/{pool(scfg)}/{image}"
    out = f"rbd:{pool(scfg)}/{image}:conf={conf_path(storeid, scfg)}"
    if external(scfg):
        out += ":mon_host=" + ";".join(m.replace(":", "\\:") for m in monitors(scfg)) + ":auth_supported=cephx"
    return out + f":id={user(scfg)}:keyring={keyring_path(storeid)}"


def blockdev(storeid: str, scfg: Mapping[str, object], image: str) -> dict:
    """RBDPlugin::qemu_blockdev_options."""
    if krbd(scfg):
        return {"driver": "host_device", "filename": volume_path(storeid, scfg, image)}
    out: dict = {"driver": "rbd", "pool": pool(scfg), "image": image, "conf": conf_path(storeid, scfg)}
    if external(scfg):
        servers = []
        for mon in monitors(scfg):
            host, _, port = mon.rpartition(":") if ":" in mon else (mon, "", "")
            servers.append({"host": host, "port": port or "3300"})
        out["server"] = servers
        out["auth-client-required"] = ["cephx"]
    out["user"] = user(scfg)
    return out
