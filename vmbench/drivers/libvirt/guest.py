"""A running libvirt domain as a :class:`~vmbench.drivers.base.Guest`: its guest agent
transport, what libvirt and QEMU say it runs with (the live domain XML, ``query-block``,
``query-kvm``, the iothread links, the QEMU command line), and its scratch disk's I/O limits
lifted live for a precondition."""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from typing import Iterator, Protocol

from ...errors import HypervisorError
from ...transport.agent import GuestAgentTransport
from ..base import Applied, VmResources
from .connection import agent_command, hypervisor_errors, libvirt, monitor_command
from .evidence import applied_from_readings


class QemuProcesses(Protocol):
    """Where a domain's QEMU process is read (the driver, over the host transport)."""

    def qemu_pid(self, name: str) -> int | None: ...

    def qemu_cmdline(self, name: str) -> list[str]: ...


class LibvirtGuest:
    """A running domain: its agent transport and the hypervisor's view of it."""

    def __init__(self, driver: QemuProcesses, dom: "libvirt.virDomain", resources: VmResources, boot_seconds: float) -> None:
        self.driver = driver
        self.dom = dom
        self.name = resources.name
        self.resources = resources
        self.boot_seconds = boot_seconds
        self.transport = GuestAgentTransport(self.name, lambda cmd, timeout: agent_command(dom, cmd, timeout))

    def applied(self) -> Applied:
        """The live domain XML, QEMU's block layer and accelerator, the iothread links and
        the QEMU command line, read back and typed."""
        out: dict = {}
        with hypervisor_errors(f"reading the live configuration of {self.name}"):
            out["live_xml"] = self.dom.XMLDesc(0)
        out["query_block"] = monitor_command(self.dom, {"execute": "query-block"})
        out["query_kvm"] = monitor_command(self.dom, {"execute": "query-kvm"})
        out["query_iothreads"] = monitor_command(self.dom, {"execute": "query-iothreads"})
        alias = _scratch_alias(out["live_xml"], self.resources.scratch_serial)
        out["scratch_alias"] = alias
        qom = {}
        for path in _iothread_owners(out["live_xml"], alias):
            try:
                qom[path] = monitor_command(self.dom, {"execute": "qom-get", "arguments": {"path": path, "property": "iothread"}})
            except HypervisorError as exc:
                qom[path] = f"error: {exc}"
        out["qom_iothread"] = qom
        out["qemu_cmdline"] = self.driver.qemu_cmdline(self.name)
        out["qemu_pid"] = self.driver.qemu_pid(self.name)
        return applied_from_readings(out, self.resources.scratch_path, self.resources.scratch_serial)

    @contextlib.contextmanager
    def limits_lifted(self) -> Iterator[bool]:
        """The scratch disk's ``<iotune>`` set to no limit live (virDomainSetBlockIoTune), then
        put back as it was and read back (see :meth:`Guest.limits_lifted`)."""
        live = libvirt.VIR_DOMAIN_AFFECT_LIVE
        with hypervisor_errors(f"reading the I/O limits of {self.name}"):
            dev = _scratch_target(self.dom.XMLDesc(0), self.resources.scratch_serial)
            saved = self.dom.blockIoTune(dev, live) if dev else {}
        held = {k: v for k, v in saved.items() if k != "group_name" and v}
        if not held:
            yield False
            return
        with hypervisor_errors(f"lifting the I/O limits of {self.name} for the precondition"):
            self.dom.setBlockIoTune(dev, {k: 0 for k in saved if k != "group_name"}, live)
        try:
            yield True
        finally:
            with hypervisor_errors(f"putting back the I/O limits of {self.name} after the precondition"):
                self.dom.setBlockIoTune(dev, {k: v for k, v in saved.items() if k != "group_name" or v}, live)
                back = self.dom.blockIoTune(dev, live)
            lost = {k: (v, back.get(k)) for k, v in held.items() if back.get(k) != v}
            if lost:
                raise HypervisorError(f"{self.name}: the scratch disk's I/O limits are not back after the precondition: "
                                      + ", ".join(f"{k} {got} (set {want})" for k, (want, got) in lost.items()),
                                      "the VM is removed; nothing was measured through the wrong limits")


def _scratch_target(live_xml: str, serial: str) -> str | None:
    """The scratch disk's target device (``vdb``, ``sdb``) in the domain XML."""
    for disk in ET.fromstring(live_xml).findall("./devices/disk"):
        if disk.findtext("serial") == serial and (target := disk.find("target")) is not None:
            return target.get("dev")
    return None


def _scratch_alias(live_xml: str, serial: str) -> str | None:
    root = ET.fromstring(live_xml)
    for disk in root.findall("./devices/disk"):
        if disk.findtext("serial") == serial:
            alias = disk.find("alias")
            return alias.get("name") if alias is not None else None
    return None


def _iothread_owners(live_xml: str, scratch_alias: str | None) -> list[str]:
    """QOM paths whose 'iothread' link says where the scratch disk's I/O is handled."""
    root = ET.fromstring(live_xml)
    out = []
    for disk in root.findall("./devices/disk"):
        alias = disk.find("alias")
        target = disk.find("target")
        if alias is not None and alias.get("name") == scratch_alias and target is not None and target.get("bus") == "virtio":
            out.append(f"/machine/peripheral/{scratch_alias}")
    for ctrl in root.findall("./devices/controller[@type='scsi']"):
        alias = ctrl.find("alias")
        if alias is not None and ctrl.get("model") == "virtio-scsi":
            out.append(f"/machine/peripheral/{alias.get('name')}")
    return out
