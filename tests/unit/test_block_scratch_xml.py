"""Exact libvirt XML of a scratch disk on a block device (a ZFS zvol): ``<disk type='block'>``
with ``<source dev=.../>``, every other attribute as for a file; file scratch disks unchanged."""

import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from vmbench.drivers.libvirt.xml import DomainSpec, disk_elements, domain_xml
from vmbench.scenario.model import VmConfig
from vmbench.settings import Aio, Bus, Cache, ImageFormat

ZVOL = "/dev/zvol/tank/vmbench/vmbench-r0000000a-1-scratch"
FILE = "/var/lib/vmbench/pool/vmbench-r0000000a-1-scratch.raw"
ROOT = "/var/lib/vmbench/pool/vmbench-r0000000a-1-root.qcow2"
SERIAL = "VMB0000000aS001"


def spec(kind: str = "block", path: str = ZVOL, **vm_changes) -> DomainSpec:
    return DomainSpec(
        name="vmbench-r0000000a-1", run_tag="r0000000a", vm=replace(VmConfig(), **vm_changes), domain_type="qemu",
        kernel="/img/vmlinuz", initrd="/img/initrd.img", cmdline="root=LABEL=vmbench-root rw console=ttyS0",
        root_path=ROOT, scratch_path=path, scratch_serial=SERIAL, console_log="/consoles/vmbench-r0000000a-1.log",
        cells=("baseline",), created="2026-11-21T00:00:00+0000", volumes=(ROOT, path), scratch_kind=kind,
    )


def canonical(xml: str | ET.Element) -> str:
    """Whitespace and attribute order do not matter; everything else does."""
    text = xml if isinstance(xml, str) else ET.tostring(xml, encoding="unicode")
    return ET.canonicalize(text, strip_text=True)


def scratch_of(elements: list[ET.Element]) -> ET.Element:
    """The scratch disk: the one disk with the scratch serial."""
    disks = [e for e in elements if e.tag == "disk" and e.findtext("serial") == SERIAL]
    assert len(disks) == 1
    return disks[0]


# (bus, cache, aio, iothread, format) -> the exact scratch <disk> on the zvol
BLOCK = {
    (Bus.VIRTIO_BLK, Cache.NONE, Aio.NATIVE, False, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="none" io="native" />
  <source dev="{ZVOL}" />
  <target dev="vdb" bus="virtio" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.VIRTIO_BLK, Cache.WRITEBACK, Aio.IO_URING, True, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="writeback" io="io_uring" iothread="1" />
  <source dev="{ZVOL}" />
  <target dev="vdb" bus="virtio" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.VIRTIO_SCSI, Cache.NONE, Aio.NATIVE, False, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="none" io="native" />
  <source dev="{ZVOL}" />
  <target dev="sda" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.VIRTIO_SCSI, Cache.DIRECTSYNC, Aio.THREADS, True, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="directsync" io="threads" />
  <source dev="{ZVOL}" />
  <target dev="sda" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.VIRTIO_SCSI_SHARED, Cache.NONE, Aio.NATIVE, False, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="none" io="native" />
  <source dev="{ZVOL}" />
  <target dev="sdb" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="1" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.SATA, Cache.NONE, Aio.NATIVE, False, ImageFormat.RAW): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="raw" cache="none" io="native" />
  <source dev="{ZVOL}" />
  <target dev="sda" bus="sata" />
  <serial>{SERIAL}</serial>
</disk>""",
    (Bus.SATA, Cache.WRITETHROUGH, Aio.THREADS, False, ImageFormat.QCOW2): f"""
<disk type="block" device="disk">
  <driver name="qemu" type="qcow2" cache="writethrough" io="threads" />
  <source dev="{ZVOL}" />
  <target dev="sda" bus="sata" />
  <serial>{SERIAL}</serial>
</disk>""",
}


@pytest.mark.parametrize("bus, cache, aio, iothread, fmt", list(BLOCK))
def test_block_scratch_disk_exact(bus, cache, aio, iothread, fmt):
    s = spec(bus=bus, cache=cache, aio=aio, iothread=iothread, format=fmt)
    assert canonical(scratch_of(disk_elements(s))) == canonical(BLOCK[(bus, cache, aio, iothread, fmt)])


@pytest.mark.parametrize("bus, cache, aio, iothread, fmt", list(BLOCK))
def test_block_differs_from_file_only_in_disk_type_and_source(bus, cache, aio, iothread, fmt):
    """Same settings on a file: the same <disk> but for type='file' and <source file=.../>;
    the root disk and the controller do not change with the scratch's kind."""
    vm = dict(bus=bus, cache=cache, aio=aio, iothread=iothread, format=fmt)
    block, file = disk_elements(spec(**vm)), disk_elements(spec("file", FILE, **vm))
    expected_file = BLOCK[(bus, cache, aio, iothread, fmt)].replace('type="block"', 'type="file"').replace(
        f'<source dev="{ZVOL}" />', f'<source file="{FILE}" />')
    assert canonical(scratch_of(file)) == canonical(expected_file)
    others = lambda els: [canonical(e) for e in els if e.findtext("serial") != SERIAL]  # noqa: E731
    assert others(block) == others(file)
    assert len(others(block)) == (2 if bus.is_scsi else 1)  # root disk (+ the SCSI controller)


def test_file_scratch_is_the_default_and_unchanged():
    s = replace(spec("file", FILE), scratch_kind=DomainSpec.scratch_kind)  # the dataclass default
    assert s.scratch_kind == "file"
    assert canonical(scratch_of(disk_elements(s))) == canonical(f"""
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="{FILE}" />
  <target dev="vdb" bus="virtio" />
  <serial>{SERIAL}</serial>
</disk>""")


def test_block_domain_xml_has_the_block_scratch_and_a_file_root():
    """The whole domain: only the scratch disk is a block device; the root stays a qcow2 file."""
    root = ET.fromstring(domain_xml(spec(bus=Bus.VIRTIO_BLK, cache=Cache.NONE, aio=Aio.NATIVE)))
    disks = root.findall("./devices/disk")
    assert [canonical(d) for d in disks] == [canonical(f"""
<disk type="file" device="disk">
  <driver name="qemu" type="qcow2" cache="writeback" discard="unmap" />
  <source file="{ROOT}" />
  <target dev="vda" bus="virtio" />
</disk>"""), canonical(BLOCK[(Bus.VIRTIO_BLK, Cache.NONE, Aio.NATIVE, False, ImageFormat.RAW)])]
    assert [v.text for v in root.iter("{https://vmbench.dev/xmlns/libvirt/1}volume")] == [ROOT, ZVOL]
