"""Pure builders of libvirt XML: domains, storage volumes, the vmbench pool.

Every VM setting a scenario can vary maps to one place in the domain XML (the I/O limits:
the scratch disk's ``<iotune>``); tests assert the exact XML for every axis value.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ...scenario.model import IoLimits, VmConfig, limit_bytes
from ...settings import Bus, CpuMode, Feature
from ...fio.rbd import parse_target

NS = "https://vmbench.dev/xmlns/libvirt/1"
NS_PREFIX = "vmbench"
ROOT_TARGET = {"virtio": "vda", "scsi": "sda"}


@dataclass(frozen=True)
class DomainSpec:
    name: str
    run_tag: str
    vm: VmConfig
    domain_type: str  # "kvm" or "qemu" (TCG)
    kernel: str
    initrd: str
    cmdline: str
    root_path: str
    scratch_path: str
    scratch_serial: str
    console_log: str
    cells: tuple[str, ...] = ()
    created: str = ""
    machine: str = "pc"
    volumes: tuple[str, ...] = ()
    scratch_kind: str = "file"  # "block": a zvol or other block device (<disk type='block'>); "rbd": an RBD image
    rbd: "RbdDisk | None" = None  # scratch_kind rbd: how QEMU reaches the image


@dataclass(frozen=True)
class RbdDisk:
    """An RBD scratch disk as QEMU opens it through librbd: the image (``pool/image``), the
    client configuration (its monitors), the cephx user and the libvirt secret (by usage)
    holding its key."""

    image: str
    conf: str
    user: str
    secret_usage: str


def _sub(parent: ET.Element, tag: str, text: str | None = None, **attrs: str) -> ET.Element:
    el = ET.SubElement(parent, tag, {k.rstrip("_").replace("__", "-"): v for k, v in attrs.items()})
    if text is not None:
        el.text = text
    return el


def _render(root: ET.Element) -> str:
    ET.indent(root, space="  ")
    return ET.tostring(root, encoding="unicode") + "\n"


def domain_xml(spec: DomainSpec) -> str:
    vm = spec.vm
    dom = ET.Element("domain", {"type": spec.domain_type})
    _sub(dom, "name", spec.name)
    _sub(dom, "description", f"Created by vmbench run {spec.run_tag}; removed by the run or by `vmbench cleanup`.")
    meta = _sub(dom, "metadata")
    ET.register_namespace(NS_PREFIX, NS)
    tag = ET.SubElement(meta, f"{{{NS}}}vm")
    ET.SubElement(tag, f"{{{NS}}}run").text = spec.run_tag
    if spec.created:
        ET.SubElement(tag, f"{{{NS}}}created").text = spec.created
    for cell in spec.cells:
        ET.SubElement(tag, f"{{{NS}}}cell").text = cell
    for vol in spec.volumes:
        ET.SubElement(tag, f"{{{NS}}}volume").text = vol
    _sub(dom, "memory", str(vm.memory_mib), unit="MiB")
    _sub(dom, "vcpu", str(vm.vcpus), placement="static")
    if vm.iothread:
        _sub(dom, "iothreads", "1")
    os_ = _sub(dom, "os")
    _sub(os_, "type", "hvm", arch="x86_64", machine=spec.machine)
    _sub(os_, "kernel", spec.kernel)
    _sub(os_, "initrd", spec.initrd)
    _sub(os_, "cmdline", spec.cmdline)
    features = _sub(dom, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    dom.append(cpu_xml(vm))
    _sub(dom, "clock", offset="utc")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "destroy")
    _sub(dom, "on_crash", "destroy")
    devices = _sub(dom, "devices")
    for el in disk_elements(spec):
        devices.append(el)
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=spec.console_log)
    _sub(serial, "target", port="0")
    chan = _sub(devices, "channel", type="unix")
    _sub(chan, "target", type="virtio", name="org.qemu.guest_agent.0")
    _sub(devices, "memballoon", model="none")
    return _render(dom)


def cpu_xml(vm: VmConfig) -> ET.Element:
    cpu = vm.cpu
    if cpu.mode is CpuMode.HOST_PASSTHROUGH:
        el = ET.Element("cpu", {"mode": "host-passthrough", "check": "none"})
    elif cpu.mode is CpuMode.MAX:
        el = ET.Element("cpu", {"mode": "maximum", "check": "none"})
    else:
        el = ET.Element("cpu", {"mode": "custom", "match": "exact", "check": "none"})
        _sub(el, "model", cpu.model or "qemu64", fallback="forbid")
    for name, state in cpu.all_features():
        _sub(el, "feature", policy="require" if state is Feature.ON else "disable", name=name)
    _sub(el, "topology", sockets="1", dies="1", cores=str(vm.vcpus), threads="1")
    return el


def disk_elements(spec: DomainSpec) -> list[ET.Element]:
    """The root disk, the scratch disk and any controller they need.

    The scratch disk carries the scenario's bus, cache, aio, iothread and format, and
    detect_zeroes, discard and its I/O limits (``<iotune>``) where the scenario sets them
    (else libvirt's defaults).  The root
    disk stays on virtio-blk, except with ``virtio-scsi-shared``, where it shares the single
    SCSI controller with the scratch disk (as in Proxmox's ``virtio-scsi-pci``).
    """
    vm = spec.vm
    out: list[ET.Element] = []
    shared = vm.bus is Bus.VIRTIO_SCSI_SHARED
    # root disk
    root = ET.Element("disk", {"type": "file", "device": "disk"})
    _sub(root, "driver", name="qemu", type="qcow2", cache="writeback", discard="unmap")
    _sub(root, "source", file=spec.root_path)
    if shared:
        _sub(root, "target", dev="sda", bus="scsi")
        _sub(root, "address", type="drive", controller="0", bus="0", target="0", unit="0")
    else:
        _sub(root, "target", dev="vda", bus="virtio")
    out.append(root)
    # scratch disk
    block = spec.scratch_kind == "block"
    scratch = ET.Element("disk", {"type": "network" if spec.rbd else "block" if block else "file", "device": "disk"})
    drv = {"name": "qemu", "type": vm.format.value, "cache": vm.cache.value, "io": vm.aio.value}
    if spec.rbd:
        del drv["io"]  # QEMU's rbd driver does its I/O through librbd: aio does not apply
    if vm.iothread and vm.bus is Bus.VIRTIO_BLK:
        drv["iothread"] = "1"
    if vm.discard is not None:
        drv["discard"] = vm.discard.value
    if vm.detect_zeroes is not None:
        drv["detect_zeroes"] = vm.detect_zeroes.value
    _sub(scratch, "driver", **drv)
    if spec.rbd:
        rbd_source(scratch, spec.rbd)
    elif block:
        _sub(scratch, "source", dev=spec.scratch_path)
    else:
        _sub(scratch, "source", file=spec.scratch_path)
    if vm.bus is Bus.VIRTIO_BLK:
        target = _sub(scratch, "target", dev="vdb", bus="virtio")
    elif vm.bus is Bus.SATA:
        target = _sub(scratch, "target", dev="sda", bus="sata")
    else:
        target = _sub(scratch, "target", dev="sdb" if shared else "sda", bus="scsi")
        _sub(scratch, "address", type="drive", controller="0", bus="0", target="0", unit="1" if shared else "0")
    iotune = iotune_element(vm.limits)
    if iotune is not None:  # right after the target, where libvirt writes it
        scratch.insert(list(scratch).index(target) + 1, iotune)
    _sub(scratch, "serial", spec.scratch_serial)
    out.append(scratch)
    if vm.bus.is_scsi:
        ctrl = ET.Element("controller", {"type": "scsi", "index": "0", "model": "virtio-scsi"})
        if vm.iothread:
            _sub(ctrl, "driver", iothread="1")
        out.append(ctrl)
    return out


def rbd_disk(target: str, secret_usage: str) -> RbdDisk:
    """The RBD disk of a scratch volume's path (``rbd:pool/image:id=...:conf=...``)."""
    t = parse_target(target)
    if t is None:
        raise ValueError(f"{target} is not an RBD image")
    return RbdDisk(t.spec, t.conf, t.user, secret_usage)


def rbd_source(disk: ET.Element, rbd: RbdDisk) -> None:
    """``<source protocol='rbd'>`` with the client configuration (QEMU reads the monitors from
    it) and ``<auth>`` naming the user and the secret with its key."""
    src = _sub(disk, "source", protocol="rbd", name=rbd.image)
    _sub(src, "config", file=rbd.conf)
    auth = _sub(src, "auth", username=rbd.user)
    _sub(auth, "secret", type="ceph", usage=rbd.secret_usage)


_IOTUNE_DIRECTION = {"": "total", "rd": "read", "wr": "write"}
#: the order libvirt writes <iotune>'s rates and bursts in (their lengths follow, same order)
IOTUNE_ORDER = ("mbps", "mbps_rd", "mbps_wr", "iops", "iops_rd", "iops_wr",
                "mbps_max", "mbps_rd_max", "mbps_wr_max", "iops_max", "iops_rd_max", "iops_wr_max")


def iotune_name(name: str) -> str:
    """A limit axis as libvirt's <iotune> element: iops -> total_iops_sec, mbps_rd ->
    read_bytes_sec, iops_wr_max -> write_iops_sec_max (its length: that plus ``_length``)."""
    base = name.removesuffix("_max")
    unit, _, direction = base.partition("_")
    tag = f"{_IOTUNE_DIRECTION[direction]}_{'iops' if unit == 'iops' else 'bytes'}_sec"
    return tag + ("_max" if name != base else "")


def iotune_element(limits: IoLimits) -> ET.Element | None:
    """``<iotune>`` with every limit that is set (MiB/s as bytes: x 1048576, truncated as
    qemu-server does) and ``burst_length`` as the ``*_max_length`` of every burst; None
    without limits."""
    given = limits.given()
    if not given:
        return None
    el = ET.Element("iotune")
    for name in IOTUNE_ORDER:
        if name in given:
            value = given[name]
            _sub(el, iotune_name(name), str(int(value) if name.startswith("iops") else limit_bytes(value)))
    if limits.burst_length is not None:
        for name in IOTUNE_ORDER:
            if name in given and name.endswith("_max"):
                _sub(el, iotune_name(name) + "_length", str(limits.burst_length))
    return el


def volume_xml(name: str, capacity: int, fmt: str, backing: tuple[str, str] | None = None) -> str:
    vol = ET.Element("volume")
    _sub(vol, "name", name)
    _sub(vol, "capacity", str(capacity), unit="bytes")
    _sub(vol, "allocation", "0", unit="bytes")
    target = _sub(vol, "target")
    _sub(target, "format", type=fmt)
    _sub(target, "permissions").append(_el("mode", "0600"))
    if backing is not None:
        bs = _sub(vol, "backingStore")
        _sub(bs, "path", backing[0])
        _sub(bs, "format", type=backing[1])
    return _render(vol)


def pool_xml(name: str, path: str) -> str:
    pool = ET.Element("pool", {"type": "dir"})
    _sub(pool, "name", name)
    target = _sub(pool, "target")
    _sub(target, "path", path)
    perms = _sub(target, "permissions")
    perms.append(_el("mode", "0711"))
    return _render(pool)


def probe_xml(name: str, run_tag: str, kernel: str, console_log: str) -> str:
    """A tiny KVM domain that boots the template's kernel with no root disk: a usable KVM
    reaches the kernel's 'Unable to mount root fs' panic within seconds and the domain
    stops (panic=1 reboots, on_reboot=destroy); a hung KVM keeps it running."""
    dom = ET.Element("domain", {"type": "kvm"})
    _sub(dom, "name", name)
    _sub(dom, "description", f"vmbench KVM probe {run_tag}")
    meta = _sub(dom, "metadata")
    tag = ET.SubElement(meta, f"{{{NS}}}vm")
    ET.SubElement(tag, f"{{{NS}}}run").text = run_tag
    _sub(dom, "memory", "256", unit="MiB")
    _sub(dom, "vcpu", "1")
    os_ = _sub(dom, "os")
    _sub(os_, "type", "hvm", arch="x86_64", machine="pc")
    _sub(os_, "kernel", kernel)
    _sub(os_, "cmdline", "console=ttyS0 panic=1 root=/dev/vmbench-probe-no-root")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "destroy")
    _sub(dom, "on_crash", "destroy")
    devices = _sub(dom, "devices")
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=console_log)
    _sub(serial, "target", port="0")
    _sub(devices, "memballoon", model="none")
    return _render(dom)


def _el(tag: str, text: str) -> ET.Element:
    el = ET.Element(tag)
    el.text = text
    return el
