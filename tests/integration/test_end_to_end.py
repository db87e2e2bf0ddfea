"""Issue 2: scenario -> cloned VM -> fio in the guest and on the host -> gap table; cleanup
always, including on Ctrl-C."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from tests.integration.conftest import QUICK, ROOT, run_tag_resources, vmbench, write
from vmbench.results.db import ResultsDB


def test_run_report_and_nothing_left(machine, shared_run):
    """The shared run (conftest.SHARED: the QUICK jobs, the telemetry job and fio's
    examples, in one boot of the same VM settings)."""
    db_path, run = shared_run.db_path, shared_run.run
    assert run.returncode == 0, run.stderr
    assert "waiting for the guest agent" in run.stderr or "guest agent answered" in run.stderr  # progress was shown

    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "ok"
    rows = [m for m in db.rows("measurements", r.id) if m["job"] in ("4k-randwrite", "1m-read")]
    assert sorted((m["side"], m["job"]) for m in rows) == [
        ("guest", "1m-read"), ("guest", "4k-randwrite"), ("host", "1m-read"), ("host", "4k-randwrite")]
    for m in rows:
        assert m["iops"] > 0 and m["bw_bytes"] > 0
        assert m["p50_ns"] <= m["p99_ns"] <= m["p999_ns"]
        assert m["fio"]["fio version"].startswith("fio-")  # the raw json+ is kept
        assert m["clat_bins"]
    guest = [m for m in rows if m["side"] == "guest"]
    assert all(m["target"].startswith("/dev/") for m in guest)
    host = [m for m in rows if m["side"] == "host"]
    assert all(m["target"].endswith("-scratch.raw") for m in host)  # the scratch disk's own backing file

    # the environment and the accelerator are recorded
    env = r.environment
    for key in ("host_kernel", "qemu_version", "libvirt_version", "host_fio", "accelerator"):
        assert env.get(key), key
    boot = db.rows("boots", r.id)[0]
    assert boot["accelerator"] in ("kvm", "tcg") and boot["accelerator"] == env["accelerator"]
    assert boot["guest"]["kernel"] and boot["guest"]["fio_version"].startswith("fio-")
    assert "<domain" in boot["domain_xml"] and "<domain" in boot["live_xml"]
    assert boot["guest"]["effective"]["accelerator"] == boot["accelerator"]

    # the gap column is host / guest
    rep = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    records = json.loads(rep.stdout)["tables"][0]["records"]
    for job in ("4k-randwrite", "1m-read"):
        h = next(x for x in records if x["job"] == job and x["side"] == "host")
        g = next(x for x in records if x["job"] == job and x["side"] == "guest")
        assert g["gap"] == h["iops"] / g["iops"]
        assert g["p50_ms"] <= g["p99_ms"] <= g["p999_ms"]
    text = vmbench("report", "--db", str(db_path))
    assert "gap (host/guest)" in text.stdout and "4k-randwrite" in text.stdout

    assert run_tag_resources(machine, r.tag) == []


def test_ctrl_c_after_the_vm_started_leaves_nothing(machine, tmp_path):
    scenario = write(tmp_path, "quick.yaml", QUICK.replace("runtime: 3s", "runtime: 30s"))
    db_path = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db_path)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    name = None
    deadline = time.monotonic() + 600
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if " booting vmbench-" in line and name is None:
            name = line.split("booting ", 1)[1].split()[0]
        if name:
            try:
                if machine.conn.lookupByName(name).isActive():
                    break
            except Exception:  # noqa: BLE001 - not defined yet
                pass
    assert name, "".join(lines)
    tag = name.split("-")[1]
    assert run_tag_resources(machine, tag), "the VM should exist before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "interrupted" in rest
    assert run_tag_resources(machine, tag) == []
    db = ResultsDB(db_path, create=False)
    assert db.resolve_run("latest").status == "interrupted"
