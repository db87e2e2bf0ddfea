"""Sweeps (issue 30): ``sweep: {iodepth: [...]}`` expands a job into one job per point, stored
in the plan; the report gathers the points into curves with the knee by a stated rule."""

import pytest

from tests.records import as_environment
from vmbench.errors import ScenarioError
from vmbench.report.curves import Curve, CurvePoint, curve_summary, curve_table, curves, sweep_knee_index
from vmbench.report.rows import Figures, Row
from vmbench.results.plan import read_plan
from vmbench.run.plan import make_plan
from vmbench.scenario.loader import parse_scenario

BASE = """
name: qd
storage: {scratch_size: 1G}
vm: {memory: 1G}
jobs:
  - {name: rr, rw: randread, bs: 4k, size: 64M, runtime: 3s, ramp: 1s, sweep: {iodepth: [16, 1, 4]}}
  - {profile: oltp, size: 64M, runtime: 3s, sweep: {numjobs: [1, 2]}}
"""


def test_a_sweep_is_one_job_per_point_named_after_its_job_and_stored_in_the_plan():
    s = parse_scenario(BASE, "qd.yaml")
    names = [j.name for j in s.jobs]
    assert names[:3] == ["rr.qd1", "rr.qd4", "rr.qd16"] and [j.iodepth for j in s.jobs[:3]] == [1, 4, 16]
    assert {j.sweep_of for j in s.jobs[:3]} == {"rr"} and s.jobs[2].sweep_key == "iodepth" and s.jobs[2].sweep_value == 16
    assert names[3:] == ["oltp.nj1", "oltp.nj2"] and [j.numjobs for j in s.jobs[3:]] == [1, 2]
    assert s.jobs[0].params()["sweep_of"] == "rr" and "sweep_of" not in parse_scenario(BASE.replace(
        ", sweep: {iodepth: [16, 1, 4]}", ""), "qd.yaml").jobs[0].params()  # unswept jobs store what they always did
    plan = read_plan(make_plan(s).summary())
    qd16 = next(j for j in plan.jobs if j.name == "rr.qd16")
    assert (qd16.sweep_of, qd16.sweep_key, qd16.sweep_value) == ("rr", "iodepth", 16)


@pytest.mark.parametrize("sweep, words", [
    ("{iodepth: [1]}", "two or more different whole numbers from 1 to 1024"),
    ("{iodepth: [1, 1]}", "two or more different"),
    ("{iodepth: [0, 4]}", "from 1 to 1024"),
    ("{numjobs: [1, 128]}", "from 1 to 64"),
    ("{bs: [4k, 8k]}", "a sweep varies one of iodepth, numjobs"),
    ("{iodepth: [1, 2], numjobs: [1, 2]}", "a sweep varies one of iodepth, numjobs"),
    ("[1, 2]", "a sweep varies one of iodepth, numjobs"),
])
def test_bad_sweeps_are_refused_naming_the_key(sweep, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(BASE.replace("{iodepth: [16, 1, 4]}", sweep), "qd.yaml")
    assert words in str(err.value) and "sweep" in str(err.value)


def test_a_swept_setting_set_beside_its_sweep_and_a_job_file_sweep_are_refused():
    with pytest.raises(ScenarioError, match="iodepth is swept"):
        parse_scenario(BASE.replace("size: 64M,", "size: 64M, iodepth: 8,"), "qd.yaml")
    with pytest.raises(ScenarioError, match="a job file sets its own iodepth and numjobs"):
        parse_scenario(BASE.replace("- {profile: oltp, size: 64M, runtime: 3s, sweep: {numjobs: [1, 2]}}",
                                    "- {file: x.fio, sweep: {iodepth: [1, 2]}}"), "qd.yaml")


def test_the_knee_is_the_first_point_no_later_point_beats_by_ten_percent():
    assert sweep_knee_index([1000, 1900, 3500, 3700, 3750]) == 2
    assert sweep_knee_index([1000, 1050]) == 0  # the first step already adds too little
    assert sweep_knee_index([1000, 2000, 4000]) is None  # still rising: no knee within the sweep
    assert sweep_knee_index([872, 753, 1890]) is None  # a dip (noise) before a gain is not a knee
    assert sweep_knee_index([11940, 33502, 29648]) == 1
    assert sweep_knee_index([1000]) is None


def _row(job, side, cell, iops, p99, gap=None):
    fig = Figures(iops=iops, mb_s=iops * 4096 / 1e6, p50_ms=p99 / 4, p95_ms=None, p99_ms=p99, p999_ms=None, repeats=1,
                  cv=None, job_hash=job)
    return Row(job=job, sync=False, side=side, cell=cell, stack=None, layer="raw" if side == "guest" else "host",
               figures=fig, gap=gap)


def test_curves_per_cell_and_side_with_the_gap_at_each_point_and_the_knee_said():
    plan = read_plan(make_plan(parse_scenario(BASE, "qd.yaml")).summary())
    rows = [_row("rr.qd1", "host", None, 1000, 0.5), _row("rr.qd1", "guest", "baseline", 500, 1.0, 2.0),
            _row("rr.qd4", "host", None, 3800, 0.9), _row("rr.qd4", "guest", "baseline", 1000, 4.0, 3.8),
            _row("rr.qd16", "host", None, 4000, 3.5), _row("rr.qd16", "guest", "baseline", 1050, 16.0, 3.81),
            _row("other", "host", None, 1, 1)]
    got = curves(rows, plan.jobs)
    assert [(c.job, c.side, c.cell, [p.value for p in c.points]) for c in got] == [
        ("rr", "host", None, [1, 4, 16]), ("rr", "guest", "baseline", [1, 4, 16])]
    host, guest = got
    assert host.knee == 1 and guest.knee == 1 and [p.gap for p in guest.points] == [2.0, 3.8, 3.81]
    assert curve_summary(guest) == "rr baseline guest: knee at QD 4 (1,000 IOPS, p99 4.00 ms); QD 4 -> 16: +5% IOPS, p99 x4.0"
    table = curve_table(got, env=as_environment({"accelerator": "tcg"}))
    assert table is not None and table.name == "curves"
    assert [r["knee"] for r in table.records] == ["", "knee", "", "", "knee", ""]
    assert any("knee = the first point that no later point beats by 10% of IOPS or more" in n for n in table.notes)
    rising = Curve("rr", "iodepth", None, "host", (CurvePoint(1, 10, None, None, None), CurvePoint(2, 20, None, None, None)))
    assert curve_summary(rising) == "rr host: no knee up to QD 2: IOPS still rose by 10% or more at its end"
    assert curve_table([], env={}) is None
