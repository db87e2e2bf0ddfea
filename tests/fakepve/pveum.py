"""An admin's ``pveum``/``pvesm`` lines, run against the fake as the API calls they make
(pve-access-control ``PVE/CLI/pveum.pm`` and pve-storage ``PVE/CLI/pvesm.pm`` map each
command onto one API method, options as its parameters), as root@pam (its own token).

``pveum role add R --privs P``, ``role modify R --privs P [--append 1]``, ``user add U``,
``user token add U T [--privsep 0|1]``, ``acl modify PATH --roles R [--users U] [--tokens T]
[--propagate 0|1]`` and ``pvesm set S --content C`` are understood; anything else fails the
test.  Comments are dropped; a line ending in ``# PVE 8`` (or 9) is run only on that major."""

from __future__ import annotations

import re
import shlex

from .client import call
from .fake import FakePve

COMMANDS = {
    ("pveum", "role", "add"): ("POST", "/access/roles", ["roleid"]),
    ("pveum", "role", "modify"): ("PUT", "/access/roles/{0}", ["roleid"]),
    ("pveum", "user", "add"): ("POST", "/access/users", ["userid"]),
    ("pveum", "user", "token", "add"): ("POST", "/access/users/{0}/token/{1}", ["userid", "tokenid"]),
    ("pveum", "acl", "modify"): ("PUT", "/access/acl", ["path"]),
    ("pvesm", "set"): ("PUT", "/storage/{0}", ["storage"]),
}


def api_call(line: str) -> tuple[str, str, dict] | None:
    """(METHOD, path, parameters) of one command line; None for a blank or comment line."""
    words = shlex.split(line, comments=True)
    if not words:
        return None
    for head, (method, path, positional) in sorted(COMMANDS.items(), key=lambda kv: -len(kv[0])):
        if tuple(words[:len(head)]) == head:
            rest = words[len(head):]
            args = rest[:len(positional)]
            params: dict = {}
            opts = rest[len(positional):]
            if len(opts) % 2:
                raise AssertionError(f"cannot read the options of {line!r}")
            for key, value in zip(opts[::2], opts[1::2]):
                assert key.startswith("--"), line
                params[key[2:]] = value
            if "{0}" not in path:
                params.update(dict(zip(positional, args)))
            return method, path.format(*args), params
    raise AssertionError(f"not a pveum/pvesm command the fake knows: {line!r}")


def apply(fake: FakePve, text: str, major: int) -> dict[str, str]:
    """Run every command of ``text`` (for PVE ``major``) as root@pam; the tokens made
    (full token id -> secret).  A command PVE refuses fails the test."""
    tokens = {}
    for line in text.splitlines():
        m = re.search(r"#\s*PVE (\d+)\s*$", line)
        if m and int(m.group(1)) != major:
            continue
        got = api_call(line)
        if got is None:
            continue
        method, path, params = got
        reply = call(fake, method, path, params, headers=fake.auth_of(fake.root_token))
        assert reply.status == 200, f"{line}: {reply}"
        if isinstance(reply.data, dict) and "full-tokenid" in reply.data:
            tokens[reply.data["full-tokenid"]] = reply.data["value"]
    return tokens
