"""A load run across a Proxmox cluster's nodes on the fake (issue 28): the real ``Runner`` with
one real ``ProxmoxDriver`` per node (as it makes them from ``hypervisor.nodes``) against the
fake PVE as a two-node cluster, each started VM a :class:`~tests.fakes.FakeGuestTransport`
behind the fake's guest agent (tests/unit/test_proxmox_load.py's ``Guests``).

A scaling run of 2 then 4 VMs spread over pve1 and pve2, the template on a storage both
share: each step's VMs are cloned from the template on pve1, those for pve2 with ``target``.
Node pve2 goes offline once step 1 is stored: step 2 is refused before anything is created on
any node, naming the node (in a two-node cluster the quorum is lost with it; in a three-node
cluster, pve3 not in the run, it holds); step 1 is kept, nothing is left anywhere; with pve2
back, ``--resume`` runs step 2 alone and completes the run.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.fakepve import FakePve
from tests.unit.test_proxmox_cluster_contract import cluster_text, shared_template
from tests.unit.test_proxmox_contract import ENV, SECRET, VERSIONS, Clock, new_fake
from tests.unit.test_proxmox_load import SCALING_JOBS, SECTIONS, Guests, Node, db  # noqa: F401  (db: a fixture)
from vmbench.cli.cleanup import find_leftovers, remove_leftovers
from vmbench.drivers.proxmox.driver import ProxmoxDriver
from vmbench.errors import VmbenchError
from vmbench.paths import HostPaths, StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario

NODES = ("pve1", "pve2")  # the run's nodes
CLONE = ("POST", "/nodes/{node}/qemu/{vmid}/clone")


def scenario_text(fake: FakePve) -> str:
    """The contract tests' two-node scenario with the load tests' VM and a scaling 2 -> 4 VMs."""
    text = cluster_text(fake, nodes=NODES)
    return text[:text.index("\nvm:\n") + 1] + SECTIONS.lstrip("\n") + SCALING_JOBS.replace("vms: [1, 3]", "vms: [2, 4]").lstrip("\n")


class StepWatch(RecordingProgress):
    """Progress that calls ``on_unit(n)`` when the runner begins load unit ``n``."""

    def __init__(self, on_unit) -> None:
        super().__init__()
        self.on_unit = on_unit

    def step(self, message: str) -> None:
        super().step(message)
        if message.startswith("load unit "):
            self.on_unit(int(message.split()[2].split("/")[0]))


class ClusterRun:
    """The fake cluster with guests behind its agent, one ProxmoxDriver per node, a Runner."""

    def __init__(self, fake: FakePve, backend: Guests, tmp_path: Path, monkeypatch, db: ResultsDB, progress, resume=None):
        self.fake, self.backend, self.db = fake, backend, db
        monkeypatch.setenv(ENV, SECRET)
        self.scenario = s = parse_scenario(scenario_text(fake), str(tmp_path / "cluster.yaml"))
        backend.vm = s.cells[0].vm
        self.drivers: dict[str, ProxmoxDriver] = {}
        for member in s.hypervisor.members:
            clock = Clock()
            state = StatePaths(tmp_path / "state" / member.host_label)
            self.drivers[member.host_label] = ProxmoxDriver(
                member, s.storage, host=Node(fake, kvm=True, hostname=member.host_label), state=state,
                paths=HostPaths.for_host(None, state), clock=clock.now, sleep=clock.sleep)
        self.runner = Runner(s, db, progress, drivers=self.drivers, state=StatePaths(tmp_path / "state"), resume=resume)

    def close(self) -> None:
        for d in self.drivers.values():
            d.close()


def nothing_left(cr: ClusterRun) -> None:
    fake = cr.fake
    assert list(fake.vms) == [9000] and [v.name for v in fake.state.volumes.values()] == ["base-9000-disk-0.qcow2"]
    assert not [t for t in fake.tasks.values() if t.status != "stopped"]
    assert all(d.vms == {} and d.leftovers() == [] for d in cr.drivers.values())
    assert cr.runner.created == [] and cr.backend.guests == {}
    assert fake.problems == []


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("cluster, refusal", [
    (NODES, "checking host pve1 before VM configuration 1, load step 2 (4 VMs): the cluster is not quorate "
            "(1 of 2 nodes online: pve1; offline: pve2): Proxmox refuses to create VMs"),
    (NODES + ("pve3",), "checking host pve2 before VM configuration 1, load step 2 (4 VMs): node pve2 (hypervisor.nodes) "
                        "is offline at https://127.0.0.1:"),
], ids=["quorum-lost", "quorate"])
def test_a_node_offline_between_steps_fails_the_run_naming_it_and_resume_completes(version, cluster, refusal, tmp_path,
                                                                                    monkeypatch, db):
    backend = Guests()
    with new_fake(version, backend=backend, nodes=cluster) as fake:
        shared_template(fake)

        def offline_before_step_2(unit: int) -> None:
            if unit == 2:
                fake.set_online("pve2", False)

        cr = ClusterRun(fake, backend, tmp_path, monkeypatch, db, StepWatch(offline_before_step_2))
        with pytest.raises(VmbenchError) as exc:
            cr.runner.run()
        assert exc.value.message.startswith(refusal), exc.value.message
        run_id = cr.runner.run_id
        assert db.resolve_run(run_id).status == "failed"
        assert {k.load_step for k in db.measurement_keys(run_id)} == {1}  # step 1 is kept
        rows = [m for m in db.rows("measurements", run_id) if m["side"] == "guest"]
        assert sorted((m["vm"], m["load"]["host"]) for m in rows) == [(0, "pve1"), (1, "pve2")]
        # step 1: two clones of the template on pve1, the second onto pve2; step 2: none
        clones = [r.params for r in fake.requests if (r.method, r.template) == CLONE]
        assert [c.get("target") for c in clones] == [None, "pve2"]
        nothing_left(cr)
        cr.close()

        fake.set_online("pve2", True)
        resumed = ClusterRun(fake, backend, tmp_path, monkeypatch, db, RecordingProgress(), resume=db.resolve_run(run_id))
        out = resumed.runner.run()
        assert out.status == "ok" and out.run_id == run_id
        assert {k.load_step for k in db.measurement_keys(run_id)} == {1, 2}
        rows = [m for m in db.rows("measurements", run_id) if m["side"] == "guest" and m["load_step"] == 2]
        assert sorted((m["vm"], m["load"]["host"]) for m in rows) == [(0, "pve1"), (1, "pve2"), (2, "pve1"), (3, "pve2")]
        clones = [r.params for r in fake.requests if (r.method, r.template) == CLONE]
        assert [c.get("target") for c in clones[2:]] == [None, "pve2", None, "pve2"]  # step 2 only, once
        nothing_left(resumed)
        resumed.close()


class LoseNode(RecordingProgress):
    """Progress that takes ``node`` offline when the first round of the VMs begins (they exist)."""

    def __init__(self, fake: FakePve, node: str) -> None:
        super().__init__()
        self.fake, self.node, self.done = fake, node, False

    def step(self, message: str) -> None:
        super().step(message)
        if not self.done and "guest agent answered" in message and self.node in message:
            self.done = True
            self.fake.set_online(self.node, False)


def test_a_node_lost_in_mid_step_leaves_its_vm_named_then_cleanup_and_resume(tmp_path, monkeypatch, db):
    """pve2 goes offline once its VM of step 1 runs: the step fails naming pve2; pve1's VM is
    removed, pve2's cannot be (595): the warning names it and its node, the hint says how it goes;
    with pve2 back, the cleanup removes it and --resume completes the run."""
    backend = Guests()
    with new_fake("9.1", backend=backend, nodes=NODES + ("pve3",)) as fake:
        shared_template(fake)
        progress = LoseNode(fake, "pve2")
        cr = ClusterRun(fake, backend, tmp_path, monkeypatch, db, progress)
        with pytest.raises(VmbenchError) as exc:
            cr.runner.run()
        assert "pve2" in exc.value.message and "595" in exc.value.message, exc.value.message
        assert "`vmbench cleanup SCENARIO` removes it once its host answers again" in (exc.value.hint or "")
        left = [m for kind, m in progress.events if kind == "warn" and m.startswith("cleanup: on host pve2: ")]
        assert len(left) == 1 and "vmbench-" in left[0], progress.events
        assert sorted((vmid, fake.node_of(vmid)) for vmid in fake.vms) == [(101, "pve2"), (9000, "pve1")]
        run_id = cr.runner.run_id
        assert db.resolve_run(run_id).status == "failed" and db.measurement_keys(run_id) == set()
        cr.close()

        fake.set_online("pve2", True)
        cleaned = ClusterRun(fake, backend, tmp_path, monkeypatch, db, RecordingProgress())
        found, _ = find_leftovers(cleaned.drivers["pve2"], StatePaths(tmp_path / "state" / "pve2"))
        assert [f.name for f in found if f.kind == "vm"] == re.findall(r"vmbench-r\w+-\d+(?=:)", left[0])[:1], found
        assert remove_leftovers(cleaned.drivers["pve2"], found) == []
        assert sorted(fake.vms) == [9000]
        cleaned.close()
        resumed = ClusterRun(fake, backend, tmp_path, monkeypatch, db, RecordingProgress(), resume=db.resolve_run(run_id))
        assert resumed.runner.run().status == "ok"
        assert {k.load_step for k in db.measurement_keys(run_id)} == {1, 2}
        nothing_left(resumed)
        resumed.close()
