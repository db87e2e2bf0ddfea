"""Comparisons and rendering, from synthetic stored rows (exact expected output)."""

import json

import pytest

from vmbench.report.compare import aggregate, gap_rows, target_results
from vmbench.report.render import Format, render
from vmbench.report.tables import gap_table, layer_table


def m(side, cell, layer, job, iops, bw, bins, stack=None, repeat=1, sync=False, job_hash="h1"):
    return {"side": side, "cell": cell, "stack": stack, "layer": layer, "job": job, "iops": iops, "bw_bytes": bw,
            "clat_bins": {str(k): v for k, v in bins.items()}, "job_hash": job_hash, "sync": sync, "repeat": repeat, "settings": {}}


CELLS = [{"name": "baseline", "stacks": [], "settings": {}, "valid": True}, {"name": "cache=writeback", "stacks": [], "settings": {}, "valid": True}]
MEAS = [
    m("host", None, "host", "4k-randwrite", 40000.0, 163840000.0, {50000: 90, 200000: 9, 1000000: 1}),
    m("guest", "baseline", "raw", "4k-randwrite", 8000.0, 32768000.0, {400000: 90, 2000000: 9, 9000000: 1}),
    m("guest", "cache=writeback", "raw", "4k-randwrite", 10000.0, 40960000.0, {300000: 95, 1000000: 5}),
]


def test_gap_is_host_over_guest_and_baseline_change():
    rows = gap_rows(MEAS, CELLS, ["4k-randwrite"])
    assert [(r.side, r.cell) for r in rows] == [("host", None), ("guest", "baseline"), ("guest", "cache=writeback")]
    assert rows[1].gap == 40000.0 / 8000.0
    assert rows[2].gap == 4.0 and rows[2].vs_baseline == pytest.approx(0.25)
    assert rows[1].figures.p50_ms == 0.4 and rows[1].figures.p99_ms == 2.0 and rows[1].figures.p999_ms == 9.0


def test_gap_table_text_exact():
    t = gap_table(MEAS, CELLS, ["4k-randwrite"], repeats=1)
    assert render([t], Format.TABLE) == """\
Host vs guest, raw scratch disk
===============================
job           side    cell             IOPS    MB/s    p50 ms    p99 ms    p99.9 ms    gap (host/guest)    vs baseline    note
------------  ------  ---------------  ------  ------  --------  --------  ----------  ------------------  -------------  ------
4k-randwrite  host                     40,000  163.8   0.050     0.200     1.00        1.00x               -
4k-randwrite  guest   baseline         8,000   32.8    0.400     2.00      9.00        5.00x               -
4k-randwrite  guest   cache=writeback  10,000  41.0    0.300     1.00      1.00        4.00x               +25.0%
  gap = host IOPS / guest IOPS on the same storage and the same fio job (1.00x: no loss; 5.00x: the guest gets a fifth).
  Latency is fio's completion latency (clat); percentiles come from fio's json+ histograms.
  vs baseline = change in IOPS from the first cell (baseline).
"""


def test_markdown_csv_json():
    t = gap_table(MEAS[:2], CELLS[:1], ["4k-randwrite"], repeats=1)
    md = render([t], Format.MARKDOWN, {"run": "1"})
    assert md.startswith("- **run**: 1\n\n## Host vs guest, raw scratch disk\n| job ")
    assert "| 4k-randwrite | guest  | 8,000  | 32.8   | 0.400    | 2.00     | 9.00       | 5.00x              |        |" in md
    csv_text = render([t], Format.CSV)
    assert csv_text.splitlines()[0] == "table,job,side,cell,layer,iops,mb_s,p50_ms,p95_ms,p99_ms,p999_ms,repeats,cv,gap,vs_baseline,note"
    assert csv_text.splitlines()[2].startswith("gaps,4k-randwrite,guest,baseline,raw,8000.0,32.768,0.4,")
    doc = json.loads(render([t], Format.JSON, {"run": "1"}))
    rec = doc["tables"][0]["records"][1]
    assert rec["gap"] == doc["tables"][0]["records"][0]["iops"] / rec["iops"] == 5.0


def test_guest_beating_host_is_flagged_and_different_jobs_not_compared():
    meas = [MEAS[0], m("guest", "baseline", "raw", "4k-randwrite", 50000.0, 1.0, {1: 1})]
    assert gap_rows(meas, CELLS[:1], ["4k-randwrite"])[1].note == "beats host: cached?"
    meas = [MEAS[0], m("guest", "baseline", "raw", "4k-randwrite", 5.0, 1.0, {1: 1}, job_hash="other")]
    row = gap_rows(meas, CELLS[:1], ["4k-randwrite"])[1]
    assert row.gap is None and "not compared" in row.note


def test_repeats_median_cv_and_merged_percentiles():
    rows = [m("guest", "b", "raw", "j", v, v * 4096, {100: 99, 5000: 1}, repeat=i) for i, v in enumerate([900.0, 1000.0, 1300.0])]
    f = aggregate(rows)
    assert f.iops == 1000.0 and f.repeats == 3
    assert f.cv == pytest.approx(0.1952, abs=1e-3)
    assert f.p99_ms == 0.0001 and f.p999_ms == 0.005


def test_layer_table_costs():
    cells = [{"name": "baseline", "stacks": ["luks-xfs"], "settings": {}, "valid": True}]
    meas = [
        MEAS[0], MEAS[1],
        m("guest", "baseline", "luks2", "4k-randwrite", 4000.0, 1.0, {1: 1}, stack="luks-xfs"),
        m("guest", "baseline", "luks2+xfs", "4k-randwrite", 3000.0, 1.0, {1: 1}, stack="luks-xfs"),
    ]
    t = layer_table(meas, cells, ["4k-randwrite"])
    got = [(r["layer"], r["iops"], r["vs_below"], r["gap"]) for r in t.records]
    assert got == [("host", 40000.0, None, 1.0), ("raw", 8000.0, -0.8, 5.0), ("+luks2", 4000.0, -0.5, 10.0),
                   ("+xfs", 3000.0, -0.25, pytest.approx(13.333, abs=1e-3))]


def test_targets_pass_fail():
    meas = [m("guest", "baseline", "luks2+xfs", "1m-write", 100.0, 104857600.0, {4000000: 1}, stack="s")]
    res = target_results(meas, [{"job": "1m-write", "layer": "luks2+xfs", "min_mb_s": 118.0, "stack": None, "cell": None,
                                  "min_iops": None, "max_p99_ms": 5.0}])
    assert len(res) == 1 and not res[0].passed and res[0].failures == ("104.9 MB/s < 118",)


def test_journey_compares_each_steps_top_layer_with_the_step_before():
    from vmbench.report.tables import journey_table

    cells = [{"name": "s1", "stacks": ["lvm-ext4"]}, {"name": "s2", "stacks": ["lvm-ext4"]}, {"name": "s3", "stacks": []}]
    meas = [MEAS[0]]
    for cell, iops in (("s1", 1000.0), ("s2", 1500.0)):
        meas.append(dict(m("guest", cell, "partition", "4k-randwrite", 9e9, 1.0, {1: 1}, stack="lvm-ext4"), depth=1))
        meas.append(dict(m("guest", cell, "partition+lvm+ext4", "4k-randwrite", iops, 1.0, {1: 1}, stack="lvm-ext4"), depth=3))
    meas.append(dict(m("guest", "s3", "raw", "4k-randwrite", 3000.0, 1.0, {1: 1}), depth=0))
    t = journey_table(meas, cells, ["4k-randwrite"])
    assert [(r["step"], r["layer"], r["iops"], r["gap"], r["vs_previous"]) for r in t.records] == [
        ("s1", "partition+lvm+ext4", 1000.0, 40.0, None),
        ("s2", "partition+lvm+ext4", 1500.0, pytest.approx(26.667, abs=1e-3), pytest.approx(0.5)),
        ("s3", "raw", 3000.0, pytest.approx(13.333, abs=1e-3), pytest.approx(1.0)),
    ]


def test_cells_of_one_boot_share_the_raw_measurement():
    from vmbench.report.build import shared_raw_rows

    cells = [{"name": "a", "id": 1, "evidence": {"raw_measured_in": "a"}}, {"name": "b", "id": 2, "evidence": {"raw_measured_in": "a"}}]
    shared = shared_raw_rows(cells, [MEAS[0], dict(MEAS[1], cell="a")])
    assert len(shared) == 1 and shared[0]["cell"] == "b" and shared[0]["shared_from"] == "a"
    rows = gap_rows([MEAS[0], dict(MEAS[1], cell="a")] + shared, [{"name": "a"}, {"name": "b"}], ["4k-randwrite"])
    assert rows[2].note == "raw disk shared with a (same VM)" and rows[2].vs_baseline == 0.0


def test_unmatched_target_is_shown_as_not_measured():
    from vmbench.report.tables import targets_table

    target = {"job": "1m-write", "layer": "luks2+xfs", "min_mb_s": 118.0, "stack": None, "cell": None, "min_iops": None, "max_p99_ms": 5.0}
    t = targets_table([], [target])
    assert [(r["result"], r["job"], r["target"]) for r in t.records] == [("NOT MEASURED", "1m-write", "MB/s >= 118, p99 <= 5 ms")]
    meas = [m("guest", "baseline", "luks2+xfs", "1m-write", 200.0, 209715200.0, {}, stack="s")]
    assert target_results(meas, [target])[0].failures == ("no latency histogram to judge p99",)


def test_cache_honesty_notes():
    from vmbench.report.compare import cache_notes

    row = {"job_params": {"rw": "randread", "size": 256 << 20, "direct": True}, "settings": {"cache": "writeback", "memory_mib": 1024}}
    assert cache_notes(row, 24 << 30) == ["reads may come from the host page cache (cache=writeback)"]
    assert cache_notes(dict(row, settings={"cache": "none", "memory_mib": 1024}), 24 << 30) == []
    assert cache_notes({"job_params": {"rw": "write", "size": 1 << 20, "direct": False}, "settings": {"cache": "none", "memory_mib": 1024}}, None) == [
        "buffered I/O within the guest's RAM"]
