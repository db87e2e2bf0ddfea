"""Comparisons and rendering, from synthetic stored rows (exact expected output)."""

import json

import pytest

from tests.records import as_cells, as_environment, as_measurement, as_measurements, as_targets
from vmbench.report.rows import aggregate, gap_rows
from vmbench.report.targets import target_results
from vmbench.report.render import Format, render
from vmbench.report.tables import gap_table, layer_table
from vmbench.results.plan import read_plan


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
    rows = gap_rows(as_measurements(MEAS), as_cells(CELLS), ["4k-randwrite"])
    assert [(r.side, r.cell) for r in rows] == [("host", None), ("guest", "baseline"), ("guest", "cache=writeback")]
    assert rows[1].gap == 40000.0 / 8000.0
    assert rows[2].gap == 4.0 and rows[2].vs_baseline == pytest.approx(0.25)
    assert rows[1].figures.p50_ms == 0.4 and rows[1].figures.p99_ms == 2.0 and rows[1].figures.p999_ms == 9.0


def test_gap_table_text_exact():
    t = gap_table(as_measurements(MEAS), as_cells(CELLS), ["4k-randwrite"], repeats=1)
    assert render([t], Format.TABLE, wide=True) == """\
Host vs guest, raw scratch disk
===============================
job           side    cell             IOPS    MB/s    p50 ms    p99 ms    p99.9 ms    gap (host/guest)    vs baseline          note
------------  ------  ---------------  ------  ------  --------  --------  ----------  ------------------  -------------------  ------
4k-randwrite  host                     40,000  163.8   0.050     0.200     1.00        1.00x               -
4k-randwrite  guest   baseline         8,000   32.8    0.400     2.00      9.00        5.00x (no verdict)  -
4k-randwrite  guest   cache=writeback  10,000  41.0    0.300     1.00      1.00        4.00x (no verdict)  +25.0% (no verdict)
  gap = host IOPS / guest IOPS on the same storage and the same fio job (1.00x: no loss; 5.00x: the guest gets a fifth).
  Latency is fio's completion latency (clat); percentiles come from fio's json+ histograms.
  vs baseline = change in IOPS from the first cell (baseline).
  Deltas carry no verdict where a side has fewer than 3 repeats (here as few as 1): a bootstrap interval cannot tell a change from noise with so few; run with repeats: 3 or more.
  sync:       no sync writes (every job asynchronous)
  repeats:    1 per group (fixed 1 repeat)
  not stated: QEMU cache mode of baseline, cache=writeback; O_DIRECT or buffered for 4k-randwrite; working set of 4k-randwrite; runtime and ramp of 4k-randwrite
"""


def test_markdown_csv_json():
    t = gap_table(as_measurements(MEAS[:2]), as_cells(CELLS[:1]), ["4k-randwrite"], repeats=1)
    md = render([t], Format.MARKDOWN, {"run": "1"})
    assert md.startswith("- **run**: 1\n\n## Host vs guest, raw scratch disk\n| job ")
    assert "| 4k-randwrite | guest  | 8,000  | 32.8   | 0.400    | 2.00     | 9.00       | 5.00x (no verdict) |        |" in md
    assert md.endswith("\n\n**Facts**\n\n- **sync**: no sync writes (every job asynchronous)\n- **repeats**: 1 per group (fixed 1 repeat)\n"
                       "- **not stated**: QEMU cache mode of baseline; O_DIRECT or buffered for 4k-randwrite; working set of 4k-randwrite; "
                       "runtime and ramp of 4k-randwrite\n")
    csv_text = render([t], Format.CSV)
    # the v1 columns first, in their order; the new ones after them
    assert csv_text.splitlines()[0] == ("table,job,side,cell,layer,iops,mb_s,p50_ms,p95_ms,p99_ms,p999_ms,repeats,cv,gap,vs_baseline,note,"
                                        "repeat_stop,gap_low,gap_high,gap_verdict,gap_why,"
                                        "vs_baseline_low,vs_baseline_high,vs_baseline_verdict,vs_baseline_why")
    assert csv_text.splitlines()[2].startswith("gaps,4k-randwrite,guest,baseline,raw,8000.0,32.768,0.4,")
    assert csv_text.splitlines()[2].endswith(",fixed 1 repeat,,,,fewer than 3 repeats,,,,")
    doc = json.loads(render([t], Format.JSON, {"run": "1"}))
    rec = doc["tables"][0]["records"][1]
    assert rec["gap"] == doc["tables"][0]["records"][0]["iops"] / rec["iops"] == 5.0
    assert (rec["gap_low"], rec["gap_high"], rec["gap_verdict"], rec["gap_why"]) == (None, None, None, "fewer than 3 repeats")
    assert rec["vs_baseline_verdict"] is None and rec["repeat_stop"] == "fixed 1 repeat"
    assert doc["tables"][0]["facts"]["repeats"] == "1 per group (fixed 1 repeat)"
    assert doc["tables"][0]["missing"] == ["QEMU cache mode of baseline", "O_DIRECT or buffered for 4k-randwrite",
                                           "working set of 4k-randwrite", "runtime and ramp of 4k-randwrite"]


def test_guest_beating_host_is_flagged_and_different_jobs_not_compared():
    meas = [MEAS[0], m("guest", "baseline", "raw", "4k-randwrite", 50000.0, 1.0, {1: 1})]
    assert gap_rows(as_measurements(meas), as_cells(CELLS[:1]), ["4k-randwrite"])[1].note == "beats host: cached?"
    meas = [MEAS[0], m("guest", "baseline", "raw", "4k-randwrite", 5.0, 1.0, {1: 1}, job_hash="other")]
    row = gap_rows(as_measurements(meas), as_cells(CELLS[:1]), ["4k-randwrite"])[1]
    assert row.gap is None and "not compared" in row.note


def test_repeats_median_cv_and_merged_percentiles():
    rows = [m("guest", "b", "raw", "j", v, v * 4096, {100: 99, 5000: 1}, repeat=i) for i, v in enumerate([900.0, 1000.0, 1300.0])]
    f = aggregate(as_measurements(rows))
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
    t = layer_table(as_measurements(meas), as_cells(cells), ["4k-randwrite"])
    got = [(r["layer"], r["iops"], r["vs_below"], r["gap"]) for r in t.records]
    assert got == [("host", 40000.0, None, 1.0), ("raw", 8000.0, -0.8, 5.0), ("+luks2", 4000.0, -0.5, 10.0),
                   ("+xfs", 3000.0, -0.25, pytest.approx(13.333, abs=1e-3))]
    assert [(r["vs_below_verdict"], r["vs_below_why"], r["gap_why"]) for r in t.records] == [
        (None, None, None)] + [(None, "fewer than 3 repeats", "fewer than 3 repeats")] * 3


def test_targets_pass_fail():
    meas = [m("guest", "baseline", "luks2+xfs", "1m-write", 100.0, 104857600.0, {4000000: 1}, stack="s")]
    res = target_results(as_measurements(meas), as_targets([{"job": "1m-write", "layer": "luks2+xfs", "min_mb_s": 118.0, "stack": None, "cell": None,
                                  "min_iops": None, "max_p99_ms": 5.0}]))
    assert len(res) == 1 and not res[0].passed and res[0].failures == ("104.9 MB/s < 118",)


def test_journey_compares_each_steps_top_layer_with_the_step_before():
    from vmbench.report.tables import journey_table

    cells = [{"name": "s1", "stacks": ["lvm-ext4"]}, {"name": "s2", "stacks": ["lvm-ext4"]}, {"name": "s3", "stacks": []}]
    meas = [MEAS[0]]
    for cell, iops in (("s1", 1000.0), ("s2", 1500.0)):
        meas.append(dict(m("guest", cell, "partition", "4k-randwrite", 9e9, 1.0, {1: 1}, stack="lvm-ext4"), depth=1))
        meas.append(dict(m("guest", cell, "partition+lvm+ext4", "4k-randwrite", iops, 1.0, {1: 1}, stack="lvm-ext4"), depth=3))
    meas.append(dict(m("guest", "s3", "raw", "4k-randwrite", 3000.0, 1.0, {1: 1}), depth=0))
    t = journey_table(as_measurements(meas), as_cells(cells), ["4k-randwrite"])
    assert [(r["step"], r["layer"], r["iops"], r["gap"], r["vs_previous"]) for r in t.records] == [
        ("s1", "partition+lvm+ext4", 1000.0, 40.0, None),
        ("s2", "partition+lvm+ext4", 1500.0, pytest.approx(26.667, abs=1e-3), pytest.approx(0.5)),
        ("s3", "raw", 3000.0, pytest.approx(13.333, abs=1e-3), pytest.approx(1.0)),
    ]
    assert [r["vs_previous_why"] for r in t.records] == [None, "fewer than 3 repeats", "fewer than 3 repeats"]
    assert "vs_previous_low" in t.records[0] and t.records[1]["vs_previous_verdict"] is None


def test_cells_of_one_boot_share_the_raw_measurement():
    from vmbench.report.load import shared_raw_rows

    cells = [{"name": "a", "id": 1, "evidence": {"raw_measured_in": "a"}}, {"name": "b", "id": 2, "evidence": {"raw_measured_in": "a"}}]
    shared = shared_raw_rows(as_cells(cells), as_measurements([MEAS[0], dict(MEAS[1], cell="a")]))
    assert len(shared) == 1 and shared[0].cell == "b" and shared[0].shared_from == "a"
    rows = gap_rows(as_measurements([MEAS[0], dict(MEAS[1], cell="a")] + shared), as_cells([{"name": "a"}, {"name": "b"}]), ["4k-randwrite"])
    assert rows[2].note == "raw disk shared with a (same VM)" and rows[2].vs_baseline == 0.0


def test_unmatched_target_is_shown_as_not_measured():
    from vmbench.report.tables import targets_table

    target = {"job": "1m-write", "layer": "luks2+xfs", "min_mb_s": 118.0, "stack": None, "cell": None, "min_iops": None, "max_p99_ms": 5.0}
    t = targets_table(as_measurements([]), as_targets([target]))
    assert [(r["result"], r["job"], r["target"]) for r in t.records] == [("NOT MEASURED", "1m-write", "MB/s >= 118, p99 <= 5 ms")]
    meas = [m("guest", "baseline", "luks2+xfs", "1m-write", 200.0, 209715200.0, {}, stack="s")]
    assert target_results(as_measurements(meas), as_targets([target]))[0].failures == ("no latency histogram to judge p99",)


def test_cache_honesty_notes():
    from vmbench.report.rows import cache_notes

    row = {"job_params": {"rw": "randread", "size": 256 << 20, "direct": True}, "settings": {"cache": "writeback", "memory_mib": 1024}}
    assert cache_notes(as_measurement(row), 24 << 30) == ["reads may come from the host page cache (cache=writeback)"]
    assert cache_notes(as_measurement(dict(row, settings={"cache": "none", "memory_mib": 1024})), 24 << 30) == []
    assert cache_notes(as_measurement({"job_params": {"rw": "write", "size": 1 << 20, "direct": False}, "settings": {"cache": "none", "memory_mib": 1024}}), None) == [
        "buffered I/O within the guest's RAM"]


# ---- intervals, verdicts, repeats and admissibility facts ------------------------------------

from vmbench.report.facts import RepeatPolicy, admissibility  # noqa: E402
from vmbench.report.tables import journey_table  # noqa: E402

P4K = {"rw": "randwrite", "bs": 4096, "iodepth": 4, "size": 256 << 20, "direct": True, "runtime": 30.0, "ramp": 5.0, "jobfile": None}
UNSAFE = [8100.0, 7200.0, 8900.0, 7600.0, 8600.0, 7900.0, 8400.0, 7400.0, 8800.0, 8000.0]  # CV 7.2%
RCELLS = [{"name": "baseline", "stacks": [], "settings": {"cache": "none", "memory_mib": 1024}, "valid": True},
          {"name": "cache=writeback", "stacks": [], "settings": {"cache": "writeback", "memory_mib": 1024}, "valid": True},
          {"name": "cache=unsafe", "stacks": [], "settings": {"cache": "unsafe", "memory_mib": 1024}, "valid": True}]


def repeats(side, cell, values, layer=None, stack=None, params=P4K, job="4k-randwrite", settings=None, depth=0):
    out = []
    for i, v in enumerate(values, 1):
        row = m(side, cell, layer or ("host" if side == "host" else "raw"), job, v, v * 4096, {100000: 99, 400000: 1}, stack=stack, repeat=i)
        out.append(dict(row, job_params=params, settings=settings or {}, depth=depth))
    return out


RMEAS = (repeats("host", None, [40000.0, 41000.0, 39500.0])
         + repeats("guest", "baseline", [8000.0, 8200.0, 7900.0], settings=RCELLS[0]["settings"])
         + repeats("guest", "cache=writeback", [9000.0, 9400.0, 9100.0], settings=RCELLS[1]["settings"])
         + repeats("guest", "cache=unsafe", UNSAFE, settings=RCELLS[2]["settings"]))


def test_gap_table_with_intervals_verdicts_and_repeat_policy_exact():
    t = gap_table(as_measurements(RMEAS), as_cells(RCELLS), ["4k-randwrite"], RepeatPolicy(3, 10, 0.05), env=as_environment({"host_memory_mib": 16384}))
    assert render([t], Format.TABLE, wide=True) == """\
Host vs guest, raw scratch disk
===============================
job           side    cell             IOPS    MB/s    p50 ms    p99 ms    p99.9 ms    CV    repeats                  gap (host/guest)        vs baseline                      note
------------  ------  ---------------  ------  ------  --------  --------  ----------  ----  -----------------------  ----------------------  -------------------------------  ------
4k-randwrite  host                     40,000  163.8   0.100     0.100     0.400       1.9%  stopped at CV 1.9% < 5%  1.00x                   -
4k-randwrite  guest   baseline         8,000   32.8    0.100     0.100     0.400       1.9%  stopped at CV 1.9% < 5%  5.00x [4.82, 5.19] gap  -
4k-randwrite  guest   cache=writeback  9,100   37.3    0.100     0.100     0.400       2.3%  stopped at CV 2.3% < 5%  4.40x [4.20, 4.56] gap  +13.7% [+9.8, +19.0] faster
4k-randwrite  guest   cache=unsafe     8,050   33.0    0.100     0.100     0.400       7.2%  max 10 repeats, CV 7.2%  4.97x [4.65, 5.29] gap  +0.6% [-6.2, +8.2] within noise
  gap = host IOPS / guest IOPS on the same storage and the same fio job (1.00x: no loss; 5.00x: the guest gets a fifth).
  Latency is fio's completion latency (clat); percentiles come from fio's json+ histograms, merged over repeats; IOPS and MB/s are medians.
  vs baseline = change in IOPS from the first cell (baseline).
  [low, high] = 95% bootstrap interval of the ratio of median IOPS (percentile method, 9,999 resamples of the repeats, fixed seed); 'within noise' when it includes no change; 3 or more repeats on both sides are needed for a verdict.
  cache:        QEMU cache none (baseline), writeback (cache=writeback), unsafe (cache=unsafe); every job O_DIRECT (guest page cache bypassed); host page cache in use with cache=writeback/unsafe, not dropped before guest runs
  sync:         no sync writes (every job asynchronous)
  working set:  largest job 256 MiB (4k-randwrite); fits in guest RAM 1,024 MiB; fits in host RAM 16.0 GiB
  steady state: every job 30 s + 5 s ramp
  repeats:      3..10 per group (3..10 repeats until IOPS CV < 5%)
"""
    rec = t.records[2]
    assert rec["vs_baseline"] == pytest.approx(9100 / 8000 - 1)
    assert rec["vs_baseline_low"] == pytest.approx(9000 / 8200 - 1) and rec["vs_baseline_high"] == pytest.approx(9400 / 7900 - 1)
    assert rec["vs_baseline_verdict"] == "faster" and rec["gap_verdict"] == "gap" and rec["repeats"] == 3
    assert t.records[3]["vs_baseline_verdict"] == "within noise" and t.records[3]["repeat_stop"] == "max 10 repeats, CV 7.2%"
    assert t.records[0]["gap_verdict"] is None and t.records[0]["gap_why"] is None  # the host against itself: not judged
    assert t.missing == []


def test_layer_and_journey_deltas_carry_intervals():
    cells = [{"name": "s1", "stacks": ["ext4"], "settings": {"cache": "none", "memory_mib": 1024}},
             {"name": "s2", "stacks": ["ext4"], "settings": {"cache": "none", "memory_mib": 1024}}]
    meas = (repeats("host", None, [40000.0, 41000.0, 39500.0])
            + repeats("guest", "s1", [8000.0, 8200.0, 7900.0]) + repeats("guest", "s1", [6000.0, 6100.0, 5900.0], "ext4", "ext4", depth=1)
            + repeats("guest", "s2", [8000.0, 8200.0, 7900.0]) + repeats("guest", "s2", [6050.0, 6000.0, 6150.0], "ext4", "ext4", depth=1))
    lt = layer_table(as_measurements(meas), as_cells(cells), ["4k-randwrite"], repeats=3)
    ext4 = [r for r in lt.records if r["layer"] == "+ext4"][0]
    assert ext4["vs_below"] == pytest.approx(6000 / 8000 - 1) and ext4["vs_below_verdict"] == "slower"
    assert ext4["vs_below_high"] == pytest.approx(6100 / 7900 - 1) and ext4["gap_verdict"] == "gap"
    text = render([lt], Format.TABLE, wide=True)
    assert "-25.0% [-28.0, -22.8] slower" in text and "repeats:      3 per group (fixed 3 repeats)" in text
    jt = journey_table(as_measurements(meas), as_cells(cells), ["4k-randwrite"], repeats=3)
    step2 = jt.records[1]
    assert step2["vs_previous"] == pytest.approx(6050 / 6000 - 1) and step2["vs_previous_verdict"] == "within noise"
    assert "+0.8% [-1.6, +4.2] within noise" in render([jt], Format.TABLE, wide=True)


def test_repeat_policy_from_plan_and_stop_reasons():
    assert read_plan({"repeats": 3}).repeat_policy == RepeatPolicy(3, 3, None)  # runs before repeat_policy: fixed
    assert read_plan({}).repeat_policy == RepeatPolicy(1, 1, None)
    policy = read_plan({"repeats": 3, "repeat_policy": {"min": 3, "max": 10, "until_cv": 0.05}}).repeat_policy
    assert policy == RepeatPolicy(3, 10, 0.05) and policy.adaptive
    assert policy.label() == "3..10 repeats until IOPS CV < 5%"
    assert policy.stop(4, 0.031) == "stopped at CV 3.1% < 5%"
    assert policy.stop(10, 0.072) == "max 10 repeats, CV 7.2%"
    assert policy.stop(10, 0.049) == "stopped at CV 4.9% < 5%"  # the last repeat brought it under
    assert policy.stop(5, 0.09) == "5 of max 10 repeats, CV 9.0% (run incomplete)"
    fixed = read_plan({"repeats": 3, "repeat_policy": {"min": 3, "max": 3, "until_cv": None}}).repeat_policy
    assert not fixed.adaptive and fixed.stop(3, 0.2) == "fixed 3 repeats" and fixed.stop(2, 0.1) == "2 of 3 repeats (run incomplete)"


def test_admissibility_facts_and_what_is_not_stated():
    buffered = dict(P4K, rw="randread", direct=False, size=2 << 30, runtime=5.0, ramp=0.0)
    synced = dict(P4K, rw="write", sync=True, size=64 << 20)
    jobfile = dict(P4K, jobfile={"path": "my.fio", "sha256": "ab"})
    meas = (repeats("guest", "c", [1.0, 2.0], params=buffered, job="cache-buster")
            + [dict(r, sync=True) for r in repeats("guest", "c", [1.0, 2.0, 3.0], params=synced, job="seq-sync")]
            + repeats("guest", "c", [1.0], params=jobfile, job="mine"))
    cells = [{"name": "c", "settings": {"cache": "writeback", "memory_mib": 1024}}]
    facts, missing = admissibility(as_measurements(meas), as_cells(cells), as_environment({}), RepeatPolicy(3, 3))
    assert facts == {
        "cache": "QEMU cache=writeback; buffered cache-buster (vmbench drops the page cache before each buffered run), O_DIRECT seq-sync; "
                 "host page cache in use with cache=writeback, not dropped before guest runs",
        "sync": "sync writes in seq-sync: compare them only with each other",
        "working set": "largest job 2,048 MiB (cache-buster); does not fit in guest RAM 1,024 MiB",
        "steady state": "cache-buster 5 s + 0 s ramp, seq-sync 30 s + 5 s ramp; WARNING: runtime under 10 s (cache-buster): "
                        "too short for steady state; WARNING: no ramp (cache-buster): start-up included",
        "repeats": "1..3 per group (fixed 3 repeats)",
    }
    assert missing == ["O_DIRECT or buffered for mine", "working set of mine", "host RAM (host_memory_mib not recorded)",
                       "runtime and ramp of mine"]
    facts, missing = admissibility(as_measurements(meas[:2]), as_cells([{"name": "c", "settings": {}}]), as_environment({"host_memory_mib": 1024}), RepeatPolicy())
    assert "does not fit in host RAM 1,024 MiB" in facts["working set"]
    assert missing == ["QEMU cache mode of c", "guest RAM of the cells"]
