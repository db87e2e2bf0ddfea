"""The PVE API seam: parameter encoding, typed errors with PVE's texts, task waiting, TLS
(CA file, pinned fingerprint, refusal) against a real local HTTPS server, the token secret
read from a file or the environment, and never shown anywhere."""

from __future__ import annotations

import http.server
import json
import logging
import os
import shutil
import socket
import ssl
import subprocess
import threading
import traceback

import pytest

from tests.unit.test_proxmox_minipve import TOKEN, MiniPve, PveFault
from vmbench.drivers.proxmox.api import PveApi, Secret, encode_params, read_secret, shown, upid_node
from vmbench.drivers.proxmox.errors import (PveApiError, PveAuthError, PveLockedError, PveParameterError,
                                            PvePermissionError, PveTaskError, PveTlsError, PveUnreachable)
from vmbench.errors import HypervisorError, PreflightError
from vmbench.scenario.model import ProxmoxConfig

SECRET = TOKEN[1]


def config(**kw) -> ProxmoxConfig:
    base = dict(host="pve.test", node="pve1", template=9000, storage="local-zfs", token_id=TOKEN[0], secret_env="VMB_T")
    return ProxmoxConfig(**{**base, **kw})


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def api_on(pve: MiniPve, secret: str = SECRET, **kw) -> PveApi:
    clock = Clock()
    api = PveApi(config(**kw), Secret(secret), clock=clock, sleep=clock.sleep)
    api.session.mount("https://", pve)
    return api


# ---- encoding ----------------------------------------------------------------------------------


def test_booleans_lists_and_hyphenated_names_are_encoded_in_one_place():
    pve = MiniPve()
    api = api_on(pve)
    api.delete("/nodes/pve1/qemu/9000", {"purge": True, "destroy-unreferenced-disks": True, "skiplock": None})
    method, path, params = pve.requests[-1]
    assert (method, path, params) == ("DELETE", "/nodes/pve1/qemu/9000", {"purge": "1", "destroy-unreferenced-disks": "1"})
    pve.vms[9000]["status"], pve.vms[9000]["pings"], pve.agent_pings = "running", 0, 0
    api.post("/nodes/pve1/qemu/9000/agent/exec", {"command": ["sh", "-c", "echo a b"], "input-data": "x"})
    assert pve.requests[-1][2] == {"command": ["sh", "-c", "echo a b"], "input-data": "x"}  # repeated keys, not shlex
    assert encode_params({"a": False, "b": [True, "x"], "c": 0}) == {"a": 0, "b": [1, "x"], "c": 0}
    assert shown({"input-data": "secret stdin", "file": "/x"}) == "input-data=<12 chars> file='/x'"


def test_upid_node():
    assert upid_node("UPID:pve-2:0001A2B3:0193F6A1:65B2C3D4:qmclone:9000:vmbench@pve!bench:") == "pve-2"
    with pytest.raises(PveApiError):
        upid_node("not-a-upid")


# ---- errors ----------------------------------------------------------------------------------


def fault(pve: MiniPve, status: int, reason: str, errors: dict | None = None, method: str = "GET", path: str = "/version"):
    pve.faults.append((method, path, PveFault(status, reason, errors)))


def test_wrong_token_is_401_with_the_token_id_and_where_the_secret_came_from():
    with pytest.raises(PveAuthError) as exc:
        api_on(MiniPve(), secret="wrong-secret").get("/version")
    e = exc.value
    assert e.message == "the Proxmox API at https://pve.test:8006 refused the token vmbench@pve!bench (401 authentication failure)"
    assert "VMB_T" in e.hint and isinstance(e, HypervisorError) and e.status == 401


def test_missing_privilege_is_named_from_pves_text():
    pve = MiniPve()
    fault(pve, 403, "Permission check failed (/vms/100, VM.GuestAgent.Unrestricted)", method="POST",
          path="/nodes/pve1/qemu/100/agent/exec")
    with pytest.raises(PvePermissionError) as exc:
        api_on(pve).post("/nodes/pve1/qemu/100/agent/exec", {"command": ["true"]})
    e = exc.value
    assert (e.privilege, e.acl_path) == ("VM.GuestAgent.Unrestricted", "/vms/100")
    assert e.message == ("POST /nodes/pve1/qemu/100/agent/exec: the token vmbench@pve!bench lacks VM.GuestAgent.Unrestricted "
                         "on /vms/100 (403 Permission check failed (/vms/100, VM.GuestAgent.Unrestricted))")
    assert e.hint.startswith("guest agent calls need VM.Monitor on PVE 8, VM.GuestAgent.Unrestricted on PVE 9; "
                             "`vmbench doctor SCENARIO` lists every privilege the token lacks, with its path and the pveum lines")
    assert "PVEVMAdmin" not in e.hint  # never more than vmbench needs
    assert "PVE 9" in e.hint
    fault(pve, 403, "Permission check failed (/storage, Datastore.Allocate)", method="POST", path="/storage")
    with pytest.raises(PvePermissionError) as exc:
        api_on(pve).post("/storage", {"storage": "x", "type": "zfspool"})
    assert "PVEDatastoreAdmin" not in exc.value.hint and "lacks Datastore.Allocate on /storage" in exc.value.message
    assert "vmbench doctor SCENARIO" in exc.value.hint


def test_parameter_errors_carry_pves_message_per_parameter():
    pve = MiniPve()
    fault(pve, 400, "Parameter verification failed.", {"virtio1": "invalid format - invalid key in comma-separated list property: ssd",
                                                       "cpu": "value does not match the regex pattern"}, "POST", "/nodes/pve1/qemu/9000/config")
    with pytest.raises(PveParameterError) as exc:
        api_on(pve).post("/nodes/pve1/qemu/9000/config", {"virtio1": "local-zfs:8,ssd=1"})
    assert exc.value.message == ("POST /nodes/pve1/qemu/9000/config: Proxmox refused the parameters: cpu: value does not match "
                                 "the regex pattern; virtio1: invalid format - invalid key in comma-separated list property: ssd")
    assert exc.value.errors["virtio1"].endswith("ssd")


def test_locked_vm_and_other_server_errors():
    pve = MiniPve()
    fault(pve, 500, "VM is locked (clone)", method="POST", path="/nodes/pve1/qemu/100/config")
    with pytest.raises(PveLockedError) as exc:
        api_on(pve).post("/nodes/pve1/qemu/100/config", {"cores": 1})
    assert exc.value.lock == "clone" and exc.value.message == "POST /nodes/pve1/qemu/100/config: VM is locked (clone)"
    assert "qm unlock" in exc.value.hint
    with pytest.raises(PveApiError) as exc:
        api_on(pve).get("/nodes/pve1/qemu/777/config")
    assert exc.value.gone and "777.conf' does not exist" in exc.value.message
    fault(pve, 595, "Connection refused")
    with pytest.raises(PveUnreachable, match="could not reach the node"):
        api_on(pve).get("/version")


def test_unreachable_api_is_named():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens
    api = PveApi(config(host="127.0.0.1", port=port, timeout=5), Secret(SECRET))
    with pytest.raises(PveUnreachable) as exc:
        api.get("/version")
    assert exc.value.message == f"cannot reach the Proxmox API at https://127.0.0.1:{port}: Connection refused"
    assert "pveproxy" in exc.value.hint


def test_a_silent_api_times_out_within_the_configured_timeout():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    try:
        api = PveApi(config(host="127.0.0.1", port=server.getsockname()[1], timeout=0.5), Secret(SECRET))
        with pytest.raises(PveUnreachable, match=r"did not answer GET /version within 0.5s"):
            api.get("/version")
    finally:
        server.close()


# ---- tasks ---------------------------------------------------------------------------------


def test_wait_task_ok_warnings_failure_and_timeout():
    pve = MiniPve(task_polls=3)
    api = api_on(pve)
    upid = pve.task("qmconfig", 100)
    assert api.wait_task(upid, 60, "configuring").exitstatus == "OK"
    polls = [r for r in pve.requests if r[1].endswith("/status")]
    assert len(polls) == 4  # running three times, then stopped
    warn = pve.task("qmdestroy", 100, "WARNINGS: 2", ["starting", "WARN: Could not remove disk 'x'", "warn: second", "TASK WARNINGS: 2"])
    result = api.wait_task(warn, 60, "destroying")
    assert result.exitstatus == "WARNINGS: 2"
    assert result.warnings == ("WARN: Could not remove disk 'x'", "warn: second", "TASK WARNINGS: 2")
    bad = pve.task("qmclone", 9000, "clone failed: storage 'x' does not exist", [f"line {i}" for i in range(30)])
    with pytest.raises(PveTaskError) as exc:
        api.wait_task(bad, 60, "cloning 9000")
    assert exc.value.message == "cloning 9000 failed: clone failed: storage 'x' does not exist"
    assert exc.value.log == [f"line {i}" for i in range(15, 30)] and "line 29" in exc.value.hint
    slow = MiniPve(task_polls=10 ** 6)
    api = api_on(slow)
    with pytest.raises(PveTaskError, match=r"the task did not finish within 10s"):
        api.wait_task(slow.task("qmstart", 100), 10, "starting")
    assert api.clock() <= 12  # bounded: never hangs
    assert api.wait_task(None, 1).exitstatus == "OK"  # a call that finished without a task


# ---- the secret --------------------------------------------------------------------------------


def test_read_secret_from_file_and_environment(tmp_path, caplog):
    f = tmp_path / "pve.token"
    f.write_text(SECRET + "\n")
    os.chmod(f, 0o600)
    cfg = config(secret_env=None, secret_file=str(f))
    with caplog.at_level(logging.WARNING):
        assert read_secret(cfg).reveal() == SECRET
    assert not caplog.records
    os.chmod(f, 0o644)
    with caplog.at_level(logging.WARNING):
        read_secret(cfg)
    assert "can be read by other users (mode 644); chmod 600 it" in caplog.text and SECRET not in caplog.text
    assert read_secret(config(), {"VMB_T": SECRET}).reveal() == SECRET
    with pytest.raises(PreflightError, match="the environment variable VMB_T .* is not set or empty"):
        read_secret(config(), {})
    with pytest.raises(PreflightError, match=r"token secret file .*/missing does not exist"):
        read_secret(config(secret_env=None, secret_file=str(tmp_path / "missing")))
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(PreflightError, match="is empty"):
        read_secret(config(secret_env=None, secret_file=str(tmp_path / "empty")))
    (tmp_path / "bin").write_bytes(b"\xff\xfe" + SECRET.encode())
    with pytest.raises(PreflightError) as exc:
        read_secret(config(secret_env=None, secret_file=str(tmp_path / "bin")))
    assert SECRET not in str(exc.value) and "is not text" in str(exc.value)
    assert repr(Secret(SECRET)) == "Secret('***')" and SECRET not in str(Secret(SECRET))


def test_the_token_never_shows_in_errors_logs_or_reprs(caplog):
    pve = MiniPve()
    fault(pve, 500, f"echoing {SECRET} back", method="GET", path="/version")
    fault(pve, 400, "Parameter verification failed.", {"x": f"bad {SECRET}"}, "GET", "/nodes")
    failures = []
    with caplog.at_level(logging.DEBUG), caplog.at_level(logging.DEBUG, logger="proxmoxer.core"):  # even then, no bodies
        api = api_on(pve)
        for call in (lambda: api.get("/version"), lambda: api.get("/nodes"), lambda: api_on(MiniPve(), secret=SECRET + "x").get("/version"),
                     lambda: api.post("/nodes/pve1/qemu/100/agent/exec", {"command": ["cat"], "input-data": SECRET}),
                     lambda: PveApi(config(host="127.0.0.1", port=9, timeout=5), Secret(SECRET)).get("/version")):
            try:
                call()
            except PveApiError as exc:
                failures.append(exc)
    assert len(failures) == 5
    for exc in failures:
        text = "".join(traceback.format_exception(exc)) + repr(exc) + str(exc.hint) + exc.reason + json.dumps(exc.errors)
        assert SECRET not in text, text
        assert exc.__context__ is None and exc.__cause__ is None  # no chained exception holding the request headers
    assert "***" in failures[0].message and "***" in failures[1].message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "PVE GET /version" in logged and "input-data=<36 chars>" in logged
    assert SECRET not in logged
    assert SECRET not in repr(api) and SECRET not in repr(api.__dict__.get("_secret"))
    assert all(h.startswith("PVEAPIToken=vmbench@pve!bench=") for h in pve.auth_headers)  # it was sent, only there


# ---- TLS against a real HTTPS server ---------------------------------------------------------------


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        body = json.dumps({"data": {"version": "9.1.1", "release": "9.1", "repoid": "abcdef12"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture(scope="module")
def https(tmp_path_factory):
    if not shutil.which("openssl"):
        pytest.skip("openssl is not installed")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    fp = subprocess.run(["openssl", "x509", "-in", str(cert), "-noout", "-fingerprint", "-sha256"], check=True,
                        capture_output=True, text=True).stdout.strip().split("=", 1)[1]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield {"port": server.server_address[1], "ca": str(cert), "fp": fp}
    server.shutdown()


def test_tls_ca_file_verifies(https):
    api = PveApi(config(host="127.0.0.1", port=https["port"], tls_ca_file=https["ca"], timeout=5), Secret(SECRET))
    assert api.get("/version")["release"] == "9.1"


def test_tls_unknown_ca_is_refused_with_a_hint(https):
    api = PveApi(config(host="127.0.0.1", port=https["port"], timeout=5), Secret(SECRET))
    with pytest.raises(PveTlsError) as exc:
        api.get("/version")
    assert exc.value.message.startswith(f"TLS verification of https://127.0.0.1:{https['port']} failed "
                                        "(verified against the system CA store): ")
    assert "pve-root-ca.pem" in exc.value.hint and "fingerprint" in exc.value.hint


def test_tls_pinned_fingerprint_matches_or_is_refused(https):
    api = PveApi(config(host="127.0.0.1", port=https["port"], tls_fingerprint=https["fp"], timeout=5), Secret(SECRET))
    assert api.get("/version")["version"] == "9.1.1"
    other = ":".join(["AB"] * 32)
    api = PveApi(config(host="127.0.0.1", port=https["port"], tls_fingerprint=other, timeout=5), Secret(SECRET))
    with pytest.raises(PveTlsError) as exc:
        api.get("/version")
    assert exc.value.message == (f"the TLS certificate of https://127.0.0.1:{https['port']} does not match the pinned fingerprint "
                                 f"(hypervisor.tls.fingerprint): the server's is {https['fp']}")


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_verify_off_only_when_asked(https):
    api = PveApi(config(host="127.0.0.1", port=https["port"], tls_verify=False, timeout=5), Secret(SECRET))
    assert api.get("/version")["release"] == "9.1"


def test_missing_ca_file_is_named(tmp_path):
    with pytest.raises(PveTlsError, match=r"the CA file .*/nope.pem \(hypervisor.tls.ca_file\) does not exist"):
        PveApi(config(tls_ca_file=str(tmp_path / "nope.pem")), Secret(SECRET))
