"""The access-control endpoints an admin's ``pveum`` lines map to (pve-access-control
API2/AccessControl.pm ``permissions``, API2/Role.pm, API2/User.pm ``create_user`` and
``generate_token``, API2/ACL.pm ``update_acl``), on :class:`~.perms.Access`:

=============================================================  =====================================
``pveum role add R --privs P``                                  ``POST /access/roles`` roleid, privs
``pveum role modify R --privs P [--append 1]``                  ``PUT /access/roles/R``
``pveum user add U``                                            ``POST /access/users`` userid
``pveum user token add U T [--privsep 1]``                      ``POST /access/users/U/token/T``
``pveum acl modify PATH --roles R --users U --tokens T``        ``PUT /access/acl``
``pveum user permissions`` / ``pvesh get /access/permissions``  ``GET /access/permissions``
=============================================================  =====================================
"""

from __future__ import annotations

from .handlers import api
from .model import State, die, param_exc
from .perms import ACL_PATH_RE, TOKEN_RE
from .validate import split_list, truthy


@api("GET", "/access/permissions")
def permissions(s: State, p: dict) -> dict:
    """Path -> {privilege: propagate}: for ``path`` only, or for every path an ACL names
    and the top-level ones (get_effective_permissions; paths with nothing left out)."""
    userid = str(p.get("userid") or s.user)
    m = TOKEN_RE.match(userid)
    if userid != s.user and not (m and m.group(1) == s.user):  # not oneself, not one's own token
        s.check_priv("/access", "Sys.Audit")
    if p.get("path"):
        return {p["path"]: s.access.permissions(userid, str(p["path"]))}
    paths = {"/", "/access", "/access/groups", "/nodes", "/pool", "/sdn", "/storage", "/vms", *s.access.acl}
    out = {}
    for path in sorted(paths):
        perms = s.access.permissions(userid, path)
        if perms:
            out[path] = perms
    return out


@api("POST", "/access/roles")
def create_role(s: State, p: dict) -> None:
    role = str(p["roleid"])
    if role.lower().startswith("pve"):
        raise param_exc({"roleid": "cannot use role ID starting with the (case-insensitive) 'PVE' namespace"})
    if role in s.access.roles:
        raise die(f"create role failed: role '{role}' already exists")
    s.access.add_role(role, split_list(str(p.get("privs") or "")))
    return None


@api("PUT", "/access/roles/{roleid}")
def update_role(s: State, p: dict) -> None:
    role = str(p["roleid"])
    if role in s.access.builtin:
        raise die(f"update role failed: cannot modify special role '{role}'")
    if role not in s.access.roles:
        raise die(f"update role failed: role '{role}' does not exist")
    privs = set(split_list(str(p.get("privs") or "")))
    s.access.add_role(role, privs | s.access.roles[role] if truthy(p.get("append") or 0) else privs)
    return None


@api("POST", "/access/users")
def create_user(s: State, p: dict) -> None:
    userid = str(p["userid"])
    if p.get("groups"):
        raise die(f"create user failed: no such group '{split_list(str(p['groups']))[0]}'")
    if userid in s.access.users:
        raise die(f"create user failed: user '{userid}' already exists")
    s.access.add_user(userid).enable = truthy(p["enable"]) if p.get("enable") is not None else True
    return None


@api("POST", "/access/users/{userid}/token/{tokenid}")
def generate_token(s: State, p: dict) -> dict:
    userid, name = str(p["userid"]), str(p["tokenid"])
    user = s.access.users.get(userid)
    if user is None:
        raise die(f"no such user ('{userid}')")
    if name in user.tokens:
        raise param_exc({"tokenid": "Token already exists."})
    privsep = truthy(p["privsep"]) if p.get("privsep") is not None else True
    full = f"{userid}!{name}"
    value = s.access.add_token(full, privsep=privsep)
    info: dict = {"privsep": int(privsep)}
    if p.get("expire") is not None:
        info["expire"] = int(p["expire"])
        user.tokens[name].expire = int(p["expire"])
    if p.get("comment"):
        info["comment"] = str(p["comment"])
    return {"info": info, "value": value, "full-tokenid": full}


@api("PUT", "/access/acl")
def update_acl(s: State, p: dict) -> None:
    """update_acl: the roles exist; without Permissions.Modify on the path only a subset of
    one's own privileges can be handed out; users and tokens exist."""
    users, tokens = split_list(str(p.get("users") or "")), split_list(str(p.get("tokens") or ""))
    if not users and not tokens and not p.get("groups"):
        raise param_exc({k: "either 'users', 'groups' or 'tokens' is required." for k in ("users", "groups", "tokens")})
    if p.get("groups"):
        raise die(f"ACL update failed: group '{split_list(str(p['groups']))[0]}' does not exist")
    path = "/" + "/".join(c for c in str(p["path"]).split("/") if c)
    delete = truthy(p.get("delete") or 0)
    if not delete and not ACL_PATH_RE.match(path):
        raise param_exc({"path": f"invalid ACL path '{p['path']}'"})
    propagate = truthy(p["propagate"]) if p.get("propagate") is not None else True
    mine = s.access.permissions(s.user, path)
    roles = split_list(str(p["roles"]))
    for role in roles:
        if role not in s.access.roles:
            raise die(f"ACL update failed: role '{role}' does not exist")
        if "Permissions.Modify" not in mine:
            verb = "remove" if delete else "add"
            if any(priv not in mine for priv in s.access.roles[role]):
                raise param_exc({"role": f"Cannot {verb} role '{role}' - requires 'Permissions.Modify' or superset of privileges."})
            if propagate and not delete and any(mine[priv] != 1 for priv in s.access.roles[role]):
                raise param_exc({"role": f"Cannot {verb} role '{role}' with propagation - requires 'Permissions.Modify' or "
                                         "propagated superset of privileges."})
    for userid in users:
        if userid not in s.access.users:
            raise die(f"ACL update failed: user '{userid}' does not exist")
    for tokenid in tokens:
        if s.access.token(tokenid) is None:
            user, _, name = tokenid.partition("!")
            raise die(f"ACL update failed: no such token '{name}' for user '{user}'")
    s.access.set_acl(path, roles, users=users, tokens=tokens, propagate=propagate, delete=delete)
    return None

