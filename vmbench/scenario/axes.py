"""The VM axes, one row each: how a setting is read from YAML, compared, named, combined,
stored, shown and verified.

Every VM setting a scenario can give under ``vm:``, a cell, a journey step or ``vary:`` is an
:class:`Axis` in :data:`AXES`. The loader, the matrix builder, :func:`settings_of`, the
report's columns (:func:`setting_columns`, :func:`stored_setting`), the run's checks that a
setting took effect (``verify``, walked by vmbench.run.evidence), the scenario reference page
and the advice all walk this table or the lookups :func:`views` derives from it (no other
module derives its own when imported), so adding an axis is one row here plus its
:class:`VmConfig` field, then one row in each VM driver's codec table
(vmbench.drivers.libvirt.codec, vmbench.drivers.proxmox.codec: how the driver writes it,
reads it back under the keys its ``verify`` names, reads it from a user's VM and edits it in
the advice's apply snippets).  tests/unit/test_made_up_axis.py adds a made-up axis that way
and checks that the rest follows.

The order of :data:`AXES` matters and is kept as it was before the table existed:

* it is the order of :func:`settings_of` (stored with every result row) and of a cell's
  ``changed`` names;
* it is the order axes are read and combined: ``cpu`` replaces the whole CPU, so it comes
  before ``aes``, which sets one flag of it.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, replace
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from ..errors import UsageError
from ..settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat
from ..units import format_size, parse_size
from .model import LIMIT_NAMES, CpuConfig, VmConfig, ZfsSettings, limit_mbps, parse_cpu_label
from .zfsprops import PROPERTIES, ZfsProperty, parse_property, parse_recordsize, parse_volblocksize
from .parsers import MiB
from .reader import Section, as_bool, as_int, as_str, join


class Derived(NamedTuple):
    """A check of a value that follows from an axis's setting rather than being it (the
    guest's write cache follows from the cache mode): ``asked`` gives the value expected of
    ``key`` in the effective settings, as ``source`` reports it."""

    what: str  # as messages name it
    asked: Callable[[VmConfig], object]
    key: str
    source: str
    required: bool = False


@dataclass(frozen=True)
class Axis:
    """One VM setting."""

    name: str  # the YAML key, under vm:/cells/journey and as a vary: axis
    settings_key: str | None  # its key in settings_of(vm); None: stored as part of another
    parse: Callable[[Section, str, VmConfig], VmConfig]  # (section, key, vm) -> vm with the YAML value applied
    value: Callable[[VmConfig], object]  # comparable: differs between two VMs iff this axis does
    label: Callable[[VmConfig, Any], str]  # (vm, YAML value) -> the value in a vary cell's name
    merge: Callable[[VmConfig, VmConfig], VmConfig]  # (vm, other) -> vm with this axis copied from other
    setting: Callable[[VmConfig], object]  # the value stored under settings_key
    describe: str  # the allowed values, for help in error messages
    #: how a run verifies it took effect: (key in the effective settings, who reports it,
    #: required) compared with setting(vm); "{config}" is the driver's configuration source.
    #: The drivers' codec rows report each key (vmbench.drivers.base.Applied.readings; the
    #: guest's own, guest_*, come from the guest).  A setting left to the hypervisor (None)
    #: is recorded, not compared.
    verify: tuple[tuple[str, str, bool], ...] = ()
    #: how a stored row without this setting reads in reports and comparisons: the setting
    #: was left to the hypervisor's default, or the row was stored before the axis existed
    unset: str = "not recorded"
    #: (vm) -> the value under ``name`` in a ``vm:`` mapping that gives exactly this setting;
    #: None: not written (left to the default, or written under another axis's key)
    yaml: Callable[[VmConfig], object] = lambda vm: None
    #: (vm, stored value) -> vm with the value ``setting`` stored (None: back to the default);
    #: None: not a setting of the VM (the host storage's: applied with zfs set)
    from_stored: Callable[[VmConfig, object], VmConfig] | None = None
    #: an option of the scratch disk (``qm set --scsi0 ...``, libvirt's ``<disk>``), not of the VM
    disk: bool = False
    #: a setting of the host storage (ZFS, applied with zfs set), not of the VM
    storage: bool = False
    #: what it does, in a few words, where ``describe`` (the values) does not say it (the
    #: scenario reference's column)
    what: str = "a VM setting"
    #: the drivers that take it (refused by the loader elsewhere, named in the reference); empty: every VM driver
    drivers: tuple[str, ...] = ()
    #: the checks of what follows from the setting, after its own ``verify`` ones
    derived: tuple[Derived, ...] = ()


# ---- YAML values of the axes that need more than one parser -------------------------------


def _memory(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        mib = value  # a bare number is MiB, as in libvirt and Proxmox
    else:
        mib = parse_size(value) // MiB
    if mib < 384:
        raise ValueError(f"{mib} MiB is too little; the guest needs at least 384 MiB")
    if mib > 1 << 20:
        raise ValueError(f"{mib} MiB is more than 1 TiB")
    return mib


def _feature(value: Any) -> Feature:
    if isinstance(value, bool):
        return Feature.ON if value else Feature.OFF
    return Feature.parse(value)


CPU_HELP = "a model name (kvm64, qemu64, host-passthrough, max, ...) or a mapping with model/aes/features"


def _cpu(sec: Section, key: str, value: Any, base: CpuConfig) -> CpuConfig:
    """``cpu: kvm64`` | ``cpu: host-passthrough`` | ``cpu: max`` | ``cpu: {model:, aes:, features:}``"""
    if isinstance(value, str):
        return _cpu_from_name(sec, key, value, base)
    if isinstance(value, dict):
        sub = Section(sec.ctx, value, join(sec.path, key), sec.line_of(key))
        cpu = base
        if sub.has("model"):
            cpu = _cpu_from_name(sub, "model", sub.get("model", as_str), cpu)
        if sub.has("aes"):
            cpu = replace(cpu, aes=sub.get("aes", _feature))
        if sub.has("features"):
            feats = sub.section("features")
            parsed = []
            for flag in list(feats.data):
                if not re.fullmatch(r"[a-z0-9_.-]+", str(flag)):
                    raise feats.fail(flag, "is not a CPU feature name")
                if flag == "aes":
                    raise feats.fail(flag, "set aes with cpu.aes, not under features")
                parsed.append((str(flag), feats.get(flag, _feature)))
            cpu = replace(cpu, features=tuple(sorted(parsed)))
        sub.done(("model", "aes", "features"))
        return cpu
    raise sec.fail(key, f"must be {CPU_HELP}, not {value!r}")


def _cpu_from_name(sec: Section, key: str, name: str, base: CpuConfig) -> CpuConfig:
    name = name.strip()
    if name in ("host-passthrough", "host"):
        return replace(base, mode=CpuMode.HOST_PASSTHROUGH, model=None)
    if name == "max":
        return replace(base, mode=CpuMode.MAX, model=None)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise sec.fail(key, f"{name!r} is not a CPU model name")
    return replace(base, mode=CpuMode.MODEL, model=name)


def _detect_zeroes(value: Any) -> DetectZeroes:
    if isinstance(value, bool):
        return DetectZeroes.ON if value else DetectZeroes.OFF
    return DetectZeroes.parse(value)


def _discard(value: Any) -> Discard:
    if isinstance(value, bool):
        return Discard.UNMAP if value else Discard.IGNORE
    return Discard.parse(value)


HYPERVISOR_DEFAULT = "hypervisor default"

#: the largest I/O limits vmbench takes (QEMU's own ceiling is 10^15 per second)
MAX_IOPS = 10**9
MAX_MBPS = 10**8
MAX_BURST_SECONDS = 86400


def _mbps(value: Any) -> float:
    """MiB/s above 0, to the thousandth at most; a whole number reads as an int."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{value!r} is not a number")
    if value <= 0:
        raise ValueError(f"{value} is not above 0")
    if value > MAX_MBPS:
        raise ValueError(f"{value} is above the maximum {MAX_MBPS}")
    if round(value, 3) != value:
        raise ValueError(f"{value} has more than 3 decimals (a thousandth of a MiB/s is about 1 KiB/s)")
    return limit_mbps(value)


def _flag(value: object) -> bool:
    """A stored on/off setting (True, "on", "1"...)."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "on", "true", "yes"):
        return True
    if text in ("0", "off", "false", "no"):
        return False
    raise ValueError(f"{value!r} is not on or off")


def _whole(value: object) -> int:
    """A stored whole number above 0."""
    if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value).strip()) < 1:
        raise ValueError(f"{value!r} is not a whole number above 0")
    return int(str(value).strip())


def _cpu_yaml(cpu: CpuConfig) -> dict[str, Any]:
    """The ``cpu:`` mapping that gives exactly ``cpu`` (its aes with it)."""
    out: dict[str, Any] = {"model": cpu.model if cpu.model and cpu.mode is CpuMode.MODEL else cpu.mode.value}
    if cpu.aes is not Feature.DEFAULT:
        out["aes"] = cpu.aes.value
    if cpu.features:
        out["features"] = {name: state.value for name, state in cpu.features}
    return out


# ---- building rows -----------------------------------------------------------------------


def _as_written(vm: VmConfig, raw: Any) -> str:
    """A vary cell names the value as the YAML wrote it; true/false read as on/off."""
    if isinstance(raw, bool):
        return "on" if raw else "off"
    return str(raw)


def _stored(value: object) -> object:
    return value.value if isinstance(value, enum.Enum) else value


def _field_axis(name: str, parse: Callable[[Any], Any], describe: str, *, field: str | None = None,
                label: Callable[[VmConfig, Any], str] = _as_written, stored: Callable[[Any], Any] | None = None,
                verify: tuple[tuple[str, str, bool], ...] = (), unset: str = "not recorded", disk: bool = False,
                what: str = "a VM setting", drivers: tuple[str, ...] = (), derived: tuple[Derived, ...] = ()) -> Axis:
    """An axis that is one plain VmConfig field (an enum, a flag or a number); ``stored`` reads
    its stored value back (default: ``parse``); a field that may be None goes back to None."""
    attr = field or name
    read = stored or parse

    def from_stored(vm: VmConfig, value: object) -> VmConfig:
        new: Any = None if value is None and getattr(VmConfig(), attr) is None else read(value)
        return replace(vm, **{attr: new})

    return Axis(
        name=name,
        settings_key=attr,
        parse=lambda sec, key, vm: replace(vm, **{attr: sec.get(key, parse)}),
        value=lambda vm: getattr(vm, attr),
        label=label,
        merge=lambda vm, other: replace(vm, **{attr: getattr(other, attr)}),
        setting=lambda vm: _stored(getattr(vm, attr)),
        describe=describe,
        verify=verify,
        unset=unset,
        yaml=lambda vm: _stored(getattr(vm, attr)),
        from_stored=from_stored,
        disk=disk,
        what=what,
        drivers=drivers,
        derived=derived,
    )


_ZFS_WHAT = "a ZFS setting of the scratch storage"


def _with_size(zfs: ZfsSettings, name: str, size: int | None) -> ZfsSettings:
    if name == "volblocksize":
        return replace(zfs, volblocksize=size)
    return replace(zfs, recordsize=size)


def _zfs_size_axis(name: str, parse: Callable[[Any], int], describe: str) -> Axis:
    """volblocksize (zvols) or recordsize (datasets): a field of VmConfig.zfs, stored as "16k"."""

    def get(vm: VmConfig) -> int | None:
        return getattr(vm.zfs, name)

    return Axis(
        name=name,
        settings_key=name,
        unset="ZFS default",
        parse=lambda sec, key, vm: replace(vm, zfs=_with_size(vm.zfs, name, sec.get(key, parse))),
        value=get,
        label=lambda vm, raw: format_size(get(vm) or 0),
        merge=lambda vm, other: replace(vm, zfs=_with_size(vm.zfs, name, get(other))),
        setting=lambda vm: None if get(vm) is None else format_size(get(vm) or 0),
        describe=describe,
        yaml=get,
        storage=True,
        what=_ZFS_WHAT,
    )


def _limit_axis(name: str, parse: Callable[[Any], Any], describe: str) -> Axis:
    """An I/O limit of the scratch disk (a field of VmConfig.limits): none unless given, read
    back from the hypervisor's configuration and from QEMU's throttling."""

    def get(vm: VmConfig) -> float | None:
        return vm.limits.get(name)

    def put(vm: VmConfig, value: Any) -> VmConfig:
        changes: dict[str, Any] = {name: value}
        return replace(vm, limits=replace(vm.limits, **changes))

    return Axis(
        name=name,
        settings_key=name,
        parse=lambda sec, key, vm: put(vm, sec.get(key, parse)),
        value=get,
        label=lambda vm, raw: str(get(vm)),
        merge=lambda vm, other: put(vm, get(other)),
        setting=get,
        describe=describe,
        verify=((f"config_{name}", "{config}", False), (f"qemu_{name}", "QEMU's throttling", True)),
        unset="none",
        yaml=get,
        from_stored=lambda vm, value: put(vm, None if value is None else _stored_limit(name, value)),
        disk=True,
        what="an I/O limit of the scratch disk (Proxmox's name)",
    )


def _stored_limit(name: str, value: object) -> float | int:
    """A stored limit: whole IOPS and seconds, MiB/s as stored (a whole number when it is one)."""
    number = float(value) if isinstance(value, (int, float, str)) and not isinstance(value, bool) else -1.0
    if number <= 0:
        raise ValueError(f"{value!r} is not a number above 0")
    return int(number) if name.startswith("iops") or name == "burst_length" or number == int(number) else number


def _limit_describe(name: str) -> str:
    what = "read " if "_rd" in name else "write " if "_wr" in name else ""
    if name == "burst_length":
        return f"whole seconds from 1 to {MAX_BURST_SECONDS}: how long every burst (iops_max, mbps_max...) may last"
    if name.startswith("iops"):
        unit, rate = f"a whole number of {what}IOPS from 1 to {MAX_IOPS:,}", name.removesuffix("_max")
    else:
        unit, rate = f"{what}MiB/s from 0.001 to {MAX_MBPS:,} (3 decimals at most)", name.removesuffix("_max")
    if name.endswith("_max"):
        return f"{unit}: a burst above {rate}, which it needs"
    if name.endswith(("_rd", "_wr")):
        return f"{unit}, not together with {name[:-3]}"
    return f"{unit}, reads and writes together (not with {name}_rd or {name}_wr)"


def _limit_parser(name: str) -> Callable[[Any], Any]:
    if name == "burst_length":
        return as_int(1, MAX_BURST_SECONDS)
    return as_int(1, MAX_IOPS) if name.startswith("iops") else _mbps


def _zfs_property_axis(prop: ZfsProperty) -> Axis:
    """A ZFS property of the scratch storage (compression, sync...): an axis of its own."""
    name = prop.name

    def merge(vm: VmConfig, other: VmConfig) -> VmConfig:
        value = other.zfs.get(name)
        props = tuple(p for p in vm.zfs.properties if p[0] != name)
        if value is not None:
            props = tuple(sorted(props + ((name, value),)))
        return replace(vm, zfs=ZfsSettings(vm.zfs.volblocksize, vm.zfs.recordsize, props))

    return Axis(
        name=name,
        settings_key=name,
        parse=lambda sec, key, vm: replace(vm, zfs=vm.zfs.with_property(name, sec.get(key, lambda v: parse_property(name, v)))),
        value=lambda vm: vm.zfs.get(name),
        label=lambda vm, raw: vm.zfs.get(name) or "",
        merge=merge,
        setting=lambda vm: vm.zfs.get(name),
        describe=f"one of: {prop.describe}",
        unset="ZFS default",
        yaml=lambda vm: vm.zfs.get(name),
        storage=True,
        what=_ZFS_WHAT,
    )


AXES: tuple[Axis, ...] = (
    _field_axis("bus", Bus.parse, f"one of: {Bus.allowed()}", disk=True,
                verify=(("config_bus", "{config}", False), ("guest_bus", "the guest", True)),
                what="the scratch disk's bus (virtio-scsi: a controller per disk; -shared: one for all disks)"),
    _field_axis("cache", Cache.parse, f"one of: {Cache.allowed()}", disk=True,
                verify=(("config_cache", "{config}", False), ("qemu_cache", "QEMU's block layer", True)),
                derived=(Derived("guest write cache", lambda vm: vm.cache.guest_write_cache, "guest_write_cache", "the guest",
                                 required=True),),
                what="QEMU's cache mode of the scratch disk"),
    _field_axis("iothread", as_bool, "true or false", stored=_flag, disk=True,
                verify=(("qemu_iothread", "QEMU's iothread links", True),),
                what="a dedicated QEMU I/O thread for the scratch disk (not on sata)"),
    _field_axis("aio", Aio.parse, f"one of: {Aio.allowed()}", disk=True,
                verify=(("config_aio", "{config}", False), ("qemu_aio", "the QEMU command line", True)),
                what="QEMU's I/O backend (native needs cache none or directsync)"),
    Axis(
        name="cpu",
        settings_key="cpu",
        parse=lambda sec, key, vm: replace(vm, cpu=_cpu(sec, key, sec.raw(key), vm.cpu)),
        value=lambda vm: (vm.cpu.mode, vm.cpu.model, vm.cpu.features),  # aes is its own axis
        label=lambda vm, raw: vm.cpu.label,
        merge=lambda vm, other: replace(vm, cpu=other.cpu),  # the whole CPU: aes is merged after it
        setting=lambda vm: vm.cpu.label,
        describe=CPU_HELP,
        yaml=lambda vm: _cpu_yaml(vm.cpu),  # aes with it
        from_stored=lambda vm, label: replace(vm, cpu=parse_cpu_label(str(label))),  # aes with it
        what="the guest CPU model",
    ),
    Axis(
        name="aes",
        settings_key=None,  # stored in the cpu label (kvm64+aes)
        parse=lambda sec, key, vm: replace(vm, cpu=replace(vm.cpu, aes=sec.get(key, _feature))),
        value=lambda vm: vm.cpu.aes,
        label=_as_written,
        merge=lambda vm, other: replace(vm, cpu=replace(vm.cpu, aes=other.cpu.aes)),
        setting=lambda vm: vm.cpu.aes.value,
        describe=f"one of: {Feature.allowed()} (true/false read as on/off)",
        what="the guest CPU's AES flag, forced on or off or left as the model has it",
    ),
    _field_axis("format", ImageFormat.parse, f"one of: {ImageFormat.allowed()}",
                verify=(("config_format", "{config}", False), ("qemu_format", "QEMU's block layer", False)),
                what="the scratch disk's image format (raw only on zvols)"),
    _field_axis("vcpus", as_int(1, 64), "a whole number from 1 to 64", stored=_whole,
                verify=(("guest_cpus", "the guest", False),), what="the guest's virtual CPUs"),
    _field_axis("memory", _memory, "a size (2G, 1536M) or a number of MiB, from 384 MiB to 1 TiB",
                field="memory_mib", label=lambda vm, raw: f"{vm.memory_mib}M", stored=_whole,
                what="the guest's memory (a bare number is MiB)"),
    # the scratch storage's ZFS settings (storage.type zfs / zfs-dataset): read back with zfs get
    # left to the hypervisor unless the scenario gives them (libvirt: off / ignore; Proxmox:
    # on, or unmap with discard on / ignore): None, not stored
    _field_axis("detect_zeroes", _detect_zeroes, f"one of: {DetectZeroes.allowed()} (true/false read as on/off)",
                stored=DetectZeroes.parse, disk=True,
                verify=(("config_detect_zeroes", "{config}", False), ("qemu_detect_zeroes", "the QEMU command line", True)),
                unset=HYPERVISOR_DEFAULT, what="QEMU's detect-zeroes (unmap needs discard: unmap)"),
    _field_axis("discard", _discard, f"one of: {Discard.allowed()} (on/off and true/false read as unmap/ignore)",
                stored=Discard.parse, disk=True,
                verify=(("config_discard", "{config}", False), ("qemu_discard", "the QEMU command line", True)),
                unset=HYPERVISOR_DEFAULT, what="whether the guest's discards reach the storage"),
    # the scratch disk's I/O limits (Proxmox's names), none unless given: not stored
    *(_limit_axis(n, _limit_parser(n), _limit_describe(n)) for n in LIMIT_NAMES),
    _zfs_size_axis("volblocksize", parse_volblocksize, "a power of two from 512 to 128k (zvols: storage.type zfs)"),
    _zfs_size_axis("recordsize", parse_recordsize, "a power of two from 512 to 1m (datasets: storage.type zfs-dataset)"),
    *(_zfs_property_axis(p) for p in PROPERTIES),
    # Proxmox rbd storage only: the scratch disk through the kernel (a temporary storage entry
    # with krbd 1 on the same pool) or librbd; None: as hypervisor.storage says, not stored
    _field_axis("krbd", as_bool, "true or false (driver proxmox, storage.type rbd)", stored=_flag,
                verify=(("qemu_krbd", "the QEMU command line", True),), unset=HYPERVISOR_DEFAULT, drivers=("proxmox",),
                what="rbd storage (storage.type rbd): the scratch disk mapped by the kernel (krbd) or opened through librbd"),
)


class Views(NamedTuple):
    """The lookups derived from a table of axes, each field named as the constant of this module
    that holds it for :data:`AXES` (documented there); :func:`views` makes them for any table,
    so a test can add a made-up row to a copy of the table and swap every constant for its own."""

    AXES: tuple[Axis, ...]
    AXIS_BY_NAME: dict[str, Axis]
    VM_AXES: tuple[str, ...]
    STORAGE_AXES: tuple[str, ...]
    AXIS_BY_SETTING: dict[str, Axis]
    DISK_SETTING_KEYS: tuple[str, ...]
    VM_SETTING_KEYS: tuple[str, ...]


def views(table: tuple[Axis, ...]) -> Views:
    """The lookups of ``table``, as this module's constants hold them for :data:`AXES`."""
    by_setting = {a.settings_key: a for a in table if a.settings_key is not None}
    return Views(
        AXES=table,
        AXIS_BY_NAME={a.name: a for a in table},
        VM_AXES=tuple(a.name for a in table),
        STORAGE_AXES=tuple(a.name for a in table if a.storage),
        AXIS_BY_SETTING=by_setting,
        DISK_SETTING_KEYS=tuple(k for k, a in by_setting.items() if a.disk),
        VM_SETTING_KEYS=tuple(k for k, a in by_setting.items() if not a.storage),
    )


_VIEWS = views(AXES)
#: every axis, by its YAML name
AXIS_BY_NAME = _VIEWS.AXIS_BY_NAME
#: every axis's YAML name, in table order
VM_AXES = _VIEWS.VM_AXES
#: the axes that change the host storage rather than the VM (volblocksize, recordsize, the ZFS properties)
STORAGE_AXES = _VIEWS.STORAGE_AXES
#: every axis stored under a key of its own (not aes), by that key, in table order
AXIS_BY_SETTING = _VIEWS.AXIS_BY_SETTING
#: the settings keys of the scratch disk's options (bus, cache, iothread, aio, detect_zeroes, discard, the I/O limits)
DISK_SETTING_KEYS = _VIEWS.DISK_SETTING_KEYS
#: the settings keys of the VM's own axes (not the host storage's), in table order
VM_SETTING_KEYS = _VIEWS.VM_SETTING_KEYS


_SETTINGS_OF = "_settings_of"  # where settings_of keeps what it made, on the VmConfig itself (not a field)


def settings_of(vm: VmConfig) -> dict[str, object]:
    """Every setting of ``vm``, flat, as stored with each result row and shown in reports.

    One key per axis of :data:`AXES`, in its order (aes is part of the cpu label): bus, cache,
    iothread, aio, cpu, format, vcpus, memory_mib; then the settings left to the hypervisor
    unless the scenario gives them (detect_zeroes, discard, each I/O limit: iops, mbps_rd...),
    and the ZFS settings that are set (volblocksize, recordsize, compression...), none on other
    storage.  A setting left to its default is not stored, so runs stored before an axis
    existed have the same keys."""
    made = vm.__dict__.get(_SETTINGS_OF)  # a frozen VmConfig's settings never change: made once per object
    if made is None:
        out = {key: axis.setting(vm) for key, axis in AXIS_BY_SETTING.items()}
        made = {k: v for k, v in out.items() if v is not None}
        object.__setattr__(vm, _SETTINGS_OF, made)
    return dict(made)


def storage_settings_of(vm: VmConfig) -> dict[str, object]:
    """The ZFS settings of ``vm`` alone (what a host-only cell is)."""
    return {k: v for k, v in settings_of(vm).items() if k in STORAGE_AXES}


def setting_text(key: str, value: object) -> str:
    """A stored setting as plans, progress lines and reports write it, the way a vary cell names
    a value: on/off for a flag, memory as a size."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if key == "memory_mib" and isinstance(value, int):
        return f"{value >> 10}G" if value % 1024 == 0 else f"{value}M"
    return str(value)


def settings_text(settings: Mapping[str, object]) -> str:
    """``name=value, ...``: each stored setting under its axis's YAML name (memory, not
    memory_mib) with :func:`setting_text`'s value."""
    return ", ".join(f"{AXIS_BY_SETTING[k].name if k in AXIS_BY_SETTING else k}={setting_text(k, v)}" for k, v in settings.items())


def vm_key(vm: VmConfig) -> str:
    """Equal keys mean one boot can serve both VMs' cells."""
    return ";".join(f"{k}={v}" for k, v in settings_of(vm).items())


def always_stored(axis: Axis) -> bool:
    """Whether every VM states this setting (bus, cache...), rather than leaving it to the
    hypervisor or ZFS unless the scenario gives it (detect_zeroes, compression...)."""
    return axis.setting(VmConfig()) is not None


def vm_with(base: VmConfig, settings: Mapping[str, object]) -> VmConfig:
    """``base`` with the VM settings of ``settings`` (stored values: "virtio-scsi", True,
    "kvm64+aes", 500...; one that reads as the axis's ``unset`` puts a setting left to the
    hypervisor back to its default); the host storage's settings and unknown keys are left
    out.  A value that is not one of the setting's is a UsageError naming it."""
    vm = base
    for key, value in settings.items():
        axis = AXIS_BY_SETTING.get(key)
        if axis is None or axis.from_stored is None:
            continue
        try:
            vm = axis.from_stored(vm, None if is_unset(key, value) and not always_stored(axis) else value)
        except ValueError as exc:
            raise UsageError(f"setting {key}: {exc}") from None
    return vm


def is_unset(key: str, value: object) -> bool:
    """Whether a stored value means "left to the default" (None, "hypervisor default", "none",
    "ZFS default": the axis's ``unset``)."""
    axis = AXIS_BY_SETTING.get(key)
    return value is None or (axis is not None and isinstance(value, str) and value == axis.unset)


def vm_yaml(vm: VmConfig) -> dict[str, Any]:
    """A VM's settings as the ``vm:`` keys that give exactly it (the ``vm:`` reader reads it back to ``vm``)."""
    return {a.name: value for a in AXES if (value := a.yaml(vm)) is not None}


def setting_columns(stored: Iterable[Mapping[str, object]]) -> tuple[str, ...]:
    """The VM settings a report shows for these stored settings, in table order: every
    setting each VM states, and those left to the hypervisor when any row gives one."""
    rows = list(stored)
    return tuple(k for k in VM_SETTING_KEYS
                 if always_stored(AXIS_BY_SETTING[k]) or any(k in r for r in rows))


def stored_setting(settings: Mapping[str, object], key: str) -> object:
    """A stored row's value of ``key``; a row without it (the setting left to its default, or
    stored before the axis existed) reads as the axis's ``unset``, so old runs compare."""
    if key in settings:
        return settings[key]
    axis = AXIS_BY_SETTING.get(key)
    return axis.unset if axis is not None else None


def changed_axes(vm: VmConfig, before: VmConfig, names: Iterable[str] | None = None) -> tuple[str, ...]:
    """The axes among ``names`` (default: all, in table order) on which ``vm`` differs from ``before``."""
    return tuple(n for n in (VM_AXES if names is None else names) if AXIS_BY_NAME[n].value(vm) != AXIS_BY_NAME[n].value(before))
