"""The token's rights, read before anything is created: what the scenario's steps need
(:mod:`.rights`) against what ``GET /access/permissions`` says the token has on each path.

A required privilege missing refuses the run (and ``vmbench images push``) at preflight
with a :class:`~vmbench.errors.PreflightError` naming it and its path (PVE's own 403 for a
missing VM.Allocate names neither), the hint listing every one missing and the ``pveum``
lines that grant them (:func:`.recipe.grant_hint`: one role per path with all the steps
need there, so the new ACL does not take away what the token inherited); an optional one
(Sys.Audit) missing is a warning saying what goes unchecked.  ``vmbench doctor`` shows the
same as one line."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable, Mapping

from ...errors import PreflightError
from ..base import Check
from .config import disk_volumes, parse_options, storage_of
from .recipe import ALL_STEPS, grant_hint
from .rights import MAJORS, Missing, Need, Permissions, PermissionsApi, Setup, Step, missing, needs, read_permissions

MESSAGE_MAX = 160


@dataclass(frozen=True)
class RightsReport:
    """What the steps need of the token on this setup, and what it lacks."""

    token_id: str
    major: int
    steps: tuple[Step, ...]
    wanted: tuple[Need, ...]
    lacking: tuple[Missing, ...]
    #: the needs as the recipe grants them (every step's; the template's rights with those of every VMID, on
    #: /vms): a hint's role is the recipe's role, never one that would take a privilege from it
    granted: tuple[Need, ...] = ()

    @property
    def required(self) -> list[Missing]:
        return [m for m in self.lacking if not m.need.optional]

    @property
    def optional(self) -> list[Missing]:
        return [m for m in self.lacking if m.need.optional]

    def listing(self, items: Iterable[Missing]) -> list[str]:
        return [f"{m.text}: {m.need.why}" for m in items]

    def grant(self, items: Iterable[Missing]) -> list[str]:
        return grant_hint([m.need.path for m in items], self.granted or self.wanted, self.token_id)

    def summary(self, items: list[Missing]) -> str:
        """``VM.Allocate on /vms, Datastore.Audit on /storage/local`` (each privilege once per path)."""
        return ", ".join(m.text for m in items)

    def error(self, what: str = "vmbench") -> PreflightError:
        """The refusal: a message under 160 characters naming the first missing privilege
        and its path (and how many more), the rest in the hint."""
        req = self.required
        more = f" (and {len(req) - 1} more)" if len(req) > 1 else ""
        message = f"the token {self.token_id} lacks {req[0].text}{more}: {what} stops before creating anything"
        if len(message) > MESSAGE_MAX:
            message = f"the token {self.token_id} lacks {req[0].need.privilege} on {req[0].need.path}{more}"
        hint = ("missing (PVE %d, a privilege-separated token has only what both it and its user are granted):\n  " % self.major
                + "\n  ".join(self.listing(req)) + "\ngrant them (vmbench setup proxmox SCENARIO prints the whole setup; "
                "a path below with an ACL of its own, such as /vms/VMID, needs the same role there):\n  "
                + "\n  ".join(self.grant(req)))
        return PreflightError(message, hint)

    def warnings(self) -> list[str]:
        return [f"the token {self.token_id} lacks {m.text} (optional), so not done: {m.need.why}" for m in self.optional]

    def check(self) -> Check:
        """``vmbench doctor``'s line."""
        name = "token rights"
        if self.required:
            lacks = self.summary(self.required + self.optional)
            return Check(name, "FAIL", f"{self.token_id} (PVE {self.major}) lacks {lacks}", self.error().hint or "")
        if self.optional:
            return Check(name, "warn", f"{self.token_id} (PVE {self.major}) lacks {self.summary(self.optional)} (optional)",
                         "\n  ".join(["not done without it: " + "; ".join(m.need.why for m in self.optional),
                                       *self.grant(self.optional)]))
        required = {w.privilege for w in self.wanted if not w.optional}
        optional = sorted({w.privilege for w in self.wanted if w.optional} - required)
        return Check(name, "ok", f"{self.token_id} has the {len(required)} privileges a run needs on PVE {self.major}"
                                 + (f", and {', '.join(optional)} (optional)" if optional else ""))


def template_setup(node: str, storage: str, template: int | None, config: Mapping[str, object],
                   import_storage: str | None = None, clustered: bool = True) -> Setup:
    """The paths a run of this node, storage and template needs rights on: the template's
    disks' storages, the bridges (and VLANs) of its NICs."""
    sids = tuple(dict.fromkeys(storage_of(v) for k, v in sorted(disk_volumes(config).items()) if not k.startswith("unused")))
    bridges = []
    for key, value in sorted(config.items()):
        if key.startswith("net") and key[3:].isdigit():
            opts = parse_options(str(value))
            if opts.get("bridge"):
                bridges.append(opts["bridge"] + (f"/{opts['tag']}" if opts.get("tag") else ""))
    return Setup(node=node, storage=storage, template=template, template_storages=sids or (storage,),
                 import_storage=import_storage, bridges=tuple(dict.fromkeys(bridges)), clustered=clustered)


def read_report(api: PermissionsApi, token_id: str, major: int | None, setup: Setup, steps: Iterable[Step]) -> RightsReport:
    """The token's effective privileges on every path the steps need (``major`` unknown: PVE 9's rules)."""
    steps = tuple(steps)
    major = major or MAJORS[-1]
    wanted = tuple(needs(setup, steps, major))
    have: Permissions = read_permissions(api, [w.path for w in wanted])
    granted = tuple(needs(replace(setup, template=None), dict.fromkeys((*ALL_STEPS, *steps)), major))
    return RightsReport(token_id, major, steps, wanted, tuple(missing(wanted, have)), granted)
