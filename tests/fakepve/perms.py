"""Users, API tokens, roles and ACLs, and the permission checks PVE makes with them
(pve-access-control ``PVE/AccessControl.pm`` ``roles``, ``PVE/RPCEnvironment.pm``
``permissions``, ``check``, ``check_any``, ``check_perm_modify``, ``exec_api2_perm_check``,
``check_api2_permissions``), for the version whose privileges and built-in roles it has:

- the ACL tree is walked from ``/`` down to the checked path; at each level the principal's
  entries that apply (the checked path itself, or ``propagate``) **replace** what was
  inherited from above: a more specific ACL replaces the inherited one for that path (a
  token's own entries are looked at before its user's, a user's before its groups');
- a role ``NoAccess`` anywhere on the way leaves no privilege;
- a privilege-separated token (``privsep``, the default) has what both it and its user have
  (the intersection, propagation flags and-ed); a token without privsep has its user's;
- ``root@pam`` has every privilege; checking a privilege this version does not know dies
  ("invalid privilege 'VM.Monitor'" on PVE 9).

Not modelled: groups (no group API is served), pools (the ACL paths ``/pool/...`` are taken,
nothing inherits from them), realms other than ``pve``/``pam`` (no password check at all)."""

from __future__ import annotations

import re
import secrets
import uuid
from dataclasses import dataclass, field
from typing import Any

#: pve-access-control's $privgroups: the privileges and the built-in roles made from them
#: (8.4: pve-access-control 8.2.2; 9.1: 9.0.5).  {category: (root, admin, user, audit)}
_COMMON = {
    "Sys": ((["Sys.PowerMgmt", "Sys.Modify", "Sys.Incoming", "Sys.AccessNetwork"]), ["Sys.Console", "Sys.Syslog"], [],
            ["Sys.Audit"]),
    "Datastore": ([], ["Datastore.Allocate", "Datastore.AllocateTemplate"], ["Datastore.AllocateSpace"], ["Datastore.Audit"]),
    "SDN": ([], ["SDN.Allocate", "SDN.Audit"], ["SDN.Use"], ["SDN.Audit"]),
    "User": (["Realm.Allocate"], ["User.Modify", "Group.Allocate", "Realm.AllocateUser"], [], []),
    "Pool": ([], ["Pool.Allocate"], ["Pool.Audit"], ["Pool.Audit"]),
    "Mapping": ([], ["Mapping.Modify"], ["Mapping.Use"], ["Mapping.Audit"]),
}
_VM_CONFIG = ["VM.Config.Disk", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Network", "VM.Config.HWType",
              "VM.Config.Options"]
PRIVGROUPS = {
    "8": {"VM": ([], _VM_CONFIG + ["VM.Allocate", "VM.Clone", "VM.Migrate", "VM.Monitor", "VM.Snapshot",
                                   "VM.Snapshot.Rollback"],
                 ["VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.PowerMgmt"], ["VM.Audit"]),
          **_COMMON},
    "9": {"VM": ([], _VM_CONFIG + ["VM.Allocate", "VM.Clone", "VM.GuestAgent.Unrestricted", "VM.Migrate", "VM.Replicate",
                                   "VM.Snapshot", "VM.Snapshot.Rollback"],
                 ["VM.Config.CDROM", "VM.Config.Cloudinit", "VM.Console", "VM.Backup", "VM.GuestAgent.FileRead",
                  "VM.GuestAgent.FileSystemMgmt", "VM.GuestAgent.FileWrite", "VM.PowerMgmt"],
                 ["VM.Audit", "VM.GuestAgent.Audit"]),
          **_COMMON},
}
ROOT = "root@pam"
USER_RE = re.compile(r"^([^\s:/]+)@([A-Za-z][A-Za-z0-9.\-_]+)$")
TOKEN_RE = re.compile(r"^(([^\s:/]+)@([A-Za-z][A-Za-z0-9.\-_]+))!([A-Za-z][A-Za-z0-9.\-_]+)$")
#: AccessControl::check_path: the paths an ACL may be set on
ACL_PATH_RE = re.compile(r"^(/|/access|/access/groups|/access/groups/[\w.\-]+|/access/realm|/access/realm/[\w.\-]+"
                         r"|/nodes|/nodes/[\w.\-]+|/pool|/pool/[\w.\-]+(/[\w.\-]+){0,2}|/sdn(/.+)?|/storage"
                         r"|/storage/[\w.\-]+|/vms|/vms/[1-9][0-9]{2,}|/mapping(/[\w.\-]+){0,2})$")


class PermissionDenied(Exception):
    """raise_perm_exc: "Permission check failed (WHAT)" with HTTP 403."""


class InvalidPrivilege(Exception):
    """verify_privname: a privilege this version does not have (PVE dies: a 500)."""


def major(version: str) -> str:
    return version.split(".")[0]


def valid_privileges(version: str) -> frozenset[str]:
    groups = PRIVGROUPS[major(version)]
    return frozenset({"Permissions.Modify"} | {p for cat in groups.values() for part in cat for p in part})


def builtin_roles(version: str) -> dict[str, set[str]]:
    """AccessControl::create_roles: PVE<cat>Admin, PVE<cat>User, PVEAdmin, PVEAuditor,
    PVETemplateUser, NoAccess, Administrator."""
    roles: dict[str, set[str]] = {"NoAccess": set(), "Administrator": set(valid_privileges(version))}
    for cat, (_root, admin, user, audit) in PRIVGROUPS[major(version)].items():
        roles.setdefault(f"PVE{cat}Admin", set()).update(admin + user + audit)
        roles.setdefault("PVEAdmin", set()).update(admin + user + audit)
        if user:
            roles.setdefault(f"PVE{cat}User", set()).update(user + audit)
        roles.setdefault("PVEAuditor", set()).update(audit)
    roles["PVEAdmin"].discard("Mapping.Modify")
    roles["PVETemplateUser"] = {"VM.Clone", "VM.Audit"}
    return roles


@dataclass
class Token:
    secret: str
    privsep: bool = True
    expire: int = 0
    comment: str = ""


@dataclass
class User:
    enable: bool = True
    expire: int = 0
    tokens: dict[str, Token] = field(default_factory=dict)


class Access:
    """One node's (cluster's) ``user.cfg``: users with their tokens, roles, the ACL tree."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.valid = valid_privileges(version)
        self.builtin = builtin_roles(version)
        self.roles: dict[str, set[str]] = {k: set(v) for k, v in self.builtin.items()}
        self.users: dict[str, User] = {ROOT: User()}
        #: path -> {("users" | "tokens", id): {role: propagate (1/0)}}
        self.acl: dict[str, dict[tuple[str, str], dict[str, int]]] = {}

    # ---- user.cfg --------------------------------------------------------------------------

    def add_user(self, userid: str) -> User:
        return self.users.setdefault(userid, User())

    def add_token(self, tokenid: str, *, privsep: bool = True, secret: str | None = None) -> str:
        """The token (its user made if missing); its secret (a UUID unless given)."""
        m = TOKEN_RE.match(tokenid)
        if not m:
            raise ValueError(f"'{tokenid}' is not a valid token ID")
        value = secret if secret is not None else str(uuid.uuid4())
        self.add_user(m.group(1)).tokens[m.group(4)] = Token(value, privsep)
        return value

    def token(self, tokenid: str) -> Token | None:
        m = TOKEN_RE.match(tokenid)
        user = self.users.get(m.group(1)) if m else None
        return user.tokens.get(m.group(4)) if user and m else None

    def add_role(self, roleid: str, privs: Any) -> None:
        for p in privs:
            self.verify_privname(p)
        self.roles[roleid] = set(privs)

    def set_acl(self, path: str, roles: Any, *, users: Any = (), tokens: Any = (), propagate: bool = True,
                delete: bool = False) -> None:
        """``PUT /access/acl`` without its checks (for tests setting a node up)."""
        node = self.acl.setdefault(path, {})
        for kind, ids in (("users", users), ("tokens", tokens)):
            for ugid in ids:
                entry = node.setdefault((kind, ugid), {})
                for role in roles:
                    if delete:
                        entry.pop(role, None)
                    else:
                        entry[role] = 1 if propagate else 0

    def authenticate(self, tokenid: str, value: str) -> str | None:
        """None for a good token and secret, else the reason PVE gives with its 401."""
        user, _, name = tokenid.partition("!")
        u = self.users.get(user)
        if u is None:
            return f"no such user ('{user}')"
        tok = u.tokens.get(name)
        if tok is None:
            return f"no such token '{name}' for user '{user}'"
        if not secrets.compare_digest(value, tok.secret):
            return "invalid token value!"
        if not u.enable:
            return f"user '{user}' is disabled"
        return None

    # ---- evaluation ------------------------------------------------------------------------

    def verify_privname(self, priv: str) -> None:
        if priv not in self.valid:
            raise InvalidPrivilege(f"invalid privilege '{priv}'")

    def _roles(self, kind: str, ugid: str, path: str) -> dict[str, int]:
        """AccessControl::roles for one user or token: walked from / down, the entries that
        apply at a level (the path itself, or propagated) replace what came from above."""
        roles: dict[str, int] = {}
        parts = [""] if path == "/" else path.split("/")
        prefix = ""
        for i, part in enumerate(parts):
            prefix = "/" if i == 0 else (prefix.rstrip("/") + "/" + part)
            final = i == len(parts) - 1
            entry = self.acl.get(prefix, {}).get((kind, ugid)) or {}
            new = {role: prop for role, prop in entry.items() if final or prop}
            if new:
                roles = new
        if "NoAccess" in roles:
            return {"NoAccess": roles["NoAccess"]}
        return roles

    def _privs(self, roles: dict[str, int]) -> dict[str, int]:
        privs: dict[str, int] = {}
        for role, prop in roles.items():
            for p in self.roles.get(role, ()):
                privs[p] = privs.get(p, 0) or prop
        return privs

    def permissions(self, authid: str, path: str) -> dict[str, int]:
        """RPCEnvironment::permissions: privilege -> propagation flag (1/0) on ``path``."""
        if authid == ROOT:
            return {p: 1 for p in self.roles["Administrator"]}
        m = TOKEN_RE.match(authid)
        if m:
            tok = self.token(authid)
            if tok is None:
                return {}
            user_perms = self.permissions(m.group(1), path)
            if not tok.privsep:
                return user_perms
            own = self._privs(self._roles("tokens", authid, path))
            return {p: int(bool(user_perms[p] and prop)) for p, prop in own.items() if p in user_perms}
        if authid not in self.users:
            return {}
        return self._privs(self._roles("users", authid, path))

    def check(self, authid: str, path: str, privs: Any, *, any_of: bool = False, noerr: bool = False) -> bool:
        """RPCEnvironment::check / check_any."""
        perm = self.permissions(authid, path)
        for p in privs:
            self.verify_privname(p)
        if any_of:
            if any(p in perm for p in privs):
                return True
            if noerr:
                return False
            raise PermissionDenied(f"{path}, " + "|".join(privs))
        for p in privs:
            if p not in perm:
                if noerr:
                    return False
                raise PermissionDenied(f"{path}, {p}")
        return True

    def check_perm_modify(self, authid: str, path: str, noerr: bool = False) -> bool:
        privs = ["Permissions.Modify"]
        if re.match(r"^/storage/.+$", path):
            privs.append("Datastore.Allocate")
        elif re.match(r"^/vms/.+$", path):
            privs.append("VM.Allocate")
        elif re.match(r"^/pool/.+$", path):
            privs.append("Pool.Allocate")
        return self.check(authid, path, privs, any_of=True, noerr=noerr)

    def check_api2(self, perm: dict | None, authid: str, params: dict) -> str | None:
        """check_api2_permissions of a method's ``permissions``: None when allowed, else the
        text of PVE's 403."""
        if authid == ROOT:
            return None
        try:
            if not perm:
                raise PermissionDenied("user != root@pam")
            if perm.get("user") in ("all", "world"):
                return None
            if not perm.get("check"):
                raise PermissionDenied("")
            self._exec(perm["check"], authid, params, noerr=False)
        except PermissionDenied as exc:
            return f"Permission check failed ({exc})" if str(exc) else "Permission check failed"
        return None

    def _exec(self, check: list, authid: str, params: dict, noerr: bool) -> bool:
        test = check[0]
        if test == "and":
            for sub in check[1:]:
                self._exec(sub, authid, params, False)
            return True
        if test == "or":
            if any(self._exec(sub, authid, params, True) for sub in check[1:]):
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
            return self.check(authid, template_path(tmpl, params), privs, any_of=bool(options.get("any")), noerr=noerr)
        if test == "perm-modify":
            return self.check_perm_modify(authid, template_path(check[1], params), noerr)
        if test == "userid-param":
            userid = str(params.get("userid") or "")
            realm = userid.rpartition("@")[2]
            if check[1] == "self":
                if authid == userid and userid in self.users:
                    return True
                if noerr:
                    return False
                raise PermissionDenied("")
            return self.check(authid, f"/access/realm/{realm}", ["Realm.AllocateUser"], noerr=noerr)
        if test == "userid-group":  # no groups: User.Modify on /access/groups, or nothing
            privs = check[1]
            if self.check(authid, "/access/groups", privs, any_of=True, noerr=True):
                return True
            if noerr:
                return False
            raise PermissionDenied("/access/groups, " + "|".join(privs))
        raise PermissionDenied(f"unknown permission test {test}")


def template_path(tmpl: str, params: dict) -> str:
    """PVE::Tools::template_replace then AccessControl::normalize_path."""
    out = re.sub(r"\{(\w+)\}", lambda m: str(params.get(m.group(1), "")), tmpl)
    out = re.sub(r"/+", "/", out)
    return out.rstrip("/") if out != "/" else out
