"""API permission checks as PVE::RPCEnvironment::check_api2_permissions evaluates a method's
``permissions``: ``user: all``; ``check: [perm, path, [privs], any => 1, require_param =>
p]``, ``[and, ...]``, ``[or, ...]``.  The token has every privilege except the configured
missing ones (a privilege name, missing on every path, or a ``(path, privilege)`` pair)."""

from __future__ import annotations

import re
from typing import Any


class PermissionDenied(Exception):
    pass


def _has(missing: set, path: str, priv: str) -> bool:
    return priv not in missing and (path, priv) not in missing


def _template(path: str, params: dict) -> str:
    out = re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), "")), path)
    out = re.sub(r"/+", "/", out)
    return out.rstrip("/") if out != "/" else out


def _exec(check: list, params: dict, missing: set, noerr: bool) -> bool:
    test = check[0]
    if test == "and":
        for sub in check[1:]:
            _exec(sub, params, missing, False)
        return True
    if test == "or":
        for sub in check[1:]:
            if _exec(sub, params, missing, True):
                return True
        if noerr:
            return False
        raise PermissionDenied("")
    if test == "perm":
        _, tmpl, privs, *rest = check
        options = dict(zip(rest[::2], rest[1::2]))
        req = options.get("require_param")
        if req and params.get(req) is None:
            if noerr:
                return False
            raise PermissionDenied("")
        path = _template(tmpl, params)
        if options.get("any"):
            if any(_has(missing, path, p) for p in privs):
                return True
            if noerr:
                return False
            raise PermissionDenied(f"{path}, {'|'.join(privs)}")
        for p in privs:
            if not _has(missing, path, p):
                if noerr:
                    return False
                raise PermissionDenied(f"{path}, {p}")
        return True
    if test in ("userid-group", "userid-param"):
        return True  # user management: not the fake's business
    raise PermissionDenied(f"unknown permission test {test}")


def check_permissions(perm: dict | None, params: dict, missing: Any) -> str | None:
    """None when allowed, else the message of PVE's 403."""
    missing = set(missing or ())
    if not perm:
        return "Permission check failed (user != root@pam)\n"
    if perm.get("user") == "all" or perm.get("user") == "world":
        return None
    if perm.get("check"):
        try:
            _exec(perm["check"], params, missing, False)
        except PermissionDenied as exc:
            return f"Permission check failed ({exc})\n" if str(exc) else "Permission check failed\n"
        return None
    return "Permission check failed\n"
