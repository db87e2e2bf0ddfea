"""ZFS storage in scenarios: the storage section, storage axes, host-only scenarios, clear errors."""

import pytest

from vmbench.errors import ScenarioError
from vmbench.run.plan import make_plan
from vmbench.scenario import parse_scenario
from vmbench.scenario.axes import settings_of
from vmbench.scenario.backend import StorageType
from vmbench.settings import DriverName

JOBS = "jobs:\n  - {name: w, rw: randwrite, bs: 4k, size: 64M, runtime: 5s}\n"
HOST_ONLY = "name: z\nhost_only: true\nhypervisor: {ssh: {host: zfs1.example.org, port: 2222}}\n"


def parse(text):
    return parse_scenario(text + JOBS, "t.yaml")


def error(text):
    with pytest.raises(ScenarioError) as exc:
        parse(text)
    return exc.value.message


def test_zvol_storage_states_volblocksize_and_properties():
    s = parse("name: z\nstorage: {type: zfs, dataset: rpool/vmbench, sparse: false, "
              "properties: {compression: lz4, sync: standard, primarycache: all, logbias: latency}}\n")
    assert s.storage.type is StorageType.ZFS and s.storage.dataset == "rpool/vmbench" and s.storage.zfs_pool == "rpool"
    assert s.baseline.zfs.volblocksize == 16384  # stated even when the scenario does not: never ZFS's own default
    assert settings_of(s.baseline)["compression"] == "lz4" and settings_of(s.baseline)["volblocksize"] == "16k"


def test_dataset_storage_and_recordsize_axis_with_format():
    s = parse("name: z\nstorage: {type: zfs-dataset, dataset: tank/vm, recordsize: 64k}\n"
              "mode: factorial\nvary: {recordsize: [16k, 128k], format: [raw, qcow2]}\n")
    plan = make_plan(s)
    assert [c.name for c in s.cells][:2] == ["baseline", "recordsize=16k,format=raw"]
    # every recordsize gets its own host reference, stored under the first cell on it
    refs = [(b.seq, name) for b, name in plan.host_references()]
    assert len(refs) == 3
    summary = plan.summary()
    assert {c["name"]: c["host_cell"] for c in summary["cells"]}["recordsize=16k,format=qcow2"] == "recordsize=16k,format=raw"


@pytest.mark.parametrize("text,message", [
    ("storage: {type: zfs}\n", "storage.dataset: is required"),
    ("storage: {type: zfs, dataset: tank}\n", "is a pool's root dataset"),
    ("storage: {type: zfs, dataset: tank/v, recordsize: 64k}\n", "recordsize: applies to datasets"),
    ("storage: {type: zfs-dataset, dataset: tank/v, volblocksize: 64k}\n", "volblocksize: applies to zvols"),
    ("storage: {type: zfs, dataset: tank/v, volblocksize: 3k}\n", "volblocksize is a power of two"),
    ("storage: {type: zfs, dataset: tank/v, properties: {compresion: lz4}}\n", "compresion"),
    ("storage: {type: zfs, dataset: tank/v, properties: {compression: fast}}\n", "'fast' is not a value of compression"),
    ("storage: {type: zfs, dataset: tank/v, properties: {atime: 'off'}}\n", "atime does not apply to zvols"),
    ("storage: {type: dir, dataset: tank/v}\n", "applies to ZFS storage"),
    ("vary: {compression: [lz4]}\n", "compression applies to ZFS storage, but storage.type is dir"),
    ("storage: {type: zfs, dataset: tank/v}\nvary: {format: [qcow2]}\n", "format qcow2 is not possible on a zvol"),
])
def test_errors_name_the_key(text, message):
    assert message in error("name: z\n" + text)


def test_host_only_scenario():
    s = parse(HOST_ONLY + "storage: {type: zfs, dataset: tank/vmbench}\nmode: factorial\n"
              "vary: {volblocksize: [8k, 64k], compression: ['off', lz4]}\n")
    assert s.host_only and s.hypervisor.driver is DriverName.NONE and s.hypervisor.ssh.port == 2222
    plan = make_plan(s)
    steps = plan.steps()
    assert all(st.side == "host" for st in steps) and len(steps) == len(plan.boots) == 5
    assert [st.cell for st in steps] == [c.name for c in s.cells]
    assert plan.summary()["cells"][1]["settings"] == {"volblocksize": "8k", "compression": "off"}


@pytest.mark.parametrize("text,message", [
    ("storage: {type: dir}\n", "host_only: measures host storage variants, which needs ZFS storage"),
    ("storage: {type: zfs, dataset: t/v}\nvary: {bus: [sata]}\n", "changes bus, a VM setting"),
    ("storage: {type: zfs, dataset: t/v}\nvm: {cache: writeback}\n", "vm: does not apply to a host_only scenario"),
])
def test_host_only_errors(text, message):
    assert message in error(HOST_ONLY + text)


def test_host_only_refuses_a_driver():
    assert "a host_only scenario runs no VM" in error("name: z\nhost_only: true\nhypervisor: {driver: libvirt}\n"
                                                      "storage: {type: zfs, dataset: t/v}\n")


BUSTER = "jobs:\n  - {profile: cache-buster, runtime: 5s}\n"


def test_the_cache_buster_is_sized_from_the_arc_or_guest_ram_whichever_is_larger():
    from vmbench.fio.profiles import cache_buster_size
    from vmbench.run.preflight import cache_buster_refusal

    assert cache_buster_size(2 << 30, 8 << 30) == (32 << 30, "4 x max(largest VM's memory 2g, ARC c_max 8g) = 32g")
    assert cache_buster_size(2 << 30, None) == (8 << 30, "4 x max(largest VM's memory 2g, ARC c_max not stated) = 8g")
    big = parse_scenario("name: z\nvm: {memory: 1G}\nstorage: {type: zfs, dataset: rpool/vmbench, arc_max: 3G, scratch_size: 20G}\n"
                         + BUSTER, "t.yaml")
    assert big.storage.arc_max == 3 << 30 and big.jobs[0].size == 12 << 30
    small = parse_scenario("name: z\nvm: {memory: 1G}\nstorage: {type: zfs, dataset: rpool/vmbench, scratch_size: 20G}\n"
                           + BUSTER, "t.yaml")
    assert small.jobs[0].size == 4 << 30
    # the run refuses a default-sized cache-buster the host's ARC could hold, and says what to state
    msg, hint = cache_buster_refusal(small, (3 << 30) - 1000, "zfs1")
    assert msg.startswith("the ARC on zfs1 may grow to 3.0G (c_max), larger than the cache-buster's basis (cache-buster: 4 x max(")
    assert hint == "state it: storage.arc_max: 3g (the working set becomes 12.0G), or set the job's size"
    assert cache_buster_refusal(small, 1 << 30, "zfs1") is None and cache_buster_refusal(big, 3 << 30, "zfs1") is None
    assert cache_buster_refusal(small, None, "zfs1") is None
    mine = parse_scenario("name: z\nstorage: {type: zfs, dataset: rpool/vmbench, scratch_size: 20G}\n"
                          "jobs:\n  - {profile: cache-buster, size: 1G, runtime: 5s}\n", "t.yaml")
    assert cache_buster_refusal(mine, 8 << 30, "zfs1") is None  # the job's own size is the user's choice
    assert "applies to ZFS storage" in error("name: z\nstorage: {type: dir, arc_max: 1G}\n")
