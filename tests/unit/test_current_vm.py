"""Reading a user's existing VM (issue 18), pure: libvirt domain XML and Proxmox VM configs to
:class:`~vmbench.drivers.existing.CurrentVm`.

The libvirt samples are a domain as virt-manager defines one (q35, host-passthrough, a qcow2
virtio disk with discard, a SATA CD-ROM), a Proxmox-like one (each SCSI disk on its own
virtio-scsi controller with an iothread, limits, x86-64-v2-AES+aes) and vmbench's own
domains (every bus, read back to the VmConfig they were built from).  The Proxmox configs
follow qemu-server's ``src/test/cfg2cmd`` corpus (8.x: ``memory: 768``, ``bootdisk``; 9.x:
``memory: current=``, ``boot: order=``, efidisk/tpmstate) and vmbench's own option strings.
"""

from __future__ import annotations

import pytest

from vmbench.drivers.libvirt.current import parse_domain
from vmbench.drivers.libvirt.xml import DomainSpec, domain_xml
from vmbench.drivers.proxmox.config import disk_option, vm_options
from vmbench.drivers.proxmox.current import parse_config
from vmbench.errors import HypervisorError
from vmbench.scenario.model import CpuConfig, IoLimits, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat

VIRT_MANAGER = """<domain type='kvm'>
  <name>web1</name>
  <uuid>0d3c8a55-6a2b-4c57-9d1e-3d0b3b6f9a11</uuid>
  <metadata>
    <libosinfo:libosinfo xmlns:libosinfo="http://libosinfo.org/xmlns/libvirt/domain/1.0">
      <libosinfo:os id="http://debian.org/debian/12"/>
    </libosinfo:libosinfo>
  </metadata>
  <memory unit='KiB'>4194304</memory>
  <currentMemory unit='KiB'>4194304</currentMemory>
  <vcpu placement='static'>4</vcpu>
  <os>
    <type arch='x86_64' machine='pc-q35-7.2'>hvm</type>
    <boot dev='hd'/>
  </os>
  <features><acpi/><apic/><vmport state='off'/></features>
  <cpu mode='host-passthrough' check='none' migratable='on'/>
  <clock offset='utc'/>
  <devices>
    <emulator>/usr/bin/qemu-system-x86_64</emulator>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' discard='unmap'/>
      <source file='/var/lib/libvirt/images/web1.qcow2'/>
      <target dev='vda' bus='virtio'/>
      <address type='pci' domain='0x0000' bus='0x04' slot='0x00' function='0x0'/>
    </disk>
    <disk type='file' device='cdrom'>
      <driver name='qemu' type='raw'/>
      <target dev='sda' bus='sata'/>
      <readonly/>
      <address type='drive' controller='0' bus='0' target='0' unit='0'/>
    </disk>
    <controller type='usb' index='0' model='qemu-xhci' ports='15'/>
    <controller type='sata' index='0'/>
    <controller type='pci' index='0' model='pcie-root'/>
    <interface type='network'><source network='default'/><model type='virtio'/></interface>
  </devices>
</domain>
"""

PROXMOX_LIKE = """<domain type='kvm'>
  <name>db1</name>
  <memory unit='MiB'>8192</memory>
  <vcpu placement='static'>4</vcpu>
  <iothreads>2</iothreads>
  <os><type arch='x86_64' machine='pc-i440fx-8.2'>hvm</type></os>
  <cpu mode='custom' match='exact' check='none'>
    <model fallback='forbid'>x86-64-v2-AES</model>
    <feature policy='require' name='aes'/>
    <feature policy='disable' name='pcid'/>
    <topology sockets='1' dies='1' cores='4' threads='1'/>
  </cpu>
  <devices>
    <disk type='block' device='disk'>
      <driver name='qemu' type='raw' cache='none' io='native' discard='unmap' detect_zeroes='unmap'/>
      <source dev='/dev/zvol/rpool/data/vm-101-disk-0'/>
      <target dev='sda' bus='scsi'/>
      <iotune>
        <read_bytes_sec>209715200</read_bytes_sec>
        <read_iops_sec>5000</read_iops_sec>
        <read_iops_sec_max>10000</read_iops_sec_max>
        <read_iops_sec_max_length>10</read_iops_sec_max_length>
      </iotune>
      <address type='drive' controller='0' bus='0' target='0' unit='0'/>
    </disk>
    <disk type='block' device='disk'>
      <driver name='qemu' type='raw' cache='writeback' io='io_uring'/>
      <source dev='/dev/zvol/rpool/data/vm-101-disk-1'/>
      <target dev='sdb' bus='scsi'/>
      <address type='drive' controller='1' bus='0' target='0' unit='0'/>
    </disk>
    <controller type='scsi' index='0' model='virtio-scsi'>
      <driver iothread='1'/>
    </controller>
    <controller type='scsi' index='1' model='virtio-scsi'>
      <driver iothread='2'/>
    </controller>
  </devices>
</domain>
"""


def spec(vm: VmConfig) -> DomainSpec:
    return DomainSpec("vmbench-r0a1b2c3d-1", "r0a1b2c3d", vm, "kvm", "/k", "/i", "console=ttyS0", "/pool/root.qcow2",
                      "/pool/scratch.raw", "VMB0a1b2c3dS001", "/log/c.log")


# ---- libvirt ------------------------------------------------------------------------------------


def test_virt_manager_domain():
    cur = parse_domain(VIRT_MANAGER, source="libvirt domain web1 (qemu:///system)", ident="web1")
    assert cur.kind == "libvirt" and cur.ident == "web1" and cur.disk == "vda"
    assert cur.vm == VmConfig(vcpus=4, memory_mib=4096, bus=Bus.VIRTIO_BLK, cache=Cache.WRITEBACK, iothread=False,
                              aio=Aio.THREADS, cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None), format=ImageFormat.QCOW2,
                              discard=Discard.UNMAP)
    assert cur.assumed == ("cache: vda states none; QEMU's default is writeback",
                           "aio: vda states no io=; QEMU's default is threads")
    assert cur.unknown == ()
    assert cur.storage == {"path": "/var/lib/libvirt/images/web1.qcow2"}
    assert cur.disk_spec.startswith('<disk type="file" device="disk">') and "/var/lib/libvirt/images/web1.qcow2" in cur.disk_spec
    assert cur.extra["cpu"] == '<cpu mode="host-passthrough" check="none" migratable="on" />'
    assert cur.extra["targets"] == "vda,sda" and cur.extra["scsi_controllers"] == "" and cur.extra["name"] == "web1"


def test_proxmox_like_domain_each_scsi_disk_on_its_own_controller():
    cur = parse_domain(PROXMOX_LIKE, source="libvirt domain db1 (qemu:///system)", ident="db1")
    assert cur.disk == "sda"
    assert cur.vm == VmConfig(
        vcpus=4, memory_mib=8192, bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, iothread=True, aio=Aio.NATIVE,
        cpu=CpuConfig(CpuMode.MODEL, "x86-64-v2-AES", Feature.ON, (("pcid", Feature.OFF),)),
        detect_zeroes=DetectZeroes.UNMAP, discard=Discard.UNMAP,
        limits=IoLimits(iops_rd=5000, mbps_rd=200, iops_rd_max=10000, burst_length=10))
    assert cur.unknown == () and cur.assumed == ()
    assert cur.storage == {"path": "/dev/zvol/rpool/data/vm-101-disk-0", "zvol": "rpool/data/vm-101-disk-0"}
    assert cur.extra["controller"] == '<controller type="scsi" index="0" model="virtio-scsi">\n      <driver iothread="1" />\n    </controller>'
    assert cur.extra["iothreads"] == "2" and cur.extra["scsi_controllers"] == "0,1"
    second = parse_domain(PROXMOX_LIKE, source="s", ident="db1", disk="sdb")
    assert (second.vm.bus, second.vm.cache, second.vm.aio, second.vm.iothread) == (Bus.VIRTIO_SCSI, Cache.WRITEBACK, Aio.IO_URING, True)
    assert second.vm.limits == IoLimits()


@pytest.mark.parametrize("vm", [
    VmConfig(),
    VmConfig(vcpus=4, memory_mib=2048, bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, iothread=True, aio=Aio.NATIVE,
             cpu=CpuConfig(CpuMode.MODEL, "kvm64", Feature.ON), detect_zeroes=DetectZeroes.UNMAP, discard=Discard.UNMAP,
             limits=IoLimits(iops_rd=500, mbps_wr=12.5, iops_rd_max=1000, burst_length=5)),
    VmConfig(bus=Bus.VIRTIO_SCSI_SHARED, cache=Cache.WRITEBACK, aio=Aio.IO_URING, format=ImageFormat.QCOW2,
             cpu=CpuConfig(CpuMode.MAX, None, Feature.OFF, (("pcid", Feature.ON),)), detect_zeroes=DetectZeroes.OFF),
    VmConfig(bus=Bus.SATA, cache=Cache.DIRECTSYNC, cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None),
             limits=IoLimits(iops=100, mbps=1.5, mbps_max=3, iops_max=200, burst_length=2)),
    VmConfig(bus=Bus.VIRTIO_BLK, iothread=True, cache=Cache.UNSAFE, discard=Discard.IGNORE),
], ids=["default", "virtio-scsi", "shared", "sata", "virtio-blk-iothread"])
def test_vmbench_domains_read_back_to_the_vm_they_were_built_from(vm):
    scratch = {Bus.VIRTIO_BLK: "vdb", Bus.VIRTIO_SCSI: "sda", Bus.VIRTIO_SCSI_SHARED: "sdb", Bus.SATA: "sda"}[vm.bus]
    cur = parse_domain(domain_xml(spec(vm)), source="s", ident="d", disk=scratch)
    assert cur.vm == vm
    assert cur.unknown == ()


def test_first_disk_is_the_default_and_cdroms_are_skipped():
    xml = VIRT_MANAGER.replace("<disk type='file' device='disk'>", "<disk type='file' device='disk' x='1'>")
    xml = xml.replace("<devices>\n", "<devices>\n    <disk type='file' device='cdrom'><target dev='hdc' bus='ide'/></disk>\n", 1)
    assert parse_domain(xml, source="s", ident="web1").disk == "vda"


def test_unknown_and_assumed_settings_are_said():
    xml = """<domain type='kvm'><name>odd</name><memory unit='GiB'>2</memory><vcpu current='2'>4</vcpu>
      <cpu mode='host-model'><feature policy='optional' name='vmx'/></cpu>
      <devices>
        <disk type='file' device='disk'><driver name='qemu' type='vmdk' cache='default'/>
          <source file='/x.vmdk'/><target dev='sda' bus='scsi'/>
          <iotune><total_iops_sec>100</total_iops_sec><total_iops_sec_max>300</total_iops_sec_max>
            <total_iops_sec_max_length>5</total_iops_sec_max_length><total_bytes_sec>1048576</total_bytes_sec>
            <total_bytes_sec_max>2097152</total_bytes_sec_max><total_bytes_sec_max_length>7</total_bytes_sec_max_length>
            <group_name>g1</group_name></iotune></disk>
        <disk type='file' device='disk'><source file='/y.img'/><target dev='hda' bus='ide'/></disk>
        <controller type='scsi' index='0' model='lsilogic'/>
      </devices></domain>"""
    cur = parse_domain(xml, source="s", ident="odd")
    assert cur.vm.memory_mib == 2048 and cur.vm.vcpus == 2
    assert cur.vm.bus is Bus.VIRTIO_SCSI and cur.vm.format is ImageFormat.RAW and cur.vm.cache is Cache.WRITEBACK
    assert cur.vm.cpu == CpuConfig(CpuMode.HOST_PASSTHROUGH, None)
    assert cur.vm.limits == IoLimits(iops=100, mbps=1, iops_max=300, mbps_max=2)
    assert cur.unknown == (
        "bus: sda is on SCSI controller 0 of model lsilogic, not virtio-scsi; read as virtio-scsi",
        "format (driver type): sda has 'vmdk', not one of raw, qcow2",
        "cpu: mode host-model (libvirt picks a named model close to the host's) is not a vmbench CPU; read as host-passthrough",
        "cpu: feature vmx has policy optional, neither forced on nor off",
        "vcpus: 2 of 4 vCPUs are online (<vcpu current=...>); read as 2",
        "burst_length: the bursts last different times (5, 7 s); vmbench has one burst_length",
        "iotune: <group_name>g1</group_name> is not a vmbench limit",
    )
    ide = parse_domain(xml, source="s", ident="odd", disk="hda")
    assert ide.vm.bus is Bus.SATA
    assert ide.unknown[0] == "bus: hda is on bus ide, not one vmbench measures (virtio-blk, virtio-scsi, virtio-scsi-shared, sata); read as sata"
    assert "format: hda states no driver type; read as raw" in ide.assumed


def test_no_cpu_element_reads_as_qemu64():
    xml = "<domain><name>a</name><memory>1048576</memory><vcpu>1</vcpu><devices><disk><target dev='vda' bus='virtio'/></disk></devices></domain>"
    cur = parse_domain(xml, source="s", ident="a")
    assert cur.vm.cpu == CpuConfig(CpuMode.MODEL, "qemu64") and cur.vm.memory_mib == 1024 and cur.vm.vcpus == 1
    assert "cpu: the domain has no <cpu> element; QEMU's default model is qemu64" in cur.assumed


def test_libvirt_errors_name_the_domain_and_the_disk():
    with pytest.raises(HypervisorError, match=r"libvirt domain web1 \(qemu:///system\) has no disk with target vdz") as e:
        parse_domain(VIRT_MANAGER, source="libvirt domain web1 (qemu:///system)", ident="web1", disk="vdz")
    assert e.value.hint == "its disks: vda"
    with pytest.raises(HypervisorError, match="sda is a cdrom, not a disk"):
        parse_domain(VIRT_MANAGER, source="s", ident="web1", disk="sda")
    with pytest.raises(HypervisorError, match="the domain XML cannot be read"):
        parse_domain("<domain>", source="s", ident="x")
    with pytest.raises(HypervisorError, match=r"s has no disk \(device='disk'\)"):
        parse_domain("<domain><devices/></domain>", source="s", ident="x")


# ---- Proxmox ------------------------------------------------------------------------------------

#: PVE 8.x style (qemu-server cfg2cmd "simple1"-like): legacy bootdisk, virtio-scsi-pci, qcow2 on dir
PVE8_SIMPLE = {
    "bootdisk": "scsi0", "cores": 3, "ide2": "none,media=cdrom", "memory": 768, "name": "simple",
    "net0": "virtio=A2:C0:43:77:08:A0,bridge=vmbr0", "numa": 0, "ostype": "l26",
    "scsi0": "local:8006/vm-8006-disk-0.qcow2,discard=on,size=104858K", "scsihw": "virtio-scsi-pci", "sockets": 1,
}
#: PVE 9.x style: boot order, virtio-scsi-single, memory as a property string, efidisk and TPM
PVE9_ZFS = {
    "boot": "order=scsi0;ide2;net0", "cores": 4, "sockets": 2, "cpu": "x86-64-v2-AES,flags=+aes;-pcid", "memory": "current=8192",
    "efidisk0": "local-zfs:vm-101-disk-0,efitype=4m,pre-enrolled-keys=1,size=1M",
    "tpmstate0": "local-zfs:vm-101-disk-2,size=4M,version=v2.0", "ide2": "local:iso/debian-12.iso,media=cdrom,size=628M",
    "scsi0": "local-zfs:vm-101-disk-1,aio=native,cache=writeback,discard=on,iothread=1,iops_rd=500,iops_rd_max=1000,"
             "iops_rd_max_length=5,mbps_wr=12.5,ssd=1,size=32G",
    "scsihw": "virtio-scsi-single", "machine": "q35", "ostype": "l26", "digest": "0123abcd",
}


def test_pve8_simple_config():
    cur = parse_config(PVE8_SIMPLE, vmid=8006, node="pve1")
    assert cur.source == "Proxmox VM 8006 on node pve1" and cur.kind == "proxmox" and cur.ident == "8006"
    assert cur.disk == "scsi0" and cur.disk_spec == PVE8_SIMPLE["scsi0"]
    assert cur.vm == VmConfig(vcpus=3, memory_mib=768, bus=Bus.VIRTIO_SCSI_SHARED, cache=Cache.NONE, iothread=False,
                              aio=Aio.IO_URING, cpu=CpuConfig(CpuMode.MODEL, "kvm64"), format=ImageFormat.QCOW2,
                              discard=Discard.UNMAP)
    assert cur.assumed == ("cache: scsi0 states none; Proxmox's default is none (O_DIRECT)",
                           "aio: scsi0 states none; Proxmox's default is io_uring (native or threads on LVM, CIFS and "
                           "krbd storages when the cache is not direct)",
                           "cpu: the VM states no cpu; Proxmox's default is kvm64")
    assert cur.unknown == ()
    assert cur.storage == {"storage": "local", "volume": "local:8006/vm-8006-disk-0.qcow2"}
    assert cur.extra == {"scsihw": "virtio-scsi-pci", "bootdisk": "scsi0", "cores": "3", "sockets": "1", "keys": "ide2,scsi0"}


def test_pve9_config_with_limits_cpu_flags_efidisk_and_tpm():
    cur = parse_config(PVE9_ZFS, vmid="101", node="pve1")
    assert cur.disk == "scsi0"
    assert cur.vm == VmConfig(
        vcpus=8, memory_mib=8192, bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, iothread=True, aio=Aio.NATIVE,
        cpu=CpuConfig(CpuMode.MODEL, "x86-64-v2-AES", Feature.ON, (("pcid", Feature.OFF),)), format=ImageFormat.RAW,
        discard=Discard.UNMAP, limits=IoLimits(iops_rd=500, mbps_wr=12.5, iops_rd_max=1000, burst_length=5))
    assert cur.unknown == () and cur.assumed == ()
    assert cur.storage == {"storage": "local-zfs", "volume": "local-zfs:vm-101-disk-1"}
    assert cur.extra["keys"] == "ide2,scsi0" and cur.extra["sockets"] == "2"


@pytest.mark.parametrize("config, disk", [
    ({"boot": "order=virtio1;net0;scsi4;ide2", "ide2": "none,media=cdrom", "scsi4": "local:8006/vm-8006-disk-0.qcow2,size=1G",
      "virtio0": "local:8006/vm-8006-disk-0.qcow2,iothread=1,size=1G", "virtio1": "local:8006/vm-8006-disk-1.qcow2,size=1G"}, "virtio1"),
    ({"boot": "order=ide2;net0", "ide2": "none,media=cdrom", "sata1": "local-lvm:vm-1-disk-1,size=1G",
      "virtio0": "local-lvm:vm-1-disk-0,size=1G"}, "virtio0"),
    ({"efidisk0": "local:100/vm-100-disk-1.qcow2,size=128K", "scsi15": "local:100/vm-100-disk-2.qcow2,size=1G"}, "scsi15"),
    ({"sata2": "local-lvm:vm-1-disk-1,size=1G", "sata0": "local-lvm:vm-1-disk-0,size=1G"}, "sata0"),
], ids=["boot-order", "order-without-disk", "only-scsi15", "sata0"])
def test_the_default_disk(config, disk):
    assert parse_config(config, vmid=100, node="pve1").disk == disk


def test_virtio_blk_iothread_and_detect_zeroes():
    cur = parse_config({"virtio0": "local-lvm:vm-100-disk-0,detect_zeroes=0,discard=ignore,iothread=1,size=8G"}, vmid=100, node="n")
    assert (cur.vm.bus, cur.vm.iothread, cur.vm.detect_zeroes, cur.vm.discard) == (Bus.VIRTIO_BLK, True, DetectZeroes.OFF, Discard.IGNORE)
    on = parse_config({"virtio0": "local-lvm:vm-100-disk-0,detect_zeroes=1,size=8G"}, vmid=100, node="n")
    assert (on.vm.detect_zeroes, on.vm.discard) == (DetectZeroes.ON, None)


def test_proxmox_unknown_settings_are_said():
    config = {"cpu": "host,level=30,flags=+md-clear;+pdpe1gb;-hv-tlbflush", "memory": 768, "cores": 2, "vcpus": 1,
              "scsi0": "lvm-store:vm-8006-disk-0,iothread=1,bps_rd=1000,size=8G", "ide0": "local:100/vm-100-disk-1.raw,size=1G"}
    cur = parse_config(config, vmid=8006, node="pve1")
    assert cur.vm.bus is Bus.VIRTIO_SCSI_SHARED and cur.vm.iothread is False
    assert cur.vm.cpu == CpuConfig(CpuMode.HOST_PASSTHROUGH, None, Feature.DEFAULT,
                                   (("hv-tlbflush", Feature.OFF), ("md-clear", Feature.ON), ("pdpe1gb", Feature.ON)))
    assert cur.unknown == (
        "bus: scsi0 is on SCSI controller lsi (the default), not virtio-scsi-single or virtio-scsi-pci; read as virtio-scsi-shared",
        "iothread: scsi0 has iothread=1, which Proxmox ignores with scsihw lsi (it needs virtio-scsi-single); read as off",
        "cpu: level=30 is not a vmbench axis",
        "vcpus: 1 of 2 vCPUs are online (vcpus:); read as 2",
        "bps_rd: scsi0 has bps_rd=1000 (bytes/s), which qemu-server does not apply",
    )
    ide = parse_config(config, vmid=8006, node="pve1", disk="ide0")
    assert ide.vm.bus is Bus.SATA and ide.unknown[0].startswith("bus: ide0 is an IDE disk")


def test_proxmox_errors_name_the_vm_and_its_disks():
    with pytest.raises(HypervisorError, match="Proxmox VM 8006 on node pve1: disk virtio3 does not exist") as e:
        parse_config(PVE8_SIMPLE, vmid=8006, node="pve1", disk="virtio3")
    assert e.value.hint == "its disks: scsi0"
    with pytest.raises(HypervisorError, match="disk ide2 is a CD-ROM or empty"):
        parse_config(PVE8_SIMPLE, vmid=8006, node="pve1", disk="ide2")
    with pytest.raises(HypervisorError, match="disk efidisk0 is not a bus disk"):
        parse_config(PVE9_ZFS, vmid=101, node="pve1", disk="efidisk0")
    with pytest.raises(HypervisorError, match=r"Proxmox VM 100 on node pve1 has no disk"):
        parse_config({"efidisk0": "local:100/vm-100-disk-0.raw,size=528K", "ide2": "none,media=cdrom"}, vmid=100, node="pve1")


@pytest.mark.parametrize("vm", [
    VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, iothread=True, aio=Aio.NATIVE, cpu=CpuConfig(CpuMode.MODEL, "x86-64-v2-AES"),
             detect_zeroes=DetectZeroes.OFF),
    VmConfig(vcpus=4, memory_mib=4096, bus=Bus.VIRTIO_BLK, cache=Cache.WRITEBACK, aio=Aio.IO_URING, discard=Discard.UNMAP,
             detect_zeroes=DetectZeroes.UNMAP, cpu=CpuConfig(CpuMode.MODEL, "kvm64", Feature.ON, (("pcid", Feature.OFF),)),
             limits=IoLimits(iops_wr=300, mbps_rd=50.5, iops_wr_max=600, mbps_rd_max=100, burst_length=3)),
    VmConfig(bus=Bus.SATA, cache=Cache.UNSAFE, aio=Aio.THREADS, cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None), format=ImageFormat.QCOW2),
    VmConfig(bus=Bus.VIRTIO_SCSI_SHARED, cache=Cache.DIRECTSYNC, cpu=CpuConfig(CpuMode.MAX, None), limits=IoLimits(iops=1000, mbps=20)),
], ids=["virtio-scsi", "virtio-blk-limits", "sata-qcow2", "shared"])
def test_vmbench_proxmox_configs_read_back_to_the_vm_they_were_built_from(vm):
    key = {Bus.VIRTIO_BLK: "virtio1", Bus.SATA: "sata1"}.get(vm.bus, "scsi1")
    config = {**vm_options(vm, kvm=True), key: disk_option(vm, "local", "dir", 8 << 30, "VMB0a1b2c3dS001").replace(
        "local:8", f"local:100/vm-100-disk-1.{vm.format.value}")}
    config = {k: (int(v) if isinstance(v, bool) else v) for k, v in config.items()}
    cur = parse_config(config, vmid=100, node="pve1", disk=key)
    assert cur.vm == vm
    assert cur.unknown == ()
