"""The results database (SQLite): runs, boots, cells, measurements, crypto benchmarks,
telemetry (time series, such as fio's IOPS and latency over a measurement).

One ``runs`` row per ``vmbench run``; one ``measurements`` row per
:class:`~vmbench.results.key.MeasurementKey` (side, cell, stack, layer, job, repeat; the
cell by its row id), keeping fio's raw json+ output.  A resumed run keeps
its row: ``runs.attempts`` counts its starts and every boot, measurement and crypto row
records the attempt that wrote it.  The schema carries a version: an older database is
upgraded in place after a backup copy (``migrate.py``); a newer one is refused rather than
misread.
"""

from __future__ import annotations

import gc
import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from ..errors import ResultsError
from . import migrate
from .environment import Environment
from .key import MeasurementKey
from .records import BootRecord, CellRecord, CryptoRecord, Measurement, SeriesRecord
from .runrow import RunRow, now

SCHEMA_VERSION = 5
#: how long a write waits for another process's transaction on the same file (ms)
BUSY_TIMEOUT_MS = 30_000

# Each version's new columns come last in their table, where the upgrade (ALTER TABLE) puts
# them, so fresh and upgraded databases have the same columns in the same order.  Version 3:
# many VMs at once (a measurement's VM within its load step, its role, its window).  Version 4:
# the host a measurement ran on.  Version 5: no new column; every row names its host (version 4
# left it '' on every row: migrate_4_to_5 fills it in).
_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    tag TEXT NOT NULL UNIQUE,
    scenario_name TEXT NOT NULL,
    scenario_path TEXT NOT NULL,
    scenario_text TEXT NOT NULL,
    plan_json TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    vmbench_version TEXT NOT NULL,
    environment_json TEXT NOT NULL DEFAULT '{}',
    attempts INTEGER NOT NULL DEFAULT 1,
    resumed_at TEXT
);
CREATE TABLE boots (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    vm_key TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    domain_name TEXT NOT NULL,
    accelerator TEXT NOT NULL,
    domain_xml TEXT,
    live_xml TEXT,
    qemu_cmdline_json TEXT,
    guest_json TEXT NOT NULL DEFAULT '{}',
    boot_seconds REAL,
    started_at TEXT NOT NULL,
    attempt INTEGER NOT NULL DEFAULT 1,
    load_step INTEGER NOT NULL DEFAULT 0,
    vm INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE cells (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    boot_id INTEGER REFERENCES boots(id),
    seq INTEGER NOT NULL,
    name TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    changed_json TEXT NOT NULL,
    stacks_json TEXT NOT NULL,
    valid INTEGER NOT NULL,
    problems_json TEXT NOT NULL DEFAULT '[]',
    evidence_json TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE measurements (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    cell_id INTEGER REFERENCES cells(id),
    side TEXT NOT NULL,
    stack TEXT,
    layer TEXT NOT NULL,
    depth INTEGER NOT NULL,
    job TEXT NOT NULL,
    job_params_json TEXT NOT NULL,
    job_hash TEXT NOT NULL,
    sync INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    target TEXT NOT NULL,
    argv_json TEXT NOT NULL,
    settings_json TEXT NOT NULL,
    accelerator TEXT NOT NULL,
    started_at TEXT NOT NULL,
    iops REAL NOT NULL,
    bw_bytes REAL NOT NULL,
    p50_ns INTEGER,
    p95_ns INTEGER,
    p99_ns INTEGER,
    p999_ns INTEGER,
    clat_bins_json TEXT NOT NULL,
    fio_json TEXT NOT NULL,
    boot_id INTEGER REFERENCES boots(id),
    attempt INTEGER NOT NULL DEFAULT 1,
    vm INTEGER NOT NULL DEFAULT 0,
    load_step INTEGER NOT NULL DEFAULT 0,
    role TEXT,
    load_json TEXT NOT NULL DEFAULT '{}',
    host TEXT NOT NULL DEFAULT ''
);
CREATE INDEX measurements_run ON measurements(run_id);
CREATE TABLE crypto (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    side TEXT NOT NULL,
    boot_id INTEGER REFERENCES boots(id),
    cpu TEXT NOT NULL,
    aes_flag INTEGER,
    cipher TEXT NOT NULL,
    key_bits INTEGER NOT NULL,
    encrypt_mib_s REAL,
    decrypt_mib_s REAL,
    error TEXT,
    attempt INTEGER NOT NULL DEFAULT 1
);
CREATE TABLE telemetry (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    measurement_id INTEGER REFERENCES measurements(id),
    source TEXT NOT NULL,
    series_json TEXT NOT NULL
);
CREATE INDEX telemetry_run ON telemetry(run_id);
"""


class ResultsDB:
    """A results database file; created on first write, upgraded if older, refused if newer.

    After opening, ``migrated_from`` is the version the file had when this open upgraded it
    (else None) and ``backup_path`` the copy made before upgrading (else None).
    """

    migrated_from: int | None = None
    backup_path: Path | None = None

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        self.existed = self.path.exists()  # a file there before this open is only read or upgraded, never made a database
        if not self.existed:
            if not create:
                raise ResultsError(f"no results database at {self.path}", "run `vmbench run SCENARIO` first, or pass --db")
            self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30)
        except sqlite3.Error as exc:
            raise ResultsError(f"cannot open results database {self.path}: {exc}") from None
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._init()
        self._concurrent()

    def _concurrent(self) -> None:
        """Two runs may share the file (a weekly timer and a run by hand): write-ahead logging,
        so that readers never block the writer and a reader never sees half a write, and a
        busy timeout, so that a writer waits for the other's short transaction instead of
        failing (set before anything is read).  Switched after an upgrade, so the backup is
        the file as it was; a file that cannot switch (read-only) keeps its journal."""
        try:
            self.conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.Error:
            pass

    def _init(self) -> None:
        try:
            version = migrate.read_version(self.conn, self.path)
            if version is None and self.existed:  # an empty file (0 bytes) or an SQLite file without tables
                raise ResultsError(f"{self.path} is not a vmbench results database (it is empty); vmbench leaves it as it is",
                                   "pass --db the path of a vmbench database, or of a file that does not exist yet "
                                   "(vmbench creates it)")
            if version is None:
                with self.conn:
                    self.conn.executescript(_SCHEMA)
                    self.conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
                return
            migrate.check_supported(self.path, version, SCHEMA_VERSION)
            if version < SCHEMA_VERSION:
                done = migrate.upgrade(self.conn, self.path, SCHEMA_VERSION, _SCHEMA)
                if done:
                    self.migrated_from, self.backup_path = done
        except BaseException:
            self.conn.close()
            raise

    def migration_note(self) -> str | None:
        """One line for the user when opening upgraded the file (what it added), else None."""
        if self.migrated_from is None:
            return None
        return (f"migrated {self.path} from results schema version {self.migrated_from} to {SCHEMA_VERSION}, adding "
                f"{migrate.describe(self.migrated_from, SCHEMA_VERSION)}; its runs are unchanged; the file as it was "
                f"is kept at {self.backup_path}")

    def close(self) -> None:
        self.conn.close()

    # ---- writing -------------------------------------------------------------------------

    def _insert(self, table: str, values: dict[str, Any]) -> int:
        with self.conn:
            return self._insert_row(table, values)

    def _update(self, table: str, row_id: int, values: dict[str, Any]) -> None:
        sets = ", ".join(f"{k} = ?" for k in values)
        with self.conn:
            self.conn.execute(f"UPDATE {table} SET {sets} WHERE id = ?", [_cell(v) for v in values.values()] + [row_id])

    # A row is written from its record (``to_row``: the columns the record defines); an
    # update writes the whole record again, under its ``id``, or the columns the record names.

    def start_run(self, run: RunRow) -> int:
        """A run's row (:meth:`RunRow.starting`); its id."""
        return self._insert("runs", run.to_row())

    def set_environment(self, run_id: int, environment: Environment) -> None:
        self._update("runs", run_id, RunRow.environment_columns(environment))

    def finish_run(self, run_id: int, status: str, error: str | None = None) -> None:
        self._update("runs", run_id, RunRow.end_columns(status, error))

    def add_boot(self, boot: BootRecord) -> int:
        return self._insert("boots", boot.to_row())

    def update_boot(self, boot: BootRecord) -> None:
        self._update("boots", boot.id, boot.to_row())

    def add_cell(self, cell: CellRecord) -> int:
        return self._insert("cells", cell.to_row())

    def update_cell(self, cell: CellRecord) -> None:
        assert cell.id is not None, cell.name
        self._update("cells", cell.id, cell.to_row())

    def add_measurements(self, run_id: int, rows: Sequence[tuple[Measurement, Mapping[str, Any]]]) -> list[int]:
        """Measurements and their telemetry series ({source: series}), in one transaction: a
        fio step's one, or a load step's, stored when all of it finished (each row as
        :meth:`Measurement.to_row` writes it, under ``run_id``; each series as
        :meth:`SeriesRecord.to_row`)."""
        ids = []
        with self.conn:
            for m, series in rows:
                if not m.repeat:
                    raise ValueError(f"cannot store {m.key}: a measurement is one repeat")
                m_id = self._insert_row("measurements", dict(m.to_row(), run_id=run_id))
                ids.append(m_id)
                for source, data in series.items():
                    self._insert_row("telemetry", SeriesRecord(source, data, measurement_id=m_id, run_id=run_id).to_row())
        return ids

    def _insert_row(self, table: str, values: Mapping[str, Any]) -> int:
        """One INSERT, inside the caller's transaction."""
        cur = self.conn.execute(f"INSERT INTO {table} ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
                                [_cell(v) for v in values.values()])
        assert cur.lastrowid is not None  # an INSERT into a rowid table
        return cur.lastrowid

    def add_crypto(self, crypto: CryptoRecord) -> int:
        return self._insert("crypto", crypto.to_row())

    def add_telemetry(self, series: SeriesRecord) -> int:
        """One time series (``{"t_s": [...], "values": [...], "unit": ...}``) from its source
        (e.g. "fio-iops"), of a measurement (or of none: the whole run)."""
        if not series.source:
            raise ValueError("a telemetry row needs a source")
        return self._insert("telemetry", series.to_row())

    def start_attempt(self, run_id: int) -> int:
        """A resumed run starts again: its attempt count goes up, it is running again
        (error and finish time cleared) since now; returns the new attempt number."""
        with self.conn:
            cur = self.conn.execute(
                "UPDATE runs SET attempts = attempts + 1, status = 'running', error = NULL, finished_at = NULL, "
                "resumed_at = ? WHERE id = ?", (now(), run_id))
            if cur.rowcount != 1:
                raise ResultsError(f"no run {run_id} in {self.path}", "`vmbench runs` lists them")
            row = self.conn.execute("SELECT attempts FROM runs WHERE id = ?", (run_id,)).fetchone()
        return int(row[0])

    # ---- reading -------------------------------------------------------------------------

    def resolve_run(self, ref: str | int | None) -> RunRow:
        """A run by id, by tag, or ``latest`` (the default)."""
        if ref in (None, "latest"):
            row = self.conn.execute("SELECT * FROM runs ORDER BY id DESC LIMIT 1").fetchone()
            if row is None:
                raise ResultsError(f"no runs in {self.path}", "run `vmbench run SCENARIO` first")
        else:
            text = str(ref)
            if text.isdigit():
                row = self.conn.execute("SELECT * FROM runs WHERE id = ?", (int(text),)).fetchone()
            else:
                row = self.conn.execute("SELECT * FROM runs WHERE tag = ?", (text,)).fetchone()
            if row is None:
                raise ResultsError(f"no run {text!r} in {self.path}", "`vmbench runs` lists them")
        return RunRow.from_row(row)

    def runs(self) -> list[RunRow]:
        return [RunRow.from_row(r) for r in self.conn.execute("SELECT * FROM runs ORDER BY id")]

    def rows(self, table: str, run_id: int) -> list[dict]:
        """A run's rows of ``table`` in the order stored, as dicts by column name, each
        ``X_json`` column decoded as ``X`` (the typed readers below make records of them)."""
        if table not in ("boots", "cells", "measurements", "crypto", "telemetry"):
            raise ValueError(table)
        return [_decoded(r) for r in self._read(f"SELECT * FROM {table} WHERE run_id = ? ORDER BY id", (run_id,))]

    def _read(self, sql: str, params: tuple) -> Iterator[dict]:
        """The rows of a query as dicts by column name, as stored (``X_json`` columns as text).
        The collector is paused while they are made: they form no cycles, and it walked a run's
        every row again and again (a fifth of the time to read 1,000 cells)."""
        cur = self.conn.cursor()
        cur.row_factory = None  # plain tuples: a dict from them is made faster than from sqlite3.Row
        cur.execute(sql, params)
        names = [d[0] for d in cur.description]
        enabled = gc.isenabled()
        gc.disable()
        try:
            for values in cur:
                yield dict(zip(names, values))
        finally:
            if enabled:
                gc.enable()

    def measurements(self, run_id: int) -> list[Measurement]:
        """A run's measurements in the order stored, each with its cell's name."""
        return [Measurement.from_row(r) for r in self._read(
            "SELECT m.*, c.name AS cell FROM measurements m LEFT JOIN cells c ON c.id = m.cell_id "
            "WHERE m.run_id = ? ORDER BY m.id", (run_id,))]

    def cells(self, run_id: int, host_cells: Mapping[str, str | None] | None = None) -> list[CellRecord]:
        """A run's cells in scenario order (not boot order), each with the cell its host
        reference is stored under (``host_cells``, else the stored plan's)."""
        if host_cells is None:
            host_cells = {c.name: c.host_cell for c in self.resolve_run(run_id).plan.cells}
        rows = self._read("SELECT * FROM cells WHERE run_id = ? ORDER BY seq, id", (run_id,))
        return [CellRecord.from_row(r, host_cells.get(r["name"])) for r in rows]

    def boots(self, run_id: int) -> list[BootRecord]:
        return [BootRecord.from_row(r) for r in self._read("SELECT * FROM boots WHERE run_id = ? ORDER BY id", (run_id,))]

    def crypto(self, run_id: int) -> list[CryptoRecord]:
        return [CryptoRecord.from_row(r) for r in self._read("SELECT * FROM crypto WHERE run_id = ? ORDER BY id", (run_id,))]

    def series(self, run_id: int) -> list[SeriesRecord]:
        """A run's telemetry series in the order stored."""
        return [SeriesRecord.from_row(r) for r in self._read("SELECT * FROM telemetry WHERE run_id = ? ORDER BY id", (run_id,))]

    def measurement_keys(self, run_id: int) -> set[MeasurementKey]:
        """What a run has measured: the key of every stored measurement."""
        return {MeasurementKey.of(r) for r in self._keyed(run_id)}

    def repeat_iops(self, run_id: int) -> dict[MeasurementKey, dict[int, float]]:
        """Each stored repeat's IOPS: group key -> {repeat: IOPS}, the groups whose repeats an
        adaptive repeat policy compares."""
        out: dict[MeasurementKey, dict[int, float]] = {}
        for r in self._keyed(run_id):
            out.setdefault(MeasurementKey.of(r, repeat=False), {})[int(r["repeat"])] = float(r["iops"])
        return out

    def _keyed(self, run_id: int) -> list[dict]:
        """A run's measurements with what their keys are made of (the cell by name), in order."""
        return [dict(r) for r in self.conn.execute(
            "SELECT m.side, c.name AS cell, m.stack, m.layer, m.job, m.repeat, m.vm, m.load_step, m.iops FROM measurements m "
            "LEFT JOIN cells c ON c.id = m.cell_id WHERE m.run_id = ? ORDER BY m.id", (run_id,))]

    def telemetry(self, run_id: int) -> list[dict]:
        """A run's telemetry rows as stored (:meth:`rows`); :meth:`series` as records."""
        return self.rows("telemetry", run_id)

    def cell_by_name(self, run_id: int, name: str) -> CellRecord | None:
        """A run's cell by name (the first stored, should there be two)."""
        rows = list(self._read("SELECT * FROM cells WHERE run_id = ? AND name = ? ORDER BY id LIMIT 1", (run_id, name)))
        return CellRecord.from_row(rows[0]) if rows else None

    def crypto_cpus(self, run_id: int) -> set[str]:
        """CPU labels with guest crypto rows stored for a run (rows with an error included)."""
        return {r[0] for r in self.conn.execute("SELECT DISTINCT cpu FROM crypto WHERE run_id = ? AND side = 'guest'", (run_id,))}

    def has_host_crypto(self, run_id: int) -> bool:
        return self.conn.execute("SELECT 1 FROM crypto WHERE run_id = ? AND side = 'host' LIMIT 1", (run_id,)).fetchone() is not None


def _cell(value: Any) -> Any:
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, sort_keys=True, default=str)
    if isinstance(value, bool):
        return int(value)
    return value


def _decoded(row: dict) -> dict:
    """A stored row with each ``X_json`` column that holds text decoded as ``X`` (moved after
    the other columns, in column order)."""
    for column in [c for c in row if c.endswith("_json")]:
        if isinstance(row[column], str):
            row[column[:-5]] = json.loads(row.pop(column))
    return row
