"""libvirt and QEMU readings -> :class:`~vmbench.drivers.base.Applied` (pure).

The live domain XML says what libvirt configured (the I/O limits: the scratch disk's
``<iotune>``); QEMU's ``query-block`` says which cache mode and format its block layer uses
and which I/O limits its throttling applies (libvirt sets them with block_set_io_throttle,
not on the command line), the command line (read as for Proxmox, by
:mod:`vmbench.drivers.qemu_cmdline`) which aio, detect-zeroes and discard the scratch disk's
nodes have and which CPU model and flags QEMU runs, the QOM ``iothread`` links whether an iothread serves the disk, ``query-kvm``
which accelerator runs.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ...settings import Bus, Cache, DetectZeroes, Discard
from ..base import Applied
from ...scenario.model import LIMIT_BURSTS, LIMIT_RATES
from ...fio.rbd import parse_target
from ..qemu_cmdline import NOT_APPLICABLE, cpu_readings, disk_readings, parse_cmdline, qmp_limits, throttle_option, throttle_readings, to_applied
from .xml import iotune_name

#: the command line's readings used (cache and format come from query-block)
CMDLINE_READINGS = ("qemu_aio", "qemu_detect_zeroes", "qemu_discard")


def _scratch_block(query_block: list, scratch_path: str) -> dict | None:
    rbd = parse_target(scratch_path)
    for dev in query_block or []:
        ins = dev.get("inserted") or {}
        if ins.get("file") == scratch_path or (ins.get("image") or {}).get("filename") == scratch_path:
            return dev
        if rbd is not None and _names_image(str(ins.get("file") or ""), rbd.pool, rbd.image):
            return dev
    return None


def _names_image(filename: str, pool: str, image: str) -> bool:
    """Whether QEMU's filename of a node (``rbd:pool/image...`` or ``json:{...}``) is the image."""
    if filename.startswith(f"rbd:{pool}/{image}"):
        return True
    return filename.startswith("json:") and f'"image": "{image}"' in filename and f'"pool": "{pool}"' in filename


def _config_bus(root: ET.Element, disk: ET.Element) -> str | None:
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


def iotune_limits(disk: ET.Element) -> dict[str, str]:
    """A disk's ``<iotune>`` keyed by QEMU's throttle options (iops-total, bps-read-max-length...)."""
    iotune = disk.find("iotune")
    out: dict[str, str] = {}
    if iotune is None:
        return out
    for name in LIMIT_RATES + LIMIT_BURSTS:
        for suffix in ("", "_length") if name in LIMIT_BURSTS else ("",):
            text = iotune.findtext(iotune_name(name) + suffix)
            if text is not None:
                out[throttle_option(name) + suffix.replace("_", "-")] = text.strip()
    return out


def applied_from_readings(readings: dict, scratch_path: str, serial: str) -> Applied:
    """What libvirt and QEMU say was applied to the disk with ``serial`` (file ``scratch_path``)."""
    try:
        root = ET.fromstring(readings.get("live_xml") or "<domain/>")
    except ET.ParseError:
        root = ET.fromstring("<domain/>")
    values: dict = {"config_source": "the live domain XML"}
    disk = next((d for d in root.findall("./devices/disk") if d.findtext("serial") == serial), None)
    if disk is not None:
        drv = disk.find("driver")
        if drv is not None:
            values.update(config_cache=drv.get("cache"), config_aio=drv.get("io"), config_format=drv.get("type"),
                          config_detect_zeroes=drv.get("detect_zeroes") or DetectZeroes.OFF.value,  # libvirt's default
                          config_discard=drv.get("discard") or Discard.IGNORE.value)
        values["config_bus"] = _config_bus(root, disk)
        values.update(throttle_readings("config_", iotune_limits(disk)))
        src = disk.find("source")
        if src is not None:
            values["volume"] = src.get("file") or src.get("dev") or src.get("name")
            if src.get("protocol") == "rbd":
                values["config_aio"] = NOT_APPLICABLE  # librbd does its own I/O: no io= on the disk
        if values["config_bus"] in (Bus.VIRTIO_SCSI.value, Bus.VIRTIO_SCSI_SHARED.value):
            ctrl = root.find("./devices/controller[@type='scsi']")
            values["controller"] = ctrl.get("model") if ctrl is not None else None
        elif values["config_bus"] == Bus.SATA.value:
            values["controller"] = "ahci"
        else:
            values["controller"] = "virtio-blk-pci"
    cpu = root.find("cpu")
    if cpu is not None:
        mode = cpu.get("mode")
        values["cpu_model"] = cpu.findtext("model") if mode == "custom" else {"maximum": "max"}.get(mode or "", mode)
        values["cpu_flags"] = tuple(
            (f.get("name", ""), "on" if f.get("policy") in ("require", "force") else "off") for f in cpu.findall("feature")
        )
    block = _scratch_block(readings.get("query_block") or [], scratch_path)
    if block is not None:
        ins = block.get("inserted") or {}
        c = ins.get("cache") or {}
        key = (bool(c.get("writeback")), bool(c.get("direct")), bool(c.get("no-flush")))
        mode = Cache.from_flags(*key)
        values["qemu_cache"] = mode.value if mode is not None else f"unknown {key}"
        values["qemu_format"] = ins.get("drv")
        values.update(throttle_readings("qemu_", qmp_limits(ins)))
    cmdline = readings.get("qemu_cmdline") or []
    if cmdline:
        args = parse_cmdline(list(cmdline))
        qemu = disk_readings(args, serial, path=scratch_path)
        values.update({k: qemu[k] for k in CMDLINE_READINGS if qemu.get(k) is not None})
        values.update(cpu_readings(args))  # the CPU as QEMU runs it, as for Proxmox
    links = {k: v for k, v in (readings.get("qom_iothread") or {}).items() if isinstance(v, str) and not v.startswith("error:")}
    if links:
        values["qemu_iothread"] = any(v.startswith("/objects/") for v in links.values())
    elif values.get("config_bus") == Bus.SATA.value:
        values["qemu_iothread"] = False  # AHCI has no iothread to ask about
    kvm = readings.get("query_kvm") or {}
    if "enabled" in kvm:
        values["accelerator"] = "kvm" if kvm["enabled"] else "tcg"
    if isinstance(readings.get("qemu_pid"), int):
        values["qemu_pid"] = readings["qemu_pid"]
    details = {k: readings.get(k) for k in ("query_block", "query_kvm", "qom_iothread", "query_iothreads", "scratch_alias")}
    return to_applied(values, native_config=readings.get("live_xml") or "", qemu_cmdline=tuple(cmdline), details=details)
