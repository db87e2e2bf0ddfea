"""The Proxmox VE privileges each vmbench step needs, per PVE major version, with the ACL
path each applies to: the one table (:data:`RIGHTS`) that ``vmbench doctor``, ``vmbench
run``'s and ``vmbench images push``'s preflight, ``vmbench setup proxmox`` and
docs/proxmox.md are made from (:mod:`.recipe` renders it).

Checked against the two API schemas (each method's ``permissions``) and, where a schema
says "see description" or leaves a check to the handler, against the sources: qemu-server
(``$check_vm_modify_config_perm``: each config option's privilege; ``$check_storage_access``
and ``$check_storage_access_clone``: Datastore.AllocateSpace on the storages disks are made
on; ``check_bridge_access``: SDN.Use on a NIC's bridge), pve-storage
(``check_volume_access``: a VM's volume needs Datastore.Audit on its storage and
VM.Config.Disk on its VM; the storage lists show only storages with Datastore.Audit or
Datastore.AllocateSpace) and pve-access-control (PVE 8's agent endpoints check VM.Monitor;
PVE 9 has no VM.Monitor: they check VM.GuestAgent.*, of which VM.GuestAgent.Unrestricted
covers every call vmbench makes).  tests/unit/test_proxmox_rights.py proves the table covers
every API method vmbench calls on both schemas.

The check itself reads the token's effective privileges with ``GET /access/permissions
?path=P`` for each path the scenario's steps need, as PVE computes them for a
privilege-separated token: what both the token and its user have, a more specific ACL
replacing the one inherited for that path.  A path standing for objects that do not exist
yet (``/vms``: the VMIDs a run takes; ``/storage``: its temporary storage entries) needs the
privilege *propagated* there."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum
from typing import Any, Iterable, Mapping, Protocol

MAJORS = (8, 9)


class Step(Enum):
    RUN = "run"
    ENTRIES = "run: temporary storage entries"  # zvols of a stated volblocksize; krbd cells
    RBD = "run: storage.type rbd"
    DOCTOR = "doctor"
    CLEANUP = "cleanup"
    PUSH = "images push"


class Where(Enum):
    """The ACL path a privilege is needed on.  ``propagated``: the path stands for objects
    that do not exist yet, so the ACL must propagate from it."""

    VMS = "/vms"  # every VMID vmbench takes (clones; the template images push makes)
    TEMPLATE = "/vms/{template}"
    STORAGE = "/storage/{storage}"  # hypervisor.storage
    TEMPLATE_STORAGE = "/storage/{template_storage}"  # each storage the template's disks are on
    IMPORT = "/storage/{import}"  # the storage images push uploads into (content import)
    STORAGES = "/storage"  # the temporary storage entries of a run
    NODE = "/nodes/{node}"
    ROOT = "/"
    BRIDGE = "/sdn/zones/localnetwork/{bridge}"  # each bridge (VLAN) a NIC of the template is on

    @property
    def propagated(self) -> bool:
        return self in (Where.VMS, Where.STORAGES)


@dataclass(frozen=True)
class Right:
    """One row of the table: ``step`` needs ``privilege`` on ``where`` (on PVE ``majors``), for ``why``."""

    step: Step
    where: Where
    privilege: str
    why: str
    majors: tuple[int, ...] = MAJORS
    optional: bool = False  # without it vmbench does less, and says so


def _rows(step: Step, where: Where, rows: Iterable[tuple[str, str]], **kw: Any) -> tuple[Right, ...]:
    return tuple(Right(step, where, priv, why, **kw) for priv, why in rows)


AGENT_CALLS = "guest agent: ping, exec, exec-status, file-read, file-write"
#: the privilege the agent endpoints check: PVE 8 VM.Monitor; PVE 9 VM.GuestAgent.* (Unrestricted covers exec)
AGENT = {8: "VM.Monitor", 9: "VM.GuestAgent.Unrestricted"}
RUN_VMS = (
    ("VM.Allocate", "a new VMID for each clone (clone newid), destroyed at the end"),
    ("VM.Audit", "each clone's config and status read back"),
    ("VM.Config.CPU", "cores, sockets, cpu"),
    ("VM.Config.Disk", "the scratch disk added; its volume's path read"),
    ("VM.Config.HWType", "kvm, scsihw"),
    ("VM.Config.Memory", "memory"),
    ("VM.Config.Options", "tags, description, protection, onboot, agent"),
    ("VM.PowerMgmt", "start, stop"),
)
RIGHTS: tuple[Right, ...] = (
    *_rows(Step.RUN, Where.TEMPLATE, [("VM.Audit", "the template found (/cluster/resources) and its config read"),
                                      ("VM.Clone", "linked clones of it")]),
    *_rows(Step.RUN, Where.TEMPLATE_STORAGE, [("Datastore.AllocateSpace", "the clones' disks made there (linked clone)"),
                                              ("Datastore.Audit", "across nodes: whether it is shared and on the run's node "
                                                                  "(/cluster/resources)")]),
    *_rows(Step.RUN, Where.VMS, RUN_VMS),
    Right(Step.RUN, Where.VMS, AGENT[8], AGENT_CALLS, majors=(8,)),
    Right(Step.RUN, Where.VMS, AGENT[9], AGENT_CALLS, majors=(9,)),
    *_rows(Step.RUN, Where.STORAGE, [("Datastore.AllocateSpace", "the scratch disk and the host reference volume"),
                                     ("Datastore.Audit", "the volumes' paths; no disk left behind; across nodes: whether "
                                                         "it is on the run's node")]),
    Right(Step.RUN, Where.BRIDGE, "SDN.Use", "a template with a NIC: each clone's NIC on that bridge"),
    Right(Step.RUN, Where.NODE, "Sys.Audit", "the node's kernel, CPU and memory recorded; its free memory checked "
                                             "before each load step", optional=True),
    Right(Step.RUN, Where.ROOT, "Sys.Audit", "a cluster's quorum checked (/cluster/status)", optional=True),
    *_rows(Step.ENTRIES, Where.STORAGES, [("Datastore.Allocate", "the entries added and removed (POST, DELETE /storage; "
                                                                 "vmbench cleanup: with orphan volumes on them); their "
                                                                 "volumes' paths"),
                                          ("Datastore.AllocateSpace", "the scratch disks made on them; listed (cleanup)")]),
    Right(Step.RBD, Where.STORAGE, "Datastore.Allocate", "the rbd storage's configuration read (GET /storage/ID: pool, "
                                                         "monitors, keyring)"),
    *_rows(Step.DOCTOR, Where.TEMPLATE, [("VM.Audit", "the template found and its config read")]),
    *_rows(Step.DOCTOR, Where.TEMPLATE_STORAGE, [("Datastore.Audit", "its status")]),
    *_rows(Step.DOCTOR, Where.STORAGE, [("Datastore.Audit", "its status")]),
    Right(Step.DOCTOR, Where.NODE, "Sys.Audit", "the node's kernel, CPU and memory recorded", optional=True),
    *_rows(Step.CLEANUP, Where.VMS, [("VM.Audit", "vmbench's VMs found"), ("VM.PowerMgmt", "stopped"),
                                     ("VM.Allocate", "destroyed"),
                                     ("VM.Config.Disk", "their disks listed (no disk left behind)")]),
    *_rows(Step.CLEANUP, Where.STORAGE, [("Datastore.Audit", "no disk left behind")]),
    *_rows(Step.PUSH, Where.TEMPLATE, [("VM.Allocate", "the template VM made and converted (--replace: the old one destroyed)"),
                                 ("VM.Audit", "its config read back"),
                                 ("VM.Config.CPU", "cores"), ("VM.Config.Disk", "boot order"),
                                 ("VM.Config.HWType", "scsihw, a serial console"), ("VM.Config.Memory", "memory"),
                                 ("VM.Config.Options", "name, description, tags, agent, ostype")]),
    *_rows(Step.PUSH, Where.STORAGE, [("Datastore.AllocateSpace", "the template's disk; its status")]),
    *_rows(Step.PUSH, Where.IMPORT, [("Datastore.Allocate", "its directory read (GET /storage/ID), to upload into"),
                                     ("Datastore.Audit", "listed as taking imports (the storage lists show only storages "
                                                         "with it or AllocateSpace)")]),
)


def major_of(version: str | None) -> int | None:
    """8 or 9 from ``/version``'s ``version`` (``8.4.1``); a later major is read as 9's
    rules, an earlier as 8's; None when unknown."""
    m = re.match(r"(\d+)\.", str(version or ""))
    if not m:
        return None
    return min(max(int(m.group(1)), MAJORS[0]), MAJORS[-1])


def run_steps(*, zfs_entries: bool, krbd_cells: bool, rbd: bool) -> tuple[Step, ...]:
    """The steps a run makes: temporary storage entries for zvols of a stated volblocksize
    and for krbd cells; an rbd storage's configuration read."""
    return (Step.RUN, *([Step.ENTRIES] if zfs_entries or krbd_cells else []), *([Step.RBD] if rbd else []))


def rights_for(steps: Iterable[Step], major: int) -> tuple[Right, ...]:
    wanted = set(steps)
    return tuple(r for r in RIGHTS if r.step in wanted and major in r.majors)


# ---- a setup's concrete paths ---------------------------------------------------------------


@dataclass(frozen=True)
class Setup:
    """What fills the paths in: the scenario's node, template, storages."""

    node: str
    storage: str
    template: int | None = None  # None: any VMID (a recipe; a name not found): its rights on /vms
    template_storages: tuple[str, ...] = ()
    import_storage: str | None = None
    bridges: tuple[str, ...] = ()  # zone path below /sdn/zones/localnetwork: vmbr0, or vmbr0/10 (a VLAN tag)
    clustered: bool = True  # False: a standalone node (no quorum to read on /)

    def paths(self, where: Where) -> tuple[str, ...]:
        if where is Where.TEMPLATE:  # not known (a recipe for any template; a name not found): on /vms
            return (f"/vms/{self.template}",) if self.template is not None else ("/vms",)
        if where is Where.STORAGE:
            return (f"/storage/{self.storage}",)
        if where is Where.TEMPLATE_STORAGE:
            return tuple(f"/storage/{s}" for s in self.template_storages)
        if where is Where.IMPORT:
            return (f"/storage/{self.import_storage}",) if self.import_storage else ()
        if where is Where.NODE:
            return (f"/nodes/{self.node}",)
        if where is Where.BRIDGE:
            return tuple(f"/sdn/zones/localnetwork/{b}" for b in self.bridges)
        if where is Where.ROOT and not self.clustered:
            return ()
        return (where.value,)


@dataclass(frozen=True)
class Need:
    """A privilege needed on one concrete path, with every reason (merged over the steps)."""

    path: str
    privilege: str
    why: str
    propagated: bool = False
    optional: bool = False


def needs(setup: Setup, steps: Iterable[Step], major: int) -> list[Need]:
    """Every (path, privilege) the steps need on this setup, in table order, merged: required
    if any row requires it, propagated if any row needs it so."""
    merged: dict[tuple[str, str], Need] = {}
    for r in rights_for(steps, major):
        for path in setup.paths(r.where):
            key = (path, r.privilege)
            old = merged.get(key)
            # a template not known stands for any VMID: on /vms, propagated
            propagated = r.where.propagated or (r.where is Where.TEMPLATE and setup.template is None)
            if old is None:
                merged[key] = Need(path, r.privilege, r.why, propagated, r.optional)
            else:
                why = "; ".join(dict.fromkeys(old.why.split("; ") + r.why.split("; ")))
                merged[key] = Need(path, r.privilege, why, old.propagated or propagated, old.optional and r.optional)
    return list(merged.values())


# ---- what the token has ---------------------------------------------------------------------


class PermissionsApi(Protocol):
    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any: ...


Permissions = dict[str, dict[str, int]]  # path -> {privilege: propagate (1/0)}


def read_permissions(api: PermissionsApi, paths: Iterable[str]) -> Permissions:
    """``GET /access/permissions?path=P`` for each path: the token's effective privileges
    there (what PVE's own checks use), each with its propagation flag."""
    out: Permissions = {}
    for path in dict.fromkeys(paths):
        got = api.get("/access/permissions", {"path": path}) or {}
        row = got.get(path) if isinstance(got, dict) else None
        out[path] = {str(k): int(str(v) in ("1", "True", "true")) for k, v in (row or {}).items()}
    return out


@dataclass(frozen=True)
class Missing:
    need: Need
    unpropagated: bool = False  # granted on the path, but not propagated to what it stands for

    @property
    def text(self) -> str:
        tail = " (granted there without propagation)" if self.unpropagated else ""
        return f"{self.need.privilege} on {self.need.path}{tail}"


def missing(wanted: Iterable[Need], have: Permissions) -> list[Missing]:
    out = []
    for n in wanted:
        privs = have.get(n.path, {})
        if n.privilege not in privs:
            out.append(Missing(n))
        elif n.propagated and privs[n.privilege] != 1:
            out.append(Missing(n, unpropagated=True))
    return out


def hidden_storages(everything: Permissions) -> list[str]:
    """Storages on whose path the token has an ACL but neither Datastore.Audit nor
    Datastore.AllocateSpace: PVE's storage lists leave them out (``GET /access/permissions``
    without a path lists every path an ACL names)."""
    out = []
    for path, privs in sorted(everything.items()):
        m = re.fullmatch(r"/storage/([^/]+)", path)
        if m and "Datastore.Audit" not in privs and "Datastore.AllocateSpace" not in privs:
            out.append(m.group(1))
    return out
