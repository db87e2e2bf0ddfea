"""The rights table (vmbench/drivers/proxmox/rights.py) against the two API schemas: for every
API method vmbench's Proxmox code calls (read from its source), the schema's ``permissions``
and the checks qemu-server, pve-storage and pve-manager make in the handler (where the schema
says "see description") pass for a privilege-separated token granted exactly what the table
says the step needs, as ACLs the recipe makes (tests/fakepve/perms.py evaluates them as PVE
does); and the table holds nothing more: each privilege it lists, taken away, makes one of
the step's calls fail.  Also: docs/proxmox.md shows what the table renders, and the recipe's
and the doctor hints' roles agree."""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.fakepve import vmperms
from tests.fakepve.perms import Access, PermissionDenied
from tests.fakepve.schema import Api
from vmbench.drivers.proxmox.config import vm_options
from vmbench.drivers.proxmox.recipe import ALL_STEPS, DOCS_SETUP, DOCS_TOKEN, docs_blocks, grant_hint, plan_acls, recipe, render_docs
from vmbench.drivers.proxmox.rights import (AGENT, RIGHTS, Missing, Need, Setup, Step, Where, hidden_storages, major_of,
                                            missing, needs)
from vmbench.drivers.proxmox.template import TemplateIdentity, create_params
from vmbench.scenario.model import VmConfig

ROOT = Path(__file__).resolve().parents[2]
VERSIONS = ["8.4", "9.1"]
TOKEN = "vmbench@pve!bench"
NODE, T, N, S, TS, I, E = "pve1", 9000, 100, "scratch", "tmplstore", "imp", "vmbench-r0a1b2c3d-16k"
SETUP = Setup(node=NODE, storage=S, template=T, template_storages=(TS,), import_storage=I, bridges=("vmbr0",))
ANY = True


class Call(NamedTuple):
    """An API method vmbench calls, with the parameters that fill its permission paths, and
    the checks its handler makes beyond the schema: (path, privileges, any of them)."""

    method: str
    path: str
    params: dict
    handler: tuple[tuple[str, tuple[str, ...], bool], ...] = ()


def vm(vmid: int) -> dict:
    return {"node": NODE, "vmid": vmid}


def st(sid: str) -> dict:
    return {"node": NODE, "storage": sid}


def volume_access(sid: str, owner: int) -> tuple:
    """pve-storage check_volume_access of a VM's disk: Datastore.Allocate there, or Audit there
    and VM.Config.Disk on the VM."""
    return ((f"/storage/{sid}", ("Datastore.Allocate", "Datastore.Audit"), ANY),
            *([] if sid == E else [(f"/vms/{owner}", ("VM.Config.Disk",), False)]))


def option_checks(vmid: int, keys) -> tuple:
    """qemu-server's $check_vm_modify_config_perm of the options vmbench sets (drives: VM.Config.Disk, in the task)."""
    out = []
    for key in keys:
        for group, priv in ((vmperms.CPU, "VM.Config.CPU"), (vmperms.MEMORY, "VM.Config.Memory"),
                            (vmperms.HWTYPE, "VM.Config.HWType"), (vmperms.GENERAL | {"tags"}, "VM.Config.Options"),
                            (vmperms.DISK, "VM.Config.Disk")):
            if key in group:
                out.append((f"/vms/{vmid}", (priv,), False))
        if re.fullmatch(r"(scsi|virtio|sata|ide)\d+", key):
            out.append((f"/vms/{vmid}", ("VM.Config.Disk",), False))
        if key.startswith("serial"):
            out.append((f"/vms/{vmid}", ("VM.Config.HWType",), False))
    return tuple(out)


CONFIG = "/nodes/{node}/qemu/{vmid}/config"
CONTENT = "/nodes/{node}/storage/{storage}/content"
VOLUME = CONTENT + "/{volume}"
STATUS = "/nodes/{node}/storage/{storage}/status"
CLONE_OPTIONS = ["tags", "protection", "onboot", "description", *vm_options(VmConfig(), kvm=True), "scsi1"]
PUSH_OPTIONS = [k for k in create_params(T, "t", TemplateIdentity("r", "0" * 64, "1"), S, "dir", "imp:import/x.qcow2", "now")
                if k != "vmid"]
TASKS = [Call("GET", "/nodes/{node}/tasks/{upid}/status", {"node": NODE, "upid": "UPID:x"}),  # their owner: no privilege
         Call("GET", "/nodes/{node}/tasks/{upid}/log", {"node": NODE, "upid": "UPID:x"})]
READS = [Call("GET", "/version", {}), Call("GET", "/nodes", {}), Call("GET", "/cluster/nextid", {}),
         Call("GET", "/access/permissions", {"path": "/vms"})]
RUN = READS + TASKS + [
    Call("GET", "/cluster/status", {}),
    Call("GET", "/cluster/resources", {"type": "vm"}, ((f"/vms/{T}", ("VM.Audit",), False),)),  # listed with VM.Audit only
    Call("GET", "/cluster/resources", {"type": "storage"}, ((f"/storage/{TS}", ("Datastore.Audit",), False),
                                                             (f"/storage/{S}", ("Datastore.Audit",), False))),
    Call("GET", "/storage", {}, ((f"/storage/{S}", ("Datastore.Audit", "Datastore.AllocateSpace"), ANY),)),
    Call("GET", CONFIG, vm(T)), Call("GET", CONFIG, vm(N)),
    Call("GET", STATUS, st(TS)), Call("GET", STATUS, st(S)),
    Call("GET", "/nodes/{node}/capabilities/qemu/cpu", {"node": NODE}),
    Call("GET", "/nodes/{node}/status", {"node": NODE}),
    Call("POST", "/nodes/{node}/qemu/{vmid}/clone", {**vm(T), "newid": N},  # $check_storage_access_clone, check_bridge_access
         ((f"/storage/{TS}", ("Datastore.AllocateSpace",), False), ("/sdn/zones/localnetwork/vmbr0", ("SDN.Use",), False))),
    Call("POST", CONFIG, vm(N), (*option_checks(N, CLONE_OPTIONS), (f"/storage/{S}", ("Datastore.AllocateSpace",), False))),
    Call("POST", CONTENT, st(S)),
    Call("GET", VOLUME, {**st(S), "volume": f"{S}:vm-{N}-disk-1"}, volume_access(S, N)),
    Call("GET", CONTENT, st(S), volume_access(S, N)),
    *[Call(m, f"/nodes/{{node}}/qemu/{{vmid}}/{p}", vm(N)) for m, p in [
        ("POST", "status/start"), ("GET", "status/current"), ("POST", "status/stop"), ("POST", "agent/ping"),
        ("POST", "agent/exec"), ("GET", "agent/exec-status"), ("GET", "agent/file-read"), ("POST", "agent/file-write")]],
    Call("DELETE", "/nodes/{node}/qemu/{vmid}", vm(N)),
]
ENTRIES = [
    Call("POST", "/storage", {"storage": E, "type": "zfspool"}),
    Call("POST", CONFIG, vm(N), (*option_checks(N, ["scsi1"]), (f"/storage/{E}", ("Datastore.AllocateSpace",), False))),
    Call("GET", VOLUME, {**st(E), "volume": f"{E}:vm-{N}-disk-1"}, volume_access(E, N)),
    Call("GET", CONTENT, st(E), volume_access(E, N)),
    Call("DELETE", "/storage/{storage}", {"storage": E}),
    # vmbench cleanup of a run's entries: listed, read, orphan volumes freed, removed
    Call("GET", "/storage", {}, ((f"/storage/{E}", ("Datastore.Audit", "Datastore.AllocateSpace"), ANY),)),
    Call("GET", "/storage/{storage}", {"storage": E}),
    Call("DELETE", VOLUME, {**st(E), "volume": f"{E}:vm-{N}-disk-1"}, ((f"/storage/{E}", ("Datastore.Allocate",), False),)),
]
RBD = [Call("GET", "/storage/{storage}", {"storage": S})]
DOCTOR = READS + [Call("GET", "/cluster/resources", {"type": "vm"}, ((f"/vms/{T}", ("VM.Audit",), False),)),
                  Call("GET", CONFIG, vm(T)), Call("GET", STATUS, st(TS)), Call("GET", STATUS, st(S)),
                  Call("GET", "/nodes/{node}/status", {"node": NODE}), Call("GET", "/storage", {})]
CLEANUP = READS + TASKS + [
    Call("GET", "/cluster/resources", {"type": "vm"}, ((f"/vms/{N}", ("VM.Audit",), False),)),
    Call("GET", CONFIG, vm(N)), Call("GET", "/nodes/{node}/qemu/{vmid}/status/current", vm(N)),
    Call("POST", "/nodes/{node}/qemu/{vmid}/status/stop", vm(N)), Call("DELETE", "/nodes/{node}/qemu/{vmid}", vm(N)),
    Call("GET", CONTENT, st(S), volume_access(S, N)),
]
PUSH = READS + TASKS + [
    Call("GET", "/cluster/resources", {"type": "vm"}),
    Call("GET", STATUS, st(S)),
    Call("GET", "/nodes/{node}/storage", {"node": NODE, "content": "import"},
         ((f"/storage/{I}", ("Datastore.Audit", "Datastore.AllocateSpace"), ANY),)),
    Call("GET", "/storage/{storage}", {"storage": I}),
    Call("GET", CONTENT, st(I), ((f"/storage/{I}", ("Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit"), ANY),)),
    Call("POST", "/nodes/{node}/qemu", {**vm(T)},  # create_vm: VM.Allocate, the new disk's storage, import-from's source
         ((f"/vms/{T}", ("VM.Allocate",), False), (f"/storage/{S}", ("Datastore.AllocateSpace",), False),
          (f"/storage/{I}", ("Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit"), ANY),
          *option_checks(T, PUSH_OPTIONS))),
    Call("GET", CONFIG, vm(T)),
    Call("POST", "/nodes/{node}/qemu/{vmid}/template", vm(T)),
    Call("DELETE", "/nodes/{node}/qemu/{vmid}", vm(T)),  # --replace
]
#: each step's calls, and the steps whose rights it is made with
GROUPS = {"run": ((Step.RUN,), RUN), "run with temporary entries": ((Step.RUN, Step.ENTRIES), RUN + ENTRIES),
          "run on rbd": ((Step.RUN, Step.RBD), RUN + RBD), "doctor": ((Step.DOCTOR,), DOCTOR),
          "cleanup": ((Step.CLEANUP,), CLEANUP), "cleanup of temporary entries": ((Step.CLEANUP, Step.ENTRIES), CLEANUP + ENTRIES[5:]),
          "images push": ((Step.PUSH,), PUSH)}


def granted(version: str, steps, drop: tuple[str, str] | None = None) -> Access:
    """A node whose privilege-separated token (and its user) has the recipe's ACLs for
    ``steps`` on SETUP, less ``drop`` (path, privilege) from the role of that path's ACL."""
    access = Access(version)
    access.add_token(TOKEN, secret="s")
    for i, acl in enumerate(plan_acls(needs(SETUP, steps, int(version[0])))):
        role = f"r{i}"
        access.add_role(role, [p for p in acl.privileges if (acl.path, p) != drop])
        access.set_acl(acl.path, [role], users=["vmbench@pve"], tokens=[TOKEN])
    return access


def refusals(version: str, access: Access, calls: list[Call]) -> list[str]:
    """The calls PVE would refuse: the schema's check, then the handler's."""
    api = Api(version)
    out = []
    for c in calls:
        denied = access.check_api2(api.method(c.method, c.path).permissions, TOKEN, c.params)
        if denied:
            out.append(f"{c.method} {c.path}: {denied}")
            continue
        for path, privs, any_of in c.handler:
            try:
                access.check(TOKEN, path, privs, any_of=any_of)
            except PermissionDenied as exc:
                out.append(f"{c.method} {c.path} (handler): {exc}")
    return out


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("group", GROUPS)
def test_the_table_covers_every_call_of_each_step(version, group):
    steps, calls = GROUPS[group]
    assert refusals(version, granted(version, steps), calls) == []


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("group", GROUPS)
def test_the_table_holds_nothing_more_than_the_steps_need(version, group):
    """Each privilege of each of the recipe's ACLs, taken away alone, makes one of the step's calls fail."""
    steps, calls = GROUPS[group]
    unneeded = [f"{p} on {a.path}" for a in plan_acls(needs(SETUP, steps, int(version[0]))) for p in a.privileges
                if not refusals(version, granted(version, steps, drop=(a.path, p)), calls)]
    assert unneeded == []


def scanned_calls() -> set[tuple[str, str]]:
    """(METHOD, path template) of every API request vmbench/drivers/proxmox sends, from its source."""
    api = Api("9.1")
    out = set()
    for f in sorted((ROOT / "vmbench" / "drivers" / "proxmox").glob("*.py")):
        text = f.read_text()
        for m in re.finditer(r"\.(get|post|put|delete)\(\s*(base\b|f?\"(/[^\"]*|\{base\}[^\"]*|\{self\.base\}[^\"]*)\")", text):
            raw = m.group(3) if m.group(3) is not None else "{base}"
            if raw.startswith("{self.base}"):  # the agent transport: its endpoints below
                continue
            path = re.sub(r"\{[^}]*\}", "x", raw.replace("{base}", "/nodes/x/qemu/100"))
            _, _, template = api.route(m.group(1).upper(), path)
            assert template, f"{f.name}: {m.group(0)} routes to no API method"
            out.add((m.group(1).upper(), template))
        for m in re.finditer(r"_call\(\"(GET|POST)\", \"([\w-]+)\"", text):
            out.add((m.group(1), "/nodes/{node}/qemu/{vmid}/agent/" + m.group(2)))
    return out


def test_every_api_method_vmbench_calls_is_in_a_step_of_the_table():
    listed = {(c.method, c.path) for _, calls in GROUPS.values() for c in calls}
    scanned = scanned_calls()
    assert len(scanned) > 30 and scanned - listed == set()


def test_the_agents_privilege_is_the_versions():
    assert AGENT == {8: "VM.Monitor", 9: "VM.GuestAgent.Unrestricted"}
    for version in VERSIONS:
        api = Api(version)
        for endpoint in ("ping", "exec", "exec-status", "file-read", "file-write"):
            methods = [m for (m, p) in api.methods if p == f"/nodes/{{node}}/qemu/{{vmid}}/agent/{endpoint}"]
            perm = api.method(methods[0], f"/nodes/{{node}}/qemu/{{vmid}}/agent/{endpoint}").permissions
            assert AGENT[int(version[0])] in perm["check"][2], (version, endpoint, perm)
    assert {r.privilege for r in RIGHTS if r.majors == (8,)} == {"VM.Monitor"}
    assert {r.privilege for r in RIGHTS if r.majors == (9,)} == {"VM.GuestAgent.Unrestricted"}


def test_the_minimal_run_set_is_the_one_a_real_pve_84_node_ran_with():
    """NOTES.md section 8: a privsep token with these on / ran a two-cell run on 8.4.21."""
    wanted = needs(Setup(node=NODE, storage=S), [Step.RUN], 8)
    assert sorted({n.privilege for n in wanted if not n.optional} - {"SDN.Use"}) == [
        "Datastore.AllocateSpace", "Datastore.Audit", "VM.Allocate", "VM.Audit", "VM.Clone", "VM.Config.CPU",
        "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory", "VM.Config.Options", "VM.Monitor", "VM.PowerMgmt"]


def test_missing_and_propagation():
    wanted = [Need("/vms", "VM.Allocate", "clone", propagated=True), Need("/vms/9000", "VM.Clone", "clone"),
              Need("/", "Sys.Audit", "quorum", optional=True)]
    have = {"/vms": {"VM.Allocate": 0}, "/vms/9000": {"VM.Clone": 1}, "/": {}}
    got = missing(wanted, have)
    assert [m.text for m in got] == ["VM.Allocate on /vms (granted there without propagation)", "Sys.Audit on /"]
    assert [m.need.optional for m in got] == [False, True]
    assert major_of("8.4.1") == 8 and major_of("9.1.2") == 9 and major_of("10.0") == 9 and major_of("7.4-3") == 8
    assert major_of(None) is None
    assert hidden_storages({"/": {"Sys.Audit": 1}, "/storage/local": {"Datastore.Allocate": 1},
                            "/storage/b": {"Datastore.AllocateSpace": 1}}) == ["local"]


def test_the_recipe_grants_one_role_per_path_and_never_a_role_that_would_replace_more():
    """A path the recipe grants gets one role holding all the steps need there; a path below
    a granted one gets no ACL when the one above holds its needs (the template on /vms)."""
    for major in (8, 9):
        wanted = needs(DOCS_SETUP, ALL_STEPS, major)
        acls = plan_acls(wanted)
        assert len({a.path for a in acls}) == len(acls)
        for a in acls:
            below = [n for n in wanted if n.path == a.path or n.path in a.covers]
            assert {n.privilege for n in below} <= set(a.privileges)
        assert [a.path for a in acls] == ["/vms", "/storage/local", "/storage/local-zfs", "/"]
    assert "PVEVMAdmin" not in recipe(DOCS_SETUP, DOCS_TOKEN) and "PVEDatastoreAdmin" not in recipe(DOCS_SETUP, DOCS_TOKEN)


def test_a_doctor_hint_grants_the_recipes_role():
    """What doctor suggests for a missing privilege is the recipe's own role on its path (a
    role that holds less would take privileges from the token when `pveum role modify` runs)."""
    granted_needs = needs(Setup(NODE, "local-zfs", import_storage=None), ALL_STEPS, 9)
    lines = grant_hint(["/vms/9000", "/vms"], granted_needs, TOKEN)
    assert lines[1] == "pveum acl modify /vms --users vmbench@pve --tokens 'vmbench@pve!bench' --roles VMBench"
    assert "VM.Clone" in lines[0] and "VM.GuestAgent.Unrestricted" in lines[0] and len(lines) == 2
    for line in recipe(DOCS_SETUP, DOCS_TOKEN, majors=(9,)).splitlines():
        if line.startswith("pveum role add VMBench "):
            assert lines[0].startswith(line)


def test_the_docs_show_the_recipe_and_the_table_the_code_renders():
    text = (ROOT / "docs" / "proxmox.md").read_text()
    assert render_docs(text) == text, "regenerate: python -m vmbench.drivers.proxmox.recipe docs/proxmox.md"
    assert all(body in text for body in docs_blocks().values())
    assert text.count("pveum role add VMBench ") == 2  # once, for PVE 8 and 9
    for wrong in ("PVEVMAdmin", "PVEDatastoreAdmin"):
        assert wrong not in text
    assert "docs/proxmox.md" in (ROOT / "README.md").read_text()
    assert "README's Proxmox section" not in (ROOT / "scenarios" / "proxmox.yaml").read_text()


def test_where_paths():
    assert SETUP.paths(Where.TEMPLATE) == ("/vms/9000",) and Setup(NODE, S).paths(Where.TEMPLATE) == ("/vms",)
    assert SETUP.paths(Where.BRIDGE) == ("/sdn/zones/localnetwork/vmbr0",)
    assert Setup(NODE, S).paths(Where.IMPORT) == () and SETUP.paths(Where.IMPORT) == ("/storage/imp",)
    assert [n.propagated for n in needs(Setup(NODE, S), [Step.RUN], 9) if n.path == "/vms"] == [True] * 10


def test_missing_is_a_list_of_missing():
    assert missing([], {}) == [] and Missing(Need("/", "Sys.Audit", "x")).text == "Sys.Audit on /"


def test_vmbench_setup_proxmox_prints_the_recipe(tmp_path, capsys):
    from vmbench.cli.main import main

    assert main(["setup", "proxmox"]) == 0
    assert capsys.readouterr().out == recipe(DOCS_SETUP, DOCS_TOKEN)
    assert main(["setup", "proxmox", "--pve", "9", "--import-storage", "isos"]) == 0
    out = capsys.readouterr().out
    assert "VM.Monitor" not in out and "VM.GuestAgent.Unrestricted" in out and "pvesm set isos --content" in out
    assert main(["setup", "proxmox", str(ROOT / "scenarios" / "proxmox-ceph-rbd.yaml"), "--pve", "8"]) == 0
    out = capsys.readouterr().out
    assert "pveum acl modify /storage --users vmbench@pve --tokens 'vmbench@pve!bench' --roles VMBenchEntries" in out
    assert "--roles VMBenchStorageAdmin" in out  # the rbd storage: its configuration read (Datastore.Allocate) too
    libvirt = tmp_path / "l.yaml"
    libvirt.write_text("name: l\njobs:\n  - {name: j, rw: randread, bs: 4k}\n")
    assert main(["setup", "proxmox", str(libvirt)]) == 2
    assert "not proxmox" in capsys.readouterr().err
