"""fio job files as users write them: a file naming /dev/sdb in one section and a mount point
in another runs unchanged in shape on the host, the guest's raw disk and an ext4 layer, each
time as a copy rewritten for that target; fio's own time series are kept; nothing is left."""

from __future__ import annotations

import glob

from tests.integration.conftest import flat, run_tag_resources, vmbench, write
from vmbench.results.db import ResultsDB

# written for bare metal: a raw device in one section, a mounted filesystem in the other
USER_JOB = """\
; OLTP-ish job from our bare-metal runbook
# fio oltp.fio --output=oltp.json
[global]
ioengine=libaio
direct=1
time_based
runtime=30
size=1g
bs=4k
iodepth=4

[randwrite]
filename=/dev/sdb
rw=randwrite

[seqread]
stonewall
directory=/mnt/x
rw=read
bs=64k
numjobs=2
write_lat_log=seq
log_avg_msec=500
"""

SCENARIO = """
name: it-jobfiles
storage: {scratch_size: 512M}
vm: {memory: 768M}
stacks:
  - {name: fs, layers: [ext4]}
jobs:
  - {file: oltp.fio, size: 64M, runtime: 2s}
"""


def test_user_job_file_runs_on_every_layer_rewritten(machine, tmp_path):
    write(tmp_path, "oltp.fio", USER_JOB)
    scenario = write(tmp_path, "s.yaml", SCENARIO)
    db_path = tmp_path / "r.db"

    plan = vmbench("plan", str(scenario))
    assert plan.returncode == 0, plan.stderr
    # `vmbench plan` does not print the rewrites yet (cli.py has no describe_rewrites wiring);
    # once it does: "[randwrite] filename=/dev/sdb -> <device>" is among its lines.
    if "filename=/dev/sdb ->" in flat(plan.stdout):
        assert "[randwrite] filename=/dev/sdb -> <device>" in flat(plan.stdout)

    run = vmbench("run", str(scenario), "--db", str(db_path))
    assert run.returncode == 0, run.stderr
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "ok"
    rows = db.rows("measurements", r.id)
    assert sorted((m["side"], m["layer"]) for m in rows) == [("guest", "ext4"), ("guest", "raw"), ("host", "host")]

    for m in rows:
        fio = m["fio"]
        target = m["target"]
        if m["layer"] == "raw":
            assert target.startswith("/dev/vd")
        elif m["layer"] == "ext4":
            assert target == "/mnt/vmbench/vmbench-fio.dat"
        else:
            assert target.endswith("-scratch.raw")
        # the scenario's size and runtime, applied in [global]
        assert fio["global options"]["size"] == "64m" and fio["global options"]["runtime"] == "2"
        # three jobs (randwrite, then seqread x2 after the stonewall), each on the layer's target
        jobs = fio["jobs"]
        assert [j["jobname"] for j in jobs] == ["randwrite", "seqread", "seqread"]
        assert all(j["job options"]["filename"] == target for j in jobs)
        assert "directory" not in jobs[1]["job options"]
        assert jobs[1]["job options"]["write_lat_log"].startswith(f"{m['argv'][-1].rsplit('/', 1)[0]}/log-")
        assert jobs[0]["write"]["io_bytes"] > 0 and jobs[1]["read"]["io_bytes"] > 0
        assert m["iops"] > 0
        # the copy that ran is named by the digest of the rewritten text, equal on every side
    digests = {m["argv"][-1].rsplit("-", 1)[-1] for m in rows}
    assert len(digests) == 1

    # fio's own series: IOPS (vmbench's logs in [randwrite]) and latency, for every measurement
    series = db.rows("telemetry", r.id)
    by_measurement: dict[int, dict] = {}
    for t in series:
        by_measurement.setdefault(t["measurement_id"], {})[t["source"]] = t["series"]
    assert set(by_measurement) == {m["id"] for m in rows}
    for got in by_measurement.values():
        assert {"fio-iops", "fio-clat"} <= set(got)
        assert got["fio-iops"]["unit"] == "IOPS" and got["fio-clat"]["unit"] == "ms"
        assert got["fio-iops"]["values"] and all(v > 0 for v in got["fio-iops"]["values"])

    assert run_tag_resources(machine, r.tag) == []
    assert glob.glob(f"{machine.paths.work}/vmbench-{r.tag}-*") == []
