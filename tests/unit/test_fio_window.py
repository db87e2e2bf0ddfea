"""fio's epoch-stamped logs -> measured and loaded windows; clock offsets; coverage and skew
of runs started in several VMs at once; run_fio with a tail end to end (real fio, a few seconds)."""

from dataclasses import replace

import pytest

from vmbench.fio.job import FioJob
from vmbench.fio.runner import FioRequest, Sampling, Together, parse_logs, run_fio
from vmbench.fio.window import (Coverage, FioWindow, clock_offset, coverage, job_number, measured_logs, start_skew_ms,
                                window_from_logs)
from vmbench.transport.local import LocalTransport

# Real fio 3.33 logs: randread, numjobs=2, rate_iops=50, ramp 1 s, runtime 3 s, then the tail
# job for 2 s; --log_avg_msec=1000 --log_unix_epoch=1.  Jobs 1-2 are the measured job's clones,
# 3-4 the tail's.  Their IOPS logs lack the stamp at the end of the runtime (the latency logs
# have it), and the tail began 257 ms after the measured job ended.
T0 = 1795511544768  # when the measured window began (the first stamp - 1000 ms)
LOGS = {
    "log-ab12_iops.1.log": b"1795511545768, 50, 0, 0, 0\n1795511546768, 50, 0, 0, 0\n",
    "log-ab12_iops.2.log": b"1795511545768, 50, 0, 0, 0\n1795511546768, 50, 0, 0, 0\n",
    "log-ab12_iops.3.log": b"1795511549025, 50, 0, 0, 0\n1795511550024, 49, 0, 0, 0\n",
    "log-ab12_iops.4.log": b"1795511549025, 50, 0, 0, 0\n",
    "log-ab12_clat.1.log": b"1795511545766, 369650, 0, 0, 0\n1795511546766, 372752, 0, 0, 0\n1795511547766, 227827, 0, 0, 0\n",
    "log-ab12_clat.2.log": b"1795511545768, 640437, 0, 0, 0\n1795511546768, 769835, 0, 0, 0\n1795511547768, 166142, 0, 0, 0\n",
    "log-ab12_clat.3.log": b"1795511549024, 312916, 0, 0, 0\n1795511550025, 501467, 0, 0, 0\n",
    "log-ab12_clat.4.log": b"1795511549024, 349080, 0, 0, 0\n1795511550024, 665745, 0, 0, 0\n",
}


def test_window_from_real_logs():
    w = window_from_logs(LOGS, ramp_s=1, measured_jobs=2, runtime_s=3, tail_s=2)
    assert w == FioWindow(started_ms=T0 - 1000, measured_from_ms=T0, measured_to_ms=T0 + 3000,
                          loaded_to_ms=T0 + 5257, tail_from_ms=T0 + 3257)
    assert w.loaded() == ((T0 - 1000, T0 + 3000), (T0 + 3257, T0 + 5257))
    # from the stamps alone the window ends at the last one (here 1 s early) and the load at the tail's last
    bare = window_from_logs(LOGS, ramp_s=1.5, measured_jobs=2)
    assert bare == FioWindow(T0 - 1500, T0, T0 + 2000, T0 + 5256, T0 + 3257)


def test_window_without_a_tail_and_without_epoch_stamps():
    measured = {k: v for k, v in LOGS.items() if job_number(k) in (1, 2)}
    assert window_from_logs(measured, ramp_s=0, measured_jobs=2, runtime_s=3) == FioWindow(T0, T0, T0 + 3000, T0 + 3000, T0 + 3000)
    assert window_from_logs(measured, ramp_s=0, measured_jobs=2, runtime_s=3).loaded() == ((T0, T0 + 3000),)
    assert window_from_logs({"x_iops.1.log": b"1000, 5, 0, 0, 0\n2000, 5, 0, 0, 0\n"}, ramp_s=0, measured_jobs=1) is None
    assert window_from_logs({"x_iops.1.log": b""}, ramp_s=0, measured_jobs=1) is None  # a 1 s run may log nothing
    assert window_from_logs({k: v for k, v in LOGS.items() if "clat" in k}, ramp_s=0, measured_jobs=2) is None


def test_tail_logs_stay_out_of_the_series():
    assert job_number("log-ab12_iops.3.log") == 3 and job_number("log-ab12_clat.12.log") == 12 and job_number("x.json") is None
    assert sorted(measured_logs(LOGS, 2)) == ["log-ab12_clat.1.log", "log-ab12_clat.2.log", "log-ab12_iops.1.log", "log-ab12_iops.2.log"]
    s = parse_logs(measured_logs(LOGS, 2))
    assert s["fio-iops"] == {"t_s": [1.0, 2.0], "values": [100.0, 100.0], "unit": "IOPS"}
    assert s["fio-clat"]["t_s"] == [1.0, 2.0, 3.0]
    assert parse_logs(LOGS)["fio-iops"]["t_s"] == [1.0, 2.0, 4.0, 5.0]  # what the tail would have added


def test_clock_offset_uses_the_shortest_round_trip():
    samples = [(100.0, 105.2, 100.4), (200.0, 205.06, 200.1), (300.0, 305.5, 301.0)]
    offset, uncertainty = clock_offset(samples)
    assert offset == pytest.approx(5.01) and uncertainty == pytest.approx(0.05)
    assert clock_offset([(10.0, 9.0, 10.0)]) == (-1.0, 0.0)
    with pytest.raises(ValueError, match="no clock readings"):
        clock_offset([])
    with pytest.raises(ValueError, match="ends"):
        clock_offset([(2.0, 1.0, 1.0)])


def _w(start: float, ramp: float = 1000, runtime: float = 10000, pause: float = 0, tail: float = 5000) -> FioWindow:
    return FioWindow(start - ramp, start, start + runtime, start + runtime + pause + tail, start + runtime + pause)


def test_coverage_and_skew_in_host_time():
    # VM 0 is a host volume; VM 1's clock runs 2000 ms ahead, VM 2's 500 ms behind
    windows = {0: _w(T0), 1: _w(T0 + 2000 + 300), 2: _w(T0 - 500 + 200)}
    offsets = {0: 0.0, 1: 2000.0, 2: -500.0}
    assert start_skew_ms(windows, offsets) == 300
    cover = coverage(windows, offsets)
    # every window is loaded; the least slack: VM 1 started its ramp 700 ms before VM 0's window
    assert cover == {0: Coverage(True, 0.0, 1, 700.0), 1: Coverage(True, 0.0, 2, 1100.0), 2: Coverage(True, 0.0, 1, 900.0)}
    # VM 1 measured 2500 ms after VM 0 and started its ramp 1500 ms into VM 0's window
    late = {0: _w(T0), 1: _w(T0 + 2000 + 2500)}
    assert coverage(late, {0: 0.0, 1: 2000.0}) == {0: Coverage(False, 1500.0, 1, -1500.0), 1: Coverage(True, 0.0, 0, 2500.0)}
    assert start_skew_ms(late, {0: 0.0, 1: 2000.0}) == 2500


def test_coverage_counts_the_pause_before_the_tail():
    # VM 1 measured 100 ms later than VM 0, whose load paused 250 ms after its measured job
    windows = {0: _w(T0, pause=250), 1: _w(T0 + 100)}
    cover = coverage(windows, {0: 0, 1: 0})
    assert cover[1] == Coverage(False, 100.0, 0, 1100.0)  # the slack at both ends is fine, the pause is not
    assert cover[0] == Coverage(True, 0.0, 1, 900.0)


def test_coverage_edge_cases():
    assert coverage({3: _w(T0)}, {3: 0.0}) == {3: Coverage(True, 0.0, None, None)}
    assert coverage({}, {}) == {} and start_skew_ms({}, {}) == 0.0
    with pytest.raises(ValueError, match="no clock offset for VM 2"):
        coverage({1: _w(T0), 2: _w(T0)}, {1: 0.0})
    # a window entirely outside another VM's load is short by its whole length
    apart = coverage({0: _w(T0), 1: _w(T0 + 60_000)}, {0: 0.0, 1: 0.0})
    assert apart[0] == Coverage(False, 10000.0, 1, -59000.0) and apart[1].short_ms == 10000.0


def test_run_fio_with_a_tail_on_this_machine(tmp_path):
    # a job or tail of 1 s may log no stamp at all (fio skips the one at its very end): 2 s each
    job = FioJob(name="t", rw="randread", bs=4096, iodepth=1, numjobs=2, runtime=2, ramp=1, size=4 << 20, direct=False,
                 ioengine="psync", rate_iops=50)
    started = []
    run = run_fio(LocalTransport(), FioRequest(job, str(tmp_path / "data"), str(tmp_path), "t", sampling=Sampling(telemetry=False),
                                               together=Together(2, epoch_logs=True, before_start=lambda: started.append(1))))
    assert started == [1] and sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    # correctness, not timing (this machine may be busy): two clones at 50 IOPS each at most, no tail
    assert run.result.jobs == 1 and 0 < run.result.iops <= 105
    w = run.window
    assert w is not None and w.measured_to_ms - w.measured_from_ms >= 2000 and w.measured_from_ms - w.started_ms == 1000
    assert w.tail_from_ms >= w.measured_to_ms and w.loaded_to_ms - w.tail_from_ms >= 2000
    assert set(run.series["fio-iops"]["t_s"]) <= {1.0, 2.0, 3.0}  # the measured job's seconds only
    plain = run_fio(LocalTransport(), FioRequest(replace(job, runtime=1, ramp=0), str(tmp_path / "data"), str(tmp_path), "t",
                                                 sampling=Sampling(telemetry=False)))
    assert plain.window is None and "--name=vmbench-tail" not in plain.argv
