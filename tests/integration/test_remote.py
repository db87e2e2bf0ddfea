"""Remote libvirt end to end (issue 7): ``qemu+ssh://root@127.0.0.1:PORT/system`` against a
real sshd the tests start (own config, host key and port), with vmbench's directory on the
"remote" host somewhere else than the local one: libvirt over the SSH connection, host fio
and facts over SSH, the template uploaded once, results stored locally, nothing left."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import libvirt
import pytest

from tests.integration.conftest import ROOT, flat, run_tag_resources, vmbench, wait_for, write
from tests.integration.cpu_checks import assert_qemu_cpu_sampled
from tests.sshd import TestSshd
from vmbench.run.plan import make_plan
from vmbench.results.db import ResultsDB
from vmbench.results.key import MeasurementKey
from vmbench.scenario import parse_scenario

REMOTE_DIR = "/var/lib/vmbench-remote-test"
POOL = "vmbench-remote-test"

SCENARIO = """
name: it-remote
hypervisor:
  driver: libvirt
  uri: "qemu+ssh://root@127.0.0.1:{port}/system"
  state_dir: {remote_dir}
  ssh: {{key_file: {key}, known_hosts: {known_hosts}}}
storage: {{type: dir, pool: {pool}, scratch_size: 256M}}
vm: {{memory: 768M, cache: none, aio: native}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 64M, runtime: 2s, ramp: 1s}}
  - {{name: 1m-read, rw: read, bs: 1M, iodepth: 4, size: 64M, runtime: {runtime}, ramp: 1s}}
"""


@pytest.fixture(scope="module")
def sshd():
    with TestSshd() as server:
        yield server
    conn = libvirt.open("qemu:///system")
    try:
        pool = conn.storagePoolLookupByName(POOL)
        if pool.isActive():
            pool.destroy()
        pool.undefine()
    except libvirt.libvirtError:
        pass
    conn.close()
    subprocess.run(["rm", "-rf", "--one-file-system", REMOTE_DIR], check=False)


def scenario(tmp_path: Path, sshd: TestSshd, *, known_hosts: str | None = None, runtime: str = "2s") -> Path:
    return write(tmp_path, "remote.yaml", SCENARIO.format(
        port=sshd.port, remote_dir=REMOTE_DIR, key=sshd.client_key, known_hosts=known_hosts or sshd.known_hosts,
        pool=POOL, runtime=runtime))


def plan_keys(path: Path) -> set:
    s = parse_scenario(path.read_text(), str(path), base_dir=path.parent)
    return {st.key() for st in make_plan(s).steps()}


@pytest.mark.serial  # nothing at all may appear while it runs
def test_unknown_and_changed_host_keys_are_refused(machine, sshd, tmp_path):
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    db_path = tmp_path / "r.db"
    before = {l.name for l in machine.leftovers()}
    r = vmbench("run", str(scenario(tmp_path, sshd, known_hosts=str(empty))), "--db", str(db_path))
    assert r.returncode == 3, r.stderr
    fp = sshd.host_key_fingerprint.split()[1]
    assert "not known" in flat(r.stderr) and fp in r.stderr and "vmbench hosts trust" in flat(r.stderr)
    assert "Traceback" not in r.stderr
    assert ResultsDB(db_path, create=False).runs() == []
    assert {l.name for l in machine.leftovers()} == before

    other = TestSshd()  # another key for the same address: a changed host key
    changed = tmp_path / "changed_known_hosts"
    changed.write_text(other.known_hosts_line().replace(f"]:{other.port}", f"]:{sshd.port}"))
    r = vmbench("run", str(scenario(tmp_path, sshd, known_hosts=str(changed))), "--db", str(db_path))
    assert r.returncode == 3, r.stderr
    assert "changed" in r.stderr.lower() and fp in r.stderr
    assert {l.name for l in machine.leftovers()} == before

    # `vmbench hosts trust` records the key; then the host is accepted
    trusted = tmp_path / "trusted_known_hosts"
    t = vmbench("hosts", "trust", f"127.0.0.1:{sshd.port}", "--known-hosts", str(trusted), "--yes")
    assert t.returncode == 0, t.stdout + t.stderr
    assert fp in t.stdout
    doc = vmbench("doctor", str(scenario(tmp_path, sshd, known_hosts=str(trusted))))
    assert "ssh" in doc.stdout and "connected" in doc.stdout, doc.stdout + doc.stderr


def test_remote_run_with_a_dropped_connection_then_resumed_end_to_end(machine, sshd, tmp_path):
    """The remote run end to end, from two attempts (two tests and two boots before, one now):
    its SSH sessions killed during the host's second job, the run fails saying so and keeps the
    finished job; ``--resume`` finishes it, and the run then holds what a run made at once does."""
    # the sessions die 3 s into the host's 1m-read (1 s ramp + 6 s); its --resume runs it again on both sides
    path = scenario(tmp_path, sshd, runtime="6s")
    db_path = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(path), "--db", str(db_path)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    wait_for(proc, "host: 1m-read", lines)
    time.sleep(3)
    assert sshd.kill_sessions() > 0
    _, rest = proc.communicate(timeout=600)
    out = flat("".join(lines) + rest)
    assert proc.returncode == 4, out
    assert "lost the SSH connection to root@127.0.0.1" in out and "measuring the host" in out, out
    assert "--resume" in out
    assert "cleanup incomplete" not in out, out
    # the template went up once, in the first attempt's preflight
    assert "uploading template debian12" in out and f"{sshd.port}:{REMOTE_DIR}/images/" in "".join(lines), out
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "failed"
    assert db.measurement_keys(r.id) == {MeasurementKey("host", None, None, "host", "4k-randwrite", 1)}  # the finished one is kept
    tag = next(l.split("vmbench-", 1)[1].split("-", 1)[0] for l in lines if "vmbench-r" in l)
    assert run_tag_resources(machine, tag) == [], out  # its own cleanup reconnected and removed everything

    resumed = vmbench("run", "--resume", "latest", "--db", str(db_path))
    assert resumed.returncode == 0, resumed.stderr
    assert "uploading template" not in flat(resumed.stderr)  # already there
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run(r.id)
    assert r.status == "ok"
    assert db.measurement_keys(r.id) == plan_keys(path)
    assert len(db.rows("measurements", r.id)) == len(plan_keys(path))
    report = json.loads(vmbench("report", str(r.id), "--db", str(db_path), "--format", "json").stdout)
    rows = {(x["side"], x["job"]) for x in report["tables"][0]["records"]}
    assert rows == {(s, j) for s in ("host", "guest") for j in ("4k-randwrite", "1m-read")}

    # what the run end to end holds: the SSH host it reached, its host key, the pool, the host's targets
    env = r.environment
    assert env["ssh_host"] == "127.0.0.1" and env["ssh_port"] == sshd.port
    assert env["ssh_host_key"] == sshd.host_key_fingerprint
    assert env["libvirt_uri"].startswith("qemu+ssh://root@127.0.0.1:") and env["pool"] == POOL
    rows = db.rows("measurements", r.id)
    assert {(m["side"], m["job"]) for m in rows} == {(s, j) for s in ("host", "guest") for j in ("4k-randwrite", "1m-read")}
    assert all(m["target"].startswith(f"{REMOTE_DIR}/pool/vmbench-") for m in rows if m["side"] == "host")
    # CPU per I/O (issue 17): the QEMU process sampled through the SSH host transport
    text = vmbench("report", "latest", "--db", str(db_path))
    assert text.returncode == 0, text.stderr
    assert_qemu_cpu_sampled(db, r.id, text.stdout)
    assert list(Path(REMOTE_DIR, "images").glob("debian12-*/manifest.json"))
    assert run_tag_resources(machine, r.tag) == []
    assert not list(Path(REMOTE_DIR, "work").glob("*")), "the host work directory is removed"

    # the image is already there: doctor says so, and a second run would not upload it again
    doc = vmbench("doctor", str(path))
    assert doc.returncode == 0, doc.stdout + doc.stderr
    assert "hash matches" in flat(doc.stdout) and sshd.host_key_fingerprint in flat(doc.stdout)
    clean = vmbench("cleanup", "--dry-run", str(path), timeout=120)
    # this run left nothing (tests running beside this one on the same libvirtd may have VMs up now)
    assert clean.returncode == 0 and r.tag not in clean.stdout, clean.stdout + clean.stderr
    assert "nothing to clean up on 127.0.0.1" in flat(clean.stdout) or "leftover(s); --dry-run: nothing removed" in flat(clean.stdout)
