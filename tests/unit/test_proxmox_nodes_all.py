"""``hypervisor.nodes: all`` (issue 28): every node of the cluster online when the run starts.

The scenario holds no node name until then (``Hypervisor.all_nodes``); ``vmbench plan`` reads
nothing from the cluster and says so; run, cleanup, doctor and images push read the nodes first
(one GET /nodes, against the fake PVE and its schemas) and go on with the plain node list
those names would give; a resumed run goes on with the nodes it started with."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from tests.fakepve import FakePve
from tests.unit.test_proxmox_contract import ENV, SECRET, TOKEN_ID
from vmbench.cli.common import on_hosts, stored_nodes
from vmbench.cli.main import main
from vmbench.drivers.proxmox.api import PveApi, Secret
from vmbench.drivers.proxmox.cluster import online_nodes, resolve_nodes
from vmbench.errors import PreflightError, ScenarioError
from vmbench.progress import RecordingProgress
from vmbench.results.db import RunRow
from vmbench.run.fleet import make_hosts
from vmbench.run.plan import make_plan
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import SshConfig
from vmbench.scenario.pvenodes import every_node
from vmbench.paths import StatePaths

NODES = ("pve1", "pve2", "pve3")
JOBS = """
jobs:
  - {name: j1, rw: randwrite, bs: 4k}
load: {vms: [3]}
"""


def hv_text(nodes: str = "all", extra: str = "", host: str = "pve.example.org", port: int = 8006, tls: str = "",
            ssh: str = "{user: bench, key_file: /keys/id}") -> str:
    return textwrap.dedent(f"""
        driver: proxmox
        host: {host}
        port: {port}
        nodes: {nodes}
        template: 9000
        storage: ceph-vm
        token: {{id: "{TOKEN_ID}", secret_env: {ENV}}}
        ssh: {ssh}
        """).strip() + "\n" + (f"tls: {{ca_file: {tls}}}\n" if tls else "") + extra


def text(nodes: str = "all", extra: str = "", jobs: str = JOBS, **kw) -> str:
    return "name: t\nhypervisor:\n" + textwrap.indent(hv_text(nodes, extra, **kw), "  ") + jobs


def parse(nodes: str = "all", extra: str = "", jobs: str = JOBS, **kw):
    return parse_scenario(text(nodes, extra, jobs, **kw), "/scen/t.yaml")


def error(*args, **kw) -> str:
    with pytest.raises(ScenarioError) as exc:
        parse(*args, **kw)
    return exc.value.message + (f" | hint: {exc.value.hint}" if exc.value.hint else "")


# ---- reading -------------------------------------------------------------------------------------


def test_nodes_all_names_no_node_until_the_run_reads_them():
    s = parse()
    hv = s.hypervisor
    assert hv.all_nodes and hv.several and hv.hosts == () and hv.place == ()
    assert hv.proxmox.node == "" and hv.uri == "https://pve.example.org:8006/api2/json/nodes"
    assert hv.ssh == SshConfig("pve.example.org", 22, "bench", "/keys/id")
    assert parse(extra="place: round-robin\n").hypervisor.place == ()


def test_the_node_list_read_is_the_scenario_a_list_of_those_names_gives():
    listed = parse("[pve1, pve3]").hypervisor
    assert every_node(parse().hypervisor, ["pve1", "pve3"]) == listed
    assert [m.ssh for m in listed.members] == [SshConfig("pve1", 22, "bench", "/keys/id"), SshConfig("pve3", 22, "bench", "/keys/id")]


@pytest.mark.parametrize("nodes, extra, jobs, want", [
    ("all", "place: {pve1: 3}\n", JOBS, "hypervisor.place: names nodes, but nodes: all takes the nodes online when the run "
                                         "starts: the names cannot be checked before then"),
    ("all", "", "\njobs:\n  - {name: j1, rw: randwrite, bs: 4k}\n",
     "hypervisor.nodes: a run across several hosts spreads a load step's VMs over them; this scenario has no load: section"
     " | hint: add load: {vms: [N]} for one VM per host (is every host the same?; N: the number of online nodes)"),
    ("everything", "", JOBS, "hypervisor.nodes: is all (every online node of the cluster) or a non-empty list of node names"),
    ("7", "", JOBS, "hypervisor.nodes: is all (every online node of the cluster) or a non-empty list of node names"),
])
def test_mistakes_with_nodes_all_are_named_by_key(nodes, extra, jobs, want):
    assert want in error(nodes, extra, jobs)
    assert "hypervisor.ssh.host: names one machine, but hypervisor.nodes names several" in error(ssh="{host: 10.0.0.1}")


def test_nodes_all_is_proxmox_only():
    with pytest.raises(ScenarioError, match="hypervisor.nodes: applies to driver proxmox"):
        parse_scenario("name: t\nhypervisor: {driver: libvirt, nodes: all}\n" + JOBS, "/scen/t.yaml")


def test_one_host_default_is_unchanged():
    hv = parse_scenario("name: t\nhypervisor:\n" + textwrap.indent(hv_text().replace("nodes: all", "node: pve1"), "  ")
                        + "jobs:\n  - {name: j1, rw: randwrite, bs: 4k}\n", "/scen/t.yaml").hypervisor
    assert not hv.all_nodes and not hv.several and hv.members == (hv,) and hv.proxmox.node == "pve1"


# ---- planning without the cluster ------------------------------------------------------------------


def test_plan_places_no_vm_and_says_the_nodes_are_read_when_the_run_starts(tmp_path, monkeypatch, capsys):
    def no_api(*_a, **_kw):
        raise AssertionError("vmbench plan talked to the cluster")

    monkeypatch.setattr(PveApi, "__init__", no_api)
    path = tmp_path / "all.yaml"
    path.write_text(text())
    plan = make_plan(parse())
    assert [u.hosts for u in plan.load_units()] == [()]
    assert plan.summary()["nodes"] == "all" and "hosts" not in plan.summary()
    assert main(["plan", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # wrapped to 120 columns
    assert "on every online node of the cluster (nodes: all), read when the run starts" in out
    assert "VMs 0-2 round robin over the online nodes" in out
    assert "hosts: the cluster's online nodes (nodes: all), read from the API when the run starts" in out
    for node in NODES:
        assert node not in out
    with pytest.raises(PreflightError, match="was not read from the cluster"):
        make_hosts(parse().hypervisor, parse().storage, StatePaths(tmp_path / "state"))


# ---- reading the nodes when the run starts ---------------------------------------------------------


def test_online_nodes_sorted_the_others_apart():
    rows = [{"node": "pve3", "status": "online"}, {"node": "pve1", "status": "online"}, {"node": "pve2", "status": "offline"},
            {"node": "pve4", "status": "unknown"}, {"status": "online"}]
    assert online_nodes(rows) == (["pve1", "pve3"], ["pve2", "pve4"])


@pytest.mark.parametrize("version", ["8.4", "9.1"])
def test_run_reads_the_online_nodes_once_and_leaves_an_offline_one_out(version):
    with FakePve(version=version, nodes=("pve3", "pve1", "pve2"), token=(TOKEN_ID, SECRET)) as fake:
        fake.set_online("pve2", False)
        s = parse(host="127.0.0.1", port=fake.port, tls=fake.ca_file)
        progress = RecordingProgress()
        out = resolve_nodes(s, PveApi(s.hypervisor.proxmox, Secret(SECRET)), progress)
        assert [(r.method, r.path) for r in fake.requests] == [("GET", "/nodes")]
        assert fake.problems == []
    hv = out.hypervisor
    assert not hv.all_nodes and hv.host_labels == ("pve1", "pve3") and hv.proxmox.node == "pve1"
    assert [m.ssh for m in hv.members] == [SshConfig("pve1", 22, "bench", "/keys/id"), SshConfig("pve3", 22, "bench", "/keys/id")]
    assert out == replace(s, hypervisor=parse("[pve1, pve3]", host="127.0.0.1", port=fake.port, tls=fake.ca_file).hypervisor)
    assert progress.events == [("warn", "hypervisor.nodes: all: left out of the run: pve2 (offline)"),
                               ("step", "nodes: all: the run's nodes are the cluster's online nodes: pve1, pve3")]
    assert resolve_nodes(parse("[pve1, pve2]"), api=None) == parse("[pve1, pve2]")  # a node list: no request at all


def test_no_online_node_refuses_the_run_before_anything_is_created(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(ENV, SECRET)
    db = tmp_path / "results.db"
    with FakePve(nodes=NODES, token=(TOKEN_ID, SECRET)) as fake:
        for node in NODES:
            fake.set_online(node, False)
        path = tmp_path / "all.yaml"
        path.write_text(text(host="127.0.0.1", port=fake.port, tls=fake.ca_file))
        code = main(["run", str(path), "--db", str(db), "-q"])
        assert [(r.method, r.path) for r in fake.requests] == [("GET", "/nodes")]
        assert fake.problems == [] and fake.state.vms == {}
    err = capsys.readouterr().err
    assert code == PreflightError.exit_code
    assert f"error: hypervisor.nodes is all, but the cluster at https://127.0.0.1:{fake.port} has no online node " \
           "(offline: pve1, pve2, pve3)" in err
    assert "hint: bring a node back" in err
    assert not db.exists()


# ---- resuming -------------------------------------------------------------------------------------


def run_row(plan: dict, env: dict) -> RunRow:
    return RunRow(id=7, tag="rabc", scenario_name="t", scenario_path="/scen/t.yaml", status="failed", started_at="",
                  finished_at=None, error=None, environment=env, plan_json=plan)


def test_a_resumed_run_goes_on_with_the_nodes_it_started_with(monkeypatch):
    def no_read(*_a, **_kw):
        raise AssertionError("the cluster was read again")

    monkeypatch.setattr("vmbench.drivers.proxmox.cluster.resolve_nodes", no_read)
    progress = RecordingProgress()
    out = on_hosts(parse(), progress, run_row({"hosts": ["pve2", "pve3"]}, {"pve_node": "pve2"}))
    assert out.hypervisor == parse("[pve2, pve3]").hypervisor
    assert progress.events == [("step", "nodes: all: resuming run 7 on the nodes it started with: pve2, pve3")]
    assert stored_nodes(run_row({}, {"pve_node": "pve1"})) == ("pve1",)  # one online node: its environment names it
    assert stored_nodes(run_row({}, {})) == ()  # failed before measuring: read again
    assert stored_nodes(run_row({"hosts": ["pve1", "-oProxyCommand=x"]}, {})) == ()


def test_a_resumed_run_that_recorded_no_node_reads_them_again(monkeypatch):
    seen = []
    def read(s, progress=None):
        seen.append(s)
        return replace(s, hypervisor=every_node(s.hypervisor, ["pve1"]))

    monkeypatch.setattr("vmbench.drivers.proxmox.cluster.resolve_nodes", read)
    out = on_hosts(parse(), RecordingProgress(), run_row({}, {}))
    assert len(seen) == 1 and out.hypervisor.host_labels == ("pve1",)
