"""A stored run -> plain values: the report's one read of the results database.

:func:`load_run` reads everything the report, its tables, plots and the HTML page need, once,
into a :class:`RunData`; nothing after it touches the database.  The flow is one way:
``load_run`` (here) -> rows (:mod:`.rows`) -> tables (:mod:`.tables`, :mod:`.hostonly`,
put together by :mod:`.build`) -> text, JSON (:mod:`.render`) or HTML (:mod:`.html`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from ..results.db import ResultsDB, RunRow, lazy_json
from ..results.key import MeasurementKey
from ..telemetry import sampler as telemetry
from .bins import StoredBins
from .kind import RunKind
from .stored_plan import LoadPlan, StoredPlan, read_plan

#: the samplers' series (fio's own are "fio-*"): the side fio ran on, the pool's (always the host's)
#: and, for a guest run, the host's own device and CPU
SAMPLED = ("disk", "cpu", "zpool", "arc", "host-disk", "host-cpu", "ceph", telemetry.VOLUME_SOURCE)
#: a guest measurement's QEMU process sampled on the host: one row of CPU per I/O
#: (:meth:`vmbench.telemetry.qemu_cpu.CpuPerIo.to_json`), not a time series
QEMU_CPU = "qemu-cpu"


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

    ``cells`` in scenario order (journey steps), each with ``host_cell`` (the cell its host
    reference is stored under, from the plan); ``measurements`` in the order stored, each with
    its cell's name as ``cell`` and, where a sampler recorded series, their means as
    ``telemetry``; then, for cells that share a boot, the raw-disk rows measured once in the
    first of them, copied under each other cell and marked ``shared_from``.  A guest measurement
    whose QEMU process was sampled carries its row as ``qemu_cpu`` (:attr:`qemu_cpu` by key).
    ``series``: every time series of fio's logs and the samplers, in the order stored.
    """

    run: RunRow
    scenario_text: str
    cells: tuple[dict, ...]
    measurements: tuple[dict, ...]
    crypto: tuple[dict, ...] = ()
    boots: tuple[dict, ...] = ()
    series: tuple[Series, ...] = ()

    @functools.cached_property
    def plan(self) -> StoredPlan:
        """The run's plan as stored (read once; the run's kind is decided there)."""
        return read_plan(self.run.plan_json)

    @property
    def kind(self) -> RunKind:
        """What kind of run this is."""
        return self.plan.kind

    @property
    def load(self) -> LoadPlan | None:
        """The run's load section (scaling steps or neighbour phases); None for one VM per cell."""
        return self.plan.load

    @property
    def environment(self) -> dict:
        return self.run.environment

    @property
    def jobs(self) -> list[str]:
        """The plan's job names, in order."""
        return self.plan.job_names

    @property
    def targets(self) -> list[dict]:
        return [dict(t) for t in self.plan.targets]

    @property
    def valid_cells(self) -> list[dict]:
        return [c for c in self.cells if c["valid"]]

    @property
    def qemu_cpu(self) -> dict[MeasurementKey, dict]:
        """Each measurement's qemu-cpu row (CpuPerIo.to_json()) by its key, the measurements
        as stored (no shared raw-disk copies)."""
        return {MeasurementKey.of(m): m["qemu_cpu"] for m in self.measured if isinstance(m.get("qemu_cpu"), dict)}

    @property
    def measured(self) -> list[dict]:
        """The measurements as stored (without the shared raw-disk copies)."""
        return [m for m in self.measurements if not m.get("shared_from")]


def load_run(db: ResultsDB, ref: str | int | None = "latest") -> RunData:
    """The run ``ref`` (an id, a tag, or "latest") of ``db``, read once."""
    run = db.resolve_run(ref)
    host_cells = {c.name: c.host_cell for c in read_plan(run.plan_json).cells}
    cells = [dict(c, host_cell=host_cells.get(c["name"]))  # which host reference each cell is compared with
             for c in sorted(db.rows("cells", run.id), key=lambda c: c["seq"])]  # scenario order, not boot order
    names = {c["id"]: c["name"] for c in cells}
    # fio's whole output (most of the stored bytes) decoded only where a table reads it; each
    # histogram made once, for every table and plot
    decoders = {"fio_json": lazy_json, "clat_bins_json": StoredBins.of}
    measurements = [dict(m, cell=names.get(m["cell_id"])) for m in db.rows("measurements", run.id, decoders=decoders)]
    rows = _telemetry_rows(db, run.id)
    summarize_telemetry(measurements, rows)
    by_id = {m["id"]: m for m in measurements}
    series = tuple(Series(r["source"], r.get("series"), _key(by_id.get(r.get("measurement_id")))) for r in rows)
    return RunData(run=run, scenario_text=db.scenario_text(run.id), cells=tuple(cells),
                   measurements=tuple(measurements + shared_raw_rows(cells, measurements)),
                   crypto=tuple(db.rows("crypto", run.id)), boots=tuple(db.rows("boots", run.id)), series=series)



def _key(m: Mapping | None) -> MeasurementKey | None:
    return None if m is None else MeasurementKey.of(m)


def _telemetry_rows(db: ResultsDB, run_id: int) -> list[dict]:
    try:
        return db.telemetry(run_id)
    except Exception as exc:  # an old database without the table, or an unreadable series: nothing sampled
        logging.getLogger(__name__).debug("no telemetry: %s", exc)
        return []


def attach_telemetry(db: ResultsDB, run_id: int, measurements: list[dict]) -> None:
    """:func:`summarize_telemetry` with the run's telemetry rows read from ``db``."""
    summarize_telemetry(measurements, _telemetry_rows(db, run_id))


def summarize_telemetry(measurements: Sequence[dict], rows: Sequence[Mapping]) -> None:
    """Each measurement with a sampler's series among ``rows`` gets ``telemetry``: the means
    of :func:`vmbench.telemetry.sampler.summary` (device MB/s read and written, CPU busy and
    idle %; with ZFS the pool's MB/s, the ARC hit ratio and size, the scrub state,
    zfs_txg_timeout, whichever side recorded them; for a guest run sampled on the host too,
    the host's device MB/s and CPU: ``host_dev_read_mb_s``, ``host_dev_write_mb_s``,
    ``host_cpu_busy``, ``host_cpu_idle``).  A guest measurement with a :data:`QEMU_CPU` row
    gets it, as stored, as ``qemu_cpu`` (the last, should there be two)."""
    by_m: dict[int, dict[str, Any]] = {}
    cpu: dict[int, dict] = {}
    for r in rows:
        if r.get("measurement_id") is not None and r.get("source") in SAMPLED:
            by_m.setdefault(r["measurement_id"], {})[r["source"]] = r.get("series")
        elif r.get("measurement_id") is not None and r.get("source") == QEMU_CPU and isinstance(r.get("series"), dict):
            cpu[r["measurement_id"]] = r["series"]
    for m in measurements:
        if m["id"] in cpu:
            m["qemu_cpu"] = cpu[m["id"]]
        got = by_m.get(m["id"])
        if got:
            summ = telemetry.summary(got.get("disk"), got.get("cpu"), got.get("zpool"), got.get("arc"),
                                     host_disk=got.get("host-disk"), host_cpu=got.get("host-cpu"), ceph=got.get("ceph"),
                                     zfs_volume=got.get(telemetry.VOLUME_SOURCE))
            if summ:
                m["telemetry"] = summ


def shared_raw_rows(cells: Sequence[dict], measurements: Sequence[dict]) -> list[dict]:
    """Cells of one boot share the VM, so its raw disk is measured once, in the first of
    them; the others show those same rows (marked) in the report."""
    out = []
    by_name = {c["name"]: c for c in cells}
    for cell in cells:
        source = (cell.get("evidence") or {}).get("raw_measured_in")
        if not source or source == cell["name"] or source not in by_name:
            continue
        for m in measurements:
            if m["cell"] == source and m["layer"] == "raw" and m["side"] == "guest":
                out.append(dict(m, cell=cell["name"], cell_id=cell.get("id"), shared_from=source))
    return out

