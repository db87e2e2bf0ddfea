"""Repeat policies: fixed (`repeats: N`) and adaptive (`repeats: {min, max, until_cv}`), from the
scenario file through the plan to the runner (with the fake hypervisor), resume included; and
fio's time series stored as telemetry rows of their measurement."""

import functools
import textwrap

import pytest

from tests.fakes import FakeDriver, IopsScript, attach_fio_series, fake_series, fio_run, is_fio_run
from tests.unit.conftest import fresh_state
from tests.records import as_series
from vmbench.errors import CommandError, ScenarioError
from vmbench.paths import StatePaths
from vmbench.run.plan import estimate, make_plan
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.results.key import MeasurementKey as K
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import RepeatPolicy
from vmbench.results.runrow import RunRow

JOBS = """
name: r
storage: {scratch_size: 256M}
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: j2, rw: read, bs: 1M, size: 16M, runtime: 1s, ramp: 0s}
"""


@functools.lru_cache(maxsize=None)
def scenario(repeats: str, extra: str = ""):
    text = textwrap.dedent(JOBS) + extra + (f"repeats: {repeats}\n" if repeats else "")
    return parse_scenario(text, "r.yaml")


def error(repeats: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(textwrap.dedent(JOBS) + f"repeats: {repeats}\n", "r.yaml")
    return exc.value.message


# ---- parsing --------------------------------------------------------------------------------------


@pytest.mark.parametrize("repeats, policy", [
    ("", RepeatPolicy(1, 1, None)),
    ("5", RepeatPolicy(5, 5, None)),
    ("{min: 3, max: 10, until_cv: 5%}", RepeatPolicy(3, 10, 0.05)),
    ("{min: 3, max: 10, until_cv: 0.05}", RepeatPolicy(3, 10, 0.05)),
    ("{min: 3, max: 10, until_cv: '2.5 %'}", RepeatPolicy(3, 10, 0.025)),
    ("{min: 1, max: 100, until_cv: 99%}", RepeatPolicy(1, 100, 0.99)),
    ("{min: 4}", RepeatPolicy(4, 4, None)),
    ("{min: 4, max: 4}", RepeatPolicy(4, 4, None)),
    ("{min: 4, max: 4, until_cv: 5%}", RepeatPolicy(4, 4, 0.05)),  # allowed; never more than 4
    ("\n  min: 2\n  max: 3\n  until_cv: 10%", RepeatPolicy(2, 3, 0.1)),
])
def test_repeats_forms(repeats, policy):
    s = scenario(repeats)
    assert s.repeat_policy == policy and s.repeats == policy.min
    assert s.repeat_policy.adaptive == (policy.until_cv is not None and policy.max > policy.min)


@pytest.mark.parametrize("repeats, message", [
    ("0", "r.yaml:7: repeats: 0 is below the minimum 1"),
    ("101", "r.yaml:7: repeats: 101 is above the maximum 100"),
    ("2.5", "r.yaml:7: repeats: 2.5 is not a whole number 1..100 or a mapping {min: N, max: M, until_cv: 5%}"),
    ("many", "r.yaml:7: repeats: 'many' is not a whole number 1..100"),
    ("true", "r.yaml:7: repeats: True is not a whole number 1..100"),
    ("[3, 5]", "r.yaml:7: repeats: [3, 5] is not a whole number 1..100"),
    ("", "r.yaml:7: repeats: empty is not a whole number 1..100"),
    ("{max: 5, until_cv: 5%}", "r.yaml:7: repeats.min: is required"),
    ("{min: 0, max: 5, until_cv: 5%}", "r.yaml:7: repeats.min: 0 is below the minimum 1"),
    ("{min: 3, max: 101, until_cv: 5%}", "r.yaml:7: repeats.max: 101 is above the maximum 100"),
    ("{min: 3, max: 2}", "r.yaml:7: repeats.max: 2 is below min (3)"),
    ("{min: 3, max: 5}", "r.yaml:7: repeats.max: 5 is above min (3) but no until_cv says when to stop"),
    ("{min: 3, until_cv: 5%}", "r.yaml:7: repeats.until_cv: needs max"),
    ("{min: 3, max: 5, until_cv: 0}", "r.yaml:7: repeats.until_cv: 0 is not a fraction above 0 and below 1"),
    ("{min: 3, max: 5, until_cv: 1}", "r.yaml:7: repeats.until_cv: 1 is not a fraction above 0 and below 1 (for 1% write 1%)"),
    ("{min: 3, max: 5, until_cv: 5}", "(for 5% write 5%)"),
    ("{min: 3, max: 5, until_cv: -0.1}", "repeats.until_cv: -0.1 is not a fraction above 0 and below 1"),
    ("{min: 3, max: 5, until_cv: 0%}", "r.yaml:7: repeats.until_cv: 0% is not above 0% and below 100%"),
    ("{min: 3, max: 5, until_cv: 100%}", "r.yaml:7: repeats.until_cv: 100% is not above 0% and below 100%"),
    ("{min: 3, max: 5, until_cv: five}", "repeats.until_cv: 'five' is not a percentage (like 5%) or a fraction (like 0.05)"),
    ("{min: 3, max: 5, until_cv: true}", "repeats.until_cv: True is not a percentage"),
    ("{min: 3, max: 5, until_cv: 5%, stop: cv}", "r.yaml:7: repeats.stop: unknown key (vmbench reads no such key here)"),
    ("{min: 3, maxx: 5, until_cv: 5%}", "repeats.maxx: unknown key; did you mean 'max'?"),
    ("\n  min: 3\n  max: 5\n  until_cv: 7", "r.yaml:10: repeats.until_cv: 7 is not a fraction"),
    ("\n  min: 3\n  max: 2\n  until_cv: 5%", "r.yaml:9: repeats.max: 2 is below min (3)"),
])
def test_repeats_errors_name_file_line_and_key(repeats, message):
    assert message in error(repeats)


def test_misspelt_max_is_suggested():
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(textwrap.dedent(JOBS) + "repeats: {min: 3, maxx: 5, until_cv: 5%}\n", "r.yaml")
    assert exc.value.message.endswith("repeats.maxx: unknown key; did you mean 'max'?")
    assert exc.value.hint == "allowed here: max, min, until_cv"


# ---- the policy ----------------------------------------------------------------------------------


def test_policy_wants_more_only_between_min_and_max_while_cv_is_high():
    p = RepeatPolicy(3, 5, 0.10)
    assert RepeatPolicy.cv([100.0, 110.0, 90.0]) == pytest.approx(0.10)
    assert not p.wants_more([100.0, 200.0])  # below min: the plan's steps, not extras
    assert p.wants_more([100.0, 110.0, 90.0])  # CV 10% >= 10%
    assert not p.wants_more([100.0, 101.0, 99.0])
    assert p.wants_more([100.0, 150.0, 50.0, 100.0]) and not p.wants_more([100.0, 150.0, 50.0, 100.0, 100.0])  # max
    assert not RepeatPolicy(3, 3, None).wants_more([1.0, 100.0, 1000.0])  # fixed
    one = RepeatPolicy(1, 3, 0.05)
    assert RepeatPolicy.cv([100.0]) is None and one.wants_more([100.0])  # one run: the CV is not known yet
    assert not one.wants_more([100.0, 100.0])
    assert p.describe() == "3..5 until CV < 10%" and RepeatPolicy(2, 2).describe() == "2"


# ---- the plan ------------------------------------------------------------------------------------


def test_plan_lists_min_repeats_summary_has_policy_and_max():
    s = scenario("{min: 3, max: 8, until_cv: 5%}")
    plan = make_plan(s)
    steps = plan.steps()
    assert len(steps) == 2 * 3 + 2 * 3  # host and raw, two jobs, min repeats
    assert sorted({st.repeat for st in steps}) == [1, 2, 3]
    summary = plan.summary()
    assert summary["repeat_policy"] == {"min": 3, "max": 8, "until_cv": 0.05} and summary["repeats"] == 3
    assert (summary["guest_measurements"], summary["host_measurements"]) == (6, 6)
    assert (summary["guest_measurements_max"], summary["host_measurements_max"]) == (16, 16)
    fixed = make_plan(scenario("3")).summary()
    assert fixed["repeat_policy"] == {"min": 3, "max": 3, "until_cv": None}
    assert fixed["guest_measurements_max"] == fixed["guest_measurements"] == 6


def test_estimate_uses_min_and_gives_max():
    est = estimate(make_plan(scenario("{min: 3, max: 8, until_cv: 5%}")), "tcg")
    three, eight = estimate(make_plan(scenario("3")), "tcg"), estimate(make_plan(scenario("8")), "tcg")
    assert est.total == pytest.approx(three.total) and est.guest_fio == pytest.approx(three.guest_fio)
    assert est.total_max == pytest.approx(eight.total) and est.host_fio_max == pytest.approx(eight.host_fio)
    assert three.total_max == pytest.approx(three.total)


def test_pending_steps_go_on_from_what_is_stored():
    plan = make_plan(scenario("{min: 2, max: 4, until_cv: 10%}"))
    host_j1 = K("host", None, None, "host", "j1")
    raw_j2 = K("guest", "baseline", None, "raw", "j2")
    stored = {
        host_j1: {1: 100.0, 2: 200.0, 3: 150.0},  # CV still high, below max: repeat 4 next
        K("host", None, None, "host", "j2"): {1: 100.0, 2: 100.0},  # converged
        K("guest", "baseline", None, "raw", "j1"): {1: 100.0, 2: 150.0, 3: 100.0, 4: 50.0},  # at max
        raw_j2: {1: 100.0},  # repeat 2 is a plan step still to run
    }
    pending = plan.pending_steps(stored)
    assert [(st.group(), st.repeat) for st in pending] == [(host_j1, 4), (raw_j2, 2)]
    assert [st.key() for st in make_plan(scenario("2")).pending_steps(stored)] == [raw_j2.with_repeat(2)]  # fixed: no extras


# ---- the runner ------------------------------------------------------------------------------------



class Env(ResultsDB):
    """The test's results database, which also makes runners over it."""

    state: StatePaths

    def runner(self, driver: FakeDriver, s, resume=None) -> Runner:
        return Runner(s, self, RecordingProgress(), driver=driver, state=self.state, resume=resume)


@pytest.fixture
def env(tmp_path, monkeypatch, template):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    db = Env(db_path)
    db.state = state
    db.conn.execute("PRAGMA synchronous = OFF")  # every row is a commit: no fsync in tests
    yield db
    db.close()


def counts(db: ResultsDB, run_id: int) -> dict[K, list[int]]:
    """Step.group() -> the repeats stored, in order."""
    return {g: sorted(reps) for g, reps in db.repeat_iops(run_id).items()}


HOST_J1, HOST_J2 = K("host", None, None, "host", "j1"), K("host", None, None, "host", "j2")
RAW_J1, RAW_J2 = K("guest", "baseline", None, "raw", "j1"), K("guest", "baseline", None, "raw", "j2")
STACK = "stacks:\n  - {name: s, layers: [partition]}\n"
PART_J1 = K("guest", "baseline", "s", "partition", "j1")
PART_J2 = K("guest", "baseline", "s", "partition", "j2")


def steps(runner) -> list[str]:
    return [m for kind, m in runner.progress.events if kind == "step"]


def test_fixed_repeats_run_exactly_that_many_however_iops_vary(env):
    driver = FakeDriver(fio_iops=IopsScript([100.0, 300.0, 50.0] * 10))
    driver.host.fio_iops = IopsScript([100.0, 300.0, 50.0] * 10)
    runner = env.runner(driver, scenario("3"))
    outcome = runner.run()
    assert outcome.status == "ok"
    assert counts(env, outcome.run_id) == {g: [1, 2, 3] for g in (HOST_J1, HOST_J2, RAW_J1, RAW_J2)}
    assert len(driver.host.fio_runs) == 6 and len(driver.guest_fio_runs) == 6
    assert "baseline: raw: j1 #3 (5/6, 1s)" in steps(runner)
    assert not [m for m in steps(runner) if "CV" in m]
    assert env.resolve_run(outcome.run_id).plan_json["repeat_policy"] == {"min": 3, "max": 3, "until_cv": None}


ADAPTIVE = "{min: 3, max: 6, until_cv: 10%}"


def adaptive_driver() -> tuple[FakeDriver, IopsScript, IopsScript]:
    host = IopsScript({"j1": [100, 100, 100, 777], "j2": [100, 110, 90, 100, 777]})
    guest = IopsScript({"j1": [100, 150, 50, 100, 100, 100, 999]})  # j2: the canned figure every time (CV 0)
    driver = FakeDriver(fio_iops=guest)
    driver.host.fio_iops = host
    return driver, host, guest


def test_adaptive_repeats_stop_below_the_cv_or_at_max(env):
    driver, host, guest = adaptive_driver()
    runner = env.runner(driver, scenario(ADAPTIVE))
    outcome = runner.run()
    assert outcome.status == "ok"
    assert counts(env, outcome.run_id) == {
        HOST_J1: [1, 2, 3],  # CV 0 after min
        HOST_J2: [1, 2, 3, 4],  # 10.0% >= 10% after 3, 8.2% after 4
        RAW_J1: [1, 2, 3, 4, 5, 6],  # 50%, 40.8%, 35.4%: stopped at max
        RAW_J2: [1, 2, 3],
    }
    assert host.values == {"j1": [777], "j2": [777]} and guest.values == {"j1": [999]}  # not one run more
    stored = env.repeat_iops(outcome.run_id)
    assert [stored[RAW_J1][r] for r in range(1, 7)] == [100, 150, 50, 100, 100, 100]
    # the plan's min repeats in plan order, then the extras, one job at a time
    names = [next(a for a in argv if a.startswith("--name="))[7:] for argv in driver.guest_fio_runs]
    assert names == ["j1", "j2"] * 3 + ["j1"] * 3
    assert [next(a for a in argv if a.startswith("--name="))[7:] for argv in driver.host.fio_runs] == ["j1", "j2"] * 3 + ["j2"]
    lines = steps(runner)
    assert "baseline: raw: j1 #4 (CV 50.0% >= 10%)" in lines
    assert "baseline: raw: j1 #6 (CV 35.4% >= 10%)" in lines
    assert "host: j2 #4 (CV 10.0% >= 10%)" in lines
    assert "baseline: raw: j1: stopped at max 6 repeats (CV 31.6% >= 10%)" in lines
    assert "baseline: raw: j2: 3 repeats, CV 0.0% < 10%" in lines and "host: j2: 4 repeats, CV 8.2% < 10%" in lines
    assert "baseline: raw: j1 #1 (1/6, 1s)" in lines
    assert env.resolve_run(outcome.run_id).plan_json["repeat_policy"] == {"min": 3, "max": 6, "until_cv": 0.1}
    assert len(env.rows("measurements", outcome.run_id)) == 16


def test_adaptive_repeats_on_each_layer_of_a_stack(env):
    guest = IopsScript({("j1", "/dev/vdb1"): [100, 110, 90, 100, 100], ("j2", "/dev/vdb"): [100, 200]})
    driver = FakeDriver(fio_iops=guest)
    s = scenario("{min: 2, max: 4, until_cv: 5%}", STACK)
    runner = env.runner(driver, s)
    outcome = runner.run()
    assert outcome.status == "ok"
    assert counts(env, outcome.run_id) == {
        HOST_J1: [1, 2], HOST_J2: [1, 2], RAW_J1: [1, 2],
        RAW_J2: [1, 2, 3, 4],  # [100, 200]: CV 47%, then the canned figure: still >= 5% at max
        PART_J1: [1, 2, 3, 4],  # [100, 110]: 6.7%; 90: 10%; 100: 8.2% at max
        PART_J2: [1, 2],
    }
    assert guest.values == {("j1", "/dev/vdb1"): [100], ("j2", "/dev/vdb"): []}
    g = driver.guests[0].transport
    assert driver.boots == 1 and len(g.ran("parted")) == 1 and not g.partitions  # built once, torn down
    assert "baseline: partition: j1 #3 (CV 6.7% >= 5%)" in steps(runner)


@pytest.mark.parametrize("nth, first, skipped, again", [
    # the 4th guest run of j1 is its first extra (#4): 1..3 stored, then repeats 4..6
    (4, [1, 2, 3], 12, 3),
    # its 5th run (#5): the extra stored before the failure counts
    (5, [1, 2, 3, 4], 12, 2),
    # its 2nd run: the plan's repeats 2 and 3 are still to run (of j2 too), then the extras
    (2, [1], 8, 5),
])
def test_resume_goes_on_with_the_adaptive_repeats(env, nth, first, skipped, again):
    driver, _, _ = adaptive_driver()
    driver.fail_guest(fio_run("j1"), nth=nth)
    runner = env.runner(driver, scenario(ADAPTIVE))
    with pytest.raises(CommandError):
        runner.run()
    run_id = runner.run_id
    assert counts(env, run_id)[RAW_J1] == first
    before = {r["id"]: r for r in env.rows("measurements", run_id)}

    values = [100, 150, 50, 100, 100, 100][len(first):]
    driver2 = FakeDriver(fio_iops=IopsScript({"j1": values}))
    resumed = env.runner(driver2, scenario(ADAPTIVE), resume=env.resolve_run(run_id))
    outcome = resumed.run()
    assert outcome.status == "ok" and outcome.run_id == run_id
    assert outcome.skipped_steps == skipped  # of the plan's 12 steps
    assert counts(env, run_id) == {HOST_J1: [1, 2, 3], HOST_J2: [1, 2, 3, 4], RAW_J1: [1, 2, 3, 4, 5, 6], RAW_J2: [1, 2, 3]}
    assert driver2.host.fio_runs == [] and driver2.boots == 1
    assert sum(is_fio_run(a, "j1") for a in driver2.guest_fio_runs) == again
    rows = env.rows("measurements", run_id)
    assert {r["id"]: r for r in rows if r["id"] in before} == before  # earlier rows, extras too, kept
    assert sorted(r["repeat"] for r in rows if r["attempt"] == 2 and r["job"] == "j1") == list(range(len(first) + 1, 7))


def test_resume_of_a_finished_adaptive_run_runs_nothing(env):
    driver, _, _ = adaptive_driver()
    runner = env.runner(driver, scenario(ADAPTIVE))
    run_id = runner.run().run_id
    stored = counts(env, run_id)
    driver2 = FakeDriver(fio_iops=IopsScript([100, 200, 300]))
    outcome = env.runner(driver2, scenario(ADAPTIVE), resume=env.resolve_run(run_id)).run()
    assert outcome.skipped_steps == 12 and driver2.boots == 0 and driver2.creates == 0
    assert driver2.guest_fio_runs == [] and driver2.host.fio_runs == [] and counts(env, run_id) == stored


# ---- telemetry -------------------------------------------------------------------------------------


def test_fio_series_are_stored_per_measurement(env, monkeypatch):
    attach_fio_series(monkeypatch)
    driver = FakeDriver(fio_series=fake_series)
    driver.host.fio_series = fake_series
    outcome = env.runner(driver, scenario("2")).run()
    measurements = env.rows("measurements", outcome.run_id)
    rows = env.telemetry(outcome.run_id)
    assert len(measurements) == 8 and len(rows) == 16
    assert {(r["measurement_id"], r["source"]) for r in rows} == {
        (m["id"], src) for m in measurements for src in ("fio-iops", "fio-clat")}
    assert all(r["run_id"] == outcome.run_id and r["series"] == fake_series([])[r["source"]] for r in rows)
    assert set(rows[0]) == {"id", "run_id", "measurement_id", "source", "series"}


def test_no_series_no_fio_telemetry(env):
    outcome = env.runner(FakeDriver(), scenario("")).run()
    rows = env.telemetry(outcome.run_id)
    assert len(env.rows("measurements", outcome.run_id)) == 4
    sides = {m["id"]: m["side"] for m in env.rows("measurements", outcome.run_id)}
    # only the samplers': the side's own, and the host's during guest runs; no fio logs
    assert sorted((sides[r["measurement_id"]], r["source"]) for r in rows) == sorted(
        [("host", "cpu"), ("host", "disk")] * 2 + [("guest", s) for s in ("cpu", "disk", "host-cpu", "host-disk")] * 2)


def test_db_telemetry_roundtrip(tmp_path):
    db = ResultsDB(tmp_path / "t.db")
    rid = db.start_run(RunRow.starting(tag="r1", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    series = {"t_s": [0.5, 1.0], "values": [1.5, 2.5], "unit": "IOPS"}
    tid = db.add_telemetry(as_series(run_id=rid, measurement_id=None, source="fio-iops-read", series=series))
    assert db.telemetry(rid) == [{"id": tid, "run_id": rid, "measurement_id": None, "source": "fio-iops-read", "series": series}]
    with pytest.raises(ValueError):
        db.add_telemetry(as_series(run_id=rid, measurement_id=None, source="", series=series))
    db.close()
