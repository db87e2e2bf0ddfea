"""The host's ZFS kernel threads in a QEMU CPU snapshot (issue 17): which threads they are and
what they used between two snapshots, the "zfs" part of the rest of the host
(:func:`vmbench.telemetry.qemu_cpu.account`)."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

#: the names of OpenZFS's kernel threads (taskqs z_*, txg_sync/txg_quiesce, zvol, spa_*, arc_*,
#: dbu_evict, dbuf_evict, dp_*, l2arc_feed, zthr_*); the snapshot script's case pattern says the same
ZFS_COMM = re.compile(r"^(?:z_|txg_|zvol|spa_|arc_|dbu_|dbuf|dp_|l2arc|zthr)")
PF_KTHREAD = 0x00200000  # /proc/PID/stat flags: a kernel thread


def is_zfs_thread(comm: str, flags: int) -> bool:
    """A kernel thread (not a user process that happens to have such a name) with ZFS's names."""
    return bool(flags & PF_KTHREAD) and ZFS_COMM.match(comm) is not None


@dataclass(frozen=True)
class ZfsCpu:
    """The host's ZFS kernel threads between two snapshots, part of the rest of the host: the
    threads alive at the end (``new``: started in between, counted from 0), those ``gone``
    (their time is lost), and the idle VM's rate times the elapsed time to take off."""

    threads: int
    new: int
    gone: int
    user_s: float
    system_s: float
    idle_s: float = 0.0

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.system_s

    def to_json(self, ios: float) -> dict[str, Any]:
        net = self.cpu_s - self.idle_s
        return {**asdict(self), "cpu_s": self.cpu_s, "net_s": net, "us_per_io": net * 1e6 / ios if ios > 0 else None}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> ZfsCpu:
        return cls(**{f.name: d[f.name] for f in fields(cls)})
