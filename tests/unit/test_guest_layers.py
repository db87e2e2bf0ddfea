"""The scratch disk is found by serial only; every layer's exact command sequence."""

import json

import pytest

from tests.fakes import ScriptedTransport
from vmbench.errors import GuestError
from vmbench.guest.crypto import benchmark_argv, parse_benchmark
from vmbench.guest.disk import ScratchDisk, pick_scratch
from vmbench.guest.layers import (
    StackBuilder, lvm_argv, luks_format_argv, luks_open_argv, mkfs_argv, mount_argv, partition_argv,
)
from vmbench.scenario.model import FilesystemLayer, LuksLayer, LvmLayer, PartitionLayer, Stack
from vmbench.settings import Filesystem

SERIAL = "VMB25306d18S001"


def lsblk(data_dir):
    return (data_dir / "lsblk-virtio.json").read_text()


def test_pick_scratch_by_serial(data_dir):
    disk = pick_scratch(lsblk(data_dir), SERIAL, "/dev/vda\n")
    assert disk == ScratchDisk(name="vdb", path="/dev/vdb", serial=SERIAL, size=1 << 30)


def test_pick_scratch_refuses_missing_duplicate_root_and_mounted(data_dir):
    with pytest.raises(GuestError, match="no disk with serial VMBnope"):
        pick_scratch(lsblk(data_dir), "VMBnope", "/dev/vda")
    tree = json.loads(lsblk(data_dir))
    dup = json.loads(lsblk(data_dir))
    dup["blockdevices"][0]["serial"] = SERIAL
    with pytest.raises(GuestError, match="2 disks have serial"):
        pick_scratch(json.dumps(dup), SERIAL, "/dev/vda")
    # the serial points at the root disk: refused even though it matches
    tree["blockdevices"][0]["serial"] = "ROOTSERIAL"
    with pytest.raises(GuestError, match="holds the root filesystem"):
        pick_scratch(json.dumps(tree), "ROOTSERIAL", "/dev/vda")
    mounted = json.loads(lsblk(data_dir))
    mounted["blockdevices"][1]["children"] = [{"name": "vdb1", "path": "/dev/vdb1", "type": "part", "mountpoints": ["/mnt/x"]}]
    with pytest.raises(GuestError, match="mounted at /mnt/x"):
        pick_scratch(json.dumps(mounted), SERIAL, "/dev/vda")


def test_partition_argv():
    assert partition_argv("/dev/vdb", PartitionLayer()) == [
        ["parted", "--script", "--align", "optimal", "/dev/vdb", "unit", "B", "mklabel", "gpt", "mkpart", "vmbench", "1048576", "100%"],
        ["udevadm", "settle"],
    ]


def test_lvm_linear_and_thin_argv():
    assert lvm_argv("/dev/vdb1", LvmLayer(), 1 << 30) == [
        ["pvcreate", "--yes", "/dev/vdb1"],
        ["vgcreate", "--yes", "--physicalextentsize", "4194304b", "vmbench_vg", "/dev/vdb1"],
        ["lvcreate", "--yes", "--wipesignatures", "y", "--name", "vmbench_lv", "--extents", "100%FREE", "vmbench_vg"],
        ["udevadm", "settle"],
    ]
    thin = lvm_argv("/dev/vdb", LvmLayer(thin=True), 1 << 30)
    assert thin[2] == ["lvcreate", "--yes", "--type", "thin-pool", "--name", "vmbench_pool", "--extents", "90%FREE", "vmbench_vg"]
    assert thin[3] == ["lvcreate", "--yes", "--type", "thin", "--name", "vmbench_lv", "--virtualsize", "855638016b",
                       "--thinpool", "vmbench_pool", "vmbench_vg"]


def test_luks_argv_key_on_stdin():
    layer = LuksLayer(version=2, cipher="aes-xts-plain64", key_size=512, sector_size=4096, perf_flags=("no_read_workqueue", "no_write_workqueue"))
    assert luks_format_argv("/dev/vdb", layer) == [
        "cryptsetup", "luksFormat", "--batch-mode", "--type", "luks2", "--cipher", "aes-xts-plain64", "--key-size", "512",
        "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000", "--hash", "sha256", "--sector-size", "4096",
        "--key-file", "-", "/dev/vdb",
    ]
    assert luks_open_argv("/dev/vdb", layer) == [
        "cryptsetup", "open", "--type", "luks2", "--key-file", "-", "--perf-no_read_workqueue", "--perf-no_write_workqueue",
        "/dev/vdb", "vmbench_crypt",
    ]
    luks1 = luks_format_argv("/dev/vdb", LuksLayer(version=1, key_size=256))
    assert "luks1" in luks1 and "--sector-size" not in luks1


@pytest.mark.parametrize("fs, expected", [
    (FilesystemLayer(Filesystem.EXT4), ["mkfs.ext4", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", "/dev/x"]),
    (FilesystemLayer(Filesystem.EXT3), ["mkfs.ext3", "-F", "-q", "-E", "lazy_itable_init=0,lazy_journal_init=0", "/dev/x"]),
    (FilesystemLayer(Filesystem.EXT2), ["mkfs.ext2", "-F", "-q", "/dev/x"]),
    (FilesystemLayer(Filesystem.EXT4, mkfs_options=("-O", "^has_journal", "-E", "stride=4")),
     ["mkfs.ext4", "-F", "-q", "-O", "^has_journal", "-E", "stride=4", "/dev/x"]),
    (FilesystemLayer(Filesystem.XFS), ["mkfs.xfs", "-f", "-q", "/dev/x"]),
    (FilesystemLayer(Filesystem.BTRFS), ["mkfs.btrfs", "-f", "-q", "/dev/x"]),
])
def test_mkfs_argv(fs, expected):
    assert mkfs_argv("/dev/x", fs) == expected


def test_mount_argv():
    assert mount_argv("/dev/x", FilesystemLayer(Filesystem.XFS, mount_options=("noatime", "nodiscard"))) == [
        ["mkdir", "-p", "/mnt/vmbench"], ["mount", "-t", "xfs", "-o", "noatime,nodiscard", "/dev/x", "/mnt/vmbench"]]


def fake_guest():
    return ScriptedTransport({
        ("lsblk", "--json", "--list", "--output", "PATH,TYPE", "/dev/vdb"): json.dumps(
            {"blockdevices": [{"path": "/dev/vdb", "type": "disk"}, {"path": "/dev/vdb1", "type": "part"}]}),
        ("blockdev", "--getsize64"): str(1 << 30),
        ("lsblk", "--json", "--bytes"): json.dumps({"blockdevices": [{"name": "vdb", "path": "/dev/vdb", "type": "disk", "mountpoints": [None]}]}),
        ("df",): "Avail\n900000000\n",
    })


def test_stack_builder_sequence_and_teardown():
    guest = fake_guest()
    disk = ScratchDisk("vdb", "/dev/vdb", SERIAL, 1 << 30)
    stack = Stack("s", (PartitionLayer(), LvmLayer(), LuksLayer(), FilesystemLayer(Filesystem.EXT4)))
    b = StackBuilder(guest, disk, stack)
    built = [b.build_next() for _ in stack.layers]
    assert [(x.path, x.target) for x in built] == [
        ("partition", "/dev/vdb1"),
        ("partition+lvm", "/dev/vmbench_vg/vmbench_lv"),
        ("partition+lvm+luks2", "/dev/mapper/vmbench_crypt"),
        ("partition+lvm+luks2+ext4", "/mnt/vmbench/vmbench-fio.dat"),
    ]
    luks_format = next(i for i, c in enumerate(guest.commands) if c[:2] == ["cryptsetup", "luksFormat"])
    assert guest.commands[luks_format][-1] == "/dev/vmbench_vg/vmbench_lv"
    key = guest.inputs[luks_format]
    assert key and len(key) == 64 and guest.inputs[luks_format + 1] == key
    assert all(key.hex() not in " ".join(c) for c in guest.commands)
    assert guest.commands[-1][:2] == ["mount", "-t"]
    guest.commands.clear()
    assert b.teardown() == []
    assert guest.commands[: guest.commands.index(["dmsetup", "ls"]) - 1] == [
        ["umount", "/mnt/vmbench"], ["wipefs", "--all", "--quiet", "/dev/mapper/vmbench_crypt"],
        ["cryptsetup", "close", "vmbench_crypt"], ["wipefs", "--all", "--quiet", "/dev/vmbench_vg/vmbench_lv"],
        ["lvremove", "--yes", "vmbench_vg"], ["vgremove", "--yes", "vmbench_vg"], ["pvremove", "--yes", "/dev/vdb1"],
        ["wipefs", "--all", "--quiet", "/dev/vdb1"],
        ["wipefs", "--all", "--quiet", "/dev/vdb1"], ["wipefs", "--all", "--quiet", "/dev/vdb"], ["udevadm", "settle"],
    ]


def test_failed_layer_reports_command_error():
    guest = fake_guest()
    guest.fail.append(("mkfs.xfs",))
    b = StackBuilder(guest, ScratchDisk("vdb", "/dev/vdb", SERIAL, 1 << 30), Stack("s", (FilesystemLayer(Filesystem.XFS),)))
    with pytest.raises(GuestError, match="building layer xfs of stack s failed: command failed"):
        b.build_next()


def test_teardown_reports_leftovers():
    guest = fake_guest()
    guest.answers[("lsblk", "--json", "--bytes")] = json.dumps({"blockdevices": [
        {"name": "vdb", "path": "/dev/vdb", "type": "disk", "children": [{"name": "vdb1", "path": "/dev/vdb1", "type": "part"}]}]})
    b = StackBuilder(guest, ScratchDisk("vdb", "/dev/vdb", SERIAL, 1 << 30), Stack("s", (PartitionLayer(),)))
    b.build_next()
    assert b.teardown() == ["still on the scratch disk after teardown: /dev/vdb1"]


def test_cryptsetup_benchmark_parse():
    out = "# Tests are approximate using memory only (no storage IO).\n#     Algorithm |       Key |      Encryption |      Decryption\n        aes-xts        512b      2361.9 MiB/s      2483.2 MiB/s\n"
    assert parse_benchmark(out) == (2361.9, 2483.2)
    assert parse_benchmark("    aes-xts   256b   1.5 GiB/s   N/A\n") == (1536.0, None)
    assert parse_benchmark("Cipher aes-xts-plain64 (with 512 bits key) is not available.") is None
    assert benchmark_argv("aes-xts-plain64", 512) == ["cryptsetup", "benchmark", "--cipher", "aes-xts-plain64", "--key-size", "512"]


def test_perf_flags_need_a_recent_guest_kernel():
    from vmbench.guest.layers import kernel_version

    assert kernel_version("6.1.0-50-amd64") == (6, 1) and kernel_version("5.10.0-28-amd64") == (5, 10) and kernel_version("4.19.0") == (4, 19)
    guest = fake_guest()
    guest.files["/proc/sys/kernel/osrelease"] = b"4.19.0-26-amd64\n"
    b = StackBuilder(guest, ScratchDisk("vdb", "/dev/vdb", SERIAL, 1 << 30), Stack("s", (LuksLayer(perf_flags=("no_read_workqueue",)),)))
    with pytest.raises(GuestError, match="has no dm-crypt no_read/no_write_workqueue flags"):
        b.build_next()
    guest.files["/proc/sys/kernel/osrelease"] = b"6.1.0-50-amd64\n"
    assert b.build_next().path == "luks2"
