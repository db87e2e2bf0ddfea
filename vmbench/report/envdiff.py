"""What changed in the stored environment between two runs (``vmbench history``'s steps), pure.

A run stores its host's environment (:mod:`vmbench.run.environment` and the driver's
``describe_host``: kernel, QEMU, libvirt or Proxmox VE, ZFS or Ceph versions, fio, CPU model
and microcode, the storage's properties, the accelerator, the template image) and each boot
stores the guest's facts (its kernel and fio).  :func:`run_environment` flattens both into
one mapping of named facts; :func:`differences` lists the facts that differ, the well-known
ones first under their names, then any other stored fact by its key.  Facts that move on
their own between identical runs (free space, ARC size, the run's tag) are never listed, nor
is a fact one vmbench release records and another does not (the CPU microcode, before this
release recorded it).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..results.environment import Environment
from ..results.records import BootRecord

#: the facts a step names first, in this order: stored key -> how it is named
KNOWN = {
    "host_kernel": "kernel", "pve_node_kernel": "PVE node kernel", "host_os": "host OS",
    "qemu_version": "QEMU", "host_qemu_binary": "QEMU binary", "libvirt_version": "libvirt",
    "pve_version": "Proxmox VE", "pve_node_pveversion": "pve-manager",
    "zfs_userland": "ZFS", "zfs_kmod": "ZFS kernel module", "zfs_version": "ZFS",
    "ceph_versions": "Ceph", "host_fio": "fio (host)", "guest_fio": "fio (guest)", "guest_kernel": "guest kernel",
    "image.hash": "guest image", "host_cpu": "CPU model", "host_cpu_model": "CPU model (libvirt)",
    "host_microcode": "CPU microcode", "host_cpus": "host CPUs", "host_memory_mib": "host memory MiB",
    "accelerator": "accelerator", "kvm_device": "/dev/kvm",
    "storage_type": "storage type", "pool": "pool", "pool_path": "pool path", "pool_capacity_bytes": "pool size",
    "pve_storage": "PVE storage", "pve_storage_type": "PVE storage type", "pve_krbd": "krbd",
    "zfs_dataset": "ZFS dataset", "zpool_ashift": "zpool ashift", "vdev_ashift": "vdev ashift",
    "zfs_txg_timeout_s": "zfs_txg_timeout", "ceph_pool_facts": "Ceph pool", "ceph_objectstores": "Ceph object store",
    "rbd_client_cache": "librbd cache", "vmbench_version": "vmbench",
}

#: facts that differ between two runs on an unchanged host: never a cause
VOLATILE = re.compile(
    r"^(run_tag|attempts.*|controller|python|accelerator_reason|pool_free_bytes|pve_storage_avail_bytes|pve_storage_total_bytes"
    r"|arc\..*|zpool_status|zpool_list|zfs_scan|ceph_health.*|image\.manifest.*|image\.name|hosts\..*|pve_api_error"
    r"|pve_storage_error|ssh_.*|host_state_dir|pve_token_id|pve_template.*|libvirt_uri|pve_api|pve_tls|tls_verify_off"
    r"|pve_clone|pveversion|pve_release|pve_repoid|ceph_mon_host|ceph_keyring|ceph_conf|ceph_user|ceph_num_.*)$")


@dataclass(frozen=True)
class Change:
    """One fact that differs: its name, its stored key, the value before and after ("-": not recorded)."""

    name: str
    key: str
    before: str
    after: str

    def describe(self) -> str:
        return f"{self.name}: {self.before} -> {self.after}"


def run_environment(environment: Environment, boots: Sequence[BootRecord] = ()) -> dict[str, Any]:
    """A run's stored environment, nested values flattened to dotted keys, with its guests'
    kernel and fio (``guest_kernel``, ``guest_fio``: each distinct value, joined) and the
    Proxmox packages of ``pveversion -v`` as ``pve_package.NAME``."""
    out: dict[str, Any] = {}
    _flatten(environment, "", out)
    for key, values in (("guest_kernel", {b.guest_kernel for b in boots}), ("guest_fio", {b.guest_fio for b in boots})):
        shown = sorted(v for v in values if v)
        if shown:
            out[key] = ", ".join(shown)
    for line in str(environment.pveversion or "").splitlines():
        name, sep, version = line.partition(":")
        if sep and name.strip() and version.strip():
            out[f"pve_package.{name.strip()}"] = version.strip()
    return out


def _flatten(value: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
    for k, v in value.items():
        key = f"{prefix}{k}"
        if isinstance(v, Mapping) and key != "hosts":
            _flatten(v, key + ".", out)
        else:
            out[key] = v


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, (list, dict)):
        return json.dumps(value, sort_keys=True) if value else "-"
    if isinstance(value, str) and len(value) > 60 and re.fullmatch(r"[0-9a-f]+", value):
        return value[:12]  # a hash
    return str(value)


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[Change]:
    """The facts that differ between two flattened environments (:func:`run_environment`):
    the :data:`KNOWN` ones in their order, then the others by key; volatile ones left out."""
    keys = [k for k in KNOWN if k in before or k in after]
    keys += sorted(k for k in set(before) | set(after) if k not in KNOWN and not VOLATILE.match(k))
    same_release = before.get("vmbench_version") == after.get("vmbench_version")
    out = []
    for k in keys:
        if (k in before) != (k in after) and not same_release:
            continue  # recorded by one vmbench release and not the other: not a change of the host
        a, b = _text(before.get(k)), _text(after.get(k))
        if a != b:
            out.append(Change(KNOWN.get(k) or k.replace("pve_package.", "package "), k, a, b))
    return out


def short_environment(env: Mapping[str, Any]) -> str:
    """A run's host in a few words: "6.1.0-50, QEMU 7.2.22, tcg"."""
    env = Environment.from_row(env)
    parts = [str(env.host_kernel or env.fact("pve_node_kernel") or "?")]
    if env.qemu_version:
        parts.append(f"QEMU {env.qemu_version}")
    if env.accelerator:
        parts.append(str(env.accelerator))
    return ", ".join(parts)
