"""The OpenZFS storage host fixture (tests/zfshost.py): a real zvol over real SSH.

Boots the ``debian12-zfs`` guest under libvirt (building the image first when it is
missing, which takes several minutes), then checks what ZFS tests rely on.
"""

from __future__ import annotations

import os

import pytest

from tests.zfshost import ZfsStorageHost


@pytest.fixture(scope="module")
def zfshost():
    if os.geteuid() != 0:
        pytest.fail("the ZFS storage host tests need root (run `make test` as root)")
    with ZfsStorageHost() as host:
        yield host


def test_zvol_properties_and_stats_over_ssh(zfshost: ZfsStorageHost) -> None:
    zvol = f"{zfshost.pool}/smoke"
    zfshost.ssh(["zfs", "create", "-V", "64M", "-o", "volblocksize=16k", "-o", "compression=lz4", zvol])
    try:
        values = zfshost.ssh(["zfs", "get", "-Hp", "-o", "value", "volblocksize,compression", zvol]).split()
        assert values == ["16384", "lz4"]
        iostat = zfshost.ssh(["zpool", "iostat", "-Hpv", zfshost.pool])
        assert iostat.split("\t")[0] == zfshost.pool
        arcstats = zfshost.ssh(["cat", "/proc/spl/kstat/zfs/arcstats"])
        assert any(line.split()[:1] == ["hits"] for line in arcstats.splitlines())
        assert zfshost.ssh(["fio", "--version"]).startswith("fio-")
    finally:
        zfshost.ssh(["zfs", "destroy", zvol])
    assert zvol not in zfshost.ssh(["zfs", "list", "-H", "-o", "name", "-t", "volume"]).split()
    assert f"port: {zfshost.port}" in zfshost.scenario_ssh_yaml()
