"""Apply snippets (issue 18): the exact commands and XML that put recommended settings on a
user's VM, keeping everything else of its disk; vmbench never runs them."""

from __future__ import annotations

import pytest

from tests.unit.test_current_vm import PROXMOX_LIKE, PVE9_ZFS, VIRT_MANAGER
from vmbench.advice.apply import snippets
from vmbench.scenario.axes import vm_with
from vmbench.scenario.model import parse_cpu_label
from vmbench.advice.model import Snippet
from vmbench.drivers.libvirt.current import parse_domain
from vmbench.drivers.proxmox.current import parse_config
from vmbench.errors import UsageError
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import CpuMode, Feature

NEXT_PVE = "takes effect at the VM's next start (shut it down, then start it; a reboot inside the guest keeps the running QEMU)"
NEXT_VIRSH = ("takes effect at the domain's next start (virsh shutdown, then virsh start; a reboot inside the guest keeps "
              "the running QEMU)")
EDIT = f"opens the domain's XML in an editor: put in the elements below, each in place of the one it replaces; {NEXT_VIRSH}"
RENAME = ("the guest sees the disk on another bus, so its name changes ({}): make sure /etc/fstab and the bootloader name "
          "it by UUID or label (and a Windows guest has the driver of the new bus) before the switch")


def pve():
    return parse_config(PVE9_ZFS, vmid=101, node="pve1")


def web1():
    return parse_domain(VIRT_MANAGER, source="libvirt domain web1 (qemu:///system)", ident="web1")


# ---- Proxmox ------------------------------------------------------------------------------------


def test_proxmox_disk_options_change_and_the_others_are_kept():
    assert snippets({"cache": "none", "aio": "io_uring", "iothread": True}, pve()) == (
        Snippet("proxmox", "qm set 101 --scsi0 local-zfs:vm-101-disk-1,aio=io_uring,cache=none,discard=on,iothread=1,"
                           "iops_rd=500,iops_rd_max=1000,iops_rd_max_length=5,mbps_wr=12.5,ssd=1,size=32G",
                f"Proxmox VM 101 on node pve1: scsi0 keeps its other options; {NEXT_PVE}"),)


def test_settings_the_vm_already_has_give_nothing():
    assert snippets({"cache": "writeback", "aio": "native", "iothread": True, "bus": "virtio-scsi"}, pve()) == ()


def test_proxmox_bus_change_moves_the_disk_key_and_the_boot_order():
    assert snippets({"bus": "virtio-blk"}, pve()) == (
        Snippet("proxmox", "qm set 101 --delete scsi0",
                "first detach scsi0: its volume stays, as unusedN, and is attached again as virtio0 below"),
        Snippet("proxmox", "qm set 101 --virtio0 local-zfs:vm-101-disk-1,aio=native,cache=writeback,discard=on,iothread=1,"
                           "iops_rd=500,iops_rd_max=1000,iops_rd_max_length=5,mbps_wr=12.5,size=32G --boot 'order=virtio0;ide2;net0'",
                "Proxmox VM 101 on node pve1: scsi0 keeps its other options; ssd dropped: virtio-blk disks have no ssd option; "
                + RENAME.format("/dev/sdX -> /dev/vdX") + f"; {NEXT_PVE}"),
    )


def test_proxmox_virtio_to_scsi_sets_the_controller():
    cur = parse_config({"bootdisk": "virtio0", "virtio0": "local-lvm:vm-100-disk-0,size=8G", "scsi0": "local-lvm:vm-100-disk-1,size=8G",
                        "scsihw": "lsi", "sockets": 1, "cores": 2}, vmid=100, node="pve1")
    got = snippets({"bus": "virtio-scsi", "iothread": True}, cur)
    assert [s.text for s in got] == [
        "qm set 100 --delete virtio0",
        "qm set 100 --scsi1 local-lvm:vm-100-disk-0,size=8G,iothread=1 --scsihw virtio-scsi-single --boot order=scsi1",
    ]
    assert "scsihw is VM-wide: every SCSI disk of the VM gets the virtio-scsi-single controller" in got[1].note


def test_proxmox_cpu_vcpus_memory_and_format():
    assert snippets({"cpu": "host-passthrough", "vcpus": 4, "memory_mib": 4096, "format": "qcow2"}, pve()) == (
        Snippet("proxmox", "qm set 101 --cpu host --cores 2 --memory 4096",
                f"Proxmox VM 101 on node pve1: scsi0 keeps its other options; {NEXT_PVE}"),
        Snippet("proxmox", "qm disk move 101 scsi0 local-zfs --format qcow2",
                "a volume's format changes only by copying it: this writes a qcow2 copy (qcow2 needs a file storage: "
                "dir, nfs, cifs) and keeps the old volume as unusedN (add --delete 1 to remove it)"),
    )


def test_proxmox_cpu_flags_and_limits_use_the_drivers_grammar():
    got = snippets({"cpu": "kvm64+aes-pcid", "iops_rd": 800, "mbps_rd": 100.5, "burst_length": 10}, pve(), vmid="101")
    assert got[0].text == ("qm set 101 --scsi0 local-zfs:vm-101-disk-1,aio=native,cache=writeback,discard=on,iothread=1,"
                           "iops_rd=800,iops_rd_max=1000,iops_rd_max_length=10,mbps_wr=12.5,ssd=1,size=32G,mbps_rd=100.5 "
                           "--cpu 'kvm64,flags=+aes;-pcid'")


def test_proxmox_without_a_current_vm_has_a_placeholder_and_a_note():
    got = snippets({"bus": "virtio-scsi", "cache": "none", "iothread": True, "aio": "native", "detect_zeroes": "unmap",
                    "discard": "unmap", "iops_rd": 500, "iops_rd_max": 1000, "burst_length": 5})
    assert got[0] == Snippet(
        "proxmox", "qm set VMID --scsi0 '<storage>:<volume>,cache=none,aio=native,iothread=1,discard=on,detect_zeroes=1,"
                   "iops_rd=500,iops_rd_max=1000,iops_rd_max_length=5' --scsihw virtio-scsi-single",
        "replace <storage>:<volume> with the disk's volume and keep its other options (size=..., ssd=..., backup=...) as "
        "`qm config VMID` shows them; scsihw is VM-wide: every SCSI disk of the VM gets the virtio-scsi-single "
        f"controller; {NEXT_PVE}")
    assert [s.kind for s in got] == ["proxmox", "libvirt", "libvirt", "libvirt", "libvirt"]
    assert got[1] == Snippet("libvirt", "virsh edit NAME", EDIT + "; NAME is the domain's name (virsh list --all)")
    assert got[2].text == """<disk type="file" device="disk">
  <driver name="qemu" type="raw" cache="none" io="native" discard="unmap" detect_zeroes="unmap" />
  <source file="/path/to/disk.img" />
  <target dev="sda" bus="scsi" />
  <iotune>
    <read_iops_sec>500</read_iops_sec>
    <read_iops_sec_max>1000</read_iops_sec_max>
    <read_iops_sec_max_length>5</read_iops_sec_max_length>
  </iotune>
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
</disk>"""
    assert got[3].text == '<controller type="scsi" index="0" model="virtio-scsi">\n  <driver iothread="1" />\n</controller>'
    assert got[4] == Snippet("libvirt", "<iothreads>1</iothreads>",
                             "in <domain> (top level), if it has no <iothreads>: the iothread the SCSI controller runs in")


# ---- libvirt ------------------------------------------------------------------------------------


def test_libvirt_driver_attributes_change_and_the_disk_keeps_its_source_and_address():
    assert snippets({"cache": "none", "aio": "native", "iothread": True}, web1()) == (
        Snippet("libvirt", "virsh edit web1", EDIT),
        Snippet("libvirt", """<disk type="file" device="disk">
  <driver name="qemu" type="qcow2" discard="unmap" cache="none" io="native" iothread="1" />
  <source file="/var/lib/libvirt/images/web1.qcow2" />
  <target dev="vda" bus="virtio" />
  <address type="pci" domain="0x0000" bus="0x04" slot="0x00" function="0x0" />
</disk>""", f"replaces the <disk> of vda in libvirt domain web1 (qemu:///system): its source and other children are kept; {NEXT_VIRSH}"),
        Snippet("libvirt", "<iothreads>1</iothreads>", "in <domain> (top level), if it has no <iothreads>: the iothread the disk runs in"),
    )


def test_libvirt_bus_change_gets_a_free_name_its_own_controller_and_the_rename_note():
    got = snippets({"bus": "virtio-scsi", "iothread": True}, web1())
    assert got[1] == Snippet("libvirt", """<disk type="file" device="disk">
  <driver name="qemu" type="qcow2" discard="unmap" />
  <source file="/var/lib/libvirt/images/web1.qcow2" />
  <target dev="sdb" bus="scsi" />
  <address type="drive" controller="0" bus="0" target="0" unit="0" />
</disk>""", "replaces the <disk> of vda in libvirt domain web1 (qemu:///system): its source and other children are kept; "
             + RENAME.format("/dev/vdX -> /dev/sdX") + f"; {NEXT_VIRSH}")
    assert got[2] == Snippet("libvirt", '<controller type="scsi" index="0" model="virtio-scsi">\n  <driver iothread="1" />\n</controller>',
                             "a new SCSI controller 0 in <devices>, for this disk alone (one controller per disk)")
    assert len(got) == 4 and got[3].text == "<iothreads>1</iothreads>"


def test_libvirt_cpu_limits_vcpus_and_memory():
    got = snippets({"cpu": "kvm64+aes", "iops": 500, "vcpus": 2, "memory_mib": 2048}, web1())
    assert [s.text for s in got[2:]] == [
        """<cpu mode="custom" match="exact" check="none">
  <model fallback="forbid">kvm64</model>
  <feature policy="require" name="aes" />
  <topology sockets="1" dies="1" cores="2" threads="1" />
</cpu>""", '<vcpu placement="static">2</vcpu>', '<memory unit="MiB">2048</memory>']
    assert "<iotune>\n    <total_iops_sec>500</total_iops_sec>\n  </iotune>\n  <address" in got[1].text
    assert got[2].note == "replaces the domain's <cpu> element (CPU kvm64+aes, topology 1 socket of 2 cores)"
    assert got[3].note == "replaces <vcpu>"


def test_libvirt_shared_bus_reuses_the_controller_and_drops_its_iothread():
    cur = parse_domain(PROXMOX_LIKE, source="libvirt domain db1 (qemu:///system)", ident="db1")
    got = snippets({"bus": "virtio-scsi-shared", "iothread": False}, cur)
    assert "<address" not in got[1].text and '<target dev="sda" bus="scsi" />' in got[1].text
    assert got[2] == Snippet("libvirt", '<controller type="scsi" index="0" model="virtio-scsi" />', "replaces SCSI controller 0")


# ---- ZFS ----------------------------------------------------------------------------------------


def test_zfs_properties_on_the_vms_zvol_and_a_new_zvol_for_volblocksize():
    cur = parse_domain(PROXMOX_LIKE, source="libvirt domain db1 (qemu:///system)", ident="db1")
    assert snippets({"compression": "lz4", "recordsize": "1m", "volblocksize": "64k"}, cur) == (
        Snippet("zfs", "zfs set compression=lz4 rpool/data/vm-101-disk-0",
                "run on the host; recordsize left out: it is a dataset property, and this disk is a zvol (its block size "
                "is volblocksize); compression applies to blocks written from now on; data already on disk keeps its old ones"),
        Snippet("zfs", "zfs create -V '<size>' -b 64k rpool/data/vm-101-disk-0-64k",
                "volblocksize is fixed when a zvol is created: 64k needs a new zvol and a copy of the disk; <size>: the "
                "old zvol's (zfs get -H -o value volsize rpool/data/vm-101-disk-0); add -s for a sparse zvol"),
        Snippet("zfs", "qemu-img convert -p -n -f raw -O raw /dev/zvol/rpool/data/vm-101-disk-0 /dev/zvol/rpool/data/vm-101-disk-0-64k",
                "with the VM shut down: copies the disk; then point the disk's <source dev=...> at "
                "/dev/zvol/rpool/data/vm-101-disk-0-64k (virsh edit) and destroy the old zvol once the VM runs from the new one"),
    )


def test_proxmox_volblocksize_is_a_storage_entry_and_a_disk_move():
    got = snippets({"sync": "standard", "volblocksize": "16k", "bus": "virtio-blk"}, pve())
    assert [s.text for s in got[2:]] == [
        "zfs set sync=standard '<pool>/vm-101-disk-1'",
        "pvesm add zfspool local-zfs-16k --pool '<pool>' --blocksize 16k --content images",
        "qm disk move 101 virtio0 local-zfs-16k --delete 1",
    ]
    assert got[2].note == "run on the host; <pool>: the pool of storage local-zfs (its pool: in /etc/pve/storage.cfg)"
    assert got[3].note.startswith("volblocksize is fixed when a zvol is created: 16k needs a new zvol")
    assert "pvesm set local-zfs --blocksize 16k" in got[3].note


def test_zfs_set_is_given_once_without_a_current_vm():
    got = snippets({"compression": "zstd"})
    assert got == (Snippet("zfs", "zfs set compression=zstd DATASET",
                           "run on the host; DATASET: the zvol or dataset of the VM's disk (zfs list); compression applies "
                           "to blocks written from now on; data already on disk keeps its old ones"),)


# ---- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize("label, cpu", [
    ("kvm64", CpuConfig(CpuMode.MODEL, "kvm64")),
    ("host-passthrough", CpuConfig(CpuMode.HOST_PASSTHROUGH, None)),
    ("max-aes", CpuConfig(CpuMode.MAX, None, Feature.OFF)),
    ("x86-64-v2-AES", CpuConfig(CpuMode.MODEL, "x86-64-v2-AES")),
    ("x86-64-v2-AES+aes", CpuConfig(CpuMode.MODEL, "x86-64-v2-AES", Feature.ON)),
    ("qemu64-aes+pcid", CpuConfig(CpuMode.MODEL, "qemu64", Feature.OFF, (("pcid", Feature.ON),))),
    ("Haswell-noTSX+aes-spec-ctrl+md-clear", CpuConfig(CpuMode.MODEL, "Haswell-noTSX", Feature.ON,
                                                       (("md-clear", Feature.ON), ("spec-ctrl", Feature.OFF)))),
])
def test_cpu_labels_read_back(label, cpu):
    assert parse_cpu_label(label) == cpu
    assert parse_cpu_label(cpu.label) == cpu


def test_bad_settings_are_named():
    with pytest.raises(UsageError, match="setting cache: 'fast' is not one of"):
        vm_with(VmConfig(), {"cache": "fast"})
    with pytest.raises(UsageError, match="setting iops: 0 is not a number above 0"):
        snippets({"iops": 0})
    with pytest.raises(UsageError, match="cannot apply setting.s. colour: vmbench applies bus, cache"):
        snippets({"colour": "red"})


def test_settings_back_to_the_default_remove_the_option():
    got = snippets({"iops_rd": "none", "iops_rd_max": None, "discard": "hypervisor default"}, pve())
    assert got[0].text == ("qm set 101 --scsi0 local-zfs:vm-101-disk-1,aio=native,cache=writeback,iothread=1,"
                           "mbps_wr=12.5,ssd=1,size=32G")
    xml = snippets({"discard": "hypervisor default"}, web1())[1].text
    assert '<driver name="qemu" type="qcow2" />' in xml
    assert snippets({"compression": "ZFS default"}, parse_domain(PROXMOX_LIKE, source="s", ident="db1")) == (
        Snippet("zfs", "zfs inherit compression rpool/data/vm-101-disk-0",
                "run on the host: compression back to its inherited or default value"),)
