"""ZFS host storage end to end (issue 8) on real OpenZFS: a guest built from the
debian12-zfs recipe is a ZFS storage host reached over SSH, exactly like a user's
hypervisor (tests/zfshost.py).  A host-only sweep of zvol volblocksize x compression with
telemetry; a user's zvol and dataset next to vmbench's are never touched; read-back,
flags, cleanup by vmbench's property.  The pool has a log and a cache vdev (files), so the
report states the SLOG's share of the sync writes; the datasets test runs under a parent
dataset with sync=disabled, which the report flags and the advice labels (issue 29)."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.conftest import flat, vmbench, write
from tests.stress import hammer
from tests.zfshost import ZfsStorageHost
from vmbench.results.db import ResultsDB
from vmbench.scenario.model import SshConfig
from vmbench.transport.ssh import SshTransport

#: a whole many-VM or ZFS run in one test: longer than the suite's per-test limit
pytestmark = pytest.mark.timeout(1800)

SWEEP = """
name: it-zfs-sweep
host_only: true
hypervisor:
  {ssh}
  state_dir: /var/lib/vmbench-zfs-test
storage:
  type: zfs
  dataset: {pool}/vmbench
  volblocksize: 16k
  scratch_size: 384M
  properties: {{compression: "off", sync: standard}}
mode: factorial
vary:
  volblocksize: [16k, 64k]
  compression: ["off", lz4]
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 128M, runtime: 3s, ramp: 1s, refill_buffers: true,
      sync: true}}
  - {{name: 1m-write, rw: write, bs: 1M, iodepth: 2, size: 128M, runtime: 3s, ramp: 1s, refill_buffers: true}}
  - {{name: 1m-write-compressible, rw: write, bs: 1M, iodepth: 2, size: 128M, runtime: 3s, ramp: 1s,
      buffer_compress_percentage: 90, refill_buffers: true}}
  - {{name: 64k-read-buffered, rw: read, bs: 64k, iodepth: 1, size: 8M, runtime: 3s, ramp: 1s, direct: false,
      ioengine: psync}}
"""


SLOG, L2ARC = "/var/tmp/slog.img", "/var/tmp/l2arc.img"


@pytest.fixture(scope="module")
def zfs_host():
    with ZfsStorageHost() as host:
        host.ssh(["zfs", "create", f"{host.pool}/vmbench"])
        # a user's zvol and dataset next to vmbench's, with properties of their own
        host.ssh(["zfs", "create", "-V", "32M", "-o", "volblocksize=32k", "-o", "compression=zle", f"{host.pool}/vmbench/uservol"])
        host.ssh(["zfs", "create", "-o", "recordsize=32k", "-o", "atime=off", f"{host.pool}/vmbench/userdata"])
        # a log and a cache vdev (files), and a parent dataset whose sync=disabled its children inherit
        host.ssh(["truncate", "-s", "256M", SLOG, L2ARC])
        host.ssh(["zpool", "add", "-f", host.pool, "log", SLOG])
        host.ssh(["zpool", "add", "-f", host.pool, "cache", L2ARC])
        host.ssh(["zfs", "create", "-o", "sync=disabled", f"{host.pool}/nosync"])
        yield host


def _user_things(host) -> list[str]:
    return host.ssh(["zfs", "get", "-Hp", "-o", "name,property,value", "volblocksize,compression,recordsize,atime",
                     f"{host.pool}/vmbench/uservol", f"{host.pool}/vmbench/userdata"]).splitlines()


def _ours(host) -> list[str]:
    out = host.ssh(["zfs", "list", "-H", "-r", "-o", "name,vmbench:run", host.pool])
    return [l for l in out.splitlines() if l.split("\t")[1] != "-"]


def test_host_only_sweep_reads_back_and_samples_the_pool(zfs_host, tmp_path):
    before = _user_things(zfs_host)
    path = write(tmp_path, "sweep.yaml", SWEEP.format(ssh=zfs_host.scenario_ssh_yaml(), pool=zfs_host.pool))
    plan = vmbench("plan", str(path))
    assert plan.returncode == 0, plan.stderr
    assert "host only: no VM" in flat(plan.stdout) and "storage variants: 4" in flat(plan.stdout)
    db_path = tmp_path / "r.db"
    run = vmbench("run", str(path), "--db", str(db_path), timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "ok"
    env = r.environment
    assert env["zfs_pool"] == zfs_host.pool and env["zfs_userland"].startswith("zfs-2.")
    assert env["zpool_ashift"] == 12 and env["zfs_txg_timeout_s"] == 5 and env["zfs_scan"] is None
    assert "ONLINE" in env["zpool_status"] and env["arc"]["c_max_bytes"] > 0
    # every variant's zvol read back as asked
    cells = db.rows("cells", r.id)
    assert len(cells) == 4 and all(c["valid"] for c in cells)
    for c in cells:
        vols = list(c["evidence"]["storage"]["volumes"].values())
        assert len(vols) == 1
        got = vols[0]["readback"]
        want_vbs = {"16k": "16384", "64k": "65536"}[c["settings"]["volblocksize"]]
        assert got["volblocksize"] == want_vbs and got["compression"] == c["settings"]["compression"]
        assert got["vmbench:run"] == env["run_tag"]
    # telemetry: pool writes during every write job
    ms = db.rows("measurements", r.id)
    assert len(ms) == 4 * 4 and all(m["side"] == "host" and m["iops"] > 0 for m in ms)
    series = {(t["measurement_id"], t["source"]): t["series"] for t in db.rows("telemetry", r.id)}
    for m in ms:
        pool = series.get((m["id"], "zpool"))
        assert pool is not None, f"no zpool series for {m['job']}"
        if m["job"] != "64k-read-buffered":
            assert max(pool["write_mb_s"]) > 0, f"no pool writes during {m['job']} {m['settings']}"
        assert (m["id"], "arc") in series
    report = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
    assert report.returncode == 0, report.stderr
    doc = json.loads(report.stdout)
    table = next(t for t in doc["tables"] if t["name"] == "host-only")
    records = table["records"]
    assert all("pool_write_mb_s" in rec for rec in records)
    assert any(rec.get("write_ampl") is not None for rec in records)
    notes = {(rec["job"], rec["storage"]): rec.get("note", "") for rec in records}
    # a buffered read whose working set fits in the ARC
    assert all("served from cache?" in n for (job, _), n in notes.items() if job == "64k-read-buffered"), notes
    # a compressible write with compression on: the pool wrote far less than fio
    assert any("pool wrote" in n for (job, st), n in notes.items() if job == "1m-write-compressible" and "lz4" in st), notes
    assert all("shorter than steady state" in n for n in notes.values())  # 3 s < 3 x 5 s
    # the ZFS facts under the table (issue 29): the pool, its log and cache vdevs, the ARC, the volumes, compression
    facts = table["facts"]
    print(json.dumps(facts, indent=1))
    assert facts["ZFS pool"].startswith(f"{zfs_host.pool} ") and f"ONLINE; log {SLOG}; cache {L2ARC}" in facts["ZFS pool"]
    assert "WARNING" not in facts["ZFS pool"]
    assert re.search(r"SLOG: took \d+% of writes \(4k-randwrite\)", facts["ZFS log"]), facts["ZFS log"]
    assert "WARNING: reads of 64k-read-buffered fit in the ARC" in facts["ZFS ARC"] and "while fio ran" in facts["ZFS ARC"]
    assert "compression=lz4/off" in facts["ZFS volume"] and "sync=standard" in facts["ZFS volume"]
    assert "WARNING" not in facts["ZFS volume"] and "sources not read" not in facts["ZFS volume"]
    assert "WARNING: compressible data: the pool wrote less than fio (1m-write-compressible)" in facts["ZFS compression"]
    assert re.search(r"4k-randwrite write \d+\.\d\d ms \(disk [\d.]+, syncq [\d.]+, asyncq [\d.]+\): \w+ dominates",
                     facts["ZFS waits"]), facts["ZFS waits"]
    ratios = {(m["job"], m["settings"]["compression"]): series[(m["id"], "zfs-volume")]["compressratio"] for m in ms}
    assert ratios[("1m-write-compressible", "lz4")] > 1.1 and ratios[("1m-write-compressible", "off")] == 1.0, ratios
    text = vmbench("report", "latest", "--db", str(db_path))
    print(text.stdout)
    assert "Advice for run" in flat(text.stdout)
    assert re.search(r"ZFS log: +SLOG: took \d+% of writes", text.stdout) and re.search(r"ZFS pool: +tank ", text.stdout)
    # advise on the host-only sweep: storage variants against the first, no VM settings to try
    adv = vmbench("advise", "latest", "--db", str(db_path), "--format", "json")
    assert adv.returncode == 0, adv.stderr
    advice = json.loads(adv.stdout)
    assert "host only: fio ran on the host, no VM (no accelerator)" in advice["notes"]
    judged = advice["recommendations"] + advice["unsupported"]
    assert judged and all(r["change"] for r in judged)
    assert all(any(k in r["change"] for k in ("volblocksize", "compression")) for r in judged)
    assert not any("iothread" in s or "aio" in s for s in advice["not_tried"])
    if advice["top"] is not None:  # a significant improvement: the zfs commands that apply it
        assert any(a["kind"] == "zfs" for a in advice["apply"])
    print(vmbench("advise", "latest", "--db", str(db_path)).stdout)
    # nothing of vmbench's is left; the user's zvol and dataset are as they were
    assert _ours(zfs_host) == []
    assert _user_things(zfs_host) == before


def test_cleanup_after_a_hard_kill_removes_only_what_carries_the_property(zfs_host, tmp_path):
    pool = zfs_host.pool
    before = _user_things(zfs_host)
    tag = "r0000abcd"
    zfs_host.ssh(["zfs", "create", "-V", "16M", "-o", f"vmbench:run={tag}", f"{pool}/vmbench/vmbench-{tag}-1-hostref"])
    zfs_host.ssh(["zfs", "create", "-V", "16M", f"{pool}/vmbench/vmbench-r0000abce-1-hostref"])  # our name, no property
    path = write(tmp_path, "sweep.yaml", SWEEP.format(ssh=zfs_host.scenario_ssh_yaml(), pool=pool))
    listed = vmbench("cleanup", "--dry-run", str(path))
    assert listed.returncode == 0, listed.stderr
    assert f"{pool}/vmbench/vmbench-{tag}-1-hostref" in listed.stdout and "r0000abce" not in listed.stdout
    done = vmbench("cleanup", str(path))
    assert done.returncode == 0, done.stderr
    names = zfs_host.ssh(["zfs", "list", "-H", "-r", "-o", "name", pool]).split()
    assert f"{pool}/vmbench/vmbench-{tag}-1-hostref" not in names
    assert f"{pool}/vmbench/vmbench-r0000abce-1-hostref" in names  # not vmbench's: left alone
    zfs_host.ssh(["zfs", "destroy", f"{pool}/vmbench/vmbench-r0000abce-1-hostref"])
    assert _user_things(zfs_host) == before


def test_a_missing_dataset_is_refused_before_anything_is_created(zfs_host, tmp_path):
    text = SWEEP.format(ssh=zfs_host.scenario_ssh_yaml(), pool=zfs_host.pool).replace("/vmbench\n", "/nope\n")
    path = write(tmp_path, "missing.yaml", text)
    run = vmbench("run", str(path), "--db", str(tmp_path / "r.db"))
    assert run.returncode == 3, run.stderr
    assert f"ZFS dataset {zfs_host.pool}/nope does not exist on" in flat(run.stderr) and "Traceback" not in run.stderr
    assert _ours(zfs_host) == []


DATASETS = """
name: it-zfs-datasets
host_only: true
hypervisor:
  {ssh}
  state_dir: /var/lib/vmbench-zfs-test
storage:
  type: zfs-dataset
  dataset: {pool}/nosync
  recordsize: 128k
  scratch_size: 256M
  properties: {{compression: lz4, atime: "off"}}
vary:
  recordsize: [16k]
jobs:
  - {{name: 16k-randwrite, rw: randwrite, bs: 16k, iodepth: 4, size: 96M, runtime: 3s, ramp: 1s, refill_buffers: true}}
"""


def test_files_on_child_datasets_with_their_recordsize(zfs_host, tmp_path):
    before = _user_things(zfs_host)
    path = write(tmp_path, "ds.yaml", DATASETS.format(ssh=zfs_host.scenario_ssh_yaml(), pool=zfs_host.pool))
    db_path = tmp_path / "r.db"
    run = vmbench("run", str(path), "--db", str(db_path))
    assert run.returncode == 0, run.stderr[-3000:]
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    cells = db.rows("cells", r.id)
    assert [c["settings"]["recordsize"] for c in cells] == ["128k", "16k"] and all(c["valid"] for c in cells)
    for c in cells:
        (vol,) = c["evidence"]["storage"]["volumes"].values()
        assert vol["zfs_name"].startswith(f"{zfs_host.pool}/nosync/vmbench-{r.tag}-")
        assert vol["readback"]["recordsize"] == {"128k": "131072", "16k": "16384"}[c["settings"]["recordsize"]]
        assert vol["readback"]["atime"] == "off" and vol["readback"]["mountpoint"].startswith("/")
    ms = db.rows("measurements", r.id)
    assert len(ms) == 2 and all(m["target"].endswith("-hostref.raw") and m["iops"] > 0 for m in ms)
    # the child datasets inherit sync=disabled from their parent: stated, flagged, labelled by the advice
    report = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
    assert report.returncode == 0, report.stderr
    facts = next(t for t in json.loads(report.stdout)["tables"] if t["name"] == "host-only")["facts"]
    print(json.dumps(facts, indent=1))
    parent = f"{zfs_host.pool}/nosync"
    assert f"sync=disabled (from {parent})" in facts["ZFS volume"]
    assert f"WARNING: sync=disabled inherited from {parent}" in facts["ZFS volume"]
    # the compressratio read through the file's path after each run
    assert re.search(r"16k-randwrite incompressible \(refilled\), then 1\.\d\dx", facts["ZFS compression"]), facts
    adv = vmbench("advise", "latest", "--db", str(db_path), "--format", "json")
    assert adv.returncode == 0, adv.stderr
    notes = json.loads(adv.stdout)["notes"]
    assert any(n.startswith(f"zfs-sync-disabled: the volumes had sync=disabled inherited from {parent}") for n in notes), notes
    assert _ours(zfs_host) == [] and _user_things(zfs_host) == before


def test_sixteen_threads_share_one_guest_agent_and_one_ssh_connection(zfs_host):
    """A many-VM run talks to a guest's agent and to a remote host from several threads at
    once: commands and files from 16 threads on one agent transport, and on one SshTransport
    to the ZFS guest's sshd, all arrive whole, and nothing hangs."""
    assert zfs_host.agent is not None
    zfs_host.agent.run(["mkdir", "-p", "/root/stress-agent", "/root/stress-ssh"], timeout=60)
    assert hammer(zfs_host.agent, "/root/stress-agent", threads=16, rounds=3, deadline_s=600) == []
    cfg = SshConfig(host=zfs_host.host, port=zfs_host.port, user="root", key_file=zfs_host.key_file, known_hosts=zfs_host.known_hosts)
    ssh = SshTransport(cfg)
    try:
        assert hammer(ssh, "/root/stress-ssh", threads=16, rounds=3, deadline_s=600, close=ssh.close) == []
    finally:
        ssh.close()
    zfs_host.agent.run(["rm", "-rf", "/root/stress-agent", "/root/stress-ssh"], timeout=60)
