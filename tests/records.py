"""Synthetic stored rows for tests, as the records a reader makes of them
(:mod:`vmbench.results.records`): a row written as the database's columns (``X_json`` as text
or decoded, or ``X`` decoded) becomes a record."""

from __future__ import annotations

from typing import Any, Mapping

from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.results.records import BootRecord, CellRecord, CryptoRecord, JobParams, Measurement, SeriesRecord, Telemetry
from vmbench.scenario.model import Target


def as_measurement(row: Mapping[str, Any] | None = None, **columns: Any) -> Measurement:
    return Measurement.from_row({**(row or {}), **columns})


def as_cell(row: Mapping[str, Any] | None = None, **columns: Any) -> CellRecord:
    return CellRecord.from_row({**(row or {}), **columns})


def as_crypto(row: Mapping[str, Any] | None = None, **columns: Any) -> CryptoRecord:
    return CryptoRecord.from_row({**(row or {}), **columns})


def as_boot(row: Mapping[str, Any] | None = None, **columns: Any) -> BootRecord:
    return BootRecord.from_row({**(row or {}), **columns})


def as_series(row: Mapping[str, Any] | None = None, **columns: Any) -> SeriesRecord:
    return SeriesRecord.from_row({**(row or {}), **columns})


def store(db: ResultsDB, run_id: int, key: MeasurementKey, series: Mapping[str, Any] | None = None, **columns: Any) -> int:
    """One measurement row of ``key`` with ``columns``, stored as the runner stores it; its id."""
    m = as_measurement(columns, side=key.side, cell=key.cell, stack=key.stack, layer=key.layer, job=key.job, repeat=key.repeat,
                    vm=key.vm, load_step=key.load_step)
    return db.add_measurements(run_id, [(m, dict(series or {}))])[0]


def as_measurements(rows: Any) -> list[Measurement]:
    """Each row as a :class:`Measurement` (a record stays as it is)."""
    return [r if isinstance(r, Measurement) else Measurement.from_row(r) for r in rows]


def as_cells(rows: Any) -> list[CellRecord]:
    """Each cell as a :class:`CellRecord` (a record stays as it is)."""
    return [c if isinstance(c, CellRecord) else CellRecord.from_row(c) for c in rows]


def as_targets(rows: Any) -> list[Target]:
    """Each stored target as the scenario's :class:`Target`."""
    return [t if isinstance(t, Target) else Target(**{k: t.get(k) for k in Target.__dataclass_fields__}) for t in rows]


def as_environment(env: Mapping[str, Any] | None) -> Environment:
    return Environment.from_row(env)


def as_telemetry(summary: Mapping[str, Any] | None) -> Telemetry | None:
    return Telemetry.from_summary(summary)


def as_params(params: Mapping[str, Any] | None) -> JobParams:
    return JobParams.from_row(params)


def as_boots(rows: Any) -> list[BootRecord]:
    return [b if isinstance(b, BootRecord) else BootRecord.from_row(b) for b in rows]
