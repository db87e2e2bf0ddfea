"""Finding the scratch disk inside the guest by its serial, and refusing anything else.

Destructive commands take a :class:`ScratchDisk`, which only :func:`find_scratch` makes:
by exact serial, never by a device-name guess, and never the disk that holds ``/``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from ..errors import GuestError
from ..transport.base import Transport

LSBLK_COLUMNS = "NAME,PATH,SERIAL,TYPE,SIZE,MOUNTPOINTS,PKNAME"


@dataclass(frozen=True)
class ScratchDisk:
    name: str  # kernel name, e.g. vdb, sda
    path: str  # /dev/vdb
    serial: str
    size: int


def lsblk_argv() -> list[str]:
    return ["lsblk", "--json", "--bytes", "--output", LSBLK_COLUMNS]


def root_source_argv() -> list[str]:
    return ["findmnt", "--noheadings", "--output", "SOURCE", "--target", "/"]


def pick_scratch(lsblk_json: str, serial: str, root_source: str) -> ScratchDisk:
    """The one whole disk whose serial is ``serial``; refused if it is or holds ``/`` or
    has anything mounted."""
    tree = json.loads(lsblk_json).get("blockdevices", [])
    matches = [d for d in tree if d.get("type") == "disk" and (d.get("serial") or "").strip() == serial]
    if not matches:
        seen = ", ".join(f"{d.get('name')} (serial {d.get('serial') or '-'})" for d in tree if d.get("type") == "disk")
        raise GuestError(f"no disk with serial {serial} in the guest; disks: {seen or 'none'}",
                         "the scratch disk was not attached as requested")
    if len(matches) > 1:
        raise GuestError(f"{len(matches)} disks have serial {serial} in the guest; refusing to guess")
    disk = matches[0]
    root = root_source.strip()
    for node in _walk(disk):
        if node.get("path") == root or any(m == "/" for m in (node.get("mountpoints") or []) if m):
            raise GuestError(f"the disk with serial {serial} ({disk['path']}) holds the root filesystem; refusing to touch it")
        mounted = [m for m in (node.get("mountpoints") or []) if m]
        if mounted:
            raise GuestError(f"{node.get('path')} on the scratch disk is mounted at {', '.join(mounted)}; refusing to touch it")
    return ScratchDisk(name=disk["name"], path=disk["path"], serial=serial, size=int(disk["size"]))


def _walk(node: dict):
    yield node
    for child in node.get("children") or []:
        yield from _walk(child)


def find_scratch(guest: Transport, serial: str) -> ScratchDisk:
    tree = guest.run(lsblk_argv(), timeout=60).stdout
    root = guest.run(root_source_argv(), timeout=60).stdout
    return pick_scratch(tree, serial, root)


def holders(guest: Transport, disk: ScratchDisk) -> list[str]:
    """What still sits on the scratch disk (partitions, dm devices, mounts), for checks
    between stacks."""
    tree = json.loads(guest.run(lsblk_argv(), timeout=60).stdout).get("blockdevices", [])
    for d in tree:
        if d.get("name") == disk.name:
            return [n["path"] for n in _walk(d) if n is not d] + [m for n in _walk(d) for m in (n.get("mountpoints") or []) if m]
    return []
