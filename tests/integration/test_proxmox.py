"""The Proxmox driver end to end (issue 9): `vmbench run` against the fake PVE server (a real
HTTPS server with its own CA, validating every request and response against the PVE 9.1
schema), whose VMs are real libvirt guests from the template image on this machine, with
the node's SSH side the test sshd: a whole scenario produces real fio numbers through the
API, the guest agent endpoints and SSH; nothing is left behind and the token never shows."""

from __future__ import annotations

import json
import os
import socket


from tests.fakepve import FakePve, LibvirtBackend
from tests.integration.conftest import vmbench, write
from tests.sshd import TestSshd
from vmbench.results.db import ResultsDB

SECRET = "0a1b2c3d-4e5f-4789-abcd-ef0123456789"
TOKEN_ID = "vmbench@pve!bench"

SCENARIO = """
name: it-proxmox
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  node: {node}
  template: debian12-tmpl
  storage: local
  token: {{id: "{token_id}", secret_env: VMBENCH_IT_PVE_TOKEN}}
  tls: {{ca_file: {ca}}}
  ssh: {{port: {ssh_port}, user: root, key_file: {key}, known_hosts: {known_hosts}}}
  state_dir: /var/lib/vmbench-proxmox-test
  accel: tcg
  timeout: 60s
storage: {{scratch_size: 256M}}
vm: {{memory: 768M, bus: virtio-blk, cache: none, aio: native, iothread: true, cpu: kvm64}}
vary: {{bus: [virtio-scsi]}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 64M, runtime: 2s, ramp: 1s}}
  - {{name: 1m-read, rw: read, bs: 1M, iodepth: 4, size: 64M, runtime: 2s, ramp: 1s}}
"""


def test_a_scenario_through_the_proxmox_driver(machine, tmp_path):
    node = socket.gethostname().split(".")[0]
    with TestSshd() as sshd, FakePve(version="9.1", backend=LibvirtBackend(), node=node, token=(TOKEN_ID, SECRET),
                                     task_polls=1, agent_pings=3) as fake:
        fake.add_template(vmid=9000, name="debian12-tmpl")
        path = write(tmp_path, "pve.yaml", SCENARIO.format(
            port=fake.port, node=node, token_id=TOKEN_ID, ca=fake.ca_file, ssh_port=sshd.port, key=sshd.client_key,
            known_hosts=sshd.known_hosts))
        env = dict(os.environ, VMBENCH_IT_PVE_TOKEN=SECRET)
        db_path = tmp_path / "r.db"
        run = vmbench("--debug", "-v", "run", str(path), "--db", str(db_path), env=env)
        assert run.returncode == 0, run.stderr[-4000:]
        assert SECRET not in run.stdout + run.stderr
        db = ResultsDB(db_path, create=False)
        r = db.resolve_run("latest")
        assert r.status == "ok"
        e = r.environment
        assert e["driver"] == "proxmox" and e["pve_node"] == node and e["pve_tls"].startswith("verified against CA file") and not e["tls_verify_off"]
        cells = db.rows("cells", r.id)
        assert [c["name"] for c in cells] == ["baseline", "bus=virtio-scsi"] and all(c["valid"] for c in cells), \
            [(c["name"], c["problems"]) for c in cells]
        boots = db.rows("boots", r.id)
        assert len(boots) == 2 and {b["accelerator"] for b in boots} == {"tcg"}
        ms = db.rows("measurements", r.id)
        assert {(m["side"], m["job"]) for m in ms} == {(s, j) for s in ("host", "guest") for j in ("4k-randwrite", "1m-read")}
        assert all(m["iops"] > 0 for m in ms)
        report = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
        doc = json.loads(report.stdout)
        gaps = next(t for t in doc["tables"] if t["name"] == "gaps")["records"]
        assert len(gaps) == 2 * 3 and all(rec["iops"] > 0 for rec in gaps)
        print(vmbench("report", "latest", "--db", str(db_path)).stdout)
        # the recorded request sequence: clone, configure, start, agent, stop, destroy for each VM
        seq = fake.calls()
        print("\n".join(f"{m} {t}" for m, t in dict.fromkeys(seq)))
        for call in [("POST", "/nodes/{node}/qemu/{vmid}/clone"), ("POST", "/nodes/{node}/qemu/{vmid}/config"),
                     ("POST", "/nodes/{node}/qemu/{vmid}/status/start"), ("POST", "/nodes/{node}/qemu/{vmid}/agent/exec"),
                     ("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status"), ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"),
                     ("DELETE", "/nodes/{node}/qemu/{vmid}")]:
            assert seq.count(call) >= (2 if call[1].endswith(("clone", "start", "stop", "}")) else 1), call
        assert fake.problems == [], fake.problems
        assert SECRET not in json.dumps([vars(q) for q in fake.requests], default=str)
        assert SECRET.encode() not in db_path.read_bytes()
        # nothing left: only the template, no guest domain of the fake
        assert sorted(fake.vms) == [9000]
        left = vmbench("cleanup", "--dry-run", str(path), env=env)
        assert left.returncode == 0 and "nothing to clean up" in left.stdout, left.stdout + left.stderr
    assert not [d for d in machine.conn.listAllDomains(0) if d.name().startswith("vmbtest-pve-")]
