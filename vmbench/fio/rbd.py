r"""An RBD image as fio's target: ``rbd:<pool>/<image>:id=<user>:conf=<ceph.conf>[:keyring=<file>][:mon_host=<mons>]``.

The same spelling as QEMU's legacy rbd filename, so one string names the image, the cephx
user and the client configuration wherever a target path goes (the host reference, the
evidence).  fio opens it with its ``rbd`` engine (librbd, as QEMU does), which takes the pool,
the image and the user (without ``client.``) as options and reads the configuration from
``CEPH_CONF`` (and a keyring, the monitors and the client cache from ``CEPH_ARGS``) in its
environment: the command runs under ``env`` so that it works the same on this machine and over
SSH.  ``mon_host`` (a Proxmox storage's ``monhost``, for a configuration without monitors) is
written as QEMU's filename has it: monitors separated by ';', a port's ':' escaped ``\:``.

``rbd_cache`` (true/false) is librbd's client cache as the VM's disk has it (QEMU sets it from
the disk's cache mode), so that the host reference runs through the same librbd as the guest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

PREFIX = "rbd:"


@dataclass(frozen=True)
class RbdTarget:
    pool: str
    image: str
    user: str
    conf: str
    keyring: str | None = None
    cache: bool | None = None  # librbd's rbd_cache; None: as the configuration says
    mon_host: str | None = None  # the monitors, "host:port,host:port"; None: the configuration's

    def __str__(self) -> str:
        mons = ";".join(m.replace(":", "\\:") for m in (self.mon_host or "").split(",") if m)
        return (f"{PREFIX}{self.pool}/{self.image}:id={self.user}:conf={self.conf}"
                + (f":keyring={self.keyring}" if self.keyring else "")
                + (f":mon_host={mons}" if mons else "")
                + ("" if self.cache is None else f":rbd_cache={str(self.cache).lower()}"))

    @property
    def spec(self) -> str:
        """``pool/image``, as Ceph's tools and libvirt name it."""
        return f"{self.pool}/{self.image}"

    def fio_args(self) -> list[str]:
        """fio's options for the image, in place of ``--filename`` and the job's engine."""
        return ["--ioengine=rbd", f"--pool={self.pool}", f"--rbdname={self.image}", f"--clientname={self.user}"]

    def env_prefix(self) -> list[str]:
        """``env CEPH_CONF=... [CEPH_ARGS=--keyring=... --mon_host=... --rbd_cache=...]``: the command's prefix."""
        args = ([f"--keyring={self.keyring}"] if self.keyring else []) + \
            ([f"--mon_host={self.mon_host}"] if self.mon_host else []) + \
            ([] if self.cache is None else [f"--rbd_cache={str(self.cache).lower()}"])
        return ["env", f"CEPH_CONF={self.conf}"] + ([f"CEPH_ARGS={' '.join(args)}"] if args else [])


def parse_target(target: str) -> RbdTarget | None:
    """The RBD image a target names; None for a file or a device."""
    if not target.startswith(PREFIX):
        return None
    spec, *opts = [o.replace("\\:", ":") for o in re.split(r"(?<!\\):", target[len(PREFIX):])]
    pool, _, image = spec.partition("/")
    kv = dict(o.split("=", 1) for o in opts if "=" in o)
    if not pool or not image or "id" not in kv or "conf" not in kv:
        raise ValueError(f"{target!r} is not rbd:<pool>/<image>:id=<user>:conf=<file>")
    cache = {"true": True, "false": False}.get(kv.get("rbd_cache", ""))
    mons = ",".join(m for m in kv.get("mon_host", "").split(";") if m) or None
    return RbdTarget(pool, image, kv["id"], kv["conf"], kv.get("keyring"), cache, mons)


#: the options that name an RBD target on fio's command line (they differ between sides, as --filename does)
TARGET_OPTIONS = ("--pool=", "--rbdname=", "--clientname=")
ENGINE = "--ioengine=rbd"
