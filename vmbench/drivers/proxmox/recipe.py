"""The token's setup as ``pveum`` and ``pvesm`` commands, rendered from the rights table
(:mod:`.rights`): the roles, a user, a privilege-separated token, the ACLs and the import
content (``vmbench setup proxmox``, the pveum lines of ``vmbench doctor``'s hints, and
docs/proxmox.md's recipe and table, which a test keeps equal to what this renders).

One role per path, holding everything vmbench needs there: an ACL on a path replaces, for
that path and below, what the token (or its user) inherits from above, so a second role
granted on, say, ``/storage/local`` for the import must repeat what ``/storage/local``
needs for the run too.  A path whose needs an ancestor's ACL (propagated) already covers
gets no ACL of its own.  Pure: it prints nothing and reads nothing."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Iterable, Sequence

from .rights import MAJORS, RIGHTS, Need, Setup, Step, needs

#: the roles vmbench's recipe makes, by the privileges they hold (built-in roles where one is exactly that)
STORAGE_ROLES = {
    frozenset({"Datastore.AllocateSpace", "Datastore.Audit"}): "VMBenchStorage",
    frozenset({"Datastore.Allocate", "Datastore.Audit"}): "VMBenchImport",
    frozenset({"Datastore.Allocate", "Datastore.AllocateSpace", "Datastore.Audit"}): "VMBenchStorageAdmin",
    frozenset({"Datastore.Allocate", "Datastore.AllocateSpace"}): "VMBenchEntries",
    frozenset({"Datastore.AllocateSpace"}): "VMBenchClone",
    frozenset({"Datastore.Audit"}): "VMBenchStorageAudit",
}
BUILTIN = {frozenset({"VM.Audit", "VM.Clone"}): "PVETemplateUser"}
ALL_STEPS = (Step.RUN, Step.DOCTOR, Step.CLEANUP, Step.PUSH)
_STORAGE = ("Datastore.AllocateSpace", "Datastore.Audit")  # a template's storage: its clones' disks, its status
DOCS_SETUP = Setup(node="pve1", storage="local-zfs", template_storages=("local-zfs",), import_storage="local")
DOCS_TOKEN = "vmbench@pve!bench"
#: PVE's default content of ``local`` (iso, container templates, backups), with import added
IMPORT_CONTENT = "iso,vztmpl,backup,import"


@dataclass(frozen=True)
class Acl:
    """One ``pveum acl modify``: ``role`` (holding ``privileges``) on ``path``."""

    path: str
    role: str
    privileges: tuple[str, ...]
    optional: bool = False
    covers: tuple[str, ...] = ()  # the paths below it whose needs it holds (they get no ACL of their own)

    @property
    def builtin(self) -> bool:
        return self.role.startswith("PVE")


def role_name(path: str, privileges: Iterable[str]) -> str:
    privs = frozenset(privileges)
    if privs in BUILTIN:
        return BUILTIN[privs]
    if path.startswith("/vms"):
        return "VMBench"
    if path.startswith("/storage"):
        return STORAGE_ROLES.get(privs, "VMBenchStorage-" + "-".join(sorted(p.split(".")[-1] for p in privs)))
    if path.startswith("/sdn"):
        return "VMBenchNetwork"
    return "VMBenchAudit"


def _ancestors(path: str) -> list[str]:
    parts = [p for p in path.split("/") if p]
    return ["/" + "/".join(parts[:i]) for i in range(len(parts) - 1, -1, -1)]


def plan_acls(wanted: Sequence[Need]) -> list[Acl]:
    """The ACLs granting ``wanted``: per path every privilege needed there, as one role; a
    path left out when its nearest granted ancestor (propagating) holds all it needs."""
    by_path: dict[str, set[str]] = {}
    optional: dict[str, bool] = {}
    for n in wanted:
        by_path.setdefault(n.path, set()).add(n.privilege)
        optional[n.path] = optional.get(n.path, True) and n.optional
    kept: dict[str, set[str]] = {}
    covers: dict[str, list[str]] = {}
    for path in sorted(by_path, key=lambda p: (p.count("/") if p != "/" else 0, p)):
        nearest = next((a for a in _ancestors(path) if a in kept), None)
        if nearest is not None and by_path[path] <= kept[nearest]:
            covers[nearest].append(path)
            continue
        kept[path], covers[path] = by_path[path], []
    order = ["/vms", "/storage", "/sdn", "/nodes", "/"]
    acls = [Acl(p, role_name(p, privs), tuple(sorted(privs)), optional[p] and all(optional[c] for c in covers[p]),
                tuple(covers[p])) for p, privs in kept.items()]
    return sorted(acls, key=lambda a: (next(i for i, o in enumerate(order) if a.path.startswith(o)), a.path))


def _q(text: str) -> str:
    return shlex.quote(text)


def role_line(acl: Acl, *, modify: bool = False) -> str:
    verb = "modify" if modify else "add"
    return f"pveum role {verb} {acl.role} --privs {_q(','.join(acl.privileges))}"


def acl_line(acl: Acl, token_id: str) -> str:
    """``pveum acl modify``: to the token and, unless it is root@pam, its user (a
    privilege-separated token has only what both have)."""
    user = token_id.partition("!")[0]
    who = (f"--users {_q(user)} " if user != "root@pam" else "") + f"--tokens {_q(token_id)}"
    return f"pveum acl modify {acl.path} {who} --roles {acl.role}"


def recipe(setup: Setup, token_id: str, *, steps: Iterable[Step] = ALL_STEPS, majors: Sequence[int] = MAJORS,
           scenario: str | None = None) -> str:
    """The whole setup, as commands to run as root on a node (``vmbench setup proxmox``)."""
    steps = tuple(steps)
    user, _, name = token_id.partition("!")
    plans = {m: plan_acls(needs(setup, steps, m)) for m in majors}
    first = plans[majors[0]]
    versions = " and ".join(f"PVE {m}" for m in majors)
    out = [f"# vmbench on Proxmox VE ({versions}): a user, a privilege-separated API token, and only the rights",
           "# vmbench needs (docs/proxmox.md).  Run as root on a node of the cluster."]
    if scenario:
        out.append(f"# For {scenario}: node {setup.node}, storage {setup.storage}, token {token_id}.")
    else:
        out.append("# `vmbench setup proxmox SCENARIO` prints it for a scenario's token, node and storages.")
    out += ["", "# Roles: one per ACL path, each with everything vmbench needs on that path."]
    made: set[str] = set()
    for i, acl in enumerate(first):
        if acl.builtin or acl.role in made:
            continue
        made.add(acl.role)
        per_version = {m: plans[m][i] for m in majors}
        if len({a.privileges for a in per_version.values()}) > 1:
            for m, a in per_version.items():
                out.append(f"{role_line(a)}   # PVE {m}")
        else:
            out.append(role_line(acl))
    out += ["", f"# The user and its token (privilege-separated: it gets only what it and {user} are both granted).",
            f"pveum user add {_q(user)}",
            f"pveum user token add {_q(user)} {_q(name)} --privsep 1   # prints the token's secret once: keep it "
            "(hypervisor.token.secret_file or secret_env)",
            "", "# The ACLs (an ACL on a path replaces what the token inherits there: each carries all that path needs)."]
    for acl in first:
        if acl.optional:
            out.append(f"# Optional ({', '.join(acl.privileges)}); without it not done: {_why(setup, steps, acl)}.")
        out.append(acl_line(acl, token_id))
    out.append(f"# A template of your own on another storage than {setup.storage}: {role_name('/storage/x', _STORAGE)} "
               "on that storage too (vmbench doctor checks it).")
    if setup.import_storage and Step.PUSH in steps:
        out += ["", f"# vmbench images push uploads the template's disk into a storage that takes imports: add 'import'",
                f"# to the content of {setup.import_storage} (keep the content it has; 'pvesm status' lists it).",
                f"pvesm set {setup.import_storage} --content {IMPORT_CONTENT}"]
    return "\n".join(out) + "\n"


def _why(setup: Setup, steps: Iterable[Step], acl: Acl) -> str:
    paths = {acl.path, *acl.covers}
    whys = [w for m in MAJORS for n in needs(setup, steps, m) if n.optional and n.path in paths for w in n.why.split("; ")]
    return "; ".join(dict.fromkeys(whys)) or "recommended"


def grant_hint(paths: Iterable[str], wanted: Sequence[Need], token_id: str) -> list[str]:
    """The pveum lines that grant what is missing on ``paths``: the recipe's ACL for each
    (on that path, or the nearest path above it the recipe grants, as the template's rights
    come with /vms), its role holding everything the steps need there (an ACL replaces what
    the token inherits on that path).  ``wanted``: the needs as the recipe sees them (the
    template as any VMID)."""
    plan = {a.path: a for a in plan_acls(wanted)}
    acls: list[Acl] = []
    for path in paths:
        where = next((p for p in [path, *_ancestors(path)] if p in plan), None)
        if where is not None and plan[where] not in acls:
            acls.append(plan[where])
    lines: list[str] = []
    roles: set[str] = set()
    for acl in acls:
        if not acl.builtin and acl.role not in roles:
            roles.add(acl.role)
            lines.append(f"{role_line(acl)}   (if it exists: {role_line(acl, modify=True)})")
        lines.append(acl_line(acl, token_id))
    return lines


# ---- docs/proxmox.md ------------------------------------------------------------------------

BEGIN = "<!-- begin: generated by vmbench.drivers.proxmox.recipe ({what}); a test keeps it equal -->"
END = "<!-- end: generated -->"


def rights_table() -> str:
    """The table of rights as Markdown: step, path, privileges, PVE versions, what for."""
    rows = ["| step | ACL path | privilege | PVE | what for |", "| --- | --- | --- | --- | --- |"]
    for r in RIGHTS:
        pve = "8, 9" if r.majors == MAJORS else ", ".join(str(m) for m in r.majors)
        path = f"`{r.where.value}`" + (" (propagated)" if r.where.propagated else "")
        priv = f"`{r.privilege}`" + (" (optional)" if r.optional else "")
        rows.append(f"| {r.step.value} | {path} | {priv} | {pve} | {r.why} |")
    return "\n".join(rows) + "\n"


def docs_blocks() -> dict[str, str]:
    """What docs/proxmox.md holds between each pair of markers."""
    return {"recipe": "```sh\n" + recipe(DOCS_SETUP, DOCS_TOKEN) + "```\n", "rights table": rights_table()}


def render_docs(text: str) -> str:
    """``text`` (docs/proxmox.md) with each generated block replaced by what it is now."""
    for what, body in docs_blocks().items():
        begin = BEGIN.format(what=what)
        head, sep, rest = text.partition(begin + "\n")
        if not sep:
            raise ValueError(f"docs/proxmox.md has no {begin!r}")
        _, sep, tail = rest.partition(END)
        if not sep:
            raise ValueError(f"docs/proxmox.md: no {END!r} after {begin!r}")
        text = head + begin + "\n" + body + END + tail
    return text


__all__ = ["Acl", "docs_blocks", "grant_hint", "plan_acls", "recipe", "render_docs", "rights_table"]


if __name__ == "__main__":  # python -m vmbench.drivers.proxmox.recipe docs/proxmox.md: regenerates its blocks
    import sys
    from pathlib import Path

    page = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/proxmox.md")
    page.write_text(render_docs(page.read_text()))
