"""A Proxmox cluster as vmbench reads it before creating anything, and what refuses a run.

Read (all ``GET``, paths under ``/api2/json``):

- ``/nodes`` (any user): each node and whether it is ``online``; for ``nodes: all`` the run's
  nodes are read from it first (:func:`resolve_nodes`), before anything else;
- ``/cluster/status`` (``Sys.Audit`` on ``/``; optional): the cluster row's ``quorate``, the
  node rows' ``online``.  A standalone node has no cluster row;
- ``/cluster/resources``: ``node`` rows (``maxmem``, ``mem``), ``qemu`` rows (the template and
  its node), ``storage`` rows (one per node the storage is available on, with ``status`` and,
  from PVE 9, ``shared``);
- ``/storage`` (the storage configuration, where ``shared`` is missing from the rows, as in 8.4):
  a storage is shared when its entry says ``shared: 1`` or its type always is
  (pve-storage ``@SHARED_STORAGE``).

qemu-server's clone_vm (API2/Qemu.pm) refuses a clone with ``target`` (another node) when
any of the template's volumes, CD-ROM images included, is on storage that is not shared:
"can't clone VM to node 'X' (VM uses local storage)"; a linked clone's disks stay on the
template's storage, so that storage must also be available on the target node.  The pure
functions here say so before a VM exists, naming the node and what the template needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Mapping

from ...errors import PreflightError
from ...progress import NullProgress, Progress
from ...scenario.pvenodes import PVE_NODE_RE, every_node
from ...scenario.spec import Scenario
from ...units import human_size
from .api import PveApi, read_secret
from .config import parse_disk, storage_of

#: storage types PVE always treats as shared (pve-storage Plugin.pm ``@SHARED_STORAGE``;
#: glusterfs until PVE 9)
SHARED_TYPES = frozenset({"iscsi", "nfs", "cifs", "rbd", "cephfs", "iscsidirect", "zfs", "drbd", "pbs", "glusterfs"})
VOLUME_KEY_RE = re.compile(r"^((virtio|scsi|sata|ide)\d+|efidisk0|tpmstate0)$")
#: a template on local storage: what it needs for a run on other nodes
TEMPLATE_HINT = ("put the template's disks on storage every node of the run shares (rbd, nfs, ...: qm disk move), "
                 "detach a local ISO (qm set VMID --ide2 none), or run on the template's node only")
Problem = tuple[str, str]


def truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True)
class NodeState:
    name: str
    online: bool
    maxmem: int | None = None
    mem: int | None = None

    @property
    def free_mem(self) -> int | None:
        return None if self.maxmem is None or self.mem is None else max(0, self.maxmem - self.mem)


@dataclass(frozen=True)
class StorageRow:
    """A storage as one node sees it (a ``/cluster/resources`` storage row)."""

    storage: str
    node: str
    status: str
    plugintype: str
    shared: bool


@dataclass
class Inventory:
    """The cluster: its nodes, whether it is quorate (None: standalone or not readable),
    storages per node, VMs."""

    nodes: dict[str, NodeState] = field(default_factory=dict)
    quorate: bool | None = None
    clustered: bool = False
    storages: dict[tuple[str, str], StorageRow] = field(default_factory=dict)
    vms: list[dict] = field(default_factory=list)

    def storage(self, storage: str, node: str) -> StorageRow | None:
        return self.storages.get((storage, node))

    def shared(self, storage: str) -> bool | None:
        """Whether a storage is shared (None: no row names it)."""
        rows = [r for (sid, _), r in self.storages.items() if sid == storage]
        return any(r.shared for r in rows) if rows else None

    def online(self) -> list[str]:
        return sorted(n for n, s in self.nodes.items() if s.online)


def read_inventory(nodes: Iterable[Mapping], status: Iterable[Mapping] | None, resources: Iterable[Mapping],
                   storage_config: Iterable[Mapping] | None = None) -> Inventory:
    """The inventory from the answers of ``/nodes``, ``/cluster/status`` (None: not readable),
    ``/cluster/resources`` and ``/storage`` (for ``shared`` where the rows lack it)."""
    inv = Inventory()
    for row in nodes:
        name = str(row.get("node") or "")
        if name:
            inv.nodes[name] = NodeState(name, str(row.get("status")) == "online")
    for row in status or ():
        if row.get("type") == "cluster":
            inv.clustered, inv.quorate = True, truthy(row.get("quorate", 0))
        elif row.get("type") == "node" and row.get("name"):
            name = str(row["name"])
            online = truthy(row.get("online", 0)) and inv.nodes.get(name, NodeState(name, True)).online
            inv.nodes[name] = NodeState(name, online)
    config = {str(e.get("storage")): e for e in storage_config or ()}
    for row in resources:
        kind = row.get("type")
        if kind == "node" and row.get("node") in inv.nodes:
            old = inv.nodes[str(row["node"])]
            inv.nodes[old.name] = NodeState(old.name, old.online, _int(row.get("maxmem")), _int(row.get("mem")))
        elif kind == "storage" and row.get("storage") and row.get("node"):
            sid, ptype = str(row["storage"]), str(row.get("plugintype") or "")
            shared = truthy(row["shared"]) if "shared" in row else config_shared(config.get(sid), ptype)
            inv.storages[(sid, str(row["node"]))] = StorageRow(sid, str(row["node"]), str(row.get("status") or ""), ptype, shared)
        elif kind == "qemu":
            inv.vms.append(dict(row))
    return inv


def online_nodes(rows: Iterable[Mapping]) -> tuple[list[str], list[str]]:
    """GET /nodes -> (the nodes whose status is online, sorted by name; the others, sorted)."""
    names = {str(r.get("node") or ""): str(r.get("status")) == "online" for r in rows}
    names.pop("", None)
    return sorted(n for n, up in names.items() if up), sorted(n for n, up in names.items() if not up)


def resolve_nodes(scenario: Scenario, api: "PveApi | None" = None, progress: Progress | None = None) -> Scenario:
    """``nodes: all`` as the node list it stands for: one GET /nodes through the API client the
    driver uses, the online nodes sorted by name (the others named in a warning); no online node
    refuses the run.  Any other scenario is returned as it is, without a request."""
    hv = scenario.hypervisor
    if not hv.all_nodes:
        return scenario
    assert hv.proxmox is not None
    progress = progress or NullProgress()
    own = api is None
    if api is None:
        api = PveApi(hv.proxmox, read_secret(hv.proxmox))
    try:
        online, offline = online_nodes(api.get("/nodes") or [])
    finally:
        if own:
            api.session.close()
    odd = [n for n in online if not PVE_NODE_RE.fullmatch(n)]
    online = [n for n in online if n not in odd]
    if offline or odd:
        progress.warn("hypervisor.nodes: all: left out of the run: " + ", ".join(
            [f"{n} (offline)" for n in offline] + [f"{n!r} (not a PVE node name)" for n in odd]))
    if not online:
        raise PreflightError(f"hypervisor.nodes is all, but the cluster at {hv.proxmox.url} has no online node"
                             + (f" (offline: {', '.join(offline)})" if offline else ""),
                             "bring a node back (pvecm status on a node says who is in), then run again")
    progress.step(f"nodes: all: the run's nodes are the cluster's online nodes: {', '.join(online)}")
    return replace(scenario, hypervisor=every_node(hv, online))


def config_shared(entry: Mapping | None, plugintype: str) -> bool:
    """``shared`` as PVE's storage configuration parser sets it: the entry's flag, or its type."""
    kind = str((entry or {}).get("type") or plugintype)
    return kind in SHARED_TYPES or truthy((entry or {}).get("shared", 0))


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


# ---- what refuses a run ---------------------------------------------------------------------


def node_problem(inv: Inventory, node: str, key: str = "", where: str = "") -> Problem | None:
    """The node is not in the cluster, or offline (``key``: the scenario key naming it;
    ``where``: the cluster's API URL)."""
    label = f"node {node}" + (f" ({key})" if key else "")
    at = f" at {where}" if where else ""
    if node not in inv.nodes:
        return (f"{label} is not in the cluster{at}", "nodes: " + (", ".join(sorted(inv.nodes)) or
                                                                 "none visible to the token (it needs Sys.Audit)"))
    if not inv.nodes[node].online:
        return (f"{label} is offline{at}", f"bring it back (pvecm status on a node says who is in), or leave {node} out "
                f"of hypervisor.nodes; online: {', '.join(inv.online()) or 'none'}")
    return None


def quorum_problem(inv: Inventory) -> Problem | None:
    if inv.clustered and inv.quorate is False:
        online = inv.online()
        offline = [n for n in inv.nodes if n not in online]
        return (f"the cluster is not quorate ({len(online)} of {len(inv.nodes)} nodes online: {', '.join(online) or 'none'}"
                + (f"; offline: {', '.join(offline)}" if offline else "") + "): "
                "Proxmox refuses to create VMs", "bring the nodes back until pvecm status says Quorate: Yes")
    return None


def storage_problem(inv: Inventory, storage: str, node: str, what: str = "hypervisor.storage") -> Problem | None:
    """The storage is not configured for the node, or not available there."""
    row = inv.storage(storage, node)
    if row is None:
        where = sorted(n for (sid, n) in inv.storages if sid == storage)
        return (f"storage {storage} ({what}) is not available on node {node}",
                (f"it is on {', '.join(where)}; " if where else "no node lists it; ")
                + f"add {node} to its nodes (pvesm set {storage} --nodes ...) or leave {node} out of the run")
    if row.status != "available":
        return (f"storage {storage} ({what}) is {row.status or 'not available'} on node {node}",
                f"pvesm status on {node} says why (not mounted, disabled...)")
    return None


def template_volumes(config: Mapping[str, Any]) -> dict[str, str]:
    """Every drive of a VM config -> its volume id, CD-ROM images included (as qemu-server's
    foreach_volume sees them); 'none', 'cdrom' (the host's drive) and paths left out."""
    out = {}
    for key, value in config.items():
        if VOLUME_KEY_RE.match(key):
            volid, _ = parse_disk(str(value))
            if volid and volid not in ("none", "cdrom") and ":" in volid:
                out[key] = volid
    return out


def template_problem(inv: Inventory, vmid: int, template_node: str, config: Mapping[str, Any], node: str) -> Problem | None:
    """A clone of template ``vmid`` (on ``template_node``) onto ``node``: refused as qemu-server
    refuses it (a volume on storage that is not shared), or when a volume's storage is not
    available on ``node`` (the linked clone's disk stays on it)."""
    if node == template_node:
        return None
    volumes = sorted(template_volumes(config).items())
    local = [(k, v) for k, v in volumes if not inv.shared(storage_of(v))]
    if local:
        what = ", ".join(f"{k} on {storage_of(v)}" for k, v in local)
        return (f"template {vmid} is on node {template_node} with volumes on storage that is not shared ({what}): Proxmox "
                f"cannot clone it to node {node} (qemu-server: can't clone VM to node '{node}' (VM uses local storage))",
                TEMPLATE_HINT)
    for key, volid in volumes:
        problem = storage_problem(inv, storage_of(volid), node, f"of template {vmid}'s {key}")
        if problem:
            return problem
    return None


def memory_problem(inv: Inventory, node: str, need: int, what: str = "the step's VMs") -> Problem | None:
    """``need`` bytes of guest memory do not fit the node's free memory (unknown: no problem)."""
    free = inv.nodes[node].free_mem if node in inv.nodes else None
    if free is None or need <= free:
        return None
    return (f"{what} need {human_size(need)} of memory on node {node}, which has {human_size(free)} free",
            f"place fewer VMs on {node} (hypervisor.place), give them less memory, or free memory there")
