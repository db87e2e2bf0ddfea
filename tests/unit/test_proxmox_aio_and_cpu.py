"""Proxmox evidence edge cases: a disk on a storage whose QEMU driver has no aio (librbd,
libiscsi) reads "aio: not applicable" and an aio axis there is refused at preflight; the CPU
is recorded as QEMU runs it (qemu-server's -cpu), and aes from the model itself counts.

The command lines follow qemu-server (proxmox/qemu-server: ``QemuServer.pm``
print_drive_commandline_full for PVE 8's ``-drive``, ``Blockdev.pm`` generate_file_blockdev
for PVE 9's ``-blockdev``, ``CPUConfig.pm`` get_cpu_options for ``-cpu``) and pve-storage's
drivers per storage type (each plugin's ``qemu_blockdev_options``)."""

from __future__ import annotations

import json
import re

import pytest

from tests.unit.test_proxmox_driver import make, prepare
from tests.unit.test_proxmox_minipve import MiniPve
from vmbench.drivers.proxmox.config import STORAGE_BLOCK_DRIVER, aio_axis_problem, storage_block_driver
from vmbench.drivers.proxmox.evidence import applied_from_pve
from vmbench.drivers.qemu_cmdline import (AIO_DRIVERS, NOT_APPLICABLE, cpu_readings, disk_readings, drive_protocol,
                                          model_has_aes, parse_cmdline)
from vmbench.errors import PreflightError
from vmbench.run.evidence import effective_settings, problems
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, Feature

SERIAL = "VMB0a1b2c3dS001"
RBD_PATH = "rbd:ceph-vm/vm-100-disk-1:mon_host=10.0.0.1;10.0.0.2:auth_supported=cephx:id=admin:keyring=/etc/pve/priv/ceph/ceph-vm.keyring"


def pve8_drive(file: str, aio: str = "io_uring") -> list[str]:
    """print_drive_commandline_full: ``aio=`` is added whatever the protocol."""
    return ["/usr/bin/kvm", "-id", "100",
            "-drive", f"file={file},if=none,id=drive-scsi1,cache=none,format=raw,aio={aio},detect-zeroes=on",
            "-device", f"scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1,serial={SERIAL}",
            "-cpu", "kvm64,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+lahf_lm,+sep"]


def pve9_blockdev(leaf: dict) -> list[str]:
    """generate_file_blockdev: ``aio`` only on file, host_device and host_cdrom nodes."""
    cache = {"direct": True, "no-flush": False}
    leaf = {**leaf, "node-name": "e1", "cache": cache, "detect-zeroes": "on", "discard": "ignore", "read-only": False}
    fmt = {"driver": "raw", "node-name": "f1", "cache": cache, "file": leaf, "detect-zeroes": "on", "discard": "ignore"}
    top = {"driver": "throttle", "node-name": "drive-scsi1", "throttle-group": "throttle-drive-scsi1", "file": fmt}
    return ["/usr/bin/kvm", "-id", "100", "-blockdev", json.dumps(top, separators=(",", ":")),
            "-device", f"scsi-hd,bus=virtioscsi1.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1,serial={SERIAL},write-cache=on",
            "-cpu", "qemu64,+aes,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,+pni,+popcnt,+sse4.1,+sse4.2,+ssse3"]


RBD_LEAF = {"driver": "rbd", "pool": "ceph-vm", "image": "vm-100-disk-1", "server": [{"host": "10.0.0.1", "port": "3300"}],
            "user": "admin", "auth-client-required": ["cephx"]}
ISCSI_LEAF = {"driver": "iscsi", "transport": "tcp", "portal": "10.0.0.5", "target": "iqn.2003-01.org.example:tank", "lun": 3}
KRBD_LEAF = {"driver": "host_device", "filename": "/dev/rbd-pve/fsid/ceph-vm/vm-100-disk-1", "aio": "io_uring"}


def test_storage_types_and_their_qemu_drivers():
    """pve-storage: dir/nfs/cifs/cephfs/btrfs are files, LVM/zfspool/kernel iSCSI block devices;
    rbd without krbd is librbd, iscsidirect and ZFS over iSCSI libiscsi, PVE 8's glusterfs libgfapi."""
    with_aio = [t for t, d in STORAGE_BLOCK_DRIVER.items() if d in AIO_DRIVERS]
    assert sorted(with_aio) == sorted(["dir", "nfs", "cifs", "cephfs", "btrfs", "lvm", "lvmthin", "zfspool", "iscsi"])
    assert (storage_block_driver("rbd"), storage_block_driver("rbd", True), storage_block_driver("rbd", None)) == \
        ("rbd", "host_device", None)
    assert (storage_block_driver("iscsidirect"), storage_block_driver("zfs"), storage_block_driver("glusterfs")) == \
        ("iscsi", "iscsi", "gluster")
    assert storage_block_driver("some-plugin") is None


@pytest.mark.parametrize("leaf", [RBD_LEAF, ISCSI_LEAF], ids=["librbd", "libiscsi"])
def test_pve9_blockdev_without_aio_reads_not_applicable(leaf):
    r = disk_readings(parse_cmdline(pve9_blockdev(leaf)), SERIAL, "scsi1")
    assert (r["qemu_aio"], r["protocol"], r["qemu_cache"], r["qemu_format"]) == (NOT_APPLICABLE, leaf["driver"], "none", "raw")
    krbd = disk_readings(parse_cmdline(pve9_blockdev(KRBD_LEAF)), SERIAL, "scsi1")  # krbd: a block device, aio applies
    assert (krbd["qemu_aio"], krbd["protocol"]) == ("io_uring", "host_device")


@pytest.mark.parametrize("file,protocol", [(RBD_PATH, "rbd"), ("iscsi://10.0.0.5/iqn.2003-01.org.example:tank/3", "iscsi"),
                                           ("gluster://10.0.0.7/gv0/images/100/vm-100-disk-1.raw", "gluster")])
def test_pve8_drive_aio_on_a_network_protocol_is_not_applicable(file, protocol):
    r = disk_readings(parse_cmdline(pve8_drive(file)), SERIAL, "scsi1")
    assert (r["qemu_aio"], r["protocol"]) == (NOT_APPLICABLE, protocol)  # not the aio=io_uring the -drive carries
    zvol = disk_readings(parse_cmdline(pve8_drive("/dev/zvol/rpool/data/vm-100-disk-1", "native")), SERIAL, "scsi1")
    assert (zvol["qemu_aio"], zvol["protocol"]) == ("native", "host_device")
    assert drive_protocol({"file": "/var/lib/vz/images/100/vm-100-disk-1.qcow2"}) == "file"
    assert drive_protocol({"file": "nbd:unix:/run/qemu-server/100_nbd.migrate:exportname=drive-scsi1"}) == "nbd"
    assert drive_protocol({"file": "x", "file.driver": "rbd"}) == "rbd"


def test_aio_not_applicable_is_recorded_not_compared():
    config = {"scsi1": f"ceph-vm:vm-100-disk-1,aio=native,cache=none,iothread=1,serial={SERIAL},size=4G",
              "scsihw": "virtio-scsi-single", "cpu": "x86-64-v2-AES"}
    applied = applied_from_pve(config, "scsi1", pve9_blockdev(RBD_LEAF), SERIAL, RBD_PATH)
    assert (applied.config_aio, applied.qemu_aio) == ("native", NOT_APPLICABLE)
    vm = VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, aio=Aio.NATIVE, cpu=CpuConfig(model="x86-64-v2-AES"))
    eff = effective_settings(applied, {"guest_bus": "virtio-scsi", "guest_write_cache": "write back", "guest_cpus": 2})
    assert eff["qemu_aio"] == NOT_APPLICABLE
    assert problems(vm, eff, "kvm") == []
    # the config still has to say what was asked
    other = VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, aio=Aio.THREADS, cpu=CpuConfig(model="x86-64-v2-AES"))
    assert problems(other, eff, "kvm") == ["aio: asked threads, the Proxmox VM config reports native"]


def test_aio_axis_problem_names_the_storage():
    msg, hint = aio_axis_problem("ceph-vm", "rbd", "rbd", {"native", "io_uring"}) or ("", "")
    assert msg == ("aio is varied (io_uring, native), but QEMU opens the disks of Proxmox storage ceph-vm (rbd) with its rbd "
                   "driver (librbd), which has no aio setting: every aio cell would run the same")
    assert "rbd with krbd" in hint
    assert aio_axis_problem("ceph-vm", "rbd", "rbd", {"native"}) is None  # one aio: recorded as not applicable
    assert aio_axis_problem("ceph-krbd", "rbd", "host_device", {"native", "threads"}) is None
    assert aio_axis_problem("san", "iscsidirect", "iscsi", ["native", "threads"])[0].startswith(
        "aio is varied (native, threads), but QEMU opens the disks of Proxmox storage san (iscsidirect) with its iscsi driver (libiscsi)")


def _with_storage(pve: MiniPve, sid: str, stype: str, **config) -> MiniPve:
    pve.storages[sid] = {"storage": sid, "type": stype, "content": "images", **config}
    return pve


def test_preflight_refuses_an_aio_axis_on_librbd_and_libiscsi(tmp_path):
    vms = [VmConfig(aio=Aio.NATIVE), VmConfig(aio=Aio.IO_URING)]
    for sid, stype, extra in (("ceph-vm", "rbd", {"pool": "ceph-vm", "krbd": 0}), ("ceph-lib", "rbd", {"pool": "x"}),
                              ("san", "iscsidirect", {}), ("zfs-san", "zfs", {})):
        pve = _with_storage(MiniPve(), sid, stype, **extra)
        drv = make(tmp_path, pve, cfg={"storage": sid})[0]
        with pytest.raises(PreflightError, match=re.escape(f"but QEMU opens the disks of Proxmox storage {sid} ({stype})")):
            prepare(drv, vms=vms)
    # the same axis on krbd, on a zfspool and on a directory: fine
    for sid, stype, extra in (("ceph-krbd", "rbd", {"pool": "ceph-vm", "krbd": 1}), ("local-zfs", "zfspool", {}), ("local", "dir", {})):
        pve = _with_storage(MiniPve(), sid, stype, **extra) if sid == "ceph-krbd" else MiniPve()
        prepare(make(tmp_path, pve, cfg={"storage": sid})[0], vms=vms)
    # one aio value on librbd is not an axis: it runs, and reads back as not applicable
    pve = _with_storage(MiniPve(), "ceph-vm", "rbd", pool="ceph-vm")
    prepare(make(tmp_path, pve, cfg={"storage": "ceph-vm"})[0], vms=[VmConfig(aio=Aio.NATIVE), VmConfig(aio=Aio.NATIVE, vcpus=4)])
    assert not [p for m, p, _ in pve.requests if p == "/storage"]  # krbd is read only for an aio axis


def test_preflight_warns_when_krbd_cannot_be_read(tmp_path):
    pve = _with_storage(MiniPve(), "ceph-vm", "rbd", pool="ceph-vm")
    drv = make(tmp_path, pve, cfg={"storage": "ceph-vm"})[0]
    original = pve.route

    def route(method, path, p):  # the token may list only what it may audit
        return [] if (method, path) == ("GET", "/storage") else original(method, path, p)

    pve.route = route
    progress = prepare(drv, vms=[VmConfig(aio=Aio.NATIVE), VmConfig(aio=Aio.THREADS)])
    assert any(kind == "warn" and "cannot tell whether Proxmox storage ceph-vm (rbd) gives QEMU an aio setting" in text
               for kind, text in progress.events)


# ---- the CPU as QEMU runs it --------------------------------------------------------------


def test_cpu_recorded_as_qemu_runs_it_next_to_the_config():
    """x86-64-v2-AES is a Proxmox built-in: QEMU runs qemu64 with its flags (get_cpu_options)."""
    config = {"scsi1": f"local-zfs:vm-100-disk-1,cache=none,aio=native,serial={SERIAL}", "cpu": "x86-64-v2-AES"}
    applied = applied_from_pve(config, "scsi1", pve9_blockdev(KRBD_LEAF), SERIAL, "")
    assert applied.cpu_model == "x86-64-v2-AES"
    d = applied.details
    assert (d["qemu_cpu_model"], d["qemu_cpu_aes"]) == ("qemu64", "on") and ("ssse3", "on") in d["qemu_cpu_flags"]
    eff = effective_settings(applied, {})
    assert (eff["cpu_model"], eff["qemu_cpu_model"], eff["qemu_cpu_aes"]) == ("x86-64-v2-AES", "qemu64", "on")
    # a deprecated model: the config keeps its name, QEMU runs the replacement
    argv = pve8_drive("/dev/zvol/rpool/data/vm-100-disk-1")[:-1] + ["Icelake-Server,enforce,+kvm_pv_eoi,+kvm_pv_unhalt,vendor=GenuineIntel"]
    applied = applied_from_pve({**config, "cpu": "Icelake-Client"}, "scsi1", argv, SERIAL, "")
    assert (applied.cpu_model, applied.details["qemu_cpu_model"], applied.details["qemu_cpu_aes"]) == \
        ("Icelake-Client", "Icelake-Server", "on")


def test_models_with_and_without_aes():
    # from QEMU 7.2's query-cpu-model-expansion (this machine), and Proxmox's x86-64-v* definitions
    for model in ("Westmere", "Westmere-IBRS", "SandyBridge-v2", "Haswell-noTSX", "Skylake-Client-noTSX-IBRS", "EPYC-Rome-v4",
                  "Opteron_G5", "x86-64-v2-AES", "x86-64-v3"):
        assert model_has_aes(model) is True, model
    for model in ("kvm64", "qemu64", "Nehalem", "Nehalem-IBRS", "Penryn", "Opteron_G3", "Dhyana", "x86-64-v2", "core2duo"):
        assert model_has_aes(model) is False, model
    assert (model_has_aes("host"), model_has_aes("max"), model_has_aes("max", "tcg"), model_has_aes("FutureLake")) == \
        (None, None, True, None)
    flags = lambda cpu: cpu_readings(parse_cmdline(["/usr/bin/kvm", "-cpu", cpu]))["qemu_cpu_aes"]  # noqa: E731
    assert [flags(c) for c in ("kvm64,+aes,enforce", "Westmere,enforce", "Westmere,-aes", "kvm64,aes=on", "host,+kvm_pv_eoi",
                               "kvm64,+aes,-aes")] == ["on", "on", "off", "on", None, "off"]
    assert cpu_readings(parse_cmdline(["/usr/bin/kvm", "-m", "1"])) == {}


@pytest.mark.parametrize("cpu,asked,ok", [
    ("qemu64,+aes,enforce,+kvm_pv_eoi", Feature.ON, True),       # x86-64-v2-AES with aes: on
    ("Westmere,enforce,+kvm_pv_eoi", Feature.ON, True),          # the model has it
    ("host,+kvm_pv_eoi,+kvm_pv_unhalt", Feature.ON, True),       # the host's: the guest tells
    ("kvm64,enforce,+kvm_pv_eoi,+lahf_lm,+sep", Feature.ON, False),
    ("Westmere,enforce,-aes", Feature.OFF, True),
    ("Westmere,enforce", Feature.OFF, False),                    # the model has it: not off
    ("kvm64,enforce", Feature.DEFAULT, True),
])
def test_aes_from_the_model_counts_as_present(cpu, asked, ok):
    argv = pve8_drive("/dev/zvol/rpool/data/vm-100-disk-1", "native")[:-1] + [cpu]
    applied = applied_from_pve({"scsi1": f"local-zfs:vm-100-disk-1,cache=none,aio=native,serial={SERIAL}"}, "scsi1", argv,
                               SERIAL, "")
    vm = VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.NONE, aio=Aio.NATIVE, cpu=CpuConfig(mode=CpuMode.MODEL, model="x", aes=asked))
    eff = effective_settings(applied, {"guest_bus": "virtio-scsi", "guest_write_cache": "write back"})
    aes_problems = [p for p in problems(vm, eff, "kvm") if p.startswith("cpu aes")]
    assert (aes_problems == []) is ok, aes_problems
    if not ok:
        model = cpu.split(",")[0]
        assert aes_problems == [f"cpu aes: asked {asked.value}, QEMU runs -cpu {model} {'without' if asked is Feature.ON else 'with'} aes"]
