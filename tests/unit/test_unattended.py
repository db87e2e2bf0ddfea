"""Unattended runs: two runs at once on one results database (two processes, each a whole run
against the fake hypervisor) are both stored whole; ``vmbench run --quiet``'s exit status
says whether a run regressed against the scenario's earlier runs or targets."""

from __future__ import annotations

import multiprocessing
import sqlite3
import textwrap
from pathlib import Path

from tests.fakes import FakeDriver
from tests.unit.conftest import fresh_state
from vmbench.cli.unattended import REGRESSION, quiet_summary
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario

SCENARIO = """
name: timer
storage: {scratch_size: 256M}
vm: {cache: none}
vary: {cache: [writeback]}
repeats: 3
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: j2, rw: read, bs: 1M, size: 16M, runtime: 1s, ramp: 0s}
"""


class Jitter:
    """A fake fio figure per call: ``level`` with a little spread over the repeats."""

    def __init__(self, level: float) -> None:
        self.level, self.n = level, 0

    def __call__(self, argv: list[str]) -> float:
        self.n += 1
        return self.level * (1.0 + 0.01 * (self.n % 3))


def one_run(db_path: str, state_root: str, level: float = 1000.0, text: str = SCENARIO) -> tuple[int, str]:
    db = ResultsDB(db_path)
    try:
        driver = FakeDriver(fio_iops=Jitter(level))
        driver.host.fio_iops = Jitter(40000.0)
        out = Runner(parse_scenario(textwrap.dedent(text), "t.yaml"), db, RecordingProgress(), driver=driver,
                     state=StatePaths(Path(state_root))).run()
        return out.run_id, out.status
    finally:
        db.close()


def test_two_runs_at_once_on_one_database_are_both_stored(tmp_path, monkeypatch, template):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        got = pool.starmap(one_run, [(str(db_path), str(state.root))] * 2)
    assert sorted(status for _, status in got) == ["ok", "ok"] and len({rid for rid, _ in got}) == 2
    db = ResultsDB(db_path, create=False)
    try:
        assert db.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert db.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        counts = [len(db.rows("measurements", rid)) for rid, _ in got]
        assert counts[0] == counts[1] > 0  # each run whole: the same plan, every measurement stored
        assert {r.status for r in db.runs()} == {"ok"}
    finally:
        db.close()
    with sqlite3.connect(db_path) as conn:  # a plain reader sees the same
        assert conn.execute("SELECT count(*) FROM runs").fetchone()[0] == 2


def test_quiet_exit_status_tells_a_timer_whether_it_regressed(tmp_path, monkeypatch, template, capsys):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    ids = [one_run(str(db_path), str(state.root), level)[0] for level in (1000.0, 1005.0, 1002.0)]
    db = ResultsDB(db_path, create=False)
    try:
        assert quiet_summary(db, ids[-1], "t", "ok", "timer", str(db_path)) == 0
        out = capsys.readouterr().out
        assert "history: 3 comparable run(s) of timer in this database; no step worse at this run" in out
        assert out.rstrip().endswith("no regression")
        slow = one_run(str(db_path), str(state.root), 500.0)[0]
        assert quiet_summary(db, slow, "t", "ok", "timer", str(db_path)) == REGRESSION
        out = capsys.readouterr().out
        assert "REGRESSION (" in out and "j1 · guest · cell base" in out and "STEP at #4" in out and "slower" in out
        # a target missed is a regression too, with or without a step
        targets = SCENARIO + "targets:\n  - {job: j1, min_iops: 100000}\n"
        missed = one_run(str(db_path), str(state.root), 1000.0, targets)[0]
        assert quiet_summary(db, missed, "t", "ok", "timer", str(db_path)) == REGRESSION
        assert "target IOPS >= 100000 for j1 at raw: FAIL" in capsys.readouterr().out
    finally:
        db.close()
