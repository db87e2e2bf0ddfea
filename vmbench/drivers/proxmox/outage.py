"""Riding out a Proxmox API that stops answering for a while: pveproxy or pvedaemon restarted
(as ``apt upgrade`` of pve-manager does), a node of the cluster rebooting.

While pvedaemon is down, pveproxy answers ``595 Connection refused`` for every call it
proxies to it (NOTES.md section 8); while pveproxy is down the port refuses connections.
:class:`~.api.PveApi` sends such a request again, with a growing pause, until the API
answers or :data:`OUTAGE_SECONDS` have passed since it stopped answering; what it may send
again depends on whether the request can have reached PVE:

- **not delivered** (:data:`REFUSED`): the connection was refused or could not be made,
  pveproxy could not connect to the daemon (595) or says it cannot serve now (503).  PVE
  never saw the request: any request is sent again.
- **answer lost** (:data:`LOST`): the connection dropped after the request went out, or
  pveproxy lost the daemon mid-request (596, 597, 599, 502).  The request may have taken
  effect: only an :func:`idempotent` one is sent again; any other raises
  :class:`~.errors.PveAnswerLost`, and its caller checks the state (a clone: does the VM
  exist?) or fails naming the step.

An outage is tracked per node a path names (``/nodes/{node}/...``; pveproxy proxies those to
that node) and for the API as a whole; an answer ends it.  Once one lasted past the
deadline, later requests to it fail at once until it answers again: a run whose node is gone
stops instead of waiting a minute per request, and its cleanup's leftovers are named
(``vmbench cleanup`` removes them once the API answers).
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

#: how long a Proxmox API that stopped answering is waited for (its restart takes seconds)
OUTAGE_SECONDS = 60.0
#: the pause before the first retry, doubled up to RETRY_MAX_PAUSE
RETRY_FIRST_PAUSE = 0.5
RETRY_MAX_PAUSE = 5.0
#: how often a retry is said again in the progress output while the outage lasts
NOTICE_EVERY = 10.0

REFUSED = "refused"  # the request never reached PVE
LOST = "lost"  # it may have; its answer did not come
#: pveproxy's answers when the daemon (or node) behind it did not answer; AnyEvent::HTTP's
#: 595: connecting failed, 596: TLS, sending or the headers failed, 597: the body failed,
#: 599: other errors (a timeout); 502/503 from a proxy in front of it
STATUS_OUTAGE = {595: REFUSED, 503: REFUSED, 596: LOST, 597: LOST, 599: LOST, 502: LOST}
#: POSTs that do the same whether sent once or twice
IDEMPOTENT_POSTS = ("/status/stop", "/status/shutdown", "/agent/ping", "/agent/file-write")
#: a VM config key naming a disk (``virtio1``, ``scsi0``, ``unused3``...)
DISK_KEY_RE = re.compile(r"^(virtio|scsi|sata|ide|efidisk|tpmstate|unused)\d+$")
#: a disk value that allocates a new volume: ``STORAGE:SIZE_GiB[,...]`` or ``import-from=``
NEW_VOLUME_RE = re.compile(r"^[A-Za-z][\w.-]*:\d+(\.\d+)?(,|$)|(^|,)import-from=")
NODE_PATH_RE = re.compile(r"^/nodes/([^/]+)(/|$)")


def idempotent(method: str, path: str, params: Mapping[str, Any]) -> bool:
    """Does sending this request twice do what sending it once does?  GET, PUT and DELETE
    do (a second DELETE finds nothing: callers take "does not exist" as gone); POST only to
    stop, ping or write a whole file, and a config change that allocates no new volume."""
    if method in ("GET", "PUT", "DELETE"):
        return True
    if path.endswith(IDEMPOTENT_POSTS):
        return True
    if path.endswith("/config"):
        return not any(DISK_KEY_RE.match(k) and NEW_VOLUME_RE.search(str(v)) for k, v in params.items())
    return False


def node_of(path: str) -> str:
    """The node a path is served by ('' for the API itself: pveproxy's own answer)."""
    m = NODE_PATH_RE.match(path)
    return m.group(1) if m else ""


def where(node: str) -> str:
    return f"the Proxmox API (node {node})" if node else "the Proxmox API"


@dataclass
class _Outage:
    since: float  # when its first failure came
    told: float  # when it was last said
    gave_up: bool = False


class Outages:
    """The outages going on now, one per node (and '' for the API), shared by every thread
    of one :class:`~.api.PveApi` (a load step's VMs call it at once): how long each lasts is
    the same for all of them, and each is said once every :data:`NOTICE_EVERY` seconds."""

    def __init__(self, deadline: float, clock: Callable[[], float] = time.monotonic,
                 notice: Callable[[str], None] | None = None) -> None:
        self.deadline = deadline
        self.clock = clock
        self.notice = notice or (lambda text: None)
        self._lock = threading.Lock()
        self._now: dict[str, _Outage] = {}
        self.ridden_out: list[tuple[str, float]] = []  # (node or '', seconds) of each outage that ended

    def failed(self, node: str, reason: str) -> float | None:
        """A request to ``node`` found it not answering (``reason``: "595 Connection refused").
        The seconds left to retry, or None when the deadline has passed (given up)."""
        now = self.clock()
        with self._lock:
            out = self._now.get(node)
            if out is None:
                out = self._now[node] = _Outage(now, now - NOTICE_EVERY)
            lasted = now - out.since
            if out.gave_up or lasted >= self.deadline:
                out.gave_up = True
                return None
            tell = now - out.told >= NOTICE_EVERY
            if tell:
                out.told = now
        if tell:
            self.notice(f"{where(node)} not answering ({reason}) since {lasted:.0f}s; retrying until {self.deadline:g}s")
        return self.deadline - lasted

    def lasted(self, node: str) -> float:
        """How long the outage of ``node`` has lasted (0 when there is none)."""
        with self._lock:
            out = self._now.get(node)
            return self.clock() - out.since if out else 0.0

    def answered(self, node: str) -> None:
        """``node`` answered: its outage (and the API's) is over."""
        if not self._now:
            return
        now = self.clock()
        ended: list[tuple[str, float]] = []
        with self._lock:
            for key in {node, ""}:
                out = self._now.pop(key, None)
                if out is not None:
                    ended.append((key, now - out.since))
            self.ridden_out += ended
        for key, seconds in ended:
            self.notice(f"{where(key)} answers again after {seconds:.1f}s")
