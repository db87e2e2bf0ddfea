"""VM settings as Proxmox VE options (exact parameters), and a stored config read back."""

import pytest

from vmbench.drivers.proxmox import config as C
from vmbench.drivers.proxmox.api import encode_params
from vmbench.drivers.proxmox.driver import scratch_serial
from vmbench.errors import HypervisorError
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat

SERIAL = "VMB0a1b2c3dS001"


def disk(vm: VmConfig, storage="local-zfs", kind="zfspool", size=8 << 30) -> str:
    return C.disk_option(vm, storage, kind, size, SERIAL)


def test_disk_option_per_bus():
    # detect_zeroes and discard left to PVE (detect-zeroes on, discard ignore) unless the scenario sets them
    assert disk(VmConfig()) == "local-zfs:8,cache=none,aio=threads,serial=VMB0a1b2c3dS001"
    assert disk(VmConfig(bus=Bus.VIRTIO_BLK, iothread=True, cache=Cache.WRITEBACK, aio=Aio.IO_URING)) == \
        "local-zfs:8,cache=writeback,aio=io_uring,iothread=1,serial=VMB0a1b2c3dS001"
    assert disk(VmConfig(bus=Bus.VIRTIO_SCSI, iothread=True, aio=Aio.NATIVE, detect_zeroes=DetectZeroes.OFF)) == \
        "local-zfs:8,cache=none,aio=native,iothread=1,serial=VMB0a1b2c3dS001,detect_zeroes=0"
    assert disk(VmConfig(bus=Bus.SATA, cache=Cache.DIRECTSYNC)) == \
        "local-zfs:8,cache=directsync,aio=threads,serial=VMB0a1b2c3dS001"
    with pytest.raises(HypervisorError, match="iothread is not possible on bus sata"):
        disk(VmConfig(bus=Bus.SATA, iothread=True))


def test_disk_keys_and_controllers():
    template = {"scsi0": "local-zfs:base-9000-disk-0", "virtio1": "local-zfs:x", "scsihw": "lsi"}
    assert C.free_disk_key(Bus.VIRTIO_BLK, template) == "virtio2"
    assert C.free_disk_key(Bus.VIRTIO_SCSI, template) == "scsi1"
    assert C.free_disk_key(Bus.VIRTIO_SCSI_SHARED, template) == "scsi1"
    assert C.free_disk_key(Bus.SATA, template) == "sata1"
    assert C.scsihw(VmConfig(bus=Bus.VIRTIO_SCSI)) == "virtio-scsi-single"
    assert C.scsihw(VmConfig(bus=Bus.VIRTIO_SCSI, iothread=True)) == "virtio-scsi-single"
    assert C.scsihw(VmConfig(bus=Bus.VIRTIO_SCSI_SHARED)) == "virtio-scsi-pci"
    assert C.scsihw(VmConfig(bus=Bus.VIRTIO_BLK)) is None and C.scsihw(VmConfig(bus=Bus.SATA)) is None
    with pytest.raises(HypervisorError, match="no free sata slot"):
        C.free_disk_key(Bus.SATA, {f"sata{i}": "x" for i in range(6)})


def test_format_only_on_file_storages():
    assert disk(VmConfig(format=ImageFormat.QCOW2), "local", "dir").endswith(",format=qcow2")
    assert disk(VmConfig(), "local", "dir").endswith(",serial=VMB0a1b2c3dS001,format=raw")  # a dir storage may default to qcow2
    assert disk(VmConfig(detect_zeroes=DetectZeroes.OFF), "local", "dir").endswith(",detect_zeroes=0,format=raw")
    assert "format=" not in disk(VmConfig(), "local-lvm", "lvmthin")
    with pytest.raises(HypervisorError, match="holds raw volumes only"):
        disk(VmConfig(format=ImageFormat.QCOW2), "local-lvm", "lvmthin")
    with pytest.raises(HypervisorError, match="cannot hold qcow2"):
        disk(VmConfig(format=ImageFormat.QCOW2), "b", "btrfs")


def test_detect_zeroes_and_discard_options():
    """qemu-server's grammar: ``discard=ignore|on``, ``detect_zeroes=0|1`` (1 with discard=on is unmap)."""
    def opts(**kw):
        return disk(VmConfig(**kw)).split(f"serial={SERIAL}")[1]

    assert opts() == ""
    assert opts(detect_zeroes=DetectZeroes.OFF) == ",detect_zeroes=0"
    assert opts(detect_zeroes=DetectZeroes.ON) == ",detect_zeroes=1"
    assert opts(discard=Discard.UNMAP) == ",discard=on"
    assert opts(discard=Discard.IGNORE, detect_zeroes=DetectZeroes.ON) == ",discard=ignore,detect_zeroes=1"
    assert opts(discard=Discard.UNMAP, detect_zeroes=DetectZeroes.UNMAP) == ",discard=on,detect_zeroes=1"
    assert opts(discard=Discard.UNMAP, detect_zeroes=DetectZeroes.OFF) == ",discard=on,detect_zeroes=0"
    with pytest.raises(HypervisorError, match="qemu-server makes it unmap"):
        opts(discard=Discard.UNMAP, detect_zeroes=DetectZeroes.ON)
    assert C.vm_problems(VmConfig(discard=Discard.UNMAP, detect_zeroes=DetectZeroes.ON))[0][0].startswith(
        "detect_zeroes on with discard unmap is not possible on Proxmox")
    assert C.vm_problems(VmConfig(discard=Discard.UNMAP, detect_zeroes=DetectZeroes.UNMAP)) == []


def test_drive_zeroes_as_qemu_server_derives_them():
    """Drive.pm detect_zeroes_cmdline_option and Blockdev.pm's discard."""
    assert C.drive_zeroes({}) == ("on", "ignore")
    assert C.drive_zeroes({"detect_zeroes": "0"}) == ("off", "ignore")
    assert C.drive_zeroes({"detect_zeroes": "1"}) == ("on", "ignore")
    assert C.drive_zeroes({"discard": "on"}) == ("unmap", "unmap")
    assert C.drive_zeroes({"discard": "on", "detect_zeroes": "1"}) == ("unmap", "unmap")
    assert C.drive_zeroes({"discard": "on", "detect_zeroes": "0"}) == ("off", "unmap")
    assert C.drive_zeroes({"discard": "ignore"}) == ("on", "ignore")


def test_size_in_gib_and_serial():
    assert C.size_gib(1 << 30) == "1" and C.size_gib(8 << 30) == "8"
    assert C.size_gib(512 << 20) == "0.5" and C.size_gib(64 << 20) == "0.0625" and C.size_gib(1) == "0.0009765625"
    assert C.size_gib((1 << 30) + 1) == "1.0009765625"  # rounded up to whole MiB
    assert scratch_serial("r0a1b2c3d", 1) == SERIAL and len(SERIAL) <= 20
    assert C.serial_option("A B/C") == "A%20B%2FC"
    with pytest.raises(HypervisorError, match="longer than 20 bytes"):
        C.serial_option("X" * 21)


def test_cpu_option():
    assert C.cpu_option(CpuConfig()) == "kvm64"
    assert C.cpu_option(CpuConfig(model="x86-64-v2-AES")) == "x86-64-v2-AES"
    assert C.cpu_option(CpuConfig(mode=CpuMode.HOST_PASSTHROUGH, model=None)) == "host"
    assert C.cpu_option(CpuConfig(mode=CpuMode.MAX, model=None)) == "max"
    assert C.cpu_option(CpuConfig(aes=Feature.ON)) == "kvm64,flags=+aes"
    assert C.cpu_option(CpuConfig(model="Westmere", aes=Feature.OFF, features=(("pcid", Feature.ON),))) == \
        "Westmere,flags=-aes;+pcid"
    with pytest.raises(HypervisorError, match="does not take the CPU flag avx2") as exc:
        C.cpu_option(CpuConfig(features=(("avx2", Feature.ON),)))
    assert "pcid" in exc.value.hint and "aes" in exc.value.hint


def test_vm_options_exact_and_booleans_as_0_1():
    opts = C.vm_options(VmConfig(vcpus=4, memory_mib=2048, bus=Bus.VIRTIO_SCSI, cpu=CpuConfig(aes=Feature.ON)), kvm=False)
    assert opts == {"cores": 4, "sockets": 1, "memory": 2048, "cpu": "kvm64,flags=+aes", "kvm": False, "agent": "1",
                    "scsihw": "virtio-scsi-single"}
    sent = encode_params({**opts, "protection": False, "onboot": True, "gone": None, "command": ["a", True]})
    assert sent["kvm"] == 0 and sent["protection"] == 0 and sent["onboot"] == 1 and "gone" not in sent
    assert sent["command"] == ["a", 1]
    assert "scsihw" not in C.vm_options(VmConfig(), kvm=True) and C.vm_options(VmConfig(), kvm=True)["kvm"] is True


def test_tags_and_description():
    assert C.tags("r0a1b2c3d") == "vmbench;vmbench-r0a1b2c3d"
    text = C.description("r0a1b2c3d", 2, ("baseline", "cache=writeback"), "2025-01-01T00:00:00+0000", "0.1.0")
    assert "vmbench run r0a1b2c3d, VM 2 (cells: baseline, cache=writeback)" in text and "vmbench-run: r0a1b2c3d" in text
    assert len(C.description("r0a1b2c3d", 1, tuple("x" * 100 for _ in range(200)), "t", "v")) <= 8192


def test_vm_problems():
    bad = C.vm_problems(VmConfig(cpu=CpuConfig(features=(("avx2", Feature.ON),))))
    assert bad[0][0] == "Proxmox does not take the CPU flag(s) avx2 per VM"
    assert "qcow2 is not possible on a zfspool" in C.vm_problems(VmConfig(format=ImageFormat.QCOW2), "zfspool")[0][0]
    assert C.vm_problems(VmConfig(format=ImageFormat.QCOW2), "dir") == []
    virtio_root = {"virtio0": "local-zfs:base-9000-disk-0", "boot": "order=virtio0"}
    assert "root disk is virtio0" in C.vm_problems(VmConfig(bus=Bus.VIRTIO_SCSI_SHARED), None, virtio_root)[0][0]
    assert C.vm_problems(VmConfig(bus=Bus.VIRTIO_SCSI_SHARED), None, {"scsi0": "x", "boot": "order=scsi0"}) == []
    host = VmConfig(cpu=CpuConfig(mode=CpuMode.HOST_PASSTHROUGH, model=None))
    assert "cpu host needs KVM" in C.vm_problems(host, accelerator="tcg")[0][0]


def test_reading_a_stored_config_back():
    volid, opts = C.parse_disk("local-zfs:vm-100-disk-1,aio=native,cache=none,iothread=1,serial=VMB1,size=8G")
    assert volid == "local-zfs:vm-100-disk-1" and opts["cache"] == "none" and opts["size"] == "8G"
    assert C.volume_format("local:100/vm-100-disk-1.qcow2", {}) == "qcow2"
    assert C.volume_format("local-zfs:vm-100-disk-1", {}) == "raw"
    assert C.volume_format("x:y", {"format": "qcow2"}) == "qcow2"
    assert C.config_bus("virtio1", None) == "virtio-blk"
    assert C.config_bus("scsi1", "virtio-scsi-single") == "virtio-scsi"
    assert C.config_bus("scsi1", "virtio-scsi-pci") == "virtio-scsi-shared"
    assert C.config_bus("scsi1", None) == "scsi (lsi)"
    assert C.config_bus("sata1", "virtio-scsi-pci") == "sata"
    assert C.cpu_from_config("x86-64-v2-AES,flags=+aes;-pcid") == ("x86-64-v2-AES", (("aes", "on"), ("pcid", "off")))
    assert C.cpu_from_config("host") == ("host-passthrough", ())
    assert C.cpu_from_config(None) == ("kvm64", ())
    assert C.cpu_from_config("cputype=max") == ("max", ())
    assert C.agent_enabled("1") and C.agent_enabled("enabled=1,fstrim_cloned_disks=1") and not C.agent_enabled("0")
    assert not C.agent_enabled(None) and not C.agent_enabled("enabled=0")
    cfg = {"scsi0": "local-zfs:base-9000-disk-0/vm-100-disk-0,size=4G", "ide2": "none,media=cdrom",
           "unused0": "local-zfs:vm-100-disk-3", "boot": "order=ide2;scsi0", "digest": "abc"}
    assert C.root_disk_key(cfg) == "scsi0"
    assert C.disk_volumes(cfg) == {"scsi0": "local-zfs:base-9000-disk-0/vm-100-disk-0", "unused0": "local-zfs:vm-100-disk-3"}
    assert C.config_text({"b": 1, "a": "x", "digest": "d"}) == "a: x\nb: 1\n"
