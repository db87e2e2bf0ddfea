"""Many VMs at once, on the fake hypervisor: the runner plans and drives load steps of up to 64
VMs with bounded parallel boots, starts each round's fio in every VM together, stores a step
only when all of it finished, removes every VM of a failed step, and resumes only the failed
and missing steps.  Preflight refuses steps that do not fit the host."""

import functools
import shutil
import textwrap

import pytest

from tests.fakes import FakeDriver, FakeHost, install_fake_image, is_fio_run
from vmbench.errors import CommandError, GuestError, Interrupted, PreflightError, ScenarioError
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.results.key import MeasurementKey
from vmbench.run.plan import make_plan
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario

SCALING = """
name: scale
storage: {scratch_size: 256M}
vm: {memory: 512M, vcpus: 1}
jobs:
  - {name: r, rw: randread, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}
  - {name: w, rw: randwrite, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}
load: {vms: [1, 2, 64], boot_parallel: 4, tail: 2}
"""

NEIGHBOURS = """
name: nn
storage: {scratch_size: 256M}
vm: {memory: 512M, vcpus: 1}
stacks:
  - {name: fs, layers: [partition, ext4]}
jobs:
  - {name: victim, rw: randread, bs: 4k, iodepth: 1, size: 16M, runtime: 2s, ramp: 1s, rate_iops: 100}
  - {name: heavy, rw: randwrite, bs: 4k, iodepth: 16, size: 16M, runtime: 2s, ramp: 1s}
load:
  victim: {job: victim}
  aggressors: {count: 2, job: heavy}
  phases:
    - {name: alone, aggressors: 0}
    - busy
    - {name: limited, aggressor_vm: {cache: writeback}}
"""


@functools.lru_cache(maxsize=None)
def scenario(text: str):
    return parse_scenario(textwrap.dedent(text), "t.yaml")


@pytest.fixture
def env(tmp_path, monkeypatch):
    state = StatePaths(tmp_path / "state")
    install_fake_image(state)
    monkeypatch.setenv("VMBENCH_STATE_DIR", str(state.root))
    db = ResultsDB(tmp_path / "results.db")
    db.conn.execute("PRAGMA synchronous = OFF")
    yield state, db
    db.close()


def runner(env, driver, text=SCALING, resume=None) -> Runner:
    state, db = env
    return Runner(scenario(text), db, RecordingProgress(), driver=driver, state=state, resume=resume)


def nothing_left(driver: FakeDriver, r: Runner) -> None:
    assert driver.vms == {} and driver.storage.volumes == {} and driver.leftovers() == [] and r.created == []


def test_64_vms_boot_bounded_and_every_vm_is_measured(env):
    driver = FakeDriver()
    driver.boot_delay = 0.01
    r = runner(env, driver)
    out = r.run()
    assert out.status == "ok" and driver.boots == 1 + 2 + 64
    assert 1 < driver.max_booting <= 4  # boot_parallel
    db = env[1]
    keys = db.measurement_keys(out.run_id)
    assert keys == {st.key() for st in make_plan(r.scenario).steps()}
    # step 3: 64 VMs, each ran both jobs, with the host reference on 64 volumes at once
    guest3 = {k for k in keys if k.side == "guest" and k.load_step == 3}
    assert {k.vm for k in guest3} == set(range(64)) and {k.job for k in guest3} == {"r", "w"}
    assert {k.vm for k in keys if k.side == "host" and k.load_step == 3} == set(range(64))
    rows = [m for m in db.rows("measurements", out.run_id) if m["load_step"] == 3 and m["side"] == "guest"]
    assert {m["role"] for m in rows} == {"peer"}
    # every VM's clock was read and its window checked: started together, every window loaded
    assert all(m["load"]["loaded"] is True and m["load"]["excluded"] is None for m in rows)
    # (the fake's fio stamps its logs when it runs: 64 threads on a busy machine spread them, within the lead)
    assert all(m["load"]["start_skew_ms"] is not None and m["load"]["start_skew_ms"] < 3000 for m in rows)
    assert {(b["load_step"], b["vm"]) for b in db.rows("boots", out.run_id)} == {(1, 0)} | {(2, v) for v in range(2)} | {(3, v) for v in range(64)}
    # each round of fio in a guest has its tail and epoch-stamped logs
    argv = next(c for c in driver.guest_commands if is_fio_run(c))
    assert "--log_unix_epoch=1" in argv and "--name=vmbench-tail" in argv
    nothing_left(driver, r)


def test_a_failed_boot_in_the_middle_of_a_step_removes_all_its_vms_and_resume_runs_only_that_step(env):
    state, db = env
    driver = FakeDriver(fail_at="boot", fail_nth=1 + 2 + 30)  # the 30th boot of the 64-VM step
    r = runner(env, driver)
    with pytest.raises(GuestError, match="fake boot: injected failure"):
        r.run()
    nothing_left(driver, r)
    run_id = r.run_id
    keys = db.measurement_keys(run_id)
    assert keys and {k.load_step for k in keys} == {1, 2}  # finished steps kept, nothing of step 3
    assert db.resolve_run(run_id).status == "failed"
    # resume: only step 3 runs again, whole
    driver2 = FakeDriver()
    r2 = runner(env, driver2, resume=db.resolve_run(run_id))
    out = r2.run()
    assert out.status == "ok" and driver2.boots == 64
    assert db.measurement_keys(run_id) == {st.key() for st in make_plan(r.scenario).steps()}
    nothing_left(driver2, r2)


def test_a_failed_fio_in_one_vm_fails_the_step_and_stores_nothing_of_it(env):
    state, db = env
    driver = FakeDriver()
    # step 2 (2 VMs) runs "r" in both VMs; VM 1's fails
    driver.fail_guest(lambda a: is_fio_run(a, "r"), nth=3)
    r = runner(env, driver)
    with pytest.raises(CommandError, match=r"measuring baseline: raw: r #1 in 2 VM\(s\) at once: command failed \(exit 1\): fio --name=r"):
        r.run()
    nothing_left(driver, r)
    assert {k.load_step for k in db.measurement_keys(r.run_id)} == {1}


def test_neighbours_run_victim_and_aggressors_together_in_phases(env):
    state, db = env
    driver = FakeDriver()
    r = runner(env, driver, NEIGHBOURS)
    out = r.run()
    assert out.status == "ok" and driver.boots == 1 + 3 + 3
    rows = [m for m in db.rows("measurements", out.run_id) if m["side"] == "guest"]
    by_step = {}
    for m in rows:
        by_step.setdefault(m["load_step"], set()).add((m["vm"], m["role"], m["job"]))
    assert by_step[1] == {(0, "victim", "victim")}
    assert by_step[2] == by_step[3] == {(0, "victim", "victim"), (1, "aggressor", "heavy"), (2, "aggressor", "heavy")}
    # raw and both layers of the stack, in every VM
    assert {m["layer"] for m in rows if m["load_step"] == 3} == {"raw", "partition", "partition+ext4"}
    # the limited phase's aggressors had their own settings; the victim kept the cell's
    settings = {(m["load_step"], m["vm"]): m["settings"]["cache"] for m in rows}
    assert settings[(3, 1)] == settings[(3, 2)] == "writeback" and settings[(3, 0)] == settings[(2, 1)] == "none"
    assert "--rate_iops=100" in next(c for c in driver.guest_commands if is_fio_run(c, "victim"))
    nothing_left(driver, r)


def test_a_vm_whose_clock_shows_it_started_late_is_flagged_and_excluded(env, monkeypatch):
    state, db = env
    driver = FakeDriver()
    original = driver._boot

    def late(run_tag, request, res):
        guest = original(run_tag, request, res)
        if request.seq == 3:  # VM 1 of step 2: its fio logs say it ran 5 s later than it did
            real = guest.transport._epoch_logs

            def shifted(argv):
                guest.transport.clock_skew_ms = 5000
                real(argv)
                guest.transport.clock_skew_ms = 0
            guest.transport._epoch_logs = shifted
        return guest
    driver._boot = late
    r = runner(env, driver, SCALING.replace("[1, 2, 64]", "[1, 2]"))
    out = r.run()
    rows = [m for m in db.rows("measurements", out.run_id) if m["side"] == "guest" and m["load_step"] == 2]
    flagged = {m["vm"]: m["load"] for m in rows}
    assert flagged[1]["loaded"] is False and flagged[1]["excluded"]  # its window ran past VM 0's load
    assert flagged[0]["loaded"] is False  # and VM 0's window began before VM 1 was loaded
    assert flagged[0]["start_skew_ms"] > 4000


def test_preflight_refuses_a_step_that_does_not_fit_the_memory(env):
    host = FakeHost()
    host.files["/proc/meminfo"] = b"MemTotal: 16000000 kB\nMemAvailable: 8000000 kB\n"
    driver = FakeDriver(host=host)
    with pytest.raises(PreflightError, match=r"load step '64 VMs' \(64 VMs\) needs about 56.0G of memory .* has 7.6G available"):
        runner(env, driver).run()
    assert driver.creates == 0 and driver.boots == 0


def test_preflight_refuses_a_step_that_does_not_fit_the_storage(env):
    from tests.fakes import FakeStorage

    driver = FakeDriver(storage=FakeStorage(free=20 << 30))
    with pytest.raises(PreflightError, match=r"load step '64 VMs' \(64 VMs\) needs about .* on fake pool .* it has 20.0G free"):
        runner(env, driver).run()
    assert driver.creates == 0


@pytest.mark.parametrize("text, message", [
    ("load: {vms: [2, 1]}", "counts go up: 1 after 2"),
    ("load: {vms: []}", "is a list of VM counts"),
    ("load: {vms: [1], victim: {job: r}}", "does not go with vms:"),
    ("load: {victim: {job: r}, aggressors: {count: 1, job: nope}, phases: [a]}", "no job named 'nope' for the aggressors"),
    ("load: {victim: {job: r}, aggressors: {count: 1, job: r}}", "load.phases: is missing"),
    ("load: {victim: {job: r}, aggressors: {count: 1, job: r}, phases: [{name: a, aggressors: 2}]}", "above the maximum 1"),
    ("load: {victim: {job: r}, aggressors: {count: 1, job: r}, phases: [a, a]}", "phase 'a' is named twice"),
    ("load: {victim: {job: r}, aggressors: {count: 1, job: r, vm: {cache: fast}}, phases: [a]}", "load.aggressors.vm.cache"),
    ("load: {vms: [1]}\nrepeats: {min: 2, max: 4, until_cv: 0.1}", "adaptive repeats do not go with load"),
])
def test_load_section_errors_name_the_key(text, message):
    base = "name: t\njobs:\n  - {name: r, rw: randread, bs: 4k, size: 16M, runtime: 2s}\n"
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(base + text, "t.yaml")


def test_steps_are_planned_per_vm_and_host_volume():
    plan = make_plan(scenario(SCALING))
    units = plan.load_units()
    assert [u.step.size for u in units] == [1, 2, 64] and [u.seqs[0] for u in units] == [1, 2, 4]
    assert units[2].seqs[-1] == 67 and all(u.hosts == ("localhost",) * u.step.size for u in units)
    summary = plan.summary()
    assert summary["vms_booted"] == 67 and summary["load"]["kind"] == "scaling"
    assert summary["guest_measurements"] == 2 * 67 and summary["host_measurements"] == 2 * 67
    assert MeasurementKey("guest", "baseline", None, "raw", "w", 1, vm=63, load_step=3) in {st.key() for st in plan.steps()}


def test_ctrl_c_while_vms_boot_removes_every_vm_of_the_step(env):
    state, db = env
    driver = FakeDriver(fail_at="boot", fail_nth=1 + 2 + 10, fail_with=KeyboardInterrupt)
    driver.boot_delay = 0.01
    r = runner(env, driver)
    with pytest.raises(Interrupted, match="removed everything this run created"):
        r.run()
    nothing_left(driver, r)
    assert db.resolve_run(r.run_id).status == "interrupted"
    assert {k.load_step for k in db.measurement_keys(r.run_id)} == {1, 2}
    assert not (state.runs / f"{r.tag}.json").exists()  # the ledger: nothing for cleanup to find
