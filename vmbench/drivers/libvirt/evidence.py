"""libvirt and QEMU readings -> :class:`~vmbench.drivers.base.Applied` (pure).

The live domain XML says what libvirt configured; QEMU's ``query-block`` says which cache
mode and format its block layer uses, the command line which aio the scratch file's node
has, the QOM ``iothread`` links whether an iothread serves the disk, ``query-kvm`` which
accelerator runs.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from ...settings import Bus, Cache
from ..base import Applied

CACHE_FLAGS = {  # (writeback, direct, no-flush) as QEMU's query-block reports them
    (True, True, False): Cache.NONE,
    (False, False, False): Cache.WRITETHROUGH,
    (True, False, False): Cache.WRITEBACK,
    (False, True, False): Cache.DIRECTSYNC,
    (True, False, True): Cache.UNSAFE,
}


def _scratch_block(query_block: list, scratch_path: str) -> dict | None:
    for dev in query_block or []:
        ins = dev.get("inserted") or {}
        if ins.get("file") == scratch_path or (ins.get("image") or {}).get("filename") == scratch_path:
            return dev
    return None


def _blockdev_args(cmdline: list[str]) -> list[dict]:
    out = []
    for i, arg in enumerate(cmdline):
        if arg == "-blockdev" and i + 1 < len(cmdline):
            try:
                out.append(json.loads(cmdline[i + 1]))
            except ValueError:
                pass
    return out


def _config_bus(root: ET.Element, disk: ET.Element) -> str | None:
    tgt = disk.find("target")
    bus = tgt.get("bus") if tgt is not None else None
    if bus == "virtio":
        return Bus.VIRTIO_BLK.value
    if bus == "sata":
        return Bus.SATA.value
    if bus == "scsi":
        others = [d for d in root.findall("./devices/disk") if d is not disk and d.find("target") is not None]
        shared = any(d.find("target").get("bus") == "scsi" for d in others)
        return (Bus.VIRTIO_SCSI_SHARED if shared else Bus.VIRTIO_SCSI).value
    return bus


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
            values.update(config_cache=drv.get("cache"), config_aio=drv.get("io"), config_format=drv.get("type"))
        values["config_bus"] = _config_bus(root, disk)
        src = disk.find("source")
        if src is not None:
            values["volume"] = src.get("file") or src.get("dev")
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
        values["qemu_cache"] = CACHE_FLAGS[key].value if key in CACHE_FLAGS else f"unknown {key}"
        values["qemu_format"] = ins.get("drv")
    for node in _blockdev_args(readings.get("qemu_cmdline") or []):
        if node.get("filename") == scratch_path:
            values["qemu_aio"] = node.get("aio", "threads")
    links = {k: v for k, v in (readings.get("qom_iothread") or {}).items() if isinstance(v, str) and not v.startswith("error:")}
    if links:
        values["qemu_iothread"] = any(v.startswith("/objects/") for v in links.values())
    elif values.get("config_bus") == Bus.SATA.value:
        values["qemu_iothread"] = False  # AHCI has no iothread to ask about
    kvm = readings.get("query_kvm") or {}
    if "enabled" in kvm:
        values["accelerator"] = "kvm" if kvm["enabled"] else "tcg"
    details = {k: readings.get(k) for k in ("query_block", "query_kvm", "qom_iothread", "query_iothreads", "scratch_alias")}
    return Applied(native_config=readings.get("live_xml") or "", qemu_cmdline=tuple(readings.get("qemu_cmdline") or ()),
                   details=details, **values)
