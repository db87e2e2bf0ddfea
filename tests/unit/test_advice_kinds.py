"""vmbench advise on the other kinds of stored runs: ZFS host-only, CPU per I/O, many VMs
(scaling, noisy neighbours), the real older result files (results-v1.db, results-v2.db: one
repeat, cache=writeback), and the command line."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.test_advice import WRITE, RunBuilder, one_factor
from tests.unit.test_cpu_report import BASE as CPU_BASE, IOTHREAD as CPU_IOTHREAD, new_run as cpu_run
from tests.unit.test_load_report import neighbours, scaling  # noqa: F401  (fixtures)
from vmbench.advice.model import Goal, GoalMetric, Risk
from vmbench.advice.rank import advise
from vmbench.cli.main import main
from vmbench.advice.table import report_with_advice
from vmbench.report.load import load_run
from vmbench.results.db import ResultsDB
from vmbench.results.records import Settings

DATA = Path(__file__).resolve().parents[1] / "data"


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def test_zfs_host_only_variants(db):
    b = RunBuilder(db, host_only=True, extra={"storage": "zvols under tank/vmbench, scratch 1G"}, env={
        "hostname": "h", "accelerator": "none", "storage_type": "zfs", "host_fio": "fio-3.33"})
    b.cell("volblocksize=16k", volblocksize="16k").cell("volblocksize=4k", volblocksize="4k")
    b.cell("sync=disabled", volblocksize="16k", sync="disabled")
    b.host(WRITE, [1000, 1010, 990], cell="volblocksize=16k", pool_write=4.0)
    b.host(WRITE, [1500, 1510, 1490], cell="volblocksize=4k", pool_write=1.0)
    b.host(WRITE, [3000, 3010, 2990], cell="sync=disabled", pool_write=4.0)
    data = b.save()
    a = advise(data)
    assert [r.cell for r in a.recommendations] == ["volblocksize=4k", "sync=disabled"]
    top = a.top()
    assert top.cell == "volblocksize=4k" and [str(c) for c in top.changes] == ["volblocksize: 16k -> 4k"]
    assert any(e.startswith("pool write amplification 4.00x -> 1.00x") for e in top.evidence)
    risky = a.recommendations[1]
    assert risky.risks == (Risk.ZFS_SYNC_DISABLED,) and not risky.allowed
    assert "host only: fio ran on the host, no VM (no accelerator)" in a.notes
    assert not any("iothread" in s or "aio" in s for s in a.not_tried)  # no VM: no VM settings to try
    assert any("compression lz4" in s for s in a.not_tried)
    assert "zfs" in {s.kind for s in a.apply} and any("4k" in s.text for s in a.apply)
    assert advise(data, allow=frozenset({Risk.ZFS_SYNC_DISABLED})).top().cell == "sync=disabled"
    header, tables = report_with_advice(data)
    assert [t.name for t in tables][-2:] == ["advice", "advice-next"]


def test_cpu_per_io_goal(db):
    rid = cpu_run(db, {"baseline": CPU_BASE, "iothread=on": CPU_IOTHREAD})
    cell = next(c for c in db.cells(rid) if c.name == "iothread=on")
    db.update_cell(replace(cell, settings=Settings({"cache": "none", "memory_mib": 1024, "iothread": True})))
    data = load_run(db, rid)
    a = advise(data)
    assert Goal("4k-randread", GoalMetric.CPU_PER_IO, "the run sampled QEMU's CPU") in a.goals
    top = a.top(Goal("4k-randread", GoalMetric.CPU_PER_IO, "the run sampled QEMU's CPU"))
    assert top is not None and top.cell == "iothread=on" and top.unit == "µs/IO (QEMU)"
    assert top.delta.verdict == "cheaper" and top.value < top.reference_value
    assert any(e.startswith("main loop: ") and e.endswith("cheaper") for e in top.evidence)
    assert any(s.startswith("cheapest cell iothread=on: QEMU ") and "the host's own fio spends" in s for s in a.standing)
    header, tables = report_with_advice(data)
    rec = next(r for r in tables[-2].records if r["goal"] == "4k-randread:cpu-per-io")
    assert rec["status"] == "recommended" and " µs/IO [" in rec["delta_text"] and rec["delta_text"].endswith("cheaper")


def test_scaling_run_recommends_nothing_and_says_where_each_step_stands(scaling):
    db, rid = scaling
    a = advise(load_run(db, rid))
    assert a.recommendations == () and a.top() is None
    assert any(s.startswith("3 VMs: aggregate 2,000 IOPS") and "the knee" in s for s in a.standing)
    assert any("of the host's" in s for s in a.standing)
    assert any(n.startswith("load: scaling: 1 VM, 2 VMs, 3 VMs at once") for n in a.notes)
    assert any("nothing to recommend" in n for n in a.notes)


def test_neighbours_limit_on_the_aggressors_lowers_the_victims_p99(neighbours):
    db, rid = neighbours
    a = advise(load_run(db, rid))
    # the goals are the targets' (min_iops 500, max_p99_ms 2 on the victim's job)
    assert [str(g) for g in a.goals] == ["4k-randread:iops", "4k-randread:p99"]
    top = a.top(a.goals[1])
    assert top is not None and top.cell == "baseline phase limited" and top.reference == "baseline phase busy"
    assert [str(c) for c in top.changes] == ["aggressor iops_wr: default -> 200"]
    assert top.delta.verdict == "lower p99, better" and top.repeats == 3
    assert any("recovered under limited" in e for e in top.evidence)
    assert any(e.startswith("aggressor VM 1 iops_wr: achieved") for e in top.evidence)
    assert a.apply == () and any("no command" in n or "no VM or storage setting" in n for n in a.notes)
    assert any(s.startswith("busy: victim 4k-randread p99") for s in a.standing)


@pytest.mark.parametrize("name", ["results-v1.db", "results-v2.db"])
def test_real_older_runs_one_repeat_nothing_judged(tmp_path, name):
    path = tmp_path / name
    shutil.copyfile(DATA / name, path)
    db = ResultsDB(path)
    a = advise(load_run(db, "latest"))
    assert a.top() is None and a.recommendations == ()
    wb = [r for r in a.unsupported if r.cell == "cache=writeback"]
    assert wb and all(r.risks == (Risk.CACHE_WRITEBACK,) and r.delta.why == "fewer than 3 repeats" for r in wb)
    assert "goal 4k-randwrite:iops: nothing could be judged (fewer than 3 repeats)" in a.notes
    assert any(n.startswith("guests ran under tcg") for n in a.notes)
    # even with the risk allowed, one repeat proves nothing
    assert advise(load_run(db, "latest"), allow=frozenset({Risk.CACHE_WRITEBACK})).top() is None
    header, tables = report_with_advice(load_run(db, "latest"))
    assert tables[-1].records[0] == {"what": "change next", "text": "not judged yet (fewer than 3 repeats): add `repeats: 3` "
                                                                    "to the scenario and run it again"}
    db.close()


def test_cli_advise(tmp_path, capsys):
    path = tmp_path / "r.db"
    db = ResultsDB(path)
    one_factor(db)
    db.close()
    assert main(["advise", "latest", "--db", str(path), "--format", "json", "--vmid", "101"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["top"]["change"] == "iothread: off -> on" and doc["top"]["status"] == "recommended"
    assert doc["recommendations"][1]["risks"] == "cache-unsafe" and "cache-unsafe" in doc["risks"]
    assert any(s["kind"] == "proxmox" and "101" in s["text"] for s in doc["apply"])
    assert main(["advise", "--db", str(path), "--allow", "cache-unsafe", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["top"]["change"] == "cache: none -> unsafe"
    assert main(["advise", "--db", str(path), "--goal", "4k-randwrite:p99"]) == 0
    out = capsys.readouterr().out
    assert "accelerator:" in out and "load:" in out and "4k-randwrite:p99" in out and "recommended" in out
    for argv, message in ((["--goal", "4k-randwrite:fast"], "--goal 4k-randwrite:fast: 'fast' is not one of: iops"),
                          (["--goal", "nojob:iops"], "run 1 has no job 'nojob'"),
                          (["--allow", "unsafe"], "--allow: 'unsafe' is not one of: cache-unsafe"),
                          (["--format", "csv"], "--format csv")):
        assert main(["advise", "--db", str(path)] + argv) == 2
        assert message in capsys.readouterr().err


def test_cpu_per_io_on_a_cpu_bound_host_is_called_suspect():
    from vmbench.advice.measured import busy_note

    assert busy_note({"baseline": 57.0, "aio=io_uring": 80.0}) == []
    assert busy_note({"baseline": None, "aio=io_uring": None}) == []
    assert busy_note({"baseline": 57.0, "aio=io_uring": 99.6}) == [
        "the host's CPUs were nearly all busy while it ran (baseline 57%, aio=io_uring 100% busy): QEMU's threads competed "
        "for CPU, with each other or with other work, so its CPU per I/O is suspect; measure again on a host with CPU to spare"]


def test_a_suspect_improvement_is_never_the_recommendation():
    from dataclasses import replace

    from vmbench.advice.model import Advice, Recommendation
    from vmbench.advice.table import status
    from vmbench.report.stats import Delta

    goal = Goal("j", GoalMetric.CPU_PER_IO)
    rec = Recommendation(goal, "j", "aio=io_uring", "baseline", (), 1.0, 2.0, Delta(-1.0, -1.5, -0.5, "cheaper", None), 3, True)
    bad = replace(rec, suspect="the host's CPUs were nearly all busy")
    assert Advice("1", (goal,), (bad,), (), (), ()).top() is None
    assert Advice("1", (goal,), (bad, rec), (), (), ()).top() is rec
    assert status(bad) == "improves, but suspect: the host's CPUs were nearly all busy"
