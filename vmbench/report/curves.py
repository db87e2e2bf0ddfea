"""Sweeps (the scenario's ``sweep: {iodepth: [...]}`` or ``numjobs``): each swept job's points
as one curve per cell and side, IOPS against p50 and p99, with the knee and the gap at each
point.  Pure: rows in (:func:`~vmbench.report.rows.gap_rows` or the host-only rows), a table
and the curves for the HTML plot out.

The knee, by a stated rule (:func:`sweep_knee_index`; a load run's scaling knee is another
rule, :func:`vmbench.report.loadrows.scaling_knee_index`): the first point that no later point beats by
:data:`KNEE_GAIN` of IOPS or more; beyond it more queue adds latency, not throughput.  A curve
still gaining at its last point has no knee within the sweep, and the report says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..results.environment import Environment
from .loadrows import ScalingRow
from .rows import Row
from ..results.plan import PlannedJob
from .tables import Column, Table, f_int, f_ms, f_ratio, f_text

KNEE_GAIN = 0.10  # a step that adds less than 10% IOPS is past the knee
#: how each swept setting reads in the report
SWEPT = {"iodepth": "QD", "numjobs": "numjobs"}


@dataclass(frozen=True)
class CurvePoint:
    value: int  # the swept setting's value (a queue depth, a number of jobs)
    iops: float
    p50_ms: float | None
    p99_ms: float | None
    gap: float | None  # host IOPS / this IOPS (guest rows of a run with VMs)


@dataclass(frozen=True)
class Curve:
    job: str  # the job the sweep was made from
    key: str  # "iodepth" or "numjobs"
    cell: str | None
    side: str  # host or guest
    points: tuple[CurvePoint, ...]  # ascending by value

    @property
    def knee(self) -> int | None:
        return sweep_knee_index([p.iops for p in self.points])

    @property
    def label(self) -> str:
        return " ".join(x for x in (self.job, self.cell or "", self.side) if x)


def sweep_knee_index(iops: Sequence[float], gain: float = KNEE_GAIN) -> int | None:
    """The index of the knee: the first point that no later point beats by ``gain`` (a
    fraction) of IOPS or more; None when only the last is (still rising at the sweep's end).
    A dip between two points (noise) does not make a knee while a later point still gains."""
    for i in range(len(iops) - 1):
        if max(iops[i + 1:]) < iops[i] * (1 + gain):
            return i
    return None


def curves(rows: Sequence[Row], jobs: Sequence[PlannedJob]) -> list[Curve]:
    """The sweeps' rows (each point is a job of its own) gathered into curves, in the order the
    rows come: per swept job, cell and side."""
    points = {j.name: j for j in jobs if j.sweep_of and j.sweep_key and j.sweep_value is not None}
    grouped: dict[tuple, list[tuple[int, Row]]] = {}
    for r in rows:
        j = points.get(r.job)
        if j is None or r.side not in ("host", "guest"):
            continue
        grouped.setdefault((j.sweep_of, j.sweep_key, r.cell, r.side), []).append((int(j.sweep_value or 0), r))
    out = []
    for (of, key, cell, side), got in grouped.items():
        pts = tuple(CurvePoint(v, r.figures.iops, r.figures.p50_ms, r.figures.p99_ms, r.gap if side == "guest" else None)
                    for v, r in sorted(got, key=lambda vr: vr[0]))
        out.append(Curve(str(of), str(key), cell, side, pts))
    return out


def load_curves(rows: Sequence[ScalingRow], jobs: Sequence[PlannedJob]) -> list[Curve]:
    """A load run's sweeps: per swept job and load step, the step's curve on each side: its
    aggregate IOPS (summed over the VMs) against the p50/p99 merged from every VM's histograms,
    the gap at each point (the host reference of the same step: as many host volumes at once)."""
    points = {j.name: j for j in jobs if j.sweep_of and j.sweep_key and j.sweep_value is not None}
    grouped: dict[tuple, dict[int, CurvePoint]] = {}
    for r in rows:
        j = points.get(r.guest.job)
        if j is None:
            continue
        value, label = int(j.sweep_value or 0), f"{j.sweep_of} at {r.guest.name}"
        where = "/".join(x for x in (r.guest.cell, r.guest.stack, r.guest.layer if r.guest.layer != "raw" else "") if x)
        gap = r.host.iops / r.guest.iops if r.host is not None and r.host.iops and r.guest.iops else None
        for side, fig in (("guest", r.guest), ("host", r.host)):
            if fig is not None and fig.iops is not None:
                grouped.setdefault((label, j.sweep_key, where if side == "guest" else None, side), {})[value] = CurvePoint(
                    value, fig.iops, fig.p50_ms, fig.p99_ms, gap if side == "guest" else None)
    return [Curve(label, str(key), cell, side, tuple(pts[v] for v in sorted(pts)))
            for (label, key, cell, side), pts in grouped.items()]


def curve_summary(c: Curve) -> str:
    """One line: where the knee is and what the queue beyond it bought."""
    name = SWEPT.get(c.key, c.key)
    k = c.knee
    last = c.points[-1]
    if k is None:
        return f"{c.label}: no knee up to {name} {last.value}: IOPS still rose by {KNEE_GAIN:.0%} or more at its end"
    knee = c.points[k]
    head = f"{c.label}: knee at {name} {knee.value} ({knee.iops:,.0f} IOPS, p99 {_ms(knee.p99_ms)} ms)"
    if k == len(c.points) - 1:
        return head
    more = (last.iops / knee.iops - 1) if knee.iops else 0.0
    p99 = f", p99 x{last.p99_ms / knee.p99_ms:.1f}" if knee.p99_ms and last.p99_ms else ""
    return f"{head}; {name} {knee.value} -> {last.value}: {more:+.0%} IOPS{p99}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def curve_table(found: Sequence[Curve], *, env: Environment | None = None) -> Table | None:
    """The curves point by point, the knee marked, each curve summed up in a note; None without sweeps."""
    if not found:
        return None
    records = []
    for c in found:
        k = c.knee
        for i, p in enumerate(c.points):
            records.append({"job": c.job, "cell": c.cell or "", "side": c.side, "swept": SWEPT.get(c.key, c.key),
                            "value": p.value, "iops": p.iops, "p50_ms": p.p50_ms, "p99_ms": p.p99_ms, "gap": p.gap,
                            "knee": "knee" if i == k else ""})
    cols = [Column("job", "job"), Column("cell", "cell"), Column("side", "side"), Column("swept", "swept", f_text),
            Column("value", "at", f_int, keep=True), Column("iops", "IOPS", f_int), Column("p50_ms", "p50 ms", f_ms),
            Column("p99_ms", "p99 ms", f_ms), Column("knee", "knee", f_text, keep=True)]
    if any(r["gap"] is not None for r in records):
        cols.insert(-1, Column("gap", "gap (host/guest)", f_ratio, keep=True))
    notes = [curve_summary(c) for c in found]
    notes.append(f"knee = the first point that no later point beats by {KNEE_GAIN:.0%} of IOPS or more: beyond it more "
                 "queue (or jobs) adds latency, not throughput. Latency is fio's completion latency from its histograms.")
    accel = env.accelerator if env is not None else None
    if accel and accel != "kvm":
        notes.append(f"guests ran under {accel}: the guest curves' shape is the emulation's as much as the disk's")
    return Table("curves", "Queue-depth and numjobs sweeps: IOPS against latency", cols, records, notes)
