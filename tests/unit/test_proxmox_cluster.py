"""The cluster inventory and its refusals (vmbench/drivers/proxmox/cluster.py), pure: rows in
the shapes PVE 8.4 and 9.1 answer with, problems naming the node and what is needed; and the
VMIDs held for the drivers of one run (vmids.py)."""

from __future__ import annotations

import threading

import pytest

from vmbench.drivers.proxmox import vmids
from vmbench.drivers.proxmox.cluster import (SHARED_TYPES, config_shared, memory_problem, node_problem, quorum_problem,
                                             read_inventory, storage_problem, template_problem, template_volumes)
from vmbench.drivers.proxmox.errors import PveApiError

NODES = [{"node": "pve1", "status": "online"}, {"node": "pve2", "status": "online"}, {"node": "pve3", "status": "offline"}]
STATUS = [{"type": "cluster", "id": "cluster", "name": "c", "nodes": 3, "quorate": 1, "version": 4},
          {"type": "node", "id": "node/pve1", "name": "pve1", "online": 1, "nodeid": 1},
          {"type": "node", "id": "node/pve2", "name": "pve2", "online": 1, "nodeid": 2},
          {"type": "node", "id": "node/pve3", "name": "pve3", "online": 0, "nodeid": 3}]


def storage_rows(shared_key: bool) -> list[dict]:
    rows = []
    for node in ("pve1", "pve2"):
        for sid, ptype, shared in (("local", "dir", 0), ("local-zfs", "zfspool", 0), ("ceph-vm", "rbd", 1), ("nfs1", "dir", 1)):
            row = {"id": f"storage/{node}/{sid}", "type": "storage", "storage": sid, "node": node, "status": "available",
                   "plugintype": ptype}
            if shared_key:
                row["shared"] = shared
            rows.append(row)
    return rows + [{"id": "node/pve1", "type": "node", "node": "pve1", "maxmem": 16 << 30, "mem": 10 << 30, "status": "online"}]


CONFIG = [{"storage": "local", "type": "dir"}, {"storage": "local-zfs", "type": "zfspool"},
          {"storage": "ceph-vm", "type": "rbd"}, {"storage": "nfs1", "type": "dir", "shared": 1}]


@pytest.mark.parametrize("shape", ["9.1 rows", "8.4 rows + storage config"])
def test_shared_comes_from_the_rows_or_the_storage_configuration(shape):
    inv = read_inventory(NODES, STATUS, storage_rows(shape == "9.1 rows"), None if shape == "9.1 rows" else CONFIG)
    assert {sid: inv.shared(sid) for sid in ("local", "local-zfs", "ceph-vm", "nfs1", "nope")} == {
        "local": False, "local-zfs": False, "ceph-vm": True, "nfs1": True, "nope": None}
    assert inv.quorate is True and inv.clustered and inv.online() == ["pve1", "pve2"]
    assert inv.nodes["pve1"].free_mem == 6 << 30 and inv.nodes["pve2"].free_mem is None


def test_config_shared_follows_pve_storage():
    assert {t for t in ("rbd", "nfs", "cifs", "cephfs", "zfs", "iscsi", "pbs") if config_shared({"type": t}, "")} == {
        "rbd", "nfs", "cifs", "cephfs", "zfs", "iscsi", "pbs"} <= SHARED_TYPES
    assert not config_shared({"type": "zfspool"}, "") and not config_shared(None, "lvmthin")
    assert config_shared({"type": "dir", "shared": 1}, "") and config_shared(None, "rbd")


def test_a_standalone_node_has_no_quorum_to_lose():
    inv = read_inventory([{"node": "pve1", "status": "online"}], [{"type": "node", "name": "pve1", "online": 1}], [])
    assert not inv.clustered and quorum_problem(inv) is None and node_problem(inv, "pve1") is None


def test_node_and_quorum_problems_name_the_node():
    inv = read_inventory(NODES, STATUS, [])
    assert node_problem(inv, "pve3", "hypervisor.nodes")[0] == "node pve3 (hypervisor.nodes) is offline"
    assert "online: pve1, pve2" in node_problem(inv, "pve3")[1]
    assert node_problem(inv, "pve9", where="https://pve:8006") == ("node pve9 is not in the cluster at https://pve:8006",
                                                                   "nodes: pve1, pve2, pve3")
    lost = read_inventory(NODES, [{**STATUS[0], "quorate": 0}, *STATUS[1:]], [])
    assert quorum_problem(lost)[0].startswith("the cluster is not quorate (2 of 3 nodes online: pve1, pve2; offline: pve3)")
    # /nodes says offline, /cluster/status says online: offline wins
    assert not read_inventory([{"node": "pve1", "status": "offline"}], STATUS[:2], []).nodes["pve1"].online


def test_storage_problem_says_where_the_storage_is():
    inv = read_inventory(NODES, STATUS, storage_rows(True))
    assert storage_problem(inv, "local-zfs", "pve1") is None
    msg, hint = storage_problem(inv, "local-zfs", "pve3")
    assert msg == "storage local-zfs (hypervisor.storage) is not available on node pve3"
    assert hint.startswith("it is on pve1, pve2; add pve3 to its nodes")
    inv.storages[("ceph-vm", "pve2")] = inv.storages[("ceph-vm", "pve2")].__class__("ceph-vm", "pve2", "unknown", "rbd", True)
    assert storage_problem(inv, "ceph-vm", "pve2")[0] == "storage ceph-vm (hypervisor.storage) is unknown on node pve2"


TEMPLATE = {"virtio0": "ceph-vm:base-9000-disk-0,size=4G", "efidisk0": "ceph-vm:base-9000-disk-1,size=1M",
            "ide2": "none,media=cdrom", "ide0": "cdrom,media=cdrom", "unused0": "local-zfs:vm-9000-disk-9", "name": "t"}


def test_template_volumes_are_qemu_servers_drives_cdrom_images_included():
    assert template_volumes(TEMPLATE) == {"virtio0": "ceph-vm:base-9000-disk-0", "efidisk0": "ceph-vm:base-9000-disk-1"}
    assert template_volumes({"ide2": "local:iso/d.iso,media=cdrom"}) == {"ide2": "local:iso/d.iso"}


@pytest.mark.parametrize("extra, want", [
    ({}, None),
    ({"scsi1": "local-zfs:base-9000-disk-2,size=1G"}, "scsi1 on local-zfs"),
    ({"ide2": "local:iso/debian.iso,media=cdrom"}, "ide2 on local"),
    ({"scsi1": "nope:vm-1-disk-0"}, "scsi1 on nope"),  # a storage no row names: not known to be shared
])
def test_template_problem_refuses_what_qemu_server_refuses(extra, want):
    inv = read_inventory(NODES, STATUS, storage_rows(True))
    assert template_problem(inv, 9000, "pve1", {**TEMPLATE, **extra}, "pve1") is None  # its own node: always
    got = template_problem(inv, 9000, "pve1", {**TEMPLATE, **extra}, "pve2")
    if want is None:
        assert got is None
    else:
        assert f"not shared ({want})" in got[0] and "can't clone VM to node 'pve2' (VM uses local storage)" in got[0]


def test_template_problem_needs_its_shared_storage_on_the_target():
    rows = [r for r in storage_rows(True) if not (r.get("storage") == "ceph-vm" and r["node"] == "pve2")]
    inv = read_inventory(NODES, STATUS, rows + [{"type": "storage", "storage": "ceph-vm", "node": "pve1", "status": "available",
                                                 "plugintype": "rbd", "shared": 1}])
    msg, _ = template_problem(inv, 9000, "pve1", TEMPLATE, "pve2")
    assert msg.startswith("storage ceph-vm (of template 9000's efidisk0) is not available on node pve2")


def test_memory_problem_names_need_and_free():
    inv = read_inventory(NODES, STATUS, storage_rows(True))
    assert memory_problem(inv, "pve1", 6 << 30) is None and memory_problem(inv, "pve2", 1 << 40) is None  # unknown: fine
    msg, hint = memory_problem(inv, "pve1", 8 << 30)
    assert msg == "the step's VMs need 8.0G of memory on node pve1, which has 6.0G free" and "hypervisor.place" in hint


class NextIdApi:
    """/cluster/nextid as PVE answers it: the lowest free VMID, or ?vmid=N back if free (else 400)."""

    def __init__(self, used: set[int]) -> None:
        self.used = used
        self.calls: list[dict | None] = []

    def get(self, path, params=None):
        assert path == "/cluster/nextid"
        self.calls.append(params)
        if params:
            if params["vmid"] in self.used:
                raise PveApiError("taken", status=400, reason="Parameter verification failed.")
            return str(params["vmid"])
        return str(min(set(range(100, 10000)) - self.used))


def test_a_held_vmid_is_never_handed_out_twice():
    api = NextIdApi({100})
    with vmids.vmid_for_clone(api, "https://c1") as first:
        assert first == 101 and api.calls == [None]  # nextid's answer, nothing held: no probe
        api.used.add(102)  # another client took 102 meanwhile
        with vmids.vmid_for_clone(api, "https://c1") as second:
            assert second == 103 and api.calls[1:] == [None, {"vmid": 102}, {"vmid": 103}]
        with vmids.vmid_for_clone(api, "https://c2") as other:
            assert other == 101  # another cluster: its own VMIDs
    assert vmids._HELD["https://c1"] == set()


def test_threads_get_distinct_vmids():
    api, got, lock = NextIdApi(set()), [], threading.Lock()

    def take() -> None:
        with vmids.vmid_for_clone(api, "https://c3") as vmid:
            with lock:
                got.append(vmid)
            api.used.add(vmid)  # the clone's config exists once its request returned

    threads = [threading.Thread(target=take) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(100, 108))


def test_temporary_storage_entries_of_a_run_across_nodes_are_per_node():
    """Storage IDs are cluster-wide: each node's driver makes its own entry (nodes=<it>), removed by
    its own driver; cleanup still recognises every one as vmbench's, with its run tag."""
    from vmbench.drivers.proxmox import entries, rbd, storage

    assert storage.entry_id("r0a1b2c3d", 16 << 10) == "vmbench-r0a1b2c3d-16k"
    assert storage.entry_id("r0a1b2c3d", 16 << 10, "PVE2") == "vmbench-r0a1b2c3d-16k-pve2"
    assert rbd.entry_id("r0a1b2c3d", True, "pve-3") == "vmbench-r0a1b2c3d-krbd-pve-3"
    for sid in ("vmbench-r0a1b2c3d-16k", "vmbench-r0a1b2c3d-16k-pve2", "vmbench-r0a1b2c3d-librbd-pve-3"):
        assert entries.ENTRY_RE.match(sid).group(1) == "r0a1b2c3d"
    assert not entries.ENTRY_RE.match("vmbench-r0a1b2c3d-16k-") and not entries.ENTRY_RE.match("vmbench-r0a1b2c3d-pve2")
