"""A :class:`~vmbench.scenario.model.VmConfig` as Proxmox VE config options (pure).

The option grammar is qemu-server's (``QemuServer/Drive.pm``, ``CPUConfig.pm``; NOTES.md
section 1): a new disk is ``virtio1=STORAGE:GiB,cache=..,aio=..,iothread=1,serial=..``
(plus ``discard=on|ignore``, ``detect_zeroes=0|1`` and the I/O limits ``iops_rd=``,
``mbps_wr=``, ``iops_max=``, ``iops_max_length=``/``bps_max_length=``... where the scenario
sets them);
SCSI disks get ``scsihw: virtio-scsi-single`` (one controller per disk, the only one where
an iothread works) or ``virtio-scsi-pci`` for ``virtio-scsi-shared``; the CPU is
``[cputype=]MODEL[,flags=+aes;-pcid]`` with flags from PVE's allow-list only.  Also the
reverse: a stored config read back into typed values.
"""

from __future__ import annotations

import re
import urllib.parse
from decimal import Decimal
from typing import Collection, Mapping

from ...errors import HypervisorError
from ...scenario.model import LIMIT_BURSTS, LIMIT_RATES, CpuConfig, VmConfig, limit_bytes
from ...settings import PVE_CPU_FLAGS, Bus, CpuMode, DetectZeroes, Discard, Feature, ImageFormat
from ..qemu_cmdline import AIO_DRIVERS

GiB = 1 << 30
MiB = 1 << 20

#: disk key prefix of each bus, and its highest index
BUS_PREFIX = {Bus.VIRTIO_BLK: "virtio", Bus.VIRTIO_SCSI: "scsi", Bus.VIRTIO_SCSI_SHARED: "scsi", Bus.SATA: "sata"}
MAX_INDEX = {"virtio": 15, "scsi": 30, "sata": 5, "ide": 3}
DISK_KEY_RE = re.compile(r"^(virtio|scsi|sata|ide)(\d+)$")
#: per-VM CPU flags PVE accepts (qemu-server CPUConfig.pm)
CPU_FLAGS = PVE_CPU_FLAGS
#: storage types whose disks are files (``format=`` applies; qcow2 possible where listed)
FILE_STORAGES = ("dir", "nfs", "cifs", "glusterfs", "btrfs", "cephfs")
QCOW2_STORAGES = ("dir", "nfs", "cifs", "glusterfs")
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


ZEROES_ON_WITH_DISCARD = ("detect_zeroes on with discard unmap is not possible on Proxmox: qemu-server makes it unmap "
                          "whenever discard=on", "use detect_zeroes: unmap (or leave it out) with discard: unmap, "
                          "or discard: ignore with detect_zeroes: on")


def zeroes_options(vm: VmConfig) -> list[str]:
    """``discard=on|ignore`` and ``detect_zeroes=0|1`` where the scenario sets them (else
    qemu-server's defaults: discard ignore; detect-zeroes on, unmap with ``discard=on``).

    qemu-server has no ``detect_zeroes=unmap``: ``detect_zeroes=1`` with ``discard=on`` is
    unmap, and on with ``discard=on`` is not possible (:func:`vm_problems`)."""
    out = []
    if vm.discard is not None:
        out.append(f"discard={'on' if vm.discard is Discard.UNMAP else 'ignore'}")
    if vm.detect_zeroes is not None:
        if vm.detect_zeroes is DetectZeroes.ON and vm.discard is Discard.UNMAP:
            raise HypervisorError(ZEROES_ON_WITH_DISCARD[0], ZEROES_ON_WITH_DISCARD[1])
        out.append(f"detect_zeroes={0 if vm.detect_zeroes is DetectZeroes.OFF else 1}")
    return out


def drive_zeroes(opts: Mapping[str, str]) -> tuple[str, str]:
    """(detect-zeroes, discard) QEMU gets for a stored disk, as qemu-server derives them
    (``Drive.pm`` detect_zeroes_cmdline_option; ``Blockdev.pm``)."""
    discard = Discard.UNMAP if opts.get("discard") == "on" else Discard.IGNORE
    flag = opts.get("detect_zeroes")
    if flag is not None and flag.strip() in ("0", "off", "no", "false"):
        zeroes = DetectZeroes.OFF
    else:
        zeroes = DetectZeroes.UNMAP if discard is Discard.UNMAP else DetectZeroes.ON
    return zeroes.value, discard.value


def burst_length_key(burst: str) -> str:
    """The option holding a burst's length: iops_rd_max -> iops_rd_max_length, mbps_max ->
    bps_max_length (qemu-server has no mbps_*_length)."""
    return burst.replace("mbps", "bps") + "_length"


def limit_options(vm: VmConfig) -> list[str]:
    """The I/O limits that are set: ``iops_rd=500``, ``mbps=12.5`` (MiB/s), ``iops_rd_max=1000``,
    then ``burst_length`` as the length of every burst that is set (``iops_rd_max_length=5``)."""
    given = vm.limits.given()
    out = [f"{name}={given[name]}" for name in LIMIT_RATES + LIMIT_BURSTS if name in given]
    if vm.limits.burst_length is not None:
        out += [f"{burst_length_key(b)}={vm.limits.burst_length}" for b in vm.limits.bursts()]
    return out


def pve_throttle(opts: Mapping[str, str]) -> dict[str, int]:
    """A stored disk's I/O limits as qemu-server hands them to QEMU (``Blockdev.pm``
    generate_throttle_group; PVE 8's ``throttling.*`` the same), keyed by QEMU's throttle
    options (iops-total, bps-read-max, iops-total-max-length...), those that are not 0: MiB/s
    as truncated bytes; the ``*_length`` aliases of the lengths read too.  ``bps*`` (bytes)
    limits nothing: qemu-server's parse_drive turns it into ``mbps*`` "0.000" (it divides
    ``defined(...)``, not the value, by 1 MiB; 8.3.13 and 9.1.3)."""
    def number(*keys: str) -> float:
        for key in keys:
            try:
                if float(opts.get(key) or 0):
                    return float(opts[key])
            except ValueError:
                pass
        return 0.0

    out: dict[str, int] = {}
    for suffix, qemu in (("", "-total"), ("_rd", "-read"), ("_wr", "-write")):
        values = {f"bps{qemu}": limit_bytes(number(f"mbps{suffix}")),
                  f"bps{qemu}-max": limit_bytes(number(f"mbps{suffix}_max")),
                  f"bps{qemu}-max-length": int(number(f"bps{suffix}_max_length", f"bps{suffix}_length")),
                  f"iops{qemu}": int(number(f"iops{suffix}")),
                  f"iops{qemu}-max": int(number(f"iops{suffix}_max")),
                  f"iops{qemu}-max-length": int(number(f"iops{suffix}_max_length", f"iops{suffix}_length"))}
        out.update({k: v for k, v in values.items() if v})
    return out


def disk_option(vm: VmConfig, storage: str, storage_type: str, size: int, serial: str) -> str:
    """The new scratch disk: ``STORAGE:GiB,cache=,aio=,[iothread=1,]serial=[,discard=][,detect_zeroes=]
    [,iops..=][,format=]``."""
    parts = [f"{storage}:{size_gib(size)}", f"cache={vm.cache.value}", f"aio={vm.aio.value}"]
    if vm.iothread:
        if not vm.bus.takes_iothread:
            raise HypervisorError(f"iothread is not possible on bus {vm.bus.value}")
        parts.append("iothread=1")
    parts.append(f"serial={serial_option(serial)}")
    parts += zeroes_options(vm)
    parts += limit_options(vm)
    if storage_type in FILE_STORAGES:
        if vm.format is ImageFormat.QCOW2 and storage_type not in QCOW2_STORAGES:
            raise HypervisorError(f"storage {storage} ({storage_type}) cannot hold qcow2 images")
        parts.append(f"format={vm.format.value}")
    elif vm.format is not ImageFormat.RAW:
        raise HypervisorError(f"storage {storage} ({storage_type}) holds raw volumes only, not {vm.format.value}",
                              "use format: raw, or a directory-like storage (dir, nfs, cifs) for qcow2")
    return ",".join(parts)


def scsihw(vm: VmConfig) -> str | None:
    """The SCSI controller model a SCSI bus needs; None leaves the template's."""
    if vm.bus is Bus.VIRTIO_SCSI:
        return "virtio-scsi-single"  # one controller per disk: iothread works, like libvirt's virtio-scsi
    if vm.bus is Bus.VIRTIO_SCSI_SHARED:
        return "virtio-scsi-pci"  # one controller for every SCSI disk
    return None


def cpu_option(cpu: CpuConfig) -> str:
    """``kvm64``, ``x86-64-v2-AES,flags=+aes``, ``host``, ``max``..."""
    if cpu.mode is CpuMode.HOST_PASSTHROUGH:
        model = "host"
    elif cpu.mode is CpuMode.MAX:
        model = "max"
    else:
        model = cpu.model or "kvm64"
    flags = []
    for name, state in cpu.all_features():
        if name not in CPU_FLAGS:
            raise HypervisorError(f"Proxmox does not take the CPU flag {name} per VM",
                                  "flags Proxmox allows: " + ", ".join(CPU_FLAGS))
        flags.append(("+" if state is Feature.ON else "-") + name)
    return model + (f",flags={';'.join(flags)}" if flags else "")


def tags(run_tag: str) -> str:
    return f"vmbench;vmbench-{run_tag}"


def description(run_tag: str, seq: int, cells: tuple[str, ...], created: str, version: str) -> str:
    """The VM's notes: what made it and how it goes away (at most 8192 characters)."""
    text = (f"vmbench run {run_tag}, VM {seq} (cells: {', '.join(cells) or '-'}), created {created} by vmbench {version}.\n"
            "Removed when the run ends; after a crash `vmbench cleanup SCENARIO` removes it.\n"
            f"vmbench-run: {run_tag}\n")
    return text[:8192]


def vm_options(vm: VmConfig, *, kvm: bool, agent: str = "1") -> dict[str, object]:
    """The VM-wide options (not the disk): cores, memory, CPU, accelerator, agent, controller."""
    out: dict[str, object] = {
        "cores": vm.vcpus,
        "sockets": 1,
        "memory": vm.memory_mib,
        "cpu": cpu_option(vm.cpu),
        "kvm": kvm,
        "agent": agent,
    }
    hw = scsihw(vm)
    if hw:
        out["scsihw"] = hw
    return out


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


# ---- reading a stored config back -----------------------------------------------------------


def parse_options(text: str, default_key: str | None = None) -> dict[str, str]:
    """A PVE property string ``a=1,b=2`` (its first bare item under ``default_key``)."""
    out: dict[str, str] = {}
    for i, item in enumerate(p for p in text.split(",") if p != ""):
        key, eq, value = item.partition("=")
        if not eq:
            if default_key is None or i != 0:
                out[key] = ""
                continue
            key, value = default_key, item
        out[key.strip()] = value.strip()
    return out


def parse_disk(value: str) -> tuple[str, dict[str, str]]:
    """``local-zfs:vm-100-disk-1,cache=none,size=8G`` -> (volid, options)."""
    opts = parse_options(value, default_key="file")
    return opts.pop("file", ""), opts


def volume_format(volid: str, opts: Mapping[str, str]) -> str:
    """A disk's format: ``format=`` when stored, else the volume name's extension, else raw."""
    if opts.get("format"):
        return opts["format"]
    m = re.search(r"\.(raw|qcow2|vmdk)$", volid)
    return m.group(1) if m else "raw"


def config_bus(key: str, scsihw_value: str | None) -> str | None:
    """A disk key and the controller model as a vmbench bus name."""
    m = DISK_KEY_RE.match(key)
    if not m:
        return None
    prefix = m.group(1)
    if prefix == "virtio":
        return Bus.VIRTIO_BLK.value
    if prefix == "sata":
        return Bus.SATA.value
    if prefix == "scsi":
        hw = scsihw_value or "lsi"
        if hw == "virtio-scsi-single":
            return Bus.VIRTIO_SCSI.value
        if hw == "virtio-scsi-pci":
            return Bus.VIRTIO_SCSI_SHARED.value
        return f"scsi ({hw})"
    return prefix


def cpu_from_config(value: str | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``x86-64-v2-AES,flags=+aes;-pcid`` -> ("x86-64-v2-AES", (("aes","on"),("pcid","off"))); host is host-passthrough."""
    opts = parse_options(value or "kvm64", default_key="cputype")
    model = opts.get("cputype") or "kvm64"
    model = {"host": "host-passthrough"}.get(model, model)
    flags = []
    for f in (opts.get("flags") or "").split(";"):
        f = f.strip()
        if f[:1] in "+-" and len(f) > 1:
            flags.append((f[1:], "on" if f[0] == "+" else "off"))
    return model, tuple(flags)


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
