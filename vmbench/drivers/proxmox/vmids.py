"""VMIDs for clones, allocated so that the drivers of one run (one per node, all on the same
cluster API) never pick the same one.  ``GET /cluster/nextid`` reserves nothing: two clones
asked for at once get the same answer and one fails with "config file already exists".  A
VMID handed out here stays out of every other driver's reach in this process until its clone
request has returned (PVE has written the clone's config file by then, so nextid skips it);
another client of the cluster taking one meanwhile is still possible, and the clone retries.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

from ...errors import HypervisorError
from .api import PveApi
from .errors import PveApiError

_LOCK = threading.Lock()
_HELD: dict[str, set[int]] = {}  # the cluster's API URL -> VMIDs handed out, their clone not yet requested
MAX_PROBES = 64


@contextlib.contextmanager
def vmid_for_clone(api: PveApi, cluster: str) -> Iterator[int]:
    """A VMID free in the cluster and held by no other driver of this process (``cluster``:
    the API URL the drivers share), held until the ``with`` block (the clone request) ends."""
    with _LOCK:
        held = _HELD.setdefault(cluster, set())
        vmid = int(api.get("/cluster/nextid"))
        for _ in range(MAX_PROBES):
            if vmid not in held and _free(api, vmid, probe=bool(held)):
                break
            vmid += 1
        else:
            raise HypervisorError(f"no free VMID found after {MAX_PROBES} tries from /cluster/nextid")
        held.add(vmid)
    try:
        yield vmid
    finally:
        with _LOCK:
            held.discard(vmid)


def _free(api: PveApi, vmid: int, probe: bool) -> bool:
    """Whether ``vmid`` is free (asked with nextid?vmid= only when another VMID is held here:
    the first answer of nextid is free as far as PVE knows)."""
    if not probe:
        return True
    try:
        return int(api.get("/cluster/nextid", {"vmid": vmid})) == vmid
    except PveApiError as exc:
        if exc.status == 400:
            return False
        raise
