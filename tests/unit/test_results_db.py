"""Results schema v2: upgrading a real v1 database in place, refusing what we cannot read,
and the queries resumable runs need.

``tests/data/results-v1.db`` was written by vmbench 800d332 (schema v1) running a two-cell,
one-stack scenario under TCG; ``results-v1-report.json`` is that release's
``vmbench report latest --format json`` of it.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.records import as_boot, as_cell, as_crypto, as_measurement, as_series, store
from vmbench.cli.main import main
from vmbench.errors import ResultsError
from vmbench.advice.table import report_with_advice
from vmbench.report.load import load_run
from vmbench.report.render import Format, render
from vmbench.results.db import SCHEMA_VERSION, ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.results.runrow import RunRow

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "results-v1.db"

# SQLite's backup API writes its own file-change counter, schema cookie and
# version-valid-for number into the copy's header; every other byte is the original's.
_HEADER_COUNTERS = [(24, 28), (40, 44), (92, 96)]


def _version(path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def _columns(path) -> dict:
    conn = sqlite3.connect(path)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'")]
        return {t: [tuple(r) for r in conn.execute(f"PRAGMA table_info({t})")] for t in tables}
    finally:
        conn.close()


def _masked(data: bytes) -> bytes:
    buf = bytearray(data)
    for start, end in _HEADER_COUNTERS:
        buf[start:end] = bytes(end - start)
    return bytes(buf)


def _same_as_v1_report(doc: dict, v1: dict) -> None:
    """The report of the v1 fixture is the v1 release's, record for record, on every key the
    v1 release printed.  Later releases added keys (intervals and verdicts of each delta,
    why each group stopped repeating, each table's admissibility facts and what is not
    stated) and notes (how intervals are made, why there is no verdict): those are checked
    by test_report.py, here only that they come in addition."""
    assert doc["run"] == v1["run"]
    assert [t["name"] for t in doc["tables"]][-2:] == ["advice", "advice-next"]  # added after the v1 release's tables
    doc = {**doc, "tables": [t for t in doc["tables"] if not t["name"].startswith("advice")]}
    assert [(t["name"], t["title"]) for t in doc["tables"]] == [(t["name"], t["title"]) for t in v1["tables"]]
    for table, old in zip(doc["tables"], v1["tables"]):
        assert [{k: r[k] for k in o} for r, o in zip(table["records"], old["records"])] == old["records"]
        assert len(table["records"]) == len(old["records"])
        assert table["notes"][:len(old["notes"])] == old["notes"]


def _dump(path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture
def v1(tmp_path, data_dir):
    path = tmp_path / "results.db"
    shutil.copyfile(data_dir / "results-v1.db", path)
    assert _version(path) == "1"
    return path


def test_v1_database_is_upgraded_in_place_with_a_backup(v1, data_dir, tmp_path):
    original = (data_dir / "results-v1.db").read_bytes()
    db = ResultsDB(v1, create=False)
    assert db.migrated_from == 1 and SCHEMA_VERSION == 5
    assert db.backup_path == tmp_path / "results.db.v1-backup"
    assert str(db.backup_path) in db.migration_note() and "from results schema version 1 to 5" in db.migration_note()
    # the backup is the v1 database as it was
    assert _version(db.backup_path) == "1"
    backup = db.backup_path.read_bytes()
    assert len(backup) == len(original) and _masked(backup) == _masked(original)
    assert _dump(db.backup_path) == _dump(data_dir / "results-v1.db")
    assert (data_dir / "results-v1.db").read_bytes() == original  # the fixture itself untouched
    # the upgraded file is current with exactly a fresh database's columns
    assert _version(v1) == "5"
    ResultsDB(tmp_path / "fresh.db").close()
    assert _columns(v1) == _columns(tmp_path / "fresh.db")
    # the same report, record for record, as the v1 release printed
    header, tables = report_with_advice(load_run(db, "latest"))
    _same_as_v1_report(json.loads(render(tables, Format.JSON, header)), json.loads((data_dir / "results-v1-report.json").read_text()))
    # guest measurements know their boot (their cell's); host rows have none; all attempt 1
    run = db.resolve_run("latest")
    assert run.attempts == 1 and run.resumed_at is None
    cells = {c["id"]: c for c in db.rows("cells", run.id)}
    rows = db.rows("measurements", run.id)
    guest = [m for m in rows if m["side"] == "guest"]
    assert guest and all(m["boot_id"] == cells[m["cell_id"]]["boot_id"] is not None for m in guest)
    assert all(m["boot_id"] is None for m in rows if m["side"] == "host")
    assert {m["attempt"] for m in rows} == {1} and {b["attempt"] for b in db.rows("boots", run.id)} == {1}
    assert len({m["boot_id"] for m in guest}) == 2  # two cells, two boots
    db.close()
    # opening it again: current, nothing migrated, no second backup
    again = ResultsDB(v1, create=False)
    assert again.migrated_from is None and again.backup_path is None and again.migration_note() is None
    again.close()
    assert sorted(p.name for p in tmp_path.iterdir() if "backup" in p.name) == ["results.db.v1-backup"]


def test_cli_report_on_a_v1_database(v1, data_dir, capsys):
    assert main(["report", "latest", "--db", str(v1), "--format", "json"]) == 0
    out = capsys.readouterr().out
    _same_as_v1_report(json.loads(out), json.loads((data_dir / "results-v1-report.json").read_text()))
    assert _version(v1) == "5"


def test_v2_database_is_upgraded_to_v5_and_reads_the_same(tmp_path, data_dir):
    """``results-v2.db`` is the v1 fixture as vmbench 1c2e6a1 (schema v2) upgraded it: every
    measurement becomes VM 0 at load step 0, with no role and no window, on the run's one host
    (named: the plan's boots name it)."""
    path = tmp_path / "results.db"
    shutil.copyfile(data_dir / "results-v2.db", path)
    assert _version(path) == "2"
    db = ResultsDB(path, create=False)
    assert db.migrated_from == 2 and db.backup_path == tmp_path / "results.db.v2-backup"
    assert _version(path) == "5" and _version(db.backup_path) == "2"
    ResultsDB(tmp_path / "fresh.db").close()
    assert _columns(path) == _columns(tmp_path / "fresh.db")
    run = db.resolve_run("latest")
    rows = db.rows("measurements", run.id)
    assert rows and {(m["vm"], m["load_step"], m["role"], json.dumps(m["load"]), m["host"]) for m in rows} == {(0, 0, None, "{}", "localhost")}
    assert {(b["vm"], b["load_step"]) for b in db.rows("boots", run.id)} == {(0, 0)}
    header, tables = report_with_advice(load_run(db, "latest"))
    _same_as_v1_report(json.loads(render(tables, Format.JSON, header)), json.loads((data_dir / "results-v1-report.json").read_text()))
    db.close()


def test_a_v4_database_gets_every_measurements_host(tmp_path):
    """Schema 4 stored '' as every row's host: a load row gets the host its load JSON names, any
    other its run's one host (the plan's boots, else the SSH host, else this machine)."""
    path = tmp_path / "v4.db"
    db = ResultsDB(path)
    base = dict(cell_id=None, depth=0, job_params_json={}, job_hash="h", sync=False, target="t", argv_json=[], settings_json={},
                accelerator="host", started_at="x", iops=1.0, bw_bytes=1.0, clat_bins_json={}, fio_json="{}")
    many = db.start_run(RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="s.yaml", scenario_text="", plan={"boots": [{"host": "a"}]},
                                        version="x"))
    remote = db.start_run(RunRow.starting(tag="r00000002", scenario_name="s", scenario_path="s.yaml", scenario_text="", plan={}, version="x"))
    db.set_environment(remote, Environment({"ssh_host": "pve1.example"}))
    store(db, many, MeasurementKey("guest", "c", None, "raw", "j", 1, vm=1, load_step=1), **base, load_json={"host": "b"})
    store(db, many, MeasurementKey("host", "c", None, "host", "j", 1), **base)
    store(db, remote, MeasurementKey("host", None, None, "host", "j", 1), **base, host="kept")
    store(db, remote, MeasurementKey("host", None, None, "host", "j", 2), **base)
    db.close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE measurements SET host = '' WHERE host != 'kept'")
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    db = ResultsDB(path)
    assert db.migrated_from == 4 and _version(path) == "5"
    assert [m["host"] for m in db.rows("measurements", many)] == ["b", "a"]
    assert [m["host"] for m in db.rows("measurements", remote)] == ["kept", "pve1.example"]
    db.close()


def test_existing_backups_are_never_overwritten(v1, tmp_path):
    (tmp_path / "results.db.v1-backup").write_bytes(b"an older backup")
    (tmp_path / "results.db.v1-backup.1").write_bytes(b"another one")
    db = ResultsDB(v1)
    assert db.backup_path == tmp_path / "results.db.v1-backup.2" and _version(db.backup_path) == "1"
    db.close()
    assert (tmp_path / "results.db.v1-backup").read_bytes() == b"an older backup"
    assert (tmp_path / "results.db.v1-backup.1").read_bytes() == b"another one"


def test_wal_mode_v1_database(v1):
    conn = sqlite3.connect(v1)
    assert conn.execute("PRAGMA journal_mode=WAL").fetchone()[0] == "wal"
    conn.close()
    db = ResultsDB(v1)
    assert db.migrated_from == 1 and _version(db.backup_path) == "1" and _version(v1) == "5"
    db.close()


def test_a_failed_upgrade_leaves_the_database_unchanged(v1, tmp_path):
    conn = sqlite3.connect(v1)
    conn.execute("DROP TABLE crypto")  # a damaged v1 database: ALTER TABLE crypto fails mid-upgrade
    conn.commit()
    conn.close()
    before = _dump(v1)
    with pytest.raises(ResultsError, match=r"cannot upgrade results database .*results\.db: no such table: crypto; it is unchanged"):
        ResultsDB(v1)
    assert _dump(v1) == before and _version(v1) == "1"
    assert not [p for p in tmp_path.iterdir() if "backup" in p.name]  # the copy is removed: nothing changed


def test_newer_version_is_refused(tmp_path):
    path = tmp_path / "future.db"
    ResultsDB(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(ResultsError) as err:
        ResultsDB(path, create=False)
    assert str(err.value) == f"{path} has results schema version 99; this vmbench reads version {SCHEMA_VERSION} only"
    assert "newer vmbench" in err.value.hint and "--db" in err.value.hint
    assert path.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["future.db"]


SECRET = "hunter2-do-not-print"


def _refused(path) -> ResultsError:
    before = path.read_bytes()
    with pytest.raises(ResultsError) as err:
        ResultsDB(path, create=False)
    text = f"{err.value} {err.value.hint}"
    assert str(path) in text and "not a vmbench results database" in text and SECRET not in text
    assert path.read_bytes() == before
    return err.value


def test_files_that_are_not_vmbench_databases_are_refused_cleanly(tmp_path, capsys):
    junk = tmp_path / "junk.db"
    junk.write_bytes(f"{SECRET}\n".encode() * 300 + bytes(range(256)) * 16)
    assert "not an SQLite database" in str(_refused(junk))
    foreign = tmp_path / "foreign.db"
    conn = sqlite3.connect(foreign)
    conn.execute(f"CREATE TABLE notes (body TEXT DEFAULT '{SECRET}')")
    conn.execute("INSERT INTO notes VALUES (?)", (SECRET,))
    conn.commit()
    conn.close()
    assert "no vmbench meta table" in str(_refused(foreign))
    odd = tmp_path / "odd.db"
    conn = sqlite3.connect(odd)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (SECRET,))
    conn.commit()
    conn.close()
    assert "no valid schema version" in str(_refused(odd))
    # and through the CLI: a message, no traceback
    assert main(["report", "--db", str(junk)]) == ResultsError.exit_code
    err = capsys.readouterr().err
    assert "not a vmbench results database" in err and "Traceback" not in err and SECRET not in err


def _measure(db: ResultsDB, run_id: int, **values) -> int:
    row = dict(cell_id=None, side="host", stack=None, layer="host", depth=0, job="4k", job_params_json={"bs": "4k"},
               job_hash="h", sync=False, repeat=1, target="/t", argv_json=["fio"], settings_json={}, accelerator="host",
               started_at="2026-01-01T00:00:00", iops=1.0, bw_bytes=4096.0, p50_ns=1, p95_ns=2, p99_ns=3, p999_ns=4,
               clat_bins_json={}, fio_json="{}")
    row.update(values)
    return db.add_measurements(run_id, [(as_measurement(row), {})])[0]


def test_queries_for_resumable_runs(tmp_path):
    db = ResultsDB(tmp_path / "r.db")
    assert db.migrated_from is None and db.backup_path is None
    rid = db.start_run(RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    other = db.start_run(RunRow.starting(tag="r00000002", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    boot = db.add_boot(as_boot(run_id=rid, seq=1, vm_key="k", settings_json={"cache": "none"}, domain_name="d", accelerator="tcg"))  # v1 keywords
    cell = db.add_cell(as_cell(run_id=rid, boot_id=boot, seq=1, name="baseline", settings_json={"cache": "none"}, changed_json={},
                       stacks_json=["ext4"], valid=True))
    _measure(db, rid)
    _measure(db, rid, cell_id=cell, side="guest", layer="raw", accelerator="tcg")
    _measure(db, rid, cell_id=cell, side="guest", stack="ext4", layer="ext4", depth=1, repeat=2, boot_id=boot, attempt=2)
    _measure(db, other, job="elsewhere")
    rows = db.rows("measurements", rid)
    assert [(m["boot_id"], m["attempt"]) for m in rows] == [(None, 1), (None, 1), (boot, 2)]
    assert db.rows("boots", rid)[0]["attempt"] == 1
    assert db.measurement_keys(rid) == {
        MeasurementKey("host", None, None, "host", "4k", 1),
        MeasurementKey("guest", "baseline", None, "raw", "4k", 1),
        MeasurementKey("guest", "baseline", "ext4", "ext4", "4k", 2),
    }
    assert db.measurement_keys(999) == set()

    found = db.cell_by_name(rid, "baseline")
    assert found is not None and found.id == cell and found.settings == {"cache": "none"} and found.stacks == ("ext4",)
    assert db.cell_by_name(rid, "missing") is None and db.cell_by_name(other, "baseline") is None

    assert db.crypto_cpus(rid) == set() and not db.has_host_crypto(rid)
    crypto = dict(cipher="aes-xts", key_bits=512, encrypt_mib_s=100.0, decrypt_mib_s=100.0)
    db.add_crypto(as_crypto(run_id=rid, side="guest", boot_id=boot, cpu="kvm64", aes_flag=False, **crypto))  # v1 keywords
    db.add_crypto(as_crypto(run_id=rid, side="guest", boot_id=boot, cpu="Haswell", aes_flag=True, cipher="aes-xts", key_bits=256, error="failed"))
    db.add_crypto(as_crypto(run_id=other, side="host", boot_id=None, cpu="host", aes_flag=True, **crypto))
    assert db.crypto_cpus(rid) == {"kvm64", "Haswell"} and not db.has_host_crypto(rid) and db.has_host_crypto(other)
    db.add_crypto(as_crypto(run_id=rid, side="host", boot_id=None, cpu="host", aes_flag=True, attempt=2, **crypto))
    assert db.has_host_crypto(rid) and db.crypto_cpus(rid) == {"kvm64", "Haswell"}
    assert [c["attempt"] for c in db.rows("crypto", rid)] == [1, 1, 2]

    db.finish_run(rid, "failed", "boom")
    first = db.resolve_run(rid)
    assert first.attempts == 1 and first.resumed_at is None and first.finished_at and first.error == "boom"
    assert db.start_attempt(rid) == 2
    run = db.resolve_run(rid)
    assert (run.attempts, run.status, run.error, run.finished_at) == (2, "running", None, None)
    assert run.resumed_at and run.started_at == first.started_at
    assert db.start_attempt(rid) == 3 and db.resolve_run(other).attempts == 1
    with pytest.raises(ResultsError, match="no run 999"):
        db.start_attempt(999)
    assert db.rows("telemetry", rid) == []
    db.close()


# ---- a measurement's identity ------------------------------------------------------------------


def test_measurement_key_is_one_value_for_plan_database_and_report(tmp_path):
    from dataclasses import FrozenInstanceError

    from vmbench.report.rows import group
    from vmbench.run.plan import Step

    step = Step(side="guest", boot=1, cell="baseline", stack="ext4", layer="ext4", depth=1, job="4k", repeat=2)
    key = step.key()
    assert key == MeasurementKey("guest", "baseline", "ext4", "ext4", "4k", 2) and (key.vm, key.load_step) == (0, 0)
    assert step.group() == key.group() == MeasurementKey("guest", "baseline", "ext4", "ext4", "4k")
    assert key.group().repeat is None and key.group().with_repeat(2) == key
    with pytest.raises(FrozenInstanceError):
        key.repeat = 3  # type: ignore[misc]
    # stored as it is planned: the database gives back the plan's key and group
    db = ResultsDB(tmp_path / "r.db")
    rid = db.start_run(RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    boot = db.add_boot(as_boot(run_id=rid, seq=1, vm_key="k", settings_json={}, domain_name="d", accelerator="tcg"))
    cell = db.add_cell(as_cell(run_id=rid, boot_id=boot, seq=1, name="baseline", settings_json={}, changed_json={}, stacks_json=["ext4"], valid=True))
    row = dict(cell_id=cell, depth=1, job_params_json={}, job_hash="h", sync=False, target="/t", argv_json=["fio"],
               settings_json={}, accelerator="tcg", started_at="2026-01-01T00:00:00", iops=5.0, bw_bytes=1.0,
               clat_bins_json={}, fio_json="{}")
    store(db, rid, key, **row)
    assert db.measurement_keys(rid) == {key} and db.repeat_iops(rid) == {step.group(): {2: 5.0}}
    # a VM of a load step is its own measurement, with its VM and step stored
    vm1 = MeasurementKey("guest", "baseline", None, "raw", "4k", 1, vm=1, load_step=2)
    store(db, rid, vm1, **row)
    assert db.measurement_keys(rid) == {key, vm1}
    with pytest.raises(ValueError, match="one repeat"):
        store(db, rid, vm1.group(), **row)
    # the report groups stored rows by the same key, without the repeat
    stored = db.measurements(rid)
    assert list(group(stored)) == [key.group(), vm1.group()]
    assert MeasurementKey.of(dict(db.rows("measurements", rid)[0], cell="baseline")) == key == stored[0].key
    assert key.describe() == "4k ext4 (baseline, stack ext4)" and MeasurementKey("host", None, None, "host", "4k").describe() == "4k host"


def test_the_report_loads_the_run_once_into_plain_values(tmp_path):
    """load_run is the report's one read: the rows, the telemetry summaries and series, the
    scenario text; building the report and the page from it needs no database."""
    from vmbench.report.html import render_html
    from vmbench.report.load import RunData, load_run

    shutil.copy(FIXTURE, tmp_path / "r.db")
    db = ResultsDB(tmp_path / "r.db")
    first = db.rows("measurements", 1)[0]
    db.add_telemetry(as_series(run_id=1, measurement_id=first["id"], source="fio-iops", series={"t_s": [1.0], "values": [5.0], "unit": "IOPS"}))
    db.add_telemetry(as_series(run_id=1, measurement_id=first["id"], source="cpu", series={"t_s": [1.0], "idle": [40.0]}))
    data = load_run(db, "latest")
    text = db.conn.execute("SELECT scenario_text FROM runs WHERE id = 1").fetchone()[0]
    db.close()  # nothing below reads the database
    assert isinstance(data, RunData) and data.run.id == 1 and data.scenario_text == text
    assert [c.seq for c in data.cells] == sorted(c.seq for c in data.cells) and all(hasattr(c, "host_cell") for c in data.cells)
    assert all(m.cell == next((c.name for c in data.cells if c.id == m.cell_id), None) for m in data.measured)
    assert [s.source for s in data.series] == ["fio-iops", "cpu"]
    assert data.series[0].key == MeasurementKey.of(dict(first, cell=None))
    assert data.measurements[0].telemetry.cpu_idle == 40.0
    header, tables = report_with_advice(data)
    assert header["run"].startswith("1 (") and tables[0].name == "gaps"
    assert "fio-iops host: 1 point" in render_html(data)
