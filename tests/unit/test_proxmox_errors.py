"""The errors of issue 9 item 6, one test each, through a real ProxmoxDriver against the fake
PVE node (tests/fakepve) on both schema versions: the typed vmbench error, a message (and
hint) naming the host, VM or privilege, nothing created on the node, bounded (no hang), and
the token secret in no message, hint, traceback or log record."""

from __future__ import annotations

import socket
import time
import traceback

import pytest

from tests.fakepve import FakePve
from tests.fakepve.server import make_tls
from tests.fakes import FakePveNode
from tests.unit.test_proxmox_contract import (TAG, TOKEN_ID, VERSIONS, assert_secret_nowhere, make_driver,
                                              new_fake, prepare, request, scenario_text)
from vmbench.drivers.proxmox import removal
from vmbench.drivers.proxmox.errors import PveAuthError, PvePermissionError, PveTlsError, PveUnreachable
from vmbench.errors import GuestError, HypervisorError, PreflightError
from vmbench.progress import RecordingProgress


@pytest.fixture
def logs(caplog):
    import logging

    caplog.set_level(logging.DEBUG)
    for name in ("urllib3", "proxmoxer", "vmbench"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


def full_text(exc: BaseException) -> str:
    """Everything an exception shows: message, hint, traceback with its chained exceptions."""
    return "".join(traceback.format_exception(exc)) + f"\n{getattr(exc, 'hint', '')}"


def snapshot(fake: FakePve) -> tuple:
    return (set(fake.vms), sorted(str(p) for p in fake.state.volumes), set(fake.storages))


def assert_nothing_created(fake: FakePve, before: tuple) -> None:
    """No request that changes anything was sent; VMs, volumes and storages are as they were."""
    assert [(r.method, r.path) for r in fake.requests if r.method != "GET"] == []
    assert snapshot(fake) == before
    assert fake.problems == []


def refused_port() -> int:
    """A port on 127.0.0.1 nothing listens on."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- connection: unreachable, TLS, token ------------------------------------------------------


def test_unreachable_api_closed_port(tmp_path, monkeypatch, logs):
    port = refused_port()
    ca, *_ = make_tls(tmp_path)
    text = scenario_text(None, port=port, tls=f"{{ca_file: {ca}}}")
    drv, s, _ = make_driver(tmp_path, monkeypatch, text, host=None)
    started = time.monotonic()
    with pytest.raises(PreflightError) as exc:
        prepare(drv, s)
    assert time.monotonic() - started < 5
    e = exc.value
    assert isinstance(e.__context__, PveUnreachable)  # the typed API error, kept as context
    assert e.message == f"cannot reach the Proxmox API at https://127.0.0.1:{port}: Connection refused"
    assert "hypervisor.host" in e.hint and "8006" in e.hint and "pveproxy" in e.hint
    assert drv.template_vmid is None and drv.vms == {}
    assert_secret_nowhere(None, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_tls_mismatch_with_a_ca_file_that_is_not_the_nodes(version, tmp_path, monkeypatch, logs):
    other_dir = tmp_path / "other-ca"
    other_dir.mkdir()
    other_ca, *_ = make_tls(other_dir)
    with new_fake(version) as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, tls=f"{{ca_file: {other_ca}}}"), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert isinstance(e.__context__, PveTlsError)
        assert e.message.startswith(f"TLS verification of https://127.0.0.1:{fake.port} failed (verified against CA file "
                                    f"{other_ca}): ")
        assert "unable to get local issuer certificate" in e.message or "certificate verify failed" in e.message
        assert "pve-root-ca.pem" in e.hint and "fingerprint" in e.hint
        assert fake.requests == []  # refused before any HTTP request
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_tls_mismatch_with_a_wrong_pinned_fingerprint(version, tmp_path, monkeypatch, logs):
    wrong = ":".join(["AB"] * 32)
    with new_fake(version) as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, tls=f"{{fingerprint: '{wrong}'}}"), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert isinstance(e.__context__, PveTlsError)
        assert e.message == (f"the TLS certificate of https://127.0.0.1:{fake.port} does not match the pinned fingerprint "
                             f"(hypervisor.tls.fingerprint): the server's is {fake.cert_fingerprint}")
        assert "pvenode cert info" in e.hint
        assert fake.requests == []
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)
        # the right pin is accepted (no CA needed)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, tls=f"{{fingerprint: '{fake.cert_fingerprint}'}}"),
                                FakePveNode(fake))
        assert prepare(drv, s).name in ("kvm", "tcg") and drv.template_vmid == 9000


@pytest.mark.parametrize("version", VERSIONS)
def test_wrong_token_is_a_401_naming_the_token_not_its_secret(version, tmp_path, monkeypatch, logs):
    wrong = "0badc0de-wrong-secret-0000"
    with new_fake(version) as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake), secret=wrong)
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert isinstance(e.__context__, PveAuthError)
        assert e.message == (f"the Proxmox API at https://127.0.0.1:{fake.port} refused the token {TOKEN_ID} "
                             "(401 invalid token value!)")
        assert "VMBENCH_CONTRACT_PVE_SECRET" in e.hint and "API Tokens" in e.hint
        assert [(r.method, r.path, r.status) for r in fake.requests] == [("GET", "/version", 401)]
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)
        assert_secret_nowhere(fake, logs, full_text(e), drv, secret=wrong)


# ---- privileges ----------------------------------------------------------------------------------


def test_missing_guest_agent_privilege_on_pve9_agent_exec_is_named(tmp_path, monkeypatch, logs):
    """PVE 9 splits the agent's privileges: ping needs VM.GuestAgent.Audit, exec needs
    VM.GuestAgent.Unrestricted.  Taken away after the preflight (which would refuse: see
    test_proxmox_rights.py), PVE's 403 at the first exec is named."""
    with new_fake("9.1") as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        prepare(drv, s)
        fake.revoke("VM.GuestAgent.Unrestricted")
        req = request(s)
        res = drv.create_vm(TAG, req, drv.new_resources(TAG, req))
        guest = drv.boot(TAG, req, res, RecordingProgress())  # pings answer: VM.GuestAgent.Audit is enough
        with pytest.raises(PvePermissionError) as exc:
            guest.transport.run(["true"])
        e = exc.value
        assert (e.privilege, e.acl_path, e.status) == ("VM.GuestAgent.Unrestricted", "/vms/100", 403)
        assert e.message == ("POST /nodes/pve1/qemu/100/agent/exec: the token vmbench@pve!bench lacks "
                             "VM.GuestAgent.Unrestricted on /vms/100 (403 Permission check failed "
                             "(/vms/100, VM.GuestAgent.Unrestricted))")
        assert e.hint.startswith("guest agent calls need VM.Monitor on PVE 8, VM.GuestAgent.Unrestricted on PVE 9; "
                                 "`vmbench doctor SCENARIO` lists every privilege the token lacks")
        assert "PVEVMAdmin" not in e.hint  # never more than vmbench needs
        assert fake.backend.executed == []  # nothing ran in the guest
        drv.remove_vm(res)  # and the VM goes as usual
        assert snapshot(fake) == before and fake.problems == []
        assert_secret_nowhere(fake, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_clone_privilege_on_the_template_is_named_and_nothing_is_created(version, tmp_path, monkeypatch, logs):
    with new_fake(version) as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        prepare(drv, s)
        fake.revoke("VM.Clone", "/vms/9000")  # after the preflight, which would refuse
        req = request(s)
        res = drv.new_resources(TAG, req)
        with pytest.raises(HypervisorError) as exc:
            drv.create_vm(TAG, req, res)
        e = exc.value
        assert isinstance(e.__context__, PvePermissionError)
        assert e.message == (f"cloning template 9000 into vmbench-{TAG}-1 failed: POST /nodes/pve1/qemu/9000/clone: the token "
                             "vmbench@pve!bench lacks VM.Clone on /vms/9000 (403 Permission check failed (/vms/9000, VM.Clone))")
        assert "vmbench doctor SCENARIO" in e.hint and "PVEVMAdmin" not in e.hint
        assert [(r.method, r.status) for r in fake.requests if r.method != "GET"] == [("POST", 403)]
        assert snapshot(fake) == before and fake.problems == []
        drv.remove_vm(res)  # nothing to remove; no error
        assert_secret_nowhere(fake, logs, full_text(e), drv)


# ---- the template ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_template_that_is_not_a_template(version, tmp_path, monkeypatch, logs):
    with new_fake(version) as fake:
        fake.add_template(template=False)
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert e.message == "VM 9000 (debian12-tmpl) is not a template; vmbench makes linked clones of a template"
        assert e.hint == "convert it (it cannot run afterwards): qm template 9000"
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_template_without_the_guest_agent_enabled(version, tmp_path, monkeypatch, logs):
    with new_fake(version) as fake:
        fake.add_template(agent=False)
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert e.message == "template 9000 (debian12-tmpl) has no guest agent enabled (agent: 0)"
        assert "qm set 9000 --agent enabled=1" in e.hint and "qemu-guest-agent" in e.hint
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_guest_agent_not_answering_is_bounded(version, tmp_path, monkeypatch, logs):
    with new_fake(version, agent_pings=10 ** 6) as fake:
        fake.add_template()
        before = snapshot(fake)
        text = scenario_text(fake, hv_extra="boot_timeout: 10s")
        drv, s, clock = make_driver(tmp_path, monkeypatch, text, FakePveNode(fake))
        prepare(drv, s)
        req = request(s)
        res = drv.create_vm(TAG, req, drv.new_resources(TAG, req))
        started = time.monotonic()
        with pytest.raises(GuestError) as exc:
            drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        assert time.monotonic() - started < 10  # the driver's clock: 10 s of pings, no real waiting
        e = exc.value
        assert e.message == f"vmbench-{TAG}-1: the guest agent did not answer within 10s (QEMU guest agent is not running)"
        assert "qemu-guest-agent" in e.hint
        pings = [r for r in fake.requests if r.path.endswith("/agent/ping")]
        assert 5 <= len(pings) <= 15 and all(r.status == 500 for r in pings)
        drv.remove_vm(res)
        assert snapshot(fake) == before and fake.problems == []
        assert_secret_nowhere(fake, logs, full_text(e), drv)


# ---- storage -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_storage_that_cannot_hold_images(version, tmp_path, monkeypatch, logs):
    with new_fake(version) as fake:
        fake.add_storage("isos", "dir", content="iso,vztmpl")
        fake.add_template()
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage="isos"), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert e.message == "Proxmox storage isos (dir) cannot hold VM disk images (content: iso,vztmpl)"
        assert "content 'images'" in e.hint and "hypervisor.storage" in e.hint
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)


@pytest.mark.parametrize("version", VERSIONS)
def test_template_disk_on_a_storage_that_cannot_link_clone(version, tmp_path, monkeypatch, logs):
    with new_fake(version) as fake:
        fake.add_storage("thick", "lvm", content="images,rootdir", vgname="pve")
        fake.add_template(storage="thick")
        before = snapshot(fake)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        e = exc.value
        assert e.message == "disk virtio0 of template 9000 is on storage thick (lvm), which cannot make linked clones"
        assert "hypervisor.clone: full" in e.hint and "lvmthin" in e.hint
        assert_nothing_created(fake, before)
        assert_secret_nowhere(fake, logs, full_text(e), drv)


# ---- a VM left locked ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_remove_of_a_vm_whose_lock_never_clears(version, tmp_path, monkeypatch, logs):
    monkeypatch.setattr(removal, "LOCK_WAIT", 6.0)
    with new_fake(version) as fake:
        fake.add_template()
        before = snapshot(fake)
        drv, s, clock = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        prepare(drv, s)
        req = request(s)
        res = drv.create_vm(TAG, req, drv.new_resources(TAG, req))
        fake.vms[100].config["lock"] = "backup"  # a backup job holds it, and never lets go
        mark = len(fake.requests)
        started, t0 = time.monotonic(), clock.t
        with pytest.raises(HypervisorError) as exc:
            drv.remove_vm(res)
        assert time.monotonic() - started < 5 and 6 <= clock.t - t0 <= 10
        e = exc.value
        assert e.message == (f"cleanup incomplete: vmbench-{TAG}-1: VM 100 (vmbench-{TAG}-1) is still locked (backup) "
                             "after 6s; left in place")
        assert "vmbench cleanup" in e.hint
        assert {(r.method, r.template) for r in fake.requests[mark:]} == {("GET", "/nodes/{node}/qemu/{vmid}/status/current")}
        assert 100 in fake.vms and res.name in drv.vms  # left in place, still known: a retry can remove it
        assert_secret_nowhere(fake, logs, full_text(e), drv)
        # the lock gone, the same call removes it
        del fake.vms[100].config["lock"]
        drv.remove_vm(res)
        assert snapshot(fake) == before and fake.problems == []


@pytest.mark.parametrize("version", VERSIONS)
def test_destroy_refused_because_the_vm_got_locked_meanwhile(version, tmp_path, monkeypatch, logs):
    """The lock appears between status/current and DELETE: PVE's 500 "VM is locked (...)"."""
    with new_fake(version) as fake:
        fake.add_template()
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        prepare(drv, s)
        req = request(s)
        res = drv.create_vm(TAG, req, drv.new_resources(TAG, req))
        from tests.fakepve.handlers import H

        destroy = H[("DELETE", "/nodes/{node}/qemu/{vmid}")]

        def locked_destroy(state, p):
            from tests.fakepve.model import die

            raise die("VM is locked (snapshot)")

        monkeypatch.setitem(H, ("DELETE", "/nodes/{node}/qemu/{vmid}"), locked_destroy)
        with pytest.raises(HypervisorError) as exc:
            drv.remove_vm(res)
        e = exc.value
        assert e.message == (f"cleanup incomplete: vmbench-{TAG}-1: VM 100 (vmbench-{TAG}-1) is locked (snapshot); left in "
                             "place: DELETE /nodes/pve1/qemu/100: VM is locked (snapshot)")
        assert 100 in fake.vms
        assert_secret_nowhere(fake, logs, full_text(e), drv)
        monkeypatch.setitem(H, ("DELETE", "/nodes/{node}/qemu/{vmid}"), destroy)
        drv.remove_vm(res)
        assert list(fake.vms) == [9000] and fake.problems == []
