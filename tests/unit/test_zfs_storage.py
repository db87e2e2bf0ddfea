"""ZFS host storage: exact argv, read-back, leftovers by name and property, facts parsing."""

import pytest

from vmbench.scenario.backend import Storage, StorageType
from vmbench.scenario.model import ZfsSettings
from vmbench.storage import zfs

ZVOL = ZfsSettings(volblocksize=16384, properties=(("compression", "lz4"), ("sync", "always")))
DS = ZfsSettings(recordsize=65536, properties=(("atime", "off"),))


def test_zvol_create_argv_states_every_setting():
    assert zfs.create_argv(StorageType.ZFS, "tank/vmbench/vmbench-r1a2b3c4d-1-scratch", 1 << 30, ZVOL, "r1a2b3c4d") == [
        "zfs", "create", "-V", "1073741824", "-o", "volblocksize=16384", "-o", "compression=lz4", "-o", "sync=always",
        "-o", "vmbench:run=r1a2b3c4d", "tank/vmbench/vmbench-r1a2b3c4d-1-scratch"]
    assert zfs.create_argv(StorageType.ZFS, "t/v/x", 4096, ZVOL, "r00000000", sparse=True)[:4] == ["zfs", "create", "-s", "-V"]


def test_dataset_create_argv():
    assert zfs.create_argv(StorageType.ZFS_DATASET, "tank/vmbench/vmbench-r00000001-2-scratch", 1 << 30, DS, "r00000001") == [
        "zfs", "create", "-o", "recordsize=65536", "-o", "atime=off", "-o", "vmbench:run=r00000001",
        "tank/vmbench/vmbench-r00000001-2-scratch"]


def test_names():
    assert zfs.zfs_name("tank/vmbench", "vmbench-r00000001-2-scratch.raw") == "tank/vmbench/vmbench-r00000001-2-scratch"
    assert zfs.get_argv("t/x", ["volblocksize", "compression"]) == [
        "zfs", "get", "-Hp", "-o", "property,value,source", "volblocksize,compression", "t/x"]


def test_readback_compares_every_requested_property():
    got = zfs.parse_get("volblocksize\t16384\t-\ncompression\tlz4\tlocal\nsync\tstandard\tinherited from tank\n"
                        "vmbench:run\tr00000001\tlocal\n")
    want = zfs.requested(StorageType.ZFS, ZVOL)
    assert want == {"volblocksize": "16384", "compression": "lz4", "sync": "always"}
    assert zfs.readback_problems(want, got) == ["ZFS sync reads back as standard, not always as asked"]
    assert zfs.readback_problems({"volblocksize": "8192"}, got) == ["ZFS volblocksize reads back as 16384, not 8k as asked"]
    assert zfs.readback_problems({"recordsize": "8192"}, got) == ["ZFS recordsize reads back as nothing, not 8k as asked"]


def test_leftovers_need_both_name_and_property():
    text = ("tank/vmbench\tfilesystem\t-\n"
            "tank/vmbench/vmbench-r0000000a-1-scratch\tvolume\tr0000000a\n"  # ours
            "tank/vmbench/vmbench-r0000000b-1-scratch\tvolume\t-\n"  # our name, no property: not ours
            "tank/vmbench/uservol\tvolume\tr0000000c\n"  # property but a user's name: not ours
            "tank/vmbench/vmbench-r0000000d-2-hostref\tfilesystem\tr0000000e\n"  # tags disagree
            "other/vmbench-p0000000f-3-hostref\tfilesystem\tp0000000f\n")
    assert zfs.parse_ours(text) == [("tank/vmbench/vmbench-r0000000a-1-scratch", "volume", "r0000000a"),
                                    ("other/vmbench-p0000000f-3-hostref", "filesystem", "p0000000f")]


@pytest.mark.parametrize("line,state", [
    ("  scan: scrub repaired 0B in 00:00:01 with 0 errors on Sun Nov 21 10:00:00 2026", None),
    ("  scan: scrub in progress since Sun Nov 21 10:00:00 2026", "scrub"),
    ("  scan: resilver in progress since Sun Nov 21 10:00:00 2026", "resilver"),
    ("  scan: none requested", None),
])
def test_scan_state(line, state):
    assert zfs.scan_state(f"  pool: tank\n state: ONLINE\n{line}\nconfig:\n") == state


def test_kstat_and_ashift():
    arc = "13 1 0x01 123 33456 1 2\nname                            type data\nhits                            4    100\nsize 4 2048\nc_max 4 999\n"
    assert zfs.parse_kstat(arc, ("hits", "size", "c_max")) == {"hits": 100, "size": 2048, "c_max": 999}
    assert zfs.parse_ashift("tank:\n    vdev_tree:\n        children[0]:\n            ashift: 12\n") == [12]


def test_destroy_refuses_what_is_not_named_like_ours():
    st = zfs.ZfsStorage(Storage(type=StorageType.ZFS, dataset="tank/vmbench"), host=None)  # type: ignore[arg-type]
    with pytest.raises(Exception, match="not named like a vmbench"):
        st.destroy("tank/vmbench/uservol")
