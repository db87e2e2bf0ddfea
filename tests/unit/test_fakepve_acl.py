"""The fake PVE's users, tokens, roles and ACLs (tests/fakepve/perms.py, access.py) behave as
pve-access-control's: a more specific ACL replaces the inherited one for its path and below,
``propagate 0`` stops at the path, a privilege-separated token has what both it and its user
have, NoAccess leaves nothing, a version's privileges (PVE 9 has no VM.Monitor), PVE's own
403 texts (a clone without VM.Allocate names nothing), and the lists (VMs, storages) show only
what the token may see.  Set up as an admin would, with pveum lines run as root@pam."""

from __future__ import annotations

import pytest

from tests.fakepve import FakePve
from tests.fakepve.client import call, ok
from tests.fakepve.pveum import apply

VERSIONS = ["8.4", "9.1"]
USER, TOKEN = "bench@pve", "bench@pve!tk"
SETUP = """
pveum role add Vms --privs VM.Audit,VM.Allocate,VM.Clone
pveum role add Store --privs Datastore.Audit,Datastore.AllocateSpace
pveum role add Import --privs Datastore.Allocate
pveum user add bench@pve
pveum user token add bench@pve tk --privsep 1
pveum acl modify / --users bench@pve --tokens 'bench@pve!tk' --roles Vms,Store
"""


@pytest.fixture(params=VERSIONS)
def fake(request):
    with FakePve(version=request.param, token=None, task_polls=0) as f:
        f.add_template()
        yield f


def setup(fake: FakePve, extra: str = "") -> dict:
    tokens = apply(fake, SETUP + extra, int(fake.version[0]))
    return FakePve.auth_of((TOKEN, tokens[TOKEN]))


def perms(fake: FakePve, auth: dict, path: str) -> dict:
    return ok(call(fake, "GET", "/access/permissions", {"path": path}, headers=auth))[path]


def test_a_more_specific_acl_replaces_the_inherited_one(fake):
    """The real node's case: Import granted on /storage/local alone hides local."""
    auth = setup(fake, "pveum acl modify /storage/local --users bench@pve --tokens 'bench@pve!tk' --roles Import\n")
    assert perms(fake, auth, "/storage/local") == {"Datastore.Allocate": 1}
    assert perms(fake, auth, "/storage/other") == {"Datastore.Audit": 1, "Datastore.AllocateSpace": 1, "VM.Audit": 1,
                                                   "VM.Allocate": 1, "VM.Clone": 1}
    assert [r["storage"] for r in ok(call(fake, "GET", "/storage", headers=auth))] == []  # local hidden
    assert ok(call(fake, "GET", "/nodes/pve1/storage", headers=auth)) == []
    got = ok(call(fake, "GET", "/access/permissions", headers=auth))  # every path an ACL names
    assert got["/storage/local"] == {"Datastore.Allocate": 1} and "/vms" in got


def test_propagate_0_stops_at_the_path_and_noaccess_leaves_nothing(fake):
    auth = setup(fake, "pveum acl modify /vms --users bench@pve --tokens 'bench@pve!tk' --roles Vms --propagate 0\n"
                       "pveum acl modify /vms/9000 --users bench@pve --tokens 'bench@pve!tk' --roles NoAccess\n")
    assert perms(fake, auth, "/vms") == {"VM.Audit": 0, "VM.Allocate": 0, "VM.Clone": 0}
    assert perms(fake, auth, "/vms/100") == {"VM.Audit": 1, "VM.Allocate": 1, "VM.Clone": 1,  # from /, past /vms
                                             "Datastore.Audit": 1, "Datastore.AllocateSpace": 1}
    assert perms(fake, auth, "/vms/9000") == {}
    assert ok(call(fake, "GET", "/cluster/resources", {"type": "vm"}, headers=auth)) == []  # no VM.Audit on 9000


def test_a_privilege_separated_token_has_what_both_it_and_its_user_have(fake):
    auth = setup(fake, "pveum role add Narrow --privs VM.Audit\n"
                       "pveum acl modify /vms --tokens 'bench@pve!tk' --roles Narrow\n"
                       "pveum user token add bench@pve full --privsep 0\n")
    assert perms(fake, auth, "/vms/9000") == {"VM.Audit": 1}  # the token's own ACL on /vms; its user has more
    full = {k: v for k, v in fake.access.users[USER].tokens.items() if k == "full"}["full"].secret
    assert set(perms(fake, FakePve.auth_of((f"{USER}!full", full)), "/vms/9000")) == {
        "VM.Audit", "VM.Allocate", "VM.Clone", "Datastore.Audit", "Datastore.AllocateSpace"}  # no privsep: the user's
    other = call(fake, "GET", "/access/permissions", {"userid": "root@pam"}, headers=auth)
    assert (other.status, other.reason) == (403, "Permission check failed (/access, Sys.Audit)")


def test_pves_own_403s_and_a_versions_privileges(fake):
    auth = setup(fake)
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "full": 0}, headers=auth)
    assert r.status == 200  # VM.Clone on the template, VM.Allocate on 100, Datastore.AllocateSpace on its storage
    fake.access.roles["Vms"].discard("VM.Allocate")
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 101, "full": 0}, headers=auth)
    assert (r.status, r.reason) == (403, "Permission check failed")  # VM.Allocate on the new VMID: PVE names nothing
    r = call(fake, "PUT", "/access/acl", {"path": "/", "roles": "Administrator", "tokens": TOKEN}, headers=auth)
    assert (r.status, r.reason) == (403, "Permission check failed (/, Permissions.Modify)")
    root = fake.auth_of(fake.root_token)
    r = call(fake, "POST", "/access/roles", {"roleid": "Mon", "privs": "VM.Monitor"}, headers=root)
    if fake.version == "9.1":
        assert r.status == 400 and r.errors == {"privs": "invalid format - invalid privilege 'VM.Monitor'\n"}
    else:
        assert r.status == 200
    r = call(fake, "POST", "/access/roles", {"roleid": "PVEMine", "privs": "VM.Audit"}, headers=root)
    assert r.errors == {"roleid": "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"}
    bad = call(fake, "GET", "/version", headers=FakePve.auth_of((TOKEN, "wrong")))
    assert (bad.status, bad.reason) == (401, "invalid token value!")
