"""Layer telemetry: while fio runs, a sampler on the host and in the guest records
/proc/diskstats of the devices under the target and /proc/stat CPU (METHOD rule 8)."""

from __future__ import annotations

import json
import subprocess
import time

from tests.integration.conftest import run_tag_resources, vmbench
from tests.integration.test_ssh_transport import sshd  # noqa: F401 (fixture)
from vmbench.results.db import ResultsDB
from vmbench.telemetry.sampler import summary


def test_device_and_cpu_telemetry_on_host_and_guest(machine, shared_run):
    """The shared run (conftest.SHARED): its 1m-write and 1m-read jobs, on the host and the guest's raw disk."""
    db_path, run = shared_run.db_path, shared_run.run
    assert run.returncode == 0, run.stderr

    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    measurements = {m["id"]: m for m in db.rows("measurements", r.id) if m["job"] in ("1m-write", "1m-read")}
    assert sorted((m["side"], m["job"]) for m in measurements.values()) == [
        ("guest", "1m-read"), ("guest", "1m-write"), ("host", "1m-read"), ("host", "1m-write")]
    got: dict[int, dict] = {}
    for t in db.telemetry(r.id):
        got.setdefault(t["measurement_id"], {})[t["source"]] = t["series"]
    for mid, m in measurements.items():
        series = got.get(mid, {})
        assert {"disk", "cpu"} <= set(series), (m["side"], m["job"], sorted(series))
        disk, cpu = series["disk"], series["cpu"]
        assert len(disk["t_s"]) >= 2 and len(cpu["t_s"]) == len(disk["t_s"])
        assert disk["devices"] and all(len(d["write_mb_s"]) == len(disk["t_s"]) for d in disk["devices"].values())
        for key in ("user", "system", "iowait", "steal", "idle"):
            assert all(0 <= v <= 100 for v in cpu[key]), key
        if m["side"] == "guest":
            assert disk["primary"] == "vdb", disk  # the scratch disk
        means = summary(disk, cpu)
        if m["job"] == "1m-write":
            assert means["write_mb_s"] > 0, (m["side"], disk)

    rep = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    records = [rec for rec in json.loads(rep.stdout)["tables"][0]["records"] if rec["job"] in ("1m-write", "1m-read")]
    assert len(records) == 4 and all(rec.get("dev_write_mb_s") is not None and rec.get("cpu_pct") is not None for rec in records), records
    text = vmbench("report", "latest", "--db", str(db_path))
    assert "dev MB/s r/w" in text.stdout and "CPU %" in text.stdout, text.stdout

    assert run_tag_resources(machine, r.tag) == []
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert not [p for p in procs.splitlines() if "/telemetry-" in p and f"vmbench-{r.tag}-" in p]  # no sampler of this run left


def test_sampler_over_ssh_spawns_and_kills_its_process_group(sshd, tmp_path):
    from tests.integration.test_ssh_transport import cfg_for, pids_of
    from vmbench.telemetry.sampler import Sampler
    from vmbench.transport.ssh import SshTransport

    ssh = SshTransport(cfg_for(sshd))
    try:
        s = Sampler(ssh, str(tmp_path / "target"), str(tmp_path), "5a5a", 300)
        (tmp_path / "target").write_bytes(b"x")
        s.start()
        assert s.handle is not None and ssh.running_pgids == {s.handle[1]}
        time.sleep(1.5)
        got = s.stop()
        assert {"disk", "cpu"} <= set(got) and len(got["cpu"]["t_s"]) >= 1
        assert ssh.running_pgids == set() and pids_of(str(tmp_path / "telemetry-5a5a.txt")) == []
        assert not (tmp_path / "telemetry-5a5a.txt").exists()
    finally:
        ssh.close()
