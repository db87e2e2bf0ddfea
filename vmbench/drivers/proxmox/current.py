"""A user's Proxmox VM, read only: its disk and CPU settings as vmbench's axes (issue 18).

:func:`parse_config` is pure: a VM config (``GET /nodes/{node}/qemu/{vmid}/config``, as
``qm config`` shows it) to a :class:`~vmbench.drivers.existing.CurrentVm`, each setting read
by its axis's row of Proxmox's codec table (:mod:`.codec`), the row that writes it (disk
option strings, ``scsihw``, the ``cpu`` line).
:func:`read_vm` makes exactly one request, that GET: nothing on the VM can change.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ...errors import HypervisorError, UsageError
from ...scenario.model import Hypervisor, VmConfig
from ..existing import CurrentVm
from .api import PveApi, read_secret
from .codec import CODECS, DISK_KEY_RE, user_vm
from .propstring import parse_disk, parse_options
from .config import storage_of

#: the disk read when none is named and ``boot: order=`` names none, in this order
DEFAULT_DISKS = ("scsi0", "virtio0", "sata0", "ide0")


def parse_config(config: Mapping[str, Any], *, vmid: int | str, node: str, disk: str | None = None) -> CurrentVm:
    """The settings of ``disk`` (``scsi0``, ``virtio1``...; default: the first disk of ``boot:
    order=``, else scsi0, virtio0, sata0, ide0) and the VM's CPU, vCPUs and memory, each as
    its axis's row of Proxmox's codec table reads it.  What the config leaves to qemu-server
    is read as its default and said in ``assumed``; what no axis expresses is said in
    ``unknown``."""
    source = f"Proxmox VM {vmid} on node {node}"
    key = _pick_disk(config, source, disk)
    user = user_vm(config, key, [], [])
    vm = VmConfig()
    for codec in CODECS:
        vm = codec.current(user, vm)
    extra = {k: str(config[k]) for k in ("scsihw", "cpu", "boot", "bootdisk", "cores", "sockets") if config.get(k) is not None}
    extra["keys"] = ",".join(sorted(k for k in config if DISK_KEY_RE.match(k)))  # every bus slot in use (CD-ROMs too)
    storage: dict[str, object] = {"storage": storage_of(user.volid), "volume": user.volid} if ":" in user.volid else {"path": user.volid}
    return CurrentVm(source=source, vm=vm, disk=key, disk_spec=str(config[key]), kind="proxmox", ident=str(vmid),
                     unknown=tuple(user.unknown), storage=storage, extra=extra, assumed=tuple(user.assumed))


def read_vm(api: Any, node: str, vmid: int, *, disk: str | None = None) -> CurrentVm:
    """The VM ``vmid`` on ``node`` through the driver's API client (:class:`~.api.PveApi`):
    one ``GET /nodes/{node}/qemu/{vmid}/config``, nothing else."""
    config = api.get(f"/nodes/{node}/qemu/{vmid}/config")
    if not isinstance(config, Mapping):
        raise HypervisorError(f"Proxmox VM {vmid} on node {node}: GET .../config gave {type(config).__name__}, not a config")
    return parse_config(config, vmid=vmid, node=node, disk=disk)


# ---- the parts --------------------------------------------------------------------------------


def is_disk(config: Mapping[str, Any], key: str) -> bool:
    """A bus disk (``scsiN``/``virtioN``/``sataN``/``ideN``) that is not a CD-ROM or empty."""
    if not DISK_KEY_RE.match(key) or key not in config:
        return False
    volid, opts = parse_disk(str(config[key]))
    return opts.get("media") != "cdrom" and volid not in ("", "none", "cdrom")


def disk_keys(config: Mapping[str, Any]) -> list[str]:
    """The VM's disks, by bus and index (efidisk, tpmstate, unused and CD-ROMs left out)."""
    keys = [k for k in config if is_disk(config, k)]
    return sorted(keys, key=lambda k: (DEFAULT_DISKS.index(re.sub(r"\d+$", "0", k)), int(re.sub(r"^\D+", "", k))))


def _pick_disk(config: Mapping[str, Any], source: str, disk: str | None) -> str:
    disks = disk_keys(config)
    if disk is not None:
        if is_disk(config, disk):
            return disk
        why = "is a CD-ROM or empty" if disk in config and DISK_KEY_RE.match(disk) else \
            "is not a bus disk vmbench reads (scsiN, virtioN, sataN, ideN)" if disk in config else "does not exist"
        raise HypervisorError(f"{source}: disk {disk} {why}", f"its disks: {', '.join(disks) or 'none'}")
    boot = parse_options(str(config.get("boot") or ""), default_key="legacy")
    for key in (k.strip() for k in (boot.get("order") or "").split(";")):
        if is_disk(config, key):
            return key
    if config.get("bootdisk") and is_disk(config, str(config["bootdisk"])):
        return str(config["bootdisk"])
    for key in DEFAULT_DISKS:
        if is_disk(config, key):
            return key
    if disks:
        return disks[0]
    raise HypervisorError(f"{source} has no disk (scsiN, virtioN, sataN or ideN)",
                          "vmbench reads a VM's disk settings from one of its disks")


def read_current(hv: Hypervisor, ident: str, disk: str | None) -> CurrentVm:
    """The VM with VMID ``ident`` on the scenario's node: one ``GET .../config`` with its API token."""
    cfg = hv.proxmox
    if cfg is None:  # pragma: no cover - the loader always gives driver proxmox its settings
        raise UsageError("the scenario's proxmox settings are missing")
    text = str(ident).strip()
    if not text.isdigit() or not 100 <= int(text) <= 999999999:
        raise UsageError(f"{ident!r} is not a Proxmox VMID (a whole number from 100 to 999999999)",
                         "give the VM's ID as `qm list` shows it")
    api = PveApi(cfg, read_secret(cfg))
    try:
        return read_vm(api, cfg.node, int(text), disk=disk)
    finally:
        try:
            api.session.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
