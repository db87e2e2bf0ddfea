"""``vmbench history``: step detection on synthetic series (pure), the environment diff at a
step, the runs left out and why, compare's refusals splitting a series, the text fitting 120
columns, and the command's bad input."""

from __future__ import annotations

import argparse
import shutil

import pytest

from tests.unit.test_compare_runs import CELLS, run, runset
from tests.records import as_boots, as_environment
from vmbench.cli.history import scenario_name
from vmbench.cli.main import main
from vmbench.cli.parsers import add_history
from vmbench.errors import UsageError
from vmbench.fio.job import Metric
from vmbench.report.envdiff import differences, run_environment
from vmbench.report.history import HistoryRun, build_history, median_interval
from vmbench.report.historyview import NO_CHANGE, render_text, to_json
from vmbench.report.steps import find_steps, judge_split, run_noise

FAST = [[8000.0, 8200.0, 7900.0], [8100.0, 7950.0, 8150.0]]
SLOW = [[4000.0, 4100.0, 3950.0], [4050.0, 4000.0, 3900.0]]


# ---- step detection (pure, synthetic series) --------------------------------------------------


def test_one_step_is_found_where_it_is():
    steps = find_steps(FAST + SLOW)
    assert [s.at for s in steps] == [2]
    (s,) = steps
    assert s.before == (0, 2) and s.after == (2, 4) and s.delta.verdict == "slower"
    assert s.delta.value == pytest.approx(4000 / 8050 - 1) and s.delta.high < 0


def test_a_flat_noisy_series_has_no_step():
    series = [[100.0, 104.0, 97.0], [103.0, 99.0, 101.0], [96.0, 100.0, 102.0], [101.0, 98.0, 103.0], [99.0, 102.0, 100.0]]
    assert find_steps(series) == []


def test_two_steps_up_then_down():
    series = [[100.0, 101.0, 99.0]] * 2 + [[150.0, 152.0, 149.0]] * 2 + [[80.0, 81.0, 79.0]] * 2
    steps = find_steps(series)
    assert [(s.at, s.delta.verdict) for s in steps] == [(2, "faster"), (4, "slower")]


def test_no_verdict_from_fewer_than_three_repeats():
    """A 50% drop seen by one repeat a side is no step: verdicts come from intervals."""
    assert find_steps([[100.0], [50.0]]) == []
    assert judge_split([[100.0, 101.0], [50.0, 51.0]], 0, 1, 2) is None


def test_two_single_runs_never_make_a_step():
    """However tight their repeats, two runs alone cannot tell a step from the noise between
    runs (seen for real: two TCG runs of the same guest, 2,300 then 1,479 IOPS, each with tight
    repeats); a third run on one side gives that noise."""
    assert find_steps([[2300.0, 2259.0, 2363.0], [1479.0, 962.0, 1563.0]]) == []
    assert [s.at for s in find_steps([[2300.0, 2259.0, 2363.0], [1479.0, 962.0, 1563.0], [297.0, 244.0, 299.0]])] == [2]


def test_a_move_inside_the_run_to_run_noise_is_no_step():
    """Each run's repeats are tight, but runs wander by 15% from one to the next: a 12% move
    between two groups of such runs is within what the series shows between runs."""
    series = [[100.0, 100.5, 99.5], [115.0, 115.5, 114.5], [100.0, 100.5, 99.5], [88.0, 88.5, 87.5], [101.0, 101.5, 100.5]]
    assert run_noise(series, 0, 3) > 0.13
    assert find_steps(series) == []
    assert find_steps(series, min_change=0.05) == []


def test_min_change_is_the_floor():
    series = [[100.0, 100.2, 99.8]] * 2 + [[93.0, 93.2, 92.8]] * 2  # a real but 7% move
    assert find_steps(series) == []
    assert [s.at for s in find_steps(series, min_change=0.05)] == [2]


def test_a_latency_step_is_judged_worse_when_it_rises():
    series = [[1.0, 1.02, 0.98]] * 2 + [[2.0, 2.05, 1.97]] * 2
    (s,) = find_steps(series, Metric.P99)
    assert s.delta.verdict == "higher p99, worse"


def test_median_interval():
    assert median_interval([1.0, 2.0]) == (None, None)
    assert median_interval([5.0, 5.0, 5.0]) == (5.0, 5.0)
    low, high = median_interval([8000.0, 8200.0, 7900.0])
    assert 7900.0 <= low <= 8000.0 <= high <= 8200.0


# ---- the environment at a step -----------------------------------------------------------------


def test_environment_differences_name_what_changed_and_skip_what_moves_by_itself():
    a = run_environment(as_environment({"host_kernel": "6.1.0-50", "qemu_version": "7.2.22", "pool_free_bytes": 10, "run_tag": "a",
                         "image": {"name": "debian12", "hash": "aa" * 32, "manifest": {"fio": "3.33"}}, "host_microcode": "0x1",
                         "pool_path": "/srv/a", "zfs_dataset_properties": {"sync": "standard"}}),
                        as_boots([{"guest": {"kernel": "6.1.0-18", "fio_version": "fio-3.33"}}]))
    b = run_environment(as_environment({"host_kernel": "6.1.0-51", "qemu_version": "7.2.22", "pool_free_bytes": 99, "run_tag": "b",
                         "image": {"name": "debian12", "hash": "bb" * 32, "manifest": {"fio": "3.35"}}, "host_microcode": "0x2",
                         "pool_path": "/srv/a", "zfs_dataset_properties": {"sync": "disabled"}}),
                        as_boots([{"guest": {"kernel": "6.1.0-18", "fio_version": "fio-3.35"}}]))
    got = [c.describe() for c in differences(a, b)]
    assert got == ["kernel: 6.1.0-50 -> 6.1.0-51", "fio (guest): fio-3.33 -> fio-3.35", "guest image: aaaaaaaaaaaa -> bbbbbbbbbbbb",
                   "CPU microcode: 0x1 -> 0x2", "zfs_dataset_properties.sync: standard -> disabled"]
    assert differences(a, a) == []


def test_a_fact_a_newer_vmbench_records_is_no_change():
    old = run_environment(as_environment({"vmbench_version": "0.9", "host_kernel": "6.1"}))
    new = run_environment(as_environment({"vmbench_version": "1.0", "host_kernel": "6.1", "host_microcode": "0x1"}))
    assert [c.describe() for c in differences(old, new)] == ["vmbench: 0.9 -> 1.0"]
    gone = run_environment(as_environment({"vmbench_version": "1.0", "host_kernel": "6.1"}))
    assert [c.describe() for c in differences(new, gone)] == ["CPU microcode: 0x1 -> -"]


def test_proxmox_packages_are_compared_one_by_one():
    a = run_environment(as_environment({"pveversion": "proxmox-ve: 8.4.0\npve-qemu-kvm: 9.2.0-5\nzfsutils-linux: 2.2.7-pve2"}))
    b = run_environment(as_environment({"pveversion": "proxmox-ve: 8.4.0\npve-qemu-kvm: 9.2.0-7\nzfsutils-linux: 2.2.7-pve2"}))
    assert [c.describe() for c in differences(a, b)] == ["package pve-qemu-kvm: 9.2.0-5 -> 9.2.0-7"]


# ---- a history of runs ------------------------------------------------------------------------


def hrun(i, guest, env=None, status="ok", **kw):
    r = run(i, env)
    if status != "ok":
        r = type(r)(**{**r.__dict__, "status": status})
    return HistoryRun(r, runset([40000.0, 40500.0, 39900.0], guest, **kw), CELLS)


def test_a_step_with_the_kernel_that_changed_there():
    h = build_history("s", [hrun(1, FAST[0]), hrun(2, FAST[1]), hrun(3, SLOW[0], {"host_kernel": "6.1.0-51"}),
                            hrun(4, SLOW[1], {"host_kernel": "6.1.0-51"})])
    host, guest = h.series
    assert host.steps == () and [p.change.verdict for p in host.points[1:]] == ["within noise"] * 3
    (st,) = guest.steps
    assert (st.at, st.before, st.after) == (2, (0, 1), (2, 3))
    assert [c.describe() for c in st.changes] == ["kernel: 6.1.0-50 -> 6.1.0-51"]
    assert guest.points[2].change.verdict == "slower"
    text = render_text(h)
    assert "STEP at #3 (2026-01-03): IOPS -50.3%" in text and "changed between #2 and #3: kernel: 6.1.0-50 -> 6.1.0-51" in text
    assert max(len(line) for line in text.splitlines()) <= 120
    doc = to_json(h)
    assert doc["series"][1]["steps"][0]["environment_changes"][0]["after"] == "6.1.0-51"


def test_a_step_with_nothing_recorded_changed_says_so():
    h = build_history("s", [hrun(1, FAST[0]), hrun(2, FAST[1]), hrun(3, SLOW[0])])
    (st,) = h.series[1].steps
    assert st.changes == () and NO_CHANGE.split(":")[0] in render_text(h)


def test_runs_left_out_say_why():
    runs = [hrun(1, FAST[0]), hrun(2, FAST[1], status="failed"), hrun(3, FAST[0], {"hostname": "kvm2"}), hrun(4, FAST[1]),
            HistoryRun(run(5), [], CELLS)]
    h = build_history("s", runs)
    assert [r.id for r in h.runs] == [1, 4]
    assert any(w.startswith("run 2 (r00000002, 2026-01-02): status failed") for w in h.left_out)
    assert any("run 3 (r00000003): another machine: hostname 'kvm2', the latest run's is 'kvm1'" in w for w in h.left_out)
    assert "run 5 (r00000005): no measurements" in h.left_out


def test_a_pair_compare_refuses_starts_a_new_segment():
    """Changed fio parameters: not the same experiment, so no change and no step across it."""
    runs = [hrun(1, FAST[0]), hrun(2, FAST[1]), hrun(3, SLOW[0], job_hash="h2", params={"bs": 8192}), hrun(4, SLOW[1], job_hash="h2",
                                                                                                          params={"bs": 8192})]
    guest = build_history("s", runs).series[1]
    assert guest.points[2].change is None and "fio parameters differ: bs 8192 vs 4096" in guest.points[2].refused
    assert guest.steps == ()


def test_many_runs_wrap_into_blocks_of_columns():
    runs = [hrun(i, FAST[i % 2]) for i in range(1, 10)]
    text = render_text(build_history("s", runs))
    assert max(len(line) for line in text.splitlines()) <= 120
    assert text.count("\nrun           #1") == 2 and "#7" in text


# ---- the command ------------------------------------------------------------------------------


def test_an_unknown_scenario_lists_the_stored_ones():
    with pytest.raises(UsageError) as exc:
        scenario_name("nosuch", ["quick", "cache-modes", "quick"])
    assert "no scenario 'nosuch'" in exc.value.message and exc.value.hint == "scenarios stored: cache-modes, quick"


@pytest.mark.parametrize("argv, message", [
    (["--since", "last week"], "--since last week: not a day"),
    (["--last", "0"], "--last 0: give 1 or more runs"),
    (["--format", "html"], "--format html writes a file"),
    (["--format", "xml"], "--format xml: choose table, json, html, influx or openmetrics"),
    (["--url", "http://127.0.0.1:9/"], "--url sends InfluxDB line protocol: use --format influx"),
    (["--format", "openmetrics", "--url", "http://127.0.0.1:9/"], "--url sends InfluxDB line protocol, not openmetrics"),
])
def test_bad_input_is_refused_before_reading(tmp_path, data_dir, capsys, argv, message):
    db = tmp_path / "r.db"
    shutil.copyfile(data_dir / "results-v1.db", db)
    assert main(["history", "v1-fixture", "--db", str(db), *argv]) == 2
    assert message in capsys.readouterr().err


def test_history_of_a_stored_real_run(tmp_path, data_dir, capsys):
    db = tmp_path / "r.db"
    shutil.copyfile(data_dir / "results-v1.db", db)
    assert main(["history", "v1-fixture", "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "History of scenario v1-fixture: 1 run(s) compared" in out and "4k-randwrite · guest · cell baseline, raw" in out
    assert "58,756" in out  # the host's median IOPS, as the report prints it


def test_parser_has_the_options():
    sub = argparse.ArgumentParser().add_subparsers()
    sp = add_history(sub)
    args = sp.parse_args(["quick", "--since", "2026-01-01", "--last", "3", "--format", "json"])
    assert (args.scenario, args.since, args.last, args.format) == ("quick", "2026-01-01", 3, "json")



def test_the_html_page_has_a_trend_plot_per_series_and_escapes_stored_text(tmp_path):
    from vmbench.report.historypage import write_history_html

    runs = [hrun(1, FAST[0]), hrun(2, FAST[1]), hrun(3, SLOW[0], {"host_kernel": "<b>6.1</b> http://x"}), hrun(4, SLOW[1])]
    page = write_history_html(build_history("s", runs), tmp_path / "h.html").read_text()
    assert page.count("<svg") == 2 and page.count("step -50%") == 1
    assert "&lt;b&gt;6.1&lt;/b&gt; http&#58;//x" in page and "<b>6.1</b>" not in page
    assert "STEP at #3" in page and "IOPS per run:" in page and "<script" not in page
