"""libvirt and QEMU readings -> :class:`~vmbench.drivers.base.Applied` (pure).

The live domain XML says what libvirt configured (the I/O limits: the scratch disk's
``<iotune>``); QEMU's ``query-block`` says which cache mode and format its block layer uses
and which I/O limits its throttling applies (libvirt sets them with block_set_io_throttle,
not on the command line), the command line (read as for Proxmox, by
:mod:`vmbench.drivers.qemu_cmdline`) which aio, detect-zeroes and discard the scratch disk's
nodes have and which CPU model and flags QEMU runs, the QOM ``iothread`` links whether an iothread serves the disk, ``query-kvm``
which accelerator runs.  Each axis's row of libvirt's codec table (:mod:`.codec`) takes its
readings from them.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ..base import Applied
from ...fio.rbd import parse_target
from ..qemu_cmdline import disk_readings, find_disk, parse_cmdline, to_applied
from .codec import CODECS, LiveDomain, QemuView


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


def applied_from_readings(readings: dict, scratch_path: str, serial: str) -> Applied:
    """What libvirt and QEMU say was applied to the disk with ``serial`` (file ``scratch_path``):
    each axis's readings as its row of libvirt's codec table reads them."""
    try:
        root = ET.fromstring(readings.get("live_xml") or "<domain/>")
    except ET.ParseError:
        root = ET.fromstring("<domain/>")
    disk = next((d for d in root.findall("./devices/disk") if d.findtext("serial") == serial), None)
    live = LiveDomain(root, disk)
    values: dict = {"config_source": "the live domain XML"}
    for codec in CODECS:
        values.update(codec.config(live))
    src = disk.find("source") if disk is not None else None
    if src is not None:
        values["volume"] = src.get("file") or src.get("dev") or src.get("name")
    block = _scratch_block(readings.get("query_block") or [], scratch_path)
    cmdline = readings.get("qemu_cmdline") or []
    args = parse_cmdline(list(cmdline)) if cmdline else None
    qemu = QemuView(block=(block.get("inserted") or {}) if block is not None else None,
                    cmdline=disk_readings(args, serial, path=scratch_path) if args is not None else {},
                    disk=find_disk(args, serial, path=scratch_path) if args is not None else None, args=args,
                    iothread_links=readings.get("qom_iothread") or {}, config_bus=values.get("config_bus"))
    for codec in CODECS:
        values.update(codec.qemu(qemu))
    kvm = readings.get("query_kvm") or {}
    if "enabled" in kvm:
        values["accelerator"] = "kvm" if kvm["enabled"] else "tcg"
    if isinstance(readings.get("qemu_pid"), int):
        values["qemu_pid"] = readings["qemu_pid"]
    details = {k: readings.get(k) for k in ("query_block", "query_kvm", "qom_iothread", "query_iothreads", "scratch_alias")}
    return to_applied(values, native_config=readings.get("live_xml") or "", qemu_cmdline=tuple(cmdline), details=details)
