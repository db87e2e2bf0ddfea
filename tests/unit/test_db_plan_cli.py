"""Results database versioning, planning (boots = distinct VM configurations), CLI errors."""

import sqlite3
import textwrap
from pathlib import Path

import pytest

from vmbench.cli.main import main
from vmbench.errors import ResultsError
from vmbench.run.plan import estimate, make_plan
from vmbench.results.db import SCHEMA_VERSION, ResultsDB
from vmbench.scenario import parse_scenario
from vmbench.results.runrow import RunRow

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

SCENARIO = """
name: p
vm: {cache: none}
cells:
  - {name: a, stacks: []}
  - {name: b, cache: writeback, stacks: []}
  - {name: c, stacks: [s]}
  - {name: d, bus: virtio-scsi}
stacks:
  - {name: s, layers: [partition, ext4]}
jobs:
  - {name: j1, rw: randread, bs: 4k, runtime: 5s, ramp: 1s}
  - {name: j2, rw: write, bs: 1M, runtime: 5s, ramp: 1s}
"""


def test_plan_groups_cells_by_vm_configuration():
    s = parse_scenario(textwrap.dedent(SCENARIO), "p.yaml")
    plan = make_plan(s)
    assert [[c.name for c in b.cells] for b in plan.boots] == [["a", "c"], ["b"], ["d"]]
    ms = plan.guest_measurements()
    assert [(x.cell, x.layer) for x in ms if x.job == "j1"] == [
        ("a", "raw"), ("c", "partition"), ("c", "partition+ext4"), ("b", "raw"),  # c shares a's VM and raw disk
        ("d", "raw"), ("d", "partition"), ("d", "partition+ext4")]  # d names no stacks: it gets all of them
    summary = plan.summary()
    assert len(summary["boots"]) == 3 and summary["guest_measurements"] == 14 and summary["host_measurements"] == 2
    assert summary["repeats"] == 1 and summary["repeat_policy"] == {"min": 1, "max": 1, "until_cv": None}
    est = estimate(plan, "tcg")
    assert est.total > est.boots > 0 and est.accelerator == "tcg"
    assert estimate(plan, "kvm").total < est.total


def test_db_roundtrip_latest_and_unknown(tmp_path):
    db = ResultsDB(tmp_path / "r.db")
    rid = db.start_run(RunRow.starting(tag="r00000001", scenario_name="p", scenario_path="p.yaml", scenario_text="x", plan={"jobs": []}, version="0"))
    assert db.resolve_run("latest").id == rid and db.resolve_run("r00000001").id == rid and db.resolve_run(str(rid)).id == rid
    db.finish_run(rid, "ok")
    assert db.resolve_run(None).status == "ok"
    with pytest.raises(ResultsError, match="no run '42'"):
        db.resolve_run("42")


def test_db_refuses_other_schema_versions(tmp_path):
    path = tmp_path / "old.db"
    ResultsDB(path).close()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(ResultsError, match=f"schema version {SCHEMA_VERSION + 1}; this vmbench reads version {SCHEMA_VERSION} only"):
        ResultsDB(path)
    other = tmp_path / "other.db"
    sqlite3.connect(other).execute("CREATE TABLE x (a)").connection.commit()
    with pytest.raises(ResultsError, match="not a vmbench results database"):
        ResultsDB(other)


def test_cli_bad_scenario_is_a_message_not_a_traceback(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text("jobs:\n  - name: x\n    rw: randwrite\n    bs: 4k\nvm:\n  cache: writebak\n")
    assert main(["plan", str(p)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {p}:6: vm.cache: 'writebak' is not one of:")
    assert "Traceback" not in err
    assert main(["run", str(p), "--db", str(tmp_path / "x.db")]) == 2


def test_cli_report_without_db(tmp_path, capsys):
    assert main(["report", "--db", str(tmp_path / "none.db")]) == 5
    assert "no results database" in capsys.readouterr().err
    ResultsDB(tmp_path / "empty.db").close()
    assert main(["report", "--db", str(tmp_path / "empty.db")]) == 5
    assert "no runs in" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path / "empty.db"), "--format", "xml"]) == 2
    assert "--format: 'xml' is not one of: table, markdown, csv, json" in capsys.readouterr().err


def test_cli_plan_prints_boots_and_estimate(capsys):
    assert main(["plan", str(SCENARIOS / "quick.yaml"), "--accel", "tcg"]) == 0
    out = capsys.readouterr().out
    assert "VMs: 1, boots: 1, cells: 1, guest fio runs: 6, host fio runs: 6" in out  # 3 repeats: a verdict
    assert "estimated duration:" in out


def test_cli_plan_lists_the_load_steps_of_a_noisy_neighbour(capsys):
    assert main(["plan", str(SCENARIOS / "noisy-neighbour.yaml"), "--accel", "tcg"]) == 0
    out = capsys.readouterr().out
    lines = [l.split() for l in out.splitlines()]
    assert ["1", "1", "alone", "1", "1", "victim", "-", "1", "volume(s)"] in lines
    assert ["1", "2", "busy", "3", "1", "victim,", "2", "aggressor", "-", "3", "volume(s)"] in lines
    assert ["1", "3", "limited", "3", "1", "victim,", "2", "aggressor", "aggressor:", "iops_wr=300", "3", "volume(s)"] in lines
    assert "each step's VMs boot 2 at a time and start each job together" in out
    assert "VMs: 7, boots: 7, cells: 1, guest fio runs: 21, host fio runs: 21" in out


def test_plan_says_how_the_cache_buster_was_sized(tmp_path, capsys):
    p = tmp_path / "b.yaml"
    p.write_text("name: b\nvm: {memory: 1G}\nstorage: {type: zfs, dataset: rpool/vmbench, scratch_size: 20G}\n"
                 "jobs:\n  - {profile: cache-buster, runtime: 5s}\n")
    assert main(["plan", str(p), "--accel", "tcg"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # wrapped to 120 columns
    assert ("cache-buster: working set 4 x max(largest VM's memory 1g, ARC c_max not stated) = 4g; "
            "on ZFS, state the host's ARC c_max as storage.arc_max") in out
    p.write_text(p.read_text().replace("scratch_size: 20G", "scratch_size: 20G, arc_max: 2G"))
    assert main(["plan", str(p), "--accel", "tcg"]) == 0
    assert "cache-buster: working set 4 x max(largest VM's memory 1g, ARC c_max 2g) = 8g\n" in capsys.readouterr().out


@pytest.mark.parametrize("invalid, last", [
    (["baseline", "vm:cache=writeback"], "finished: no cell measured: all 2 were invalid (a setting did not take effect)"),
    (["vm:cache=writeback"], "finished: ok"),
], ids=["all", "one"])
def test_a_run_whose_cells_were_invalid_says_so_and_exits_6(invalid, last, tmp_path, capsys, monkeypatch):
    """(issue 39) every cell invalid (x86-64-v2-AES under TCG: no pclmulqdq for LUKS): the last
    line does not say "finished: ok"; either way the cells are named and the exit code is 6."""
    import vmbench.cli.run as runner_mod
    from vmbench.run.session import RunOutcome

    class Ran:
        tag = "r0a1b2c3d"

        def __init__(self, *a, **kw) -> None:
            pass

        def run(self) -> RunOutcome:
            return RunOutcome(1, self.tag, "ok", invalid_cells=list(invalid))

    monkeypatch.setattr(runner_mod, "Runner", Ran)
    p = tmp_path / "two.yaml"
    p.write_text("name: two\nvary: {cache: [writeback]}\njobs:\n  - {name: j, rw: randwrite, bs: 4k}\n")
    assert main(["run", str(p), "--db", str(tmp_path / "x.db")]) == 6
    err = capsys.readouterr().err
    assert f"run 1 (r0a1b2c3d) {last}; results in" in err, err
    assert f"{len(invalid)} cell(s) not measured because a setting did not take effect: {', '.join(invalid)}" in err


def test_results_default_to_the_clone_or_the_users_data_directory(tmp_path, monkeypatch):
    """(issue 39) in a clone its results/; installed (no setup.cfg beside the package), the XDG
    data directory: never the installation's directory (site-packages/results)."""
    from vmbench import paths

    monkeypatch.delenv("VMBENCH_DB", raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert paths.in_clone() and paths.default_db_path() == paths.REPO_ROOT / "results" / "vmbench.db"
    site = tmp_path / "site-packages"
    monkeypatch.setattr(paths, "REPO_ROOT", site)
    assert not paths.in_clone()
    assert paths.default_db_path() == tmp_path / "home" / ".local" / "share" / "vmbench" / "vmbench.db"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert paths.default_db_path() == tmp_path / "data" / "vmbench" / "vmbench.db"
    monkeypatch.setenv("XDG_DATA_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert paths.default_db_path() == tmp_path / "home" / ".local" / "share" / "vmbench" / "vmbench.db"
    monkeypatch.setenv("VMBENCH_DB", str(tmp_path / "mine.db"))
    assert paths.default_db_path() == tmp_path / "mine.db"
    assert paths.recipes_dir() == paths.PACKAGE_DIR / "images" / "recipes" and (paths.recipes_dir() / "debian12" / "recipe.yaml").is_file()
