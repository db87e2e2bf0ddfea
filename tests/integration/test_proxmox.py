"""The Proxmox driver end to end (issue 9): `vmbench run` against the fake PVE server (a real
HTTPS server with its own CA, validating every request and response against the PVE 9.1
schema), whose VMs are real libvirt guests, with the node's SSH side the test sshd: a whole
scenario produces real fio numbers through the API, the guest agent endpoints and SSH;
nothing is left behind and the token never shows.

The template is vmbench's own (issue 15): `vmbench images push` uploads vmbench's image, as
a disk that boots by itself, over SFTP into the node's import storage and makes the template
with ``virtio0=local:0,import-from=local:import/...``; the fake copies the file's content into
the new disk as qemu-server does, so the run's linked clones boot from that very content
(SeaBIOS, then the disk's SYSLINUX), as they would on a real node.  `vmbench doctor` then
calls the template vmbench's and current, and a second push keeps it.

A scaling step is spread over a two-node fake cluster (issue 28): one API, each node's SSH
its own sshd on its own loopback address in its own UTS namespace (``hostname`` answers the
node's name, as vmbench checks), the template pushed onto a directory storage both nodes share,
VM 0 on node1 and VM 1 cloned onto node2 with ``target``, both at once."""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
import time
from pathlib import Path


from tests.fakepve import FakePve, LibvirtBackend
from tests.integration.conftest import flat, vmbench, write
from tests.integration.cpu_checks import assert_qemu_cpu_sampled
from tests.sshd import TestSshd
from vmbench.results.db import ResultsDB

SECRET = "0a1b2c3d-4e5f-4789-abcd-ef0123456789"
TOKEN_ID = "vmbench@pve!bench"

#: the fake node, reached as a real one would be (the API over TLS, SSH for the host side)
HYPERVISOR = """
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  node: {node}
  template: vmbench-debian12
  storage: local
  token: {{id: "{token_id}", secret_env: VMBENCH_IT_PVE_TOKEN}}
  tls: {{ca_file: {ca}}}
  ssh: {{port: {ssh_port}, user: root, key_file: {key}, known_hosts: {known_hosts}}}
  state_dir: /var/lib/vmbench-proxmox-test
  accel: tcg
  timeout: 60s
"""

SCENARIO = "name: it-proxmox\n" + HYPERVISOR + """storage: {{scratch_size: 256M}}
vm: {{memory: 768M, bus: virtio-blk, cache: none, aio: native, iothread: true, cpu: kvm64}}
vary: {{bus: [virtio-scsi]}}
jobs:
  - {{name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 64M, runtime: 2s, ramp: 1s}}
  - {{name: 1m-read, rw: read, bs: 1M, iodepth: 4, size: 64M, runtime: 2s, ramp: 1s}}
"""


@contextlib.contextmanager
def fake_node(tmp_path, name: str, scenario: str):
    """The fake PVE 9.1 node with real guests behind it, an sshd for its host side, and the
    scenario written for them: (fake, scenario path, environment with the token, sshd)."""
    node = socket.gethostname().split(".")[0]
    with TestSshd() as sshd, FakePve(version="9.1", backend=LibvirtBackend(), node=node, token=(TOKEN_ID, SECRET),
                                     task_polls=1, agent_pings=3,
                                     local_content="images,rootdir,vztmpl,iso,backup,snippets,import") as fake:
        path = write(tmp_path, name, scenario.format(
            port=fake.port, node=node, token_id=TOKEN_ID, ca=fake.ca_file, ssh_port=sshd.port, key=sshd.client_key,
            known_hosts=sshd.known_hosts))
        yield fake, path, dict(os.environ, VMBENCH_IT_PVE_TOKEN=SECRET), sshd


class Restarts(threading.Thread):
    """Once the run's first guest fio starts (its agent/exec seen by the fake), the node's API
    (pveproxy: the port refuses, open connections are cut) and its sshd (every session cut)
    stop; the API is back ``api_down`` seconds later, sshd ``ssh_down`` seconds later (so
    the run's next SSH step finds it still refusing)."""

    def __init__(self, fake: FakePve, sshd: TestSshd, api_down: float = 10.0, ssh_down: float = 15.0) -> None:
        super().__init__(daemon=True)
        self.fake, self.sshd, self.api_down, self.ssh_down = fake, sshd, api_down, ssh_down
        self.stop_at: float | None = None
        self.quit = threading.Event()

    def guest_fio_started(self) -> bool:
        """A measured guest fio was started and its start answered (a restart while the answer
        is on its way loses it: the step would fail, as it must, not knowing whether fio runs)."""
        return any(r.method == "POST" and (r.template or "").endswith("/agent/exec") and r.status == 200
                   and "--output-format=json+" in (r.params.get("command") or []) for r in list(self.fake.requests))

    def run(self) -> None:
        while not self.quit.is_set() and not self.guest_fio_started():
            time.sleep(0.05)
        if self.quit.is_set():
            return
        time.sleep(0.5)  # into its ramp
        self.stop_at = time.monotonic()
        self.fake.api_down("pveproxy")
        self.sshd.stop()
        time.sleep(self.api_down)
        self.fake.api_up()
        time.sleep(self.ssh_down - self.api_down)
        self.sshd.start()


def test_a_scenario_through_the_proxmox_driver(machine, tmp_path):
    """... and (issue 39) the node's API and its sshd restart in the middle of the first guest
    fio: pveproxy down for 10 s, sshd for 15 s (every connection cut); the run waits for both
    and completes, its figures from the fio runs that went on in the guest meanwhile."""
    with fake_node(tmp_path, "pve.yaml", SCENARIO) as (fake, path, env, sshd):
        db_path = tmp_path / "r.db"
        pushed = vmbench("images", "push", str(path), env=env)
        assert pushed.returncode == 0, pushed.stderr[-4000:]
        assert "template 100 (vmbench-debian12)" in flat(pushed.stdout) and "made" in pushed.stdout, pushed.stdout
        tmpl = fake.vms[100].config
        assert tmpl["template"] == 1 and tmpl["virtio0"].startswith("local:100/base-100-disk-0.qcow2,") and "import-from" not in tmpl["virtio0"]
        assert tmpl["tags"] == "vmbench;vmbench-template" and "vmbench-template: debian12 " in tmpl["description"]
        create = [r.params for r in fake.requests if (r.method, r.template) == ("POST", "/nodes/{node}/qemu")]
        assert len(create) == 1 and create[0]["virtio0"].startswith("local:0,import-from=local:import/vmbench-debian12-")
        assert ("POST", "/nodes/{node}/qemu/{vmid}/template") in fake.calls()
        assert not list((Path(fake.storages["local"].config["path"]) / "import").iterdir())  # the upload is removed
        again = vmbench("images", "push", str(path), env=env)
        assert again.returncode == 0 and "kept (current)" in flat(again.stdout), again.stdout + again.stderr
        doctor = vmbench("doctor", str(path), env=env)
        assert "vmbench's debian12" in flat(doctor.stdout) and "current" in doctor.stdout, doctor.stdout + doctor.stderr
        restarts = Restarts(fake, sshd)
        restarts.start()
        started = time.monotonic()
        try:
            run = vmbench("--debug", "-v", "run", str(path), "--db", str(db_path), env=env)
        finally:
            restarts.quit.set()
            restarts.join()
        print(f"the run took {time.monotonic() - started:.0f}s, the restarts began {restarts.stop_at - started:.0f}s in"
              if restarts.stop_at else "no restart")
        assert run.returncode == 0, run.stderr[-4000:]
        assert SECRET not in run.stdout + run.stderr
        assert restarts.stop_at is not None, "the guest's fio was never seen"
        said = [line for line in run.stderr.splitlines() if "warning: the Proxmox API" in line]
        print("\n".join(said))
        # refused, or closed under a request already sent when pveproxy stopped
        assert any(re.search(r"warning: the Proxmox API not answering \((Connection refused|Remote end closed connection without "
                             r"response)\) since 0s; retrying until 60s", l) for l in said), said
        back = [float(m.group(1)) for l in said if (m := re.search(r"the Proxmox API answers again after ([\d.]+)s", l))]
        assert back and 10 <= back[0] < 25, said  # ridden out: down for 10 s
        db = ResultsDB(db_path, create=False)
        r = db.resolve_run("latest")
        assert r.status == "ok"
        ssh_said = [l for l in (tmp_path / "logs" / f"run-{r.tag}.log").read_text().splitlines() if "SSH" in l and "answer" in l]
        print("\n".join(ssh_said))
        assert any(f"root@127.0.0.1:{sshd.port}: SSH not answering (Connection refused)" in l for l in ssh_said), ssh_said
        assert any(re.search(r"SSH answers again after [\d.]+s", l) for l in ssh_said), ssh_said
        e = r.environment
        assert e["driver"] == "proxmox" and e["pve_node"] == socket.gethostname().split(".")[0] and e["pve_tls"].startswith("verified against CA file") and not e["tls_verify_off"]
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
        text = vmbench("report", "latest", "--db", str(db_path))
        print(text.stdout)
        # CPU per I/O (issue 17): the QEMU process (its pid from status/current) sampled over the node's SSH
        assert_qemu_cpu_sampled(db, r.id, text.stdout)
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
        assert sorted(fake.vms) == [100]
        left = vmbench("cleanup", "--dry-run", str(path), env=env)
        assert left.returncode == 0 and "nothing to clean up" in flat(left.stdout), left.stdout + left.stderr
    assert not [d for d in machine.conn.listAllDomains(0) if d.name().startswith("vmbtest-pve-")]


#: a two-node fake cluster (issue 28): one API for both nodes, each node's SSH its own sshd on its
#: own loopback address (each answering with its node's host name), the VMs placed round robin;
#: the template and the scratch disks on a storage both nodes share, so VM 1 is a linked clone
#: made onto node2 with ``target``
CLUSTER_HYPERVISOR = """
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  nodes:
    - {{name: node1, ssh: {{host: 127.0.0.2, port: {ssh1}, key_file: {key1}, known_hosts: {kh1}}}}}
    - {{name: node2, ssh: {{host: 127.0.0.3, port: {ssh2}, key_file: {key2}, known_hosts: {kh2}}}}}
  template: vmbench-debian12
  storage: shared
  token: {{id: "{token_id}", secret_env: VMBENCH_IT_PVE_TOKEN}}
  tls: {{ca_file: {ca}}}
  ssh: {{user: root}}
  state_dir: /var/lib/vmbench-proxmox-test
  accel: tcg
  timeout: 60s
"""

LOAD_SCENARIO = "name: it-proxmox-load\n" + CLUSTER_HYPERVISOR + """storage: {{scratch_size: 384M}}
vm: {{memory: 512M, vcpus: 1, bus: virtio-blk, cache: none, aio: native, cpu: kvm64, iops_wr: 60}}
jobs:
  - {{name: heavy, rw: randwrite, bs: 4k, iodepth: 8, size: 64M, runtime: 4s, ramp: 2s}}
load: {{vms: [2]}}
"""


@contextlib.contextmanager
def fake_cluster(tmp_path, name: str, scenario: str):
    """The fake PVE 9.1 as a cluster of node1 and node2 with real guests behind it, each node's
    SSH its own sshd (127.0.0.2, 127.0.0.3) named as its node, a directory storage both share
    (``shared``), and the scenario written for them: (fake, scenario path, environment)."""
    with TestSshd(host="127.0.0.2", hostname="node1") as ssh1, TestSshd(host="127.0.0.3", hostname="node2") as ssh2, \
            FakePve(version="9.1", backend=LibvirtBackend(), nodes=("node1", "node2"), token=(TOKEN_ID, SECRET),
                    task_polls=1, agent_pings=3,
                    local_content="images,rootdir,vztmpl,iso,backup,snippets,import") as fake:
        fake.add_storage("shared", "dir", shared=1)  # a cluster file system's directory, on every node
        path = write(tmp_path, name, scenario.format(
            port=fake.port, token_id=TOKEN_ID, ca=fake.ca_file, ssh1=ssh1.port, key1=ssh1.client_key, kh1=ssh1.known_hosts,
            ssh2=ssh2.port, key2=ssh2.client_key, kh2=ssh2.known_hosts))
        yield fake, path, dict(os.environ, VMBENCH_IT_PVE_TOKEN=SECRET)


def test_a_scaling_step_spread_over_two_nodes_through_the_proxmox_driver(machine, tmp_path):
    """A scaling step of 2 VMs spread over a two-node fake cluster with real guests: VM 0 on
    node1, VM 1 on node2, cloned there with ``target`` from the template on shared storage, both
    with iops_wr 60; both run at once, armed and released together, after the host reference ran
    the same job on 2 volumes at once, one on each node's storage; the limit is in each disk's
    config and on each QEMU command line, and each VM gets 60 IOPS; each row names its node,
    the report has the per-host table; nothing is left on either node."""
    with fake_cluster(tmp_path, "pve-load.yaml", LOAD_SCENARIO) as (fake, path, env):
        db_path = tmp_path / "r.db"
        pushed = vmbench("images", "push", str(path), env=env)
        assert pushed.returncode == 0, pushed.stderr[-4000:]
        assert fake.node_of(100) == "node1" and fake.vms[100].config["virtio0"].startswith("shared:100/base-100-disk-0.qcow2,")
        plan = vmbench("plan", str(path), env=env)
        assert plan.returncode == 0 and "node1: VM 0; node2: VM 1" in flat(plan.stdout), plan.stdout + plan.stderr
        run = vmbench("--debug", "-v", "run", str(path), "--db", str(db_path), env=env)
        assert run.returncode == 0, run.stderr[-4000:]
        assert SECRET not in run.stdout + run.stderr
        db = ResultsDB(db_path, create=False)
        r = db.resolve_run("latest")
        assert r.status == "ok"
        cells = db.rows("cells", r.id)
        assert cells and all(c["valid"] for c in cells), [(c["name"], c["problems"]) for c in cells]
        # two linked clones of the template on node1: the one for node2 made there with target
        clones = [(q.path, q.params) for q in fake.requests if (q.method, q.template) == ("POST", "/nodes/{node}/qemu/{vmid}/clone")]
        assert sorted((p, q.get("target") or "") for p, q in clones) == [("/nodes/node1/qemu/100/clone", ""),
                                                                          ("/nodes/node1/qemu/100/clone", "node2")], clones
        # each with its scratch disk and its limit, configured on its own node
        disks = {q.path.split("/")[2]: q.params["virtio1"] for q in fake.requests
                 if (q.method, q.template) == ("POST", "/nodes/{node}/qemu/{vmid}/config") and "virtio1" in q.params}
        assert sorted(disks) == ["node1", "node2"] and all(",iops_wr=60," in d for d in disks.values()), disks
        started = {q.path.split("/")[2] for q in fake.requests if (q.method, q.template) == ("POST", "/nodes/{node}/qemu/{vmid}/status/start")}
        assert started == {"node1", "node2"}, started
        ms = db.rows("measurements", r.id)
        guest = {m["vm"]: m for m in ms if m["side"] == "guest"}
        assert {(vm, m["role"], m["job"], m["load_step"]) for vm, m in guest.items()} == {(0, "peer", "heavy", 1), (1, "peer", "heavy", 1)}
        # every row names its node: VM 0's and its host reference's on node1, VM 1's on node2
        assert (guest[0]["load"]["host"], guest[1]["load"]["host"]) == ("node1", "node2")
        host = sorted((m["vm"], m["load"]["host"]) for m in ms if m["side"] == "host")
        assert host == [(0, "node1"), (1, "node2")], host
        assert all(guest[vm]["settings"]["iops_wr"] == 60 for vm in (0, 1))
        # both at once: the measured windows (in this machine's clock) overlap, the start skew
        # and whether each window was loaded by the other VM are recorded (a VM whose window
        # was not is flagged, not hidden)
        loads = [guest[vm]["load"] for vm in (0, 1)]
        print("LOADS", json.dumps({vm: guest[vm]["load"] for vm in (0, 1)}), {vm: guest[vm]["iops"] for vm in (0, 1)})
        assert all(l["start_skew_ms"] is not None and isinstance(l["loaded"], bool) for l in loads), loads
        assert all(l["loaded"] or l["excluded"] for l in loads), loads
        assert max(l["window"]["measured_from_ms"] for l in loads) < min(l["window"]["measured_to_ms"] for l in loads)
        # each VM's limit as Proxmox stored it and as its QEMU runs it, and in effect
        boots = {b["vm"]: b for b in db.rows("boots", r.id)}
        for vm in (0, 1):
            eff = boots[vm]["guest"]["effective"]
            assert (eff["config_iops_wr"], eff["qemu_iops_wr"]) == (60, 60)
            assert '"limits":{"iops-write":60}' in " ".join(boots[vm]["qemu_cmdline"])
            assert abs(guest[vm]["iops"] - 60) <= 6, guest[vm]["iops"]
        # the report's per-host table: one row per node
        report = vmbench("report", "latest", "--db", str(db_path), "--format", "json")
        tables = {t["name"]: t for t in json.loads(report.stdout)["tables"]}
        assert {rec["host"] for rec in tables["load-hosts"]["records"]} == {"node1", "node2"}, tables["load-hosts"]
        text = vmbench("report", "latest", "--db", str(db_path))
        assert "Per host: each step's figures on each host" in flat(text.stdout), text.stdout
        print(text.stdout)
        assert fake.problems == [], fake.problems
        assert SECRET not in json.dumps([vars(q) for q in fake.requests], default=str)
        assert SECRET.encode() not in db_path.read_bytes()
        # nothing left: only the template, no guest domain of the fake, on either node
        assert sorted(fake.vms) == [100]
        left = vmbench("cleanup", "--dry-run", str(path), env=env)
        assert left.returncode == 0, left.stdout + left.stderr
        assert all(f"nothing to clean up on {n}" in flat(left.stdout) for n in ("node1", "node2")), left.stdout + left.stderr
    assert not [d for d in machine.conn.listAllDomains(0) if d.name().startswith("vmbtest-pve-")]
