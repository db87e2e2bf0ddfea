"""FakePve: a threaded HTTPS server on 127.0.0.1 speaking ``/api2/json`` like a PVE node.

Request flow as pve-http-server + pve-manager's rest_handler + pve-common's RESTHandler:
route (501 "Method 'GET /x' not implemented"), API token (401 with the reason PVE gives),
parameters from query (GET/DELETE) or body (POST/PUT; repeated keys -> list; JSON bodies
too), path parameters merged, permission check (403 "Permission check failed (...)"),
legacy normalisation (scalar -> [scalar] for arrays, list -> joined for ``-list`` formats),
schema validation (400 "Parameter verification failed."), the handler (500 with PVE's text
on ``die``), then the answer checked against the method's ``returns`` schema."""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import json
import re
import secrets
import socket
import ssl
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import unquote, unquote_plus, urlsplit

from .backends import BackendError
from .handlers import H
from .model import ApiError, State
from .perms import InvalidPrivilege
from .schema import Api, SchemaError
from .validate import Checker

REDACT = re.compile(r"password|secret|token|keyring|encryption-key|master-pubkey|sshkeys", re.I)


@dataclass
class Request:
    method: str
    path: str  # below /api2/json, as sent (unescaped)
    template: str | None
    params: dict  # secrets redacted
    status: int = 0
    reason: str = ""


def make_tls(directory: Path) -> tuple[Path, Path, Path, str]:
    """A CA and a server certificate for 127.0.0.1/localhost: (ca.pem, cert.pem, key.pem, sha256 fingerprint)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Proxmox Virtual Environment (fakepve)"),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, "PVE Cluster Manager CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
          .not_valid_after(now + datetime.timedelta(days=30))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                       key_encipherment=False, data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, cert_file, key_file = directory / "pve-root-ca.pem", directory / "pveproxy-ssl.pem", directory / "pveproxy-ssl.key"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    key_file.chmod(0o600)
    digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest().upper()
    return ca_file, cert_file, key_file, ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def parse_urlencoded(data: str) -> dict[str, Any]:
    """pve-http-server decode_urlencoded: pairs split on '&' *and* ';', each pair split on
    '=' keeping only the first two fields (an unescaped '=' or ';' in a value truncates it),
    '+' and %XX decoded, repeated keys collected into a list."""
    out: dict[str, Any] = {}
    for kv in re.split(r"[&;]", data or ""):
        if not kv:
            continue
        fields = [f for f in kv.split("=")]
        while len(fields) > 1 and fields[-1] == "":  # Perl's split drops trailing empty fields
            fields.pop()
        k = unquote_plus(fields[0])
        v = unquote_plus(fields[1], errors="replace") if len(fields) > 1 else None
        if v is not None and k in out and out[k] is not None:
            out[k] = (out[k] if isinstance(out[k], list) else [out[k]]) + [v]
        else:
            out[k] = v
    return out


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "pve-api-daemon/3.0"
    # headers and body go out as two TLS records: without TCP_NODELAY the body waits for the
    # client's delayed ACK of the headers (Nagle), 40 ms per request
    disable_nagle_algorithm = True
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        pass

    def do_GET(self) -> None:
        self.server.fake.handle(self, "GET")

    def do_POST(self) -> None:
        self.server.fake.handle(self, "POST")

    def do_PUT(self) -> None:
        self.server.fake.handle(self, "PUT")

    def do_DELETE(self) -> None:
        self.server.fake.handle(self, "DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    tls: ssl.SSLContext

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.conns: set = set()  # open connections, cut when the server stops (:meth:`cut`)
        self.conns_lock = threading.Lock()

    def finish_request(self, request, client_address) -> None:
        """TLS handshake in the connection's own thread (a stuck client blocks nobody)."""
        try:
            request.settimeout(30)
            conn = self.tls.wrap_socket(request, server_side=True)  # takes the socket over
        except (ssl.SSLError, OSError):
            return
        with self.conns_lock:
            self.conns.add(conn)
        try:
            self.RequestHandlerClass(conn, client_address, self)
        finally:
            self._forget(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _forget(self, request) -> None:
        with self.conns_lock:
            self.conns.discard(request)

    def cut(self) -> None:
        """Stop listening and cut every open connection (keep-alive ones too), as a stopped
        pveproxy does: clients see their connection reset, then connections refused."""
        self.shutdown()
        self.server_close()
        with self.conns_lock:
            conns, self.conns = list(self.conns), set()
        for sock in conns:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Dispatcher:
    """The request pipeline; FakePve (``fake.py``) owns one."""

    def __init__(self, *, version: str, state: State, api: Api, checker: Checker) -> None:
        self.version = version
        self.state = state
        self.api = api
        self.checker = checker
        self.lock = threading.RLock()
        self.requests: list[Request] = []
        self.problems: list[str] = []
        #: pvedaemon stopped (FakePve.api_down("pvedaemon")): pveproxy answers 595 for what it proxies to it
        self.daemon_down = False
        #: (METHOD, path template) whose next request is served and its answer lost (FakePve.lose_answer)
        self.lose_answers: list[tuple[str, str]] = []

    # ---- HTTP plumbing -----------------------------------------------------------------

    def handle(self, h: BaseHTTPRequestHandler, method: str) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        url = urlsplit(h.path)
        path = unquote(url.path)
        req = Request(method, path, None, {})
        try:
            status, reason, payload = self.process(h, method, path, url.query, body, req)
        except Exception as exc:  # noqa: BLE001 - a fake bug: make the test fail
            self.problem(f"{method} {path}: internal error in the fake: {exc!r}")
            status, reason, payload = 500, "fakepve internal error", {"data": None, "message": f"{exc!r}\n"}
        req.status, req.reason = status, reason
        with self.lock:
            lost = (method, req.template) in self.lose_answers
            if lost:
                self.lose_answers.remove((method, req.template))
        if lost:  # done, but the connection drops before the answer: the client cannot tell whether it was
            req.reason = f"answer lost ({reason})"
            if status == 200 and isinstance((payload or {}).get("data"), str) and payload["data"].startswith("UPID:"):
                with self.lock:  # nobody polls its task now: it runs to its end on its own, as on a node
                    self.state.finish_all()
            h.close_connection = True
            h.connection.shutdown(socket.SHUT_RDWR)
            return
        raw = json.dumps(payload).encode() if payload is not None else b""
        h.send_response(status, reason)
        h.send_header("Content-Type", "application/json;charset=UTF-8")
        h.send_header("Content-Length", str(len(raw)))
        h.send_header("Cache-Control", "max-age=0")
        if status >= 400:
            h.send_header("Connection", "close")
            h.close_connection = True
        h.end_headers()
        h.wfile.write(raw)

    def problem(self, text: str) -> None:
        self.problems.append(text)

    @staticmethod
    def error(status: int, message: str, errors: dict | None = None) -> tuple[int, str, dict]:
        payload: dict[str, Any] = {"data": None}
        if errors:
            payload["errors"] = errors
        payload["message"] = message
        reason = message.split("\n", 1)[0]  # pve-http-server sends the first line as reason phrase
        return status, reason, payload

    # ---- the pipeline --------------------------------------------------------------------

    def process(self, h, method: str, path: str, query: str, body: bytes, req: Request) -> tuple[int, str, Any]:
        m = re.fullmatch(r"/api2/json(/.*)?", path)
        if not m:
            return 501, "no such uri", {"data": None}
        rel = m.group(1) or "/"
        req.path = rel
        with self.lock:
            self.requests.append(req)
        auth, authid = self.authenticate(h.headers.get("Authorization"))
        if auth is not None:
            return 401, auth, None
        info, uri_params, template = self.api.route(method, rel)
        req.template = template
        if info is None:
            return 501, f"Method '{method} {rel}' not implemented", {"data": None}
        if self.daemon_down and info.info.get("protected"):  # pveproxy proxies these to pvedaemon, which is down
            return self.error(595, "Connection refused")
        params: dict[str, Any] = {}
        if body and method not in ("POST", "PUT"):
            return 501, f"Unexpected content for method '{method}'", None
        if method in ("POST", "PUT") and body:
            ctype = (h.headers.get("Content-Type") or "").split(";")[0].strip()
            params = json.loads(body) if ctype == "application/json" else parse_urlencoded(body.decode())
        params.update(parse_urlencoded(query))
        params.pop("_dc", None)
        req.params = {k: ("<redacted>" if REDACT.search(k) else v) for k, v in params.items()}
        for k in params:
            if k in uri_params:
                return self.error(400, "Parameter verification failed.\n", {k: "duplicate parameter (already defined in URI)"})
        params.update(uri_params)
        with self.lock:
            try:
                self.state.user = authid  # who makes the handler's own checks, and owns its tasks
                denied = self.state.access.check_api2(info.permissions, authid, params)
                if denied is not None:
                    return self.error(403, denied + "\n")
                params = self.normalize(info.parameters, params)
                errors: dict = {}
                self.checker.check_prop(params, info.parameters, "", errors)
                if errors:
                    return self.error(400, "Parameter verification failed.\n", errors)
                handler = H.get((method, template))
                if handler is None:
                    raise SchemaError(f"{method} {template} is not implemented by the fake PVE")
                data = handler(self.state, {k: v for k, v in params.items() if v is not None})
                self.check_result(method, template, info.returns, data)
                return 200, "OK", {"data": data}
            except SchemaError as exc:
                self.problem(f"{method} {rel}: {exc}")
                return self.error(501, f"fakepve: {exc}\n")
            except ApiError as exc:
                return self.error(exc.status, exc.message, exc.errors)
            except BackendError as exc:
                return self.error(500, f"{exc}\n")
            except InvalidPrivilege as exc:  # verify_privname dies
                return self.error(500, f"{exc}\n")

    def authenticate(self, header: str | None) -> tuple[str | None, str]:
        """(None, the token id) when the token and its secret are good, else (the reason
        phrase PVE sends with 401, "")."""
        if not header:
            return "No ticket", ""
        m = re.fullmatch(r"PVEAPIToken=(.*)", header.strip())
        if not m:
            return "No ticket", ""
        text = m.group(1)
        if "=" not in text:
            return "no tokenid specified", ""
        tokenid, _, value = text.rpartition("=")
        user, sep, _name = tokenid.partition("!")
        if not sep or not re.fullmatch(r"[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+", user):
            return f"'{tokenid}' is not a valid token ID", ""
        with self.lock:
            reason = self.state.access.authenticate(tokenid, value)
        return (reason, "") if reason else (None, tokenid)

    def normalize(self, schema: dict, params: dict) -> dict:
        """RESTHandler's normalize_legacy_param_formats (top level only)."""
        props = schema.get("properties") or {}
        for key, value in list(params.items()):
            sub = props.get(key)
            if not sub or not value:
                continue
            if isinstance(value, list) and sub.get("type") == "string" and str(sub.get("format", "")).endswith("-list"):
                params[key] = ",".join(value)
            elif not isinstance(value, list) and sub.get("type") == "array":
                params[key] = [value]
        return params

    def check_result(self, method: str, template: str, returns: dict, data: Any) -> None:
        errors: dict = {}
        self.checker.check_prop(data, returns, "", errors)
        if errors:
            raise SchemaError(f"result verification failed for {method} {template}: {errors}")


def private_root(base: str | None) -> Path:
    """/var/lib/vmbench-fakepve-<hex> when writable (root), else a temp directory."""
    suffix = secrets.token_hex(4)
    if base is None:
        try:
            path = Path(f"/var/lib/vmbench-fakepve-{suffix}")
            path.mkdir(mode=0o711)
            return path
        except OSError:
            base = tempfile.gettempdir()
    path = Path(base) / f"vmbench-fakepve-{suffix}"
    path.mkdir(mode=0o711)
    path.chmod(0o711)
    return path


def serve(dispatcher: Dispatcher, cert: Path, key: Path, port: int = 0) -> tuple[_Server, threading.Thread]:
    server = _Server(("127.0.0.1", port), _Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    server.tls = ctx
    server.fake = dispatcher
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fakepve", daemon=True)
    thread.start()
    return server, thread
