"""VM disks on a real Ceph pool, and the test cluster itself (tests/ceph.py, one node started from
Debian's packages, shared by the whole module).  vmbench: preflight before anything exists, a
one-factor run (cache none vs writeback) with the RADOS ceiling, librbd on the host and the guest
in one gap table, the pool's telemetry beside fio's, and nothing left in the pool or in libvirt;
``vmbench cleanup`` of a killed run's images and bench objects, and nothing else.  The cluster: RBD images as the
``client.vmbench`` user, fio's rbd engine, ``rados bench``, the mgr's pool and OSD
statistics, QEMU opening an image through librbd.

What these printed on Debian 12 (Ceph 16.2.15, fio 3.33, QEMU 7.2), the shapes the RBD
storage will parse:

* ``ceph status --format json``: ``health.status`` ("HEALTH_OK"), ``health.checks`` ({} when
  OK; else {"MGR_MODULE_ERROR": {"severity", "summary": {"message", "count"}, "muted"}}),
  ``osdmap.{num_osds,num_up_osds,num_in_osds,osd_up_since,osd_in_since,num_remapped_pgs,
  epoch}``, ``pgmap.{pgs_by_state: [{state_name, count}], num_pgs, num_pools, num_objects,
  data_bytes, bytes_used, bytes_avail, bytes_total}``, ``mgrmap.{available, modules}``.  The
  mon's ``pgmap`` lags the mgr by up to 5 s (``mon_mgr_digest_period``): right after a pool
  is made HEALTH_OK comes with its PGs "unknown" while ``ceph pg stat`` (the mgr) already
  says active+clean.
* ``rbd ls vmbench --format json``: ``["t1"]`` (``[]`` when empty); ``rbd ls -l --format
  json``: ``[{"image", "id", "size", "format"}]``; ``rbd info --format json``: ``{"name",
  "id", "size", "objects", "order", "object_size", "snapshot_count", "block_name_prefix",
  "format", "features": ["layering", "exclusive-lock", "object-map", "fast-diff",
  "deep-flatten"], "op_features", "flags", "create_timestamp", "access_timestamp",
  "modify_timestamp"}`` (timestamps like "Thu Nov 26 14:30:22 2026").
* ``rbd image-meta set IMG vmbench-run r0000test`` prints nothing; ``image-meta get IMG KEY``
  prints the value and a newline ("r0000test\\n"); a missing key exits 2, stderr "failed to
  get metadata KEY of image : (2) No such file or directory" and "rbd: getting metadata
  failed: (2) No such file or directory"; ``image-meta list --format json``:
  ``{"vmbench-run": "r0000test"}``.  ``rbd rm`` prints its progress on stderr ("Removing
  image: 6% complete...", ..., "100% complete...done."; ``--no-progress`` silences it).
* fio ``--ioengine=rbd --pool=vmbench --rbdname=IMG --clientname=vmbench`` with
  ``CEPH_CONF`` = the client conf, ``--output-format=json``: clean JSON on stdout, the usual
  shape (``jobs[0].write.{iops, bw, clat_ns.mean, lat_ns, ...}``, ``"job options"`` has
  ioengine/pool/rbdname/clientname); ``disk_util`` describes the host disk under fio's
  working directory (``[{"name": "vda", ...}]``), nothing of the RBD image: ignore it.
* ``rados bench -p vmbench 3 write -b 4096 -t 4 --no-cleanup --format json`` (works on Ceph
  16) prints a line ``hints = 1`` first, then one JSON object: every value is a *string*:
  ``{"concurrent_ios", "object_size", "op_size", "seconds_to_run", "max_objects",
  "object_prefix", "datas": [{"sec", "cur_ops", "started", "finished", "avg_bw", "cur_bw",
  "last_lat", "avg_lat"}], "total_time_run", "total_writes_made", "write_size",
  "object_size" (twice in the object), "bandwidth" (MB/s), "stddev_bandwidth",
  "max_bandwidth", "min_bandwidth", "average_iops", "stddev_iops" (garbage, e.g.
  "803644336"), "max_iops", "min_iops", "average_latency" (s), "stddev_latency",
  "max_latency", "min_latency"}``.  ``rados -p vmbench cleanup`` prints "Removed N objects".
* ``ceph osd pool stats vmbench --format json``: ``[{"pool_name", "pool_id", "recovery": {},
  "recovery_rate": {}, "client_io_rate": {"read_bytes_sec", "write_bytes_sec",
  "read_op_per_sec", "write_op_per_sec"}}]`` (integers); ``client_io_rate`` is ``{}`` when
  idle, and a ``*_bytes_sec`` key is left out while it is 0 (``read_op_per_sec: 0`` stays).
  The rates are averages over the OSD's last reports to the mgr (every 5 s): they reach the
  load 3-5 s late and keep an earlier load's reads for a while: not a per-second meter.
* ``ceph osd perf --format json``: ``{"pg_ready": true, "osdstats": {"osd_perf_infos":
  [{"id": 0, "perf_stats": {"commit_latency_ms", "apply_latency_ms", "commit_latency_ns",
  "apply_latency_ns"}}]}}`` (integers, whole milliseconds: ``*_ns`` is ``*_ms`` x 10^6;
  BlueStore reports commit == apply).
* ``rbd perf image iostat vmbench --format json`` (probed by hand, not tested here): needs
  mgr caps: as client.vmbench with the caps above "mgr command failed: (13) Permission
  denied: access denied: does your client key have mgr caps?" (it would need ``mgr 'profile
  rbd pool=vmbench'``).  As admin: "rbd: waiting for initial image stats" on stderr for a
  few seconds, then one sample and exit (``--iterations`` is refused with a format):
  ``[{"pool", "pool_namespace", "image", "write_ops", "read_ops", "write_bytes",
  "read_bytes", "write_latency", "read_latency"}]`` (floats; ops and bytes per second;
  ``write_latency`` was 46,817,167 at ~5,000 writes/s QD4: not a mean in ns, unit unchecked).
* ``qemu-img info rbd:vmbench/IMG:id=vmbench:conf=CONF`` (the keyring named in CONF's
  ``[client.vmbench]``) works, as does the ``-blockdev`` libvirt makes for a network disk:
  ``{"driver": "rbd", "pool", "image", "server": [{"host": "127.0.0.1", "port": "PORT"}],
  "user": "vmbench", "auth-client-required": ["cephx", "none"], "key-secret": ID}`` with the
  key in a ``secret`` object and no conf at all; ``--output=json``: ``{"virtual-size",
  "filename", "cluster-size": 4194304, "format": "raw", "dirty-flag"}``.  A bare
  ``127.0.0.1:PORT`` mon address (no ``v2:``) is taken as msgr2: the mon binds only that.
  Under libvirt QEMU runs as libvirt-qemu (uid 64055): a ``<config file=...>`` it cannot
  read (this cluster's conf under pytest's 0700 tmp dir) fails the domain's start with
  "error reading conf file ...: No such file or directory"; ``<host>`` + ``<auth>`` with a
  ceph secret needs no file at all (and the keyring named in a readable conf may stay 0600
  root: the key from the secret wins).

Timings and memory (the fixture prints them; 2 shared cores, other work running): start to
HEALTH_OK with all PGs active+clean 14.5-18 s, a second cluster beside the first the same;
stop 0.4-1.1 s (the OSD first: stopped together with the mon it waits 5 s for the mon to mark
it down); RSS mon ~41 MB, mgr ~167 MB, OSD ~50 MB at start and 300-400 MB after these tests
wrote (``osd_memory_target`` 1 GiB).  fio 4k randwrite QD16 7,100-12,000 IOPS, rados bench
4 KiB x 4 1,050-2,150 IOPS.  The module takes about 50 s.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

import libvirt

from tests.ceph import CephCluster
from tests.integration.conftest import ROOT, URI, flat, vmbench, wait_for, write
from vmbench.scenario.backend import Storage, StorageType
from vmbench.scenario.model import CephConfig
from vmbench.settings import ImageFormat
from vmbench.storage.rbd import RbdStorage
from vmbench.transport.local import LocalTransport

POOL = "vmbench"


def _report(config, line: str) -> None:
    """A line on the terminal, past pytest's output capture (shown with -q too)."""
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is None or capture is None:
        return
    with capture.global_and_fixture_disabled():
        reporter.write_line(line)


def _rss(cluster: CephCluster) -> str:
    return ", ".join(f"{name} {kib / 1024:.0f} MB" for name, kib in sorted(cluster.rss_kib().items()))


@pytest.fixture(scope="module")
def cluster(request, machine):
    """One cluster for the module (vmbench's runs and the client checks share it), in a
    directory QEMU (libvirt-qemu) can read the client configuration in."""
    started = time.monotonic()
    base = Path(tempfile.mkdtemp(prefix="vmbench-ceph-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    ceph = CephCluster.start(base / "cluster")
    os.chmod(ceph.conf_path, 0o644)
    _report(request.config, f"\ntest Ceph cluster: HEALTH_OK in {ceph.timings['health_ok']:.1f}s "
                            f"({time.monotonic() - started:.1f}s with the fixture), mon {ceph.mon_host}; RSS {_rss(ceph)}")
    pids = ceph.pids()
    try:
        yield ceph
    finally:
        rss = _rss(ceph)
        ceph.stop(discard_block=True)
        shutil.rmtree(base, ignore_errors=True)
        _report(request.config, f"\ntest Ceph cluster: RSS at the end {rss}; stopped in {ceph.timings['stop']:.1f}s")
    alive = [pid for pid in pids.values() if _alive(pid)]
    assert not alive, f"Ceph daemons still running after stop(): {alive}"


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state


def client(cluster: CephCluster, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
    """``argv`` as a client process with ``CEPH_CONF`` set to the client conf."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout, env=cluster.client_env())
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def rbd(cluster: CephCluster, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    return client(cluster, "rbd", "--id", cluster.user, *args, check=check)


def admin_rados(cluster: CephCluster, *args: str, timeout: float = 60) -> str:
    done = subprocess.run(["rados", "--conf", str(cluster.admin_conf_path), "--name", "client.admin", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"rados {' '.join(args)}: {done.stderr.strip()}"
    return done.stdout


def test_health_ok_with_one_osd_up_and_in(cluster):
    status = cluster.status()
    assert status["fsid"] == cluster.fsid
    assert status["health"]["status"] == "HEALTH_OK", status["health"]
    osdmap = status["osdmap"]
    assert (osdmap["num_osds"], osdmap["num_up_osds"], osdmap["num_in_osds"]) == (1, 1, 1)
    assert {s["state_name"] for s in status["pgmap"]["pgs_by_state"]} == {"active+clean"}
    pools = {p["pool_name"]: p for p in cluster.ceph_json("osd", "pool", "ls", "detail")}
    assert pools[POOL]["size"] == 1 and "rbd" in pools[POOL]["application_metadata"]
    caps = cluster.ceph_json("auth", "get", "client.vmbench")[0]["caps"]
    assert caps == {"mon": "profile rbd", "osd": "profile rbd pool=vmbench", "mgr": "allow r"}
    # everything under base_dir: the client conf names the mon and the keyring, nothing else
    conf = cluster.conf_path.read_text()
    assert f"mon_host = {cluster.mon_host}" in conf and f"keyring = {cluster.keyring_path}" in conf
    assert cluster.mon_host.startswith("127.0.0.1:")
    assert sorted(cluster.pids()) == ["mgr", "mon", "osd"]


def test_rbd_image_lifecycle_as_the_client_user(cluster):
    rbd(cluster, "create", "--size", "64M", f"{POOL}/t1")
    assert rbd(cluster, "image-meta", "set", f"{POOL}/t1", "vmbench-run", "r0000test").stdout == ""
    assert rbd(cluster, "image-meta", "get", f"{POOL}/t1", "vmbench-run").stdout == "r0000test\n"
    assert json.loads(rbd(cluster, "image-meta", "list", f"{POOL}/t1", "--format", "json").stdout) == {"vmbench-run": "r0000test"}
    missing = rbd(cluster, "image-meta", "get", f"{POOL}/t1", "no-such-key", check=False)
    assert missing.returncode == 2 and "No such file or directory" in flat(missing.stderr)
    assert json.loads(rbd(cluster, "ls", POOL, "--format", "json").stdout) == ["t1"]
    (image,) = json.loads(rbd(cluster, "ls", "-l", POOL, "--format", "json").stdout)
    assert image["image"] == "t1" and image["size"] == 64 * 1024**2 and image["format"] == 2
    info = json.loads(rbd(cluster, "info", f"{POOL}/t1", "--format", "json").stdout)
    assert {"name", "id", "size", "object_size", "block_name_prefix", "features", "create_timestamp"} <= set(info)
    assert rbd(cluster, "ls", POOL).stdout == "t1\n"
    rbd(cluster, "rm", f"{POOL}/t1")
    assert json.loads(rbd(cluster, "ls", POOL, "--format", "json").stdout) == []


def test_fio_rbd_engine_as_the_client_user(cluster, pytestconfig):
    rbd(cluster, "create", "--size", "128M", f"{POOL}/fio1")
    try:
        done = client(cluster, "fio", "--name=rbd-4k-randwrite", "--ioengine=rbd", f"--pool={POOL}", "--rbdname=fio1",
                      f"--clientname={cluster.user}", "--rw=randwrite", "--bs=4k", "--iodepth=16", "--time_based",
                      "--runtime=3", "--output-format=json", timeout=120)
        result = json.loads(done.stdout)  # nothing but the JSON on stdout
        (job,) = result["jobs"]
        assert job["error"] == 0
        assert job["job options"]["ioengine"] == "rbd" and job["job options"]["clientname"] == cluster.user
        assert job["write"]["iops"] > 0 and job["write"]["clat_ns"]["mean"] > 0
        _report(pytestconfig, f"fio rbd 4k randwrite QD16, 3 s: {job['write']['iops']:.0f} IOPS")
    finally:
        rbd(cluster, "rm", f"{POOL}/fio1")


def test_rados_bench_json(cluster, pytestconfig):
    out = admin_rados(cluster, "-p", POOL, "bench", "3", "write", "-b", "4096", "-t", "4", "--no-cleanup", "--format", "json",
                      timeout=120)
    prefix, brace, rest = out.partition("{")
    assert prefix.strip() == "hints = 1"  # a line before the JSON
    bench = json.loads(brace + rest)
    assert all(isinstance(v, str) for k, v in bench.items() if k != "datas")  # numbers as strings
    assert int(bench["total_writes_made"]) > 0 and int(bench["average_iops"]) > 0 and float(bench["bandwidth"]) > 0
    assert bench["op_size"] == "4096" and bench["concurrent_ios"] == "4"
    assert {"sec", "cur_ops", "started", "finished", "avg_bw", "cur_bw", "last_lat", "avg_lat"} <= set(bench["datas"][0])
    assert float(bench["average_latency"]) > 0 and bench["object_prefix"].startswith("benchmark_data_")
    _report(pytestconfig, f"rados bench 4 KiB x 4, 3 s: {bench['average_iops']} IOPS, {bench['bandwidth']} MB/s")
    cleaned = admin_rados(cluster, "-p", POOL, "cleanup", timeout=300)
    assert cleaned.startswith("Removed ") and cleaned.split()[1] == bench["total_writes_made"]
    assert not [o for o in admin_rados(cluster, "-p", POOL, "ls").split() if o.startswith("benchmark_data")]


def test_pool_stats_and_osd_perf_shapes(cluster):
    idle = cluster.ceph_json("osd", "pool", "stats", POOL)
    assert [set(p) for p in idle] == [{"pool_name", "pool_id", "recovery", "recovery_rate", "client_io_rate"}]
    # load for the mgr to report: rates reach it with the OSD's next report (every 5 s)
    bench = subprocess.Popen(["rados", "--conf", str(cluster.admin_conf_path), "--name", "client.admin", "-p", POOL,
                              "bench", "12", "write", "-b", "4096", "-t", "4", "--no-cleanup"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline, rates = time.monotonic() + 12, {}
        while time.monotonic() < deadline:
            (stats,) = cluster.ceph_json("osd", "pool", "stats", POOL)
            rates = stats["client_io_rate"]
            if rates.get("write_op_per_sec"):
                break
            time.sleep(1)
        assert stats["pool_name"] == POOL
        assert {"write_bytes_sec", "write_op_per_sec"} <= set(rates), rates
        assert rates["write_op_per_sec"] > 0 and rates["write_bytes_sec"] > 0
        perf = cluster.ceph_json("osd", "perf")
        (osd,) = perf["osdstats"]["osd_perf_infos"]
        assert osd["id"] == 0
        assert set(osd["perf_stats"]) == {"commit_latency_ms", "apply_latency_ms", "commit_latency_ns", "apply_latency_ns"}
        assert all(isinstance(v, int) for v in osd["perf_stats"].values())
    finally:
        bench.send_signal(signal.SIGINT)
        try:
            bench.wait(timeout=30)
        except subprocess.TimeoutExpired:
            bench.kill()
            bench.wait(timeout=10)
        admin_rados(cluster, "-p", POOL, "cleanup", timeout=300)


def test_qemu_opens_an_image_through_librbd(cluster, tmp_path):
    rbd(cluster, "create", "--size", "64M", f"{POOL}/t2")
    try:
        # the client conf with its keyring: the rbd: filename form
        spec = f"rbd:{POOL}/t2:id={cluster.user}:conf={cluster.conf_path}"
        env_free = {k: v for k, v in os.environ.items() if k != "CEPH_CONF"}
        done = subprocess.run(["qemu-img", "info", "--output=json", spec], capture_output=True, text=True, timeout=60, env=env_free)
        assert done.returncode == 0, done.stderr
        info = json.loads(done.stdout)
        assert info["virtual-size"] == 64 * 1024**2 and info["format"] == "raw"
        # what libvirt hands QEMU for a <disk type='network'> with <auth>: servers, user and
        # the key as a secret object, no conf and no keyring file
        key = cluster.key()
        host, port = cluster.mon_host.rsplit(":", 1)
        blockdev = {"driver": "rbd", "pool": POOL, "image": "t2", "server": [{"host": host, "port": port}],
                    "user": cluster.user, "auth-client-required": ["cephx", "none"], "key-secret": "sec0", "conf": "/dev/null"}
        obj = f"secret,id=sec0,data={key},format=base64"
        done = subprocess.run(["qemu-img", "info", "--output=json", "--object", obj, "json:" + json.dumps({"file": blockdev})],
                              capture_output=True, text=True, timeout=60, env=env_free)
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["virtual-size"] == 64 * 1024**2
        # and data goes through: written by QEMU, read back by QEMU
        io = subprocess.run(["qemu-io", "-f", "raw", "-c", "write -P 0xab 1M 64k", "-c", "read -P 0xab 1M 64k", spec],
                            capture_output=True, text=True, timeout=60, env=env_free)
        assert io.returncode == 0 and "Pattern verification failed" not in flat(io.stdout), io.stdout + io.stderr
    finally:
        rbd(cluster, "rm", f"{POOL}/t2")


def test_two_clusters_at_once(cluster, tmp_path, pytestconfig):
    second = CephCluster.start(tmp_path / "second")
    try:
        assert second.mon_port != cluster.mon_port and second.fsid != cluster.fsid
        assert second.status()["health"]["status"] == "HEALTH_OK"
        assert cluster.status()["health"]["status"] == "HEALTH_OK"
        # each client conf reaches its own cluster
        rbd(second, "create", "--size", "8M", f"{POOL}/only-in-second")
        assert json.loads(rbd(second, "ls", POOL, "--format", "json").stdout) == ["only-in-second"]
        assert "only-in-second" not in json.loads(rbd(cluster, "ls", POOL, "--format", "json").stdout)
        pids = second.pids()
    finally:
        second.stop(discard_block=True)
    _report(pytestconfig, f"second test Ceph cluster (beside the first): HEALTH_OK in {second.timings['health_ok']:.1f}s, "
                          f"stopped in {second.timings['stop']:.1f}s")
    assert not [pid for pid in pids.values() if _alive(pid)]
    assert cluster.status()["health"]["status"] == "HEALTH_OK"


# ---- vmbench on the cluster -----------------------------------------------------------------------

SCENARIO = """
name: it-ceph
storage:
  type: rbd
  pool: {pool}
  scratch_size: 512M
  ceph: {{conf: {conf}, user: vmbench}}
vm: {{memory: 768M, bus: virtio-blk, cache: none}}
vary: {{cache: [writeback]}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 8, size: 64M, runtime: 4s, ramp: 1s}}
"""


def _storage(c: CephCluster) -> RbdStorage:
    return RbdStorage(Storage(type=StorageType.RBD, ceph=CephConfig(pool=c.pool, conf=str(c.conf_path), user="vmbench")),
                      LocalTransport())


def _secrets_of(db: Path | None) -> list[str]:
    """The libvirt secrets of the run stored in ``db`` (None: of any vmbench run): other tests'
    runs on this libvirtd have their own while they run."""
    tag = "vmbench-"
    if db is not None:
        with sqlite3.connect(db) as conn:
            tag = f"vmbench-{conn.execute('select tag from runs').fetchone()[0]}-"
    conn = libvirt.open(URI)
    try:
        return [s.usageID() for s in conn.listAllSecrets(0) if (s.usageID() or "").startswith(tag)]
    finally:
        conn.close()


def test_preflight_refuses_a_missing_pool_before_anything_exists(cluster, tmp_path):
    scenario = write(tmp_path, "nopool.yaml", SCENARIO.format(pool="nosuchpool", conf=cluster.conf_path))
    before = cluster.rbd("ls", cluster.pool)
    run = vmbench("run", str(scenario), "--db", str(tmp_path / "r.db"), timeout=300)
    assert run.returncode != 0
    assert "Ceph pool nosuchpool does not exist (storage.pool)" in flat(run.stderr) and "Traceback" not in run.stderr
    assert cluster.rbd("ls", cluster.pool) == before and _secrets_of(None) == []


def test_one_factor_run_on_rbd_reads_rados_librbd_and_the_guest(cluster, tmp_path):
    scenario = write(tmp_path, "ceph.yaml", SCENARIO.format(pool=cluster.pool, conf=cluster.conf_path))
    db = tmp_path / "r.db"
    run = vmbench("run", str(scenario), "--db", str(db))
    assert run.returncode == 0, run.stderr[-4000:]
    got = vmbench("report", "latest", "--db", str(db), "--format", "json")
    assert got.returncode == 0, got.stderr
    report = json.loads(got.stdout)
    text = vmbench("report", "latest", "--db", str(db)).stdout
    print(text)
    assert "Ceph 16.2" in report["run"]["ceph"] and "HEALTH_OK" in report["run"]["ceph"]
    gaps = next(t for t in report["tables"] if t["name"] == "gaps")
    rows = [(r["job"], r["side"], r["cell"]) for r in gaps["records"]]
    for job in ("4k-randwrite",):  # one job: a read's RADOS and librbd rows are planned alike (unit tests)
        assert rows.count((job, "RADOS", "baseline")) == 1
        assert (job, "host", "baseline") in rows and (job, "host", "cache=writeback") in rows  # librbd cache off, on
        assert (job, "guest", "baseline") in rows and (job, "guest", "cache=writeback") in rows
    by = {(r["job"], r["side"], r["cell"]): r for r in gaps["records"]}
    assert by[("4k-randwrite", "RADOS", "baseline")]["iops"] > 0 and by[("4k-randwrite", "RADOS", "baseline")]["gap"] is None
    assert "librbd" in by[("4k-randwrite", "host", "baseline")]["note"]
    assert by[("4k-randwrite", "guest", "baseline")]["gap"] > 0
    assert any(r.get("pool_write_mb_s") for r in gaps["records"] if r["job"] == "4k-randwrite")  # the pool saw the writes
    assert "librbd's client cache (rbd_cache) on with cache=writeback" in flat(text)
    # the host reference ran through librbd with the cache QEMU gives each cell's disk
    with sqlite3.connect(db) as conn:
        argvs = " ".join(r[0] for r in conn.execute("select argv_json from measurements where side='host' and layer='host'"))
    assert "CEPH_ARGS=--rbd_cache=false" in argvs and "CEPH_ARGS=--rbd_cache=true" in argvs and "--ioengine=rbd" in argvs
    # nothing left: images, bench objects, secrets
    assert [i for i in json.loads(cluster.rbd("ls", "--format", "json", cluster.pool)) if i.startswith("vmbench-")] == []
    assert _storage(cluster).leftovers() == [] and _secrets_of(db) == []


def test_cleanup_removes_a_killed_runs_images_and_bench_objects_only(cluster, tmp_path):
    storage = _storage(cluster)
    ours = storage.create_volume("vmbench-r0c1ea0ff-1-scratch.raw", 64 << 20, ImageFormat.RAW)
    cluster.rbd("create", "--size", "16M", f"{cluster.pool}/user-disk")
    cluster.rbd("create", "--size", "16M", f"{cluster.pool}/vmbench-r0c1ea0ff-2-scratch")  # our name, not our metadata
    # an older vmbench's bench, finished, in vmbench-bench itself (its run name)
    bench = ["rados", "--conf", str(cluster.conf_path), "--id", "vmbench", "-p", cluster.pool, "-N", "vmbench-bench", "bench",
             "1", "write", "-b", "4096", "-t", "2", "--no-cleanup", "--run-name", "vmbench-r0c1ea0ff-0badcafe"]
    subprocess.run(bench, capture_output=True, check=True, timeout=120)
    marker = _killed_bench(cluster, "r0c1ea0ff")  # and this version's, killed with vmbench mid-write
    scenario = write(tmp_path, "ceph.yaml", SCENARIO.format(pool=cluster.pool, conf=cluster.conf_path))
    try:
        dry = vmbench("cleanup", str(scenario), "--dry-run", timeout=300)
        assert dry.returncode == 0, dry.stderr
        assert "vmbench/vmbench-r0c1ea0ff-1-scratch" in dry.stdout and "vmbench/vmbench-bench/vmbench-r0c1ea0ff-0badcafe" in dry.stdout
        assert f"vmbench/vmbench-bench/{marker}" in dry.stdout, dry.stdout  # found by its marker's name alone
        assert "user-disk" not in dry.stdout and "vmbench-r0c1ea0ff-2-scratch" not in dry.stdout
        done = vmbench("cleanup", str(scenario), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        images = json.loads(cluster.rbd("ls", "--format", "json", cluster.pool))
        assert "vmbench-r0c1ea0ff-1-scratch" not in images and {"user-disk", "vmbench-r0c1ea0ff-2-scratch"} <= set(images)
        assert storage.leftovers() == [] and _bench_objects(cluster) == []
    finally:
        for image in ("user-disk", "vmbench-r0c1ea0ff-2-scratch", ours.path.split(":")[1].split("/")[1]):
            subprocess.run(["rbd", "--conf", str(cluster.admin_conf_path), "--name", "client.admin", "--keyring",
                            str(cluster.admin_keyring_path), "rm", "--no-progress", f"{cluster.pool}/{image}"],
                           capture_output=True, timeout=120)


def _bench_objects(cluster: CephCluster) -> list[str]:
    """Every object in vmbench's bench namespaces (any "vmbench-bench*"), as namespace/name."""
    listed = json.loads(admin_rados(cluster, "-p", cluster.pool, "ls", "--all", "--format", "json") or "[]")
    return sorted(f"{o['namespace']}/{o['name']}" for o in listed if o.get("namespace", "").startswith("vmbench-bench"))


def _killed_bench(cluster: CephCluster, tag: str) -> str:
    """A read job's RADOS bench (vmbench.run.rados.bench) killed while its prefill writes: vmbench
    and its rados both SIGKILLed once objects are in the pool; the bench's marker name."""
    code = ("import sys; from vmbench.fio.job import FioJob; from vmbench.run.rados import bench; "
            "from vmbench.scenario.model import CephConfig; from vmbench.transport.local import LocalTransport; "
            "cfg = CephConfig(pool=sys.argv[1], conf=sys.argv[2], user='vmbench'); "
            "bench(LocalTransport(), cfg, FioJob(name='r', rw='read', bs=1 << 20, iodepth=2, size=512 << 20, runtime=60), sys.argv[3])")
    proc = subprocess.Popen([sys.executable, "-c", code, cluster.pool, str(cluster.conf_path), tag], cwd=ROOT,
                            start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not any(o.startswith(f"vmbench-bench.vmbench-{tag}-") for o in _bench_objects(cluster)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode() if proc.stderr else ""
            time.sleep(0.3)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the group this test started: vmbench
        proc.wait(timeout=30)
        # and its rados, which runs in a session of its own (vmbench.command): else it writes on
        # after the kill and the cleanup below races it
        subprocess.run(["pkill", "-KILL", "-f", f"run-name vmbench-{tag}-"], check=False)
        for _ in range(100):
            if subprocess.run(["pgrep", "-f", f"run-name vmbench-{tag}-"], capture_output=True).returncode != 0:
                break
            time.sleep(0.1)
    (marker,) = [o.split("/", 1)[1] for o in _bench_objects(cluster) if o.startswith("vmbench-bench/vmbench-" + tag)
                 and not o.endswith("-0badcafe")]
    return marker


def test_a_rados_read_bench_writes_its_jobs_size_and_leaves_the_pool_as_it_was(cluster):
    from vmbench.fio.job import FioJob
    from vmbench.run.rados import bench

    cfg = CephConfig(pool=cluster.pool, conf=str(cluster.conf_path), user="vmbench")
    before = _settled_usage(cluster)  # an earlier test's removals may still be on their way into the manager's view
    argv, result, raw = bench(LocalTransport(), cfg, FioJob(name="seq", rw="read", bs=1 << 20, iodepth=2, size=24 << 20,
                                                            runtime=4), "r0b0a1f00")
    data = json.loads(raw)
    assert argv[argv.index("bench") + 2] == "seq" and 0 < int(data["total_reads_made"]) <= 25  # the 24 objects written, once
    assert _bench_objects(cluster) == []
    deadline = time.monotonic() + 60  # the manager's view of the pool catches up within seconds
    while _pool_usage(cluster) != before:
        assert time.monotonic() < deadline, (before, _pool_usage(cluster))
        time.sleep(2)


def _settled_usage(cluster: CephCluster, reads: int = 4, timeout: float = 120) -> tuple[int, int]:
    """The pool's usage once the manager's view stops moving: the same over ``reads`` reads 2 s
    apart (its stats come every 5 s)."""
    deadline = time.monotonic() + timeout
    seen = [_pool_usage(cluster)]
    while len(seen) < reads or len(set(seen[-reads:])) > 1:
        assert time.monotonic() < deadline, seen[-reads:]
        time.sleep(2)
        seen.append(_pool_usage(cluster))
    return seen[-1]


def _pool_usage(cluster: CephCluster) -> tuple[int, int]:
    (pool,) = [p for p in cluster.ceph_json("df", "detail")["pools"] if p["name"] == cluster.pool]
    return pool["stats"]["objects"], pool["stats"]["stored"]


READ_SCENARIO = """
name: it-ceph-room
hypervisor: {{accel: tcg}}
storage:
  type: rbd
  pool: {pool}
  scratch_size: {scratch}
  ceph: {{conf: {conf}, user: vmbench}}
vm: {{memory: 768M, bus: virtio-blk, cache: none}}
jobs:
  - {{name: seq-read, rw: read, bs: 1m, iodepth: 2, size: 512M, runtime: 4s, ramp: 1s}}
"""


def test_a_run_whose_rados_prefill_would_not_fit_is_refused_before_anything_exists(cluster, tmp_path):
    before = (cluster.rbd("ls", cluster.pool), _bench_objects(cluster))
    big = write(tmp_path, "big.yaml", READ_SCENARIO.format(pool=cluster.pool, conf=cluster.conf_path, scratch="16G"))
    run = vmbench("run", str(big), "--db", str(tmp_path / "r.db"), timeout=300)
    assert run.returncode == 3 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert f"Ceph pool {cluster.pool} has " in flat(run.stderr) and "free (ceph df: max_avail); this run writes up to 16.5G" in flat(run.stderr)
    assert "the RADOS bench of job seq-read, 513.0M" in flat(run.stderr)
    cluster.ceph("osd", "pool", "set-quota", cluster.pool, "max_bytes", str(768 << 20))
    try:
        quota = write(tmp_path, "quota.yaml", READ_SCENARIO.format(pool=cluster.pool, conf=cluster.conf_path, scratch="512M"))
        run = vmbench("run", str(quota), "--db", str(tmp_path / "r.db"), timeout=300)
        assert run.returncode == 3 and f"Ceph pool {cluster.pool}'s quota leaves" in flat(run.stderr), run.stderr[-2000:]
        assert "of max_bytes 768.0M); this run writes up to 1.0G" in flat(run.stderr)
    finally:
        cluster.ceph("osd", "pool", "set-quota", cluster.pool, "max_bytes", "0")
    assert (cluster.rbd("ls", cluster.pool), _bench_objects(cluster)) == before and _secrets_of(None) == []


FULL = """
name: it-ceph-full
hypervisor: {{accel: tcg}}
storage:
  type: rbd
  pool: {pool}
  scratch_size: 512M
  ceph: {{conf: {conf}, user: vmbench}}
vm: {{memory: 768M, bus: virtio-blk, cache: none}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 8, size: 32M, runtime: 90s, ramp: 1s}}
"""


def test_a_pool_quota_hit_under_fio_is_said_as_a_stall_naming_the_full_pool(cluster, tmp_path):
    """The host reference's fio (librbd, the code path that says a guest's stalls too: fio's
    status read back on its side) writes until a quota below the pool's usage stops it: within
    30 s the run says it stalled and that the pool is full, and ends; nothing is left once the
    quota is gone."""
    scenario = write(tmp_path, "full.yaml", FULL.format(pool=cluster.pool, conf=cluster.conf_path))
    db = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db)], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        wait_for(proc, "host: 4k-randwrite (", lines, timeout=600)
        time.sleep(3)
        cluster.ceph("osd", "pool", "set-quota", cluster.pool, "max_bytes", "1")  # below what it holds: full at once
        quota_at = time.monotonic()
        full_at: list[float] = []  # when the monitors flag the pool full (writes stop): the quota hit

        def watch_health() -> None:
            while not full_at and time.monotonic() - quota_at < 120:
                if "POOL_FULL" in cluster.ceph_json("health", timeout=30).get("checks", {}):
                    full_at.append(time.monotonic())
                time.sleep(0.5)

        watcher = threading.Thread(target=watch_health, daemon=True)
        watcher.start()
        stalled = wait_for(proc, "stalled for", lines, timeout=120)
        said_at = time.monotonic()
        watcher.join(timeout=60)
        cluster.ceph("osd", "pool", "set-quota", cluster.pool, "max_bytes", "0")
        _, rest = proc.communicate(timeout=600)
    finally:
        cluster.ceph("osd", "pool", "set-quota", cluster.pool, "max_bytes", "0")
        if proc.poll() is None:
            proc.kill()
    text = flat("".join(lines) + rest)
    assert full_at, text[-3000:]
    said_after = said_at - full_at[0]
    print(f"pool full {full_at[0] - quota_at:.0f}s after the quota was set; stall said {said_after:.0f}s after that: {stalled.strip()}")
    assert said_after <= 30 and "POOL_FULL" in stalled and f"pool '{cluster.pool}' is full" in stalled, text[-3000:]
    assert "no I/O completed" in stalled
    assert proc.returncode != 0 and "Ceph reported POOL_FULL" in text and "Traceback" not in text, text[-3000:]
    done = vmbench("cleanup", str(scenario), timeout=600)  # what the full pool kept the run from removing
    assert done.returncode == 0, done.stdout + done.stderr
    assert [i for i in json.loads(cluster.rbd("ls", "--format", "json", cluster.pool)) if i.startswith("vmbench-")] == []
    assert _storage(cluster).leftovers() == [] and _bench_objects(cluster) == [] and _secrets_of(db) == []


FAULT = """
name: it-ceph-fault
storage:
  type: rbd
  pool: {pool}
  scratch_size: 256M
  ceph: {{conf: {conf}, user: vmbench}}
vm: {{memory: 768M, bus: virtio-blk, cache: none}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 8, size: 64M, runtime: 3s, ramp: 1s}}
"""


def test_an_osd_stopped_under_a_running_guest_ends_the_run_naming_ceph(cluster, tmp_path):
    """The OSD stops while the guest's fio runs: the guest's I/O blocks, the run's watch of
    ``ceph health`` ends it within seconds (not at fio's deadline) with an error that says what
    Ceph reports, the host's rows stay; with the OSD back,
    ``vmbench cleanup`` removes what the run could not (its image), and nothing is left."""
    scenario = write(tmp_path, "fault.yaml", FAULT.format(pool=cluster.pool, conf=cluster.conf_path))
    db = tmp_path / "r.db"
    log = tmp_path / "run.log"
    with open(log, "w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=err, text=True)
    try:
        deadline = time.monotonic() + 600
        while "raw: 4k-randwrite (" not in log.read_text():  # the guest's fio has started
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
        cluster.stop_osd()
        proc.wait(timeout=900)
    finally:
        if proc.poll() is None:
            proc.kill()
        if "osd" not in cluster.procs:  # the later tests share this cluster: the OSD comes back whatever happened
            cluster.start_osd()
    text = flat(log.read_text())
    assert proc.returncode != 0 and "the Ceph cluster under the disk reports HEALTH_WARN" in text, text[-3000:]
    assert "Ceph reported OSD_DOWN: 1 osds down" in text and "while fio ran on pool" in text and "Traceback" not in text
    assert "command timed out" not in text  # the watch, not fio's deadline, ended it
    with sqlite3.connect(db) as conn:
        sides = sorted(r[0] for r in conn.execute("select side from measurements"))
        status = conn.execute("select status from runs").fetchone()[0]
    assert status == "failed" and sides == ["host", "host"]  # what was measured before (RADOS, librbd) is kept
    done = vmbench("cleanup", str(scenario), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert [i for i in json.loads(cluster.rbd("ls", "--format", "json", cluster.pool)) if i.startswith("vmbench-")] == []
    assert _storage(cluster).leftovers() == [] and _secrets_of(db) == []


# ---- Proxmox: the node's rbd storage, through the fake PVE on this cluster ------------------------

PVE_SCENARIO = """
name: it-pve-ceph
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  node: {node}
  template: 9000
  storage: {storage}
  token: {{id: "{token_id}", secret_env: VMBENCH_IT_PVE_TOKEN}}
  tls: {{ca_file: {ca}}}
  ssh: {{port: {ssh_port}, user: root, key_file: {key}, known_hosts: {known_hosts}}}
  state_dir: /var/lib/vmbench-proxmox-test
  accel: tcg
  timeout: 60s
storage: {{type: rbd, scratch_size: 256M}}
vm: {{memory: 768M, bus: virtio-blk, cache: none, cpu: kvm64}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 8, size: 64M, runtime: 3s, ramp: 1s}}
"""


def _pve_ceph_files(cluster: CephCluster, sid: str) -> list[Path]:
    """What ``pvesm add rbd SID --monhost ... --keyring FILE`` leaves on a node (CephConfig.pm): the
    keyring in /etc/pve/priv/ceph/SID.keyring, a conf naming it in SID.conf.  Returns what it made."""
    made = [p for p in (Path("/etc/pve"), Path("/etc/pve/priv"), Path("/etc/pve/priv/ceph")) if not p.exists()]
    Path("/etc/pve/priv/ceph").mkdir(parents=True, exist_ok=True)
    keyring, conf = Path(f"/etc/pve/priv/ceph/{sid}.keyring"), Path(f"/etc/pve/priv/ceph/{sid}.conf")
    keyring.write_bytes(cluster.keyring_path.read_bytes())
    conf.write_text(f"[global]\n\tkeyring = {keyring}\n")
    for f in (keyring, conf):
        f.chmod(0o600)
    return [keyring, conf, *reversed(made)]


def test_a_proxmox_run_on_the_nodes_rbd_storage(cluster, tmp_path):
    """The fake PVE 9.1 node (real guests under libvirt) with an external rbd storage on this
    cluster: the fake allocates real images as PVE's rbd_cmd does; vmbench reads the storage's
    config, measures RADOS, librbd on the host (fio's rbd engine as QEMU's client) and the guest;
    the evidence comes from QEMU's command line (aio not applicable); nothing is left."""
    import secrets as tokens
    import socket

    from tests.fakepve import FakePve, LibvirtBackend
    from tests.fakepve import rbd as pve_rbd
    from tests.sshd import TestSshd
    from vmbench.results.db import ResultsDB

    secret, token_id = "7c1d5e2a-0b3f-4a6e-9d8c-ce9fce9fce9f", "vmbench@pve!bench"
    node = socket.gethostname().split(".")[0]
    sid = f"ceph-{tokens.token_hex(4)}"
    before = set(json.loads(cluster.rbd("ls", "--format", "json", cluster.pool)))
    made = _pve_ceph_files(cluster, sid)
    backend = LibvirtBackend()
    try:
        with TestSshd() as sshd, FakePve(version="9.1", backend=backend, node=node, token=(token_id, secret), task_polls=1,
                                         agent_pings=3) as fake:
            fake.add_template()
            scfg = {"pool": cluster.pool, "monhost": cluster.mon_host, "username": cluster.user}
            fake.add_storage(sid, "rbd", content="images", images=pve_rbd.CephImages(pve_rbd.rbd_cmd(sid, scfg)), **scfg)
            path = write(tmp_path, "pve-ceph.yaml", PVE_SCENARIO.format(
                port=fake.port, node=node, storage=sid, token_id=token_id, ca=fake.ca_file, ssh_port=sshd.port,
                key=sshd.client_key, known_hosts=sshd.known_hosts))
            env = dict(os.environ, VMBENCH_IT_PVE_TOKEN=secret)
            db = tmp_path / "r.db"
            run = vmbench("--debug", "-v", "run", str(path), "--db", str(db), env=env)
            assert run.returncode == 0, run.stderr[-4000:]
            assert fake.problems == [], fake.problems
            disks = [p for p in (r.params for r in fake.requests if (r.method, r.template) ==
                                 ("POST", "/nodes/{node}/qemu/{vmid}/config")) if "virtio1" in p]
            assert len(disks) == 1 and disks[0]["virtio1"].startswith(f"{sid}:0.25,cache=none,"), disks
            left = vmbench("cleanup", "--dry-run", str(path), env=env)
            assert left.returncode == 0 and "nothing to clean up" in flat(left.stdout), left.stdout + left.stderr
            assert sorted(fake.vms) == [9000]
        conn = libvirt.open(URI)
        try:  # the fake's own secrets (its guest's key) went with its guest
            assert [s for s in conn.listAllSecrets(0) if (s.usageID() or "").startswith(backend.prefix + backend.run_tag)] == []
        finally:
            conn.close()
    finally:
        for p in made:
            p.unlink() if p.is_file() else p.rmdir()
    report = json.loads(vmbench("report", "latest", "--db", str(db), "--format", "json").stdout)
    print(vmbench("report", "latest", "--db", str(db)).stdout)
    assert "Ceph 16.2" in report["run"]["ceph"] and f"RBD pool {cluster.pool} as client.{cluster.user}" in report["run"]["ceph"]
    gaps = next(t for t in report["tables"] if t["name"] == "gaps")["records"]
    sides = {r["side"]: r for r in gaps if r["job"] == "4k-randwrite"}
    assert set(sides) == {"RADOS", "host", "guest"} and all(r["iops"] > 0 for r in sides.values()), gaps
    assert "librbd" in sides["host"]["note"]
    r = ResultsDB(db, create=False).resolve_run("latest")
    assert r.status == "ok" and r.environment["storage_type"] == "rbd" and r.environment["pve_krbd"] is False
    (boot,) = ResultsDB(db, create=False).rows("boots", r.id)
    eff = boot["guest"]["effective"]
    assert (eff["qemu_aio"], eff["qemu_krbd"]) == ("not applicable", False), eff
    assert any('"driver":"rbd"' in a for a in boot["qemu_cmdline"])
    with sqlite3.connect(db) as conn:
        argv = " ".join(row[0] for row in conn.execute("select argv_json from measurements where side='host' and layer='host'"))
    assert "--ioengine=rbd" in argv and "CEPH_ARGS=--keyring=/etc/pve/priv/ceph/" in argv and "--rbd_cache=false" in argv
    assert secret not in run.stdout + run.stderr and secret.encode() not in db.read_bytes()
    # nothing left in the pool: PVE's images freed with the VM, vmbench's probe and bench objects gone
    assert set(json.loads(cluster.rbd("ls", "--format", "json", cluster.pool))) == before
    assert _storage(cluster).leftovers() == [] and _secrets_of(db) == []
