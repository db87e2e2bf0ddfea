"""Typed errors of the Proxmox VE API, each with a message an admin can act on.

All are :class:`~vmbench.errors.HypervisorError` (the CLI's exit code 4); the driver turns
the ones raised before anything exists into :class:`~vmbench.errors.PreflightError`.  None
of them ever carries the token secret: messages are built from PVE's own texts, the method,
the path and the token *id*.
"""

from __future__ import annotations

import re

from ...errors import HypervisorError

#: PVE's wording of a failed permission check: "Permission check failed (/vms/100, VM.GuestAgent.Unrestricted)"
PERMISSION_RE = re.compile(r"Permission check failed \(([^,()]+),\s*([^()]+)\)")
LOCKED_RE = re.compile(r"VM is locked \(([\w-]+)\)|can't lock file '([^']+)'")


class PveApiError(HypervisorError):
    """A request to the PVE API failed."""

    def __init__(self, message: str, hint: str | None = None, *, method: str = "", path: str = "",
                 status: int | None = None, reason: str = "", errors: dict | None = None) -> None:
        super().__init__(message, hint)
        self.method = method
        self.path = path
        self.status = status
        self.reason = reason  # PVE's error text (its HTTP reason phrase)
        self.errors = dict(errors or {})  # per-parameter messages of a 400

    @property
    def gone(self) -> bool:
        """The VM, volume or storage named in the request does not exist (any more)."""
        text = self.reason.lower()
        return self.status in (404, 500) and ("does not exist" in text or "no such" in text or "not found" in text)


class PveUnreachable(PveApiError):
    """No HTTP answer: DNS, connection refused, timeout, a node behind the proxy unreachable.
    ``outage``: "refused" (the request never reached PVE), "lost" (it may have: its answer did
    not come), "" (not an outage to wait out: a timeout); ``short``: what happened, in a few
    words ("595 Connection refused")."""

    def __init__(self, message: str, hint: str | None = None, *, outage: str = "", short: str = "", **kw) -> None:
        super().__init__(message, hint, **kw)
        self.outage = outage
        self.short = short or self.reason


class PveAnswerLost(PveUnreachable):
    """A request that is not safe to send twice (a clone, a guest command) went out, then the
    API stopped answering: whether it took effect is not known until the state is checked."""


class PveTlsError(PveApiError):
    """The server's certificate failed verification or does not match the pinned fingerprint."""


class PveAuthError(PveApiError):
    """401: the token id or its secret is wrong, or the token expired or was deleted."""


class PvePermissionError(PveApiError):
    """403: the token lacks a privilege; ``privilege`` and ``acl_path`` as PVE named them."""

    def __init__(self, message: str, hint: str | None = None, *, privilege: str | None = None,
                 acl_path: str | None = None, **kw) -> None:
        super().__init__(message, hint, **kw)
        self.privilege = privilege
        self.acl_path = acl_path


class PveParameterError(PveApiError):
    """400: PVE refused parameters; ``errors`` has its message per parameter."""


class PveLockedError(PveApiError):
    """The VM is locked (a clone, a backup...) or its config file lock timed out."""

    def __init__(self, message: str, hint: str | None = None, *, lock: str | None = None, **kw) -> None:
        super().__init__(message, hint, **kw)
        self.lock = lock


class PveTaskError(PveApiError):
    """A task (UPID) ended with an error, or did not end in time."""

    def __init__(self, message: str, hint: str | None = None, *, upid: str = "", exitstatus: str | None = None,
                 log: list[str] | None = None, **kw) -> None:
        super().__init__(message, hint, **kw)
        self.upid = upid
        self.exitstatus = exitstatus
        self.log = list(log or [])
