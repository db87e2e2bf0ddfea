"""Exact libvirt XML for every axis value."""

import textwrap
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from vmbench.drivers.libvirt.xml import DomainSpec, cpu_xml, disk_elements, domain_xml, pool_xml, probe_xml, volume_xml
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat


def spec(**vm_changes) -> DomainSpec:
    return DomainSpec(
        name="vmbench-r0123abcd-1", run_tag="r0123abcd", vm=replace(VmConfig(), **vm_changes), domain_type="qemu",
        kernel="/img/vmlinuz", initrd="/img/initrd.img", cmdline="root=LABEL=vmbench-root rw console=ttyS0",
        root_path="/pool/root.qcow2", scratch_path="/pool/scratch.raw", scratch_serial="VMB0123abcdS001",
        console_log="/consoles/vmbench-r0123abcd-1.log", cells=("baseline",), created="2026-11-21T00:00:00+0000",
        volumes=("/pool/root.qcow2", "/pool/scratch.raw"),
    )


def render(elements) -> str:
    out = []
    for el in elements:
        ET.indent(el, space="  ")
        out.append(ET.tostring(el, encoding="unicode"))
    return "\n".join(out)


BASELINE = """\
<domain xmlns:vmbench="https://vmbench.dev/xmlns/libvirt/1" type="qemu">
  <name>vmbench-r0123abcd-1</name>
  <description>Created by vmbench run r0123abcd; removed by the run or by `vmbench cleanup`.</description>
  <metadata>
    <vmbench:vm>
      <vmbench:run>r0123abcd</vmbench:run>
      <vmbench:created>2026-11-21T00:00:00+0000</vmbench:created>
      <vmbench:cell>baseline</vmbench:cell>
      <vmbench:volume>/pool/root.qcow2</vmbench:volume>
      <vmbench:volume>/pool/scratch.raw</vmbench:volume>
    </vmbench:vm>
  </metadata>
  <memory unit="MiB">1024</memory>
  <vcpu placement="static">2</vcpu>
  <os>
    <type arch="x86_64" machine="pc">hvm</type>
    <kernel>/img/vmlinuz</kernel>
    <initrd>/img/initrd.img</initrd>
    <cmdline>root=LABEL=vmbench-root rw console=ttyS0</cmdline>
  </os>
  <features>
    <acpi />
    <apic />
  </features>
  <cpu mode="custom" match="exact" check="none">
    <model fallback="forbid">kvm64</model>
    <topology sockets="1" dies="1" cores="2" threads="1" />
  </cpu>
  <clock offset="utc" />
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type="file" device="disk">
      <driver name="qemu" type="qcow2" cache="writeback" discard="unmap" />
      <source file="/pool/root.qcow2" />
      <target dev="vda" bus="virtio" />
    </disk>
    <disk type="file" device="disk">
      <driver name="qemu" type="raw" cache="none" io="threads" />
      <source file="/pool/scratch.raw" />
      <target dev="vdb" bus="virtio" />
      <serial>VMB0123abcdS001</serial>
    </disk>
    <serial type="file">
      <source path="/consoles/vmbench-r0123abcd-1.log" />
      <target port="0" />
    </serial>
    <channel type="unix">
      <target type="virtio" name="org.qemu.guest_agent.0" />
    </channel>
    <memballoon model="none" />
  </devices>
</domain>
"""


def test_baseline_domain_xml_exact():
    assert domain_xml(spec()) == BASELINE


def test_kvm_domain_type_and_size():
    xml = domain_xml(replace(spec(vcpus=4, memory_mib=2048), domain_type="kvm"))
    assert '<domain xmlns:vmbench="https://vmbench.dev/xmlns/libvirt/1" type="kvm">' in xml
    assert '<memory unit="MiB">2048</memory>' in xml and '<vcpu placement="static">4</vcpu>' in xml
    assert '<topology sockets="1" dies="1" cores="4" threads="1" />' in xml


@pytest.mark.parametrize("cache", list(Cache))
def test_cache_modes(cache):
    scratch = render(disk_elements(spec(cache=cache)))
    assert f'<driver name="qemu" type="raw" cache="{cache.value}" io="threads" />' in scratch


@pytest.mark.parametrize("aio", list(Aio))
def test_aio_modes(aio):
    scratch = render(disk_elements(spec(aio=aio)))
    assert f'<driver name="qemu" type="raw" cache="none" io="{aio.value}" />' in scratch


@pytest.mark.parametrize("zeroes", [None, *DetectZeroes])
@pytest.mark.parametrize("discard", [None, *Discard])
def test_detect_zeroes_and_discard(zeroes, discard):
    """Only where the scenario sets them (else libvirt's defaults: off, ignore), on the scratch disk only."""
    scratch = render(disk_elements(spec(detect_zeroes=zeroes, discard=discard)))
    attrs = (f' discard="{discard.value}"' if discard else "") + (f' detect_zeroes="{zeroes.value}"' if zeroes else "")
    assert f'<driver name="qemu" type="raw" cache="none" io="threads"{attrs} />' in scratch
    assert '<driver name="qemu" type="qcow2" cache="writeback" discard="unmap" />' in scratch  # the root disk as always


@pytest.mark.parametrize("fmt", list(ImageFormat))
def test_scratch_format(fmt):
    assert f'type="{fmt.value}" cache="none"' in render(disk_elements(spec(format=fmt)))


ROOT_VDA = """\
<disk type="file" device="disk">
  <driver name="qemu" type="qcow2" cache="writeback" discard="unmap" />
  <source file="/pool/root.qcow2" />
  <target dev="vda" bus="virtio" />
</disk>
"""

SCRATCH = {
    (Bus.VIRTIO_BLK, False): ROOT_VDA + """\
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="/pool/scratch.raw" />
  <target dev="vdb" bus="virtio" />
  <serial>VMB0123abcdS001</serial>
</disk>""",
    (Bus.VIRTIO_BLK, True): ROOT_VDA + """\
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" iothread="1" />
  <source file="/pool/scratch.raw" />
  <target dev="vdb" bus="virtio" />
  <serial>VMB0123abcdS001</serial>
</disk>""",
    (Bus.VIRTIO_SCSI, False): ROOT_VDA + """\
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="/pool/scratch.raw" />
  <target dev="sda" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
  <serial>VMB0123abcdS001</serial>
</disk>
<controller type="scsi" index="0" model="virtio-scsi" />""",
    (Bus.VIRTIO_SCSI, True): ROOT_VDA + """\
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="/pool/scratch.raw" />
  <target dev="sda" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
  <serial>VMB0123abcdS001</serial>
</disk>
<controller type="scsi" index="0" model="virtio-scsi">
  <driver iothread="1" />
</controller>""",
    (Bus.VIRTIO_SCSI_SHARED, False): """\
<disk type="file" device="disk">
  <driver name="qemu" type="qcow2" cache="writeback" discard="unmap" />
  <source file="/pool/root.qcow2" />
  <target dev="sda" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
</disk>
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="/pool/scratch.raw" />
  <target dev="sdb" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="1" />
  <serial>VMB0123abcdS001</serial>
</disk>
<controller type="scsi" index="0" model="virtio-scsi" />""",
    (Bus.SATA, False): ROOT_VDA + """\
<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="threads" />
  <source file="/pool/scratch.raw" />
  <target dev="sda" bus="sata" />
  <serial>VMB0123abcdS001</serial>
</disk>""",
}


@pytest.mark.parametrize("bus, iothread", list(SCRATCH))
def test_bus_and_iothread_disks_exact(bus, iothread):
    assert render(disk_elements(spec(bus=bus, iothread=iothread))) == SCRATCH[(bus, iothread)]


def test_iothreads_element_only_with_iothread():
    assert "<iothreads>1</iothreads>" in domain_xml(spec(iothread=True))
    assert "<iothreads>" not in domain_xml(spec())


CPU = [
    (CpuConfig(), '<cpu mode="custom" match="exact" check="none">\n  <model fallback="forbid">kvm64</model>\n  <topology sockets="1" dies="1" cores="2" threads="1" />\n</cpu>'),
    (CpuConfig(model="qemu64", aes=Feature.ON),
     '<cpu mode="custom" match="exact" check="none">\n  <model fallback="forbid">qemu64</model>\n  <feature policy="require" name="aes" />\n  <topology sockets="1" dies="1" cores="2" threads="1" />\n</cpu>'),
    (CpuConfig(model="kvm64", aes=Feature.OFF, features=(("avx2", Feature.ON),)),
     '<cpu mode="custom" match="exact" check="none">\n  <model fallback="forbid">kvm64</model>\n  <feature policy="disable" name="aes" />\n  <feature policy="require" name="avx2" />\n  <topology sockets="1" dies="1" cores="2" threads="1" />\n</cpu>'),
    (CpuConfig(mode=CpuMode.HOST_PASSTHROUGH, model=None),
     '<cpu mode="host-passthrough" check="none">\n  <topology sockets="1" dies="1" cores="2" threads="1" />\n</cpu>'),
    (CpuConfig(mode=CpuMode.MAX, model=None, aes=Feature.OFF),
     '<cpu mode="maximum" check="none">\n  <feature policy="disable" name="aes" />\n  <topology sockets="1" dies="1" cores="2" threads="1" />\n</cpu>'),
]


@pytest.mark.parametrize("cpu, expected", CPU)
def test_cpu_xml_exact(cpu, expected):
    assert render([cpu_xml(replace(VmConfig(), cpu=cpu))]) == expected


def test_volume_xml_exact():
    assert volume_xml("vmbench-r0123abcd-1-root.qcow2", 2 << 30, "qcow2", ("/img/root.qcow2", "qcow2")) == textwrap.dedent("""\
        <volume>
          <name>vmbench-r0123abcd-1-root.qcow2</name>
          <capacity unit="bytes">2147483648</capacity>
          <allocation unit="bytes">0</allocation>
          <target>
            <format type="qcow2" />
            <permissions>
              <mode>0600</mode>
            </permissions>
          </target>
          <backingStore>
            <path>/img/root.qcow2</path>
            <format type="qcow2" />
          </backingStore>
        </volume>
        """)
    raw = volume_xml("vmbench-r0123abcd-1-scratch.raw", 1 << 30, "raw")
    assert "<backingStore>" not in raw and '<format type="raw" />' in raw


def test_pool_xml_exact():
    assert pool_xml("vmbench", "/var/lib/vmbench/pool") == textwrap.dedent("""\
        <pool type="dir">
          <name>vmbench</name>
          <target>
            <path>/var/lib/vmbench/pool</path>
            <permissions>
              <mode>0711</mode>
            </permissions>
          </target>
        </pool>
        """)


def test_probe_xml_is_tagged_kvm_without_disks():
    xml = probe_xml("vmbench-p01234567-probe", "p01234567", "/img/vmlinuz", "/c/probe.log")
    root = ET.fromstring(xml)
    assert root.get("type") == "kvm"
    assert root.find("./devices/disk") is None
    assert root.findtext("./os/cmdline") == "console=ttyS0 panic=1 root=/dev/vmbench-probe-no-root"
    assert root.findtext("on_reboot") == "destroy"
    assert root.find("./metadata/{https://vmbench.dev/xmlns/libvirt/1}vm/{https://vmbench.dev/xmlns/libvirt/1}run").text == "p01234567"
