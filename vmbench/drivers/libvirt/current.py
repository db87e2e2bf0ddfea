"""A user's libvirt domain, read only: its disk and CPU settings as vmbench's axes (issue 18).

:func:`parse_domain` is pure: a domain's XML (as ``virsh dumpxml --inactive`` prints it) to a
:class:`~vmbench.drivers.existing.CurrentVm`, read the way :mod:`.xml` writes the same
settings (and :mod:`.evidence` reads them back).  :func:`read_domain` opens libvirt
**read-only** (``virConnectOpenReadOnly``) and asks for the inactive XML (what the user
configured, not what a running guest happens to have): nothing on the domain can change.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from ...errors import HypervisorError, PreflightError
from ...scenario.model import Hypervisor, LIMIT_BURSTS, LIMIT_RATES, MiB, CpuConfig, IoLimits, VmConfig, limit_mbps
from ...settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat
from ..existing import CurrentVm, assume
from ..existing import read_choice as _choice
from .. import make_host
from .bridge import LibvirtBridge
from .connection import quiet_errors, libvirt
from .xml import iotune_name

#: libvirt's memory units (``<memory unit=...>``; KiB when none is given)
MEMORY_UNITS = {"b": 1, "bytes": 1, "kb": 1000, "k": 1024, "kib": 1024, "mb": 10**6, "m": MiB, "mib": MiB,
                "gb": 10**9, "g": 1 << 30, "gib": 1 << 30, "tb": 10**12, "t": 1 << 40, "tib": 1 << 40}
_ON = ("require", "force")
_OFF = ("disable", "forbid")


def parse_domain(xml: str, *, source: str, ident: str, disk: str | None = None) -> CurrentVm:
    """The settings of ``disk`` (a target dev such as ``vda``; default: the first
    ``device="disk"``) and the domain's CPU, vCPUs and memory.  What libvirt leaves to QEMU
    is read as QEMU's default and said in ``assumed``; what no axis expresses is said in
    ``unknown``."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise HypervisorError(f"{source}: the domain XML cannot be read: {exc}") from None
    if root.tag != "domain":
        raise HypervisorError(f"{source}: the XML is a <{root.tag}>, not a <domain>")
    el = _pick_disk(root, source, disk)
    unknown: list[str] = []
    assumed: list[str] = []
    dev = _target(el).get("dev", "")
    bus, iothread, controller = _bus(root, el, dev, unknown)
    drv = el.find("driver")
    d = drv.attrib if drv is not None else {}
    if bus is Bus.VIRTIO_BLK:
        iothread = "iothread" in d or (drv is not None and drv.find("iothreads") is not None)
    cache = assume(_choice(Cache, d.get("cache"), "cache", dev, unknown), Cache.WRITEBACK,
                   f"cache: {dev} states none; QEMU's default is writeback", assumed)
    aio = assume(_choice(Aio, d.get("io"), "aio (io)", dev, unknown), Aio.THREADS,
                 f"aio: {dev} states no io=; QEMU's default is threads", assumed)
    fmt = _choice(ImageFormat, d.get("type"), "format (driver type)", dev, unknown)
    if fmt is None:
        fmt = ImageFormat.RAW
        if "type" not in d:
            assumed.append(f"format: {dev} states no driver type; read as raw")
    discard = _choice(Discard, d.get("discard"), "discard", dev, unknown)
    zeroes = _choice(DetectZeroes, d.get("detect_zeroes"), "detect_zeroes", dev, unknown)
    cpu, cpu_xml = _cpu(root, unknown, assumed)
    vcpus = _vcpus(root, unknown)
    vm = VmConfig(vcpus=vcpus, memory_mib=_memory_mib(root, unknown), bus=bus, cache=cache, iothread=iothread,
                  aio=aio, cpu=cpu, format=fmt, detect_zeroes=zeroes, discard=discard, limits=_limits(el, unknown))
    extra = {"name": root.findtext("name") or ident, "cpu": cpu_xml, "iothreads": (root.findtext("iothreads") or "").strip(),
             "targets": ",".join(_target(d).get("dev", "") for d in root.findall("./devices/disk")),
             "scsi_controllers": ",".join(c.get("index", "0") for c in root.findall("./devices/controller[@type='scsi']"))}
    if controller is not None:
        extra["controller"] = _text(controller)
    return CurrentVm(source=source, vm=vm, disk=dev, disk_spec=_text(el), kind="libvirt", ident=ident,
                     unknown=tuple(unknown), storage=_storage(el), extra=extra, assumed=tuple(assumed))


def read_domain(uri: str, name: str, *, disk: str | None = None, shown_as: str | None = None) -> CurrentVm:
    """The domain ``name`` at ``uri`` through a read-only libvirt connection (``shown_as``:
    the URI as the user wrote it, for messages, when ``uri`` is a local bridge to it)."""
    where = shown_as or uri
    if libvirt is None:
        raise PreflightError("the libvirt Python binding is not installed", "run `make demo` or `pip install libvirt-python`")
    libvirt.registerErrorHandler(quiet_errors, None)
    try:
        conn = libvirt.openReadOnly(uri)
    except libvirt.libvirtError as exc:
        raise PreflightError(f"cannot reach libvirt at {where} (read-only) to read domain {name}: {exc.get_error_message()}",
                             "check the URI and that libvirtd runs there (scripts/ensure-libvirtd, systemctl start libvirtd)") from None
    try:
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"libvirt domain {name} at {where}: {exc.get_error_message()}",
                                  f"`virsh -c {where} list --all` lists the domains there") from None
        try:
            xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"reading the XML of libvirt domain {name} at {where}: {exc.get_error_message()}") from None
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    return parse_domain(xml, source=f"libvirt domain {name} ({where})", ident=name, disk=disk)


# ---- the parts --------------------------------------------------------------------------------


def _text(el: ET.Element) -> str:
    """An element alone as XML (without the whitespace after it)."""
    tail, el.tail = el.tail, None
    try:
        return ET.tostring(el, encoding="unicode").strip()
    finally:
        el.tail = tail


def _target(disk: ET.Element) -> ET.Element:
    tgt = disk.find("target")
    return tgt if tgt is not None else ET.Element("target")


def _pick_disk(root: ET.Element, source: str, dev: str | None) -> ET.Element:
    disks = root.findall("./devices/disk")
    if dev is not None:
        for el in disks:
            if _target(el).get("dev") == dev:
                if el.get("device", "disk") != "disk":
                    raise HypervisorError(f"{source}: {dev} is a {el.get('device')}, not a disk")
                return el
        names = ", ".join(_target(d).get("dev", "?") for d in disks if d.get("device", "disk") == "disk") or "none"
        raise HypervisorError(f"{source} has no disk with target {dev}", f"its disks: {names}")
    for el in disks:
        if el.get("device", "disk") == "disk":
            return el
    raise HypervisorError(f"{source} has no disk (device='disk')", "vmbench reads a VM's disk settings from one of its disks")


def _bus(root: ET.Element, disk: ET.Element, dev: str, unknown: list[str]) -> tuple[Bus, bool, ET.Element | None]:
    """(bus, iothread of a SCSI disk's controller, that controller)."""
    bus = _target(disk).get("bus") or ""
    if bus == "virtio":
        return Bus.VIRTIO_BLK, False, None
    if bus == "sata":
        return Bus.SATA, False, None
    if bus != "scsi":
        nearest = Bus.SATA if bus == "ide" else Bus.VIRTIO_BLK
        unknown.append(f"bus: {dev} is on bus {bus or '(none)'}, not one vmbench measures ({Bus.allowed()}); read as {nearest}")
        return nearest, False, None
    addr = disk.find("address")
    index = addr.get("controller", "0") if addr is not None and addr.get("type") == "drive" else "0"
    ctrl = root.find(f"./devices/controller[@type='scsi'][@index='{index}']")
    others = [d for d in root.findall("./devices/disk") if d is not disk and _target(d).get("bus") == "scsi"
              and _controller_index(d) == index]
    bus_ = Bus.VIRTIO_SCSI_SHARED if others else Bus.VIRTIO_SCSI
    model = ctrl.get("model") if ctrl is not None else None
    if model != "virtio-scsi":
        unknown.append(f"bus: {dev} is on SCSI controller {index} of model {model or '(libvirt default, lsilogic on x86)'}, "
                       f"not virtio-scsi; read as {bus_}")
    cdrv = ctrl.find("driver") if ctrl is not None else None
    iothread = cdrv is not None and ("iothread" in cdrv.attrib or cdrv.find("iothreads") is not None)
    return bus_, iothread, ctrl


def _controller_index(disk: ET.Element) -> str:
    addr = disk.find("address")
    return addr.get("controller", "0") if addr is not None and addr.get("type") == "drive" else "0"


def _limits(disk: ET.Element, unknown: list[str]) -> IoLimits:
    iotune = disk.find("iotune")
    if iotune is None:
        return IoLimits()
    values: dict[str, Any] = {}
    known: set[str] = set()
    lengths: set[int] = set()
    for name in LIMIT_RATES + LIMIT_BURSTS:
        tag = iotune_name(name)
        known.update((tag, tag + "_length"))
        text = (iotune.findtext(tag) or "").strip()
        if text and text.isdigit() and int(text):
            values[name] = int(text) if name.startswith("iops") else limit_mbps(int(text) / MiB)
        length = (iotune.findtext(tag + "_length") or "").strip()
        if length and length.isdigit() and int(length) and name in LIMIT_BURSTS:
            lengths.add(int(length))
    if len(lengths) == 1:
        values["burst_length"] = lengths.pop()
    elif lengths:
        unknown.append(f"burst_length: the bursts last different times ({', '.join(str(n) for n in sorted(lengths))} s); "
                       "vmbench has one burst_length")
    for child in iotune:
        if child.tag not in known:
            unknown.append(f"iotune: <{child.tag}>{(child.text or '').strip()}</{child.tag}> is not a vmbench limit")
    return IoLimits(**values)


def _cpu(root: ET.Element, unknown: list[str], assumed: list[str]) -> tuple[CpuConfig, str]:
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
    return CpuConfig(cpu.mode, cpu.model, aes, tuple(sorted(feats))), _text(el)


def _vcpus(root: ET.Element, unknown: list[str]) -> int:
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


def _memory_mib(root: ET.Element, unknown: list[str]) -> int:
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


def _storage(disk: ET.Element) -> dict[str, object]:
    src = disk.find("source")
    if src is None:
        return {}
    path = src.get("file") or src.get("dev")
    out: dict[str, object] = {}
    if path:
        out["path"] = path
        if path.startswith("/dev/zvol/"):
            out["zvol"] = path.removeprefix("/dev/zvol/")
    for key in ("pool", "volume", "protocol", "name"):
        if src.get(key):
            out[key] = src.get(key)
    return out


def read_current(hv: Hypervisor, name: str, disk: str | None) -> CurrentVm:
    """The domain ``name`` on ``hv``, read only: a read-only connection to ``hv.uri``, over SSH
    through vmbench's own verified SSH connection as the driver connects."""
    if not hv.remote:
        return read_domain(hv.uri, name, disk=disk)
    host = make_host(hv)
    bridge = None
    try:
        opener = getattr(host, "open_stream")
        bridge = LibvirtBridge(opener, hv.uri)
        return read_domain(bridge.local_uri, name, disk=disk, shown_as=hv.uri)
    finally:
        if bridge is not None:
            bridge.close()
        host.close()
