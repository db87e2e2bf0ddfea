"""How vmbench runs Ceph's own tools (``ceph``, ``rbd``, ``rados``): as the scenario's cephx
user, with its configuration and keyring, and with a limit on every operation.

QEMU's disks wait for the cluster as long as it takes (a guest's I/O blocks); vmbench's own
commands give up on an operation the cluster does not answer within :data:`OP_TIMEOUT_S` (an
OSD down, the monitors without quorum) and fail with Ceph's message, never hang.
"""

from __future__ import annotations

from ..scenario.model import CephConfig

OP_TIMEOUT_S = 30


def client_args(cfg: CephConfig) -> list[str]:
    """The options every Ceph tool takes to connect as the scenario's user (the monitors too
    where the configuration has none: a Proxmox storage's ``monhost``), and to give up on an
    operation the cluster does not answer (:data:`OP_TIMEOUT_S`)."""
    return ["--conf", cfg.conf, "--id", cfg.user] + (["--keyring", cfg.keyring] if cfg.keyring else []) + \
        (["--mon_host", cfg.mon_host] if cfg.mon_host else []) + \
        ["--rados-osd-op-timeout", str(OP_TIMEOUT_S), "--rados-mon-op-timeout", str(OP_TIMEOUT_S)]


def ceph_argv(cfg: CephConfig, *args: str) -> list[str]:
    return ["ceph", *client_args(cfg), *args, "--format", "json"]


def rbd_argv(cfg: CephConfig, *args: str) -> list[str]:
    return ["rbd", *client_args(cfg), *args]
