"""Reading a user's Proxmox VM through the schema-checking fake PVE (issue 18): ``read_current``
with a scenario's token, and ``read_vm`` with the driver's API client, on PVE 8.4 and 9.1.
The VM's config is the same before and after, and every request was a GET (one per read)."""

from __future__ import annotations

import copy

import pytest

from tests.fakepve.client import call, ok
from tests.unit.test_proxmox_contract import ENV, SECRET, TOKEN_ID, VERSIONS, scenario_text
from tests.fakepve import FakePve
from vmbench.drivers import read_current
from vmbench.drivers.proxmox.api import PveApi, Secret
from vmbench.drivers.proxmox.current import read_vm
from vmbench.errors import HypervisorError, UsageError
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import CpuConfig, IoLimits, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, Discard, Feature, ImageFormat

CONFIG_PATH = ("GET", "/nodes/{node}/qemu/{vmid}/config")


@pytest.fixture(params=VERSIONS)
def fake(request):
    with FakePve(version=request.param, token=(TOKEN_ID, SECRET)) as f:
        f.add_template()  # vmbench's template, beside the user's VM
        f.add_user_vm(101, "web1", disk="scsi0", disk_options="aio=native,cache=writeback,discard=on,iothread=1,iops_rd=500",
                      cpu="x86-64-v2-AES,flags=+aes", boot="order=scsi0;ide2;net0", ide2="none,media=cdrom",
                      cores=2, sockets=2, memory=4096)
        yield f


def scenario(fake, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, SECRET)
    return parse_scenario(scenario_text(fake), str(tmp_path / "s.yaml"))


def test_read_current_reads_the_vm_with_one_get_and_changes_nothing(fake, tmp_path, monkeypatch):
    s = scenario(fake, tmp_path, monkeypatch)
    before = ok(call(fake, "GET", f"/nodes/{fake.node}/qemu/101/config"))
    stored = copy.deepcopy(fake.vms[101].config)
    start = len(fake.requests)
    cur = read_current(s, "101")
    assert fake.calls()[start:] == [CONFIG_PATH]
    after = ok(call(fake, "GET", f"/nodes/{fake.node}/qemu/101/config"))
    assert after == before and fake.vms[101].config == stored
    assert {r.method for r in fake.requests} == {"GET"}
    assert not fake.tasks
    assert cur.source == "Proxmox VM 101 on node pve1" and cur.disk == "scsi0" and cur.kind == "proxmox"
    assert cur.vm == VmConfig(vcpus=4, memory_mib=4096, bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, iothread=True,
                              aio=Aio.NATIVE, cpu=CpuConfig(CpuMode.MODEL, "x86-64-v2-AES", Feature.ON),
                              format=ImageFormat.QCOW2, discard=Discard.UNMAP, limits=IoLimits(iops_rd=500))
    assert cur.disk_spec == before["scsi0"] and cur.unknown == ()
    assert cur.storage == {"storage": "local", "volume": before["scsi0"].split(",")[0]}


def test_read_vm_with_the_drivers_client_and_a_named_disk(fake, tmp_path, monkeypatch):
    s = scenario(fake, tmp_path, monkeypatch)
    api = PveApi(s.hypervisor.proxmox, Secret(SECRET))
    before = copy.deepcopy(fake.vms[101].config)
    with pytest.raises(HypervisorError, match="Proxmox VM 101 on node pve1: disk virtio0 does not exist") as e:
        read_vm(api, fake.node, 101, disk="virtio0")
    assert e.value.hint == "its disks: scsi0"
    with pytest.raises(HypervisorError, match="/nodes/pve1/qemu/4242/config"):
        read_vm(api, fake.node, 4242)
    assert read_vm(api, fake.node, 101, disk="scsi0").disk == "scsi0"
    assert fake.vms[101].config == before
    assert [m for m, _ in fake.calls()] == ["GET"] * 3


def test_a_vmid_that_is_not_a_number_is_refused_before_any_request(fake, tmp_path, monkeypatch):
    s = scenario(fake, tmp_path, monkeypatch)
    with pytest.raises(UsageError, match="'web1' is not a Proxmox VMID"):
        read_current(s, "web1")
    assert fake.requests == []
