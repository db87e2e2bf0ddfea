"""The temporary storage entries a run adds to a Proxmox cluster's storage configuration.

A zvol of another volblocksize needs a zfspool entry with that blocksize, and a krbd (or
librbd) cell an rbd entry with that mapping: vmbench adds ``vmbench-<run tag>-<what>``
(``-<node>`` appended in a run across several nodes: storage IDs are cluster-wide), counts the
VMs of the run using each, and deletes an entry when its last VM is gone.  Only IDs that
match :data:`ENTRY_RE` are ever deleted, and only the configuration entry: volumes stay.
"""

from __future__ import annotations

import re

from ...errors import HypervisorError
from .api import PveApi
from .errors import PveApiError

#: vmbench-<run tag>-<volblocksize> (zfspool), vmbench-<run tag>-krbd|librbd (rbd), -<node> appended across nodes
ENTRY_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-(\d+[km]?|krbd|librbd)(-[a-z0-9]([a-z0-9-]*[a-z0-9])?)?$")
ENTRY_TYPES = ("zfspool", "rbd")


def delete_entry(api: PveApi, sid: str) -> None:
    """``DELETE /storage/<id>`` of a vmbench entry (only the config entry: volumes stay)."""
    if not ENTRY_RE.match(sid):
        raise HypervisorError(f"{sid} is not a vmbench storage entry; left alone")
    try:
        api.delete(f"/storage/{sid}")
    except PveApiError as exc:
        if not exc.gone:
            raise


def release_entry(api: PveApi, users: dict[str, set[str]], sid: str, vm_name: str) -> str | None:
    """``vm_name`` is destroyed: delete entry ``sid`` once no VM of the run (``users``) uses it.
    An error message, or None."""
    using = users.get(sid)
    if using is None:
        return None
    using.discard(vm_name)
    if using:
        return None
    try:
        delete_entry(api, sid)
    except (PveApiError, HypervisorError) as exc:
        return f"temporary storage {sid}: {exc.message}"
    del users[sid]
    return None
