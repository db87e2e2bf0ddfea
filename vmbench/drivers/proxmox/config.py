"""A :class:`~vmbench.scenario.model.VmConfig` as Proxmox VE config options (pure).

The option grammar is qemu-server's (``QemuServer/Drive.pm``, ``CPUConfig.pm``; NOTES.md
section 1): a new disk is ``virtio1=STORAGE:GiB,cache=..,aio=..,iothread=1,serial=..``
(plus ``discard=on|ignore``, ``detect_zeroes=0|1`` and the I/O limits ``iops_rd=``,
``mbps_wr=``, ``iops_max=``, ``iops_max_length=``/``bps_max_length=``... where the scenario
sets them);
SCSI disks get ``scsihw: virtio-scsi-single`` (one controller per disk, the only one where
an iothread works) or ``virtio-scsi-pci`` for ``virtio-scsi-shared``; the CPU is
``[cputype=]MODEL[,flags=+aes;-pcid]`` with flags from PVE's allow-list only.  Each axis's
option is its row's of Proxmox's codec table (:mod:`.codec`), which the builders here walk;
the rest is the VM's own (its disks' keys and volumes, tags, notes, what the setup allows).
"""

from __future__ import annotations

import re
import urllib.parse
from decimal import Decimal
from typing import Collection, Mapping

from ...errors import HypervisorError
from ...scenario.model import VmConfig
from ...settings import Bus, CpuMode, DetectZeroes, Discard, ImageFormat
from ..qemu_cmdline import AIO_DRIVERS
# the per-axis spellings (each axis's row of the codec table and its helpers), also importable from here
from .codec import (BUS_PREFIX, CODECS, DISK_KEY_RE, DISK_OPTIONS, FILE_STORAGES, MAX_INDEX, QCOW2_STORAGES, VM_OPTIONS,
                    ZEROES_ON_WITH_DISCARD, NewDisk, config_bus, drive_zeroes, ordered, scsihw, volume_format)
from .cputype import CPU_FLAGS, cpu_from_config, cpu_option
from .limits import burst_length_key, limit_options, pve_throttle
from .propstring import parse_disk, parse_options

GiB = 1 << 30
MiB = 1 << 20

#: storage types that cannot make linked clones (NOTES section 7: LVM-thick and iSCSI LUNs)
NO_LINKED_CLONE = ("lvm", "iscsi", "iscsidirect")
SERIAL_MAX = 20  # bytes (virtio-blk and ATA)
#: the QEMU protocol driver each storage type's disks are opened with (pve-storage: each
#: plugin's ``path`` and ``qemu_blockdev_options``; PVE 8's GlusterFS as gluster://, dropped
#: in PVE 9); rbd is librbd unless the storage says ``krbd`` (then /dev/rbd*: host_device)
STORAGE_BLOCK_DRIVER = {
    "dir": "file", "nfs": "file", "cifs": "file", "cephfs": "file", "btrfs": "file",
    "lvm": "host_device", "lvmthin": "host_device", "zfspool": "host_device", "iscsi": "host_device",
    "rbd": "rbd", "iscsidirect": "iscsi", "zfs": "iscsi", "glusterfs": "gluster",
}
BLOCK_DRIVER_LIBRARY = {"rbd": "librbd", "iscsi": "libiscsi", "gluster": "libgfapi"}


def disk_prefix(bus: Bus) -> str:
    return BUS_PREFIX[bus]


def free_disk_key(bus: Bus, config: Mapping[str, object], start: int = 1) -> str:
    """The first free ``virtioN``/``scsiN``/``sataN`` from ``start`` (1: next to the root disk)."""
    prefix = disk_prefix(bus)
    for i in range(start, MAX_INDEX[prefix] + 1):
        if f"{prefix}{i}" not in config:
            return f"{prefix}{i}"
    raise HypervisorError(f"the template has no free {prefix} slot (all of {prefix}{start}..{prefix}{MAX_INDEX[prefix]} are used)")


def size_gib(size: int) -> str:
    """Bytes as PVE's new-disk size in GiB (decimals allowed), rounded up to whole MiB."""
    mib = -(-size // MiB)
    text = format(Decimal(mib) / Decimal(1024), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def serial_option(serial: str) -> str:
    """``serial=`` is urlencoded and at most 20 bytes."""
    if len(serial.encode()) > SERIAL_MAX:
        raise HypervisorError(f"disk serial {serial!r} is longer than {SERIAL_MAX} bytes")
    return urllib.parse.quote(serial, safe="")


def disk_option(vm: VmConfig, storage: str, storage_type: str, size: int, serial: str) -> str:
    """The new scratch disk: ``STORAGE:GiB,cache=,aio=,[iothread=1,]serial=[,discard=][,detect_zeroes=]
    [,iops..=][,format=]``, each option as its axis's row of Proxmox's codec table writes it."""
    new = NewDisk(storage, storage_type, {"serial": serial_option(serial)})
    for codec in CODECS:
        codec.write(vm, new)
    return ",".join([f"{storage}:{size_gib(size)}"] + [f"{k}={v}" for k, v in ordered(new.options, DISK_OPTIONS).items()])


def tags(run_tag: str) -> str:
    return f"vmbench;vmbench-{run_tag}"


def description(run_tag: str, seq: int, cells: tuple[str, ...], created: str, version: str) -> str:
    """The VM's notes: what made it and how it goes away (at most 8192 characters)."""
    text = (f"vmbench run {run_tag}, VM {seq} (cells: {', '.join(cells) or '-'}), created {created} by vmbench {version}.\n"
            "Removed when the run ends; after a crash `vmbench cleanup SCENARIO` removes it.\n"
            f"vmbench-run: {run_tag}\n")
    return text[:8192]


def vm_options(vm: VmConfig, *, kvm: bool, agent: str = "1") -> dict[str, object]:
    """The VM-wide options (not the disk): cores, memory, CPU, accelerator, agent, controller;
    the axes' as their rows of Proxmox's codec table write them."""
    out: dict[str, object] = {"kvm": kvm, "agent": agent}
    for codec in CODECS:
        codec.write_vm(vm, out)
    return ordered(out, VM_OPTIONS)


def agent_enabled(value: object) -> bool:
    """``agent: 1`` / ``enabled=1,fstrim_cloned_disks=1`` / ``0``."""
    opts = parse_options(str(value or ""), default_key="enabled")
    return str(opts.get("enabled", "0")).strip().lower() in ("1", "on", "yes", "true")


def vm_problems(vm: VmConfig, storage_type: str | None = None, template_config: Mapping[str, object] | None = None,
                accelerator: str | None = None) -> list[tuple[str, str]]:
    """What makes ``vm`` impossible on this Proxmox setup, as (message, hint); empty if it can run."""
    out = []
    bad = [f for f, _ in vm.cpu.all_features() if f not in CPU_FLAGS]
    if bad:
        out.append((f"Proxmox does not take the CPU flag(s) {', '.join(bad)} per VM",
                    "flags Proxmox allows: " + ", ".join(CPU_FLAGS)))
    if storage_type is not None and vm.format is ImageFormat.QCOW2 and storage_type not in QCOW2_STORAGES:
        out.append((f"format qcow2 is not possible on a {storage_type} storage (raw volumes only)",
                    "use format: raw, or a directory-like storage (dir, nfs, cifs) as hypervisor.storage"))
    if template_config is not None and vm.bus is Bus.VIRTIO_SCSI_SHARED:
        root = root_disk_key(template_config)
        if root is not None and not root.startswith("scsi"):
            out.append((f"bus virtio-scsi-shared puts the scratch disk on the controller of the root disk, but the "
                        f"template's root disk is {root}", "use a template whose root disk is SCSI (scsi0), or bus virtio-scsi"))
    if vm.detect_zeroes is DetectZeroes.ON and vm.discard is Discard.UNMAP:
        out.append(ZEROES_ON_WITH_DISCARD)
    if accelerator == "tcg" and vm.cpu.mode is CpuMode.HOST_PASSTHROUGH:
        out.append(("cpu host needs KVM; guests run under TCG here (kvm: 0)", "use a named model such as x86-64-v2-AES, or max"))
    return out


def storage_block_driver(storage_type: str, krbd: bool | None = False) -> str | None:
    """The QEMU driver that opens a disk of this storage type (None: not known, or an rbd
    storage whose ``krbd`` could not be read)."""
    if storage_type == "rbd":
        return None if krbd is None else "host_device" if krbd else "rbd"
    return STORAGE_BLOCK_DRIVER.get(storage_type)


def aio_axis_problem(storage_id: str, storage_type: str, driver: str | None,
                     aios: Collection[str]) -> tuple[str, str] | None:
    """An aio axis (two or more aio values among the cells) on a storage whose QEMU driver has
    no aio setting: qemu-server gives ``aio`` to file-posix's drivers only (``Blockdev.pm``
    generate_file_blockdev), so every cell would run the same."""
    if len(set(aios)) < 2 or driver is None or driver in AIO_DRIVERS:
        return None
    lib = BLOCK_DRIVER_LIBRARY.get(driver)
    return (f"aio is varied ({', '.join(sorted(set(aios)))}), but QEMU opens the disks of Proxmox storage {storage_id} "
            f"({storage_type}) with its {driver} driver{f' ({lib})' if lib else ''}, which has no aio setting: "
            "every aio cell would run the same",
            "remove aio from the cells, or measure it on a storage whose disks are files or block devices "
            "(dir, nfs, lvm, lvmthin, zfspool, or rbd with krbd)")


# ---- a stored config's disks -----------------------------------------------------------


def root_disk_key(config: Mapping[str, object]) -> str | None:
    """The boot disk: the first disk of ``boot: order=...``, else ``bootdisk``, else the first disk key."""
    boot = parse_options(str(config.get("boot") or ""), default_key="legacy")
    for key in (k.strip() for k in (boot.get("order") or "").split(";")):
        if DISK_KEY_RE.match(key) and key in config and "media=cdrom" not in str(config[key]):
            return key
    if config.get("bootdisk") and str(config["bootdisk"]) in config:
        return str(config["bootdisk"])
    disks = sorted(k for k in config if DISK_KEY_RE.match(k) and "media=cdrom" not in str(config[k]))
    return disks[0] if disks else None


def disk_volumes(config: Mapping[str, object]) -> dict[str, str]:
    """Every disk key -> its volume id (CD-ROMs and ``none`` left out; ``unusedN`` kept)."""
    out = {}
    for key, value in config.items():
        if DISK_KEY_RE.match(key) or re.match(r"^(unused\d+|efidisk0|tpmstate0)$", key):
            volid, opts = parse_disk(str(value))
            if volid and volid not in ("none", "cdrom") and opts.get("media") != "cdrom":
                out[key] = volid
    return out


def config_text(config: Mapping[str, object]) -> str:
    """A config as ``qm config`` prints it: ``key: value`` lines, sorted; ``digest`` left out."""
    return "".join(f"{k}: {config[k]}\n" for k in sorted(config) if k != "digest")


def storage_of(volid: str) -> str:
    return volid.partition(":")[0]
