"""VM disks on a real Ceph pool (tests/ceph.py starts a one-node cluster from Debian's packages):
preflight before anything exists, a one-factor run (cache none vs writeback) with the RADOS
ceiling, librbd on the host and the guest in one gap table, the pool's telemetry beside fio's,
and nothing left in the pool or in libvirt; ``vmbench cleanup`` of a killed run's images and
bench objects, and nothing else."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
from pathlib import Path

import libvirt
import pytest

from tests.ceph import CephCluster
from tests.integration.conftest import URI, vmbench, write
from vmbench.scenario.model import CephConfig, Storage
from vmbench.settings import ImageFormat, StorageType
from vmbench.storage.rbd import RbdStorage
from vmbench.transport.local import LocalTransport

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
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 8, size: 128M, runtime: 4s, ramp: 1s}}
  - {{name: 4k-randread, rw: randread, bs: 4k, iodepth: 8, size: 128M, runtime: 4s, ramp: 1s}}
"""


@pytest.fixture(scope="module")
def cluster(machine):
    """One cluster for the module, in a directory QEMU (libvirt-qemu) can read the client conf in."""
    base = Path(tempfile.mkdtemp(prefix="vmbench-ceph-", dir="/var/tmp"))
    os.chmod(base, 0o755)
    c = CephCluster.start(base / "c")
    try:
        os.chmod(c.conf_path, 0o644)
        # the pool's statistics come from the manager: vmbench's telemetry needs mgr 'allow r'
        c.ceph("auth", "caps", "client.vmbench", "mon", "profile rbd", "osd", "profile rbd pool=vmbench", "mgr", "allow r")
        yield c
    finally:
        c.stop(discard_block=True)
        shutil.rmtree(base, ignore_errors=True)


def _storage(c: CephCluster) -> RbdStorage:
    return RbdStorage(Storage(type=StorageType.RBD, ceph=CephConfig(pool=c.pool, conf=str(c.conf_path), user="vmbench")),
                      LocalTransport())


def _ours_in_libvirt() -> list[str]:
    conn = libvirt.open(URI)
    try:
        return [s.usageID() for s in conn.listAllSecrets(0) if (s.usageID() or "").startswith("vmbench-")]
    finally:
        conn.close()


def test_preflight_refuses_a_missing_pool_before_anything_exists(cluster, tmp_path):
    scenario = write(tmp_path, "nopool.yaml", SCENARIO.format(pool="nosuchpool", conf=cluster.conf_path))
    before = cluster.rbd("ls", cluster.pool)
    run = vmbench("run", str(scenario), "--db", str(tmp_path / "r.db"), timeout=300)
    assert run.returncode != 0
    assert "Ceph pool nosuchpool does not exist (storage.pool)" in run.stderr and "Traceback" not in run.stderr
    assert cluster.rbd("ls", cluster.pool) == before and _ours_in_libvirt() == []


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
    for job in ("4k-randwrite", "4k-randread"):
        assert rows.count((job, "RADOS", "baseline")) == 1
        assert (job, "host", "baseline") in rows and (job, "host", "cache=writeback") in rows  # librbd cache off, on
        assert (job, "guest", "baseline") in rows and (job, "guest", "cache=writeback") in rows
    by = {(r["job"], r["side"], r["cell"]): r for r in gaps["records"]}
    assert by[("4k-randwrite", "RADOS", "baseline")]["iops"] > 0 and by[("4k-randwrite", "RADOS", "baseline")]["gap"] is None
    assert "librbd" in by[("4k-randwrite", "host", "baseline")]["note"]
    assert by[("4k-randwrite", "guest", "baseline")]["gap"] > 0
    assert any(r.get("pool_write_mb_s") for r in gaps["records"] if r["job"] == "4k-randwrite")  # the pool saw the writes
    assert "librbd's client cache (rbd_cache) on with cache=writeback" in text
    # the host reference ran through librbd with the cache QEMU gives each cell's disk
    with sqlite3.connect(db) as conn:
        argvs = " ".join(r[0] for r in conn.execute("select argv_json from measurements where side='host' and layer='host'"))
    assert "CEPH_ARGS=--rbd_cache=false" in argvs and "CEPH_ARGS=--rbd_cache=true" in argvs and "--ioengine=rbd" in argvs
    # nothing left: images, bench objects, secrets
    assert [i for i in json.loads(cluster.rbd("ls", "--format", "json", cluster.pool)) if i.startswith("vmbench-")] == []
    assert _storage(cluster).leftovers() == [] and _ours_in_libvirt() == []


def test_cleanup_removes_a_killed_runs_images_and_bench_objects_only(cluster, tmp_path):
    storage = _storage(cluster)
    ours = storage.create_volume("vmbench-r0c1ea0ff-1-scratch.raw", 64 << 20, ImageFormat.RAW)
    cluster.rbd("create", "--size", "16M", f"{cluster.pool}/user-disk")
    cluster.rbd("create", "--size", "16M", f"{cluster.pool}/vmbench-r0c1ea0ff-2-scratch")  # our name, not our metadata
    bench = ["rados", "--conf", str(cluster.conf_path), "--id", "vmbench", "-p", cluster.pool, "-N", "vmbench-bench", "bench",
             "1", "write", "-b", "4096", "-t", "2", "--no-cleanup", "--run-name", "vmbench-r0c1ea0ff-0badcafe"]
    subprocess.run(bench, capture_output=True, check=True, timeout=120)
    scenario = write(tmp_path, "ceph.yaml", SCENARIO.format(pool=cluster.pool, conf=cluster.conf_path))
    try:
        dry = vmbench("cleanup", str(scenario), "--dry-run", timeout=300)
        assert dry.returncode == 0, dry.stderr
        assert "vmbench/vmbench-r0c1ea0ff-1-scratch" in dry.stdout and "vmbench/vmbench-bench/vmbench-r0c1ea0ff-0badcafe" in dry.stdout
        assert "user-disk" not in dry.stdout and "vmbench-r0c1ea0ff-2-scratch" not in dry.stdout
        done = vmbench("cleanup", str(scenario), timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        images = json.loads(cluster.rbd("ls", "--format", "json", cluster.pool))
        assert "vmbench-r0c1ea0ff-1-scratch" not in images and {"user-disk", "vmbench-r0c1ea0ff-2-scratch"} <= set(images)
        assert storage.leftovers() == []
    finally:
        for image in ("user-disk", "vmbench-r0c1ea0ff-2-scratch", ours.path.split(":")[1].split("/")[1]):
            subprocess.run(["rbd", "--conf", str(cluster.admin_conf_path), "--name", "client.admin", "--keyring",
                            str(cluster.admin_keyring_path), "rm", "--no-progress", f"{cluster.pool}/{image}"],
                           capture_output=True, timeout=120)
