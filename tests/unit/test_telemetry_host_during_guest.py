"""The host sampled while fio runs in a guest whose scratch disk lives on the host's storage (a
zvol, or a file on a dataset): a second sampler on the host (with the pool), none of ZFS in the
guest, both killed; the host's series stored as "host-disk", "host-cpu", "zpool", "arc"; their
summary, figures, columns, flags and HTML timelines; and a host-only run's HTML report."""

from __future__ import annotations

import re
import shutil
import textwrap
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.fakes import FakeGuestTransport, FakeHost
from tests.fakezfs import FakeZfsHost
from tests.unit.test_host_only_run import SCENARIO as HOST_ONLY
from tests.unit.test_html import Balance, section
from tests.unit.test_telemetry_zfs import IOSTAT, ZfsHost
from tests.records import as_cells, as_measurement, as_measurements, as_series
from vmbench.run import measure
from vmbench.drivers.hostonly import HostOnlyDriver
from vmbench.fio.runner import FioRequest, Sampling, run_fio
from vmbench.run.measure import Measurer, Where
from vmbench.paths import HostPaths, StatePaths
from vmbench.run.plan import Step
from vmbench.progress import RecordingProgress
from vmbench.report.build import build_report
from vmbench.report.load import SAMPLED, load_run, with_telemetry
from vmbench.report.rows import CPU_IDLE_MIN, Figures, aggregate, telemetry_notes
from vmbench.report.html import render_html
from vmbench.results.lines import plain_lines
from vmbench.report.render import Format, render
from vmbench.report.tables import HOST_TELEMETRY_NOTE, gap_table, layer_table
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from vmbench.telemetry.sampler import (DEVICES_SCRIPT, FIRST_SAMPLE_SCRIPT, HOST_SOURCES, SAMPLER_SCRIPT, TO_OUTPUT, as_host,
                                      first_sample_argv, sampler_argv, summary)
from vmbench.results.runrow import RunRow

SCENARIO = """
name: g
storage: {scratch_size: 256M}
jobs:
  - {name: w, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
"""
POOL_FILE = "/tank/vmbench/vmbench-r1-1-scratch.raw"  # the scratch disk: a file on a dataset
GUEST_WORKDIR = "/run/vmbench"
HOST_WORKDIR = "/var/lib/vmbench/work"


class PoolHost(ZfsHost):
    """A fake ZFS host whose pool sampler also writes the ARC counters, as the script does."""

    def __init__(self) -> None:
        super().__init__(iostat=IOSTAT, scans=("none", "none"))
        self.pool_files: set[str] = set()
        self.dirs.add(HOST_WORKDIR)
        self.files[POOL_FILE] = b""

    def spawn(self, argv):
        if len(argv) > 7:
            self.pool_files.add(str(argv[4]))
        return super().spawn(argv)

    def _sample_extra(self, path: str, n: int) -> str:
        if path not in self.pool_files:
            return ""
        return "".join(f"{k:<31} 4    {v}\n" for k, v in (("hits", n * 90), ("misses", n * 10), ("size", 4 << 30),
                                                          ("c", 5 << 30), ("c_min", 1 << 30), ("c_max", 8 << 30)))


@pytest.fixture
def sides():
    s = parse_scenario(textwrap.dedent(SCENARIO), "g.yaml")
    host = PoolHost()
    guest = FakeGuestTransport("guest g", s.cells[0].vm, "VMBSER001")
    guest.dirs.add(GUEST_WORKDIR)
    guest.commands = host.commands  # one list: the order across both sides
    return s, host, guest


def guest_where(s, host, guest, **kw) -> Where:
    args = dict(host_side=host, host_workdir=HOST_WORKDIR, host_target=POOL_FILE, zfs_pool="tank")
    args.update(kw)
    return Where(guest, "guest", GUEST_WORKDIR, guest.disk, "tcg", cell=s.cells[0], layer="raw", **args)


def measure_once(tmp_path, s, where: Where) -> tuple[ResultsDB, int, list[dict]]:
    db = ResultsDB(tmp_path / "r.db")
    run_id = db.start_run(RunRow.starting(tag="r1", scenario_name="g", scenario_path="g.yaml", scenario_text=SCENARIO, plan={}, version="t"))
    step = Step(side="guest", boot=1, cell=s.cells[0].name, stack=None, layer="raw", depth=0, job="w", repeat=1)
    Measurer(s, db, run_id, 1, RecordingProgress()).measure(where, [step])
    return db, run_id, db.rows("measurements", run_id)


# ---- sampling ---------------------------------------------------------------------------------------


def test_a_guest_run_samples_the_host_with_the_pool_and_the_guest_without(tmp_path, sides):
    s, host, guest = sides
    db, run_id, [m] = measure_once(tmp_path, s, guest_where(s, host, guest))
    assert m["side"] == "guest" and m["target"] == guest.disk
    # the host's sampler loops beside the guest (its pool's iostat with it), in the host's work directory; the
    # guest's takes two samples, one before fio and one after, with nothing running in the guest between them
    [h] = host.spawned
    assert guest.spawned == []
    token = re.search(r"telemetry-([0-9a-f]+)\.txt", h[4]).group(1)
    assert h == sampler_argv(f"{HOST_WORKDIR}/telemetry-{token}.txt", len_s(h), pool="tank")
    # each the command's output (no file in the guest), the first with the devices under the target: one command each
    assert guest_samples(guest) == [first_sample_argv(guest.disk, TO_OUTPUT), sampler_argv(TO_OUTPUT, 0)]  # no pool argument
    assert not [c for c in guest.commands if c[0] in ("lsblk", "findmnt") or (c[0] == "rm" and f"{GUEST_WORKDIR}/telemetry-" in " ".join(c))]
    assert not any("zpool" in " ".join(c) for c in guest.unknown)
    # the loop killed, every file removed
    assert host.left_running == [] and guest.left_running == [] and host.killed
    assert not [f for f in host.files if "/telemetry-" in f] and not [f for f in guest.files if "/telemetry-" in f]
    # the host's sampler starts before and stops after the guest's samples, which bracket fio
    order = [c for c in host.commands if c[:2] == ["sh", "-c"] or c[0] == "fio"]
    sh = [side_and_max(c) for c in order if c[0] == "sh" and c[2] != DEVICES_SCRIPT]
    assert sh == [("host", str(len_s(h))), ("guest", "0"), ("guest", "0"), ("host", "0")]
    fio_at = next(i for i, c in enumerate(order) if c[:2] == ["fio", "--name=w"])  # the measurement (not the precondition)
    assert [c[0] for c in order[fio_at - 2:fio_at + 3]] == ["sh", "sh", "fio", "sh", "sh"]
    # stored per measurement: the guest's own, the host's under host-*, the pool's as always
    rows = db.telemetry(run_id)
    assert sorted(r["source"] for r in rows) == ["arc", "cpu", "disk", "host-cpu", "host-disk", "zpool"]
    by = {r["source"]: r["series"] for r in rows}
    assert by["disk"]["primary"] == "vdb" and by["host-disk"]["primary"] == "sda"
    assert by["zpool"]["write_mb_s"] == [200.0, 100.0] and by["arc"]["hits"] == [90, 90]
    assert all(r["measurement_id"] == m["id"] for r in rows)
    db.close()


def len_s(argv) -> int:
    return int(argv[6])


def side_and_max(argv) -> tuple[str, str]:
    """A sampler command's side (the guest's write to their output, the host's to a file) and its max seconds."""
    path, _iv, max_s = argv[5:8] if argv[2] == FIRST_SAMPLE_SCRIPT else argv[4:7]
    return ("guest" if path == TO_OUTPUT else "host"), max_s


def guest_samples(guest) -> list[list[str]]:
    """The guest's sampler commands (both scripts), in order."""
    return [c for c in guest.commands if c[:2] == ["sh", "-c"] and c[2] in (SAMPLER_SCRIPT, FIRST_SAMPLE_SCRIPT)
            and TO_OUTPUT in c[4:6]]


def test_the_host_sampler_never_fails_the_measurement(tmp_path, sides):
    s, host, guest = sides
    host.fail_on(lambda argv: argv[:2] == ["sh", "-c"])  # the host cannot start (nor sample) anything
    db, run_id, [m] = measure_once(tmp_path, s, guest_where(s, host, guest))
    assert m["iops"] > 0
    assert sorted(r["source"] for r in db.telemetry(run_id)) == ["cpu", "disk"]  # the guest's only
    assert guest.left_running == [] and host.left_running == []
    db.close()


def test_run_fio_without_a_host_workdir_or_telemetry(sides):
    s, host, guest = sides
    job = s.jobs[0]
    run = run_fio(guest, FioRequest(job, guest.disk, GUEST_WORKDIR, "x", sampling=Sampling(host_side=host, zfs_pool="tank")))
    assert set(run.series) == {"disk", "cpu"} and host.spawned == []  # warned, not sampled; the guest without the pool
    samples = guest_samples(guest)
    assert len(samples) == 2 and [len(c) for c in samples] == [8, 7]  # no pool argument
    run = run_fio(guest, FioRequest(job, guest.disk, GUEST_WORKDIR, "x", sampling=Sampling(
        telemetry=False, host_side=host, host_workdir=HOST_WORKDIR, zfs_pool="tank")))
    assert run.series == {} and host.spawned == [] and len(guest_samples(guest)) == 2
    # no host target: every whole disk of the host
    run = run_fio(guest, FioRequest(job, guest.disk, GUEST_WORKDIR, "x", sampling=Sampling(host_side=host, host_workdir=HOST_WORKDIR,
                                                                                zfs_pool="tank")))
    assert run.series["host-disk"]["all_devices"] and {"zpool", "arc", "host-cpu"} <= set(run.series)
    assert host.left_running == [] and guest.left_running == []


def test_where_passes_the_host_only_for_a_guest(monkeypatch, sides):
    s, host, guest = sides

    class Stop(Exception):
        pass

    seen: dict = {}

    def spy(transport, request, progress=None):
        seen.clear()
        seen.update(vars(request.sampling))
        raise Stop

    monkeypatch.setattr(measure, "run_fio", spy)
    m = Measurer(s, None, 1, 1, RecordingProgress())  # type: ignore[arg-type]
    step = Step(side="guest", boot=1, cell=s.cells[0].name, stack=None, layer="raw", depth=0, job="w", repeat=1)
    with pytest.raises(Stop):
        m._run(guest_where(s, host, guest), step)
    assert (seen["host_side"], seen["host_workdir"], seen["host_target"], seen["zfs_pool"]) == (host, HOST_WORKDIR, POOL_FILE, "tank")
    with pytest.raises(Stop):  # a guest without a host side: its pool is the host's, never sampled in the guest
        m._run(guest_where(s, host, guest, host_side=None), step)
    assert (seen["host_side"], seen["zfs_pool"]) == (None, None)
    with pytest.raises(Stop):  # the host itself is never sampled twice
        m._run(Where(host, "host", HOST_WORKDIR, POOL_FILE, "host", zfs_pool="tank", host_side=host,
                     host_workdir=HOST_WORKDIR), step)
    assert (seen["host_side"], seen["host_workdir"], seen["host_target"], seen["zfs_pool"]) == (None, "", None, "tank")
    w = Where(guest, "guest", GUEST_WORKDIR, guest.disk, "tcg")
    assert (w.host_side, w.host_workdir, w.host_target, w.zfs_pool) == (None, "", None, None)


# ---- summary, figures, columns, flags ----------------------------------------------------------------


def test_the_stored_series_summarized(tmp_path, sides):
    s, host, guest = sides
    db, run_id, measurements = measure_once(tmp_path, s, guest_where(s, host, guest))
    assert {"host-disk", "host-cpu"} <= set(SAMPLED) and HOST_SOURCES == {"disk": "host-disk", "cpu": "host-cpu"}
    tel = asdict(with_telemetry(db.measurements(run_id), db.series(run_id))[0].telemetry)
    # the guest's vdb and CPUs; the host's sda and CPUs (the fake: 1 MB/s written each second, 40% idle); the pool's
    assert tel["write_mb_s"] == pytest.approx(1.048576, abs=1e-3) and tel["cpu_busy"] == 60.0
    assert tel["host_dev_write_mb_s"] == pytest.approx(1.048576, abs=1e-3) and tel["host_dev_read_mb_s"] == pytest.approx(0.0041, abs=1e-4)
    assert (tel["host_cpu_busy"], tel["host_cpu_idle"]) == (60.0, 40.0)
    assert (tel["pool_write_mb_s"], tel["scan"], tel["txg_timeout_s"], tel["arc_hit_ratio"]) == (150.0, "none", 5, 0.9)
    db.close()
    assert summary(None, None, host_cpu={"idle": [5.0, 15.0]}) == {"host_cpu_idle": 10.0, "host_cpu_busy": 90.0}
    assert summary(None, None, host_disk={"devices": {}}) == {}
    assert as_host({"disk": 1, "cpu": 2, "zpool": 3, "arc": 4}) == {"host-disk": 1, "host-cpu": 2, "zpool": 3, "arc": 4}


def row(side, cell, job, rw, mb_s, tel=None, runtime=60.0, repeat=1, layer=None):
    r = {"side": side, "cell": cell, "stack": None, "layer": layer or ("host" if side == "host" else "raw"), "job": job,
         "iops": mb_s, "bw_bytes": mb_s * 1e6, "clat_bins": {"1000": 1}, "job_hash": "h", "sync": False, "repeat": repeat,
         "settings": {}, "job_params": {"rw": rw, "runtime": runtime, "ramp": 2.0, "jobfile": None}}
    if tel is not None:
        r["telemetry"] = tel
    return r


GUEST = {"read_mb_s": 0.0, "write_mb_s": 90.0, "cpu_busy": 30.0, "cpu_idle": 70.0}
HOST_UNDER = {"host_dev_read_mb_s": 0.0, "host_dev_write_mb_s": 95.0, "host_cpu_busy": 96.0, "host_cpu_idle": 4.0,
              "pool_read_mb_s": 0.0, "pool_write_mb_s": 20.0, "arc_hit_ratio": 0.5, "scan": "scrub", "txg_timeout_s": 5}


def fig(**kw) -> Figures:
    base = dict(iops=1.0, mb_s=100.0, p50_ms=None, p95_ms=None, p99_ms=None, p999_ms=None, repeats=1, cv=None, job_hash="h")
    return Figures(**{**base, **kw})


def test_figures_and_flags_of_a_guest_row():
    rows = [row("guest", "c", "w", "randwrite", 90.0, dict(GUEST, **HOST_UNDER), runtime=10.0),
            row("guest", "c", "w", "randwrite", 90.0, {**GUEST, **HOST_UNDER, "host_cpu_busy": 92.0, "host_cpu_idle": 8.0},
                runtime=10.0, repeat=2)]
    f = aggregate(as_measurements(rows))
    assert (f.host_cpu_busy, f.host_cpu_idle, f.host_dev_write_mb_s, f.host_dev_read_mb_s) == (94.0, 6.0, 95.0, 0.0)
    assert (f.cpu_busy, f.pool_write_mb_s, f.scan) == (30.0, 20.0, "scrub")
    # the side fio ran on (the guest) was not CPU-bound, the host was; the pool flags hold for the guest row
    assert telemetry_notes(as_measurement(rows[0]), f) == [
        "pool wrote 20.0 MB/s of fio's 90.0: compressed or not yet flushed?",
        "host CPU-bound? (6% idle)",
        "shorter than steady state (runtime 10 s < 3 x zfs_txg_timeout of 5 s)",
        "scrub running during the run",
    ]
    assert telemetry_notes(as_measurement(rows[0]), fig(cpu_idle=5.0, host_cpu_idle=50.0)) == ["CPU-bound? (5% idle)"]
    assert telemetry_notes(as_measurement(rows[0]), fig(host_cpu_idle=CPU_IDLE_MIN)) == []
    read = row("guest", "c", "r", "randread", 100.0)
    assert telemetry_notes(as_measurement(read), fig(dev_read_mb_s=100.0, pool_read_mb_s=1.0, host_cpu_idle=50.0, txg_timeout_s=5)) == [
        "served from cache? (pool reads 1.00 MB/s of fio's 100.0)"]
    plain = aggregate(as_measurements([row("guest", "c", "w", "randwrite", 90.0, GUEST)]))
    assert plain.host_cpu_busy is None and plain.host_dev_write_mb_s is None


def test_the_host_cpu_column_and_its_note():
    cells = [{"name": "c", "stacks": [], "settings": {}, "valid": True}]
    meas = [row("host", None, "w", "randwrite", 100.0, {"read_mb_s": 0.0, "write_mb_s": 100.0, "cpu_busy": 20.0, "cpu_idle": 80.0,
                                                         "pool_read_mb_s": 0.0, "pool_write_mb_s": 110.0, "scan": "none",
                                                         "txg_timeout_s": 5}),
            row("guest", "c", "w", "randwrite", 90.0, dict(GUEST, **HOST_UNDER))]
    t = gap_table(as_measurements(meas), as_cells(cells), ["w"], repeats=1)
    headers = [c.header for c in t.columns]
    assert headers[headers.index("dev MB/s r/w"):headers.index("dev MB/s r/w") + 4] == ["dev MB/s r/w", "CPU %", "host CPU %",
                                                                                        "pool MB/s r/w"]
    host, guest = t.records
    assert "host_cpu_pct" not in host and guest["host_cpu_pct"] == 96.0
    assert (guest["host_dev_read_mb_s"], guest["host_dev_write_mb_s"]) == (0.0, 95.0)  # in the records (JSON, CSV)
    assert "host CPU-bound? (4% idle)" in guest["note"] and "CPU-bound? (" not in guest["note"].replace("host CPU-bound? (", "")
    assert "pool wrote 20.0 MB/s of fio's 90.0" in guest["note"] and "scrub running during the run" in guest["note"]
    assert HOST_TELEMETRY_NOTE in t.notes
    text = render([t], Format.TABLE, wide=True)
    line = next(x for x in text.splitlines() if x.lstrip().startswith("w") and "guest" in x)
    assert " 30 " in line and " 96 " in line and "0.00/20.0" in line
    # no host sampled: no column, no note
    plain = gap_table(as_measurements([dict(x, telemetry=GUEST) for x in meas]), as_cells(cells), ["w"], repeats=1)
    assert "host CPU %" not in [c.header for c in plain.columns] and HOST_TELEMETRY_NOTE not in plain.notes
    # the layer table shows it for the layers above the raw disk too
    stacked = [dict(cells[0], stacks=["s"])]
    lt = layer_table(as_measurements(meas + [dict(meas[1], stack="s", layer="partition", depth=1)]), as_cells(stacked), ["w"], repeats=1)
    assert lt is not None and "host CPU %" in [c.header for c in lt.columns]
    assert [r.get("host_cpu_pct") for r in lt.records] == [None, 96.0, 96.0]


# ---- the report and its HTML ----------------------------------------------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "results-v1.db"


@pytest.fixture
def db(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "r.db")
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def test_host_sources_on_guest_rows_reach_the_report_and_the_timelines(db):
    t_s = [1.0, 2.0]
    host_disk = {"t_s": t_s, "devices": {"zd0": {"read_mb_s": [0.0, 0.0], "write_mb_s": [80.0, 100.0]}}, "primary": "zd0",
                 "all_devices": False}
    host_cpu = {"t_s": t_s, "user": [50.0, 60.0], "system": [40.0, 35.0], "iowait": [0.0, 0.0], "steal": [0.0, 0.0],
                "idle": [10.0, 4.0]}
    zpool = {"t_s": [1, 2], "read_mb_s": [0.0, 0.0], "write_mb_s": [1.0, 3.0], "read_ops": [0, 0], "write_ops": [5, 5],
             "vdevs": {}, "scan": "none", "txg_timeout_s": 5}
    arc = {"t_s": t_s, "hits": [9, 9], "misses": [1, 1], "hit_ratio": [0.9, 0.9], "size_bytes": [1e9, 1e9],
           "c_max_bytes": 8e9, "c_min_bytes": 1e9}
    guests = [r for r in db.rows("measurements", 1) if r["side"] == "guest" and r["layer"] == "raw"]
    assert guests
    for r in guests:
        for source, s in (("host-disk", host_disk), ("host-cpu", host_cpu), ("zpool", zpool), ("arc", arc)):
            db.add_telemetry(as_series(run_id=1, measurement_id=r["id"], source=source, series=s))
    header, tables = build_report(load_run(db, 1))
    gaps = tables[0]
    assert {"host CPU %", "pool MB/s r/w", "ARC hit %"} <= {c.header for c in gaps.columns}
    guest_recs = [r for r in gaps.records if r["side"] == "guest"]
    assert guest_recs and all(r["host_cpu_pct"] == 93.0 for r in guest_recs)
    assert all("host CPU-bound? (7% idle)" in r["note"] for r in guest_recs)
    assert all("host_cpu_pct" not in r for r in gaps.records if r["side"] == "host")
    page = render_html(load_run(db, 1))
    timeline = section(page, "plot-timeline")
    assert re.search(r"host-cpu-busy [^:;]*raw: 2 points", timeline) and re.search(r"host-dev-write [^:;]*raw: 2 points", timeline)
    assert re.search(r"pool-write [^:;]*raw: 2 points", timeline)
    assert "host-dev-read" not in timeline  # nothing read: no panel
    p = Balance()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    assert [name for name, _ in plain_lines("host-cpu", host_cpu)] == ["host-cpu-busy"]
    assert plain_lines("host-cpu", host_cpu)[0][1]["values"] == [90.0, 96.0]
    assert [name for name, _ in plain_lines("host-disk", host_disk)] == ["host-dev-read", "host-dev-write"]
    assert plain_lines("host-disk", "not a dict") == []




def test_a_host_only_runs_html_report(tmp_path):
    host = FakeZfsHost()
    host.add("tank/vmbench")
    state = StatePaths(tmp_path / "state")
    db = ResultsDB(tmp_path / "r.db")
    s = parse_scenario(textwrap.dedent(HOST_ONLY), "t.yaml")
    driver = HostOnlyDriver(s.hypervisor, s.storage, host=host, state=state, paths=HostPaths("/var/lib/vmbench"))
    out = Runner(s, db, RecordingProgress(), driver=driver, state=state).run()
    assert out.status == "ok" and not out.invalid_cells
    assert {r["source"] for r in db.telemetry(out.run_id)} >= {"disk", "cpu"}
    assert not {r["source"] for r in db.telemetry(out.run_id)} & {"host-disk", "host-cpu"}  # the host is the side itself
    page = render_html(load_run(db, out.run_id))
    assert page.startswith("<!DOCTYPE html>")
    for variant in ("volblocksize=16k, compression=lz4", "volblocksize=8k, compression=off", "volblocksize=64k, compression=off"):
        assert variant in page
    assert "Host only: storage variants" in page and "host CPU %" not in page
    p = Balance()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    db.close()


def test_a_plain_fake_host_still_samples_alone():
    host = FakeHost()
    host.dirs.add("/w")
    host.files["/pool/v.raw"] = b""
    run = run_fio(host, FioRequest(parse_scenario(textwrap.dedent(SCENARIO), "g.yaml").jobs[0], "/pool/v.raw", "/w", "h"))
    assert set(run.series) == {"disk", "cpu"} and len(host.spawned) == 1 and host.left_running == []
