"""A stored run -> records: the report's one read of the results database.

:func:`load_run` reads everything the report, its tables, plots and the HTML page need, once,
into a :class:`RunData` of the records of :mod:`vmbench.results.records`; nothing after it
touches the database.  The flow is one way: ``load_run`` (here) -> rows (:mod:`.rows`) ->
tables (:mod:`.tables`, :mod:`.hostonly`, put together by :mod:`.build`) -> text, JSON
(:mod:`.render`) or HTML (:mod:`.html`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, replace
from typing import Any, Sequence

from ..results.cpu import QEMU_CPU_KIND
from ..results.db import ResultsDB, RunRow
from ..results.environment import Environment
from ..results.key import MeasurementKey
from ..results.kind import RunKind
from ..results.plan import LoadPlan, StoredPlan
from ..results.records import BootRecord, CellRecord, CryptoRecord, Measurement, SeriesRecord, Telemetry
from ..scenario.model import Target
from ..telemetry import sampler as telemetry
from .runrows import RunRows

#: the samplers' series (:data:`vmbench.telemetry.sampler.SUMMARY_SOURCES`)
SAMPLED = tuple(telemetry.SUMMARY_SOURCES)
#: a guest measurement's QEMU process sampled on the host: one row of CPU per I/O
#: (:meth:`vmbench.telemetry.qemu_cpu.CpuPerIo.to_json`), not a time series
QEMU_CPU = QEMU_CPU_KIND


@dataclass(frozen=True)
class Series:
    """One stored time series: its source ("fio-iops", "disk", "zpool"...), the series as
    stored, and the key of the measurement it was recorded in (None: of the whole run)."""

    source: str
    series: Any
    key: MeasurementKey | None


@dataclass(frozen=True)
class RunData:
    """One run as the report reads it.

    ``cells`` in scenario order (journey steps), each with its ``host_cell`` (the plan's);
    ``measurements`` in the order stored, each with the samplers' means as ``telemetry`` and
    its QEMU process's CPU row as ``qemu_cpu`` where they were recorded; then, for cells that
    share a boot, the raw-disk rows measured once in the first of them, as records of each
    other cell marked ``shared_from``.  ``series``: every time series of fio's logs and the
    samplers, in the order stored.
    """

    run: RunRow
    cells: tuple[CellRecord, ...]
    measurements: tuple[Measurement, ...]
    crypto: tuple[CryptoRecord, ...] = ()
    boots: tuple[BootRecord, ...] = ()
    series: tuple[Series, ...] = ()

    @property
    def scenario_text(self) -> str:
        """The scenario file as the run ran it."""
        return self.run.scenario_text

    @property
    def plan(self) -> StoredPlan:
        """The run's plan as stored (read once; the run's kind is decided there)."""
        return self.run.plan

    @property
    def kind(self) -> RunKind:
        """What kind of run this is."""
        return self.plan.kind

    @property
    def load(self) -> LoadPlan | None:
        """The run's load section (scaling steps or neighbour phases); None for one VM per cell."""
        return self.plan.load

    @property
    def environment(self) -> Environment:
        return self.run.environment

    @property
    def jobs(self) -> list[str]:
        """The plan's job names, in order."""
        return self.plan.job_names

    @property
    def targets(self) -> list[Target]:
        """The scenario's targets, as the run stored them."""
        return list(self.plan.targets)

    @property
    def valid_cells(self) -> list[CellRecord]:
        return [c for c in self.cells if c.valid]

    @property
    def qemu_cpu(self) -> dict[MeasurementKey, Any]:
        """Each measurement's qemu-cpu row (CpuPerIo.to_json()) by its key, the measurements
        as stored (no shared raw-disk copies)."""
        return {m.key: m.qemu_cpu for m in self.measured if m.qemu_cpu is not None}

    @functools.cached_property
    def rows(self) -> RunRows:
        """The gap and layer rows of the valid cells, each made once: the report's tables and
        the advice read the same (:class:`~vmbench.report.runrows.RunRows`)."""
        return RunRows(list(self.measurements), self.valid_cells, self.environment.host_memory_bytes)

    @property
    def measured(self) -> list[Measurement]:
        """The measurements as stored (without the shared raw-disk copies)."""
        return [m for m in self.measurements if not m.shared_from]


def load_run(db: ResultsDB, ref: str | int | None = "latest") -> RunData:
    """The run ``ref`` (an id, a tag, or "latest") of ``db``, read once."""
    run = db.resolve_run(ref)
    cells = db.cells(run.id, {c.name: c.host_cell for c in run.plan.cells})
    rows = _telemetry_rows(db, run.id)
    measurements = with_telemetry(db.measurements(run.id), rows)
    by_id = {m.id: m for m in measurements}
    series = tuple(Series(r.source, r.series, by_id[r.measurement_id].key if r.measurement_id in by_id else None) for r in rows)
    return RunData(run=run, cells=tuple(cells),
                   measurements=tuple(measurements + shared_raw_rows(cells, measurements)),
                   crypto=tuple(db.crypto(run.id)), boots=tuple(db.boots(run.id)), series=series)


def _telemetry_rows(db: ResultsDB, run_id: int) -> list[SeriesRecord]:
    try:
        return db.series(run_id)
    except Exception as exc:  # an old database without the table, or an unreadable series: nothing sampled
        logging.getLogger(__name__).debug("no telemetry: %s", exc)
        return []


def with_telemetry(measurements: Sequence[Measurement], rows: Sequence[SeriesRecord]) -> list[Measurement]:
    """The measurements, each with a sampler's series among ``rows`` as a new record with its
    ``telemetry``: the means of :func:`vmbench.telemetry.sampler.summary` (device MB/s read and
    written, CPU busy and idle %; with ZFS the pool's MB/s, the ARC hit ratio and size, the
    scrub state, zfs_txg_timeout, whichever side recorded them; for a guest run sampled on the
    host too, the host's device MB/s and CPU); a guest measurement with a :data:`QEMU_CPU` row
    with it, as stored, as ``qemu_cpu`` (the last, should there be two)."""
    by_m: dict[int, dict[str, Any]] = {}
    cpu: dict[int, dict] = {}
    for r in rows:
        if r.measurement_id is None:
            continue
        if r.source in SAMPLED:
            by_m.setdefault(r.measurement_id, {})[r.source] = r.series
        elif r.source == QEMU_CPU and isinstance(r.series, dict):
            cpu[r.measurement_id] = r.series
    out = []
    for m in measurements:
        got, qemu = by_m.get(m.id), cpu.get(m.id)
        summary = _summary(got) if got else None
        out.append(replace(m, telemetry=summary or m.telemetry, qemu_cpu=qemu or m.qemu_cpu) if summary or qemu else m)
    return out


def _summary(got: dict[str, Any]) -> Telemetry | None:
    return Telemetry.from_summary(telemetry.summary_of(got))


def shared_raw_rows(cells: Sequence[CellRecord], measurements: Sequence[Measurement]) -> list[Measurement]:
    """Cells of one boot share the VM, so its raw disk is measured once, in the first of
    them; the others show those same rows (marked) in the report."""
    out = []
    names = {c.name for c in cells}
    for cell in cells:
        source = cell.raw_measured_in
        if not source or source == cell.name or source not in names:
            continue
        for m in measurements:
            if m.cell == source and m.layer == "raw" and m.side == "guest":
                out.append(replace(m, cell=cell.name, cell_id=cell.id, shared_from=source))
    return out
