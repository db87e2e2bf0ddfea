"""Proxmox VE's spelling of every VM axis, one row each: :data:`CODECS` (pure).

A row (:class:`AxisCodec`) says, for its axis, how vmbench writes the setting into the VM it
configures (:mod:`.config`: the new scratch disk's option string and the VM's own options),
how it reads it back from the stored config and from QEMU's command line (:mod:`.evidence`:
the readings its axis's ``verify`` names), how it reads it from a user's VM config
(:mod:`.current`) and how it edits it in the ``qm set`` the advice shows
(vmbench.advice.apply).  Each of those walks the table, in its order, handing every row the
same context; a row leaves alone what its axis does not have (aes is written, read and
applied with the cpu row, as a flag of ``cpu``).

The option grammar is qemu-server's (``QemuServer/Drive.pm``, ``CPUConfig.pm``; NOTES.md
section 1): most disk settings are one option of the disk (:func:`disk_option_codec`:
``cache=``, ``aio=``), discard and detect_zeroes two that qemu-server reads together
(``detect_zeroes=1`` is unmap with ``discard=on``), the I/O limits one each (:mod:`.limits`),
the bus the disk's key with the VM's ``scsihw``, the format a storage's ``format=`` or none,
krbd the rbd storage's (a temporary storage entry), the CPU, vCPUs and memory options of the
VM (:mod:`.cputype`).  The table's order is the order a user's VM is read in (what it says
about each setting, in ``unknown`` and ``assumed``) and the ``qm set`` is assembled in; what
vmbench writes is placed in the order it has always sent (:data:`DISK_OPTIONS`,
:data:`VM_OPTIONS`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Mapping

from ...errors import HypervisorError
from ...scenario.model import LIMIT_NAMES, IoLimits, VmConfig
from ...settings import Aio, Bus, Cache, DetectZeroes, Discard, ImageFormat
from ..codec import with_limit
from ..existing import CurrentVm, assume, read_choice
from ..qemu_cmdline import QemuArgs, QemuDisk, cpu_readings, throttle_readings
from .cputype import cpu_from_config, cpu_option, read_cpu
from .limits import LIMIT_OPTIONS, burst_length_key, limit_items, limit_options, pve_throttle, read_limits
from .propstring import parse_disk, parse_options

#: disk key prefix of each bus, and its highest index
BUS_PREFIX = {Bus.VIRTIO_BLK: "virtio", Bus.VIRTIO_SCSI: "scsi", Bus.VIRTIO_SCSI_SHARED: "scsi", Bus.SATA: "sata"}
MAX_INDEX = {"virtio": 15, "scsi": 30, "sata": 5, "ide": 3}
DISK_KEY_RE = re.compile(r"^(virtio|scsi|sata|ide)(\d+)$")
SCSIHW_BUS = {"virtio-scsi-single": Bus.VIRTIO_SCSI, "virtio-scsi-pci": Bus.VIRTIO_SCSI_SHARED}
#: storage types whose disks are files (``format=`` applies; qcow2 possible where listed)
FILE_STORAGES = ("dir", "nfs", "cifs", "glusterfs", "btrfs", "cephfs")
QCOW2_STORAGES = ("dir", "nfs", "cifs", "glusterfs")
#: the order vmbench writes a new disk's options in (after ``STORAGE:GiB``; others after them;
#: qemu-server stores them sorted)
DISK_OPTIONS = ("cache", "aio", "iothread", "serial", "discard", "detect_zeroes", *LIMIT_OPTIONS, "format")
#: the order vmbench writes the VM's own options in (others after them)
VM_OPTIONS = ("cores", "sockets", "memory", "cpu", "kvm", "agent", "scsihw")
_TRUE = ("1", "on", "yes", "true")
ZEROES_ON_WITH_DISCARD = ("detect_zeroes on with discard unmap is not possible on Proxmox: qemu-server makes it unmap "
                          "whenever discard=on", "use detect_zeroes: unmap (or leave it out) with discard: unmap, "
                          "or discard: ignore with detect_zeroes: on")


def ordered(items: Mapping[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    """``items`` in ``order`` (others after, as given)."""
    return dict(sorted(items.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


# ---- what a row is handed -------------------------------------------------------------------


@dataclass
class NewDisk:
    """The scratch disk vmbench adds, as the rows write its options (:func:`.config.disk_option`)."""

    storage: str
    storage_type: str
    options: dict[str, str] = field(default_factory=dict)  # cache=..., aio=...: placed in DISK_OPTIONS order


@dataclass
class StoredDisk:
    """A VM's stored config and its scratch disk, as the run's evidence reads them back."""

    config: Mapping[str, object]
    key: str
    volid: str = ""
    opts: Mapping[str, str] | None = None  # None: the config has no such disk

    @cached_property
    def limits(self) -> dict[str, Any]:
        return throttle_readings("config_", pve_throttle(self.opts or {}))

    @cached_property
    def zeroes(self) -> tuple[str, str]:
        return drive_zeroes(self.opts or {})


@dataclass
class QemuView:
    """The scratch disk as the VM's QEMU command line has it."""

    readings: Mapping[str, Any]  # vmbench.drivers.qemu_cmdline.disk_readings
    disk: QemuDisk | None  # the disk on the command line, for options no reading names
    args: QemuArgs
    scratch_path: str


@dataclass
class UserVm:
    """A user's VM config as :mod:`.current` reads it: the disk picked and the bus it is on
    (read first: what the rest of the disk means follows from it)."""

    config: Mapping[str, Any]
    key: str
    volid: str
    opts: Mapping[str, str]
    unknown: list[str]
    assumed: list[str]
    bus: Bus
    scsihw: str  # "" when the VM states none

    @cached_property
    def limits(self) -> IoLimits:
        return read_limits(self.key, self.opts, self.unknown)


def user_vm(config: Mapping[str, Any], key: str, unknown: list[str], assumed: list[str]) -> UserVm:
    volid, opts = parse_disk(str(config[key]))
    prefix = DISK_KEY_RE.match(key).group(1)  # type: ignore[union-attr]  # the reader picked a disk key
    hw = str(config.get("scsihw") or "")
    if prefix == "virtio":
        bus = Bus.VIRTIO_BLK
    elif prefix == "sata":
        bus = Bus.SATA
    elif prefix == "scsi":
        bus = SCSIHW_BUS.get(hw, Bus.VIRTIO_SCSI_SHARED)
        if hw not in SCSIHW_BUS:
            unknown.append(f"bus: {key} is on SCSI controller {hw or 'lsi (the default)'}, not virtio-scsi-single or "
                           f"virtio-scsi-pci; read as {bus}")
    else:
        bus = Bus.SATA
        unknown.append(f"bus: {key} is an IDE disk, not on a bus vmbench measures ({Bus.allowed()}); read as sata")
    return UserVm(config, key, volid, opts, unknown, assumed, bus, hw)


@dataclass
class DiskEdit:
    """A user's disk option string (or a placeholder's) being edited for ``qm set``."""

    changed: tuple[str, ...]  # the settings keys that change
    key: str  # the disk's key once applied (virtio0 becomes scsi0 on a SCSI bus)
    opts: Mapping[str, str]  # its options as read
    changes: dict[str, str | None] = field(default_factory=dict)  # option -> its new value; None: removed
    notes: list[str] = field(default_factory=list)


@dataclass
class VmEdit:
    """The ``qm set`` of an apply snippet beyond the disk's option string, and the commands around it."""

    changed: tuple[str, ...]
    mine: CurrentVm | None  # the user's VM, when read
    vmid: str
    key: str  # the disk's key once applied
    volid: str  # its volume (a placeholder without a VM read)
    argv: list[str] = field(default_factory=list)  # more of ``qm set``
    notes: list[str] = field(default_factory=list)
    before: list[tuple[list[str], str]] = field(default_factory=list)  # commands first (argv, note)
    after: list[tuple[list[str], str]] = field(default_factory=list)  # commands after the qm set


# ---- a row -----------------------------------------------------------------------------------


def _nothing(*_: object) -> None:
    return None


def _no_readings(_: object) -> Mapping[str, object]:
    return {}


def _as_is(_: UserVm, vm: VmConfig) -> VmConfig:
    return vm


@dataclass(frozen=True)
class AxisCodec:
    """One axis as Proxmox spells it (its hooks default to doing nothing)."""

    axis: str  # the axis's name (vmbench.scenario.axes)
    write: Callable[[VmConfig, NewDisk], None] = _nothing  # the new disk's options
    write_vm: Callable[[VmConfig, dict[str, object]], None] = _nothing  # the VM's own options
    config: Callable[[StoredDisk], Mapping[str, object]] = _no_readings  # config_* readings
    qemu: Callable[[QemuView], Mapping[str, object]] = _no_readings  # qemu_* readings
    current: Callable[[UserVm, VmConfig], VmConfig] = _as_is  # the VM with this axis read from a user's config
    edit_disk: Callable[[VmConfig, DiskEdit], None] = _nothing
    edit_vm: Callable[[VmConfig, VmEdit], None] = _nothing


def reading(key: str) -> Callable[[QemuView], Mapping[str, object]]:
    """A reading of the command line's disk readings, where it has one."""
    return lambda q: {key: q.readings[key]} if q.readings.get(key) is not None else {}


def qemu_option(key: str, option: str) -> Callable[[QemuView], Mapping[str, object]]:
    """A reading of the first value the scratch disk's nodes give QEMU's option ``option``."""
    def read(q: QemuView) -> Mapping[str, object]:
        values = q.disk.option(option) if q.disk is not None else []
        return {key: values[0]} if values else {}
    return read


def disk_option_codec(axis: str, option: str, choice: Any, *, default: tuple[Any, str] | None = None,
                      qemu: Callable[[QemuView], Mapping[str, object]] | None = None) -> AxisCodec:
    """An axis that is one option of the disk, its value the setting's own (a member of the
    Choice enum ``choice`` in the VmConfig field of the axis's name, or None: not written,
    left to qemu-server).  ``default``: (value, note) a user's disk without it reads as, said
    in ``assumed`` ("{key}" in the note is the disk's key); ``qemu``: its reading from the
    command line (default: ``qemu_<axis>`` of the disk readings)."""

    def write(vm: VmConfig, d: NewDisk) -> None:
        value = getattr(vm, axis)
        if value is not None:
            d.options[option] = value.value

    def current(u: UserVm, vm: VmConfig) -> VmConfig:
        value = read_choice(choice, u.opts.get(option), axis, u.key, u.unknown)
        if default is not None:
            value = assume(value, default[0], default[1].format(key=u.key), u.assumed)
        return replace(vm, **{axis: value})

    def edit(vm: VmConfig, e: DiskEdit) -> None:
        if axis in e.changed:
            value = getattr(vm, axis)
            e.changes[option] = None if value is None else value.value

    return AxisCodec(axis, write=write, current=current, edit_disk=edit,
                     config=lambda s: {f"config_{axis}": s.opts.get(option)} if s.opts is not None else {},
                     qemu=qemu or reading(f"qemu_{axis}"))


# ---- iothread, discard and detect_zeroes, format ----------------------------------------------


def _write_iothread(vm: VmConfig, d: NewDisk) -> None:
    if vm.iothread:
        if not vm.bus.takes_iothread:
            raise HypervisorError(f"iothread is not possible on bus {vm.bus.value}")
        d.options["iothread"] = "1"


def _current_iothread(u: UserVm, vm: VmConfig) -> VmConfig:
    iothread = str(u.opts.get("iothread", "0")).lower() in _TRUE
    if iothread and u.bus is Bus.VIRTIO_SCSI_SHARED:
        iothread = False
        u.unknown.append(f"iothread: {u.key} has iothread=1, which Proxmox ignores with scsihw {u.scsihw or 'lsi'} "
                         "(it needs virtio-scsi-single); read as off")
    return replace(vm, iothread=iothread)


def _edit_iothread(vm: VmConfig, e: DiskEdit) -> None:
    if "iothread" not in e.changed and "bus" not in e.changed:
        return
    if vm.iothread and vm.bus.takes_iothread:
        e.changes["iothread"] = "1"
    elif "iothread" in e.opts:
        e.changes["iothread"] = None
        if vm.iothread:
            e.notes.append(f"iothread dropped: {vm.bus} has none")


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


def _discard_option(value: Discard | None) -> str | None:
    """``discard=on|ignore`` where the scenario sets it (else qemu-server's default: ignore)."""
    return None if value is None else "on" if value is Discard.UNMAP else "ignore"


def _write_discard(vm: VmConfig, d: NewDisk) -> None:
    if vm.discard is not None:
        d.options["discard"] = "on" if vm.discard is Discard.UNMAP else "ignore"


def _current_discard(u: UserVm, vm: VmConfig) -> VmConfig:
    return replace(vm, discard=None if "discard" not in u.opts else Discard.UNMAP if u.opts["discard"] == "on" else Discard.IGNORE)


def _edit_discard(vm: VmConfig, e: DiskEdit) -> None:
    if "discard" in e.changed:
        e.changes["discard"] = _discard_option(vm.discard)


def _write_zeroes(vm: VmConfig, d: NewDisk) -> None:
    """``detect_zeroes=0|1`` where the scenario sets it (else qemu-server's default: on, unmap
    with ``discard=on``).  qemu-server has no ``detect_zeroes=unmap``: ``detect_zeroes=1``
    with ``discard=on`` is unmap, and on with ``discard=on`` is not possible
    (:func:`.config.vm_problems` says so before anything is created)."""
    if vm.detect_zeroes is not None:
        if vm.detect_zeroes is DetectZeroes.ON and vm.discard is Discard.UNMAP:
            raise HypervisorError(ZEROES_ON_WITH_DISCARD[0], ZEROES_ON_WITH_DISCARD[1])
        d.options["detect_zeroes"] = "0" if vm.detect_zeroes is DetectZeroes.OFF else "1"


def _current_zeroes(u: UserVm, vm: VmConfig) -> VmConfig:
    if "detect_zeroes" not in u.opts:
        return replace(vm, detect_zeroes=None)
    if u.opts["detect_zeroes"].strip().lower() in ("0", "off", "no", "false"):
        return replace(vm, detect_zeroes=DetectZeroes.OFF)
    return replace(vm, detect_zeroes=DetectZeroes.UNMAP if u.opts.get("discard") == "on" else DetectZeroes.ON)


def _edit_zeroes(vm: VmConfig, e: DiskEdit) -> None:
    if "detect_zeroes" in e.changed:
        if vm.detect_zeroes is None:
            e.changes["detect_zeroes"] = None
        elif vm.detect_zeroes is DetectZeroes.ON and "discard" in e.changed and vm.discard is Discard.UNMAP:
            e.notes.append(f"detect_zeroes not set: {ZEROES_ON_WITH_DISCARD[0]}")
        else:
            e.changes["detect_zeroes"] = "0" if vm.detect_zeroes is DetectZeroes.OFF else "1"
    if ("discard" in e.changed or "detect_zeroes" in e.changed) and vm.detect_zeroes is DetectZeroes.UNMAP \
            and vm.discard is not Discard.UNMAP:
        e.notes.append("detect_zeroes=1 is unmap only with discard=on (else on)")


def volume_format(volid: str, opts: Mapping[str, str]) -> str:
    """A disk's format: ``format=`` when stored, else the volume name's extension, else raw."""
    if opts.get("format"):
        return opts["format"]
    m = re.search(r"\.(raw|qcow2|vmdk)$", volid)
    return m.group(1) if m else "raw"


def _write_format(vm: VmConfig, d: NewDisk) -> None:
    if d.storage_type in FILE_STORAGES:
        if vm.format is ImageFormat.QCOW2 and d.storage_type not in QCOW2_STORAGES:
            raise HypervisorError(f"storage {d.storage} ({d.storage_type}) cannot hold qcow2 images")
        d.options["format"] = vm.format.value
    elif vm.format is not ImageFormat.RAW:
        raise HypervisorError(f"storage {d.storage} ({d.storage_type}) holds raw volumes only, not {vm.format.value}",
                              "use format: raw, or a directory-like storage (dir, nfs, cifs) for qcow2")


def _current_format(u: UserVm, vm: VmConfig) -> VmConfig:
    return replace(vm, format=read_choice(ImageFormat, volume_format(u.volid, u.opts), "format", u.key, u.unknown)
                   or ImageFormat.RAW)


def _move_disk(vm: VmConfig, e: VmEdit) -> None:
    if "format" in e.changed:  # a volume's format changes only by copying it
        storage = e.volid.partition(":")[0] if ":" in e.volid else "<storage>"
        e.after.append((["qm", "disk", "move", e.vmid, e.key, storage, "--format", vm.format.value],
                        f"a volume's format changes only by copying it: this writes a {vm.format.value} copy (qcow2 "
                        "needs a file storage: dir, nfs, cifs) and keeps the old volume as unusedN (add --delete 1 "
                        "to remove it)"))


# ---- the bus: the disk's key and the VM's scsihw ------------------------------------------------


def scsihw(vm: VmConfig) -> str | None:
    """The SCSI controller model a SCSI bus needs; None leaves the template's."""
    if vm.bus is Bus.VIRTIO_SCSI:
        return "virtio-scsi-single"  # one controller per disk: iothread works, like libvirt's virtio-scsi
    if vm.bus is Bus.VIRTIO_SCSI_SHARED:
        return "virtio-scsi-pci"  # one controller for every SCSI disk
    return None


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


def _config_bus(s: StoredDisk) -> Mapping[str, object]:
    if s.opts is None:
        return {}
    hw = None if s.config.get("scsihw") is None else str(s.config.get("scsihw"))
    controller = (hw or "lsi") if s.key.startswith("scsi") else "ahci" if s.key.startswith("sata") else "virtio-blk-pci"
    return {"config_bus": config_bus(s.key, hw), "controller": controller}


def _write_scsihw(vm: VmConfig, opts: dict[str, object]) -> None:
    hw = scsihw(vm)
    if hw:
        opts["scsihw"] = hw


def _edit_ssd(vm: VmConfig, e: DiskEdit) -> None:
    if e.key.startswith("virtio") and "ssd" in e.opts:
        e.changes["ssd"] = None
        e.notes.append("ssd dropped: virtio-blk disks have no ssd option")


def _edit_scsihw(vm: VmConfig, e: VmEdit) -> None:
    hw = scsihw(vm) if vm.bus.is_scsi and ("bus" in e.changed or "iothread" in e.changed) else None
    if hw and (e.mine is None or e.mine.extra.get("scsihw", "lsi") != hw):
        e.argv += ["--scsihw", hw]
        e.notes.append(f"scsihw is VM-wide: every SCSI disk of the VM gets the {hw} controller")


# ---- the CPU, vCPUs and memory: options of the VM -----------------------------------------------


def _write_cpu(vm: VmConfig, opts: dict[str, object]) -> None:
    opts["cpu"] = cpu_option(vm.cpu)


def _config_cpu(s: StoredDisk) -> Mapping[str, object]:
    model, flags = cpu_from_config(None if s.config.get("cpu") is None else str(s.config.get("cpu")))
    return {"cpu_model": model, "cpu_flags": flags}


def _edit_cpu(vm: VmConfig, e: VmEdit) -> None:
    if "cpu" in e.changed:
        try:
            e.argv += ["--cpu", cpu_option(vm.cpu)]
        except HypervisorError as exc:
            e.notes.append(f"cpu {vm.cpu.label} cannot be set on Proxmox: {exc.message}")


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value).strip()) if value is not None and str(value).strip() else default
    except ValueError:
        return default


def read_vcpus(config: Mapping[str, Any], unknown: list[str]) -> int:
    cores, sockets = _int(config.get("cores"), 1), _int(config.get("sockets"), 1)
    total = max(1, cores) * max(1, sockets)
    if config.get("vcpus") is not None and _int(config["vcpus"], total) != total:
        unknown.append(f"vcpus: {config['vcpus']} of {total} vCPUs are online (vcpus:); read as {total}")
    return total


def _write_vcpus(vm: VmConfig, opts: dict[str, object]) -> None:
    opts.update(cores=vm.vcpus, sockets=1)


def _edit_vcpus(vm: VmConfig, e: VmEdit) -> None:
    if "vcpus" in e.changed:
        sockets = int(e.mine.extra.get("sockets", "1")) if e.mine is not None else 1
        if sockets > 1 and vm.vcpus % sockets == 0:
            e.argv += ["--cores", str(vm.vcpus // sockets)]
        else:
            e.argv += ["--sockets", "1", "--cores", str(vm.vcpus)] if sockets != 1 else ["--cores", str(vm.vcpus)]


def read_memory(config: Mapping[str, Any], unknown: list[str], assumed: list[str]) -> int:
    raw = config.get("memory")
    if raw is None or str(raw).strip() == "":
        assumed.append("memory: the VM states none; Proxmox's default is 512 MiB")
        return 512
    opts = parse_options(str(raw), default_key="current")  # 8.x+: "[current=]MiB"
    value = _int(opts.get("current"), -1)
    if value <= 0:
        unknown.append(f"memory: {raw!r} is not a number of MiB; read as 512")
        return 512
    return value


def _edit_memory(vm: VmConfig, e: VmEdit) -> None:
    if "memory_mib" in e.changed:
        e.argv += ["--memory", str(vm.memory_mib)]


# ---- the I/O limits: an option each (burst_length: one per burst) -------------------------------


def _limit(name: str) -> AxisCodec:
    def edit(vm: VmConfig, e: DiskEdit) -> None:
        if name not in e.changed:
            return
        if vm.limits.get(name) is None:  # the limit removed, and its burst's length
            for opt in (name, burst_length_key(name)) if name.endswith("_max") else (name,):
                e.changes[opt] = None
        stated = dict(item.split("=", 1) for item in limit_options(vm))
        for opt, value in stated.items():
            if opt == name or (name == "burst_length" and opt.endswith("_length")):
                e.changes[opt] = value

    return AxisCodec(
        name,
        write=lambda vm, d: d.options.update(limit_items(vm.limits, name)),
        config=lambda s: {f"config_{name}": s.limits[f"config_{name}"]} if s.opts is not None else {},
        qemu=reading(f"qemu_{name}"),
        current=lambda u, vm: with_limit(vm, name, u.limits.get(name)),
        edit_disk=edit,
    )


# ---- krbd: the rbd storage's -------------------------------------------------------------------


def _qemu_krbd(q: QemuView) -> Mapping[str, object]:
    if not q.scratch_path.startswith(("rbd:", "/dev/rbd")):
        return {}  # not an rbd storage's disk
    return {"qemu_krbd": {"rbd": False, "host_device": True}.get(str(q.readings.get("protocol")))}


def _pvesm_krbd(vm: VmConfig, e: VmEdit) -> None:
    if "krbd" not in e.changed:
        return
    storage = parse_disk(e.mine.disk_spec)[0].partition(":")[0] if e.mine is not None else "<storage>"
    e.before.append((["pvesm", "set", storage or "<storage>", "--krbd", "1" if vm.krbd else "0"],
                     "krbd is a setting of the rbd storage, not of the VM: every VM on it opens its disks this way from "
                     "its next start; for one VM only, add an rbd storage on the same pool with the other krbd and move "
                     "the disk there (qm disk move)"))


CODECS: tuple[AxisCodec, ...] = (
    AxisCodec("iothread", write=_write_iothread, qemu=reading("qemu_iothread"), current=_current_iothread,
              edit_disk=_edit_iothread),
    disk_option_codec("cache", "cache", Cache, default=(Cache.NONE, "cache: {key} states none; Proxmox's default is none "
                                                                     "(O_DIRECT)")),
    disk_option_codec("aio", "aio", Aio, default=(Aio.IO_URING, "aio: {key} states none; Proxmox's default is io_uring "
                                                                "(native or threads on LVM, CIFS and krbd storages when "
                                                                "the cache is not direct)")),
    AxisCodec("discard", write=_write_discard, config=lambda s: {"config_discard": s.zeroes[1]} if s.opts is not None else {},
              qemu=reading("qemu_discard"), current=_current_discard, edit_disk=_edit_discard),
    AxisCodec("detect_zeroes", write=_write_zeroes,
              config=lambda s: {"config_detect_zeroes": s.zeroes[0]} if s.opts is not None else {},
              qemu=reading("qemu_detect_zeroes"), current=_current_zeroes, edit_disk=_edit_zeroes),
    AxisCodec("format", write=_write_format,
              config=lambda s: {"config_format": volume_format(s.volid, s.opts)} if s.opts is not None else {},
              qemu=reading("qemu_format"), current=_current_format, edit_vm=_move_disk),
    AxisCodec("bus", write_vm=_write_scsihw, config=_config_bus, current=lambda u, vm: replace(vm, bus=u.bus),
              edit_disk=_edit_ssd, edit_vm=_edit_scsihw),
    AxisCodec("cpu", write_vm=_write_cpu, config=_config_cpu, qemu=lambda q: cpu_readings(q.args),
              current=lambda u, vm: replace(vm, cpu=read_cpu(u.config.get("cpu"), u.unknown, u.assumed)), edit_vm=_edit_cpu),
    AxisCodec("aes"),  # the cpu row's: a flag of cpu (+aes/-aes)
    AxisCodec("vcpus", write_vm=_write_vcpus, current=lambda u, vm: replace(vm, vcpus=read_vcpus(u.config, u.unknown)),
              edit_vm=_edit_vcpus),
    AxisCodec("memory", write_vm=lambda vm, opts: opts.update(memory=vm.memory_mib),
              current=lambda u, vm: replace(vm, memory_mib=read_memory(u.config, u.unknown, u.assumed)),
              edit_vm=_edit_memory),
    *(_limit(n) for n in LIMIT_NAMES),
    AxisCodec("krbd", qemu=_qemu_krbd, edit_vm=_pvesm_krbd),  # written as the rbd storage entry the driver picks
)
