"""Many VMs at once, for real (issue 16): a scaling run of 1 and 3 clones, and a noisy
neighbour run with one victim and one aggressor in three phases (alone, busy, and busy with
an IOPS limit on the aggressors), each through ``vmbench run`` with real guests, real fio and
the report read back.  Under TCG the figures are slow and noisy; what is checked is that every
VM ran, at the same time (start skew, windows loaded), that the limit capped the aggressors,
and that the report says what it must."""

from __future__ import annotations

import json
import re
import secrets
import subprocess
import sys
import time

import pytest

from tests.integration.conftest import ROOT, flat, run_tag_resources, vmbench, wait_for, write
from tests.sshd import TestSshd
from vmbench.results.db import ResultsDB

#: a whole many-VM or ZFS run in one test: longer than the suite's per-test limit
pytestmark = pytest.mark.timeout(1800)

#: the scaling run spreads its steps over two hosts (issue 28), each its own sshd on its own
#: loopback address; host b's SSH is killed in step 2, and --resume finishes the run
SCALING = """
name: it-scaling
hypervisor:
  accel: tcg
  hosts:
    - {name: a, uri: "qemu+ssh://root@127.0.0.2:{port2}/system", ssh: {key_file: {key2}, known_hosts: {kh2}}}
    - {name: b, uri: "qemu+ssh://root@127.0.0.3:{port3}/system", ssh: {key_file: {key3}, known_hosts: {kh3}}}
storage: {scratch_size: 384M}
vm: {memory: 512M, vcpus: 1, bus: virtio-blk, cache: none, aio: native}
jobs:
  - {name: 4k-randread, rw: randread, bs: 4k, iodepth: 4, size: 64M, runtime: 4s, ramp: 2s}
load: {vms: [1, 3], boot_parallel: 3}
"""

LIMIT = 1  # MiB/s per aggressor in the limited phase: far below what they reach unlimited
MiB = 1 << 20

#: the noisy neighbour runs across two hosts (issue 28): the victim on one, the aggressor on the
#: other, each reached through its own sshd on its own loopback address (both are this machine's libvirt)
NEIGHBOURS = f"""
name: it-neighbours
hypervisor:
  accel: tcg
  hosts:
    - {{name: near, uri: "qemu+ssh://root@127.0.0.2:{{port2}}/system", ssh: {{key_file: {{key2}}, known_hosts: {{kh2}}}}}}
    - {{name: far, uri: "qemu+ssh://root@127.0.0.3:{{port3}}/system", ssh: {{key_file: {{key3}}, known_hosts: {{kh3}}}}}}
  place: {{near: 1, far: 1}}
storage: {{scratch_size: 384M}}
vm: {{memory: 512M, vcpus: 1, bus: virtio-blk, cache: none, aio: native}}
jobs:
  - {{name: victim, rw: randread, bs: 4k, iodepth: 1, rate_iops: 50, size: 64M, runtime: 6s, ramp: 2s}}
  - {{name: heavy, rw: randwrite, bs: 64k, iodepth: 16, size: 128M, runtime: 6s, ramp: 2s}}
targets:
  - {{job: victim, max_p99_ms: 50}}
load:
  victim: {{job: victim}}
  aggressors: {{count: 1, job: heavy}}
  boot_parallel: 2
  phases:
    - {{name: alone, aggressors: 0}}
    - busy
    - {{name: limited, aggressor_vm: {{mbps_wr: {LIMIT}}}}}
"""


def _on_hosts(text: str, a: TestSshd, b: TestSshd) -> str:
    """``text`` with the two test hosts' ports, keys and known_hosts files filled in."""
    for name, value in dict(port2=a.port, key2=a.client_key, kh2=a.known_hosts, port3=b.port, key3=b.client_key,
                            kh3=b.known_hosts).items():
        text = text.replace("{" + name + "}", str(value))
    return text


def _run(tmp_path, name, text):
    scenario = write(tmp_path, f"{name}.yaml", text)
    db_path = tmp_path / f"{name}.db"
    run = vmbench("run", str(scenario), "--db", str(db_path), timeout=1500)
    assert run.returncode == 0, run.stderr[-4000:]
    db = ResultsDB(db_path, create=False)
    return db_path, db, db.resolve_run("latest"), run


def _killed_mid_step(scenario, db_path, sshd: TestSshd, when: str) -> str:
    """``vmbench run`` until its log says ``when``, then ``sshd``'s sessions killed: its whole output."""
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db_path)],
                            cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    lines: list[str] = []
    wait_for(proc, when, lines)
    time.sleep(3)  # into the round's fio
    assert sshd.kill_sessions() > 0
    _, rest = proc.communicate(timeout=600)
    assert proc.returncode not in (0, None), "".join(lines) + rest
    return flat("".join(lines) + rest)


def test_scaling_over_two_hosts_one_killed_mid_step_then_resumed(machine, tmp_path, two_hosts):
    # doctor on the two hosts, host b naming a dir pool of its own that does not exist: said, not created
    pool = f"vmbench-it{secrets.token_hex(3)}"
    doctor = write(tmp_path, "doctor.yaml", _on_hosts(SCALING.replace("known_hosts: {kh3}}}", "known_hosts: {kh3}}, pool: " + pool + "}"),
                                                      *two_hosts))
    doc = vmbench("doctor", str(doctor), timeout=600)
    text = flat(doc.stdout)  # the table wraps its detail column
    line = text[text.find("b: storage"):]
    assert doc.returncode == 0 and line.split()[2] == "ok", doc.stdout + doc.stderr
    assert re.match(rf"b: storage ok dir pool {pool}: not there yet; `vmbench run` creates it at [^()]* \([^()]* free\)",
                    line), doc.stdout
    assert pool not in subprocess.run(["virsh", "-c", "qemu:///system", "pool-list", "--all", "--name"], capture_output=True,
                                      text=True, timeout=60).stdout
    scenario = write(tmp_path, "scaling.yaml", _on_hosts(SCALING, *two_hosts))
    db_path = tmp_path / "scaling.db"
    out = _killed_mid_step(scenario, db_path, two_hosts[1], "host: 4k-randread #1: 3 at once")
    assert "on host b: " in out and "127.0.0.3" in out and "--resume" in out, out
    assert "cleanup incomplete" not in out, out
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "failed" and {k.load_step for k in db.measurement_keys(r.id)} == {1}  # the finished step kept
    assert run_tag_resources(machine, r.tag) == [], out  # every host's VMs and volumes removed
    # cleanup looks at each host under its own heading (both are this machine's libvirt: nothing twice)
    dry = vmbench("cleanup", str(scenario), "--dry-run", timeout=300)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    a, b = two_hosts
    assert f"== host a (root@127.0.0.2:{a.port}) ==" in flat(dry.stdout) and f"== host b (root@127.0.0.3:{b.port}) ==" in flat(dry.stdout), dry.stdout
    listed = [line.split()[1] for line in dry.stdout.splitlines() if line.startswith(("domain ", "volume ", "file ", "directory "))]
    assert len(listed) == len(set(listed)), dry.stdout
    resumed = vmbench("run", "--resume", "latest", "--db", str(db_path), timeout=1500)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run(r.id)
    assert r.status == "ok"
    rows = db.rows("measurements", r.id)
    assert {(m["side"], m["load_step"], m["vm"], m["load"]["host"]) for m in rows} == {
        (side, step, vm, host) for side in ("host", "guest") for step, vm, host in ((1, 0, "a"), (2, 0, "a"), (2, 1, "b"), (2, 2, "a"))}
    assert all(m["host"] == m["load"]["host"] for m in rows)  # the column, on every row
    guest = [m for m in rows if m["side"] == "guest"]
    assert sorted((m["load_step"], m["vm"]) for m in guest) == [(1, 0), (2, 0), (2, 1), (2, 2)]
    host = [m for m in rows if m["side"] == "host"]
    assert sorted((m["load_step"], m["vm"]) for m in host) == [(1, 0), (2, 0), (2, 1), (2, 2)]
    assert len({m["target"] for m in host if m["load_step"] == 2}) == 3  # three host volumes at once
    for m in guest + host:
        assert m["iops"] > 0 and m["clat_bins"]
        load = m["load"]
        assert load["window"] and load["clock_offset_ms"] is not None
        assert load["start_skew_ms"] is not None
    # the VMs of a step ran together: every window of the 3-VM step overlaps every other's
    step3 = [m["load"]["window"] for m in guest if m["load_step"] == 2]
    assert max(w["measured_from_ms"] for w in step3) < min(w["measured_to_ms"] for w in step3)
    skews = {m["load_step"]: m["load"]["start_skew_ms"] for m in guest}
    print("start skew per step (ms):", skews)
    assert all(m["role"] == "peer" for m in guest)
    boots = db.rows("boots", r.id)
    assert len({(b["load_step"], b["vm"]) for b in boots}) == 4 and len({b["domain_name"] for b in boots}) == len(boots)
    rep = vmbench("report", "latest", "--db", str(db_path))
    assert rep.returncode == 0, rep.stderr
    print(rep.stdout)
    a, b = two_hosts  # the header and `vmbench runs` name every host and how it was reached
    lines = {line.split(":", 1)[0]: line for line in rep.stdout.splitlines() if line.startswith(("host a:", "host b:"))}
    assert f"root@127.0.0.2:{a.port}, host key ssh-" in lines["host a"] and f"root@127.0.0.3:{b.port}, host key ssh-" in lines["host b"]
    runs = vmbench("runs", "--db", str(db_path))
    assert f"a (root@127.0.0.2:{a.port}), b (root@127.0.0.3:{b.port})" in flat(runs.stdout), runs.stdout
    # advise: how many VMs share the storage is not a setting: nothing recommended, each step's standing
    adv = vmbench("advise", "latest", "--db", str(db_path), "--format", "json")
    assert adv.returncode == 0, adv.stderr
    advice = json.loads(adv.stdout)
    assert advice["top"] is None and advice["recommendations"] == []
    assert len(advice["standing"]) == 2 and all(s.split(": aggregate ")[0] in ("1 VM", "3 VMs") for s in advice["standing"]), advice["standing"]
    assert any(n.startswith("load: scaling:") for n in advice["notes"])
    assert run_tag_resources(machine, r.tag) == []


@pytest.fixture(scope="module")
def two_hosts():
    """Two sshd's on 127.0.0.2 and 127.0.0.3: two hosts to vmbench."""
    with TestSshd(host="127.0.0.2") as a, TestSshd(host="127.0.0.3") as b:
        yield a, b


def test_noisy_neighbour_across_two_hosts_in_three_phases_with_a_limit(machine, tmp_path, two_hosts):
    a, b = two_hosts
    db_path, db, r, run = _run(tmp_path, "neighbours", _on_hosts(NEIGHBOURS, a, b))
    rows = [m for m in db.rows("measurements", r.id) if m["side"] == "guest"]
    by = {(m["load_step"], m["vm"]): m for m in rows}
    assert sorted(by) == [(1, 0), (2, 0), (2, 1), (3, 0), (3, 1)]
    assert {by[k]["role"] for k in [(2, 1), (3, 1)]} == {"aggressor"} and by[(1, 0)]["role"] == "victim"
    # the victim ran on one host, the aggressor on the other; the host reference placed as the VMs
    assert {(m["role"], m["load"]["host"]) for m in rows} == {("victim", "near"), ("aggressor", "far")}
    host_rows = [m for m in db.rows("measurements", r.id) if m["side"] == "host"]
    assert host_rows and {(m["vm"], m["load"]["host"]) for m in host_rows} <= {(0, "near"), (1, "far")}
    assert set(r.environment["hosts"]) == {"near", "far"}
    assert r.environment["hosts"]["far"]["ssh_host"] == "127.0.0.3"
    # the MB/s limit is in effect and caps the aggressor: within 10% of it, far below unlimited;
    # it writes only, so nothing preconditions through the limit (issue 24: 128 MiB at 1 MiB/s)
    limited = by[(3, 1)]
    assert limited["settings"]["mbps_wr"] == LIMIT
    assert abs(limited["bw_bytes"] - LIMIT * MiB) <= 0.1 * LIMIT * MiB, (limited["bw_bytes"], LIMIT)
    assert by[(2, 1)]["bw_bytes"] > 2 * LIMIT * MiB
    assert "preconditioning 1 of 2 target(s) at once" in flat(run.stdout) + run.stderr
    plan = vmbench("plan", str(tmp_path / "neighbours.yaml"))
    assert "aggressor VMs' targets: not preconditioned (no job reads: heavy)" in flat(plan.stdout), plan.stdout
    # every window was checked against every other VM's load (clocks read before and after)
    assert all(m["load"]["loaded"] is not None and m["load"]["clock_drift_ms"] is not None for m in rows), [m["load"] for m in rows]
    # the victim ran at its fixed rate in every phase
    for step in (1, 2, 3):
        assert by[(step, 0)]["job"] == "victim" and by[(step, 0)]["iops"] > 0
    boot = next(b for b in db.rows("boots", r.id) if b["load_step"] == 3 and b["vm"] == 1)
    eff = boot["guest"]["effective"]
    assert eff.get("qemu_mbps_wr") == LIMIT or boot["guest"].get("qemu_mbps_wr") == LIMIT, boot["guest"]
    rep = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
    assert rep.returncode == 0, rep.stderr
    text = vmbench("report", "latest", "--db", str(db_path))
    print(text.stdout)
    # the report says, phase by phase, what became of the victim's p99 (held, recovered, did not
    # recover, or not judged when the phase's victim window was not fully loaded)
    assert "The victim's p99" in flat(text.stdout) and "victim p99 vs alone" in flat(text.stdout)
    assert "Per host: each step's figures on each host" in flat(text.stdout)
    tables = {t["name"]: t for t in json.loads(rep.stdout)["tables"]}
    assert {rec["host"] for rec in tables["load-hosts"]["records"]} == {"near", "far"}
    # advise: the limit on the aggressors is the change, judged on the victim's p99 against the unlimited phase
    adv = vmbench("advise", "latest", "--db", str(db_path), "--goal", "victim:p99", "--format", "json")
    assert adv.returncode == 0, adv.stderr
    advice = json.loads(adv.stdout)
    judged = advice["recommendations"] + advice["unsupported"]
    assert any(r["change"] == f"aggressor mbps_wr: default -> {LIMIT}" for r in judged), judged
    assert any(n.startswith("load: noisy neighbour:") for n in advice["notes"])
    print(vmbench("advise", "latest", "--db", str(db_path)).stdout)
    assert run_tag_resources(machine, r.tag) == []


