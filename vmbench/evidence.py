"""Was each requested setting really applied?  (METHOD rule 11)

From what the hypervisor reports (live domain XML, QEMU's ``query-block``, the QEMU
command line, the iothread links) and what the guest sees (disk driver, controller, write
cache, CPU flags), work out the effective settings and list every difference from the
request.  A cell with differences is marked invalid and not measured.  Pure functions.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from .scenario.model import VmConfig
from .settings import Bus, Cache, Feature

CACHE_FLAGS = {  # (writeback, direct, no-flush) as QEMU's query-block reports them
    (True, True, False): Cache.NONE,
    (False, False, False): Cache.WRITETHROUGH,
    (True, False, False): Cache.WRITEBACK,
    (False, True, False): Cache.DIRECTSYNC,
    (True, False, True): Cache.UNSAFE,
}
GUEST_BUS = {"virtio_blk": Bus.VIRTIO_BLK, "virtio_scsi": Bus.VIRTIO_SCSI, "ahci": Bus.SATA}


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


def effective_settings(host: dict, guest_disk: dict, guest_facts: dict, scratch_path: str, serial: str) -> dict:
    """What was applied, as far as each source can tell (None: that source did not say)."""
    eff: dict = {}
    # live domain XML
    try:
        root = ET.fromstring(host.get("live_xml") or "<domain/>")
    except ET.ParseError:
        root = ET.fromstring("<domain/>")
    disk = next((d for d in root.findall("./devices/disk") if d.findtext("serial") == serial), None)
    if disk is not None:
        drv = disk.find("driver")
        tgt = disk.find("target")
        eff["xml_cache"] = drv.get("cache") if drv is not None else None
        eff["xml_aio"] = drv.get("io") if drv is not None else None
        eff["xml_format"] = drv.get("type") if drv is not None else None
        eff["xml_bus"] = tgt.get("bus") if tgt is not None else None
    eff["domain_type"] = root.get("type")
    # QEMU block layer
    block = _scratch_block(host.get("query_block") or [], scratch_path)
    if block is not None:
        ins = block.get("inserted") or {}
        c = ins.get("cache") or {}
        key = (bool(c.get("writeback")), bool(c.get("direct")), bool(c.get("no-flush")))
        eff["qemu_cache"] = CACHE_FLAGS[key].value if key in CACHE_FLAGS else f"unknown {key}"
        eff["qemu_format"] = ins.get("drv")
    # QEMU command line: aio of the scratch file's protocol node
    for node in _blockdev_args(host.get("qemu_cmdline") or []):
        if node.get("filename") == scratch_path:
            eff["qemu_aio"] = node.get("aio", "threads")
    # iothread links (QOM)
    links = {k: v for k, v in (host.get("qom_iothread") or {}).items() if isinstance(v, str) and not v.startswith("error:")}
    if links:
        eff["qemu_iothread"] = any(v.startswith("/objects/") for v in links.values())
    elif eff.get("xml_bus") == "sata":
        eff["qemu_iothread"] = False
    else:
        eff["qemu_iothread"] = None  # QEMU could not be asked: unverified, not "off"
    # accelerator
    kvm = host.get("query_kvm") or {}
    if "enabled" in kvm:
        eff["accelerator"] = "kvm" if kvm["enabled"] else "tcg"
    # the guest's view
    drv = guest_disk.get("driver")
    host_drv = guest_disk.get("scsi_host_driver")
    if drv == "virtio_blk":
        eff["guest_bus"] = Bus.VIRTIO_BLK.value
    elif drv == "sd" and host_drv in GUEST_BUS:
        bus = GUEST_BUS[host_drv]
        if bus is Bus.VIRTIO_SCSI:
            root = guest_disk.get("root") or {}
            shared = root.get("scsi_host") is not None and root.get("scsi_host") == guest_disk.get("scsi_host")
            bus = Bus.VIRTIO_SCSI_SHARED if shared else Bus.VIRTIO_SCSI
        eff["guest_bus"] = bus.value
    else:
        eff["guest_bus"] = f"unknown ({drv}/{host_drv})"
    eff["guest_write_cache"] = guest_disk.get("write_cache")
    eff["guest_aes"] = guest_facts.get("aes")
    eff["guest_ssse3"] = guest_facts.get("ssse3")
    eff["guest_pclmulqdq"] = guest_facts.get("pclmulqdq")
    eff["guest_cpus"] = guest_facts.get("cpus")
    return eff


def problems(vm: VmConfig, eff: dict, accelerator: str) -> list[str]:
    """Every difference between what was asked and what was applied."""
    out = []

    def differs(what: str, asked: object, got: object, source: str) -> None:
        if got is not None and str(got) != str(asked):
            out.append(f"{what}: asked {asked}, {source} reports {got}")

    differs("cache", vm.cache.value, eff.get("xml_cache"), "the live domain XML")
    differs("cache", vm.cache.value, eff.get("qemu_cache"), "QEMU's block layer")
    differs("aio", vm.aio.value, eff.get("xml_aio"), "the live domain XML")
    differs("aio", vm.aio.value, eff.get("qemu_aio"), "the QEMU command line")
    differs("format", vm.format.value, eff.get("qemu_format"), "QEMU's block layer")
    differs("iothread", vm.iothread, eff.get("qemu_iothread"), "QEMU's iothread links")
    differs("bus", vm.bus.value, eff.get("guest_bus"), "the guest")
    expected_wc = "write back" if vm.cache.writeback else "write through"
    differs("guest write cache", expected_wc, eff.get("guest_write_cache"), "the guest")
    if vm.cpu.aes is Feature.ON and eff.get("guest_aes") is False:
        out.append("cpu aes: asked on, the guest has no aes flag")
    if vm.cpu.aes is Feature.OFF and eff.get("guest_aes") is True:
        out.append("cpu aes: asked off, the guest has the aes flag")
    differs("vcpus", vm.vcpus, eff.get("guest_cpus"), "the guest")
    missing = [f for f in ("ssse3", "pclmulqdq") if eff.get(f"guest_{f}") is False]
    if accelerator == "tcg" and eff.get("guest_aes") and missing:
        out.append(
            f"cpu {vm.cpu.label}: the guest has aes but not {' or '.join(missing)}; under TCG Linux's AES-NI driver "
            "faults on that combination (use a model with all three, such as Westmere)"
        )
    for key, what in (("qemu_cache", "cache mode (QEMU block layer)"), ("guest_bus", "bus (as the guest sees it)"),
                      ("qemu_iothread", "iothread (QEMU's iothread links)"),
                      ("qemu_aio", "aio (QEMU command line)"), ("guest_write_cache", "write cache (as the guest sees it)")):
        if eff.get(key) is None:
            out.append(f"{what} could not be verified")
    differs("accelerator", accelerator, eff.get("accelerator"), "QEMU")
    return out
