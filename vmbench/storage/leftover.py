"""Something a run created and did not remove (found by ``vmbench cleanup``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..transport import ops
from ..transport.base import Transport


@dataclass(frozen=True)
class Leftover:
    kind: str  # "domain", "volume", "file"
    name: str
    run_tag: str
    detail: str = ""


#: a run's host fio work directory: vmbench-<run tag>-<8 random characters>
WORKDIR_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-\w{8}$")


def work_leftovers(host: Transport, work: str) -> list[Leftover]:
    """Host fio work directories of runs that did not remove them, under ``work``."""
    out = []
    for d in sorted(ops.list_dir(host, work)):
        m = WORKDIR_RE.match(d)
        if m:
            out.append(Leftover("directory", f"{work}/{d}", m.group(1), "host fio work directory"))
    return out


def remove_work_leftover(host: Transport, work: str, item: Leftover) -> None:
    """Remove a directory :func:`work_leftovers` listed, only if it is one (checked again)."""
    parent, _, base = item.name.rpartition("/")
    if parent == work and WORKDIR_RE.match(base):
        ops.remove_tree(host, item.name, inside=work)
