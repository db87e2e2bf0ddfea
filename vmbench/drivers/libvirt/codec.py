"""libvirt's spelling of every VM axis, one row each: :data:`CODECS` (pure).

A row (:class:`AxisCodec`) says, for its axis, how vmbench writes the setting into the
domain it defines (:mod:`.xml`), how it reads it back from the live domain XML and from
QEMU (:mod:`.evidence`: the readings its axis's ``verify`` names), how it reads it from a
user's domain (:mod:`.current`) and how it edits it in the apply snippet the advice shows
(vmbench.advice.apply_xml).  Each of those walks the table, in its order, handing every row
the same context; a row leaves alone what its axis does not have (aes is written, read and
applied with the cpu row, as the ``<cpu>``'s ``<feature name='aes'>``).

Most disk options are one attribute of the scratch disk's ``<driver>``
(:func:`driver_attribute`: cache, io, type, discard, detect_zeroes); the bus is its
``<target>`` and SCSI controller (:mod:`.diskbus`), the I/O limits its ``<iotune>``
(:mod:`.iotune`), the CPU, vCPUs and memory elements of the domain.  The table's order is
the order a user's domain is read in (what it says about each setting, in ``unknown`` and
``assumed``) and the apply snippet is edited in; what vmbench writes is placed in the order
libvirt's schema and the tests expect (:data:`DRIVER_ATTRIBUTES`, :data:`DOMAIN_ORDER`).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Callable, Mapping

from ...scenario.model import MiB, CpuConfig, IoLimits, LIMIT_NAMES, VmConfig
from ...settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat
from ..codec import with_limit
from ..existing import CurrentVm, assume, read_choice
from ..qemu_cmdline import NOT_APPLICABLE, QemuArgs, QemuDisk, cpu_readings, qmp_limits, throttle_readings
from . import diskbus
from .iotune import iotune_element, iotune_entries, iotune_limits, read_limits

#: the order vmbench writes the scratch disk's <driver> attributes in (others after them)
DRIVER_ATTRIBUTES = ("name", "type", "cache", "io", "iothread", "discard", "detect_zeroes")
#: the order of a domain's top-level elements (libvirt's own); what the rows write is placed by it
DOMAIN_ORDER = ("name", "description", "metadata", "memory", "vcpu", "iothreads", "os", "features", "cpu", "clock",
                "on_poweroff", "on_reboot", "on_crash", "devices")
#: libvirt's memory units (``<memory unit=...>``; KiB when none is given)
MEMORY_UNITS = {"b": 1, "bytes": 1, "kb": 1000, "k": 1024, "kib": 1024, "mb": 10**6, "m": MiB, "mib": MiB,
                "gb": 10**9, "g": 1 << 30, "gib": 1 << 30, "tb": 10**12, "t": 1 << 40, "tib": 1 << 40}
_ON = ("require", "force")
_OFF = ("disable", "forbid")


def element(tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.Element(tag, attrs)
    el.text = text
    return el


# ---- what a row is handed -------------------------------------------------------------------


@dataclass
class NewDomain:
    """A domain vmbench defines (:func:`vmbench.drivers.libvirt.xml.domain_xml`), as the rows write it."""

    root: ET.Element  # the root disk's <disk> (its <target> is the bus row's)
    disk: ET.Element  # the scratch disk's <disk>, with its <source>
    rbd: bool  # the scratch disk is an RBD image (librbd does its own I/O: no io=)
    driver: dict[str, str] = field(default_factory=dict)  # its <driver>'s attributes
    iotune: dict[str, str] = field(default_factory=dict)  # its <iotune>'s children
    domain: list[ET.Element] = field(default_factory=list)  # elements of <domain> itself (<cpu>, <memory>...)
    devices: list[ET.Element] = field(default_factory=list)  # devices after the disks (a SCSI controller)


@dataclass
class LiveDomain:
    """A running domain's live XML, as the run's evidence reads it back."""

    root: ET.Element
    disk: ET.Element | None  # the scratch disk, found by its serial

    @property
    def driver(self) -> ET.Element | None:
        return self.disk.find("driver") if self.disk is not None else None

    @property
    def rbd(self) -> bool:
        src = self.disk.find("source") if self.disk is not None else None
        return src is not None and src.get("protocol") == "rbd"

    @cached_property
    def limits(self) -> dict[str, Any]:
        """The disk's ``<iotune>`` as ``config_<limit>`` readings."""
        return throttle_readings("config_", iotune_limits(self.disk)) if self.disk is not None else {}


@dataclass
class QemuView:
    """The scratch disk as QEMU reports it: QMP ``query-block`` (cache, format, throttling),
    the command line (aio, detect-zeroes, discard; the CPU), the QOM iothread links."""

    block: Mapping[str, Any] | None  # query-block's ``inserted`` of the scratch disk
    cmdline: Mapping[str, Any]  # the command line's disk readings (vmbench.drivers.qemu_cmdline.disk_readings)
    disk: QemuDisk | None  # the disk on the command line, for options no reading names
    args: QemuArgs | None
    iothread_links: Mapping[str, str]
    config_bus: object  # the live XML's bus reading (sata has no iothread to ask about)

    @cached_property
    def limits(self) -> dict[str, Any]:
        return throttle_readings("qemu_", qmp_limits(self.block)) if self.block is not None else {}


@dataclass
class UserDomain:
    """A user's domain as :mod:`.current` reads it: the disk picked and the bus it is on
    (read first: what the rest of the disk means follows from it)."""

    root: ET.Element
    disk: ET.Element
    dev: str  # its target dev (vda)
    unknown: list[str]
    assumed: list[str]
    extra: dict[str, str]
    bus: Bus = Bus.VIRTIO_BLK
    scsi_iothread: bool = False  # the SCSI controller's iothread

    @property
    def attrs(self) -> Mapping[str, str]:
        drv = self.disk.find("driver")
        return drv.attrib if drv is not None else {}

    @cached_property
    def limits(self) -> IoLimits:
        return read_limits(self.disk, self.unknown)


def user_domain(root: ET.Element, disk: ET.Element, unknown: list[str], assumed: list[str]) -> UserDomain:
    dev = diskbus.target(disk).get("dev", "")
    bus, iothread, controller = diskbus.read_bus(root, disk, dev, unknown)
    out = UserDomain(root, disk, dev, unknown, assumed, {}, bus, iothread)
    if controller is not None:
        out.extra["controller"] = text_of(controller)
    return out


@dataclass
class DiskEdit:
    """A user's ``<disk>`` (or a placeholder) being edited for an apply snippet."""

    changed: tuple[str, ...]  # the settings keys that change
    mine: CurrentVm | None  # the user's domain, when read
    disk: ET.Element
    driver: ET.Element
    target: ET.Element
    used: set[str]  # the target names the domain uses
    old_bus: Bus
    notes: list[str] = field(default_factory=list)
    pieces: list[tuple[ET.Element | str, str]] = field(default_factory=list)  # other elements to put in, with a note

    def set(self, attr: str, value: str | None, key: str) -> None:
        """The ``<driver>`` attribute of the settings key ``key`` when it changes: ``value``, or
        (None) removed, back to libvirt's default."""
        if key in self.changed and value is not None:
            self.driver.set(attr, value)
        elif key in self.changed and attr in self.driver.attrib:
            del self.driver.attrib[attr]


PLACEHOLDER_DISK = '<disk type="file" device="disk"><driver name="qemu" type="raw"/><source file="/path/to/disk.img"/></disk>'


def disk_edit(vm: VmConfig, changed: tuple[str, ...], mine: CurrentVm | None) -> DiskEdit:
    """The user's ``<disk>`` as read (its source and other children kept), or a placeholder
    with a ``<target>`` on ``vm``'s bus, each with the note saying what it replaces."""
    if mine is not None:
        disk = ET.fromstring(mine.disk_spec)
        note = f"replaces the <disk> of {mine.disk} in {mine.source}: its source and other children are kept"
        used = set(filter(None, mine.extra.get("targets", "").split(",")))
        old_bus = mine.vm.bus
    else:
        disk = ET.fromstring(PLACEHOLDER_DISK)
        ET.SubElement(disk, "target", {"dev": diskbus.target_dev(vm.bus, "vda", set()), "bus": diskbus.TARGET_BUS[vm.bus]})
        note = ("replaces the disk's <disk> element: keep its own type, <source> (in place of /path/to/disk.img) "
                "and its other children")
        used, old_bus = set(), vm.bus
    drv = disk.find("driver")
    if drv is None:
        drv = ET.Element("driver", {"name": "qemu"})
        disk.insert(0, drv)
    tgt = disk.find("target")
    if tgt is None:
        tgt = ET.SubElement(disk, "target", {"dev": "vda"})
    return DiskEdit(changed, mine, disk, drv, tgt, used, old_bus, [note])


@dataclass
class DomainEdit:
    """The elements of the domain besides the disk an apply snippet puts in."""

    changed: tuple[str, ...]
    mine: CurrentVm | None
    pieces: list[tuple[ET.Element | str, str]] = field(default_factory=list)


def text_of(el: ET.Element) -> str:
    """An element alone as XML (without the whitespace after it)."""
    tail, el.tail = el.tail, None
    try:
        return ET.tostring(el, encoding="unicode").strip()
    finally:
        el.tail = tail


# ---- a row -----------------------------------------------------------------------------------


def _nothing(*_: object) -> None:
    return None


def _no_readings(_: object) -> Mapping[str, object]:
    return {}


def _as_is(_: UserDomain, vm: VmConfig) -> VmConfig:
    return vm


@dataclass(frozen=True)
class AxisCodec:
    """One axis as libvirt spells it (its hooks default to doing nothing)."""

    axis: str  # the axis's name (vmbench.scenario.axes)
    write: Callable[[VmConfig, NewDomain], None] = _nothing
    config: Callable[[LiveDomain], Mapping[str, object]] = _no_readings  # config_* readings
    qemu: Callable[[QemuView], Mapping[str, object]] = _no_readings  # qemu_* readings
    current: Callable[[UserDomain, VmConfig], VmConfig] = _as_is  # the VM with this axis read from a user's domain
    edit_disk: Callable[[VmConfig, DiskEdit], None] = _nothing
    edit_domain: Callable[[VmConfig, DomainEdit], None] = _nothing


def from_cmdline(key: str) -> Callable[[QemuView], Mapping[str, object]]:
    """A reading of the command line's disk readings (QEMU's aio, detect-zeroes, discard)."""
    return lambda q: {key: q.cmdline[key]} if q.cmdline.get(key) is not None else {}


def qemu_option(key: str, option: str) -> Callable[[QemuView], Mapping[str, object]]:
    """A reading of the first value the scratch disk's nodes give QEMU's option ``option``."""
    def read(q: QemuView) -> Mapping[str, object]:
        values = q.disk.option(option) if q.disk is not None else []
        return {key: values[0]} if values else {}
    return read


def driver_attribute(axis: str, attr: str, choice: Any, *, what: str | None = None, unset: str | None = None,
                     default: tuple[Any, str] | None = None,
                     qemu: Callable[[QemuView], Mapping[str, object]] = _no_readings) -> AxisCodec:
    """An axis that is one attribute of the scratch disk's ``<driver>``, the VmConfig field of
    its name holding a member of ``choice`` (a Choice enum) or None (left to libvirt).
    ``unset``: what the live XML's reading is without the attribute (libvirt's default);
    ``default``: (value, note) a user's disk without it reads as, said in ``assumed``
    ("{dev}" in the note is its target); ``what``: how ``unknown`` names it."""

    def write(vm: VmConfig, d: NewDomain) -> None:
        value = getattr(vm, axis)
        if value is not None:
            d.driver[attr] = value.value

    def config(live: LiveDomain) -> Mapping[str, object]:
        drv = live.driver
        if drv is None:
            return {}
        return {f"config_{axis}": drv.get(attr) if unset is None else drv.get(attr) or unset}

    def current(u: UserDomain, vm: VmConfig) -> VmConfig:
        value = read_choice(choice, u.attrs.get(attr), what or axis, u.dev, u.unknown)
        if default is not None:
            value = assume(value, default[0], default[1].format(dev=u.dev), u.assumed)
        return replace(vm, **{axis: value})

    def edit(vm: VmConfig, e: DiskEdit) -> None:
        value = getattr(vm, axis)
        e.set(attr, None if value is None else value.value, axis)

    return AxisCodec(axis, write=write, config=config, qemu=qemu, current=current, edit_disk=edit)


# ---- the rows that are more than one <driver> attribute -------------------------------------


def _write_aio(vm: VmConfig, d: NewDomain) -> None:
    if not d.rbd:  # QEMU's rbd driver does its I/O through librbd: aio does not apply
        d.driver["io"] = vm.aio.value


def _config_aio(live: LiveDomain) -> Mapping[str, object]:
    if live.rbd:
        return {"config_aio": NOT_APPLICABLE}  # librbd does its own I/O: no io= on the disk
    drv = live.driver
    return {} if drv is None else {"config_aio": drv.get("io")}


def _qemu_cache(q: QemuView) -> Mapping[str, object]:
    if q.block is None:
        return {}
    c = q.block.get("cache") or {}
    key = (bool(c.get("writeback")), bool(c.get("direct")), bool(c.get("no-flush")))
    mode = Cache.from_flags(*key)
    return {"qemu_cache": mode.value if mode is not None else f"unknown {key}"}


def _current_format(u: UserDomain, vm: VmConfig) -> VmConfig:
    fmt = read_choice(ImageFormat, u.attrs.get("type"), "format (driver type)", u.dev, u.unknown)
    if fmt is None:
        fmt = ImageFormat.RAW
        if "type" not in u.attrs:
            u.assumed.append(f"format: {u.dev} states no driver type; read as raw")
    return replace(vm, format=fmt)


def _edit_format(vm: VmConfig, e: DiskEdit) -> None:
    if "format" in e.changed:
        e.driver.set("type", vm.format.value)
        e.notes.append(f"the image itself must be {vm.format.value}: convert it first with the domain shut down "
                       f"(qemu-img convert -p -O {vm.format.value} OLD NEW) and point <source> at NEW")


def _write_bus(vm: VmConfig, d: NewDomain) -> None:
    ctrl = diskbus.write_targets(vm.bus, vm.iothread, d.root, d.disk)
    if ctrl is not None:
        d.devices.append(ctrl)


def _config_bus(live: LiveDomain) -> Mapping[str, object]:
    if live.disk is None:
        return {}
    bus = diskbus.config_bus(live.root, live.disk)
    return {"config_bus": bus, "controller": diskbus.controller_model(live.root, bus)}


def _edit_bus(vm: VmConfig, e: DiskEdit) -> None:
    if "bus" in e.changed:
        note = diskbus.retarget(vm.bus, e.disk, e.target, e.old_bus, e.used, e.mine)
        if note:
            e.notes.append(note)
    if vm.bus.is_scsi and ("bus" in e.changed or "iothread" in e.changed):
        e.pieces.append(diskbus.controller_for(vm.bus, vm.iothread, e.disk, e.target, e.mine))


def _write_iothread(vm: VmConfig, d: NewDomain) -> None:
    if vm.iothread:  # the SCSI controller's <driver iothread> is the bus row's
        d.domain.append(element("iothreads", "1"))
        if vm.bus is Bus.VIRTIO_BLK:
            d.driver["iothread"] = "1"


def _qemu_iothread(q: QemuView) -> Mapping[str, object]:
    links = {k: v for k, v in q.iothread_links.items() if isinstance(v, str) and not v.startswith("error:")}
    if links:
        return {"qemu_iothread": any(v.startswith("/objects/") for v in links.values())}
    if q.config_bus == Bus.SATA.value:
        return {"qemu_iothread": False}  # AHCI has no iothread to ask about
    return {}


def _current_iothread(u: UserDomain, vm: VmConfig) -> VmConfig:
    if u.bus is not Bus.VIRTIO_BLK:
        return replace(vm, iothread=u.scsi_iothread)
    drv = u.disk.find("driver")
    return replace(vm, iothread="iothread" in u.attrs or (drv is not None and drv.find("iothreads") is not None))


def _edit_iothread(vm: VmConfig, e: DiskEdit) -> None:
    if "iothread" not in e.changed and "bus" not in e.changed:
        return
    if vm.iothread and vm.bus is Bus.VIRTIO_BLK:
        e.driver.set("iothread", "1")
    elif "iothread" in e.driver.attrib:  # on SCSI the controller's (the bus row's)
        del e.driver.attrib["iothread"]


def _iothreads_piece(vm: VmConfig, e: DomainEdit) -> None:
    if not (vm.iothread and vm.bus.takes_iothread and ("iothread" in e.changed or "bus" in e.changed)):
        return
    if e.mine is None or e.mine.extra.get("iothreads", "") in ("", "0"):
        e.pieces.append(("<iothreads>1</iothreads>", "in <domain> (top level), if it has no <iothreads>: the iothread the "
                         + ("SCSI controller" if vm.bus.is_scsi else "disk") + " runs in"))


# ---- the CPU, vCPUs and memory: elements of the domain --------------------------------------


def cpu_xml(vm: VmConfig) -> ET.Element:
    cpu = vm.cpu
    if cpu.mode is CpuMode.HOST_PASSTHROUGH:
        el = ET.Element("cpu", {"mode": "host-passthrough", "check": "none"})
    elif cpu.mode is CpuMode.MAX:
        el = ET.Element("cpu", {"mode": "maximum", "check": "none"})
    else:
        el = ET.Element("cpu", {"mode": "custom", "match": "exact", "check": "none"})
        ET.SubElement(el, "model", {"fallback": "forbid"}).text = cpu.model or "qemu64"
    for name, state in cpu.all_features():
        ET.SubElement(el, "feature", {"policy": "require" if state is Feature.ON else "disable", "name": name})
    ET.SubElement(el, "topology", {"sockets": "1", "dies": "1", "cores": str(vm.vcpus), "threads": "1"})
    return el


def _config_cpu(live: LiveDomain) -> Mapping[str, object]:
    cpu = live.root.find("cpu")
    if cpu is None:
        return {}
    mode = cpu.get("mode")
    return {"cpu_model": cpu.findtext("model") if mode == "custom" else {"maximum": "max"}.get(mode or "", mode),
            "cpu_flags": tuple((f.get("name", ""), "on" if f.get("policy") in _ON else "off") for f in cpu.findall("feature"))}


def read_cpu(root: ET.Element, unknown: list[str], assumed: list[str]) -> tuple[CpuConfig, str]:
    """A user's domain's CPU (its aes with it) and its ``<cpu>`` as XML."""
    el = root.find("cpu")
    if el is None:
        assumed.append("cpu: the domain has no <cpu> element; QEMU's default model is qemu64")
        return CpuConfig(CpuMode.MODEL, "qemu64"), ""
    mode = el.get("mode", "custom")
    model = (el.findtext("model") or "").strip() or None
    if mode == "host-passthrough":
        cpu = CpuConfig(CpuMode.HOST_PASSTHROUGH, None)
    elif mode == "maximum":
        cpu = CpuConfig(CpuMode.MAX, None)
    elif mode == "custom" and model:
        cpu = CpuConfig(CpuMode.MODEL, model)
    elif mode == "custom":
        assumed.append("cpu: <cpu> names no model; QEMU's default model is qemu64")
        cpu = CpuConfig(CpuMode.MODEL, "qemu64")
    else:
        unknown.append(f"cpu: mode {mode} (libvirt picks a named model close to the host's) is not a vmbench CPU; "
                       "read as host-passthrough")
        cpu = CpuConfig(CpuMode.HOST_PASSTHROUGH, None)
    aes = Feature.DEFAULT
    feats = []
    for f in el.findall("feature"):
        name, policy = f.get("name", ""), f.get("policy", "require")
        if policy not in _ON + _OFF:
            unknown.append(f"cpu: feature {name} has policy {policy}, neither forced on nor off")
            continue
        state = Feature.ON if policy in _ON else Feature.OFF
        if name == "aes":
            aes = state
        elif name:
            feats.append((name, state))
    return CpuConfig(cpu.mode, cpu.model, aes, tuple(sorted(feats))), text_of(el)


def _current_cpu(u: UserDomain, vm: VmConfig) -> VmConfig:
    cpu, xml = read_cpu(u.root, u.unknown, u.assumed)
    u.extra["cpu"] = xml
    return replace(vm, cpu=cpu)


def _cpu_piece(vm: VmConfig, e: DomainEdit) -> None:
    if "cpu" in e.changed:
        e.pieces.append((cpu_xml(vm), f"replaces the domain's <cpu> element (CPU {vm.cpu.label}, topology 1 socket of "
                                      f"{vm.vcpus} cores)"))


def read_vcpus(root: ET.Element, unknown: list[str]) -> int:
    el = root.find("vcpu")
    text = (el.text or "").strip() if el is not None else "1"
    try:
        n = int(el.get("current") or text) if el is not None else 1
    except ValueError:
        unknown.append(f"vcpus: <vcpu> is {text!r}, not a number; read as 1")
        return 1
    if el is not None and el.get("current"):
        unknown.append(f"vcpus: {n} of {text} vCPUs are online (<vcpu current=...>); read as {n}")
    return n


def _vcpus_piece(vm: VmConfig, e: DomainEdit) -> None:
    if "vcpus" in e.changed:
        note = "replaces <vcpu>"
        if "cpu" not in e.changed:
            note += f"; if <cpu> has a <topology>, make it sockets=1 cores={vm.vcpus} threads=1 (libvirt checks they match)"
        e.pieces.append((f'<vcpu placement="static">{vm.vcpus}</vcpu>', note))


def read_memory_mib(root: ET.Element, unknown: list[str]) -> int:
    el = root.find("memory")
    if el is None:
        unknown.append("memory: the domain has no <memory>; read as 1024 MiB")
        return 1024
    unit = (el.get("unit") or "KiB").lower()
    try:
        return int(int((el.text or "").strip()) * MEMORY_UNITS[unit] // MiB)
    except (KeyError, ValueError):
        unknown.append(f"memory: {el.text!r} {el.get('unit')} is not a size; read as 1024 MiB")
        return 1024


def _memory_piece(vm: VmConfig, e: DomainEdit) -> None:
    if "memory_mib" in e.changed:
        e.pieces.append((f'<memory unit="MiB">{vm.memory_mib}</memory>',
                         "replaces <memory>; a <currentMemory> must not be larger (remove it or set it the same)"))


# ---- the I/O limits: the disk's <iotune>, one child (or, burst_length, one per burst) each ----


def _limit(name: str) -> AxisCodec:
    def edit(vm: VmConfig, e: DiskEdit) -> None:
        if name not in e.changed:
            return
        for old in e.disk.findall("iotune"):  # the whole <iotune> is put back: every changed limit puts the same
            e.disk.remove(old)
        iotune = iotune_element(vm.limits)
        if iotune is not None:  # right after the target, where libvirt writes it
            e.disk.insert(list(e.disk).index(e.target) + 1, iotune)

    return AxisCodec(
        name,
        write=lambda vm, d: d.iotune.update(iotune_entries(vm.limits, name)),
        config=lambda live: {f"config_{name}": live.limits[f"config_{name}"]} if live.limits else {},
        qemu=lambda q: {f"qemu_{name}": q.limits[f"qemu_{name}"]} if q.limits else {},
        current=lambda u, vm: with_limit(vm, name, u.limits.get(name)),
        edit_disk=edit,
    )


CODECS: tuple[AxisCodec, ...] = (
    driver_attribute("cache", "cache", Cache, default=(Cache.WRITEBACK, "cache: {dev} states none; QEMU's default is writeback"),
                     qemu=_qemu_cache),
    replace(driver_attribute("aio", "io", Aio, what="aio (io)",
                             default=(Aio.THREADS, "aio: {dev} states no io=; QEMU's default is threads"),
                             qemu=from_cmdline("qemu_aio")),
            write=_write_aio, config=_config_aio),
    replace(driver_attribute("format", "type", ImageFormat, what="format (driver type)",
                             qemu=lambda q: {"qemu_format": q.block.get("drv")} if q.block is not None else {}),
            current=_current_format, edit_disk=_edit_format),
    driver_attribute("discard", "discard", Discard, unset=Discard.IGNORE.value, qemu=from_cmdline("qemu_discard")),
    driver_attribute("detect_zeroes", "detect_zeroes", DetectZeroes, unset=DetectZeroes.OFF.value,
                     qemu=from_cmdline("qemu_detect_zeroes")),
    AxisCodec("bus", write=_write_bus, config=_config_bus, current=lambda u, vm: replace(vm, bus=u.bus), edit_disk=_edit_bus),
    AxisCodec("iothread", write=_write_iothread, qemu=_qemu_iothread, current=_current_iothread, edit_disk=_edit_iothread,
              edit_domain=_iothreads_piece),
    AxisCodec("cpu", write=lambda vm, d: d.domain.append(cpu_xml(vm)), config=_config_cpu,
              qemu=lambda q: cpu_readings(q.args) if q.args is not None else {}, current=_current_cpu,
              edit_domain=_cpu_piece),
    AxisCodec("aes"),  # the cpu row's: a <feature name='aes'> of the <cpu>
    AxisCodec("vcpus", write=lambda vm, d: d.domain.append(element("vcpu", str(vm.vcpus), placement="static")),
              current=lambda u, vm: replace(vm, vcpus=read_vcpus(u.root, u.unknown)), edit_domain=_vcpus_piece),
    AxisCodec("memory", write=lambda vm, d: d.domain.append(element("memory", str(vm.memory_mib), unit="MiB")),
              current=lambda u, vm: replace(vm, memory_mib=read_memory_mib(u.root, u.unknown)), edit_domain=_memory_piece),
    *(_limit(n) for n in LIMIT_NAMES),
)
