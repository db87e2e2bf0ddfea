"""What the network between hosts carried during a round of a run across several hosts.

Hosts of one run share what lies between them: a Ceph pool's replication, an NFS or iSCSI
export, the cluster network.  Each host's ``/proc/net/dev`` byte counters are read just
before and just after every round, and the busiest interface's rate is set against its link
speed (``/sys/class/net/IF/speed``, Mb/s; virtual interfaces have none): a round that took an
interface to :data:`NEAR_LINK` of its link or more is flagged, as its figures may be the
network's, not the storage's.  Loopback is left out.  Parsing and the rates are pure; reading
never fails a round (a host that cannot be read has no figures).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from ..errors import VmbenchError
from ..transport.base import Transport

log = logging.getLogger(__name__)

#: a round that took an interface to this share of its link speed (or more) is flagged
NEAR_LINK = 0.7
NEAR_LINK_RULE = (f"NIC = the busiest interface of the host over the round (/proc/net/dev bytes received plus sent, per "
                  f"second, against /sys/class/net/IF/speed); a round at {NEAR_LINK * 100:.0f}% of a link or more is flagged: "
                  "its figures may be the network's, not the storage's.")


def parse_net_dev(text: str) -> dict[str, tuple[int, int]]:
    """``/proc/net/dev`` -> {interface: (bytes received, bytes sent)}, loopback left out."""
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:
        name, sep, rest = line.partition(":")
        fields = rest.split()
        if not sep or len(fields) < 9 or name.strip() == "lo":
            continue
        try:
            out[name.strip()] = (int(fields[0]), int(fields[8]))
        except ValueError:
            continue
    return out


@dataclass(frozen=True)
class NicRate:
    """One interface over one round: its rate (received plus sent, MB/s) and link speed."""

    iface: str
    mb_s: float
    speed_mbit: int | None  # None: the interface says no speed (virtual, or down)

    @property
    def share(self) -> float | None:
        """The rate as a share of the link speed (both directions of a full-duplex link count against it once)."""
        if not self.speed_mbit:
            return None
        return self.mb_s * 8 / self.speed_mbit

    def to_json(self) -> dict:
        return {"iface": self.iface, "mb_s": round(self.mb_s, 3), "speed_mbit": self.speed_mbit,
                "share": None if self.share is None else round(self.share, 4)}


def busiest(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], seconds: float,
            speeds: dict[str, int | None]) -> NicRate | None:
    """The interface that moved the most bytes between two readings ``seconds`` apart."""
    if seconds <= 0:
        return None
    moved = {i: (after[i][0] - before[i][0]) + (after[i][1] - before[i][1]) for i in after if i in before}
    moved = {i: b for i, b in moved.items() if b >= 0}
    if not moved:
        return None
    iface = max(moved, key=lambda i: moved[i])
    return NicRate(iface, moved[iface] / seconds / 1e6, speeds.get(iface))


def read_counters(host: Transport) -> dict[str, tuple[int, int]] | None:
    """The host's interface counters now (None when they cannot be read)."""
    try:
        return parse_net_dev(host.read_file("/proc/net/dev").decode(errors="replace"))
    except (VmbenchError, OSError) as exc:
        log.warning("cannot read the network counters of %s: %s", host.name, exc)
        return None


def read_speeds(host: Transport, ifaces: list[str]) -> dict[str, int | None]:
    """Each interface's link speed in Mb/s (None where the kernel says none, -1, or cannot tell)."""
    out: dict[str, int | None] = {}
    for iface in ifaces:
        try:
            value = int(host.read_file(f"/sys/class/net/{iface}/speed").decode().strip())
        except (VmbenchError, OSError, ValueError):
            value = -1
        out[iface] = value if value > 0 else None
    return out
