"""Host-only runs: storage variants measured on the host with no VM (``host_only: true``).

Pure: stored rows in, one table model out.  Per job, every variant (cell) in plan order with
fio's figures, the telemetry the sampler recorded beside them (device and pool MB/s, write
amplification, ARC hit ratio, CPU) and the change from the first variant (the baseline),
with its interval and verdict.  The settings of each variant are named in its own column.
"""

from __future__ import annotations

from typing import Sequence

from ..results.environment import Environment
from ..results.records import CellRecord, Measurement, Settings
from ..scenario.axes import STORAGE_AXES
from .rows import Row, aggregate, group, host_group, judge_change, telemetry_notes
from .facts import RepeatPolicy, admissibility
from .tables import (FIGURE_COLUMNS, Column, Table, as_policy, delta_fields, delta_pct, f_bool, f_text, figure_fields, job_label,
                     repeat_columns, telemetry_columns, telemetry_table_notes, verdict_notes)


def host_only_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str]) -> list[Row]:
    groups = group(measurements)
    out = []
    for job in jobs:
        base = None
        for i, cell in enumerate(cells):
            rows = groups.get(host_group(cell.name, job))
            if not rows:
                continue
            fig = aggregate(rows)
            deltas = {}
            vs_base = None
            if i == 0:
                base = fig
            elif base is not None and base.job_hash == fig.job_hash:
                vs_base = fig.iops / base.iops - 1.0 if base.iops else None
                deltas["vs_baseline"] = judge_change(fig, base)
            out.append(Row(job=job, sync=rows[0].sync, side="host", cell=cell.name, stack=None, layer="host",
                           figures=fig, vs_baseline=vs_base, note="; ".join(telemetry_notes(rows[0], fig)),
                           settings=cell.settings, deltas=deltas))
    return out


def host_only_table(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str],
                    repeats: int | RepeatPolicy, *, env: Environment | None = None, storage: str = "") -> Table:
    policy = as_policy(repeats)
    rows = host_only_rows(measurements, cells, jobs)
    keys = ("vs_baseline",)
    records = []
    order = {k: i for i, k in enumerate(STORAGE_AXES)}  # stored JSON sorts keys; show them in axis order
    every = [c.settings for c in cells]
    common = {k: v for k, v in (every[0] if every else {}).items() if all(s.value(k) == v for s in every)}
    varied = len(every) > 1 and len(common) < len(every[0])

    def shown(settings: Settings) -> str:  # what tells the variants apart; the rest is said once, in a note
        items = [(k, v) for k, v in settings.items() if not (varied and common.get(k) == v)]
        return ", ".join(f"{k}={v}" for k, v in sorted(items, key=lambda kv: order.get(kv[0], 99)))

    for r in rows:
        settings = shown(r.settings)
        records.append({"job": job_label(r), "cell": r.cell or "", "storage": settings, **figure_fields(r),
                        "vs_baseline": r.vs_baseline, "note": r.note,
                        "repeat_stop": policy.stop(r.figures.repeats, r.figures.cv), **delta_fields(r, keys)})
    cols = [Column("job", "job"), Column("storage", "storage settings")]
    cols += FIGURE_COLUMNS + telemetry_columns(records) + repeat_columns(records, policy)
    cols += [Column("vs_baseline", "vs baseline", row_fmt=delta_pct("vs_baseline")), Column("note", "note", f_text)]
    notes = [f"host only: no VM; fio on the host, on a new zvol or dataset per variant ({storage})." if storage
             else "host only: no VM; fio on the host, on a new zvol or dataset per variant.",
             f"vs baseline = change in IOPS from the first variant ({cells[0].name if cells else '-'})."]
    if varied and common:
        notes.append("every variant: " + ", ".join(f"{k}={v}" for k, v in sorted(common.items(), key=lambda kv: order.get(kv[0], 99))) + ".")
    if any(r.sync for r in rows):
        notes.append("(sync) jobs issue synchronous writes: compare them only with each other.")
    notes += telemetry_table_notes(records)
    notes += verdict_notes(records, keys)
    # no guests: no QEMU cache mode, no guest RAM; the variants' volumes for the ZFS facts
    facts, missing = admissibility(measurements, [], env, policy, storage_cells=cells)
    return Table("host-only", "Host only: storage variants", cols, records, notes, facts, missing)


def storage_cells_table(cells: Sequence[CellRecord]) -> Table:
    """Every variant: its storage settings, what changed, whether it was measured and why not."""
    order = {k: i for i, k in enumerate(STORAGE_AXES)}
    records = [{"cell": c.name,
                "storage": ", ".join(f"{k}={v}" for k, v in sorted(c.settings.items(), key=lambda kv: order.get(kv[0], 99))),
                "changed": ", ".join(c.changed) or "-", "valid": c.valid, "problems": "; ".join(c.problems)} for c in cells]
    cols = [Column("cell", "cell"), Column("storage", "storage settings"), Column("changed", "changed"),
            Column("valid", "measured", f_bool), Column("problems", "problems", f_text)]
    return Table("cells", "Storage variants (each a new zvol or dataset, read back with zfs get)", cols, records)
