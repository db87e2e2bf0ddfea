"""Load runs (many VMs at once) in the report: a scaling run and a noisy-neighbour run built
in a temporary results database through the ResultsDB API (synthetic histograms), checked
against figures computed here independently: merged percentiles, Jain's index, the knee,
excluded rows, the victim's change and verdict, limits, JSON and the HTML page."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.records import as_boot, as_cell, as_series, store
from vmbench.report.across_runs import compare_runs
from vmbench.report.build import build_report
from vmbench.report.html import render_html
from vmbench.report.load import load_run
from vmbench.report.loadrows import jain, scaling_knee_index, scaling_rows
from vmbench.report.render import Format, render
from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.results.runrow import RunRow

ENV = {"hostname": "kvm1", "host_kernel": "6.1", "host_cpu": "EPYC", "qemu_version": "7.2", "host_fio": "fio-3.33", "accelerator": "kvm"}
WRITE = {"name": "4k-randwrite", "rw": "randwrite", "bs": 4096, "iodepth": 4, "size": 64 << 20, "direct": True, "runtime": 10.0, "ramp": 2.0}
READ = dict(WRITE, name="4k-randread", rw="randread")
T0 = 1_700_000_000_000  # host clock, epoch ms


def percentile(bins: Counter, p: float) -> float:
    """fio's rule, written again: the first bucket whose cumulative count reaches p% (in ms)."""
    total, running = sum(bins.values()), 0
    for value in sorted(bins):
        running += bins[value]
        if running >= p / 100.0 * total:
            return value / 1e6
    raise AssertionError("empty")


def load_json(step: str, rnd: int, *, excluded: str | None = None, loaded: bool = True, short_ms: float = 0.0,
              short_of: int | None = None, skew: float = 4.0, start: int = T0) -> dict:
    return {"step": step, "round": rnd, "window": {"measured_from_ms": start, "measured_to_ms": start + 10_000,
                                                  "loaded_from_ms": start - 2_000, "loaded_to_ms": start + 13_000},
            "clock_offset_ms": 0.5, "clock_uncertainty_ms": 0.2, "start_skew_ms": skew, "loaded": loaded,
            "short_ms": short_ms, "short_of_vm": short_of, "excluded": excluded}


def add(db: ResultsDB, rid: int, cell_id: int | None, side: str, job: dict, step: int, name: str, vm: int, repeat: int, role: str,
        iops: float, bins: dict, **load) -> int:
    key = MeasurementKey(side, None, None, "host" if side == "host" else "raw", job["name"], repeat, vm=vm, load_step=step)
    return store(
        db, rid, key, cell_id=cell_id if side == "guest" else None, depth=0, job_params_json=job, job_hash="h-" + job["name"],
        sync=False, target="/dev/vdb", argv_json=["fio"], settings_json={"cache": "none"},
        accelerator="host" if side == "host" else "kvm", started_at="2026-01-01T00:00:00", iops=iops, bw_bytes=iops * 4096,
        clat_bins_json={str(k): v for k, v in bins.items()}, fio_json="{}", role=role, load_json=load_json(name, repeat, **load))


def new_run(db: ResultsDB, tag: str, load: dict, targets: list | None = None, jobs=(WRITE,)) -> tuple[int, int]:
    plan = {"repeats": 2, "jobs": [dict(j) for j in jobs], "cells": [{"name": "baseline", "host_cell": None}],
            "targets": targets or [], "load": load}
    rid = db.start_run(RunRow.starting(tag=tag, scenario_name="load", scenario_path="load.yaml", scenario_text="load: {}", plan=plan, version="test"))
    db.set_environment(rid, Environment(ENV))
    boot = db.add_boot(as_boot(run_id=rid, seq=1, vm_key="k", settings_json={"cache": "none"}, domain_name="d", accelerator="kvm"))
    cell = db.add_cell(as_cell(run_id=rid, boot_id=boot, seq=1, name="baseline", settings_json={"cache": "none"}, changed_json=[], stacks_json=[],
                       valid=True))
    return rid, cell


# ---- scaling: 1, 2, 3 VMs, 2 repeats, host references ------------------------------------------

STEPS = [(1, "1 VM", 1), (2, "2 VMs", 2), (3, "3 VMs", 3)]
# IOPS per (step, vm, repeat): the aggregate gains 900 then 100 (the knee at 3 VMs, whose p99 also grows)
IOPS = {(1, 0, 1): 1000.0, (1, 0, 2): 1020.0,
        (2, 0, 1): 950.0, (2, 1, 1): 950.0, (2, 0, 2): 1000.0, (2, 1, 2): 900.0,
        (3, 0, 1): 700.0, (3, 1, 1): 600.0, (3, 2, 1): 700.0, (3, 0, 2): 650.0, (3, 1, 2): 700.0, (3, 2, 2): 5.0}
EXCLUDED = (3, 2, 2)  # its window was not covered: left out of every figure


def guest_bins(step: int, vm: int, repeat: int) -> dict:
    if (step, vm, repeat) == EXCLUDED:
        return {90_000_000: 100}  # would move every percentile if it were merged
    return {100_000 * step + 1000 * vm: 90, 400_000 * step: 8 + repeat, 2_000_000 * step + 100_000 * vm: 1, 9_000_000: 1}


@pytest.fixture
def scaling(tmp_path):
    db = ResultsDB(tmp_path / "r.db")
    load = {"kind": "scaling", "victim_job": None, "aggressor_job": None, "boot_parallel": 2, "tail_seconds": 3.0,
            "steps": [{"index": i, "name": n, "vms": [{"vm": v, "role": "peer", "overrides": {}} for v in range(k)]} for i, n, k in STEPS]}
    rid, cell = new_run(db, "scale", load, targets=[{"job": "4k-randwrite", "min_iops": 650.0, "max_p99_ms": None}])
    for step, name, n in STEPS:
        for repeat in (1, 2):
            for vm in range(n):
                ex = "window not covered by VM 0's load" if (step, vm, repeat) == EXCLUDED else None
                mid = add(db, rid, cell, "guest", WRITE, step, name, vm, repeat, "peer", IOPS[(step, vm, repeat)], guest_bins(step, vm, repeat),
                          excluded=ex, loaded=ex is None, short_ms=0.0 if ex is None else 850.0, short_of=None if ex is None else 0,
                          skew=3.0 * step + repeat)
                if vm == 0:
                    db.add_telemetry(as_series(run_id=rid, measurement_id=mid, source="host-cpu", series={"t_s": [0, 1], "idle": [80 - 10 * step, 60 - 10 * step]}))
                add(db, rid, None, "host", WRITE, step, name, vm, repeat, "peer", 3000.0 - 100 * vm, {50_000: 99, 500_000: 1})
    db.finish_run(rid, "ok")
    yield db, rid
    db.close()


def expected_bins(step: int, n: int) -> Counter:
    out: Counter = Counter()
    for repeat in (1, 2):
        for vm in range(n):
            if (step, vm, repeat) != EXCLUDED:
                out.update(guest_bins(step, vm, repeat))
    return out


def test_scaling_aggregates_merged_percentiles_fairness_and_knee(scaling):
    db, rid = scaling
    header, tables = build_report(load_run(db, rid))
    assert header["load"] == "scaling: 1 VM, 2 VMs, 3 VMs at once"
    assert [t.name for t in tables if not t.name.startswith("advice")] == ["load-scaling", "load-vms"]  # the single-VM gap and layer tables are replaced
    recs = tables[0].records
    assert [(r["step"], r["vms"]) for r in recs] == [("1 VM", 1), ("2 VMs", 2), ("3 VMs", 3)]
    # the sum over VMs of each repeat, then the mean; step 3's repeat 2 misses VM 2 (excluded): only repeat 1 counts
    assert [r["iops_samples"] for r in recs] == [[1000.0, 1020.0], [1900.0, 1900.0], [2000.0]]
    assert [r["iops"] for r in recs] == [1010.0, 1900.0, 2000.0]
    assert recs[2]["mb_s"] == pytest.approx(2000.0 * 4096 / 1e6)
    for r, (step, _, n) in zip(recs, STEPS):
        bins = expected_bins(step, n)
        assert (r["p50_ms"], r["p99_ms"], r["p999_ms"]) == (percentile(bins, 50), percentile(bins, 99), percentile(bins, 99.9))
    assert recs[2]["p999_ms"] == 9.0  # the excluded row's 90 ms is not merged
    # per-VM means over included repeats; Jain's index over them
    vm3 = [700.0 / 2 + 650.0 / 2, 600.0 / 2 + 700.0 / 2, 700.0]
    assert (recs[2]["vm_min_iops"], recs[2]["vm_max_iops"]) == (650.0, 700.0)
    assert recs[2]["fairness"] == pytest.approx(sum(vm3) ** 2 / (3 * sum(x * x for x in vm3)))
    assert recs[0]["fairness"] == 1.0
    assert [r["knee"] for r in recs] == ["", "", "knee"]
    assert [r["host_cpu_pct"] for r in recs] == [pytest.approx(40.0), pytest.approx(50.0), pytest.approx(60.0)]
    assert [r["host_iops"] for r in recs] == [3000.0, 5900.0, 8700.0]
    assert recs[1]["gap"] == pytest.approx(1900.0 / 5900.0 - 1)
    assert recs[1]["gap_why"] == "fewer than 3 repeats"
    assert [r["skew_ms"] for r in recs] == [5.0, 8.0, 11.0]
    assert "VM 2 repeat 2: window not covered by VM 0's load" in recs[2]["excluded"] and "repeat 2 not in the aggregate" in recs[2]["excluded"]
    # targets: min_iops on the slowest VM
    assert [r["target"] for r in recs] == ["PASS", "PASS", "PASS"]
    text = render(tables, Format.TABLE, wide=True)
    assert "knee = the first step k > 1 whose aggregate IOPS gained less than 0.25" in text
    assert "merged bin by bin (never averaged)" in text and "guests ran under kvm" in text
    vms = [r for r in tables[1].records if r["step"] == "3 VMs"]
    assert [(r["vm"], r["iops"], r["repeats"], r["loaded"]) for r in vms] == [(0, 675.0, 2, "yes"), (1, 650.0, 2, "yes"), (2, 700.0, 1, "no")]
    assert vms[2]["note"] == ("not fully loaded: repeat 2: short by 850 ms (VM 0); "
                              "excluded repeat 2: window not covered by VM 0's load")
    assert vms[2]["p99_ms"] == percentile(Counter(guest_bins(3, 2, 1)), 99)


def test_jain_and_knee_rules():
    assert jain([100.0, 100.0, 100.0]) == 1.0
    assert jain([300.0, 0.0, 0.0]) == pytest.approx(1 / 3)
    assert jain([1.0, 2.0]) == pytest.approx(9 / 10)
    assert jain([]) is None and jain([0.0]) is None
    # (VMs, aggregate IOPS, p99 ms): 2 VMs gain 800 of a linear 1000 (not the knee); 4 VMs gain 300 of a linear 1800
    # (< 450) but p99 grows only 1.1x (not); 8 VMs gain 100 (< 0.25 * 2100) with p99 1.5x: the knee
    series = [(1, 1000.0, 1.0), (2, 1800.0, 1.1), (4, 2100.0, 1.21), (8, 2200.0, 1.815)]
    assert scaling_knee_index(series) == 3
    assert scaling_knee_index(series[:3]) is None
    assert scaling_knee_index([(1, 1000.0, 1.0), (2, 1249.0, 1.2)]) == 1  # just under the quarter, p99 exactly 1.2x
    assert scaling_knee_index([(1, 1000.0, 1.0), (2, 1250.0, 5.0)]) is None  # exactly a quarter: not under it
    assert scaling_knee_index([(1, 1000.0, None), (2, 1000.0, 3.0)]) is None


def test_scaling_json_and_html(scaling):
    db, rid = scaling
    data = load_run(db, rid)
    header, tables = build_report(data)
    doc = json.loads(render(tables, Format.JSON, header))
    assert [t["name"] for t in doc["tables"] if not t["name"].startswith("advice")] == ["load-scaling", "load-vms"]
    rec = doc["tables"][0]["records"][2]
    assert rec["knee"] == "knee" and rec["iops"] == 2000.0 and rec["iops_samples"] == [2000.0] and rec["accelerator"] == "kvm"
    assert any("knee = " in n for n in doc["tables"][0]["notes"]) and doc["run"]["load"].startswith("scaling")
    page = render_html(data)
    assert 'id="plot-load-scaling"' in page and 'id="plot-load-vms"' in page
    assert "Aggregate IOPS (sum of VMs)" in page and page.count("<svg") >= 2
    assert 'id="table-load-scaling"' in page and "knee" in page
    assert 'id="plot-latency"' not in page  # the single-VM sections are not drawn for a load run


# ---- noisy neighbour: alone, busy, limited ------------------------------------------------------

PHASES = [(1, "alone", 0, {}), (2, "busy", 2, {}), (3, "limited", 2, {"iops_wr": 200})]
VICTIM_P99 = {  # per phase, the p99 bucket (ns) of each of 3 repeats
    1: (1_000_000, 1_100_000, 1_050_000), 2: (5_000_000, 6_000_000, 5_500_000), 3: (1_020_000, 1_120_000, 1_080_000)}
AGGR_IOPS = {2: (4000.0, 4200.0), 3: (198.0, 190.0)}


def victim_bins(phase: int, repeat: int) -> dict:
    return {200_000: 98, VICTIM_P99[phase][repeat - 1]: 1, 20_000_000: 1}


@pytest.fixture
def neighbours(tmp_path):
    db = ResultsDB(tmp_path / "n.db")
    load = {"kind": "neighbours", "victim_job": "4k-randread", "aggressor_job": "4k-randwrite", "boot_parallel": 2, "tail_seconds": 3.0,
            "steps": [{"index": i, "name": n, "vms": [{"vm": 0, "role": "victim", "overrides": {}}]
                       + [{"vm": v, "role": "aggressor", "overrides": dict(over)} for v in range(1, k + 1)]} for i, n, k, over in PHASES]}
    rid, cell = new_run(db, "nb", load, targets=[{"job": "4k-randread", "max_p99_ms": 2.0, "min_iops": 500.0}], jobs=(READ, WRITE))
    for step, name, n, _ in PHASES:
        for repeat in (1, 2, 3):
            start = T0 + 100_000 * step + 20_000 * repeat
            mid = add(db, rid, cell, "guest", READ, step, name, 0, repeat, "victim", 1000.0 - 100 * (step == 2), victim_bins(step, repeat),
                      start=start)
            db.add_telemetry(as_series(run_id=rid, measurement_id=mid, source="fio-clat",
                             series={"t_s": [0.5, 1.5, 2.5], "values": [0.3, 0.4 * step, 0.35], "unit": "ms"}))
            for vm in range(1, n + 1):
                aid = add(db, rid, cell, "guest", WRITE, step, name, vm, repeat, "aggressor", AGGR_IOPS[step][vm - 1],
                          {300_000: 99, 3_000_000: 1}, start=start + 40 * vm)
                db.add_telemetry(as_series(run_id=rid, measurement_id=aid, source="fio-iops",
                                 series={"t_s": [0.5, 1.5, 2.5], "values": [AGGR_IOPS[step][vm - 1]] * 3, "unit": "IOPS"}))
    db.finish_run(rid, "ok")
    yield db, rid
    db.close()


def test_neighbours_change_verdict_limits_targets_and_recovery(neighbours):
    db, rid = neighbours
    header, tables = build_report(load_run(db, rid))
    assert [t.name for t in tables if not t.name.startswith("advice")] == ["load-neighbours", "load-vms"]
    assert header["load"] == "noisy neighbour: victim 4k-randread, aggressors 4k-randwrite; phases alone (0 aggressors), busy (2 aggressors), limited (2 aggressors)"
    alone, busy, limited = tables[0].records
    for rec, phase in ((alone, 1), (busy, 2), (limited, 3)):
        bins: Counter = Counter()
        for repeat in (1, 2, 3):
            bins.update(victim_bins(phase, repeat))
        assert (rec["p50_ms"], rec["p99_ms"], rec["p999_ms"]) == (percentile(bins, 50), percentile(bins, 99), percentile(bins, 99.9))
        assert rec["p99_samples"] == [v / 1e6 for v in VICTIM_P99[phase]]
    assert alone["reference"] and alone["p99_change"] is None
    # median 5.5 vs 1.05 ms; with 3 repeats the interval is [min(a)/max(b), max(a)/min(b)] - 1
    assert busy["p99_change"] == pytest.approx(5.5 / 1.05 - 1)
    assert busy["p99_change_low"] == pytest.approx(5.0 / 1.1 - 1) and busy["p99_change_high"] == pytest.approx(6.0 / 1.0 - 1)
    assert busy["p99_change_verdict"] == "higher" and busy["held"] is False
    assert limited["p99_change"] == pytest.approx(1.08 / 1.05 - 1) and limited["p99_change_verdict"] == "within noise"
    assert limited["held"] is True
    assert [r["p99_state"] for r in (alone, busy, limited)] == ["reference", "did not recover", "recovered"]
    assert busy["sentence"] == "the victim's p99 did not recover under busy"
    assert limited["sentence"] == "the victim's p99 recovered under limited"
    assert (busy["aggr_iops"], limited["aggr_iops"], alone["aggr_iops"]) == (8200.0, 388.0, None)
    assert limited["aggr_mb_s"] == pytest.approx(388.0 * 4096 / 1e6)
    assert limited["limits"] == "VM 1 iops_wr 198/200 IOPS (99%); VM 2 iops_wr 190/200 IOPS (95%)"
    assert [c["ratio"] for c in limited["limit_checks"]] == [0.99, 0.95] and busy["limits"] == ""
    assert limited["overrides"] == "iops_wr=200"
    assert (alone["target"], busy["target"], limited["target"]) == ("PASS", "FAIL (p99 6.00 ms > 2)", "PASS")
    text = render(tables, Format.TABLE, wide=True)
    assert "+423.8% [+354.5, +500.0] higher" in text and "The victim's p99 recovered under limited." in text
    assert "The victim's p99 held in a phase when the interval" in text
    doc = json.loads(render(tables, Format.JSON, header))
    assert doc["tables"][0]["records"][2]["sentence"] == "the victim's p99 recovered under limited"
    vms = [(r["step"], r["vm"], r["role"]) for r in tables[1].records]
    assert vms[:4] == [("alone", 0, "victim"), ("busy", 0, "victim"), ("busy", 1, "aggressor"), ("busy", 2, "aggressor")]


def test_neighbours_html_has_the_victim_plots(neighbours):
    db, rid = neighbours
    page = render_html(load_run(db, rid))
    assert 'id="plot-load-victim"' in page and 'id="plot-load-timeline"' in page
    assert "victim p99" in page and "aggressors' IOPS (sum)" in page
    assert 'id="table-load-neighbours"' in page
    assert "problem:</span> target for 4k-randread at busy (baseline raw): FAIL (p99 6.00 ms &gt; 2)" in page


def test_an_ordinary_run_has_no_load_tables(scaling):
    db, _ = scaling
    plan = {"repeats": 1, "jobs": [WRITE], "cells": [{"name": "baseline", "host_cell": None}]}
    rid = db.start_run(RunRow.starting(tag="plain", scenario_name="s", scenario_path="s.yaml", scenario_text="", plan=plan, version="test"))
    db.set_environment(rid, Environment(ENV))
    cell = db.add_cell(as_cell(run_id=rid, seq=1, name="baseline", settings_json={}, changed_json=[], stacks_json=[], valid=True))
    for side in ("host", "guest"):
        store(db, rid, MeasurementKey(side, None, None, "host" if side == "host" else "raw", "4k-randwrite", 1),
                           cell_id=cell if side == "guest" else None, depth=0, job_params_json=WRITE, job_hash="h", sync=False, target="t",
                           argv_json=[], settings_json={}, accelerator="kvm", started_at="x", iops=100.0, bw_bytes=1.0,
                           clat_bins_json={"1000": 1}, fio_json="{}")
    header, tables = build_report(load_run(db, rid))
    assert "load" not in header and [t.name for t in tables if not t.name.startswith("advice")] == ["gaps"]
    assert load_run(db, rid).load is None


def test_compare_two_load_runs_by_step_aggregate(scaling):
    db, rid = scaling
    data = load_run(db, rid)
    runs = [(data.run, data.measured, list(data.cells)), (data.run, data.measured, list(data.cells))]
    (table,), refusals = compare_runs(runs, 0)
    assert refusals == []
    guest = [r for r in table.records if r["side"] == "guest"]
    # one row per step (the VMs summed per repeat), never one per VM, steps never mixed
    assert [(r["step"], r["A_iops"]) for r in guest] == [("1: 1 VM", 1010.0), ("2: 2 VMs", 1900.0), ("3: 3 VMs", 2000.0)]
    assert all(r["B_vs_baseline"] == 0.0 for r in guest)
    host = [r for r in table.records if r["side"] == "host"]
    assert [r["A_iops"] for r in host] == [3000.0, 5900.0, 8700.0]


def test_compare_refuses_steps_of_different_sizes(scaling):
    db, rid = scaling
    data = load_run(db, rid)
    other = [m for m in data.measured if not (m.load_step == 3 and m.vm == 2)]
    plan = json.loads(json.dumps(data.run.plan_json))
    plan["load"]["steps"][2]["vms"] = plan["load"]["steps"][2]["vms"][:2]
    plan["load"]["steps"][2]["name"] = "2 VMs again"
    from dataclasses import replace

    runs = [(data.run, data.measured, list(data.cells)), (replace(data.run, plan_json=plan), other, list(data.cells))]
    (table,), refusals = compare_runs(runs, 0)
    assert "4k-randwrite raw (baseline): run B vs A: load step 3 differs: 2 VMs again (2 VMs) vs 3 VMs (3 VMs)" in refusals
    step3 = [r for r in table.records if r["side"] == "guest" and r["load_step"] == 3]
    assert len(step3) == 1 and step3[0]["B_iops"] is None and step3[0]["A_iops"] == 2000.0 and "B refused" in step3[0]["note"]


def test_scaling_rows_leave_invalid_cells_out(scaling):
    db, rid = scaling
    data = load_run(db, rid)
    assert scaling_rows(data.measurements, [], data.load) == []  # type: ignore[arg-type]
