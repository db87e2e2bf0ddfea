"""docs/proxmox.md's recipe, run on the fake PVE 8.4 and 9.1 (its ``pveum`` and ``pvesm``
lines as the API calls they make, as root@pam), gives a token that runs a scenario end to
end through the CLI: ``vmbench doctor`` exits 0, ``vmbench run`` exits 0, nothing is left.
The same token with each privilege of the recipe taken from its role in turn is refused by
``vmbench doctor`` and by ``vmbench run`` before anything is created (no clone request
reaches the fake), both naming the privilege and its path; without the optional Sys.Audit
doctor warns and passes.  An ACL that hides the import storage makes ``images push`` say so.

No guest boots: the fake's NullBackend with a FakeGuestTransport per started VM behind its
agent (tests/unit/test_proxmox_load.py's ``Guests``); the fake enforces PVE's permission
checks for the privilege-separated token (tests/fakepve/perms.py)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from tests.fakepve import FakePve
from tests.fakepve.pveum import apply
from tests.unit.test_proxmox_contract import ENV, VERSIONS
from tests.unit.test_proxmox_load import Guests, Node
from tests.unit.test_proxmox_template import qcow2_header
from vmbench.cli.main import main
from vmbench.drivers.proxmox.recipe import DOCS_SETUP, DOCS_TOKEN
from vmbench.drivers.proxmox.template import TemplateIdentity
from vmbench.errors import PreflightError
from vmbench.transport.local import LocalTransport

ROOT = Path(__file__).resolve().parents[2]
DOCS = (ROOT / "docs" / "proxmox.md").read_text()
STORAGE = DOCS_SETUP.storage  # local-zfs: scratch disks and the template
SCENARIO = """
name: recipe
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  node: pve1
  template: 9000
  storage: {storage}
  token: {{id: "{token}", secret_env: {env}}}
  tls: {{ca_file: {ca}}}
  ssh: {{user: root}}
  timeout: 10s
  accel: kvm
storage: {{scratch_size: 64M}}
vm: {{vcpus: 1, memory: 512M, bus: virtio-scsi, cache: none, aio: io_uring, iothread: true, cpu: x86-64-v2-AES}}
vary:
  cache: [writeback]
jobs:
  - {{name: w, rw: randwrite, bs: 4k, size: 8M, runtime: 1s, ramp: 0s}}
"""


class DoctorNode(Node):
    """The node over SSH as doctor reaches it too (``true``, fio's version)."""

    def _cmd_true(self, argv, stdin):
        return ""


def docs_recipe() -> str:
    """The recipe as docs/proxmox.md shows it (its sh block)."""
    m = re.search(r"```sh\n(# vmbench on Proxmox VE.*?)```", DOCS, re.S)
    assert m, "docs/proxmox.md shows no recipe"
    return m.group(1)


class RecipeNode:
    """A fake node set up by docs/proxmox.md's recipe: its token, a scenario using it, the CLI."""

    def __init__(self, version: str, tmp_path: Path, monkeypatch) -> None:
        self.backend = Guests()
        self.fake = FakePve(version=version, token=None, backend=self.backend, task_polls=0, agent_pings=1,
                            local_content="iso,vztmpl,backup").start()
        fake = self.fake
        fake.add_storage(STORAGE, "zfspool", pool="rpool/data", content="images,rootdir")
        fake.add_template(storage=STORAGE)
        tokens = apply(fake, docs_recipe(), int(version.split(".")[0]))
        assert list(tokens) == [DOCS_TOKEN]
        monkeypatch.setenv(ENV, tokens[DOCS_TOKEN])
        monkeypatch.setenv("VMBENCH_STATE_DIR", str(tmp_path / "state"))
        self.path = tmp_path / "recipe.yaml"
        self.path.write_text(textwrap.dedent(SCENARIO).format(port=fake.port, storage=STORAGE, token=DOCS_TOKEN, env=ENV,
                                                              ca=fake.ca_file))
        self.db = tmp_path / "results.db"
        node = DoctorNode(fake, kvm=True)
        monkeypatch.setattr("vmbench.drivers.make_host", lambda hv: node)
        from vmbench.scenario import load_scenario

        self.backend.vm = load_scenario(str(self.path)).cells[0].vm

    def close(self) -> None:
        self.fake.close()

    def role_without(self, privilege: str) -> str:
        """Take ``privilege`` from the recipe's role a run uses that holds it (as ``pveum role
        modify`` would; VMBenchImport is the push's); that role's name."""
        roles = [r for r in ("VMBench", "VMBenchStorage", "VMBenchAudit") if privilege in self.fake.access.roles[r]]
        assert len(roles) == 1, (privilege, roles)
        self.fake.access.roles[roles[0]].discard(privilege)
        return roles[0]

    def clones(self) -> list:
        return [r for r in self.fake.requests if r.template == "/nodes/{node}/qemu/{vmid}/clone"]


@pytest.fixture(params=VERSIONS)
def node(request, tmp_path, monkeypatch):
    s = RecipeNode(request.param, tmp_path, monkeypatch)
    yield s
    s.close()


def test_the_docs_recipe_runs_a_scenario_end_to_end(node, capsys):
    fake = node.fake
    assert main(["doctor", str(node.path)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert re.search(r"token rights\s+ok\s+vmbench@pve!bench has the 12 privileges a run needs on PVE [89], and Sys.Audit "
                     r"\(optional\)", out), out
    assert "token rights (images push)" not in out  # a template vmbench did not make: push leaves it alone, its rights are not asked
    assert main(["run", str(node.path), "--db", str(node.db), "-q"]) == 0, capsys.readouterr().err
    assert len(node.clones()) == 2 and all(r.status == 200 for r in node.clones())
    assert list(fake.vms) == [9000] and not fake.backend.guests
    assert [v.name for v in fake.state.volumes.values()] == ["base-9000-disk-0"]
    assert not [r for r in fake.requests if r.status == 403], [(r.path, r.reason) for r in fake.requests if r.status == 403]
    assert fake.problems == []


PRIVILEGES = {8: ["VM.Allocate", "VM.Audit", "VM.Clone", "VM.Config.CPU", "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory",
                  "VM.Config.Options", "VM.Monitor", "VM.PowerMgmt", "Datastore.AllocateSpace", "Datastore.Audit"],
              9: ["VM.Allocate", "VM.Audit", "VM.Clone", "VM.Config.CPU", "VM.Config.Disk", "VM.Config.HWType", "VM.Config.Memory",
                  "VM.Config.Options", "VM.GuestAgent.Unrestricted", "VM.PowerMgmt", "Datastore.AllocateSpace", "Datastore.Audit"]}


def test_each_privilege_taken_away_is_named_by_doctor_and_run_before_anything_is_created(node, capsys):
    """One privilege fewer at a time: doctor FAILs naming it and its path; run exits with the
    preflight's code before any clone, its message (under 160 characters) naming both."""
    major = int(node.fake.version.split(".")[0])
    for priv in PRIVILEGES[major]:
        role = node.role_without(priv)
        path = "/vms" if role == "VMBench" else f"/storage/{STORAGE}"  # where the recipe grants it
        named = "/vms/9000" if priv == "VM.Clone" else path  # where a run needs it: the template's own path
        assert main(["doctor", str(node.path)]) == 3, priv
        out = capsys.readouterr().out
        assert re.search(rf"token rights\s+FAIL\s+vmbench@pve!bench \(PVE {major}\) lacks .*{re.escape(priv)} on {named}", out), out
        assert f"pveum acl modify {path} --users vmbench@pve --tokens 'vmbench@pve!bench' --roles {role}" in out, out
        before = len(node.fake.requests)
        assert main(["run", str(node.path), "--db", str(node.db), "-q"]) == PreflightError.exit_code, priv
        err = capsys.readouterr().err
        message = err.split("\n")[0]
        assert message.startswith(f"error: the token vmbench@pve!bench lacks {priv} on ") and len(message) - 7 < 160, err
        assert f"{priv} on {named}" in err and f"pveum acl modify {path} " in err
        assert not node.clones() and not any(r.method != "GET" for r in node.fake.requests[before:]), priv
        node.fake.access.roles[role].add(priv)
    assert node.fake.problems == []


def test_without_sys_audit_doctor_warns_and_the_run_says_what_goes_unchecked(node, capsys):
    node.role_without("Sys.Audit")
    assert main(["doctor", str(node.path)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"token rights\s+warn\s+vmbench@pve!bench \(PVE \d\) lacks Sys.Audit on /nodes/pve1 \(optional\)",
                     out), out  # a standalone node: no quorum to read on /
    assert main(["run", str(node.path), "--db", str(node.db), "-q"]) == 0
    err = capsys.readouterr().err
    assert ("warning: the token vmbench@pve!bench lacks Sys.Audit on /nodes/pve1 (optional), so not done: the node's "
            "kernel, CPU and memory recorded; its free memory checked before each load step") in err, err
    assert list(node.fake.vms) == [9000]


def test_the_recipe_lets_images_push_make_the_template_and_an_acl_hiding_the_import_storage_is_named(node, tmp_path,
                                                                                                      capsys, monkeypatch):
    """The recipe's token makes vmbench's template (doctor's push line ok); then the real
    node's mistake: a second role on /storage/local (for the import) without Datastore.Audit
    replaces the inherited one, and local vanishes from the storage lists: push names that."""
    fake = node.fake
    pushed = tmp_path / "push.yaml"  # vmbench's own template, by name
    pushed.write_text(node.path.read_text().replace("template: 9000", "template: vmbench-debian12"))
    from vmbench.drivers import make_driver
    from vmbench.scenario import load_scenario

    s = load_scenario(str(pushed))
    ident = TemplateIdentity("debian12", "ab" * 32, "1")
    drv = make_driver(s.hypervisor, s.storage, host=LocalTransport())
    made = drv.push_template(ident, qcow2_header(tmp_path / "d.qcow2"))  # type: ignore[attr-defined]
    assert made.made and fake.vms[made.vmid].config["template"] == 1
    drv.close()
    monkeypatch.setattr("vmbench.drivers.proxmox.template.wanted_identity", lambda recipe: ident)  # doctor: it is current
    assert main(["doctor", str(pushed)]) == 0
    out = capsys.readouterr().out
    assert re.search(r"token rights \(images push\)\s+ok\s+vmbench@pve!bench may make vmbench's template \(import storage "
                     r"local\)", out), out
    fake.vms.pop(made.vmid)
    fake.access.add_role("ImportOnly", ["Datastore.Allocate"])
    fake.access.acl["/storage/local"] = {k: {"ImportOnly": 1} for k in fake.access.acl["/storage/local"]}  # instead of VMBenchImport

    drv = make_driver(s.hypervisor, s.storage, host=LocalTransport())
    with pytest.raises(PreflightError) as exc:
        drv.push_template(ident, qcow2_header(tmp_path / "d.qcow2"))  # type: ignore[attr-defined]
    e = exc.value
    assert e.message == ("the token vmbench@pve!bench cannot see storage local: an ACL on /storage/local gives it neither "
                         "Datastore.Audit nor Datastore.AllocateSpace")
    assert "no storage" not in e.message and "takes imports" not in e.message
    assert ("pveum acl modify /storage/local --users vmbench@pve --tokens 'vmbench@pve!bench' --roles VMBenchImport"
            in (e.hint or ""))
    assert set(fake.vms) == {9000} and fake.problems == []
    drv.close()
