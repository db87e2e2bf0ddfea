"""``hypervisor.nodes``: a Proxmox run across several nodes of one cluster.  Each node becomes a
whole one-node Hypervisor in ``Hypervisor.hosts`` (the same API settings with ``node``
replaced, its own SSH, named after the node), the first being the top level's own settings;
every mistake is named with file, line and key."""

import textwrap

import pytest

from vmbench.errors import ScenarioError
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import SshConfig

JOBS = """
jobs:
  - {name: j1, rw: randwrite, bs: 4k}
load: {vms: [3]}
"""
BASE = """
driver: proxmox
host: pve.example.org
template: 9000
storage: ceph-vm
token: {id: "vmbench@pve!bench", secret_env: PVE_SECRET}
"""


def parse(hv: str):
    text = "name: t\nhypervisor:\n" + textwrap.indent(textwrap.dedent(BASE + hv).strip() + "\n", "  ") + JOBS
    return parse_scenario(text, "/scen/t.yaml")


def error(hv: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        parse(hv)
    return exc.value.message + (f" | hint: {exc.value.hint}" if exc.value.hint else "")


def test_nodes_become_one_host_each_the_first_being_the_top_level():
    hv = parse("nodes: [pve1, pve2, pve3]\nssh: {user: bench, key_file: /keys/id}\n").hypervisor
    assert hv.host_labels == ("pve1", "pve2", "pve3")
    assert hv.members[0] == hv.__class__(**{**hv.__dict__, "hosts": ()})  # the first is the top level's own settings
    assert (hv.proxmox.node, hv.host_label, hv.ssh.host) == ("pve1", "pve1", "pve1")
    for m in hv.members:
        assert m.hosts == () and m.members == (m,)
        assert m.proxmox == hv.proxmox.__class__(**{**hv.proxmox.__dict__, "node": m.host_label})  # only node differs
        assert m.ssh == SshConfig(host=m.host_label, port=22, user="bench", key_file="/keys/id")
        assert m.uri == f"https://pve.example.org:8006/api2/json/nodes/{m.host_label}"
    assert hv.member("pve2").proxmox.node == "pve2"


def test_a_node_gives_its_own_ssh_over_the_top_level_defaults():
    hv = parse("nodes: [pve1, {name: pve2, ssh: {host: 127.0.0.3, port: 2222}}, {name: pve3}]\n"
               "ssh: {user: bench, port: 2200, known_hosts: /keys/kh}\n").hypervisor
    assert [m.ssh for m in hv.members] == [
        SshConfig("pve1", 2200, "bench", None, "/keys/kh"),
        SshConfig("127.0.0.3", 2222, "bench", None, "/keys/kh"),
        SshConfig("pve3", 2200, "bench", None, "/keys/kh")]


def test_one_node_is_as_before():
    hv = parse("node: pve1\n").hypervisor
    assert hv.hosts == () and hv.members == (hv,) and hv.ssh.host == "pve.example.org" and hv.proxmox.node == "pve1"


@pytest.mark.parametrize("hv, want", [
    ("node: pve1\nnodes: [pve1, pve2]\n", "/scen/t.yaml:9: hypervisor.nodes: give node (one node) or nodes (several), not both"),
    ("", "hypervisor.node: is required for driver proxmox"),
    ("nodes: [pve1, pve2, pve1]\n", "hypervisor.nodes[2]: node pve1 is listed twice"),
    ("nodes: [pve1, {name: pve2}, {name: pve2, ssh: {host: h2}}]\n", "hypervisor.nodes[2]: node pve2 is listed twice"),
    ("nodes: [pve1, pve_2]\n", "hypervisor.nodes[1]: 'pve_2' is not a PVE node name"),
    ("nodes: [pve1, 7]\n", "hypervisor.nodes[1]: 7 is not a node name or a mapping"),
    ("nodes: []\n", "hypervisor.nodes: is all (every online node of the cluster) or a non-empty list of node names"),
    ("nodes: pve1\n", "hypervisor.nodes: is all (every online node of the cluster) or a non-empty list of node names"),
    ("nodes: [{ssh: {host: h}}]\n", "hypervisor.nodes[0].name: is required"),
    ("nodes: [{name: pve1, host: h}]\n", "hypervisor.nodes[0].host: unknown key (vmbench reads no such key here) | hint: allowed here: name, ssh"),
    ("nodes: [{name: pve1, ssh: {hostname: h}}]\n", "hypervisor.nodes[0].ssh.hostname: unknown key"),
    ("nodes: [{name: pve1, ssh: {password: x}}]\n", "hypervisor.nodes[0].ssh.password: vmbench never takes a password"),
    ("nodes: [pve1, pve2]\nssh: {host: 10.0.0.1}\n", "hypervisor.ssh.host: names one machine, but hypervisor.nodes names several"),
])
def test_mistakes_are_named_by_key(hv, want):
    assert want in error(hv)


def test_nodes_is_refused_for_libvirt():
    text = "name: t\nhypervisor: {driver: libvirt, nodes: [a, b]}\n" + JOBS
    with pytest.raises(ScenarioError, match="hypervisor.nodes: applies to driver proxmox"):
        parse_scenario(text, "/scen/t.yaml")


def test_place_names_nodes_and_a_run_across_nodes_needs_load():
    hv = parse("nodes: [pve1, pve2, pve3]\nplace: {pve2: 1, pve3: 2}\n").hypervisor
    assert hv.place == (("pve2", 1), ("pve3", 2))
    assert "names 'pve9', which is not one of the run's hosts (pve1, pve2)" in error("nodes: [pve1, pve2]\nplace: {pve9: 3}\n")
    assert "places VMs on several nodes; this scenario names one" in error("node: pve1\nplace: {pve1: 3}\n")
    text = "name: t\nhypervisor:\n" + textwrap.indent(textwrap.dedent(BASE + "nodes: [pve1, pve2]\n").strip() + "\n", "  ")
    with pytest.raises(ScenarioError, match="hypervisor.nodes: a run across several hosts spreads a load step's VMs"):
        parse_scenario(text + "jobs:\n  - {name: j1, rw: randwrite, bs: 4k}\n", "/scen/t.yaml")
