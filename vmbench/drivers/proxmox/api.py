"""The Proxmox VE API, through proxmoxer's https backend, behind one seam.

Every request goes through :meth:`PveApi._exec`: parameters are encoded there (booleans as
0/1, ``None`` dropped, lists as repeated keys, hyphenated names as they are), it is logged
there at debug level (without secrets: ``input-data`` and ``content`` only by length), and
every failure is mapped there to a typed error (:mod:`.errors`) whose message names the
request and PVE's own text.

The token secret is read at connect time (:func:`read_secret`) from a file or an
environment variable, handed to proxmoxer and kept otherwise only in a :class:`Secret`
whose ``repr`` hides it; every message is redacted against it before it leaves this module.
TLS is verified against a CA file, the system CAs, or pinned to a SHA-256 fingerprint (an
``HTTPAdapter`` passing urllib3 ``assert_fingerprint``); it is off only when the scenario
says ``tls: {verify: false}``.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypedDict

import requests
import urllib3.exceptions
from proxmoxer import ProxmoxAPI
from proxmoxer.core import ResourceException
from requests.adapters import HTTPAdapter

from ...errors import PreflightError
from ...scenario.load import MAX_VMS
from ...scenario.model import ProxmoxConfig
from .errors import (LOCKED_RE, PERMISSION_RE, PveAnswerLost, PveApiError, PveAuthError, PveLockedError, PveParameterError,
                     PvePermissionError, PveTaskError, PveTlsError, PveUnreachable)
from .outage import (LOST, OUTAGE_SECONDS, REFUSED, RETRY_FIRST_PAUSE, RETRY_MAX_PAUSE, STATUS_OUTAGE, Outages, idempotent,
                     node_of, where)

log = logging.getLogger(__name__)

#: parameters whose values never reach a log line (stdin of guest commands, file contents)
SENSITIVE_PARAMS = frozenset({"input-data", "content", "password", "token_value"})
UPID_RE = re.compile(r"^UPID:([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?):[0-9A-Fa-f]{8,}:[0-9A-Fa-f]{8,}:[0-9A-Fa-f]{8,}:[^:]*:[^:]*:[^:]+:$")
WARNINGS_RE = re.compile(r"^WARNINGS: (\d+)$")
#: connections kept for reuse: a load step's VMs call the API from as many threads at once
#: (requests keeps 10: the rest were closed after each call, and urllib3 warned each time)
POOL_SIZE = MAX_VMS


class _Failed(TypedDict, total=False):
    """What every :class:`~.errors.PveApiError` is told about the request that failed."""

    method: str
    path: str
    status: int | None
    reason: str
    errors: dict


class _QuietProxmoxer(logging.Filter):
    """proxmoxer logs request bodies (guest stdin, file contents) at INFO and response bodies
    at DEBUG; only its warnings and errors get through, whatever level someone sets."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


for _name in ("proxmoxer.core", "proxmoxer.backends.https"):
    logging.getLogger(_name).addFilter(_QuietProxmoxer())


class Secret:
    """A secret that never shows itself: ``repr``/``str`` give ``***``; :meth:`reveal` gives it."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def redact(self, text: str) -> str:
        return text.replace(self._value, "***") if self._value else text

    def __repr__(self) -> str:
        return "Secret('***')"

    __str__ = __repr__

    def __reduce__(self):  # pragma: no cover - never pickled, never copied into results
        raise TypeError("a Secret is never pickled")


def read_secret(cfg: ProxmoxConfig, environ: Mapping[str, str] | None = None) -> Secret:
    """The token secret, from ``secret_file`` (its first line) or ``secret_env``.  Errors
    name the file or the variable, never what is in them; a file others can read is a warning."""
    environ = os.environ if environ is None else environ
    if cfg.secret_env:
        value = (environ.get(cfg.secret_env) or "").strip()
        if not value:
            raise PreflightError(f"the environment variable {cfg.secret_env} (hypervisor.token.secret_env) is not set or empty",
                                 f"export {cfg.secret_env}=<the secret of token {cfg.token_id}> before running vmbench")
        return Secret(value)
    path = cfg.secret_file or ""
    try:
        st = os.stat(path)
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except FileNotFoundError:
        raise PreflightError(f"the token secret file {path} does not exist (hypervisor.token.secret_file)",
                             f"write the secret of token {cfg.token_id} into it (one line) and chmod 600 it") from None
    except UnicodeDecodeError:
        raise PreflightError(f"the token secret file {path} is not text (hypervisor.token.secret_file)") from None
    except OSError as exc:
        raise PreflightError(f"cannot read the token secret file {path}: {exc.strerror} (hypervisor.token.secret_file)") from None
    value = lines[0].strip() if lines else ""
    if not value:
        raise PreflightError(f"the token secret file {path} is empty (hypervisor.token.secret_file)",
                             f"its first line is the secret of token {cfg.token_id}")
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077:
        log.warning("the token secret file %s can be read by other users (mode %o); chmod 600 it", path, st.st_mode & 0o777)
    return Secret(value)


def encode_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Parameters as PVE takes them: booleans 0/1 (PVE refuses "True"), None dropped, lists
    kept (sent as repeated keys), names as given (``destroy-unreferenced-disks``)."""
    out: dict[str, Any] = {}
    for key, value in (params or {}).items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        elif isinstance(value, (list, tuple)):
            value = [int(v) if isinstance(v, bool) else v for v in value]
        out[key] = value
    return out


def shown(params: Mapping[str, Any]) -> str:
    """Parameters for a log line: sensitive values only by their length."""
    parts = []
    for key, value in params.items():
        if key in SENSITIVE_PARAMS:
            parts.append(f"{key}=<{len(str(value))} chars>")
        else:
            parts.append(f"{key}={value!r}")
    return " ".join(parts)


def upid_node(upid: str) -> str:
    """The node a task runs on: ``UPID:node:PID:PSTART:START:type:id:user:``."""
    m = UPID_RE.match(upid or "")
    if not m:
        raise PveApiError(f"{upid!r} is not a Proxmox task id (UPID)")
    return m.group(1)


@dataclass(frozen=True)
class TaskResult:
    """A finished task: ``OK`` or ``WARNINGS: N`` (with the log's WARN lines)."""

    upid: str
    exitstatus: str
    warnings: tuple[str, ...] = ()
    seconds: float = 0.0


class _PinnedAdapter(HTTPAdapter):
    """HTTPS whose server certificate must have this SHA-256 fingerprint (urllib3's
    ``assert_fingerprint``); CA and host name checks are off, the pin replaces them."""

    def __init__(self, fingerprint: str) -> None:
        self._fingerprint = fingerprint.replace(":", "").lower()
        super().__init__(pool_maxsize=POOL_SIZE)

    def init_poolmanager(self, connections, maxsize, block=False, **pool_kwargs):  # noqa: ANN001 - requests' signature
        pool_kwargs["assert_fingerprint"] = self._fingerprint
        super().init_poolmanager(connections, maxsize, block=block, **pool_kwargs)


class PveApi:
    """One Proxmox VE API endpoint, authenticated with an API token."""

    def __init__(self, cfg: ProxmoxConfig, secret: Secret, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, notice: Callable[[str], None] | None = None,
                 outage_seconds: float = OUTAGE_SECONDS) -> None:
        self.cfg = cfg
        self._secret = secret
        self.clock = clock
        self.sleep = sleep
        self.requests = 0  # how many were sent (for tests and --debug)
        #: an API that stops answering after it answered once is waited for (``notice`` says so)
        self.outages = Outages(outage_seconds, clock, notice)
        self._answered = False
        if cfg.tls_ca_file and not os.path.isfile(cfg.tls_ca_file):
            raise PveTlsError(f"the CA file {cfg.tls_ca_file} (hypervisor.tls.ca_file) does not exist",
                              "copy the node's CA: scp root@NODE:/etc/pve/pve-root-ca.pem .")
        verify: bool | str = cfg.tls_ca_file or (cfg.tls_verify and not cfg.tls_fingerprint)
        self._api = ProxmoxAPI(cfg.host, backend="https", service="PVE", port=cfg.port, user=cfg.user,
                               token_name=cfg.token_name, token_value=secret.reveal(), verify_ssl=verify,
                               timeout=cfg.timeout)
        session = self.session
        session.trust_env = False  # no proxies, CA bundles or .netrc from the environment
        session.mount("https://", _PinnedAdapter(cfg.tls_fingerprint) if cfg.tls_fingerprint else HTTPAdapter(pool_maxsize=POOL_SIZE))

    @property
    def session(self) -> requests.Session:
        """proxmoxer's requests session (tests mount adapters on it)."""
        return self._api._store["session"]

    @property
    def url(self) -> str:
        return self.cfg.url

    def __repr__(self) -> str:
        return f"PveApi({self.cfg.url}, token {self.cfg.token_id})"

    # ---- the seam -----------------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._exec("GET", path, params)

    def post(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._exec("POST", path, params)

    def put(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._exec("PUT", path, params)

    def delete(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self._exec("DELETE", path, params)

    def _exec(self, method: str, path: str, params: Mapping[str, Any] | None = None) -> Any:
        """Send one request; return PVE's ``data``; raise a typed :class:`PveApiError`.  An API
        that answered before and stops answering is retried until it answers again, within
        :data:`~.outage.OUTAGE_SECONDS` (:mod:`.outage`: what may be sent again)."""
        data = encode_params(params)
        log.debug("PVE %s %s %s", method, path, self._secret.redact(shown(data)))
        node = node_of(path)
        pause = RETRY_FIRST_PAUSE
        while True:
            try:
                answer = self._send(method, path, data)
            except PveUnreachable as exc:
                if not exc.outage or not self._answered:  # a first contact that fails is a setting to fix
                    raise
                down = node if exc.status in STATUS_OUTAGE else ""  # pveproxy's answer for a node, or no answer at all
                if exc.outage == LOST and not idempotent(method, path, data):  # sent again, it might happen twice
                    raise PveAnswerLost(f"{method} {path}: {where(down)} stopped answering after the request was sent "
                                        f"({exc.short}): it may or may not have taken effect",
                                        "check the VM or volume it names on the node; `vmbench cleanup SCENARIO` removes "
                                        "what a run made", method=method, path=path, status=exc.status, reason=exc.reason,
                                        outage=LOST, short=exc.short) from None
                left = self.outages.failed(down, exc.short)
                if left is None:
                    raise self._gave_up(exc, down) from None
                self.sleep(min(pause, left))
                pause = min(pause * 2, RETRY_MAX_PAUSE)
                continue
            self._answered = True
            self.outages.answered(node)
            return answer

    def _gave_up(self, exc: PveUnreachable, node: str) -> PveUnreachable:
        lasted = self.outages.lasted(node)
        what = f"node {node} of the Proxmox API" if node else f"the Proxmox API at {self.url}"
        return PveUnreachable(f"{exc.method} {exc.path}: {what} has not answered for {lasted:.0f}s ({exc.short}); "
                              f"vmbench waits {self.outages.deadline:g}s for a restart of pveproxy or pvedaemon",
                              f"check pveproxy and pvedaemon on {node or self.cfg.host} (systemctl status pveproxy pvedaemon)"
                              + (" and that the node is online in the cluster" if node else ""),
                              method=exc.method, path=exc.path, status=exc.status, reason=exc.reason, short=exc.short)

    def _send(self, method: str, path: str, data: dict[str, Any]) -> Any:
        """One request, once; PVE's ``data`` or a typed :class:`PveApiError`."""
        self.requests += 1
        resource = self._api(path.strip("/"))
        error: PveApiError | None = None
        started = self.clock()
        try:
            return getattr(resource, method.lower())(**data)
        except ResourceException as exc:
            error = self._resource_error(method, path, exc)
        except requests.exceptions.SSLError as exc:
            error = self._tls_error(method, path, exc)
        except requests.exceptions.Timeout as exc:
            refused = isinstance(exc, requests.exceptions.ConnectTimeout)
            error = PveUnreachable(f"the Proxmox API at {self.url} did not answer {method} {path} within {self.cfg.timeout:g}s",
                                   "check the node's load and network, or raise hypervisor.timeout",
                                   method=method, path=path, outage=REFUSED if refused else "", short="timed out")
        except requests.exceptions.RequestException as exc:
            reason = _reason(exc)
            error = PveUnreachable(f"cannot reach the Proxmox API at {self.url}: {reason}",
                                   "check hypervisor.host and hypervisor.port (8006), that pveproxy runs on the node, "
                                   "and any firewall between", method=method, path=path, outage=_connection_outage(exc),
                                   short=reason)
        # raised here, outside the except clauses: no chained requests/proxmoxer exception
        # (which would hold the prepared request and its Authorization header)
        error.message = self._secret.redact(error.message)
        error.args = (error.message,)
        error.reason = self._secret.redact(error.reason)
        log.debug("PVE %s %s failed after %.2fs: %s", method, path, self.clock() - started, error.message)
        raise error

    def _resource_error(self, method: str, path: str, exc: Any) -> PveApiError:
        status = int(exc.status_code)
        reason = self._secret.redact(str(exc.content or exc.status_message or "").strip())
        errors = exc.errors if isinstance(exc.errors, dict) else {}
        errors = {str(k): self._secret.redact(str(v).strip()) for k, v in errors.items() if k != "errors"}
        kw = _Failed(method=method, path=path, status=status, reason=reason, errors=errors)
        where = f"{method} {path}"
        token = self.cfg.token_id
        if status == 401:
            return PveAuthError(f"the Proxmox API at {self.url} refused the token {token} (401 {reason or 'authentication failure'})",
                                f"check the token id and its secret (read from {self.cfg.secret_source}); the token must "
                                "exist on the node and not be expired (Datacenter > Permissions > API Tokens)", **kw)
        if status == 403:
            m = PERMISSION_RE.search(reason)
            acl, privs = (m.group(1).strip(), m.group(2).strip()) if m else (None, None)
            what = f"lacks {privs} on {acl}" if m else "is not allowed to do this"
            hint = (f"`vmbench doctor SCENARIO` lists every privilege the token lacks, with its path and the pveum lines "
                    f"that grant it (API tokens are privilege-separated by default: a token has only what both it and its "
                    f"user are granted); `vmbench setup proxmox SCENARIO` prints the whole setup")
            if not m and "/clone" in path:  # PVE names nothing when VM.Allocate on the new VMID is missing
                hint = "a clone needs VM.Allocate on /vms (the new VMID) and VM.Clone on the template; " + hint
            if "/agent/" in path:
                hint = "guest agent calls need VM.Monitor on PVE 8, VM.GuestAgent.Unrestricted on PVE 9; " + hint
            return PvePermissionError(f"{where}: the token {token} {what} (403 {reason})", hint,
                                      privilege=privs, acl_path=acl, **kw)
        if status == 400:
            detail = "; ".join(f"{k}: {v}" for k, v in sorted(errors.items())) or reason
            return PveParameterError(f"{where}: Proxmox refused the parameters: {detail}",
                                     "vmbench built a request this PVE version does not take: please report it", **kw)
        if status in STATUS_OUTAGE:
            return PveUnreachable(f"{where}: the Proxmox API could not reach the node ({status} {reason})",
                                  "check that the node is online in the cluster", outage=STATUS_OUTAGE[status],
                                  short=f"{status} {reason}".strip(), **kw)
        m = LOCKED_RE.search(reason)
        if m:
            return PveLockedError(f"{where}: {reason}", "another task holds the VM or its config; wait for it to finish "
                                  "(Tasks in the GUI), or `qm unlock VMID` on the node if none runs", lock=m.group(1), **kw)
        return PveApiError(f"{where}: {reason or exc.status_message} ({status})", **kw)

    def _tls_error(self, method: str, path: str, exc: Exception) -> PveTlsError:
        text = str(exc)
        kw = _Failed(method=method, path=path)
        m = re.search(r'Fingerprints did not match\. Expected "([0-9a-fA-F:]+)", got "([0-9a-fA-F:]+)"', text)
        if m or "Fingerprints did not match" in text:
            got = _colons(m.group(2)) if m else "?"
            return PveTlsError(f"the TLS certificate of {self.url} does not match the pinned fingerprint "
                               f"(hypervisor.tls.fingerprint): the server's is {got}",
                               "if the node's certificate was renewed, pin the new one (on the node: pvenode cert info); "
                               "otherwise you may not be talking to your node", **kw)
        if "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text:
            detail = re.search(r"certificate verify failed: ([^(')\"]+)", text)
            why = detail.group(1).strip() if detail else "certificate verify failed"
            return PveTlsError(f"TLS verification of {self.url} failed ({self.cfg.tls_mode}): {why}",
                               "give the node's CA (scp root@NODE:/etc/pve/pve-root-ca.pem . then tls: {ca_file: "
                               "pve-root-ca.pem}) or pin its certificate (tls: {fingerprint: ...}); tls: {verify: false} "
                               "turns the check off and is printed in every report", **kw)
        return PveTlsError(f"TLS with {self.url} failed: {_reason(exc)}", "is this the PVE API port (8006)?", **kw)

    # ---- tasks --------------------------------------------------------------------------------

    def wait_task(self, upid: str | None, timeout: float, what: str = "task") -> TaskResult:
        """Poll a task until it stopped, bounded by ``timeout``; ``OK`` or ``WARNINGS: N``
        (its WARN lines returned) succeed, anything else raises :class:`PveTaskError` with
        the log's tail.  ``None`` (a call that finished without a task) is OK at once."""
        if not upid:
            return TaskResult("", "OK")
        node = upid_node(upid)
        started = self.clock()
        interval = 0.2
        while True:
            status = self.get(f"/nodes/{node}/tasks/{upid}/status") or {}
            if status.get("status") == "stopped":
                break
            elapsed = self.clock() - started
            if elapsed >= timeout:
                raise PveTaskError(f"{what}: the task did not finish within {timeout:g}s ({upid})",
                                   "it may still be running on the node (Tasks in the GUI); vmbench stopped waiting",
                                   upid=upid, path=f"/nodes/{node}/tasks/{upid}/status")
            self.sleep(min(interval, max(0.0, timeout - elapsed)))
            interval = min(interval * 1.5, 2.0)
        seconds = self.clock() - started
        exitstatus = str(status.get("exitstatus") or "").strip()
        if exitstatus == "OK":
            return TaskResult(upid, exitstatus, (), seconds)
        m = WARNINGS_RE.match(exitstatus)
        if m:
            lines = [l for l in self.task_log(upid) if "WARN" in l.upper()]
            warnings = tuple(lines) or (f"{m.group(1)} warning(s), none found in the task log",)
            for line in warnings:
                log.warning("%s: %s", what, line)
            return TaskResult(upid, exitstatus, warnings, seconds)
        tail = self.task_log(upid)[-15:]
        raise PveTaskError(f"{what} failed: {exitstatus or 'no exit status'}",
                           ("task log (last lines):\n  " + "\n  ".join(tail)) if tail else None,
                           upid=upid, exitstatus=exitstatus, log=tail, path=f"/nodes/{node}/tasks/{upid}/status")

    def task_log(self, upid: str, limit: int = 5000) -> list[str]:
        """The task's log lines (best effort: [] when it cannot be read)."""
        try:
            rows = self.get(f"/nodes/{upid_node(upid)}/tasks/{upid}/log", {"start": 0, "limit": limit}) or []
        except PveApiError as exc:
            log.warning("cannot read the log of task %s: %s", upid, exc.message)
            return []
        return [str(r.get("t", "")) for r in rows if isinstance(r, dict)]


def _connection_outage(exc: requests.exceptions.RequestException) -> str:
    """Whether a failed connection can have delivered the request: :data:`~.outage.REFUSED`
    when no connection was made, :data:`~.outage.LOST` when it dropped afterwards."""
    cause = exc.args[0] if exc.args else None
    cause = getattr(cause, "reason", cause)  # urllib3's MaxRetryError wraps what happened
    if isinstance(cause, (urllib3.exceptions.NewConnectionError, urllib3.exceptions.ConnectTimeoutError)):
        return REFUSED
    return LOST if isinstance(exc, requests.exceptions.ConnectionError) else ""


def _reason(exc: BaseException) -> str:
    """The useful part of a requests/urllib3 error ("[Errno 111] Connection refused")."""
    text = str(exc)
    for pattern in (r"\[Errno -?\d+\] ([^'\")\]]+)", r"(Name or service not known|Connection refused|No route to host|"
                    r"Network is unreachable|timed out|Connection reset by peer|Remote end closed connection[^'\")]*)"):
        m = re.search(pattern, text)
        if m:
            return m.group(1).strip()
    return text[:200]


def _colons(hexdigits: str) -> str:
    d = hexdigits.replace(":", "").upper()
    return ":".join(d[i:i + 2] for i in range(0, len(d), 2))

