"""Apply snippets for libvirt: the domain XML elements to put in with ``virsh edit`` (pure).

The disk keeps everything of its own ``<disk>`` element (source, serial, boot order, ...)
but the ``<driver>`` attributes, the ``<target>`` bus and the ``<iotune>`` that change; the
``<iotune>``, ``<cpu>`` and the SCSI controller come from :mod:`vmbench.drivers.libvirt.xml`,
the builders vmbench's own domains are made with.
"""

from __future__ import annotations

import shlex
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from ..drivers.libvirt.xml import cpu_xml, iotune_element
from ..scenario.axes import DISK_SETTING_KEYS
from ..scenario.model import LIMIT_NAMES, VmConfig
from ..settings import Bus
from .model import Snippet

if TYPE_CHECKING:
    from ..drivers.existing import CurrentVm

#: the settings keys of the disk (a ``qm set --scsi0`` option, or the ``<disk>`` element)
DISK_KEYS = DISK_SETTING_KEYS
GUEST_NAME = {Bus.VIRTIO_BLK: "/dev/vdX", Bus.VIRTIO_SCSI: "/dev/sdX", Bus.VIRTIO_SCSI_SHARED: "/dev/sdX", Bus.SATA: "/dev/sdX"}
RENAME_NOTE = ("the guest sees the disk on another bus, so its name changes ({old} -> {new}): make sure /etc/fstab and "
               "the bootloader name it by UUID or label (and a Windows guest has the driver of the new bus) before "
               "the switch")
TARGET_BUS = {Bus.VIRTIO_BLK: "virtio", Bus.VIRTIO_SCSI: "scsi", Bus.VIRTIO_SCSI_SHARED: "scsi", Bus.SATA: "sata"}
PLACEHOLDER_DISK = '<disk type="file" device="disk"><driver name="qemu" type="raw"/><source file="/path/to/disk.img"/></disk>'
NEXT_START = "takes effect at the domain's next start (virsh shutdown, then virsh start; a reboot inside the guest keeps the running QEMU)"


def render(el: ET.Element) -> str:
    for sub in el.iter():
        if not len(sub) and sub.text is not None and not sub.text.strip():
            sub.text = None  # what is left of a removed child's indentation
    ET.indent(el, space="  ")
    el.tail = None
    return ET.tostring(el, encoding="unicode")


def _dev(bus: Bus, old: str, used: set[str]) -> str:
    """The target name on ``bus``: the same letter as ``old`` where it is free (vda -> sda)."""
    prefix = "vd" if bus is Bus.VIRTIO_BLK else "sd"
    letter = old[2:] if len(old) > 2 and old[:2] in ("vd", "sd", "hd") else "a"
    if f"{prefix}{letter}" not in used:
        return f"{prefix}{letter}"
    return next(f"{prefix}{c}" for c in "abcdefghijklmnopqrstuvwxyz" if f"{prefix}{c}" not in used)


def libvirt_snippets(vm: VmConfig, changed: tuple[str, ...], current: "CurrentVm | None") -> list[Snippet]:
    """``virsh edit NAME`` and the elements that change: ``<disk>``, the SCSI ``<controller>``,
    ``<iothreads>``, ``<cpu>``, ``<vcpu>``, ``<memory>``."""
    mine = current if current is not None and current.kind == "libvirt" else None
    name = mine.extra.get("name") or mine.ident if mine is not None else "NAME"
    out = [Snippet("libvirt", shlex.join(["virsh", "edit", name]),
                   "opens the domain's XML in an editor: put in the elements below, each in place of the one it "
                   f"replaces; {NEXT_START}" + ("" if mine else "; NAME is the domain's name (virsh list --all)"))]
    scsi_iothread = False
    if any(k in DISK_KEYS for k in changed):
        disk, controller, notes = _disk(vm, changed, mine)
        out.append(Snippet("libvirt", render(disk), "; ".join(notes)))
        if controller is not None:
            out.append(Snippet("libvirt", render(controller[0]), controller[1]))
            scsi_iothread = vm.iothread
    wants_thread = vm.iothread and vm.bus.takes_iothread and ("iothread" in changed or "bus" in changed)
    if wants_thread and (mine is None or mine.extra.get("iothreads", "") in ("", "0")):
        out.append(Snippet("libvirt", "<iothreads>1</iothreads>",
                           "in <domain> (top level), if it has no <iothreads>: the iothread the "
                           + ("SCSI controller" if scsi_iothread or vm.bus.is_scsi else "disk") + " runs in"))
    if "cpu" in changed:
        out.append(Snippet("libvirt", render(cpu_xml(vm)),
                           f"replaces the domain's <cpu> element (CPU {vm.cpu.label}, topology 1 socket of {vm.vcpus} cores)"))
    if "vcpus" in changed:
        note = "replaces <vcpu>"
        if "cpu" not in changed:
            note += f"; if <cpu> has a <topology>, make it sockets=1 cores={vm.vcpus} threads=1 (libvirt checks they match)"
        out.append(Snippet("libvirt", f'<vcpu placement="static">{vm.vcpus}</vcpu>', note))
    if "memory_mib" in changed:
        out.append(Snippet("libvirt", f'<memory unit="MiB">{vm.memory_mib}</memory>',
                           "replaces <memory>; a <currentMemory> must not be larger (remove it or set it the same)"))
    return out


def _disk(vm: VmConfig, changed: tuple[str, ...], mine: "CurrentVm | None") -> tuple[ET.Element, tuple[ET.Element, str] | None, list[str]]:
    notes: list[str] = []
    if mine is not None:
        disk = ET.fromstring(mine.disk_spec)
        notes.append(f"replaces the <disk> of {mine.disk} in {mine.source}: its source and other children are kept")
        used = set(filter(None, mine.extra.get("targets", "").split(",")))
        old_bus = mine.vm.bus
    else:
        disk = ET.fromstring(PLACEHOLDER_DISK)
        ET.SubElement(disk, "target", {"dev": _dev(vm.bus, "vda", set()), "bus": TARGET_BUS[vm.bus]})
        notes.append("replaces the disk's <disk> element: keep its own type, <source> (in place of /path/to/disk.img) "
                     "and its other children")
        used, old_bus = set(), vm.bus
    drv = disk.find("driver")
    if drv is None:
        drv = ET.Element("driver", {"name": "qemu"})
        disk.insert(0, drv)
    for key, attr in (("cache", "cache"), ("aio", "io"), ("discard", "discard"), ("detect_zeroes", "detect_zeroes")):
        value = getattr(vm, key)
        if key in changed and value is not None:
            drv.set(attr, value.value)
        elif key in changed and attr in drv.attrib:  # back to libvirt's default
            del drv.attrib[attr]
    if "format" in changed:
        drv.set("type", vm.format.value)
        notes.append(f"the image itself must be {vm.format.value}: convert it first with the domain shut down "
                     f"(qemu-img convert -p -O {vm.format.value} OLD NEW) and point <source> at NEW")
    if vm.iothread and vm.bus is Bus.VIRTIO_BLK:
        if "iothread" in changed or "bus" in changed:
            drv.set("iothread", "1")
    elif "iothread" in drv.attrib and ("iothread" in changed or "bus" in changed):
        del drv.attrib["iothread"]
    target = disk.find("target")
    if target is None:
        target = ET.SubElement(disk, "target", {"dev": "vda"})
    controller: tuple[ET.Element, str] | None = None
    if "bus" in changed:
        old_dev = target.get("dev", "vda")
        target.set("dev", _dev(vm.bus, old_dev, used - {old_dev}))
        target.set("bus", TARGET_BUS[vm.bus])
        for addr in disk.findall("address"):
            disk.remove(addr)
        if mine is None:
            notes.append("if the disk is on another bus now, " + RENAME_NOTE.format(old="its old name", new=GUEST_NAME[vm.bus]))
        elif TARGET_BUS[old_bus] != TARGET_BUS[vm.bus]:
            notes.append(RENAME_NOTE.format(old=GUEST_NAME[old_bus], new=GUEST_NAME[vm.bus]))
    if vm.bus.is_scsi and ("bus" in changed or "iothread" in changed):
        controller = _controller(vm, disk, target, mine)
    limits_changed = any(k in changed for k in LIMIT_NAMES)
    if limits_changed:
        for old in disk.findall("iotune"):
            disk.remove(old)
        iotune = iotune_element(vm.limits)
        if iotune is not None:  # right after the target, where libvirt writes it
            disk.insert(list(disk).index(target) + 1, iotune)
    notes.append(NEXT_START)
    return disk, controller, notes


def _controller(vm: VmConfig, disk: ET.Element, target: ET.Element, mine: "CurrentVm | None") -> tuple[ET.Element, str]:
    """The SCSI controller the disk goes on: its own (virtio-scsi) or the shared first one,
    with the iothread on its ``<driver>``."""
    indexes = [int(i) for i in (mine.extra.get("scsi_controllers", "") if mine else "").split(",") if i.strip().isdigit()]
    existing = ET.fromstring(mine.extra["controller"]) if mine is not None and mine.extra.get("controller") else None
    if vm.bus is Bus.VIRTIO_SCSI:
        if existing is not None and mine is not None and mine.vm.bus is Bus.VIRTIO_SCSI:
            index = int(existing.get("index", "0"))
        else:
            existing = None
            index = max(indexes) + 1 if indexes else 0
        addr = disk.find("address")
        if addr is None:
            addr = ET.Element("address")
            disk.insert(list(disk).index(target) + 1, addr)
        for k, v in (("type", "drive"), ("controller", str(index)), ("bus", "0"), ("target", "0"), ("unit", "0")):
            addr.set(k, v)
    else:
        index = int(existing.get("index", "0")) if existing is not None else (min(indexes) if indexes else 0)
        if existing is not None and int(existing.get("index", "0")) != index:
            existing = None
    el = existing if existing is not None else ET.Element("controller", {"type": "scsi", "index": str(index)})
    el.set("model", "virtio-scsi")
    drv = el.find("driver")
    if vm.iothread:
        if drv is None:
            drv = ET.SubElement(el, "driver")
        drv.set("iothread", "1")
    elif drv is not None and "iothread" in drv.attrib:
        del drv.attrib["iothread"]
        if not drv.attrib and not len(drv):
            el.remove(drv)
    if existing is not None:
        note = f"replaces SCSI controller {index}"
    elif vm.bus is Bus.VIRTIO_SCSI and mine is None:
        note = ("a SCSI controller in <devices> for this disk alone (one controller per disk): give it an index no "
                "other controller has, and the disk's <address> the same controller=")
    elif vm.bus is Bus.VIRTIO_SCSI:
        note = f"a new SCSI controller {index} in <devices>, for this disk alone (one controller per disk)"
    else:
        note = (f"SCSI controller {index} in <devices>, shared by every SCSI disk (replace it if the domain has one "
                "with that index)")
    return el, note
