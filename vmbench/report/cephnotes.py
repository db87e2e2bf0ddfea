"""What a Ceph pool's counters say beside a write job that is not the job's own.

The pool's client counters (:mod:`vmbench.telemetry.ceph`) are every client's, one copy of each
write whatever the replication: reads during a write job, and more written than fio wrote, are
said on the row as not the job's (another client of the pool, or librbd's own metadata), rather
than shown as its figures.  Pure.
"""

from __future__ import annotations

#: reads during a write job above this share of fio's MB/s (and above 0.5 MB/s) are flagged
FOREIGN_READ_SHARE = 0.05
#: the counters hold one copy of what was written: above this, someone else wrote too
WRITE_AMPL_MAX = 1.25


def ceph_pool_notes(fio_mb_s: float, pool_read_mb_s: float | None, write_ampl: float | None) -> list[str]:
    """The notes of a write job's row on a Ceph pool (fio's MB/s, the pool's reads, the pool's
    writes over fio's)."""
    if fio_mb_s <= 0:
        return []
    out = []
    if pool_read_mb_s is not None and pool_read_mb_s > max(0.5, FOREIGN_READ_SHARE * fio_mb_s):
        out.append(f"pool also read {_mb(pool_read_mb_s)} MB/s during this write job: not fio's (another client of "
                   "the pool, or librbd reading the image's header and object map)")
    if write_ampl is not None and write_ampl > WRITE_AMPL_MAX:
        out.append(f"pool wrote {write_ampl:.2f} x fio's: more than fio wrote (another client of the pool, or librbd's "
                   "object map), not replication (the pool's counters hold one copy)")
    return out


def _mb(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"
