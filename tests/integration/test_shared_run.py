"""One real run read by several checks (one boot; conftest.SHARED): the end-to-end run and
its report, the layer telemetry on host and guest, and fio's own example job files.

End to end (issue 2): scenario -> cloned VM -> fio in the guest and on the host -> gap
table, environment and accelerator recorded, nothing left.

Telemetry: while fio runs, a sampler on the host and in the guest records /proc/diskstats
of the devices under the target and /proc/stat CPU (METHOD rule 8).

fio's own example job files (Debian's fio-examples) run unchanged by vmbench, all three in the
same boot: a verify job (basic-verify: a device named /dev/XXX, no size), a file with comments
after its values, the timeout alias and four stonewalled groups (tiobench-example), and steady
state with /dev/null in one section and /dev/zero in the next (steadystate).  Each runs on the
host's scratch file and the guest's raw disk as a copy pointed at that target.
"""

from __future__ import annotations

import glob
import json
import subprocess
from pathlib import Path

from tests.integration.conftest import FIO_EXAMPLES as RUN, ROOT, flat, run_tag_resources, vmbench
from vmbench.results.db import ResultsDB
from vmbench.telemetry.sampler import summary


def test_run_report_and_nothing_left(machine, shared_run):
    """The shared run (conftest.SHARED: the QUICK jobs, the telemetry job and fio's
    examples, in one boot of the same VM settings)."""
    db_path, run = shared_run.db_path, shared_run.run
    assert run.returncode == 0, run.stderr
    assert "waiting for the guest agent" in flat(run.stderr) or "guest agent answered" in flat(run.stderr)  # progress was shown

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
    assert "gap (host/guest)" in flat(text.stdout) and "4k-randwrite" in text.stdout
    assert "Advice: where the run stands" in flat(text.stdout) and "is my number good?" in flat(text.stdout)  # every report ends with the advice
    assert "Advice for run" not in flat(text.stdout)  # one cell: no change to rank, so no empty table of changes
    assert max(len(line) for line in text.stdout.splitlines()) <= 120 and "not shown, to fit 120 columns" in flat(text.stdout)

    # advise: one cell, one repeat: nothing to rank; where it stands against the host, what to try next
    adv = vmbench("advise", "latest", "--db", str(db_path), "--format", "json")
    assert adv.returncode == 0, adv.stderr
    doc = json.loads(adv.stdout)
    assert doc["top"] is None and doc["recommendations"] == []
    assert any(g["goal"] == "4k-randwrite:iops" for g in doc["goals"])
    assert any(s.startswith("best cell ") and "of the host on the same storage (4k-randwrite IOPS" in s for s in doc["standing"])
    assert any("not measured: aio io_uring" in s for s in doc["not_tried"])
    assert any(n.startswith("guests ran under ") for n in doc["notes"])
    bad = vmbench("advise", "latest", "--db", str(db_path), "--goal", "4k-randwrite:fast")
    assert bad.returncode == 2 and "--goal 4k-randwrite:fast" in flat(bad.stderr)

    assert run_tag_resources(machine, r.tag) == []


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
        # the host's sampled every second beside fio; the guest's two samples, one before and one after (one interval)
        assert (len(disk["t_s"]) >= 2 if m["side"] == "host" else len(disk["t_s"]) == 1) and len(cpu["t_s"]) == len(disk["t_s"])
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
    text = vmbench("report", "latest", "--db", str(db_path), "--section", "gaps")  # the table whole
    assert "dev MB/s r/w" in flat(text.stdout) and "CPU %" in flat(text.stdout), text.stdout

    assert run_tag_resources(machine, r.tag) == []
    procs = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout
    assert not [p for p in procs.splitlines() if "/telemetry-" in p and f"vmbench-{r.tag}-" in p]  # no sampler of this run left


SECTIONS = {  # the job sections fio reports for each (group_reporting folds steadystate's clones)
    "basic-verify": ["write-and-verify"],
    "tiobench-example": ["f1"] * 4 + ["f2"] * 4 + ["f3"] * 4 + ["f4"] * 4,
    "steadystate": ["ss-write", "ss-read"],
}


def test_three_fio_examples_run_in_one_boot(machine, shared_run):
    """In the shared run (conftest.SHARED, one boot), next to the other tests' jobs."""
    db_path, run = shared_run.db_path, shared_run.run
    plan = vmbench("plan", str(shared_run.scenario))
    assert plan.returncode == 0, plan.stderr
    assert "boots: 1" in flat(plan.stdout)
    assert run.returncode == 0, run.stderr
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "ok"
    rows = [m for m in db.rows("measurements", r.id) if m["job"] in SECTIONS]
    assert sorted((m["job"], m["side"], m["layer"]) for m in rows) == sorted(
        (Path(n).stem, side, layer) for n in RUN for side, layer in (("host", "host"), ("guest", "raw")))
    assert len({m["boot_id"] for m in rows if m["side"] == "guest"}) == 1
    for m in rows:
        fio, target = m["fio"], m["target"]
        jobs = fio["jobs"]
        assert [j["jobname"] for j in jobs] == SECTIONS[m["job"]], m["job"]
        assert all(j["job options"]["filename"] == target and j["error"] == 0 for j in jobs)
        assert sum(j["read"]["io_bytes"] + j["write"]["io_bytes"] for j in jobs) > 0 and m["iops"] > 0
        if m["job"] == "tiobench-example":  # timeout=60 is runtime; the comment after numjobs=4 is no part of it
            assert fio["global options"]["runtime"] == "1" and fio["global options"]["numjobs"] == "4"
        if m["job"] == "basic-verify":  # a size added in a new [global] (the file sets none)
            assert fio["global options"]["size"] == "64m"
    # basic-verify stops in its write phase (runtime: 1s): fio would leave its verify state where it ran
    assert not list(ROOT.glob("*verify.state"))
    assert run_tag_resources(machine, r.tag) == []
    assert glob.glob(f"{machine.paths.work}/vmbench-{r.tag}-*") == []


def test_a_queue_depth_sweep_reads_as_host_and_guest_curves_with_the_knee(machine, shared_run, tmp_path):
    """The shared run's ``qd`` job swept over iodepth 1, 4 and 16 (issue 30): one measurement per
    point on host and guest, the curves table with a knee or its absence said, and the HTML plot."""
    assert shared_run.run.returncode == 0, shared_run.run.stderr
    db = ResultsDB(shared_run.db_path, create=False)
    r = db.resolve_run("latest")
    got = sorted((m["side"], m["job"]) for m in db.rows("measurements", r.id) if m["job"].startswith("qd."))
    assert got == sorted((side, f"qd.qd{n}") for side in ("host", "guest") for n in (1, 4, 16))
    rep = json.loads(vmbench("report", "latest", "--db", str(shared_run.db_path), "--format", "json").stdout)
    curves = next(t for t in rep["tables"] if t["name"] == "curves")
    assert [(c["side"], c["value"]) for c in curves["records"]] == [(s, n) for s in ("host", "guest") for n in (1, 4, 16)]
    assert all(c["iops"] > 0 and c["p99_ms"] for c in curves["records"])
    assert all(c["gap"] > 0 for c in curves["records"] if c["side"] == "guest")
    assert sum(1 for n in curves["notes"] if n.startswith("qd ")) == 2  # a knee, or "no knee up to QD 16", for each side
    text = vmbench("report", "latest", "--db", str(shared_run.db_path)).stdout
    print(text[text.index("Queue-depth"):][:1500])
    assert "Queue-depth and numjobs sweeps" in text and max(len(line) for line in text.splitlines()) <= 120
    page = tmp_path / "r.html"
    html = vmbench("report", "latest", "--db", str(shared_run.db_path), "--format", "html", "--output", str(page))
    assert html.returncode == 0, html.stderr
    body = page.read_text()
    section = body[body.index('id="plot-curves"'):]
    assert "<svg" in section[:20000] and "qd: p99 against IOPS by QD" in section[:20000]
    # the advice reads the guest's curve: where more queue stopped paying, or that it still paid
    adv = json.loads(vmbench("advise", "latest", "--db", str(shared_run.db_path), "--format", "json").stdout)
    said = [s for s in adv["standing"] if s.startswith("qd (baseline): ")]
    assert len(said) == 1 and ("the guest adds latency, not IOPS" in said[0] or "the guest still gained IOPS" in said[0]), said


def test_a_job_that_ends_when_steady_says_whether_each_run_was(machine, shared_run):
    """The shared run's ``steady`` job (fio's steadystate, issue 30): fio judged it on host and
    guest, and the gap table's steady-state fact says, per run, steady and when, or never."""
    db = ResultsDB(shared_run.db_path, create=False)
    r = db.resolve_run("latest")
    runs = [m for m in db.rows("measurements", r.id) if m["job"] == "steady"]
    assert sorted(m["side"] for m in runs) == ["guest", "host"]
    assert all("attained" in m["fio"]["jobs"][0]["steadystate"] for m in runs)
    rep = json.loads(vmbench("report", "latest", "--db", str(shared_run.db_path), "--format", "json").stdout)
    fact = rep["tables"][0]["facts"]["steady state"]
    print(fact)
    assert "steady (iops_slope:50%) in every run, after" in fact or "never steady (iops_slope:50%)" in fact
