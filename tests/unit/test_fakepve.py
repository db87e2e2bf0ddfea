"""The fake Proxmox VE server (tests/fakepve): raw HTTPS requests against both schema versions,
with the NullBackend (no VM).  What is checked here is what the Proxmox driver's contract tests
rely on: PVE's validation and error texts, auth and privileges, the state machine of a linked
clone's life, and the fake's own honesty (unknown formats and bad responses fail the test)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import ssl
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import pytest

from tests.fakepve import FakePve, NullBackend, VmView
from tests.fakepve.client import call, ok, put_json, wait
from tests.fakepve.backends import DriveView
from tests.fakepve.handlers import H
from tests.fakepve.libvirt_backend import parse_cpu, vm_config
from vmbench.settings import Bus, CpuMode, Feature

VERSIONS = ["8.4", "9.1"]
CONFIG = ("POST", "/nodes/{node}/qemu/{vmid}/config")


@pytest.fixture(params=VERSIONS)
def fake(request):
    backend = NullBackend(exec_results={("cat", "/sys/block/vdb/serial"): {"exitcode": 0, "out": "VMB1\n"},
                                        "false": {"exitcode": 1, "err": "nope\n"}})
    with FakePve(version=request.param, backend=backend) as f:
        f.add_template()
        yield f


def linked_clone(fake: FakePve, newid: int = 100, **extra) -> str:
    upid = ok(call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": newid, "name": f"vmb-{newid}", "full": 0, **extra}))
    assert wait(fake, upid)["exitstatus"] == "OK"
    return upid


# ---- transport, TLS, auth ------------------------------------------------------------------


def test_tls_is_verified_against_the_fake_ca_and_fingerprint_matches(fake):
    assert ok(call(fake, "GET", "/version"))["release"] == fake.version
    ctx = ssl.create_default_context(cafile=fake.ca_file)
    with socket.create_connection(("127.0.0.1", fake.port)) as raw, ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        der = tls.getpeercert(binary_form=True)
    digest = hashlib.sha256(der).hexdigest().upper()
    assert fake.cert_fingerprint == ":".join(digest[i:i + 2] for i in range(0, 64, 2))
    with pytest.raises(urllib.error.URLError) as exc:
        urllib.request.urlopen(fake.api_url + "/version", context=ssl.create_default_context(cafile=None), timeout=10)
    assert isinstance(exc.value.reason, ssl.SSLCertVerificationError)


def test_api_token_is_required(fake):
    r = call(fake, "GET", "/version", headers={})
    assert (r.status, r.reason) == (401, "No ticket")
    r = call(fake, "GET", "/version", headers={"Authorization": "PVEAPIToken=vmbench@pve!bench=WRONG"})
    assert (r.status, r.reason) == (401, "invalid token value!")
    r = call(fake, "GET", "/version", headers={"Authorization": "PVEAPIToken=vmbench@pve!other=SECRET"})
    assert (r.status, r.reason) == (401, "no such token 'other' for user 'vmbench@pve'")
    assert [req.status for req in fake.requests] == [401, 401, 401]


def test_unknown_path_is_501_like_pve(fake):
    r = call(fake, "GET", "/nodes/pve1/openvz")
    assert (r.status, r.reason, r.json) == (501, "Method 'GET /nodes/pve1/openvz' not implemented", {"data": None})


def test_a_volume_id_with_a_slash_routes_like_pve(fake):
    """PVE mounts storage content with fragmentDelimiter '' (volume ids may contain '/'): the
    rest of the path is {volume}, raw or %2F-escaped (the path is unescaped before splitting)."""
    linked_clone(fake)
    volid = "local:9000/base-9000-disk-0.qcow2/100/vm-100-disk-0.qcow2"
    for path in (volid, urllib.parse.quote(volid, safe="")):
        assert ok(call(fake, "GET", f"/nodes/pve1/storage/local/content/{path}"))["path"] == fake.volume_path(volid)
        assert fake.requests[-1].template == "/nodes/{node}/storage/{storage}/content/{volume}"
    listed = ok(call(fake, "GET", "/nodes/pve1/storage/local/content", {"vmid": 100}))
    assert [c["volid"] for c in listed] == [volid]


def test_json_bodies_are_accepted_too(fake):
    linked_clone(fake)
    assert ok(put_json(fake, "/nodes/pve1/qemu/100/config", {"cores": 3, "agent": 1, "tags": ["a", "B"], "onboot": True})) is None
    conf = ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))
    assert (conf["cores"], conf["agent"], conf["tags"], conf["onboot"]) == (3, "1", "a;b", 1)
    # a JSON true is fine for a boolean, not for a string option such as 'agent' (a property string)
    r = put_json(fake, "/nodes/pve1/qemu/100/config", {"agent": True})
    assert r.errors == {"agent": "type check ('string') failed - got JSON::PP::Boolean"}


# ---- parameter validation -------------------------------------------------------------------


def test_validation_errors_are_worded_like_pve(fake):
    linked_clone(fake)
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config",
             {"bogus": "1", "scsihw": "virtio-scsi", "virtio1": "local:8,cache=none,ssd=1", "cores": "two"})
    assert (r.status, r.reason) == (400, "Parameter verification failed.")
    assert r.json["data"] is None and r.json["message"] == "Parameter verification failed.\n"
    assert r.errors == {
        "bogus": "property is not defined in schema and the schema does not allow additional properties",
        "scsihw": "value 'virtio-scsi' does not have a value in the enumeration "
                  "'lsi, lsi53c810, virtio-scsi-pci, virtio-scsi-single, megasas, pvscsi'",
        "virtio1": "invalid format - invalid key in comma-separated list property: ssd\n",
        "cores": "type check ('integer') failed - got 'two'",
    }
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 101, "full": "True"})
    assert r.errors == {"full": "type check ('boolean') failed - got 'True'"}
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"name": "a_b"})
    assert r.errors == {"newid": "property is missing and it is not optional",
                        "name": "invalid format - value does not look like a valid DNS name\n"}
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": "local:8,cache=fast", "tags": "ok;bad tag!"})
    assert r.errors["virtio1"].startswith("invalid format - format error\nvirtio1.cache: value 'fast' does not have")
    assert r.errors["tags"] == "invalid format - invalid characters in tag\n"
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"cpu": "x86-64-v2-AES,flags=+avx2"})
    assert r.errors["cpu"].startswith("invalid format - VM-specific CPU flags must be a subset of: ")
    assert fake.problems == []


def test_detect_zeroes_and_discard_take_pve_spellings_only(fake):
    """``detect_zeroes`` is a boolean (0/1) and ``discard`` ignore|on: vmbench's unmap is not PVE's word."""
    linked_clone(fake)
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": "local:1,detect_zeroes=unmap"})
    assert r.errors["virtio1"].startswith("invalid format - format error\nvirtio1.detect_zeroes: type check ('boolean') failed")
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": "local:1,discard=unmap"})
    assert r.errors["virtio1"].startswith("invalid format - format error\nvirtio1.discard: value 'unmap' does not have")
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": "local:1,discard=on,detect_zeroes=1"})))
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))["virtio1"].endswith(",detect_zeroes=1,discard=on,size=1G")  # stored sorted, as PVE prints it
    assert fake.problems == []


def test_indexed_options_accept_their_documented_range_only(fake):
    linked_clone(fake)
    assert call(fake, "PUT", "/nodes/pve1/qemu/100/config", {"scsi30": "local:1"}).status == 200
    r = call(fake, "PUT", "/nodes/pve1/qemu/100/config", {"scsi31": "local:1", "virtio16": "local:1", "sata6": "local:1"})
    assert set(r.errors) == {"scsi31", "virtio16", "sata6"}


def test_an_unknown_named_format_fails_the_test(fake):
    linked_clone(fake)
    fake.api.method(*CONFIG).info["parameters"]["properties"]["description"]["format"] = "pve-no-such-format"
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"description": "hello"})
    assert r.status == 501
    assert "named format 'pve-no-such-format' is not implemented" in fake.problems[0]
    with pytest.raises(AssertionError, match="pve-no-such-format"):
        fake.assert_clean()
    fake.problems.clear()


def test_responses_are_checked_against_returns(fake, monkeypatch):
    monkeypatch.setitem(H, ("GET", "/version"), lambda s, p: {"version": "9.1.2", "repoid": "nothex!"})
    r = call(fake, "GET", "/version")
    assert r.status == 501
    assert "result verification failed for GET /version" in fake.problems[0]
    assert "release" in fake.problems[0] and "repoid" in fake.problems[0]
    with pytest.raises(AssertionError):
        fake.assert_clean()
    fake.problems.clear()


# ---- privileges ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_missing_privileges_give_pve_403(version):
    priv = "VM.GuestAgent.Unrestricted" if version == "9.1" else "VM.Monitor"
    with FakePve(version=version, missing_privileges={priv}, task_polls=0, agent_pings=1) as fake:
        fake.add_template()
        linked_clone(fake)
        wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
        r = call(fake, "POST", "/nodes/pve1/qemu/100/agent/exec", {"command": ["true"]})
        assert (r.status, r.reason) == (403, f"Permission check failed (/vms/100, {priv})")
        assert r.json == {"data": None, "message": f"Permission check failed (/vms/100, {priv})\n"}
        ping = call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping")
        if version == "9.1":  # VM.GuestAgent.Audit is enough to ping
            assert ok(ping) == {"result": {}}
        else:
            assert ping.reason == "Permission check failed (/vms/100, VM.Monitor)"
        fake.revoke("VM.Clone", "/vms/9000")  # an ACL on the template that replaces the one inherited from /
        r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 101, "full": 0})
        assert (r.status, r.reason) == (403, "Permission check failed (/vms/9000, VM.Clone)")


# ---- the life of a linked clone ---------------------------------------------------------------


def test_full_vm_lifecycle(fake):
    fake.add_storage("vmbench-z16k", "zfspool", pool="rpool/data", blocksize="16k", sparse=0, content="images")
    assert [r["vmid"] for r in ok(call(fake, "GET", "/cluster/resources", {"type": "vm"}))] == [9000]
    assert ok(call(fake, "GET", "/cluster/nextid")) == "100"  # a JSON string, as PVE sends it
    assert call(fake, "GET", "/cluster/nextid", {"vmid": 9000}).errors == {"vmid": "VM 9000 already exists"}

    upid = ok(call(fake, "POST", "/nodes/pve1/qemu/9000/clone",
                   {"newid": 100, "name": "vmb-r1-1", "full": 0, "description": "vmbench run r1"}))
    assert upid.startswith("UPID:pve1:") and ":qmclone:9000:vmbench@pve!bench:" in upid
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))["lock"] == "clone"
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"cores": 2})
    assert (r.status, r.reason) == (500, "VM is locked (clone)")
    polls = [ok(call(fake, "GET", f"/nodes/pve1/tasks/{upid}/status"))["status"] for _ in range(3)]
    assert polls == ["running", "running", "stopped"]
    conf = ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))
    assert "lock" not in conf and "template" not in conf
    assert conf["tags"] == "debian12;template" and conf["description"] == "vmbench run r1"
    assert conf["virtio0"] == "local:9000/base-9000-disk-0.qcow2/100/vm-100-disk-0.qcow2,size=2G"

    upid = ok(call(fake, "POST", "/nodes/pve1/qemu/100/config", {
        "virtio1": "vmbench-z16k:8,cache=none,iothread=1,serial=VMB1", "scsihw": "virtio-scsi-single",
        "cpu": "x86-64-v2-AES", "cores": 2, "memory": 2048, "agent": 1, "tags": "vmbench;VMBench-r1;vmbench",
        "description": "run r1"}))
    assert ":qmconfig:100:" in upid and wait(fake, upid)["exitstatus"] == "OK"
    conf = ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))
    assert conf["virtio1"] == "vmbench-z16k:vm-100-disk-0,cache=none,iothread=1,serial=VMB1,size=8G"
    assert conf["tags"] == "vmbench;vmbench-r1" and conf["cores"] == 2 and conf["memory"] == "2048"
    log = ok(call(fake, "GET", f"/nodes/pve1/tasks/{upid}/log"))
    assert log[0] == {"n": 1, "t": f"virtio1: successfully created disk '{conf['virtio1']}'"} and log[-1]["t"] == "TASK OK"

    content = ok(call(fake, "GET", "/nodes/pve1/storage/vmbench-z16k/content", {"vmid": 100}))
    assert [(c["volid"], c["size"], c["format"]) for c in content] == [("vmbench-z16k:vm-100-disk-0", 8 << 30, "raw")]
    info = ok(call(fake, "GET", "/nodes/pve1/storage/vmbench-z16k/content/vmbench-z16k:vm-100-disk-0"))
    assert info["size"] == 8 << 30 and info["format"] == "raw" and os.path.getsize(info["path"]) == 8 << 30

    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
    cur = ok(call(fake, "GET", "/nodes/pve1/qemu/100/status/current"))
    assert (cur["status"], cur["qmpstatus"], cur["pid"], cur["agent"]) == ("running", "running", os.getpid(), 1)
    r = call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping")
    assert (r.status, r.reason) == (500, "QEMU guest agent is not running")  # agent_pings=2: the 2nd answers
    assert ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping")) == {"result": {}}

    pid = ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/exec", {"command": ["cat", "/sys/block/vdb/serial"]}))["pid"]
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": pid})) == {"exited": 0}
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": pid})) == \
        {"exited": 1, "exitcode": 0, "out-data": "VMB1\n"}
    r = call(fake, "GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": pid})
    assert (r.status, r.reason) == (500, "VM 100 qga command 'guest-exec-status' failed - Invalid parameter 'pid'")
    pid = ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/exec", {"command": "false", "input-data": "x"}))["pid"]
    call(fake, "GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": pid})
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": pid}))["err-data"] == "nope\n"
    assert fake.backend.executed[-1] == (100, ["false"], b"x")

    assert ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/file-write", {"file": "/root/x", "content": "hi"})) is None
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/agent/file-read", {"file": "/root/x"})) == {"content": "hi", "bytes-read": 2}

    r = call(fake, "DELETE", "/nodes/pve1/qemu/100", {"purge": 1, "destroy-unreferenced-disks": 1})
    assert (r.status, r.reason) == (500, "VM 100 is running - destroy failed")
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/stop")))
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/status/current"))["status"] == "stopped"
    upid = ok(call(fake, "DELETE", "/nodes/pve1/qemu/100", {"purge": 1, "destroy-unreferenced-disks": 1}))
    assert wait(fake, upid)["exitstatus"] == "OK"
    assert not os.path.exists(info["path"]) and 100 not in fake.vms
    assert ok(call(fake, "GET", "/nodes/pve1/storage/vmbench-z16k/content", {"vmid": 100})) == []
    assert ok(call(fake, "DELETE", "/storage/vmbench-z16k")) is None
    assert fake.problems == []
    calls = fake.calls()
    assert calls[:3] == [("GET", "/cluster/resources"), ("GET", "/cluster/nextid"), ("GET", "/cluster/nextid")]
    assert ("POST", "/nodes/{node}/qemu/{vmid}/clone") in calls and calls[-1] == ("DELETE", "/storage/{storage}")
    assert all("Authorization" not in json.dumps(r.params) for r in fake.requests)


def test_linked_clone_rules(fake):
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "full": 0, "storage": "local"})
    assert (r.status, r.reason) == (500, "parameter 'storage' not allowed for linked clones")
    linked_clone(fake)
    r = call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "full": 0})
    assert r.reason == "unable to create VM 100: config file already exists"
    fake.add_template(vmid=9001, template=False)
    r = call(fake, "POST", "/nodes/pve1/qemu/9001/clone", {"newid": 101, "full": 0})
    assert (r.status, r.reason) == (500, "Linked clone feature is not supported for 'local:9001/vm-9001-disk-0.qcow2' (virtio0)")


def test_destroy_after_its_storage_entry_was_deleted_is_a_task_error(fake):
    fake.add_storage("vmbench-z16k", "zfspool", pool="rpool/data")
    linked_clone(fake)
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": "vmbench-z16k:1"})))
    path = fake.volume_path("vmbench-z16k:vm-100-disk-0")
    assert ok(call(fake, "DELETE", "/storage/vmbench-z16k")) is None
    assert os.path.exists(path)  # only the entry goes
    st = wait(fake, ok(call(fake, "DELETE", "/nodes/pve1/qemu/100", {"purge": 1})))
    assert st["exitstatus"] == "storage 'vmbench-z16k' does not exist"
    assert ok(call(fake, "POST", "/storage", {"storage": "vmbench-z16k", "type": "zfspool", "pool": "rpool/data",
                                               "blocksize": "16k", "sparse": 0, "content": "images", "nodes": "pve1"})) == \
        {"storage": "vmbench-z16k", "type": "zfspool"}
    assert wait(fake, ok(call(fake, "DELETE", "/nodes/pve1/qemu/100", {"purge": 1})))["exitstatus"] == "OK"
    assert not os.path.exists(path)


def test_storage_create_checks_options_per_type(fake):
    r = call(fake, "POST", "/storage", {"storage": "z", "type": "zfspool", "pool": "rpool/data"})
    assert r.errors == {"storage": "invalid format - storage ID 'z' cannot be shorter than 2 characters\n"}
    r = call(fake, "POST", "/storage", {"storage": "zz", "type": "zfspool", "path": "/tank"})
    assert (r.status, r.reason) == (500, "unexpected property 'path'")
    r = call(fake, "POST", "/storage", {"storage": "zz", "type": "zfspool"})
    assert r.reason == "missing value for required option 'pool'"


def test_volume_allocation_and_node_facts(fake):
    fake.add_storage("vmbench-z16k", "zfspool", pool="rpool/data")
    assert ok(call(fake, "POST", "/nodes/pve1/storage/vmbench-z16k/content",
                   {"filename": "vm-100-disk-7", "size": "1G", "vmid": 100})) == "vmbench-z16k:vm-100-disk-7"
    r = call(fake, "POST", "/nodes/pve1/storage/vmbench-z16k/content", {"filename": "x-1", "size": "1G", "vmid": 100})
    assert r.reason == "illegal name 'x-1' - should be 'vm-100-*'"
    assert call(fake, "POST", "/nodes/pve1/storage/local/content",
                {"filename": "vm-100-disk-9.qcow2", "size": "512M", "vmid": 100}).data == "local:100/vm-100-disk-9.qcow2"
    fake.revoke("Datastore.Allocate", "/storage/vmbench-z16k")
    r = call(fake, "DELETE", "/nodes/pve1/storage/vmbench-z16k/content/vm-100-disk-7")
    assert (r.status, r.reason) == (403, "Permission check failed (/storage/vmbench-z16k, Datastore.Allocate)")
    fake.grant("/storage/vmbench-z16k", "Administrator")
    upid = ok(call(fake, "DELETE", "/nodes/pve1/storage/vmbench-z16k/content/vm-100-disk-7"))
    assert ":imgdel:100@vmbench-z16k:" in upid and wait(fake, upid)["exitstatus"] == "OK"
    assert ok(call(fake, "GET", "/nodes/pve1/storage/vmbench-z16k/status"))["type"] == "zfspool"
    status = ok(call(fake, "GET", "/nodes/pve1/status"))
    assert status["pveversion"].startswith(f"pve-manager/{fake.version}.")
    models = {m["name"]: m["vendor"] for m in ok(call(fake, "GET", "/nodes/pve1/capabilities/qemu/cpu"))}
    assert models["kvm64"] == "default" and models["x86-64-v2-AES"] == "default" and models["EPYC"] == "AuthenticAMD"


@pytest.mark.parametrize("outcome", ["WARNINGS: 1", "command 'zfs destroy' failed: got timeout"])
def test_task_outcomes_can_be_forced(outcome):
    with FakePve(task_outcomes={"qmstop": [outcome]}, task_polls=0) as fake:
        fake.add_template()
        linked_clone(fake)
        wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
        upid = ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/stop"))
        assert wait(fake, upid)["exitstatus"] == outcome
        assert ok(call(fake, "GET", f"/nodes/pve1/tasks/{upid}/log"))[-1]["t"] in (f"TASK {outcome}", f"TASK ERROR: {outcome}")
        assert fake.vms[100].running == outcome.startswith("command")


def test_iothread_on_a_shared_scsi_controller_warns_at_start(fake):
    linked_clone(fake)
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/config", {"scsi1": "local:1,iothread=1", "scsihw": "virtio-scsi-pci"})))
    assert wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))["exitstatus"] == "WARNINGS: 1"


def test_agent_needs_a_configured_running_agent(fake):
    linked_clone(fake)
    assert call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping").reason == "VM 100 is not running"
    assert ok(call(fake, "PUT", "/nodes/pve1/qemu/100/config", {"delete": "agent"})) is None  # PUT: synchronous
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
    assert call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping").reason == "No QEMU guest agent configured"


def test_legacy_scalars_become_arrays_and_file_read_params_differ_by_version(fake):
    linked_clone(fake)
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
    call(fake, "POST", "/nodes/pve1/qemu/100/agent/ping")
    ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/exec", {"command": "uname"}))
    assert fake.backend.executed[-1][1] == ["uname"]
    ok(call(fake, "POST", "/nodes/pve1/qemu/100/agent/file-write", {"file": "/f", "content": "abcdef"}))
    r = call(fake, "GET", "/nodes/pve1/qemu/100/agent/file-read", {"file": "/f", "offset": 2, "count": 3})
    if fake.version == "9.1":
        assert ok(r) == {"content": "cde", "bytes-read": 3, "truncated": 1}
    else:
        assert set(r.errors) == {"offset", "count"}


# ---- LibvirtBackend's mapping (pure, no libvirt) ---------------------------------------------


def _view(conf: dict, scratch_key: str, opts: dict) -> VmView:
    root = DriveView("virtio0", "virtio", 0, {"file": "local:x"}, "local:x", "/r.qcow2", "qcow2", 2 << 30)
    bus = scratch_key.rstrip("0123456789")
    scratch = DriveView(scratch_key, bus, 1, opts, "s:vm-100-disk-0", "/s.raw", "raw", 1 << 30)
    return VmView(100, "vm", {"boot": "order=virtio0", **conf}, [root, scratch], root)


def test_libvirt_backend_maps_pve_options_to_vmbench_settings():
    cfg, root, scratch, warn = vm_config(_view({"cores": 2, "memory": "2048", "cpu": "x86-64-v2-AES"}, "virtio1",
                                               {"cache": "none", "iothread": 1, "serial": "VMB1"}))
    assert (cfg.bus, cfg.cache.value, cfg.iothread, cfg.aio.value, cfg.vcpus, cfg.memory_mib) == \
        (Bus.VIRTIO_BLK, "none", True, "io_uring", 2, 2048)
    assert cfg.cpu.model == "qemu64" and cfg.cpu.aes is Feature.ON and ("sse4.2", Feature.ON) in cfg.cpu.features
    assert (root.key, scratch.key, warn) == ("virtio0", "virtio1", [])
    cfg, *_ = vm_config(_view({"scsihw": "virtio-scsi-single"}, "scsi1", {"iothread": 1, "aio": "native"}))
    assert (cfg.bus, cfg.iothread, cfg.aio.value) == (Bus.VIRTIO_SCSI, True, "native")
    cfg, _, _, warn = vm_config(_view({"scsihw": "virtio-scsi-pci"}, "scsi1", {"iothread": 1}))
    assert (cfg.bus, cfg.iothread) == (Bus.VIRTIO_SCSI, False) and warn
    cfg, *_ = vm_config(_view({}, "sata1", {"cache": "writeback"}))
    assert (cfg.bus, cfg.cache.value) == (Bus.SATA, "writeback")
    # detect-zeroes and discard as qemu-server derives them (PVE's default: detect-zeroes on)
    zeroes = {(): ("on", "ignore"), (("detect_zeroes", 0),): ("off", "ignore"), (("discard", "on"),): ("unmap", "unmap"),
              (("discard", "on"), ("detect_zeroes", 1)): ("unmap", "unmap"),
              (("discard", "on"), ("detect_zeroes", 0)): ("off", "unmap"), (("discard", "ignore"),): ("on", "ignore")}
    for opts, want in zeroes.items():
        cfg, *_ = vm_config(_view({}, "virtio1", dict(opts)))
        assert (cfg.detect_zeroes.value, cfg.discard.value) == want, opts
    assert parse_cpu(None).model == "kvm64" and parse_cpu("max").mode is CpuMode.MAX
    assert parse_cpu("kvm64,flags=+aes;-pcid").features == (("pcid", Feature.OFF),)


# ---- I/O limits: qemu-server's checks after the schema, and what QEMU gets -----------------


@pytest.mark.parametrize("options", [
    "iops=100,iops_rd=50", "iops=100,iops_wr=50", "mbps=10,mbps_rd=5", "mbps=10,mbps_wr=5.5",
    "mbps_max=20", "mbps_rd_max=20", "mbps_wr_max=1.5", "bps_rd=1048576,mbps_rd=1",
    "iops=10,iops_max_length=3", "mbps=10,bps_max_length=3",
])
def test_drive_limits_qemu_server_cannot_parse_are_refused(fake, options):
    """Schema-valid, but qemu-server's parse_drive returns nothing: 400 "unable to parse drive
    options" for that key (API2/Qemu.pm $check_drive_param), on config updates and on create."""
    linked_clone(fake)
    r = call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": f"local:1,{options}"})
    assert (r.status, r.reason, r.errors) == (400, "Parameter verification failed.", {"virtio1": "unable to parse drive options"})
    r = call(fake, "POST", "/nodes/pve1/qemu", {"vmid": 150, "virtio0": f"local:1,{options}"})
    assert (r.status, r.errors) == (400, {"virtio0": "unable to parse drive options"})
    assert "virtio1" not in fake.vms[100].config and 150 not in fake.vms
    assert fake.problems == []


def test_drive_limits_qemu_server_accepts_are_stored_and_reach_qemu(fake):
    linked_clone(fake)
    opts = "iops_rd=500,iops_wr=300,mbps=12.5,iops_rd_max=1000,mbps_max=20,iops_rd_max_length=5,bps_max_length=5"
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/config", {"virtio1": f"local:1,{opts}"})))
    stored = ok(call(fake, "GET", "/nodes/pve1/qemu/100/config"))["virtio1"]
    for item in opts.split(","):
        assert f",{item}," in stored + ",", stored
    # iops_max without iops passes qemu-server (it checks miops_max => miops, keys that never exist)
    assert call(fake, "PUT", "/nodes/pve1/qemu/100/config", {"virtio2": "local:1,iops_max=9"}).status == 200
    from tests.fakepve import qemu
    drive = dict(item.split("=", 1) for item in opts.split(","))
    assert qemu.drive_throttling(drive) == (
        ",throttling.bps-total=13107200,throttling.bps-total-max=20971520,throttling.bps-total-max-length=5,"
        "throttling.iops-read=500,throttling.iops-read-max=1000,throttling.iops-read-max-length=5,throttling.iops-write=300")
    assert qemu.throttle_group("virtio1", drive) == (
        '{"id":"throttle-drive-virtio1","limits":{"bps-total":13107200,"bps-total-max":20971520,"bps-total-max-length":5,'
        '"iops-read":500,"iops-read-max":1000,"iops-read-max-length":5,"iops-write":300},"qom-type":"throttle-group"}')
    assert qemu.throttle_group("scsi0", {}) == '{"id":"throttle-drive-scsi0","limits":{},"qom-type":"throttle-group"}'
    # bps (bytes) becomes mbps "0.000" in parse_drive: it passes the checks and limits nothing
    assert call(fake, "PUT", "/nodes/pve1/qemu/100/config", {"virtio3": "local:1,bps_rd=1048576,mbps_rd_max=2"}).status == 200
    assert qemu.throttle_limits({"bps_rd": "1048576", "mbps_rd_max": "2"}) == {"bps-read-max": 2 * 1024 * 1024}
    assert fake.problems == []


def test_libvirt_backend_limits_the_real_guest_with_iotune():
    from tests.fakepve.libvirt_backend import add_iotune

    disk = ET.fromstring('<disk><driver name="qemu"/><source file="/s.raw"/><target dev="vdb" bus="virtio"/><serial>S</serial></disk>')
    add_iotune(disk, {"iops_rd": "500", "mbps": "12.5", "mbps_max": "20", "bps_max_length": "5"})
    assert [c.tag for c in disk] == ["driver", "source", "target", "iotune", "serial"]
    assert [(c.tag, c.text) for c in disk.find("iotune")] == [
        ("total_bytes_sec", "13107200"), ("total_bytes_sec_max", "20971520"), ("total_bytes_sec_max_length", "5"),
        ("read_iops_sec", "500")]
    plain = ET.fromstring('<disk><target dev="vdb"/></disk>')
    add_iotune(plain, {"cache": "none"})
    assert plain.find("iotune") is None


@pytest.mark.parametrize("action", ["stop", "shutdown"])
def test_stopping_a_stopped_vm_is_a_task_that_ends_ok(fake, action):
    """qemu-server's vm_stop/vm_shutdown: a task whatever the state; _do_vm_stop returns when no QEMU runs."""
    linked_clone(fake)
    upid = ok(call(fake, "POST", f"/nodes/pve1/qemu/100/status/{action}"))
    assert f":qm{action}:100:" in upid and wait(fake, upid)["exitstatus"] == "OK"
    assert ok(call(fake, "GET", "/nodes/pve1/qemu/100/status/current"))["status"] == "stopped"
    wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/100/status/start")))
    wait(fake, ok(call(fake, "POST", f"/nodes/pve1/qemu/100/status/{action}")))
    upid = ok(call(fake, "POST", f"/nodes/pve1/qemu/100/status/{action}"))  # again, once stopped
    assert wait(fake, upid)["exitstatus"] == "OK" and not fake.vms[100].running
    assert fake.problems == []
