"""fio armed on a gate (vmbench.fio.gate): the argv, and real fio on this machine."""

from __future__ import annotations

import shlex
import threading
import time

import pytest

from vmbench.errors import VmbenchError
from vmbench.fio.gate import ARMED_SCRIPT, POLL_S, PRERUN_SCRIPT, Gate
from vmbench.fio.job import FioJob, check_identical, comparable_params, fio_argv
from vmbench.fio.runner import FioRequest, Sampling, Together, run_fio

NO_TELEMETRY = Sampling(telemetry=False)
from vmbench.transport.local import LocalTransport

JOB = FioJob(name="g", rw="randread", bs=4096, iodepth=1, numjobs=2, runtime=2, ramp=1, size=4 << 20, direct=False,
             ioengine="psync", rate_iops=50)


def test_the_gate_argv():
    gate = Gate("/w/gate-ab12", clones=2, wait_s=30)
    words = shlex.split(gate.prerun(), comments=True)
    # the trailing comment voids the "> g.prerun.txt 2>&1" fio appends before system()
    assert gate.prerun().endswith(" #") and words == ["sh", "-c", PRERUN_SCRIPT, "vmbench-gate", "/w/gate-ab12.go",
                                                      "/w/gate-ab12.stop", "/w/gate-ab12.armed", str(int(30 / POLL_S))]
    assert gate.armed_argv() == ["sh", "-c", ARMED_SCRIPT, "vmbench-armed", "/w/gate-ab12.armed", "2", "/w/gate-ab12.stop", "600"]
    assert "${" not in PRERUN_SCRIPT + ARMED_SCRIPT  # fio would read it as an environment variable
    assert [gate.owns(n) for n in ("gate-ab12.go", "gate-ab12.stop", "gate-ab12.armed.4711", "gate-ab13.go", "log-ab12_iops.1.log")] \
        == [True, True, True, False, False]


def test_the_prerun_is_the_measured_jobs_alone_and_not_compared():
    gate = Gate("/w/gate-1", clones=2, wait_s=30)
    argv = fio_argv(JOB, "/dev/vdb", "/w/out.json", tail_seconds=5, exec_prerun=gate.prerun())
    prerun = [i for i, a in enumerate(argv) if a.startswith("--exec_prerun=")]
    tail = argv.index("--name=vmbench-tail")
    assert len(prerun) == 1 and prerun[0] < tail and argv[prerun[0]] == f"--exec_prerun={gate.prerun()}"
    plain = fio_argv(JOB, "/dev/sdb", "/h/out.json", tail_seconds=5)
    assert comparable_params(argv) == comparable_params(plain)
    check_identical(plain, argv)


def _released(tmp_path, before):
    """run_fio armed, with ``before`` as its before_start; the run (or its error) and when before returned."""
    out: dict = {}

    def opened():
        before()
        out["released_ms"] = time.time() * 1000

    try:
        out["run"] = run_fio(LocalTransport(), FioRequest(JOB, str(tmp_path / "data"), str(tmp_path), "g", sampling=NO_TELEMETRY,
                                                          together=Together(1, epoch_logs=True, before_start=opened, armed=True)))
    except VmbenchError as exc:
        out["error"] = exc
    return out


def test_real_fio_waits_set_up_on_its_gate_until_released(tmp_path, monkeypatch):
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    work = tmp_path / "w"
    work.mkdir()
    out = _released(work, lambda: time.sleep(1.5))
    run = out["run"]
    # fio's clock started after the release, not when it was started 1.5 s earlier
    assert run.window is not None and run.window.started_ms >= out["released_ms"] - 50
    assert 0 < run.result.iops <= 105
    assert sorted(p.name for p in work.iterdir()) == ["data"] and list(cwd.iterdir()) == []


def test_a_side_that_fails_before_the_release_stops_fio(tmp_path):
    barrier = threading.Barrier(2)
    barrier.abort()  # another side of the round failed
    started = time.monotonic()
    with pytest.raises(threading.BrokenBarrierError):
        _released(tmp_path, lambda: barrier.wait(5))
    # the gate was stopped: fio ended at once, without I/O, and its files are gone
    assert time.monotonic() - started < 30 and sorted(p.name for p in tmp_path.iterdir()) == ["data"]


def test_fio_that_fails_before_it_is_armed_is_its_own_error(tmp_path):
    (tmp_path / "a-file").write_text("")
    started = time.monotonic()
    with pytest.raises(VmbenchError) as err:  # fio cannot lay out its file under a file: it never arms
        run_fio(LocalTransport(), FioRequest(JOB, str(tmp_path / "a-file" / "data"), str(tmp_path), "g", sampling=NO_TELEMETRY,
                                             together=Together(1, epoch_logs=True, armed=True)))
    assert "fio" in err.value.message and time.monotonic() - started < 30
    assert [p.name for p in tmp_path.iterdir()] == ["a-file"]
