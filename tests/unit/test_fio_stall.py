"""fio's progress from its status dumps (vmbench.fio.stall), and what the wait loop says of a stall."""

from __future__ import annotations

import json
from pathlib import Path

from vmbench.fio.result import last_json, parse_fio_json
from vmbench.fio.runner import _ticker
from vmbench.fio.stall import StallWatch, moved
from vmbench.progress import RecordingProgress


def _dump(read: int, write: int, elapsed: int) -> str:
    doc = {"fio version": "fio-3.33", "timestamp_ms": 1000 * elapsed, "jobs": [
        {"jobname": "j", "error": 0, "elapsed": elapsed,
         "read": {"io_bytes": read, "iops": 1.0, "bw_bytes": read, "total_ios": 1, "clat_ns": {"mean": 1.0, "N": 1}},
         "write": {"io_bytes": write, "iops": 1.0, "bw_bytes": write, "total_ios": 1, "clat_ns": {"mean": 1.0, "N": 1}},
         "trim": {"io_bytes": 0}}]}
    return json.dumps(doc, indent=2) + "\n"


def test_the_bytes_of_the_last_complete_dump():
    one, two = _dump(4096, 8192, 5), _dump(4096, 16384, 10)
    assert moved("") is None and moved("note: something\n") is None
    assert moved(one) == 12288 and moved(one + two) == 20480
    assert moved(one + two[: len(two) // 2]) == 12288  # the last one half written: the one before
    assert moved("hints\n" + two[len(two) // 2:] + one) == 12288  # a tail that begins inside a dump
    # the final document, after the status dumps, is what the run's figures come from
    assert json.loads(last_json("warning: x\n" + one + two))["jobs"][0]["write"]["io_bytes"] == 16384
    assert last_json('{"jobs": []}') == '{"jobs": []}'  # fio's output without status dumps


class _Side:
    def __init__(self, texts):
        self.texts = list(texts)

    def __call__(self, size: int = 0) -> bytes:
        got = self.texts.pop(0) if len(self.texts) > 1 else self.texts[0]
        if isinstance(got, Exception):
            raise got
        return got.encode()


def test_no_progress_for_the_stall_time_is_a_stall_and_any_change_is_progress():
    now = [0.0]
    side = _Side([_dump(0, 100, 1), _dump(0, 200, 2), _dump(0, 200, 3), _dump(0, 200, 4), _dump(0, 50, 5)])
    watch = StallWatch(side, every=5, after=10, clock=lambda: now[0])
    for t, want in ((5, None), (10, None), (15, None), (20, 10.0), (25, None)):  # the last: the ramp's bytes reset
        now[0] = float(t)
        assert watch.check() == want, t
    now[0] = 0.0
    silent = StallWatch(_Side(["fio: starting\n"]), every=5, after=10, clock=lambda: now[0])  # stuck before its first status
    for t, want in ((5, None), (10, None), (15, 10.0)):
        now[0] = float(t)
        assert silent.check() == want, t
    gated = StallWatch(_Side([_dump(0, 0, 1)]), every=5, after=10, first_io=True, clock=lambda: now[0])
    for t in (30, 35, 60):  # fio waits on its gate: no I/O yet is no stall
        now[0] = float(t)
        assert gated.check() is None


def test_a_side_that_stops_answering_is_said_with_the_stall():
    now = [0.0]
    watch = StallWatch(_Side([_dump(0, 100, 1), OSError("Socket is closed")]), every=5, after=10, clock=lambda: now[0])
    progress = RecordingProgress()
    tick = _ticker(progress, "host: 4k-randwrite", 60.0, None, watch)
    for t in (5, 10, 15, 20, 25):
        now[0] = float(t)
        tick(float(t))
    events = [e for e in progress.events if "stalled" in e[1]]
    assert events[0] == ("warn", "host: 4k-randwrite: stalled for 10s (no I/O completed; fio's status not read for 5s: "
                                 "Socket is closed)")
    assert events[-1][0] == "status" and "stalled for 20s" in events[-1][1]
    assert progress.events[0] == ("status", "host: 4k-randwrite: 55s left")


def test_the_final_result_is_read_after_the_status_dumps():
    final = (Path(__file__).parent.parent / "data" / "fio-randrw-jsonplus.json").read_text()
    assert parse_fio_json(_dump(0, 100, 1) + _dump(0, 300, 2) + final) == parse_fio_json(final)


def test_a_host_that_stops_answering_is_named_while_the_wait_goes_on():
    import time

    from vmbench.progress import Silence

    progress = RecordingProgress()
    with Silence(progress, "host b", "vmbench-r1-3 booting", every=0.3) as silence:
        time.sleep(0.5)
        (kind, said), = progress.events  # once per 0.3 s of silence
        assert kind == "warn" and said.startswith("host b has not answered for ") and said.endswith("; still waiting (vmbench-r1-3 booting)")
        silence.answered()
        time.sleep(0.1)
        assert len(progress.events) == 1  # it answered: quiet again


def test_a_full_pool_is_said_with_the_stall_then_ends_the_run():
    import pytest

    from vmbench.command import Completed
    from vmbench.errors import HypervisorError
    from vmbench.telemetry.ceph import CephPool, CephWatch

    full = json.dumps({"status": "HEALTH_WARN", "checks": {"POOL_FULL": {"severity": "HEALTH_WARN", "summary": {
        "message": "1 pool(s) full"}}}})

    class Ceph:
        name = "host"

        def run(self, argv, **kw):
            return Completed(tuple(argv), 0, full, "")

    now = [0.0]
    watch = CephWatch(Ceph(), CephPool(("ceph",), "vmbench"), clock=lambda: now[0])
    stall = StallWatch(_Side([_dump(0, 100, 1)]), every=5, after=10, clock=lambda: now[0])
    progress = RecordingProgress()
    tick = _ticker(progress, "host: 4k-randwrite", 60.0, watch, stall)
    for t in (5, 10):
        now[0] = float(t)
        tick(float(t))  # progress: the watch waits 30 s between questions
    now[0] = 15.0
    with pytest.raises(HypervisorError, match="Ceph reported POOL_FULL: 1 pool\\(s\\) full while fio ran on pool vmbench"):
        tick(15.0)  # stalled: asked at once, and the answer ends the run
    assert progress.events[-1] == ("warn", "host: 4k-randwrite: stalled for 10s (no I/O completed; Ceph: POOL_FULL: 1 pool(s) full)")


def test_a_full_pool_waits_for_the_stall_and_another_check_says_the_stall_under_way():
    import pytest

    from vmbench.command import Completed
    from vmbench.errors import HypervisorError
    from vmbench.telemetry.ceph import CephPool, CephWatch

    answer = ["POOL_FULL"]

    class Ceph:
        name = "host"

        def run(self, argv, **kw):
            doc = {"status": "HEALTH_WARN", "checks": {answer[0]: {"summary": {"message": "it"}}}}
            return Completed(tuple(argv), 0, json.dumps(doc), "")

    now = [0.0]
    watch = CephWatch(Ceph(), CephPool(("ceph",), "vmbench"), interval=30, clock=lambda: now[0])
    stall = StallWatch(_Side([_dump(0, 100, 1)]), every=5, after=10, clock=lambda: now[0])
    progress = RecordingProgress()
    tick = _ticker(progress, "guest: w", 60.0, watch, stall)
    now[0] = 25.0
    tick(25.0)  # the first status read
    now[0] = 32.0
    tick(32.0)  # the watch's 30 s question finds a full pool before 10 s of stall: it waits for the stall
    assert watch.said == "Ceph: POOL_FULL: it" and progress.events[-1] == ("status", "guest: w: 28s left")
    answer[0] = "OSD_DOWN"
    now[0] = 62.0
    stall.read_at = 62.0  # (no status read this tick: 37 s since the last change as read)
    with pytest.raises(HypervisorError, match="OSD_DOWN"):
        tick(62.0)
    assert progress.events[-1] == ("warn", "guest: w: stalled for 37s (no I/O completed; Ceph: OSD_DOWN: it)")
