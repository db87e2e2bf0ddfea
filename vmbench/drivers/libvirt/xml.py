"""Pure builders of libvirt XML: domains, storage volumes, the vmbench pool.

Every VM setting a scenario can vary maps to one place in the domain XML (the I/O limits:
the scratch disk's ``<iotune>``), written by its axis's row of libvirt's codec table
(:mod:`.codec`); tests assert the exact XML for every axis value.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass

from ...scenario.model import VmConfig
from ...fio.rbd import parse_target
from .codec import CODECS, DOMAIN_ORDER, DRIVER_ATTRIBUTES, NewDomain
from .codec import cpu_xml as cpu_xml  # the <cpu> vmbench writes, for callers of the builders
from .iotune import IOTUNE_TAGS, ordered_element
from .iotune import iotune_element as iotune_element  # the <iotune> vmbench writes, for callers of the builders

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
    os_ = _sub(dom, "os")
    _sub(os_, "type", "hvm", arch="x86_64", machine=spec.machine)
    _sub(os_, "kernel", spec.kernel)
    _sub(os_, "initrd", spec.initrd)
    _sub(os_, "cmdline", spec.cmdline)
    features = _sub(dom, "features")
    _sub(features, "acpi")
    _sub(features, "apic")
    _sub(dom, "clock", offset="utc")
    _sub(dom, "on_poweroff", "destroy")
    _sub(dom, "on_reboot", "destroy")
    _sub(dom, "on_crash", "destroy")
    devices = _sub(dom, "devices")
    new = _written(spec)
    for el in new.domain:  # the VM axes' own elements (<memory>, <vcpu>, <cpu>...), where libvirt has them
        _place(dom, el)
    for el in _disks(new):
        devices.append(el)
    serial = _sub(devices, "serial", type="file")
    _sub(serial, "source", path=spec.console_log)
    _sub(serial, "target", port="0")
    chan = _sub(devices, "channel", type="unix")
    _sub(chan, "target", type="virtio", name="org.qemu.guest_agent.0")
    _sub(devices, "memballoon", model="none")
    return _render(dom)


def _place(dom: ET.Element, el: ET.Element) -> None:
    """Put ``el`` among ``dom``'s children where :data:`~.codec.DOMAIN_ORDER` has it (an
    element it does not name: before <devices>)."""
    rank = DOMAIN_ORDER.index(el.tag) if el.tag in DOMAIN_ORDER else DOMAIN_ORDER.index("devices")
    dom.insert(next((i for i, child in enumerate(dom) if _rank(child.tag, DOMAIN_ORDER) >= rank), len(dom)), el)


def _rank(name: str, order: tuple[str, ...]) -> int:
    return order.index(name) if name in order else len(order)


def _written(spec: DomainSpec) -> NewDomain:
    """The root and scratch disks, and what every axis's row writes (vmbench.drivers.libvirt.codec)."""
    root = ET.Element("disk", {"type": "file", "device": "disk"})
    _sub(root, "driver", name="qemu", type="qcow2", cache="writeback", discard="unmap")
    _sub(root, "source", file=spec.root_path)
    block = spec.scratch_kind == "block"
    scratch = ET.Element("disk", {"type": "network" if spec.rbd else "block" if block else "file", "device": "disk"})
    driver = _sub(scratch, "driver")
    if spec.rbd:
        rbd_source(scratch, spec.rbd)
    elif block:
        _sub(scratch, "source", dev=spec.scratch_path)
    else:
        _sub(scratch, "source", file=spec.scratch_path)
    new = NewDomain(root, scratch, rbd=spec.rbd is not None, driver={"name": "qemu"})
    for codec in CODECS:
        codec.write(spec.vm, new)
    driver.attrib.update(sorted(new.driver.items(), key=lambda kv: _rank(kv[0], DRIVER_ATTRIBUTES)))
    if new.iotune:  # right after the target, where libvirt writes it
        target = scratch.find("target")
        at = list(scratch).index(target) + 1 if target is not None else len(scratch)
        scratch.insert(at, ordered_element("iotune", new.iotune, IOTUNE_TAGS))
    _sub(scratch, "serial", spec.scratch_serial)
    return new


def _disks(new: NewDomain) -> list[ET.Element]:
    return [new.root, new.disk, *new.devices]


def disk_elements(spec: DomainSpec) -> list[ET.Element]:
    """The root disk, the scratch disk and any controller they need.

    The scratch disk carries the scenario's bus, cache, aio, iothread and format, and
    detect_zeroes, discard and its I/O limits (``<iotune>``) where the scenario sets them
    (else libvirt's defaults), each as its axis's row writes it.  The root disk stays on
    virtio-blk, except with ``virtio-scsi-shared``, where it shares the single SCSI
    controller with the scratch disk (as in Proxmox's ``virtio-scsi-pci``).
    """
    return _disks(_written(spec))


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
