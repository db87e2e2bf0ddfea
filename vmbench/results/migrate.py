"""Schema versions of the results database: reading a file's version, upgrading it in place.

``MIGRATIONS[n]`` turns a version-``n`` database into version ``n + 1``.  Opening an older
database first copies it next to itself (``<file>.v<n>-backup``, through SQLite's backup
API, never over an existing backup), then runs every step up to the current version in one
transaction and checks the result (version number and columns equal to a fresh database's)
before committing.  A failure leaves the database as it was.  A newer version, or a file
that is not a vmbench database, is refused; its contents are never quoted.

This module does not import ``db`` (``db`` imports it).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Callable

from ..errors import ResultsError

_NEWER_HINT = "use a newer vmbench to read it, or another --db for this one"


def migrate_1_to_2(conn: sqlite3.Connection) -> None:
    """the attempts of resumed runs, each measurement's boot, telemetry series.

    Resumable runs (attempt numbers), the boot of each measurement, a telemetry table."""
    for statement in (
        "ALTER TABLE runs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE runs ADD COLUMN resumed_at TEXT",
        "ALTER TABLE boots ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE measurements ADD COLUMN boot_id INTEGER REFERENCES boots(id)",
        "ALTER TABLE measurements ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
        "ALTER TABLE crypto ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1",
        """CREATE TABLE telemetry (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    measurement_id INTEGER REFERENCES measurements(id),
    source TEXT NOT NULL,
    series_json TEXT NOT NULL
)""",
        "CREATE INDEX telemetry_run ON telemetry(run_id)",
        # guest rows were measured in their cell's boot; host rows have none
        """UPDATE measurements SET boot_id = (SELECT cells.boot_id FROM cells WHERE cells.id = measurements.cell_id)
           WHERE side = 'guest' AND cell_id IS NOT NULL""",
    ):
        conn.execute(statement)


def migrate_2_to_3(conn: sqlite3.Connection) -> None:
    """each measurement's VM and load step (many VMs at once).

    Every stored measurement and boot was VM 0 at load step 0."""
    for statement in (
        "ALTER TABLE boots ADD COLUMN load_step INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE boots ADD COLUMN vm INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE measurements ADD COLUMN vm INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE measurements ADD COLUMN load_step INTEGER NOT NULL DEFAULT 0",
        "ALTER TABLE measurements ADD COLUMN role TEXT",
        "ALTER TABLE measurements ADD COLUMN load_json TEXT NOT NULL DEFAULT '{}'",
    ):
        conn.execute(statement)


def migrate_3_to_4(conn: sqlite3.Connection) -> None:
    """each measurement's host (runs across several hosts).

    Every stored measurement ran on its run's one host ('')."""
    conn.execute("ALTER TABLE measurements ADD COLUMN host TEXT NOT NULL DEFAULT ''")


def migrate_4_to_5(conn: sqlite3.Connection) -> None:
    """the host named on every measurement.

    Version 4 stored '' on every row: a load step's row gets the host its load JSON names (a run across several hosts), any other its run's one host
    (the plan's boots name it; else the SSH host it was reached as; else this machine)."""
    hosts = {run_id: _run_host(plan, env) for run_id, plan, env in conn.execute("SELECT id, plan_json, environment_json FROM runs")}
    rows = conn.execute("SELECT id, run_id, load_json FROM measurements WHERE host = ''").fetchall()
    for row_id, run_id, load in rows:
        host = str(_json(load).get("host") or "") or hosts.get(run_id) or "localhost"
        conn.execute("UPDATE measurements SET host = ? WHERE id = ?", (host, row_id))


def _run_host(plan_text: str, env_text: str) -> str:
    boots = _json(plan_text).get("boots") or []
    first = boots[0] if boots and isinstance(boots[0], dict) else {}
    return str(first.get("host") or _json(env_text).get("ssh_host") or "localhost")


def _json(text: str | None) -> dict:
    try:
        got = json.loads(text or "{}")
    except ValueError:
        return {}
    return got if isinstance(got, dict) else {}


MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: migrate_1_to_2, 2: migrate_2_to_3, 3: migrate_3_to_4,
                                                               4: migrate_4_to_5}


def describe(old: int, new: int) -> str:
    """What upgrading from version ``old`` to ``new`` adds, in words (the first line of each
    step's docstring)."""
    return "; ".join((MIGRATIONS[v].__doc__ or "").strip().split("\n")[0].rstrip(".") for v in range(old, new))


def read_version(conn: sqlite3.Connection, path: Path) -> int | None:
    """The file's schema version; None for an empty database (no tables yet)."""
    not_ours = f"{path} is not a vmbench results database"
    try:
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not tables:
            return None
        if "meta" not in tables:
            raise ResultsError(not_ours + " (it has no vmbench meta table)", "pass another --db")
        row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.DatabaseError as exc:
        # sqlite's messages for these ("file is not a database", ...) do not quote the file
        raise ResultsError(f"{not_ours} (SQLite cannot read it: {_reason(exc)})", "pass another --db") from None
    try:
        version = int(str(row[0]).strip()) if row else None
    except ValueError:
        version = None
    if version is None or version < 1:
        raise ResultsError(not_ours + " (its meta table has no valid schema version)", "pass another --db")
    return version


def check_supported(path: Path, version: int, current: int) -> None:
    """Refuse versions this vmbench cannot read or upgrade."""
    if version > current:
        raise ResultsError(
            f"{path} has results schema version {version}; this vmbench reads version {current} only", _NEWER_HINT)
    missing = [v for v in range(version, current) if v not in MIGRATIONS]
    if missing:
        raise ResultsError(
            f"{path} has results schema version {version}; this vmbench reads version {current} only "
            f"and cannot upgrade from version {missing[0]}",
            "use the vmbench release that wrote it, or another --db")


def upgrade(conn: sqlite3.Connection, path: Path, current: int, fresh_schema: str) -> tuple[int, Path] | None:
    """Bring the database at ``path`` (open on ``conn``) to version ``current``.

    Returns (the version it had, the backup's path), or None when it was already current
    (another process may have upgraded it in the meantime).  ``fresh_schema`` is the DDL of
    a new database; the upgraded tables must have exactly its columns.
    """
    saved = conn.isolation_level
    conn.isolation_level = None  # explicit BEGIN/COMMIT: DDL and data in one transaction
    backup: Path | None = None
    try:
        try:
            conn.execute("BEGIN IMMEDIATE")  # a write lock: one process upgrades, the others wait
        except sqlite3.Error as exc:
            raise ResultsError(f"cannot upgrade results database {path}: {_reason(exc)}") from None
        try:
            version = read_version(conn, path)
            if version is None or version == current:
                conn.execute("ROLLBACK")
                return None
            check_supported(path, version, current)
            backup = _backup(path, version)
            for step in range(version, current):
                MIGRATIONS[step](conn)
            conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(current),))
            _check(conn, path, current, fresh_schema)
            conn.execute("COMMIT")
            return version, backup
        except BaseException as exc:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
                if backup is not None:  # the database is unchanged: the copy is not needed
                    backup.unlink(missing_ok=True)
                    backup = None
            if isinstance(exc, sqlite3.Error):
                raise ResultsError(f"cannot upgrade results database {path}: {_reason(exc, detail=True)}; it is unchanged"
                                   + (f" (backup at {backup})" if backup else "")) from None
            raise
    finally:
        conn.isolation_level = saved


def _backup(path: Path, version: int) -> Path:
    """A consistent copy of the database next to it, under a name not yet taken."""
    base = path.with_name(f"{path.name}.v{version}-backup")
    candidates = [base] + [base.with_name(f"{base.name}.{i}") for i in range(1, 1000)]
    for candidate in candidates:
        try:
            fd = os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)  # claim the name atomically
        except FileExistsError:
            continue
        except OSError as exc:
            raise ResultsError(f"cannot back up {path} before upgrading it: {candidate}: {exc.strerror}",
                               "the database's directory must be writable") from None
        os.close(fd)
        try:
            # from a second connection: SQLite refuses to back up from one holding the write
            # lock; that lock lets readers in, and nothing has been written yet
            source = sqlite3.connect(str(path), timeout=30)
            dest = sqlite3.connect(str(candidate))
            try:
                source.backup(dest)
            finally:
                dest.close()
                source.close()
        except sqlite3.Error as exc:
            candidate.unlink(missing_ok=True)
            raise ResultsError(f"cannot back up {path} to {candidate} before upgrading it: {_reason(exc)}") from None
        return candidate
    raise ResultsError(f"cannot back up {path}: {base} and 999 numbered backups exist", "remove old backups")


def _check(conn: sqlite3.Connection, path: Path, current: int, fresh_schema: str) -> None:
    """Inside the upgrade's transaction: the version is current and every table has the
    columns a fresh database has."""
    if read_version(conn, path) != current:
        raise ResultsError(f"upgrading {path} did not reach schema version {current}; it is unchanged")
    fresh = sqlite3.connect(":memory:")
    try:
        fresh.executescript(fresh_schema)
        expected = _columns(fresh)
    finally:
        fresh.close()
    got = _columns(conn)
    if got != expected:
        tables = sorted(t for t in expected.keys() | got.keys() if expected.get(t) != got.get(t))
        raise ResultsError(f"upgrading {path} to schema version {current} left tables {', '.join(tables)} "
                           "different from a new database's; it is unchanged (this is a vmbench bug)")


def _columns(conn: sqlite3.Connection) -> dict[str, list[tuple]]:
    """Per table: (name, type, not null, default, primary key) of each column, in order."""
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {t: [tuple(r)[1:] for r in conn.execute(f"PRAGMA table_info({t})")] for t in names}


_PLAIN = {"SQLITE_NOTADB": "not an SQLite database", "SQLITE_CORRUPT": "a damaged SQLite database"}
_SAFE = ("SQLITE_READONLY", "SQLITE_BUSY", "SQLITE_LOCKED", "SQLITE_FULL", "SQLITE_IOERR", "SQLITE_CANTOPEN", "SQLITE_PERM")


def _reason(exc: sqlite3.Error, *, detail: bool = False) -> str:
    """What went wrong, in words that never quote the file: sqlite's own message only for
    errors about the file as a whole (read-only, locked, full ...), or with ``detail`` for
    statements of our own (a missing table or column)."""
    name = getattr(exc, "sqlite_errorname", None) or type(exc).__name__
    if name in _PLAIN:
        return _PLAIN[name]
    if detail or name.startswith(_SAFE):
        return str(exc)
    return name
