"""History over real runs, and their export to a real InfluxDB and Prometheus's promtool.

Three runs of one short scenario (one boot each, one 1 s job, 3 repeats), its libvirt dir pool
on an ext4 file system of its own (a loop device over a sparse file).  Between the second and
the third run the host's side changes outside vmbench: a read limit on that loop device for
every process (cgroup v1 blkio: the root group's, for host fio, and each VM's own group, for
QEMU, as libvirt makes it).  So
``vmbench history`` must find a step at the third run on the host and in the guest, and say
that nothing vmbench records changed there; the third run, made with ``--quiet`` as a timer
would, must exit 7 (regressed).

Then the stored run and the whole history go to a real ``influxd`` (Debian's influxdb 1.x,
started here on a loopback port with authentication on), are read back with InfluxQL, and
every number is compared with the report's and the history's; a wrong password and a closed
port give one clear error each.  The OpenMetrics text of the run passes ``promtool check
metrics``, and the history's is read whole by ``promtool tsdb create-blocks-from openmetrics``.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import libvirt
import pytest

from tests.influx import InfluxServer, free_port
from tests.integration.conftest import ROOT, flat, vmbench, write

POOL = "vmbench-it-history"
MOUNT = Path("/var/lib/vmbench-it-history")  # QEMU (libvirt-qemu) reaches it: not under pytest's private /tmp
SLOW_MOUNT = Path("/var/lib/vmbench-it-history-slow")
READ_IOPS_LIMIT = 300
THROTTLE = Path("/sys/fs/cgroup/blkio/blkio.throttle.read_iops_device")
MACHINE = THROTTLE.parent / "machine"  # libvirt's group of the VMs' QEMU processes

SCENARIO = f"""
name: it-history
storage: {{type: dir, pool: {POOL}, scratch_size: 256M}}
vm: {{memory: 768M, bus: virtio-blk, cache: none, aio: native}}
repeats: 3
jobs:
  - {{name: 4k-randread, rw: randread, bs: 4k, iodepth: 4, size: 64M, runtime: 1s, ramp: 0s}}
"""


@dataclass(frozen=True)
class Runs:
    scenario: Path
    db: Path
    runs: list[subprocess.CompletedProcess]
    seconds: list[float]


class ReadLimit(threading.Thread):
    """A read limit of ``iops`` on device ``majmin`` for every process of this machine, set outside
    vmbench as an admin would: on the root blkio group (host fio), and on each VM's own groups
    as libvirt makes them (QEMU runs in ``machine/<vm>.libvirt-qemu``, and cgroup v1 blkio
    limits are per group, not inherited).  Until :meth:`stop`, which lifts them all."""

    def __init__(self, majmin: str, iops: int) -> None:
        super().__init__(daemon=True)
        self.majmin, self.iops = majmin, iops
        self.done: set[Path] = set()
        self.halt = threading.Event()

    def _set(self, group: Path, iops: int) -> None:
        try:
            (group / THROTTLE.name).write_text(f"{self.majmin} {iops}\n")
        except OSError:  # the VM's group went away with the VM
            pass

    def run(self) -> None:
        self._set(THROTTLE.parent, self.iops)
        while not self.halt.wait(0.2):
            for f in MACHINE.rglob(THROTTLE.name) if MACHINE.is_dir() else ():
                if f.parent != MACHINE and f.parent not in self.done:
                    self._set(f.parent, self.iops)
                    self.done.add(f.parent)

    def stop(self) -> None:
        if self.halt.is_set():
            return
        self.halt.set()
        if self.is_alive():
            self.join()
        for group in [THROTTLE.parent, *self.done]:
            self._set(group, 0)


def _sh(*argv: str) -> str:
    return subprocess.run(list(argv), check=True, capture_output=True, text=True).stdout.strip()


class Backing:
    """An ext4 file system of its own at ``mount``: a loop device over a sparse file of 4 GiB
    (the root disk and the scratch disk fit), ``majmin`` its device."""

    def __init__(self, image: Path, mount: Path) -> None:
        self.image, self.mount = image, mount
        _sh("truncate", "-s", "4G", str(image))
        self.loop = _sh("losetup", "--find", "--show", "--direct-io=on", str(image))
        self.majmin = _sh("lsblk", "-dno", "MAJ:MIN", self.loop).strip()
        _sh("mkfs.ext4", "-q", self.loop)
        mount.mkdir(mode=0o711, exist_ok=True)
        _sh("mount", self.loop, str(mount))
        mount.chmod(0o711)

    def remove(self) -> None:
        subprocess.run(["umount", str(self.mount)], check=False)
        subprocess.run(["losetup", "-d", self.loop], check=False)
        self.image.unlink(missing_ok=True)
        subprocess.run(["rmdir", str(self.mount)], check=False)


def _pool(conn, path: Path):
    """The scenario's dir pool, (re)defined at ``path`` and started (vmbench uses a pool that exists)."""
    try:
        old = conn.storagePoolLookupByName(POOL)
        if old.isActive():
            old.destroy()
        old.undefine()
    except libvirt.libvirtError:
        pass
    pool = conn.storagePoolDefineXML(f"<pool type='dir'><name>{POOL}</name><target><path>{path}</path></target></pool>", 0)
    pool.create(0)
    return pool


@pytest.fixture(scope="module")
def history_runs(machine, tmp_path_factory):
    """Three runs of SCENARIO; before the third the pool moves to a slower backing: another
    file system, whose device's reads are limited."""
    if not THROTTLE.exists():
        pytest.fail(f"{THROTTLE} is missing: this test limits the pool's device with cgroup v1 blkio")
    tmp = tmp_path_factory.mktemp("history")
    conn = libvirt.open("qemu:///system")
    backings: list[Backing] = []
    limit = None
    try:
        backings += [Backing(tmp / "fast.img", MOUNT), Backing(tmp / "slow.img", SLOW_MOUNT)]
        limit = ReadLimit(backings[1].majmin, READ_IOPS_LIMIT)
        _pool(conn, MOUNT)
        scenario = write(tmp, "history.yaml", SCENARIO)
        db = tmp / "history.db"
        runs, seconds = [], []
        for i in range(3):
            if i == 2:  # the host's side changes, outside vmbench: the pool moves to the slower backing
                limit.start()
                _pool(conn, SLOW_MOUNT)
            start = time.monotonic()
            runs.append(vmbench("run", str(scenario), "--db", str(db), *(["--quiet"] if i == 2 else [])))
            seconds.append(time.monotonic() - start)
            assert runs[-1].returncode in (0, 7), runs[-1].stderr[-4000:]
        limit.stop()
        print(f"history runs took {', '.join(f'{s:.0f}' for s in seconds)} s")
        yield Runs(scenario, db, runs, seconds)
    finally:
        if limit is not None:
            limit.stop()
        try:
            pool = conn.storagePoolLookupByName(POOL)
            if pool.isActive():
                pool.destroy()
            pool.undefine()
        except libvirt.libvirtError:
            pass
        conn.close()
        for b in backings:
            b.remove()


def test_the_step_is_found_and_the_pool_move_named_there(history_runs):
    got = vmbench("history", "it-history", "--db", str(history_runs.db))
    assert got.returncode == 0, got.stderr
    text = got.stdout
    print(text)
    assert "History of scenario it-history: 3 run(s) compared" in text and max(len(line) for line in text.splitlines()) <= 120
    doc = json.loads(vmbench("history", str(history_runs.scenario), "--db", str(history_runs.db), "--format", "json").stdout)
    ids = [r["id"] for r in doc["runs"]]
    by_side = {s["side"]: s for s in doc["series"]}
    assert set(by_side) == {"host", "guest"}
    for side, s in by_side.items():
        values = [p["value"] for p in s["points"]]
        assert values[2] < 0.5 * min(values[:2]), (side, values)  # the limit took: fewer than half the IOPS
        third = [st for st in s["steps"] if st["run"] == ids[2]]
        assert len(third) == 1, (side, s["steps"])
        st = third[0]
        assert st["change"]["verdict"] == "slower" and st["change"]["high"] < 0 and st["after"] == [ids[2]]
        assert [(c["name"], c["before"], c["after"]) for c in st["environment_changes"]] == [
            ("pool path", str(MOUNT), str(SLOW_MOUNT))]  # what vmbench recorded of the move; the limit it cannot see
        assert s["points"][2]["vs_previous"]["verdict"] == "slower"
    assert f"changed between #2 and #3: pool path: {MOUNT} -> {SLOW_MOUNT}" in text and "STEP at #3" in text


def test_the_quiet_run_tells_the_timer_it_regressed(history_runs):
    third = history_runs.runs[2]
    assert third.returncode == 7, third.stdout + third.stderr[-3000:]
    assert "waiting for the guest agent" not in flat(third.stderr) and "[00:" not in third.stderr  # --quiet: no progress
    out = third.stdout
    assert out.startswith("vmbench: run 3 (") and "of it-history: ok; results in " in out
    assert "REGRESSION (2):" in out and "4k-randread · guest · cell baseline, raw: STEP at #3" in out
    assert "history: 3 comparable run(s) of it-history in this database; 2 step(s) worse at this run" in out


@pytest.fixture(scope="module")
def influxd():
    with InfluxServer() as server:
        yield server


def _influx_args(influxd, password_file) -> list[str]:
    return ["--url", influxd.url, "--database", "vmbench", "--user", "admin", "--password-file", str(password_file)]


def test_a_run_and_the_history_in_influxdb_match_the_report(history_runs, influxd):
    db = str(history_runs.db)
    sent = vmbench("export", "latest", "--db", db, *_influx_args(influxd, influxd.password_file))
    assert sent.returncode == 0 and "wrote 2 point(s) of 1 run(s) to " + influxd.url + "/write" in sent.stderr, sent.stderr
    report = json.loads(vmbench("report", "latest", "--db", db, "--format", "json").stdout)
    gaps = {r["side"]: r for r in report["tables"][0]["records"]}
    rows = influxd.query("SELECT * FROM vmbench WHERE scenario = 'it-history'")
    assert len(rows) == 2
    for row in rows:
        r = gaps[row["side"]]
        for field, key in (("iops", "iops"), ("mbps", "mb_s"), ("p50", "p50_ms"), ("p99", "p99_ms"), ("p999", "p999_ms"),
                           ("gap", "gap"), ("repeats", "repeats")):
            assert row[field] == pytest.approx(r[key], rel=1e-12), (row["side"], field)
    # the whole history: one write per run, each run's points at its own start
    sent = vmbench("history", "it-history", "--db", db, "--format", "influx", *_influx_args(influxd, influxd.password_file))
    assert sent.returncode == 0 and "wrote 6 point(s) of 3 run(s)" in flat(sent.stderr), sent.stderr
    doc = json.loads(vmbench("history", "it-history", "--db", db, "--format", "json").stdout)
    rows = influxd.query("SELECT * FROM vmbench WHERE scenario = 'it-history' ORDER BY time")
    assert len(rows) == 6  # the latest run's two points written twice: the same series and time, one point
    starts = {r["id"]: r["started_at"] for r in doc["runs"]}
    for s in doc["series"]:
        mine = [row for row in rows if row["side"] == s["side"]]
        assert [row["run_id"] for row in mine] == [p["run"] for p in s["points"]]
        for row, p in zip(mine, s["points"]):
            assert row["iops"] == pytest.approx(p["iops"], rel=1e-12) and row["mbps"] == pytest.approx(p["mb_s"], rel=1e-12)
            assert row["p99"] == pytest.approx(p["p99_ms"], rel=1e-12) and row["repeats"] == p["repeats"]
            assert time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(row["time"])) == starts[row["run_id"]][:19]


def test_a_wrong_password_and_a_closed_port_are_clear_errors(history_runs, influxd, tmp_path):
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-password\n")
    got = vmbench("export", "latest", "--db", str(history_runs.db), *_influx_args(influxd, wrong))
    assert got.returncode == 4 and got.stdout == ""
    assert got.stderr.startswith(f"error: InfluxDB at {influxd.url}/write refused the credentials (HTTP 401: ")
    assert "not-the-password" not in got.stderr and "Traceback" not in got.stderr
    closed = f"http://127.0.0.1:{free_port()}"
    got = vmbench("export", "latest", "--db", str(history_runs.db), "--url", closed, "--database", "vmbench")
    assert got.returncode == 4
    assert got.stderr.splitlines()[0] == f"error: cannot reach InfluxDB at {closed}/write: connection refused (tried twice)"


def test_openmetrics_passes_promtool(history_runs, tmp_path):
    prom = tmp_path / "textfile" / "vmbench.prom"
    prom.parent.mkdir()
    got = vmbench("export", "latest", "--db", str(history_runs.db), "--format", "openmetrics", "-o", str(prom))
    assert got.returncode == 0, got.stderr
    assert [p.name for p in prom.parent.iterdir()] == ["vmbench.prom"]  # no temporary file left beside it
    check = subprocess.run(["promtool", "check", "metrics"], input=prom.read_text(), capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout + check.stderr == "", check.stdout + check.stderr
    series = tmp_path / "history.om"
    got = vmbench("history", "it-history", "--db", str(history_runs.db), "--format", "openmetrics", "-o", str(series))
    assert got.returncode == 0, got.stderr
    blocks = subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(series), str(tmp_path / "tsdb")],
                            capture_output=True, text=True)
    assert blocks.returncode == 0, blocks.stdout + blocks.stderr
    assert series.read_text().count("vmbench_iops{") == 6


def test_the_history_page(history_runs, tmp_path):
    page = tmp_path / "history.html"
    got = vmbench("history", "it-history", "--db", str(history_runs.db), "--format", "html", "-o", str(page))
    assert got.returncode == 0, got.stderr
    html = page.read_text()
    assert html.count("<svg") == 2 and html.count("step -") >= 2 and f"pool path: {MOUNT} -&gt; {SLOW_MOUNT}" in html


def test_the_grafana_dashboard_reads_what_the_export_writes(history_runs, influxd):
    """Each panel's and variable's InfluxQL of docs/grafana-vmbench.json, its variables filled
    in as Grafana would, returns the exported figures."""
    sent = vmbench("history", "it-history", "--db", str(history_runs.db), "--format", "influx",
                   *_influx_args(influxd, influxd.password_file))
    assert sent.returncode == 0, sent.stderr
    dash = json.loads((ROOT / "docs" / "grafana-vmbench.json").read_text())
    for var in dash["templating"]["list"]:
        values = [r["value"] for r in influxd.query(var["query"].replace("$scenario", "it-history"))]
        assert values, var["name"]
        assert {"scenario": "it-history", "job": "4k-randread"}.get(var["name"], values[0]) in values
    for panel in dash["panels"]:
        q = panel["targets"][0]["query"]
        q = (q.replace("$scenario", "it-history").replace("$host", ".*").replace("$job", ".*")
             .replace("$timeFilter", "time > now() - 3650d").replace("$__interval", "1s"))  # runs minutes apart here
        rows = [r for r in influxd.query(q) if r.get("last") is not None]
        assert len(rows) >= 3, (panel["title"], q)  # a point per run at least
