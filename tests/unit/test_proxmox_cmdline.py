"""The QEMU command line read back: PVE 8 ``-drive``, PVE 9 nested ``-blockdev`` chains and
libvirt's linked ``-blockdev`` nodes (a real command line from this machine's libvirt log)."""

import json
import shlex
from dataclasses import replace

from vmbench.drivers.proxmox.evidence import applied_from_pve
from vmbench.drivers.qemu_cmdline import accelerator, disk_readings, parse_cmdline, qemu_cpu, split_opts
from vmbench.run.evidence import effective_settings, problems
from vmbench.scenario.model import VmConfig
from vmbench.settings import Aio, Bus, Cache, DetectZeroes, Discard

SERIAL = "VMB0a1b2c3dS001"
ZVOL = "/dev/zvol/rpool/data/vm-100-disk-1"

PVE8 = [
    "/usr/bin/kvm", "-id", "100", "-name", "vmbench-r0a1b2c3d-1,debug-threads=on", "-no-shutdown",
    "-object", "iothread,id=iothread-virtio1", "-object", "iothread,id=iothread-virtioscsi2",
    "-machine", "type=pc-i440fx-8.1+pve0", "-cpu", "kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+aes,-pcid,+sep",
    "-device", "virtio-scsi-pci,id=virtioscsi2,bus=pci.3,addr=0x3,iothread=iothread-virtioscsi2",
    "-drive", f"file={ZVOL},if=none,id=drive-virtio1,cache=none,aio=native,format=raw,detect-zeroes=off",
    "-device", f"virtio-blk-pci,drive=drive-virtio1,id=virtio1,bus=pci.0,addr=0xb,iothread=iothread-virtio1,serial={SERIAL}",
    "-drive", "file=/dev/zvol/rpool/data/vm-100-disk-2,if=none,id=drive-scsi2,cache=writeback,format=raw,aio=io_uring",
    "-device", "scsi-hd,bus=virtioscsi2.0,channel=0,scsi-id=0,lun=2,drive=drive-scsi2,id=scsi2,serial=OTHER",
    "-drive", "file=/var/lib/vz/images/100/vm-100-disk-3.qcow2,if=none,id=drive-sata1,format=qcow2,cache=unsafe",
    "-device", "ahci,id=ahci0,multifunction=on,bus=pci.0,addr=0x7",
    "-device", "ide-hd,bus=ahci0.1,drive=drive-sata1,id=sata1,serial=SATA1",
]


def pve9_blockdev(direct: bool = True, no_flush: bool = False, aio: str = "io_uring", zeroes: str = "off",
                  discard: str = "ignore") -> str:
    cache = {"direct": direct, "no-flush": no_flush}
    leaf = {"driver": "host_device", "filename": ZVOL, "node-name": "e3c1f0aa", "cache": cache, "aio": aio,
            "detect-zeroes": zeroes, "discard": discard, "read-only": False}
    fmt = {"driver": "raw", "node-name": "f3c1f0aa", "cache": cache, "file": leaf, "detect-zeroes": zeroes,
           "discard": discard, "read-only": False}
    return json.dumps({"driver": "throttle", "node-name": "drive-scsi1", "throttle-group": "throttle-drive-scsi1",
                       "file": fmt, "detect-zeroes": zeroes, "discard": discard, "read-only": False}, separators=(",", ":"))


def pve9(write_cache: str = "on", **kw) -> list[str]:
    return [
        "/usr/bin/kvm", "-id", "100", "-machine", "hpet=off,type=pc-i440fx-10.0+pve0,accel=tcg",
        "-object", '{"id":"throttle-drive-scsi1","limits":{},"qom-type":"throttle-group"}',
        "-object", "iothread,id=iothread-virtioscsi1",
        "-device", "virtio-scsi-pci,id=virtioscsi1,bus=pci.3,addr=0x2,iothread=iothread-virtioscsi1",
        "-blockdev", pve9_blockdev(**kw),
        "-device", f"scsi-hd,bus=virtioscsi1.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1,device_id=drive-scsi1,"
                   f"serial={SERIAL},write-cache={write_cache}",
        "-cpu", "x86-64-v2-AES,enforce,+kvm_pv_eoi,+kvm_pv_unhalt",
    ]


# from /var/log/libvirt/qemu/vmbench-r151e2484-2.log on this machine (libvirt 9.0, QEMU 7.2), abridged
LIBVIRT = shlex.split(r"""/usr/bin/qemu-system-x86_64 -name guest=vmbench-r151e2484-2,debug-threads=on -S
-object '{"qom-type":"secret","id":"masterKey0","format":"raw","file":"/var/lib/libvirt/qemu/domain-87-vmbench-r151e2484-2/master-key.aes"}'
-machine pc-i440fx-7.2,usb=off,dump-guest-core=off,memory-backend=pc.ram -accel tcg -cpu Westmere,aes=off -m 768
-object '{"qom-type":"memory-backend-ram","id":"pc.ram","size":805306368}' -overcommit mem-lock=off
-smp 2,sockets=1,dies=1,cores=2,threads=1 -object '{"qom-type":"iothread","id":"iothread1"}'
-display none -no-user-config -nodefaults
-device '{"driver":"virtio-scsi-pci","iothread":"iothread1","id":"scsi0","bus":"pci.0","addr":"0x2"}'
-blockdev '{"driver":"file","filename":"/var/lib/vmbench/images/debian12-8e8bcd774490/root.qcow2","node-name":"libvirt-3-storage","cache":{"direct":false,"no-flush":false},"auto-read-only":true,"discard":"unmap"}'
-blockdev '{"node-name":"libvirt-3-format","read-only":true,"discard":"unmap","cache":{"direct":false,"no-flush":false},"driver":"qcow2","file":"libvirt-3-storage","backing":null}'
-blockdev '{"driver":"file","filename":"/var/lib/vmbench/pool/vmbench-r151e2484-2-root.qcow2","node-name":"libvirt-2-storage","cache":{"direct":false,"no-flush":false},"auto-read-only":true,"discard":"unmap"}'
-blockdev '{"node-name":"libvirt-2-format","read-only":false,"discard":"unmap","cache":{"direct":false,"no-flush":false},"driver":"qcow2","file":"libvirt-2-storage","backing":"libvirt-3-format"}'
-device '{"driver":"virtio-blk-pci","bus":"pci.0","addr":"0x4","drive":"libvirt-2-format","id":"virtio-disk0","bootindex":1,"write-cache":"on"}'
-blockdev '{"driver":"file","filename":"/var/lib/vmbench/pool/vmbench-r151e2484-2-scratch.raw","aio":"threads","node-name":"libvirt-1-storage","cache":{"direct":false,"no-flush":false},"auto-read-only":true,"discard":"unmap"}'
-blockdev '{"node-name":"libvirt-1-format","read-only":false,"cache":{"direct":false,"no-flush":false},"driver":"raw","file":"libvirt-1-storage"}'
-device '{"driver":"scsi-hd","bus":"scsi0.0","channel":0,"scsi-id":0,"lun":0,"device_id":"VMB151e2484S002","drive":"libvirt-1-format","id":"scsi0-0-0-0","write-cache":"off","serial":"VMB151e2484S002"}'
-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny -msg timestamp=on""")


def test_split_opts_handles_escaped_commas():
    assert split_opts("file=/a,,b,if=none") == ["file=/a,b", "if=none"]


def test_pve8_drive_form():
    args = parse_cmdline(PVE8)
    virtio = disk_readings(args, SERIAL, "virtio1")
    assert virtio["file"] == ZVOL and virtio["device"] == "virtio-blk-pci"
    assert (virtio["qemu_cache"], virtio["qemu_aio"], virtio["qemu_format"], virtio["qemu_iothread"]) == ("none", "native", "raw", True)
    assert virtio["iothread_object"] is True
    scsi = disk_readings(args, "OTHER", "scsi2")  # iothread on its virtio-scsi-single controller
    assert (scsi["qemu_cache"], scsi["qemu_aio"], scsi["qemu_iothread"], scsi["controller"]) == ("writeback", "io_uring", True, "virtio-scsi-pci")
    sata = disk_readings(args, "SATA1", "sata1")  # no aio given: QEMU's default
    assert (sata["qemu_cache"], sata["qemu_aio"], sata["qemu_format"], sata["qemu_iothread"]) == ("unsafe", "threads", "qcow2", False)
    assert accelerator(args) == "kvm"  # /usr/bin/kvm: QEMU prefers KVM
    assert qemu_cpu(args) == ("kvm64", (("kvm_pv_eoi", "on"), ("kvm_pv_unhalt", "on"), ("aes", "on"), ("pcid", "off"), ("sep", "on")))


def test_pve8_device_found_by_drive_id_without_serial():
    argv = [a.replace(f",serial={SERIAL}", "") for a in PVE8]
    assert disk_readings(parse_cmdline(argv), SERIAL, "virtio1")["qemu_cache"] == "none"
    assert disk_readings(parse_cmdline(argv), SERIAL, None) == {}


def test_pve9_nested_blockdev_chain():
    r = disk_readings(parse_cmdline(pve9()), SERIAL, "scsi1")
    assert (r["file"], r["qemu_cache"], r["qemu_aio"], r["qemu_format"], r["qemu_iothread"]) == (ZVOL, "none", "io_uring", "raw", True)
    assert accelerator(parse_cmdline(pve9())) == "tcg"
    cases = {("off", True, False): "directsync", ("on", False, False): "writeback", ("off", False, False): "writethrough",
             ("on", False, True): "unsafe"}
    for (wc, direct, no_flush), mode in cases.items():
        got = disk_readings(parse_cmdline(pve9(write_cache=wc, direct=direct, no_flush=no_flush, aio="threads")), SERIAL, "scsi1")
        assert got["qemu_cache"] == mode and got["qemu_aio"] == "threads", (wc, direct, no_flush)


def test_libvirt_linked_blockdev_nodes():
    args = parse_cmdline(LIBVIRT)
    r = disk_readings(args, "VMB151e2484S002")
    assert r["file"] == "/var/lib/vmbench/pool/vmbench-r151e2484-2-scratch.raw"
    assert (r["qemu_cache"], r["qemu_aio"], r["qemu_format"], r["qemu_iothread"]) == ("writethrough", "threads", "raw", True)
    assert r["controller"] == "virtio-scsi-pci" and r["iothread_object"] is True
    assert accelerator(args) == "tcg"
    assert qemu_cpu(args) == ("Westmere", (("aes", "off"),))


def test_accelerator_forms():
    assert accelerator(parse_cmdline(["/usr/bin/qemu-system-x86_64", "-enable-kvm", "-m", "1"])) == "kvm"
    assert accelerator(parse_cmdline(["/usr/bin/qemu-system-x86_64", "-accel", "kvm", "-accel", "tcg"])) == "kvm"
    assert accelerator(parse_cmdline(["/usr/bin/qemu-system-x86_64", "-machine", "pc,accel=tcg"])) == "tcg"
    assert accelerator(parse_cmdline(["/usr/bin/qemu-system-x86_64", "-m", "1"])) is None


def test_applied_from_config_and_cmdline():
    config = {"scsi1": f"local-zfs:vm-100-disk-1,cache=none,aio=io_uring,iothread=1,serial={SERIAL},size=8G",
              "scsihw": "virtio-scsi-single", "cpu": "x86-64-v2-AES,flags=+aes", "kvm": "0", "digest": "x"}
    applied = applied_from_pve(config, "scsi1", pve9(), SERIAL, ZVOL, {"pve_status": {"pid": 1}})
    assert applied.config_source == "the Proxmox VM config"
    assert (applied.config_bus, applied.config_cache, applied.config_aio, applied.config_format) == ("virtio-scsi", "none", "io_uring", "raw")
    assert (applied.qemu_cache, applied.qemu_aio, applied.qemu_format, applied.qemu_iothread) == ("none", "io_uring", "raw", True)
    assert (applied.cpu_model, applied.cpu_flags, applied.accelerator) == ("x86-64-v2-AES", (("aes", "on"),), "tcg")
    assert applied.controller == "virtio-scsi-single" and applied.volume == ZVOL
    assert "digest" not in applied.native_config and applied.qemu_cmdline[0] == "/usr/bin/kvm"
    assert applied.details["pve_status"] == {"pid": 1} and "qemu_file_differs" not in applied.details
    vm = VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, aio=Aio.IO_URING, iothread=True)
    eff = {**applied.typed(), "guest_bus": "virtio-scsi", "guest_write_cache": "write back", "guest_cpus": 2}
    assert problems(vm, eff, "tcg") == []
    assert problems(VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, aio=Aio.IO_URING, iothread=True), eff, "tcg")[0] == \
        "cache: asked writeback, the Proxmox VM config reports none"


def test_applied_without_a_command_line_leaves_qemu_readings_unknown():
    applied = applied_from_pve({"virtio1": "local-zfs:vm-100-disk-1,cache=none"}, "virtio1", [], SERIAL, ZVOL)
    assert applied.config_bus == "virtio-blk" and applied.qemu_cache is None and applied.accelerator is None
    assert "qemu_cache (QEMU's block layer) could not be verified" not in str(applied)
    assert "cache (QEMU's block layer) could not be verified" in problems(VmConfig(), {**applied.typed()}, "kvm")


def test_cache_modes_are_three_flags_written_once():
    """The one table: each mode's (writeback, direct, no-flush), read back the same way by both drivers."""
    assert {m: m.flags for m in Cache} == {Cache.NONE: (True, True, False), Cache.WRITETHROUGH: (False, False, False),
                                           Cache.WRITEBACK: (True, False, False), Cache.DIRECTSYNC: (False, True, False),
                                           Cache.UNSAFE: (True, False, True)}
    assert all(Cache.from_flags(*m.flags) is m for m in Cache) and Cache.from_flags(False, False, True) is None
    assert [m.value for m in Cache if m.host_page_cache] == ["writethrough", "writeback", "unsafe"]
    assert Cache.NONE.with_write_cache(False) is Cache.DIRECTSYNC and Cache.WRITETHROUGH.with_write_cache(True) is Cache.WRITEBACK
    assert Cache.UNSAFE.guest_write_cache == "write back" and Cache.DIRECTSYNC.guest_write_cache == "write through"


def test_detect_zeroes_and_discard_from_the_command_line():
    args = parse_cmdline(PVE8)
    assert (disk_readings(args, SERIAL, "virtio1")["qemu_detect_zeroes"], disk_readings(args, SERIAL, "virtio1")["qemu_discard"]) == \
        ("off", "ignore")
    assert disk_readings(args, "OTHER", "scsi2")["qemu_detect_zeroes"] == "off"  # not given: QEMU's default
    legacy = [a.replace("detect-zeroes=off", "detect-zeroes=unmap,discard=on") for a in PVE8]
    r = disk_readings(parse_cmdline(legacy), SERIAL, "virtio1")
    assert (r["qemu_detect_zeroes"], r["qemu_discard"]) == ("unmap", "unmap")
    r = disk_readings(parse_cmdline(pve9(zeroes="unmap", discard="unmap")), SERIAL, "scsi1")
    assert (r["qemu_detect_zeroes"], r["qemu_discard"]) == ("unmap", "unmap")
    r = disk_readings(parse_cmdline(pve9(zeroes="on")), SERIAL, "scsi1")
    assert (r["qemu_detect_zeroes"], r["qemu_discard"]) == ("on", "ignore")
    # libvirt: discard=unmap on the storage node only (libvirt always sets it there): the format node drops discards
    r = disk_readings(parse_cmdline(LIBVIRT), "VMB151e2484S002")
    assert (r["qemu_detect_zeroes"], r["qemu_discard"]) == ("off", "ignore")
    # found by its file when no device names the serial
    r = disk_readings(parse_cmdline(LIBVIRT), "NOSUCH", path="/var/lib/vmbench/pool/vmbench-r151e2484-2-scratch.raw")
    assert (r["file"], r["qemu_aio"], r["qemu_format"], r["qemu_detect_zeroes"]) == \
        ("/var/lib/vmbench/pool/vmbench-r151e2484-2-scratch.raw", "threads", "raw", "off")


def test_applied_detect_zeroes_and_discard_from_config_and_cmdline():
    config = {"scsi1": f"local-zfs:vm-100-disk-1,cache=none,aio=io_uring,iothread=1,serial={SERIAL},discard=on,size=8G",
              "scsihw": "virtio-scsi-single", "cpu": "x86-64-v2-AES"}
    applied = applied_from_pve(config, "scsi1", pve9(zeroes="unmap", discard="unmap"), SERIAL, ZVOL)
    eff = {**effective_settings(applied, {}), "guest_bus": "virtio-scsi", "guest_write_cache": "write back"}
    assert (eff["config_detect_zeroes"], eff["config_discard"], eff["qemu_detect_zeroes"], eff["qemu_discard"]) == \
        ("unmap", "unmap", "unmap", "unmap")  # detect_zeroes unset with discard=on: qemu-server's unmap
    vm = VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, aio=Aio.IO_URING, iothread=True, discard=Discard.UNMAP)
    assert problems(vm, eff, "tcg") == []
    assert problems(replace(vm, detect_zeroes=DetectZeroes.OFF), eff, "tcg") == [
        "detect_zeroes: asked off, the Proxmox VM config reports unmap", "detect_zeroes: asked off, the QEMU command line reports unmap"]
