"""Deltas, verdicts and intervals on each job's metric: a fixed-rate job judged by p99 (lower
is better), an IOPS job as before, a saturated fixed-rate group flagged and compared with
nothing, two runs compared on p99, and runs stored before jobs had a metric read as IOPS.
Small runs written with the ResultsDB API; the latency histograms are synthetic."""

from __future__ import annotations

import pytest

from tests.records import as_cell, as_cells, as_measurement, as_measurements, as_targets, store as store_row
from vmbench.fio.job import Metric
from vmbench.fio.result import Histogram
from vmbench.report import stats
from vmbench.report.across_runs import compare_runs
from vmbench.report.build import build_report
from vmbench.report.facts import saturation
from vmbench.report.load import load_run
from vmbench.report.render import Format, render
from vmbench.report.rows import gap_rows, metric_of
from vmbench.report.tables import gap_table, journey_table, layer_table, targets_table
from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.results.runrow import RunRow

ENV = {"hostname": "kvm1", "host_kernel": "6.1.0", "host_cpu": "EPYC", "qemu_version": "7.2", "host_fio": "fio-3.33"}
BASE = {"rw": "randread", "bs": 4096, "iodepth": 4, "numjobs": 1, "size": 64 << 20, "direct": True, "runtime": 30.0, "ramp": 5.0,
        "jobfile": None}
RATED = dict(BASE, name="4k-at-500", rate_iops=500)
FREE = dict(BASE, name="4k-randread")
PLAN_JOBS = [{"name": "4k-at-500", "describe": "randread 4K QD4 at 500 IOPS", "sync": False, "metric": "p99", "rate_iops": 500},
             {"name": "4k-randread", "describe": "randread 4K QD4", "sync": False, "metric": "iops"}]
CELLS = ("baseline", "cache=writeback", "slow")


def bins(p99_ms: float) -> dict[str, int]:
    """A repeat's histogram: 98% at 0.1 ms, the rest at ``p99_ms`` (its p99 and p99.9)."""
    return Histogram({100_000: 980, int(p99_ms * 1e6): 20}).to_json()


def store(db: ResultsDB, plan_jobs: list[dict], groups: list[tuple], tag: str = "r1") -> int:
    """A finished run: ``groups`` = (side, cell, job params, [(iops, p99 ms), ...] per repeat)."""
    rid = db.start_run(RunRow.starting(tag=tag, scenario_name="s", scenario_path="s.yaml", scenario_text="", version="test",
                                       plan={"repeats": 3, "jobs": plan_jobs, "cells": [{"name": c} for c in CELLS]}))
    db.set_environment(rid, Environment(ENV))
    ids = {c: db.add_cell(as_cell(run_id=rid, seq=i, name=c, settings_json={"cache": "none"}, changed_json=[], stacks_json=[], valid=1))
           for i, c in enumerate(CELLS)}
    for side, cell, params, repeats in groups:
        for n, (iops, p99) in enumerate(repeats, 1):
            hist = bins(p99)
            h = Histogram.from_json(hist)
            store_row(db, rid, MeasurementKey(side, None if side == "host" else cell, None, side if side == "host" else "raw",
                                                   params["name"], n),
                               cell_id=None if side == "host" else ids[cell], depth=0, job_params_json=params, job_hash=params["name"],
                               sync=0, target="/dev/vdb", argv_json=[], settings_json={"cache": "none"},
                               accelerator="host" if side == "host" else "kvm", started_at="2026-01-01", iops=iops,
                               bw_bytes=iops * 4096, p50_ns=h.percentile(50), p95_ns=h.percentile(95), p99_ns=h.percentile(99),
                               p999_ns=h.percentile(99.9), clat_bins_json=hist, fio_json={})
    db.finish_run(rid, "ok")
    return rid


RATED_GROUPS = [
    ("host", None, RATED, [(500.0, 0.20), (500.0, 0.21), (499.9, 0.19)]),
    ("guest", "baseline", RATED, [(500.0, 1.00), (500.0, 1.10), (499.0, 0.95)]),
    ("guest", "cache=writeback", RATED, [(500.0, 2.00), (500.0, 2.20), (499.0, 2.10)]),  # IOPS as the baseline's, p99 doubled
    ("guest", "slow", RATED, [(400.0, 9.0), (410.0, 9.5), (405.0, 9.2)]),  # did not reach its rate
]
FREE_GROUPS = [
    ("host", None, FREE, [(40000.0, 0.2), (41000.0, 0.2), (39500.0, 0.2)]),
    ("guest", "baseline", FREE, [(8000.0, 1.0), (8200.0, 1.0), (7900.0, 1.0)]),
    ("guest", "cache=writeback", FREE, [(9000.0, 1.0), (9400.0, 1.0), (9100.0, 1.0)]),
    ("guest", "slow", FREE, [(8000.0, 1.0), (8100.0, 1.0), (7950.0, 1.0)]),
]


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def test_p99_judged_job_gets_a_latency_verdict_with_an_interval(db):
    store(db, PLAN_JOBS, RATED_GROUPS + FREE_GROUPS)
    data = load_run(db, "latest")
    assert data.plan.job_metrics == {"4k-at-500": Metric.P99, "4k-randread": Metric.IOPS}
    t = gap_table(list(data.measurements), data.valid_cells, data.jobs, 3, metrics=data.plan.job_metrics)
    rec = {(r["job"], r["cell"]): r for r in t.records}
    wb = rec[("4k-at-500", "cache=writeback")]
    assert wb["metric"] == "p99" and wb["iops"] == 500.0 == rec[("4k-at-500", "baseline")]["iops"]
    # the change of the median per-repeat p99, with the 3-repeat interval [min(a)/max(b), max(a)/min(b)] - 1
    assert wb["vs_baseline"] == pytest.approx(2.10 / 1.00 - 1)
    assert wb["vs_baseline_low"] == pytest.approx(2.00 / 1.10 - 1) and wb["vs_baseline_high"] == pytest.approx(2.20 / 0.95 - 1)
    assert wb["vs_baseline_verdict"] == "higher p99, worse"
    # the gap for a latency is the guest's over the host's: above 1.00x the guest is behind
    base = rec[("4k-at-500", "baseline")]
    assert base["gap"] == pytest.approx(1.00 / 0.20) and base["gap_verdict"] == "gap"
    assert base["gap_low"] == pytest.approx(0.95 / 0.21) and base["gap_high"] == pytest.approx(1.10 / 0.19)
    text = render([t], Format.TABLE, wide=True)
    assert "judged by" in text and "vs baseline (judged by)" in text and "gap (judged by)" in text
    assert "+110.0% [+81.8, +131.6] higher p99, worse" in text
    assert ("ratio of medians of each repeat's p99 / IOPS (percentile method, 9,999 resamples of the repeats, fixed seed; "
            "a repeat's latency percentile from its own histogram)") in text
    # lower p99 reads as better: the baseline against writeback
    t2 = gap_table(list(data.measurements), [data.valid_cells[1], data.valid_cells[0]], ["4k-at-500"], 3, metrics=data.plan.job_metrics)
    assert t2.records[2]["vs_baseline_verdict"] == "lower p99, better"
    # one metric in the table: the headers name it, no judged-by column
    headers = [c.header for c in t2.columns]
    assert "vs baseline (p99)" in headers and "gap (guest/host p99)" in headers and "judged by" not in headers
    # the report built from the stored run judges the fixed-rate job by p99 too (its stored rate)
    _, tables = build_report(data)
    gaps = {(r["job"], r["cell"]): r for r in tables[0].records}
    assert gaps[("4k-at-500", "cache=writeback")]["vs_baseline_verdict"] == "higher p99, worse"


def test_iops_judged_job_is_unchanged(db):
    store(db, PLAN_JOBS, RATED_GROUPS + FREE_GROUPS)
    data = load_run(db, "latest")
    alone = gap_table(list(data.measurements), data.valid_cells, ["4k-randread"], 3, metrics=data.plan.job_metrics)
    before = gap_table(list(data.measurements), data.valid_cells, ["4k-randread"], 3)  # as without metrics
    assert alone.records == before.records and [c.header for c in alone.columns] == [c.header for c in before.columns]
    assert alone.notes == before.notes and all("metric" not in r for r in alone.records)
    wb = alone.records[2]
    assert wb["vs_baseline"] == pytest.approx(9100 / 8000 - 1) and wb["vs_baseline_verdict"] == "faster"
    assert wb["gap"] == pytest.approx(40000 / 9100) and "vs baseline" in [c.header for c in alone.columns]
    # in a table with a p99 job its record names its metric, the figures the same
    mixed = gap_table(list(data.measurements), data.valid_cells, data.jobs, 3, metrics=data.plan.job_metrics)
    same = [r for r in mixed.records if r["job"] == "4k-randread"]
    assert [r["metric"] for r in same] == ["IOPS"] * 4
    assert [{k: v for k, v in r.items() if k != "metric"} for r in same] == before.records


def test_saturated_fixed_rate_cell_is_flagged_and_left_out(db):
    store(db, PLAN_JOBS, RATED_GROUPS)
    data = load_run(db, "latest")
    rows = gap_rows(list(data.measurements), data.valid_cells, ["4k-at-500"], metrics=data.plan.job_metrics)
    slow = [r for r in rows if r.cell == "slow"][0]
    assert slow.note.startswith("saturated (achieved 405 of 500 IOPS): not compared")
    assert slow.gap is None and slow.vs_baseline is None and all(d.verdict is None for d in slow.deltas.values())
    assert [r.figures.saturated for r in rows if r.cell != "slow"] == [None] * 3
    t = gap_table(list(data.measurements), data.valid_cells, ["4k-at-500"], 3, metrics=data.plan.job_metrics)
    text = render([t], Format.TABLE, wide=True)
    assert "saturated (achieved X of Y) = a fixed-rate job whose median achieved rate was under 97%" in text
    # a saturated baseline: the other cells are not compared with it, and say so
    order = [data.valid_cells[2], data.valid_cells[1]]
    wb = gap_rows(list(data.measurements), order, ["4k-at-500"], metrics=data.plan.job_metrics)[-1]
    assert wb.vs_baseline is None and "vs_baseline" in wb.deltas and wb.deltas["vs_baseline"].verdict is None
    assert "baseline saturated: not compared" in wb.note and wb.deltas["gap"].verdict == "gap"
    # the targets table keeps its figures and shows the flag
    tt = targets_table(list(data.measurements), as_targets([{"job": "4k-at-500", "cell": "slow", "max_p99_ms": 5}]), data.plan.job_metrics)
    assert tt is not None and tt.records[0]["note"].startswith("saturated") and tt.records[0]["result"] == "FAIL"


def test_saturation_per_clone_and_per_direction():
    def row(iops, bw=0.0, fio=None, **params):
        return as_measurement({"job_params": dict(BASE, **params), "iops": iops, "bw_bytes": bw, "fio": fio or {}})

    assert saturation([row(490.0, rate_iops=500)]) is None  # 98%
    assert saturation([row(480.0, rate_iops=500)]) == "saturated (achieved 480 of 500 IOPS)"
    # fio's rate is per job clone: numjobs multiplies it
    assert saturation([row(1900.0, rate_iops=500, numjobs=4)]) == "saturated (achieved 1,900 of 2,000 IOPS; 4 jobs x 500)"
    # a mixed job: reads and writes each, judged per direction from fio's output...
    fio = {"jobs": [{"jobname": "j", "read": {"iops": 495.0}, "write": {"iops": 450.0}},
                    {"jobname": "j", "read": {"iops": 500.0}, "write": {"iops": 460.0}},
                    {"jobname": "vmbench-tail", "read": {"iops": 9999.0}, "write": {"iops": 9999.0}}]}
    assert saturation([row(1905.0, rw="randrw", rate_iops=500, numjobs=2, fio=fio)]) == (
        "saturated (achieved 995 of 1,000 read IOPS, 910 of 1,000 write IOPS; 2 jobs x 500)")
    # ... or, without it, the total against both directions
    assert saturation([row(1950.0, rw="randrw", rate_iops=500, numjobs=2)]) is None
    assert saturation([row(450.0, rw="randrw", rwmixread=100, rate_iops=500)]) == "saturated (achieved 450 of 500 IOPS)"
    # bytes a second, and the median of the repeats
    assert saturation([row(0, 49e6, rate=50_000_000), row(0, 40e6, rate=50_000_000), row(0, 49.5e6, rate=50_000_000)]) is None
    assert saturation([row(0, 40e6, rw="write", rate=50_000_000)]) == "saturated (achieved 40.0 of 50.0 MB/s)"
    assert saturation([row(10.0)]) is None  # not a fixed-rate job
    assert saturation([row(10.0, jobfile={"path": "x.fio"})]) is None  # a job file's rate is not read


def test_layer_and_journey_and_targets_on_p99():
    def m(cell, layer, stack, depth, repeats, params=RATED):
        return [{"side": "guest" if layer != "host" else "host", "cell": cell, "stack": stack, "layer": layer, "depth": depth,
                 "job": params["name"], "iops": iops, "bw_bytes": iops * 4096, "clat_bins": bins(p99), "job_hash": "h",
                 "job_params": params, "sync": False, "repeat": n, "settings": {}}
                for n, (iops, p99) in enumerate(repeats, 1)]

    cells = [{"name": "s1", "stacks": ["ext4"], "settings": {}, "valid": True}, {"name": "s2", "stacks": ["ext4"], "settings": {}, "valid": True}]
    meas = (m(None, "host", None, 0, [(500.0, 0.2)] * 3) + m("s1", "raw", None, 0, [(500.0, 1.0), (500.0, 1.1), (500.0, 0.9)])
            + m("s1", "ext4", "ext4", 1, [(500.0, 3.0), (500.0, 3.3), (500.0, 2.9)])
            + m("s2", "raw", None, 0, [(500.0, 1.0)] * 3) + m("s2", "ext4", "ext4", 1, [(500.0, 1.5), (500.0, 1.6), (500.0, 1.4)]))
    metrics = {"4k-at-500": Metric.P99}
    lt = layer_table(as_measurements(meas), as_cells(cells), ["4k-at-500"], repeats=3, metrics=metrics)
    assert lt is not None and "vs layer below (p99)" in [c.header for c in lt.columns]
    ext4 = [r for r in lt.records if r["layer"] == "+ext4" and r["cell"] == "s1"][0]
    assert ext4["vs_below"] == pytest.approx(3.0 / 1.0 - 1) and ext4["vs_below_verdict"] == "higher p99, worse"
    jt = journey_table(as_measurements(meas), as_cells(cells), ["4k-at-500"], repeats=3, metrics=metrics)
    assert jt.records[1]["vs_previous"] == pytest.approx(1.5 / 3.0 - 1) and jt.records[1]["vs_previous_verdict"] == "lower p99, better"
    assert "vs previous step (p99)" in [c.header for c in jt.columns]
    # targets keep working; a job judged by a latency shows it
    tt = targets_table(as_measurements(meas), as_targets([{"job": "4k-at-500", "cell": "s1", "layer": "ext4", "max_p99_ms": 5, "min_iops": 400}]),
                       {"4k-at-500": Metric.P999})
    assert tt is not None and tt.records[0]["result"] == "PASS" and tt.records[0]["metric"] == "p99.9"
    assert "p99.9 3.30 ms" in render([tt], Format.TABLE, wide=True) and not tt.records[0].get("note")


def test_two_runs_compared_on_p99(db):
    a = store(db, PLAN_JOBS, RATED_GROUPS[:2], tag="a")
    slower = [("host", None, RATED, RATED_GROUPS[0][3]),
              ("guest", "baseline", RATED, [(500.0, 1.6), (500.0, 1.7), (499.0, 1.8)])]
    b = store(db, PLAN_JOBS, slower, tag="b")
    runs = []
    for rid in (a, b):
        d = load_run(db, rid)
        runs.append((d.run, d.measured, list(d.cells)))
    (table,), refusals = compare_runs(runs, 0)
    assert refusals == []
    host, guest = table.records
    assert guest["metric"] == "p99" and guest["A_iops"] == guest["B_iops"] == 500.0
    assert guest["B_vs_baseline"] == pytest.approx(1.7 / 1.0 - 1) and guest["B_vs_baseline_verdict"] == "higher p99, worse"
    assert guest["B_vs_baseline_low"] == pytest.approx(1.6 / 1.1 - 1) and guest["B_vs_baseline_high"] == pytest.approx(1.8 / 0.95 - 1)
    assert host["B_vs_baseline_verdict"] == "within noise"
    text = render([table], Format.TABLE, wide=True)
    assert "B vs A (p99)" in text and "+70.0% [+45.5, +89.5] higher p99, worse" in text
    # a saturated group in one run: flagged, not compared
    c = store(db, PLAN_JOBS, [RATED_GROUPS[0], ("guest", "baseline", RATED, [(400.0, 1.0)] * 3)], tag="c")
    d = load_run(db, c)
    (table,), _ = compare_runs([runs[0], (d.run, d.measured, list(d.cells))], 0)
    guest = table.records[1]
    assert guest["B_vs_baseline"] is None and guest["B_vs_baseline_verdict"] is None
    assert guest["note"].endswith("B saturated (achieved 400 of 500 IOPS): not compared")


def test_runs_without_a_metric_read_as_iops(db):
    old_jobs = [{"name": "4k-randread", "describe": "randread 4K QD4", "sync": False}]  # a plan stored before metrics
    old = dict(FREE)
    del old["jobfile"]
    groups = [(s, c, old, r) for s, c, _, r in FREE_GROUPS]
    a = store(db, old_jobs, groups, tag="a")
    b = store(db, old_jobs, groups, tag="b")
    data = load_run(db, a)
    assert data.plan.job_metrics == {"4k-randread": Metric.IOPS}
    assert metric_of("4k-randread", None, None) is Metric.IOPS and metric_of("x", [as_measurement({"job_params": RATED})], None) is Metric.P99
    t = gap_table(list(data.measurements), data.valid_cells, data.jobs, 3, metrics=data.plan.job_metrics)
    assert t.records == gap_table(list(data.measurements), data.valid_cells, data.jobs, 3).records
    assert "vs baseline" in [c.header for c in t.columns] and stats.describe_method() in t.notes
    runs = [(d.run, d.measured, list(d.cells)) for d in (load_run(db, a), load_run(db, b))]
    (table,), _ = compare_runs(runs, 0)
    assert "metric" not in table.records[0] and "B vs A" in [c.header for c in table.columns]
    assert table.records[1]["B_vs_baseline_verdict"] == "within noise"


def test_change_words_and_method_note():
    assert stats.change_words(Metric.IOPS) == ("faster", "slower") and stats.change_words(Metric.MBPS) == ("faster", "slower")
    assert stats.change_words(Metric.P999) == ("higher p99.9, worse", "lower p99.9, better")
    assert stats.change([2.0, 2.1, 2.2], [1.0, 1.1, 0.9], metric=Metric.P50).verdict == "higher p50, worse"
    assert stats.change([2.0, 2.1, 2.2], [1.0, 1.1, 0.9], metric=Metric.MBPS).verdict == "faster"
    assert stats.describe_method(metrics=[Metric.IOPS]) == stats.describe_method()
    assert "ratio of medians of each repeat's MB/s (percentile method" in stats.describe_method(metrics=[Metric.MBPS])
    assert stats.change([1.0] * 3, [0.0] * 3, metric=Metric.P99).why == "the reference median is 0 ms (p99)"


def test_compare_shows_a_judged_latency_it_has_no_column_for(db):
    jobs = [dict(PLAN_JOBS[0], metric="p99.9")]
    runs = []
    for tag in ("a", "b"):
        d = load_run(db, store(db, jobs, RATED_GROUPS[:3], tag=tag))
        runs.append((d.run, d.measured, list(d.cells)))
    (table,), _ = compare_runs(runs, 0)
    wb = table.records[2]
    assert wb["metric"] == "p99.9" and wb["A_metric_ms"] == wb["B_metric_ms"] == pytest.approx(2.2)
    text = render([table], Format.TABLE, wide=True)
    assert "judged ms A" in text and "p99.9 2.20" in text and "B vs A (p99.9)" in text
    assert wb["B_vs_baseline_verdict"] == "within noise"
