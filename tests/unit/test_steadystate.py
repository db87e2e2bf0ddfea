"""fio's steady-state detection as a job setting (issue 30): the scenario's keys, the exact
argv, and the report's fact from fio's own JSON (each run steady or not, and when)."""

import pytest

from tests.records import as_measurement
from vmbench.results.records import JobParams
from vmbench.errors import ScenarioError
from vmbench.fio.job import fio_argv
from vmbench.report.facts import steady_attained
from vmbench.scenario.loader import parse_scenario

BASE = """
name: ss
storage: {scratch_size: 1G}
vm: {memory: 1G}
jobs:
  - {name: rr, rw: randread, bs: 4k, size: 64M, runtime: 60s, ramp: 2s,
     steadystate: iops_slope:0.3%, steadystate_duration: 20s, steadystate_ramp_time: 5s}
"""


def test_steady_state_keys_reach_fio_as_its_own_options():
    job = parse_scenario(BASE, "ss.yaml").jobs[0]
    assert (job.steadystate, job.steadystate_duration, job.steadystate_ramp_time) == ("iops_slope:0.3%", 20.0, 5.0)
    argv = fio_argv(job, "/dev/vdb", "/o.json")
    assert ["--steadystate=iops_slope:0.3%", "--steadystate_duration=20", "--steadystate_ramp_time=5"] == \
        [a for a in argv if a.startswith("--steadystate")]
    assert "--runtime=60" in argv and "--time_based=1" in argv  # the runtime is the most it runs
    assert job.params()["steadystate"] == "iops_slope:0.3%"
    plain = parse_scenario(BASE.replace(",\n     steadystate: iops_slope:0.3%, steadystate_duration: 20s, steadystate_ramp_time: 5s", ""),
                           "ss.yaml").jobs[0]
    assert "steadystate" not in plain.params() and not any(a.startswith("--steadystate") for a in fio_argv(plain, "/d", "/o"))


@pytest.mark.parametrize("change, words", [
    (("iops_slope:0.3%", "iops_flat:1"), "is not fio's criterion: iops, iops_slope, bw or bw_slope"),
    (("steadystate: iops_slope:0.3%, steadystate_duration: 20s, ", ""), "steadystate_ramp_time without steadystate"),
    (("steadystate_duration: 20s, ", ""), "steadystate needs steadystate_duration"),
    (("runtime: 60s", "runtime: 20s"), "runtime 20s is under steadystate_duration + steadystate_ramp_time (25s)"),
])
def test_bad_steady_state_settings_are_refused_naming_the_key(change, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(BASE.replace(*change), "ss.yaml")
    assert words in str(err.value)


def test_a_load_step_refuses_a_job_that_ends_when_steady():
    with pytest.raises(ScenarioError, match="ends when fio judges it steady"):
        parse_scenario(BASE + "load: {vms: [1, 2]}\n", "ss.yaml")


def _m(job, attained, runtime_ms):
    # the shape of fio 3.33's JSON (a real run: fio --steadystate=iops_slope:20% --steadystate_duration=3 ...)
    return as_measurement({"job": job, "fio": {"jobs": [{"job_runtime": runtime_ms, "steadystate": {
        "ss": "iops_slope:20.000000%", "duration": 3, "attained": attained, "criterion": "-9.863311%",
        "max_deviation": 0.0, "slope": -1320.5}}]}})


def test_the_report_says_whether_and_when_each_run_was_steady():
    jobs = {"rr": JobParams.from_row({"steadystate": "iops_slope:0.3%"}), "other": JobParams()}
    assert steady_attained([_m("rr", 1, 4771), _m("rr", 1, 6000)], jobs) == \
        "rr steady (iops_slope:0.3%) in every run, after 5 s on average"
    assert steady_attained([_m("rr", 1, 4771), _m("rr", 0, 8000)], jobs) == \
        "WARNING: rr never steady (iops_slope:0.3%) in 1 of 2 runs, which ran their whole runtime"
    assert steady_attained([as_measurement({"job": "other", "fio": {"jobs": [{}]}})], jobs) == ""
