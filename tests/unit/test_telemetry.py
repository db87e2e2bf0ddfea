"""Layer telemetry (METHOD rule 8): the sampler, parsing /proc/diskstats and /proc/stat into
series, storing them per measurement, and the report's device MB/s, CPU % and flags."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.fakes import FakeAgent, FakeDriver, FakeHost, ScriptedTransport
from tests.unit.test_repeats import STACK, env, scenario  # noqa: F401 (fixtures; template comes from conftest)
from tests.records import as_cells, as_measurements
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.report.render import Format, render
from vmbench.report.tables import gap_table
from vmbench.transport.agent import GuestAgentTransport
from vmbench.transport.local import LocalTransport
from vmbench.telemetry.sampler import SAMPLER_SCRIPT, Sampler, parse_samples, sampler_argv, series, summary

SAMPLE = (Path(__file__).resolve().parents[1] / "data" / "telemetry-sample.txt").read_text()  # this sampler, a real machine


def test_sampler_argv_is_the_constant_script_with_arguments():
    argv = sampler_argv("/run/vmbench/telemetry-ab.txt", 130.7)
    assert argv == ["sh", "-c", SAMPLER_SCRIPT, "sh", "/run/vmbench/telemetry-ab.txt", "1", "130"]
    assert sampler_argv("/x", -5)[-1] == "0"


def test_parse_a_real_capture():
    samples = parse_samples(SAMPLE)
    assert len(samples) == 3 and samples[0].t < samples[1].t < samples[2].t
    assert "vda" in samples[0].disks and set(samples[0].cpu) == {"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}
    vda = [line.split() for line in SAMPLE.splitlines() if " vda " in line]
    assert samples[1].disks["vda"] == (int(vda[1][5]), int(vda[1][9]))
    got = series(samples, ["vda"], "vda")
    disk, cpu = got["disk"], got["cpu"]
    assert disk["primary"] == "vda" and not disk["all_devices"] and len(disk["t_s"]) == 2
    dt = samples[1].t - samples[0].t
    assert disk["devices"]["vda"]["write_mb_s"][0] == pytest.approx((int(vda[1][9]) - int(vda[0][9])) * 512 / dt / 1e6, abs=1e-3)
    for i in range(2):
        assert sum(cpu[k][i] for k in ("user", "system", "iowait", "steal", "idle")) == pytest.approx(100, abs=0.1)
    # devices not told: every whole disk, without loop, ram, zram
    every = series(samples, None)["disk"]
    assert every["all_devices"] and set(every["devices"]) == {"vda"} and every["primary"] is None


def test_a_sample_cut_short_by_the_kill_is_ignored():
    samples = parse_samples(SAMPLE)
    whole = SAMPLE.rstrip("\n")
    cut = whole[: whole.rfind("cpu ") + 8]  # the last sample's cpu line half written, no "."
    assert len(parse_samples(cut)) == 2
    assert len(parse_samples(cut + "\n@ 9999.00\n 254 0 vda 1 2 3\n")) == 2  # neither is a complete sample
    assert parse_samples(cut + SAMPLE)[-1] == samples[-1] and len(parse_samples(cut + SAMPLE)) == 5
    assert series(samples[:1], ["vda"]) == {} and parse_samples("") == []


def test_summary_means():
    disk = {"t_s": [1, 2], "devices": {"vdb": {"read_mb_s": [1.0, 3.0], "write_mb_s": [0, 0]},
                                       "dm-0": {"read_mb_s": [9.0, 9.0], "write_mb_s": [0, 0]}}, "primary": "vdb"}
    cpu = {"t_s": [1, 2], "idle": [90.0, 70.0]}
    assert summary(disk, cpu) == {"read_mb_s": 2.0, "write_mb_s": 0.0, "cpu_idle": 80.0, "cpu_busy": 20.0}
    assert summary(dict(disk, primary=None), None) == {"read_mb_s": 11.0, "write_mb_s": 0.0}
    assert summary(None, None) == {} and summary({"devices": {}}, {"idle": []}) == {}


def test_the_real_sampler_stops_by_itself_and_when_killed(tmp_path):
    out = tmp_path / "t.txt"
    subprocess.run(sampler_argv(str(out), 0), check=True, timeout=30)  # max 0: one sample, then exit
    assert len(parse_samples(out.read_text())) == 1
    local = LocalTransport()
    started = time.monotonic()
    proc = local.spawn(sampler_argv(str(out), 1))
    proc.wait(timeout=30)  # bounded: stops after max seconds by itself
    assert time.monotonic() - started < 10 and len(parse_samples(out.read_text())) >= 2
    proc = local.spawn(sampler_argv(str(out), 600))
    time.sleep(0.3)
    local.kill(proc)
    assert proc.returncode is not None
    assert _live_in_group(proc.pid) == []  # the whole group is gone (sleep included)


def _live_in_group(pgid: int) -> list[int]:
    """Processes of a process group that are not zombies (an orphan's zombie may wait for init)."""
    deadline = time.monotonic() + 5
    while True:
        live = []
        for d in os.listdir("/proc"):
            if d.isdigit():
                try:
                    stat = Path(f"/proc/{d}/stat").read_text()
                except OSError:
                    continue
                fields = stat[stat.rfind(")") + 2:].split()
                if int(fields[2]) == pgid and fields[0] != "Z":
                    live.append(int(d))
        if not live or time.monotonic() > deadline:
            return live
        time.sleep(0.1)


def test_sampler_on_a_fake_host_and_when_it_cannot_run():
    host = FakeHost()
    host.dirs.add("/w")
    host.files["/pool/v.raw"] = b""
    s = Sampler(host, "/pool/v.raw", "/w", "ab", 120)
    s.start()
    got = s.stop()
    assert host.spawned == [sampler_argv("/w/telemetry-ab.txt", 120)] and host.left_running == []
    assert got["disk"]["primary"] == "sda" and set(got["disk"]["devices"]) == {"sda2", "sda"}
    assert got["disk"]["devices"]["sda"]["write_mb_s"] == [pytest.approx(1.048576, abs=1e-3)] * 2
    assert got["cpu"]["idle"] == [40.0, 40.0] and "/w/telemetry-ab.txt" not in host.files
    # a side that cannot spawn, or whose file cannot be read: no series, no error
    bare = Sampler(ScriptedTransport(), "/dev/vdb", "/w", "cd", 120)
    bare.start()
    assert bare.stop() == {}
    host.fail_on(["sh"])
    s = Sampler(host, "/pool/v.raw", "/w", "ef", 120)
    s.start()
    assert s.stop() == {} and host.left_running == []


def test_agent_spawn_and_kill():
    agent = FakeAgent({"sh": lambda a, i: (0, b"", b""), "/bin/kill": lambda a, i: (0, b"", b"")})
    t = GuestAgentTransport("g", agent, sleep=lambda s: None)
    pid = t.spawn(["sh", "-c", "x"])
    assert agent.calls[0] == {"execute": "guest-exec", "arguments": {"path": "sh", "arg": ["-c", "x"], "capture-output": False}}
    t.kill(pid)
    assert {"execute": "guest-exec", "arguments": {"path": "/bin/kill", "arg": ["-KILL", str(pid)]}} in agent.calls
    assert agent.calls[-1] == {"execute": "guest-exec-status", "arguments": {"pid": pid}}


def test_every_measurement_stores_disk_and_cpu_and_the_report_shows_them(env):  # noqa: F811
    driver = FakeDriver()
    outcome = env.runner(driver, scenario("", STACK)).run()
    assert outcome.status == "ok"
    measurements = {m["id"]: m for m in env.rows("measurements", outcome.run_id)}
    rows = env.telemetry(outcome.run_id)
    assert sorted((r["measurement_id"], r["source"]) for r in rows) == sorted(
        (i, s) for i, m in measurements.items()
        for s in (("cpu", "disk") if m["side"] == "host" else ("cpu", "disk", "host-cpu", "host-disk")))
    primary = {(measurements[r["measurement_id"]]["side"], measurements[r["measurement_id"]]["layer"]): r["series"]["primary"]
               for r in rows if r["source"] == "disk"}
    assert primary == {("host", "host"): "sda", ("guest", "raw"): "vdb", ("guest", "partition"): "vdb"}
    assert driver.host.left_running == [] and all(g.transport.left_running == [] for g in driver.guests)
    # on the host a sampler loop beside its own fio; in a guest (and on the host beside it) two samples, nothing between
    assert driver.host.spawned and not any(g.transport.spawned for g in driver.guests)
    assert len(driver.host.spawned) == len([m for m in measurements.values() if m["side"] == "host"])
    header, tables = build_report(load_run(env, outcome.run_id))
    gaps, layers = tables[0], next(t for t in tables if t.name == "layers")
    for t in (gaps, layers):
        assert [c.header for c in t.columns if c.header in ("dev MB/s r/w", "CPU %")] == ["dev MB/s r/w", "CPU %"]
    text = render([gaps], Format.TABLE, wide=True)
    assert "0.00/1.05" in text and " 60 " in text  # the fake's 1 MB/s written; 40% idle
    j2 = [r for r in gaps.records if r["job"] == "j2"]  # a read job whose device read almost nothing
    assert j2 and all("served from cache?" in r["note"] for r in j2)
    assert not any("CPU-bound?" in r["note"] for r in gaps.records)
    assert any("served from cache?" in (r.get("note") or "") for r in layers.records)


def test_telemetry_off_leaves_fio_alone_on_every_side(env):  # noqa: F811
    from vmbench.scenario import parse_scenario
    from vmbench.settings import Telemetry

    driver = FakeDriver()
    off = scenario("", STACK + "telemetry: off\n")
    assert off.telemetry is Telemetry.OFF and scenario("", STACK).telemetry is Telemetry.ON
    outcome = env.runner(driver, off).run()
    assert outcome.status == "ok"
    assert {r["source"] for r in env.telemetry(outcome.run_id)} <= {"fio-iops", "fio-clat", "fio-iops-read", "fio-iops-write"}
    assert not driver.host.spawned and not any(g.transport.spawned for g in driver.guests)  # no sampler anywhere
    with pytest.raises(Exception, match="telemetry.*'sometimes' is not one of: on, off"):
        parse_scenario("name: x\njobs: [{name: j, rw: read}]\ntelemetry: sometimes\n", "t.yaml")


def m(side, cell, job, rw, mb_s, tel=None):
    row = {"side": side, "cell": cell, "stack": None, "layer": "host" if side == "host" else "raw", "job": job, "iops": mb_s,
           "bw_bytes": mb_s * 1e6, "clat_bins": {"1000": 1}, "job_hash": "h", "sync": False, "repeat": 1, "settings": {},
           "job_params": {"rw": rw}}
    if tel is not None:
        row["telemetry"] = tel
    return row


def test_flags_and_columns_from_synthetic_telemetry():
    cells = [{"name": "baseline", "stacks": [], "settings": {}, "valid": True}]
    meas = [m("host", None, "r", "read", 500.0, {"read_mb_s": 480.0, "write_mb_s": 0.0, "cpu_busy": 95.0, "cpu_idle": 5.0}),
            m("guest", "baseline", "r", "read", 900.0, {"read_mb_s": 20.0, "write_mb_s": 0.0, "cpu_busy": 30.0, "cpu_idle": 70.0})]
    t = gap_table(as_measurements(meas), as_cells(cells), ["r"], repeats=1)
    host, guest = t.records
    assert host["note"] == "CPU-bound? (5% idle)"
    assert guest["note"].startswith("beats host: cached?") and "served from cache? (device reads 20.00 MB/s)" in guest["note"]
    assert (host["dev_read_mb_s"], host["cpu_pct"]) == (480.0, 95.0)
    text = render([t], Format.TABLE, wide=True)
    assert "480.0/0.00" in text and "dev MB/s r/w" in text
    # a run without telemetry: neither the columns nor the flags
    plain = gap_table(as_measurements([dict(x, telemetry=None) for x in meas]), as_cells(cells), ["r"], repeats=1)
    assert "dev MB/s r/w" not in render([plain], Format.TABLE, wide=True) and "dev_read_mb_s" not in plain.records[0]
