"""A Proxmox run's nodes (``hypervisor.node`` or ``hypervisor.nodes``) and each node's SSH.

One cluster API endpoint (``host``, ``port``, ``token``) serves every node; host fio, facts
and evidence run over SSH on the node itself.  ``node: pve1`` is one node whose SSH host is
``ssh.host`` (default: the API host).  ``nodes: [pve1, pve2, {name: pve3, ssh: {host: ...}}]``
is several: a node's SSH host is its name (cluster nodes resolve one another by name, and an
admin reaches them as root@pve2), unless its own ``ssh.host`` says otherwise; every other SSH
setting (port, user, key_file, known_hosts) comes from the top-level ``ssh:`` unless the node's
own ``ssh:`` gives it.  The top-level ``ssh.host`` names one machine, so it is refused with
``nodes``.  The run's hosts are the nodes in the order given (:func:`node_members`).

``nodes: all`` is every node of the cluster that is online when the run starts: the scenario
holds no node then (``Hypervisor.all_nodes``); the CLI reads the cluster's nodes (GET /nodes)
before anything else and gives the run :func:`every_node`, the same Hypervisor as a list of
those names would give.  ``vmbench plan`` does not read them: it says so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Sequence

from .model import Hypervisor, SshConfig
from .parsers import pattern_parser
from .reader import Section, as_int, as_name, as_str, items

PVE_NODE_RE = re.compile(r"[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?")
NODE_KEYS = ("name", "ssh")
SSH_KEYS = ("host", "port", "user", "key_file", "known_hosts")
NODE_NAME = pattern_parser(PVE_NODE_RE, "a PVE node name (letters, digits, -)")
NODES_HINT = ("list the cluster's node names: nodes: [pve1, pve2], or {name: pve2, ssh: {host: 10.0.0.12}} for a node's own SSH; "
              "or nodes: all for every node online when the run starts")


@dataclass(frozen=True)
class PveNodeSpec:
    """One node of the scenario: its name and how vmbench reaches it over SSH."""

    name: str
    ssh: SshConfig


def host_name(value: Any) -> str:
    text = as_str(value)
    if not re.fullmatch(r"[A-Za-z0-9.:\-\[\]]+", text) or text.startswith("-"):
        raise ValueError(f"{text!r} is not a host name or address")
    return text


def user_path(value: Any) -> str:
    text = as_str(value)
    if not text or "\0" in text:
        raise ValueError(f"{text!r} is not a file path")
    return str(Path(text).expanduser())


def read_ssh(sub: Section, default: SshConfig) -> SshConfig:
    """An ``ssh:`` mapping over ``default`` (each key it leaves out is the default's)."""
    if sub.has("password"):
        raise sub.fail("password", "vmbench never takes a password; use ssh-agent or key_file", "remove the key")
    ssh_host = sub.get("host", host_name, default.host)
    port = sub.get("port", as_int(1, 65535), default.port)
    user = sub.get("user", as_name, default.user)
    key_file = sub.get("key_file", user_path, default.key_file)
    known_hosts = sub.get("known_hosts", user_path, default.known_hosts)
    sub.done(SSH_KEYS)
    return SshConfig(host=ssh_host.strip("[]"), port=port, user=user, key_file=key_file, known_hosts=known_hosts)


def read_node(sec: Section) -> str:
    """``node:`` (one node) or the first of ``nodes:``; exactly one of them."""
    if sec.has("node") and sec.has("nodes"):
        raise sec.fail("nodes", "give node (one node) or nodes (several), not both",
                       "keep nodes: [...] and remove node, or keep node for a one-node run")
    if not sec.has("node") and not sec.has("nodes"):
        raise sec.fail("node", "is required for driver proxmox: the PVE node the VMs run on, as the cluster names it "
                       "(or nodes: [pve1, pve2, ...] for several)")
    if sec.has("node"):
        return sec.get("node", NODE_NAME)
    return ""


def read_nodes(sec: Section, ssh_default: SshConfig) -> tuple[PveNodeSpec, ...]:
    """``nodes:`` as specs in order (``ssh_default``: the top-level ``ssh:`` read over root@:22,
    its host unused); () without the key."""
    if not sec.has("nodes"):
        return ()
    raw = sec.raw("nodes")
    if wants_all(sec):
        return ()
    if not isinstance(raw, list) or not raw:
        raise sec.fail("nodes", "is all (every online node of the cluster) or a non-empty list of node names", NODES_HINT)
    out: list[PveNodeSpec] = []
    lines: dict[str, int] = {}
    for path, line, value in items(sec.ctx, raw, f"{sec.path}.nodes", sec.line_of("nodes")):
        spec = _node_spec(sec, path, line, value, ssh_default)
        if spec.name in lines:
            raise sec.ctx.fail(path, line, f"node {spec.name} is listed twice (first on line {lines[spec.name]})",
                               "list each node once")
        lines[spec.name] = line
        out.append(spec)
    return tuple(out)


def wants_all(sec: Section) -> bool:
    """Whether the section says ``nodes: all``."""
    raw = sec.raw("nodes", None)
    return isinstance(raw, str) and raw.strip() == "all"


def _node_spec(sec: Section, path: str, line: int, value: Any, ssh_default: SshConfig) -> PveNodeSpec:
    if isinstance(value, dict):
        sub = Section(sec.ctx, value, path, line)
        sub.done(NODE_KEYS)
        if not sub.has("name"):
            raise sub.fail("name", "is required: the node's name, as the cluster names it (pvecm nodes)")
        name = sub.get("name", NODE_NAME)
        ssh = read_ssh(sub.section("ssh"), replace(ssh_default, host=name))
        return PveNodeSpec(name, ssh)
    if isinstance(value, bool) or not isinstance(value, str):
        raise sec.ctx.fail(path, line, f"{value!r} is not a node name or a mapping {{name: NODE, ssh: {{...}}}}", NODES_HINT)
    try:
        name = NODE_NAME(value)
    except ValueError as exc:
        raise sec.ctx.fail(path, line, str(exc), NODES_HINT) from None
    return PveNodeSpec(name, replace(ssh_default, host=name))


def node_members(top: Hypervisor, nodes: tuple[PveNodeSpec, ...]) -> Hypervisor:
    """``top`` (the first node's settings) with ``hosts``: one whole one-node Hypervisor per
    node, the same API settings with ``node`` replaced, its own SSH, named after the node."""
    if not nodes:
        return top
    assert top.proxmox is not None
    members = []
    for spec in nodes:
        cfg = replace(top.proxmox, node=spec.name)
        members.append(replace(top, proxmox=cfg, ssh=spec.ssh, name=spec.name, uri=f"{cfg.url}/api2/json/nodes/{spec.name}",
                               hosts=()))
    return replace(members[0], hosts=tuple(members))


def every_node(top: Hypervisor, names: Sequence[str]) -> Hypervisor:
    """A ``nodes: all`` Hypervisor (``top``) as the node list ``names`` (the nodes online when the
    run started): each node's SSH host is its name, the rest of its SSH the top-level ``ssh:``'s,
    exactly as a plain name in ``nodes: [...]``; round robin (``place:`` names no node here)."""
    assert top.all_nodes and top.ssh is not None and names
    for name in names:
        NODE_NAME(name)  # a name the cluster gave: still never an SSH option or a path
    specs = tuple(PveNodeSpec(name, replace(top.ssh, host=name)) for name in names)
    return node_members(replace(top, all_nodes=False, place=()), specs)
