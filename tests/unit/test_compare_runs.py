"""``vmbench compare``: runs side by side against a baseline run; what is not the same
experiment is refused with the difference named (pure function, then the command on copies
of the committed v1 database)."""

from __future__ import annotations

import argparse
import json
import shutil
import sqlite3
from dataclasses import replace

import pytest

from tests.records import as_cells, as_measurements
from vmbench.cli.compare import split_ref
from vmbench.cli.parsers import add_compare
from vmbench.errors import ResultsError, UsageError
from vmbench.report.render import Format, render
from vmbench.report.across_runs import HOST_IDENTITY_KEYS, compare_runs, host_differences, param_differences
from vmbench.results.db import ResultsDB, RunRow

ENV = {"hostname": "kvm1", "host_kernel": "6.1.0-50", "host_cpu": "AMD EPYC", "qemu_version": "7.2.22", "host_fio": "fio-3.33",
       "libvirt_uri": "qemu:///system", "pool": "vmbench"}
PARAMS = {"name": "4k-randwrite", "rw": "randwrite", "bs": 4096, "iodepth": 4, "size": 64 << 20, "direct": True, "runtime": 30.0, "ramp": 5.0}


def run(i: int, env: dict | None = None, plan: dict | None = None) -> RunRow:
    return RunRow(id=i, tag=f"r{i:08d}", scenario_name="s", scenario_path="s.yaml", status="ok", started_at=f"2026-01-0{i}",
                  finished_at=None, error=None, environment=dict(ENV, **(env or {})), plan_json=plan or {"repeats": 3})


def meas(side, cell, layer, values, *, stack=None, job="4k-randwrite", params=None, job_hash="h1", accelerator="kvm", depth=0,
         settings=None):
    return as_measurements(
        {"side": side, "cell_id": None if cell is None else {"base": 1, "wb": 2}[cell], "stack": stack, "layer": layer,
         "depth": depth, "job": job, "iops": v, "bw_bytes": v * 4096, "clat_bins": {"100000": 99, "900000": 1},
         "job_hash": job_hash, "job_params": dict(params or PARAMS), "sync": False, "repeat": r,
         "accelerator": "host" if side == "host" else accelerator, "settings": settings or {"cache": "none"}}
        for r, v in enumerate(values, 1))


CELLS = as_cells([{"id": 1, "name": "base", "valid": True}, {"id": 2, "name": "wb", "valid": True}])


def runset(host, guest, **kw):
    return meas("host", None, "host", host) + meas("guest", "base", "raw", guest, **kw)


def test_same_rows_side_by_side_with_delta_interval_and_verdict():
    a = (run(1), runset([40000.0, 41000.0, 39500.0], [8000.0, 8200.0, 7900.0]), CELLS)
    b = (run(2), runset([40100.0, 40900.0, 39800.0], [9000.0, 9400.0, 9100.0]), CELLS)
    (table,), refusals = compare_runs([a, b], 0)
    assert refusals == []
    host, guest = table.records
    assert (guest["side"], guest["cell"], guest["layer"], guest["job"]) == ("guest", "base", "raw", "4k-randwrite")
    assert guest["A_iops"] == 8000.0 and guest["B_iops"] == 9100.0 and guest["B_mb_s"] == pytest.approx(9100 * 4096 / 1e6)
    assert guest["A_p99_ms"] == 0.1 and guest["B_repeats"] == 3 and "A_vs_baseline" not in guest
    assert guest["B_vs_baseline"] == pytest.approx(9100 / 8000 - 1)
    assert guest["B_vs_baseline_low"] == pytest.approx(9000 / 8200 - 1) and guest["B_vs_baseline_high"] == pytest.approx(9400 / 7900 - 1)
    assert guest["B_vs_baseline_verdict"] == "faster" and host["B_vs_baseline_verdict"] == "within noise"
    text = render([table], Format.TABLE, wide=True)
    assert "B vs A" in text and "+13.7% [+9.8, +19.0] faster" in text and "IOPS A" in text and "p99 ms B" in text
    assert table.facts["hosts"].endswith("every run on this host") and table.facts["repeats"] == "A fixed 3 repeats, B fixed 3 repeats"


def test_baseline_with_several_runs():
    a = (run(1), runset([40000.0] * 3, [8000.0, 8200.0, 7900.0]), CELLS)
    b = (run(2), runset([40000.0] * 3, [8100.0, 7950.0, 8150.0]), CELLS)
    c = (run(3), runset([40000.0] * 3, [6000.0, 6100.0, 5900.0]), CELLS)
    (table,), refusals = compare_runs([b, a, c], 1)  # the baseline need not come first
    guest = table.records[1]
    assert guest["A_vs_baseline_verdict"] == "within noise" and guest["C_vs_baseline_verdict"] == "slower"
    assert "B_vs_baseline" not in guest and guest["C_vs_baseline"] == pytest.approx(6000 / 8000 - 1)
    assert [c.header for c in table.columns if c.header.endswith("vs B")] == ["A vs B", "C vs B"]
    assert table.title == "Runs compared: A = run 2, B = run 1, C = run 3 (baseline B)"
    # fewer than 3 repeats: a change without a verdict, and why
    d = (run(4), runset([40000.0], [8000.0]), CELLS)
    (table,), _ = compare_runs([a, d], 0)
    assert table.records[1]["B_vs_baseline"] == 0.0 and table.records[1]["B_vs_baseline_why"] == "fewer than 3 repeats"
    assert "+0.0% (no verdict)" in render([table], Format.TABLE, wide=True)


def test_different_fio_parameters_are_refused_with_the_difference_named():
    a = (run(1), runset([1.0] * 3, [8000.0] * 3), CELLS)
    b = (run(2), runset([1.0] * 3, [4000.0] * 3, params=dict(PARAMS, iodepth=8), job_hash="h2"), CELLS)
    (table,), refusals = compare_runs([a, b], 0)
    assert refusals == ["4k-randwrite raw (base): run B vs A: fio parameters differ: iodepth 8 vs 4"]
    guest = table.records[1]
    assert guest["B_iops"] is None and guest["B_vs_baseline"] is None and guest["note"] == "B refused (see below)"
    assert table.records[0]["B_vs_baseline"] == 0.0  # the host rows are the same job: compared
    # hashes that differ without a stored difference are still refused
    c = (run(3), runset([1.0] * 3, [4000.0] * 3, job_hash="h3"), CELLS)
    assert compare_runs([a, c], 0)[1] == ["4k-randwrite raw (base): run B vs A: fio job hashes differ (h3 vs h1) though the stored parameters are equal"]
    assert param_differences({"bs": 4096, "size": 1}, {"bs": 4096, "runtime": 10}) == ["runtime 10 vs (not stored)", "size (not stored) vs 1"]


def test_other_accelerator_layers_and_missing_rows():
    a = (run(1), runset([1.0] * 3, [8000.0] * 3)
         + meas("guest", "base", "lvm", [5.0] * 3, stack="s", depth=1) + meas("guest", "wb", "raw", [7.0] * 3), CELLS)
    b = (run(2), runset([1.0] * 3, [80.0] * 3, accelerator="tcg") + meas("guest", "base", "luks2", [4.0] * 3, stack="s", depth=1), CELLS)
    (table,), refusals = compare_runs([a, b], 0)
    assert refusals == ["4k-randwrite lvm (base, stack s): run B vs A: layers differ: luks2 vs lvm",
                        "4k-randwrite raw (base): run B vs A: accelerator tcg vs kvm"]
    notes = {(r["cell"], r["layer"]): r["note"] for r in table.records}
    assert notes == {("", "host"): "", ("base", "raw"): "B refused (see below)", ("base", "lvm"): "B: layers differ (see below)",
                     ("wb", "raw"): "not in B", ("base", "luks2"): "not in A"}


def test_vm_settings_that_differ_are_named_and_invalid_cells_left_out():
    a = (run(1), runset([1.0] * 3, [8000.0] * 3), CELLS)
    b = (run(2), runset([1.0] * 3, [8000.0] * 3, settings={"cache": "writeback"}), CELLS)
    (table,), _ = compare_runs([a, b], 0)
    assert table.records[1]["note"] == "VM settings differ: cache writeback (B) vs none (A)"
    invalid = [replace(CELLS[0], valid=False), CELLS[1]]
    (table,), _ = compare_runs([a, (run(2), b[1], invalid)], 0)
    assert table.records[1]["B_iops"] is None and table.records[1]["note"] == "not in B"


def test_other_host_is_refused_unless_allowed():
    a = (run(1), runset([1.0] * 3, [8000.0] * 3), CELLS)
    b = (run(2, {"host_kernel": "6.12.0", "pool": "other"}), runset([1.0] * 3, [8000.0] * 3), CELLS)
    assert HOST_IDENTITY_KEYS == ("hostname", "host_kernel", "host_cpu", "qemu_version", "host_fio")
    assert host_differences(a[0].environment, b[0].environment) == ["host_kernel '6.12.0' vs '6.1.0-50'"]  # the pool is not identity
    (table,), refusals = compare_runs([a, b], 0)
    assert refusals == ["run B (2, r00000002): another host than baseline run A (1, r00000001): host_kernel '6.12.0' vs '6.1.0-50' "
                        "(--allow-other-host compares them anyway)"]
    assert all(r["B_iops"] is None for r in table.records) and not any(c.key.startswith("B_") for c in table.columns)
    (table,), refusals = compare_runs([a, b], 0, allow_other_host=True)
    assert refusals == [] and table.records[1]["B_vs_baseline"] == 0.0
    assert "B differs: host_kernel '6.12.0' vs '6.1.0-50'; other hosts allowed (--allow-other-host)" in table.facts["hosts"]


# ---- the command, on copies of the committed v1 database ---------------------------------------


def compare(*argv) -> int:
    p = argparse.ArgumentParser()
    add_compare(p.add_subparsers())
    args = p.parse_args(["compare", *argv])
    return args.func(args)


@pytest.fixture
def v1(tmp_path, data_dir):
    path = tmp_path / "a.db"
    shutil.copyfile(data_dir / "results-v1.db", path)
    return path


def _modify(path, *, iodepth: int | None = None, kernel: str | None = None) -> None:
    conn = sqlite3.connect(path)
    if iodepth is not None:
        for mid, params in conn.execute("SELECT id, job_params_json FROM measurements WHERE job = '4k-randwrite' AND layer = 'raw'").fetchall():
            conn.execute("UPDATE measurements SET job_params_json = ?, job_hash = 'changed0' WHERE id = ?",
                         (json.dumps(dict(json.loads(params), iodepth=iodepth)), mid))
    if kernel is not None:
        env = json.loads(conn.execute("SELECT environment_json FROM runs").fetchone()[0])
        conn.execute("UPDATE runs SET environment_json = ?", (json.dumps(dict(env, host_kernel=kernel)),))
    conn.commit()
    conn.close()


def test_v1_run_compared_with_itself(v1, capsys):
    assert compare("1", "latest", "--db", str(v1), "--wide") == 0
    captured = capsys.readouterr()
    assert "migrated" in captured.err and "Refused" not in captured.out
    assert "Runs compared: A = run 1, B = run 1 (baseline A)" in captured.out
    assert captured.out.count("+0.0% (no verdict)") == 10  # 2 host + 8 guest rows
    assert compare("1", "1", "--db", str(v1), "--format", "json") == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["refusals"] == [] and doc["run"]["A"].startswith("run 1 (r08c806d2), v1-fixture")
    assert {r["B_vs_baseline"] for r in doc["tables"][0]["records"]} == {0.0}
    assert doc["tables"][0]["facts"]["guest accelerator"] == "A tcg, B tcg"


def test_v1_against_a_modified_copy_across_schema_versions(v1, tmp_path, capsys):
    other = tmp_path / "b.db"
    shutil.copyfile(v1, other)
    ResultsDB(v1).close()  # a.db is now schema v2; b.db stays v1 until the command opens it
    _modify(other, iodepth=8)
    assert compare(f"{v1}:1", f"{other}:latest", "--db", str(tmp_path / "unused.db"), "--wide") == 0
    out = capsys.readouterr().out
    table, refused = out.split("Refused (not compared)\n======================\n")
    assert "4k-randwrite  guest   baseline" in table and "B refused (see below)" in table
    assert refused.splitlines() == ["  4k-randwrite raw (baseline): run B vs A: fio parameters differ: iodepth 8 vs 4",
                                    "  4k-randwrite raw (cache=writeback): run B vs A: fio parameters differ: iodepth 8 vs 4"]
    # another host: the whole run is refused, by name of what differs, unless allowed
    _modify(other, kernel="6.1.0-99")
    assert compare(f"{v1}:1", f"{other}:1", "--format", "csv") == 1  # nothing compared
    err = capsys.readouterr().err
    assert "refused: run B (1, r08c806d2): another host than baseline run A (1, r08c806d2): host_kernel '6.1.0-99' vs '6.18.44-fc-v669'" in err
    assert compare(f"{other}:1", f"{v1}:1", "--baseline", f"{v1}:1", "--allow-other-host", "--format", "markdown") == 0
    out = capsys.readouterr().out
    assert "- **hosts**: OTHER HOST in B: compared anyway (--allow-other-host)" in out
    assert "## Refused (not compared)\n- 4k-randwrite raw (baseline): run B vs A: fio parameters differ: iodepth 8 vs 4" in out


def test_errors_are_messages_with_hints(v1, tmp_path):
    with pytest.raises(UsageError) as err:
        compare("1", "--db", str(v1))
    assert "two runs" in err.value.message and err.value.hint
    with pytest.raises(UsageError) as err:
        compare("1", "1", "--db", str(v1), "--format", "xml")
    assert err.value.message.startswith("--format:") and err.value.hint
    with pytest.raises(ResultsError) as err:
        compare("1", "99", "--db", str(v1))
    assert err.value.message == f"no run '99' in {v1}" and err.value.hint
    with pytest.raises(ResultsError) as err:
        compare("1", "2", "--db", str(tmp_path / "none.db"))
    assert "no results database" in err.value.message and err.value.hint
    with pytest.raises(UsageError) as err:
        compare("1", "--baseline", "1", "--db", str(v1))
    assert "every other run named is the baseline" in err.value.message
    with pytest.raises(UsageError):
        split_ref(f"{v1}:", "x.db")
    assert split_ref("r08c806d2", "x.db") == ("x.db", "r08c806d2") and split_ref("b.db:3", "x.db") == ("b.db", "3")
