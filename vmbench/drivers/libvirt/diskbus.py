"""The scratch disk's bus as libvirt spells it (pure): the disk's ``<target>`` and
``<address>``, and the SCSI ``<controller>`` it is on.

virtio-blk is ``<target bus='virtio'>``, sata ``bus='sata'``, virtio-scsi a ``bus='scsi'``
disk on a virtio-scsi controller of its own (Proxmox's virtio-scsi-single), and
virtio-scsi-shared one controller shared with the root disk (Proxmox's virtio-scsi-pci);
the controller's ``<driver iothread='1'>`` is the disk's iothread on SCSI.  :mod:`.codec`'s
bus row writes, reads back, reads and edits it through these functions.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ...settings import Bus
from ..codec import GUEST_NAME, RENAME_NOTE
from ..existing import CurrentVm

#: libvirt's target bus of each bus
TARGET_BUS = {Bus.VIRTIO_BLK: "virtio", Bus.VIRTIO_SCSI: "scsi", Bus.VIRTIO_SCSI_SHARED: "scsi", Bus.SATA: "sata"}


def sub(parent: ET.Element, tag: str, **attrs: str) -> ET.Element:
    return ET.SubElement(parent, tag, attrs)


# ---- written: vmbench's own domains ---------------------------------------------------------


def write_targets(vm_bus: Bus, iothread: bool, root: ET.Element, disk: ET.Element) -> ET.Element | None:
    """The root disk's and the scratch disk's ``<target>`` (and ``<address>`` on SCSI), and the
    SCSI controller they need (None on virtio-blk and sata).  The root disk stays on
    virtio-blk, except with ``virtio-scsi-shared``, where it shares the single SCSI
    controller with the scratch disk (as in Proxmox's ``virtio-scsi-pci``)."""
    shared = vm_bus is Bus.VIRTIO_SCSI_SHARED
    if shared:
        sub(root, "target", dev="sda", bus="scsi")
        sub(root, "address", type="drive", controller="0", bus="0", target="0", unit="0")
    else:
        sub(root, "target", dev="vda", bus="virtio")
    if vm_bus is Bus.VIRTIO_BLK:
        sub(disk, "target", dev="vdb", bus="virtio")
    elif vm_bus is Bus.SATA:
        sub(disk, "target", dev="sda", bus="sata")
    else:
        sub(disk, "target", dev="sdb" if shared else "sda", bus="scsi")
        sub(disk, "address", type="drive", controller="0", bus="0", target="0", unit="1" if shared else "0")
    if not vm_bus.is_scsi:
        return None
    ctrl = ET.Element("controller", {"type": "scsi", "index": "0", "model": "virtio-scsi"})
    if iothread:
        sub(ctrl, "driver", iothread="1")
    return ctrl


# ---- read back: the live domain XML --------------------------------------------------------


def config_bus(root: ET.Element, disk: ET.Element) -> str | None:
    """The bus a disk is on in a domain's XML, as a vmbench bus name (another bus by its own name)."""
    tgt = disk.find("target")
    bus = tgt.get("bus") if tgt is not None else None
    if bus == "virtio":
        return Bus.VIRTIO_BLK.value
    if bus == "sata":
        return Bus.SATA.value
    if bus == "scsi":
        others = [d.find("target") for d in root.findall("./devices/disk") if d is not disk]
        shared = any(t is not None and t.get("bus") == "scsi" for t in others)
        return (Bus.VIRTIO_SCSI_SHARED if shared else Bus.VIRTIO_SCSI).value
    return bus


def controller_model(root: ET.Element, bus: str | None) -> str | None:
    """The controller a disk on ``bus`` (a :func:`config_bus` reading) is on."""
    if bus in (Bus.VIRTIO_SCSI.value, Bus.VIRTIO_SCSI_SHARED.value):
        ctrl = root.find("./devices/controller[@type='scsi']")
        return ctrl.get("model") if ctrl is not None else None
    if bus == Bus.SATA.value:
        return "ahci"
    return "virtio-blk-pci"


# ---- read: a user's domain -----------------------------------------------------------------


def target(disk: ET.Element) -> ET.Element:
    tgt = disk.find("target")
    return tgt if tgt is not None else ET.Element("target")


def controller_index(disk: ET.Element) -> str:
    addr = disk.find("address")
    return addr.get("controller", "0") if addr is not None and addr.get("type") == "drive" else "0"


def read_bus(root: ET.Element, disk: ET.Element, dev: str, unknown: list[str]) -> tuple[Bus, bool, ET.Element | None]:
    """(bus, iothread of a SCSI disk's controller, that controller) of a user's disk; a bus
    vmbench does not measure, or a SCSI controller that is not virtio-scsi, said in ``unknown``."""
    bus = target(disk).get("bus") or ""
    if bus == "virtio":
        return Bus.VIRTIO_BLK, False, None
    if bus == "sata":
        return Bus.SATA, False, None
    if bus != "scsi":
        nearest = Bus.SATA if bus == "ide" else Bus.VIRTIO_BLK
        unknown.append(f"bus: {dev} is on bus {bus or '(none)'}, not one vmbench measures ({Bus.allowed()}); read as {nearest}")
        return nearest, False, None
    index = controller_index(disk)
    ctrl = root.find(f"./devices/controller[@type='scsi'][@index='{index}']")
    others = [d for d in root.findall("./devices/disk") if d is not disk and target(d).get("bus") == "scsi"
              and controller_index(d) == index]
    bus_ = Bus.VIRTIO_SCSI_SHARED if others else Bus.VIRTIO_SCSI
    model = ctrl.get("model") if ctrl is not None else None
    if model != "virtio-scsi":
        unknown.append(f"bus: {dev} is on SCSI controller {index} of model {model or '(libvirt default, lsilogic on x86)'}, "
                       f"not virtio-scsi; read as {bus_}")
    cdrv = ctrl.find("driver") if ctrl is not None else None
    iothread = cdrv is not None and ("iothread" in cdrv.attrib or cdrv.find("iothreads") is not None)
    return bus_, iothread, ctrl


# ---- edited: an apply snippet -------------------------------------------------------------


def target_dev(bus: Bus, old: str, used: set[str]) -> str:
    """The target name on ``bus``: the same letter as ``old`` where it is free (vda -> sda)."""
    prefix = "vd" if bus is Bus.VIRTIO_BLK else "sd"
    letter = old[2:] if len(old) > 2 and old[:2] in ("vd", "sd", "hd") else "a"
    if f"{prefix}{letter}" not in used:
        return f"{prefix}{letter}"
    return next(f"{prefix}{c}" for c in "abcdefghijklmnopqrstuvwxyz" if f"{prefix}{c}" not in used)


def retarget(bus: Bus, disk: ET.Element, tgt: ET.Element, old_bus: Bus, used: set[str], mine: CurrentVm | None) -> str | None:
    """Move a user's ``<disk>`` to ``bus``: a free target name with the same letter, its
    ``<address>`` dropped (libvirt gives it one); the note on the guest's new disk name, if any."""
    old_dev = tgt.get("dev", "vda")
    tgt.set("dev", target_dev(bus, old_dev, used - {old_dev}))
    tgt.set("bus", TARGET_BUS[bus])
    for addr in disk.findall("address"):
        disk.remove(addr)
    if mine is None:
        return "if the disk is on another bus now, " + RENAME_NOTE.format(old="its old name", new=GUEST_NAME[bus])
    if TARGET_BUS[old_bus] != TARGET_BUS[bus]:
        return RENAME_NOTE.format(old=GUEST_NAME[old_bus], new=GUEST_NAME[bus])
    return None


def controller_for(bus: Bus, iothread: bool, disk: ET.Element, tgt: ET.Element, mine: CurrentVm | None) -> tuple[ET.Element, str]:
    """The SCSI controller the disk goes on: its own (virtio-scsi) or the shared first one,
    with the iothread on its ``<driver>``; and the note saying where it goes."""
    indexes = [int(i) for i in (mine.extra.get("scsi_controllers", "") if mine else "").split(",") if i.strip().isdigit()]
    existing = ET.fromstring(mine.extra["controller"]) if mine is not None and mine.extra.get("controller") else None
    if bus is Bus.VIRTIO_SCSI:
        if existing is not None and mine is not None and mine.vm.bus is Bus.VIRTIO_SCSI:
            index = int(existing.get("index", "0"))
        else:
            existing = None
            index = max(indexes) + 1 if indexes else 0
        addr = disk.find("address")
        if addr is None:
            addr = ET.Element("address")
            disk.insert(list(disk).index(tgt) + 1, addr)
        for k, v in (("type", "drive"), ("controller", str(index)), ("bus", "0"), ("target", "0"), ("unit", "0")):
            addr.set(k, v)
    else:
        index = int(existing.get("index", "0")) if existing is not None else (min(indexes) if indexes else 0)
        if existing is not None and int(existing.get("index", "0")) != index:
            existing = None
    el = existing if existing is not None else ET.Element("controller", {"type": "scsi", "index": str(index)})
    el.set("model", "virtio-scsi")
    drv = el.find("driver")
    if iothread:
        if drv is None:
            drv = ET.SubElement(el, "driver")
        drv.set("iothread", "1")
    elif drv is not None and "iothread" in drv.attrib:
        del drv.attrib["iothread"]
        if not drv.attrib and not len(drv):
            el.remove(drv)
    if existing is not None:
        note = f"replaces SCSI controller {index}"
    elif bus is Bus.VIRTIO_SCSI and mine is None:
        note = ("a SCSI controller in <devices> for this disk alone (one controller per disk): give it an index no "
                "other controller has, and the disk's <address> the same controller=")
    elif bus is Bus.VIRTIO_SCSI:
        note = f"a new SCSI controller {index} in <devices>, for this disk alone (one controller per disk)"
    else:
        note = (f"SCSI controller {index} in <devices>, shared by every SCSI disk (replace it if the domain has one "
                "with that index)")
    return el, note
