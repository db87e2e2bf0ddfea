"""Contract tests of the Proxmox driver on a cluster (issue 28): the fake PVE with three nodes
behind one API, one real ``ProxmoxDriver`` per node as the runner makes them (one per member
of ``hypervisor.nodes``), on both schema versions.  Asserted: the exact requests of the
inventory (node online and in the cluster, quorum, the template's node, storages per node and
whether they are shared: 9.1 says it in /cluster/resources, 8.4 only in the storage
configuration), the preflight refusals before anything is created, each naming the node, and
the clone onto another node (``target``), after which every call goes to that node."""

from __future__ import annotations

import textwrap
import threading
from pathlib import Path

import pytest

from tests.fakepve import FakePve
from tests.fakes import FakePveNode
from tests.unit.test_proxmox_contract import ENV, SECRET, TOKEN_ID, VERSIONS, VM, Clock, new_fake, prepare, request
from vmbench.drivers.proxmox.driver import ProxmoxDriver
from vmbench.errors import HypervisorError, PreflightError
from vmbench.paths import HostPaths, StatePaths
from vmbench.scenario import parse_scenario

NODES = ("pve1", "pve2", "pve3")
TAG = "r0c1u2s3t"
JOBS = """
jobs:
  - {name: 4k-randwrite, rw: randwrite, bs: 4k}
load: {vms: [3]}
"""


def cluster_fake(version: str, **kw) -> FakePve:
    return new_fake(version, nodes=NODES, **kw)


def shared_template(fake: FakePve, **kw) -> None:
    """A directory on a cluster file system (``shared: 1``) holding the template, on pve1."""
    fake.add_storage("shared", "dir", shared=1)
    fake.add_template(storage="shared", **kw)


def cluster_text(fake: FakePve, nodes: tuple[str, ...] = NODES, storage: str = "local", template: int | str = 9000) -> str:
    hv = textwrap.dedent(f"""
        driver: proxmox
        host: 127.0.0.1
        port: {fake.port}
        nodes: [{", ".join(nodes)}]
        template: {template}
        storage: {storage}
        token: {{id: "{TOKEN_ID}", secret_env: {ENV}}}
        tls: {{ca_file: {fake.ca_file}}}
        ssh: {{user: root}}
        timeout: 10s
        """).strip()
    return "name: cluster\nhypervisor:\n" + textwrap.indent(hv + "\n", "  ") + VM + JOBS


def drivers(tmp_path: Path, monkeypatch, fake: FakePve, text: str | None = None) -> tuple[dict[str, ProxmoxDriver], object]:
    """One driver per node of the scenario, as the runner makes them (``make_driver(member)``);
    each node's SSH side answers with its own hostname."""
    monkeypatch.setenv(ENV, SECRET)
    s = parse_scenario(text or cluster_text(fake), str(tmp_path / "cluster.yaml"))
    out = {}
    for member in s.hypervisor.members:
        clock = Clock()
        state = StatePaths(tmp_path / "state" / member.host_label)
        out[member.host_label] = ProxmoxDriver(member, s.storage, host=FakePveNode(fake, hostname=member.host_label),
                                               state=state, paths=HostPaths.for_host(None, state), clock=clock.now,
                                               sleep=clock.sleep)
    return out, s


def sent(fake: FakePve, since: int = 0) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in fake.requests[since:] if "/tasks/" not in r.path]


# ---- the inventory ----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_preflight_of_a_node_other_than_the_templates_reads_the_cluster(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        prepare(drv["pve2"], s)
        assert (drv["pve2"].template_vmid, drv["pve2"].template_node) == (9000, "pve1")
        assert sent(fake) == [
            ("GET", "/version"),
            ("GET", "/nodes"),  # pve2 is in the cluster and online
            ("GET", "/cluster/status"),  # the cluster is quorate
            ("GET", "/cluster/resources"),  # the template and its node
            ("GET", "/nodes/pve1/qemu/9000/config"),  # read where it is
            ("GET", "/cluster/resources"),  # storages per node: the template's shared, available on pve2
            *([("GET", "/storage")] if version == "8.4" else []),  # 8.4's rows do not say shared: the configuration does
            # the token's rights: /vms/9000, /storage/shared (the template's), /vms, /storage/local, /nodes/pve2, /
            *[("GET", "/access/permissions")] * 6,
            ("GET", "/nodes/pve1/storage/shared/status"),  # the template's storage makes linked clones
            ("GET", "/nodes/pve2/storage/local/status"),  # the scratch storage, on pve2
            ("GET", "/nodes/pve2/capabilities/qemu/cpu"),
        ]
        assert [r.params for r in fake.requests if r.path == "/cluster/resources"] == [{"type": "vm"}, {"type": "storage"}]
        inv = drv["pve2"].inventory
        assert inv.quorate is True and inv.online() == list(NODES)
        assert inv.shared("shared") is True and inv.shared("local") is False
        assert not [r for r in fake.requests if r.method != "GET"]


@pytest.mark.parametrize("version", VERSIONS)
def test_preflight_on_the_templates_node_reads_no_storage_rows(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        fake.add_template()  # on pve1's local storage: fine for VMs on pve1
        drv, s = drivers(tmp_path, monkeypatch, fake)
        prepare(drv["pve1"], s)
        assert ("GET", "/cluster/status") in sent(fake)
        assert [r.params for r in fake.requests if r.path == "/cluster/resources"] == [{"type": "vm"}]


# ---- refusals before anything exists -------------------------------------------------------------


def _offline(node: str):
    return lambda fake: fake.set_online(node, False)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("setup, node, message", [
    (_offline("pve3"), "pve3", "node pve3 (hypervisor.nodes) is offline at https://127.0.0.1:"),
    (lambda fake: [fake.set_online(n, False) for n in ("pve2", "pve3")], "pve1",
     "the cluster is not quorate (1 of 3 nodes online: pve1; offline: pve2, pve3): Proxmox refuses to create VMs"),
    (_offline("pve1"), "pve2", "template 9000 (debian12-tmpl) is on node pve1, not pve2: node pve1 is offline"),
    (lambda fake: fake.add_storage("fast", "dir", nodes="pve1,pve3"), "pve2",
     "storage fast (hypervisor.storage) is not available on node pve2"),
], ids=["node-offline", "not-quorate", "template-node-offline", "scratch-not-on-node"])
def test_preflight_refuses_naming_the_node(version, setup, node, message, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        setup(fake)
        storage = "fast" if "fast" in fake.storages else "local"
        drv, s = drivers(tmp_path, monkeypatch, fake, cluster_text(fake, storage=storage))
        with pytest.raises(PreflightError) as exc:
            prepare(drv[node], s)
        assert message in exc.value.message
        assert not [r for r in fake.requests if r.method != "GET"], "nothing is created before the refusal"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_node_not_in_the_cluster_is_named(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake, cluster_text(fake, nodes=("pve1", "pve9")))
        with pytest.raises(PreflightError, match=r"node pve9 \(hypervisor.nodes\) is not in the cluster") as exc:
            prepare(drv["pve9"], s)
        assert exc.value.hint == "nodes: pve1, pve2, pve3"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("local, what", [
    ({}, "virtio0 on local"),  # the template's disk on pve1's own storage
    ({"ide2": "local:iso/debian-12.iso,media=cdrom"}, "ide2 on local"),  # a local ISO
], ids=["local-disk", "local-iso"])
def test_a_template_on_local_storage_is_refused_for_other_nodes(version, local, what, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        fake.add_storage("shared", "dir", shared=1)
        fake.add_template(storage="shared" if local else "local", **local)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        prepare(drv["pve1"], s)  # the template's own node clones it as always
        with pytest.raises(PreflightError) as exc:
            prepare(drv["pve2"], s)
        e = exc.value
        assert e.message == (f"template 9000 is on node pve1 with volumes on storage that is not shared ({what}): Proxmox cannot "
                             "clone it to node pve2 (qemu-server: can't clone VM to node 'pve2' (VM uses local storage))")
        assert "shares" in e.hint and "qm disk move" in e.hint
        assert not [r for r in fake.requests if r.method != "GET"]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_fake_refuses_a_target_clone_from_local_storage_as_qemu_server(version, tmp_path, monkeypatch):
    """Without vmbench's preflight: PVE's own refusal, before any task, and the driver's error."""
    with cluster_fake(version) as fake:
        fake.add_template()
        drv, s = drivers(tmp_path, monkeypatch, fake)
        d = drv["pve1"]
        prepare(d, s)
        d.node = "pve2"  # as if pve2's driver had skipped its preflight
        req = request(s)
        with pytest.raises(HypervisorError) as exc:
            d.create_vm(TAG, req, d.new_resources(TAG, req))
        assert "can't clone VM to node 'pve2' (VM uses local storage) (500)" in exc.value.message
        assert "shares" in (exc.value.hint or "")
        clone = [r for r in fake.requests if r.path.endswith("/clone")]
        assert [(r.path, r.params["target"], r.status) for r in clone] == [("/nodes/pve1/qemu/9000/clone", "pve2", 500)]
        assert not fake.tasks and set(fake.vms) == {9000}


# ---- the clone onto another node ---------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_vm_on_another_node_is_a_target_clone_then_lives_there(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        d = drv["pve3"]
        prepare(d, s)
        start = len(fake.requests)
        req = request(s)
        res = d.new_resources(TAG, req)
        d.create_vm(TAG, req, res)
        vmid = res.storage["pve"]["vmid"]
        assert (vmid, fake.node_of(vmid)) == (100, "pve3")
        assert (res.storage["pve"]["node"], res.storage["pve"]["template_node"]) == ("pve3", "pve1")
        clone = next(r for r in fake.requests[start:] if r.path.endswith("/clone"))
        assert (clone.path, clone.params) == ("/nodes/pve1/qemu/9000/clone", {
            "newid": "100", "name": f"vmbench-{TAG}-1", "full": "0", "target": "pve3",
            "description": f"vmbench-run: {TAG} (being configured)"})
        upid = fake.requests[fake.requests.index(clone) + 1].path
        assert upid.startswith("/nodes/pve1/tasks/UPID:pve1:") and ":qmclone:9000:" in upid  # waited where it runs
        after = sent(fake, fake.requests.index(clone) + 1)
        assert after and all(p.startswith("/nodes/pve3/") for _, p in after), after
        assert str(fake.vms[vmid].config["virtio0"]).startswith("shared:9000/base-9000-disk-0.qcow2/100/vm-100-disk-0.qcow2")
        guest = d.boot(TAG, req, res)
        assert guest.applied().qemu_pid is not None
        d.remove_vm(res)
        assert set(fake.vms) == {9000}
        assert all(p.startswith("/nodes/pve3/") for _, p in sent(fake, start) if "/qemu/100" in p)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_template_per_node_on_local_storage_each_node_clones_its_own(version, tmp_path, monkeypatch):
    """``vmbench images push`` makes a template of the same name on each node of a cluster on
    local storage: each node's driver takes the one on its node and clones it there, no target."""
    with cluster_fake(version) as fake:
        fake.add_template(9000, node="pve1")
        fake.add_template(9001, node="pve2")
        drv, s = drivers(tmp_path, monkeypatch, fake, cluster_text(fake, nodes=("pve1", "pve2"), template="debian12-tmpl"))
        for node, vmid in (("pve1", 9000), ("pve2", 9001)):
            d = drv[node]
            prepare(d, s)
            assert (d.template_vmid, d.template_node) == (vmid, node)
            start = len(fake.requests)
            req = request(s)
            res = d.new_resources(TAG, req)
            d.create_vm(TAG, req, res)
            clone = next(r for r in fake.requests[start:] if r.path.endswith("/clone"))
            assert clone.path == f"/nodes/{node}/qemu/{vmid}/clone" and "target" not in clone.params
            d.remove_vm(res)
        assert set(fake.vms) == {9000, 9001}


@pytest.mark.parametrize("version", VERSIONS)
def test_drivers_of_one_cluster_cloning_at_once_never_take_the_same_vmid(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        for d in drv.values():
            prepare(d, s)
        made: dict[str, int] = {}
        errors: list[BaseException] = []

        def clone(node: str, seq: int) -> None:
            try:
                req = request(s, seq)
                res = drv[node].new_resources(TAG, req)
                drv[node].create_vm(TAG, req, res)
                made[res.name] = res.storage["pve"]["vmid"]
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=clone, args=(node, i)) for i, node in enumerate(NODES * 2, start=1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert not errors and len(made) == 6 and len(set(made.values())) == 6
        assert not [r for r in fake.requests if r.path.endswith("/clone") and r.status >= 400], "no clone hit a taken VMID"
        assert sorted(fake.node_of(v) for v in made.values()) == sorted(NODES * 2)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_step_that_does_not_fit_a_nodes_memory_is_named(version, tmp_path, monkeypatch):
    with cluster_fake(version) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        drv["pve2"].check_memory(4 << 30)  # the fake's nodes: 8G, 1G used
        with pytest.raises(PreflightError) as exc:
            drv["pve2"].check_memory(16 << 30, "the 16 VMs of step 3")
        assert exc.value.message == "the 16 VMs of step 3 need 16.0G of memory on node pve2, which has 7.0G free"
        assert [(r.path, r.params) for r in fake.requests] == [("/cluster/resources", {"type": "node"})] * 2


@pytest.mark.parametrize("version", VERSIONS)
def test_without_sys_audit_quorum_is_not_checked_and_said_so(version, tmp_path, monkeypatch):
    """/cluster/status needs Sys.Audit on / (PVEVMAdmin lacks it): a warning, not a refusal."""
    with cluster_fake(version, missing_privileges=[("/", "Sys.Audit")]) as fake:
        shared_template(fake)
        drv, s = drivers(tmp_path, monkeypatch, fake)
        prepare(drv["pve2"], s)
        status = [r for r in fake.requests if r.path == "/cluster/status"]
        assert [r.status for r in status] == [403]
        warnings = [m for kind, m in drv["pve2"].progress.events if kind == "warn"]
        assert any(m.startswith("cannot tell whether the cluster is quorate") and "Sys.Audit on /" in m for m in warnings)
        assert drv["pve2"].inventory.quorate is None
