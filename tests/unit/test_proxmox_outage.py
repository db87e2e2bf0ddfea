"""A Proxmox API that stops answering for a while (issue 39 item 3): pvedaemon stopped (pveproxy
answers ``595 Connection refused`` for every call it proxies to it, as a real PVE 8.4 node
did for the 10 s of a restart), pveproxy stopped (the port refuses connections, open ones are
cut), an answer lost after the request went out.

Against the fake PVE (its HTTPS server, every request checked against the schema): a request
is sent again until the API answers, within the deadline, and the progress output says so;
a request that may have taken effect is sent again only when that is safe, a clone whose
answer was lost is found rather than made twice; a run whose node's pvedaemon restarts in the
middle of the guest's fio completes; one whose API stays down past the deadline fails naming
it, and ``vmbench cleanup`` removes what it left once the API answers again.
"""

from __future__ import annotations

import pytest

from tests.fakepve import FakePve
from tests.unit.test_proxmox_contract import (SECRET, VERSIONS, Clock, make_driver, new_fake, prepare, request,
                                              scenario_text)
from tests.unit.test_proxmox_load import Guests, LoadRun, Node, db, scenario_for  # noqa: F401  (db: a fixture)
from tests.fakes import FakePveNode
from vmbench.cli.cleanup import find_leftovers, remove_leftovers
from vmbench.results.environment import Environment
from vmbench.drivers.proxmox.api import PveApi, Secret
from vmbench.drivers.proxmox.errors import PveAnswerLost, PveUnreachable
from vmbench.drivers.proxmox.outage import idempotent
from vmbench.errors import VmbenchError
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.scenario import parse_scenario

CLONE = ("POST", "/nodes/{node}/qemu/{vmid}/clone")
EXEC_STATUS = ("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status")
MATRIX_JOBS = """
jobs:
  - {name: w, rw: randwrite, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}
"""


class OutageClock(Clock):
    """The driver's clock; ``up_after`` seconds (of this clock) after ``start()``, ``fake``'s API answers again."""

    def __init__(self, fake: FakePve, up_after: float | None) -> None:
        super().__init__()
        self.fake, self.up_after, self.began = fake, up_after, None

    def start(self, how: str) -> None:
        self.began = self.t
        self.fake.api_down(how)

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        if self.began is not None and self.up_after is not None and self.t - self.began >= self.up_after:
            self.began = None
            self.fake.api_up()


def api_for(fake: FakePve, clock: Clock, notices: list[str], **kw) -> PveApi:
    s = parse_scenario(scenario_text(fake), "outage.yaml")
    return PveApi(s.hypervisor.proxmox, Secret(SECRET), clock=clock.now, sleep=clock.sleep, notice=notices.append, **kw)


# ---- what is sent again ------------------------------------------------------------------------


@pytest.mark.parametrize("method, path, params, again", [
    ("GET", "/nodes/pve1/qemu/100/agent/exec-status", {"pid": 7}, True),
    ("DELETE", "/nodes/pve1/qemu/100", {"purge": 1}, True),
    ("PUT", "/nodes/pve1/qemu/100/config", {"delete": "ide2"}, True),
    ("POST", "/nodes/pve1/qemu/100/status/stop", {}, True),
    ("POST", "/nodes/pve1/qemu/100/agent/ping", {}, True),
    ("POST", "/nodes/pve1/qemu/100/agent/file-write", {"file": "/x", "content": "eA=="}, True),
    ("POST", "/nodes/pve1/qemu/100/config", {"tags": "vmbench;vmbench-r1", "cores": 2,
                                             "description": "vmbench-run: r1 (being configured)"}, True),
    ("POST", "/nodes/pve1/qemu/100/config", {"scsi1": "local:100/vm-100-disk-1.raw,cache=none"}, True),
    ("POST", "/nodes/pve1/qemu/100/config", {"scsi1": "local-zfs:4,cache=none,serial=VMB1"}, False),  # allocates
    ("POST", "/nodes/pve1/qemu/100/config", {"virtio1": "local:0.5"}, False),
    ("POST", "/nodes/pve1/qemu", {"vmid": 100, "virtio0": "local:0,import-from=local:import/x.raw"}, False),
    ("POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100}, False),
    ("POST", "/nodes/pve1/qemu/100/status/start", {}, False),
    ("POST", "/nodes/pve1/qemu/100/agent/exec", {"command": ["fio"]}, False),
    ("POST", "/nodes/pve1/storage/local/content", {"vmid": 100, "filename": "x.raw", "size": "1G"}, False),
    ("POST", "/storage", {"storage": "vmbench-r1-16k", "type": "zfspool"}, False),
])
def test_which_requests_are_sent_again_after_a_lost_answer(method, path, params, again):
    assert idempotent(method, path, params) is again


# ---- the API seam --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("how, seen", [("pvedaemon", "595 Connection refused"), ("pveproxy", "Connection refused")])
def test_an_api_that_stops_answering_is_waited_for(version, how, seen):
    with new_fake(version) as fake:
        fake.add_template()
        clock, notices = OutageClock(fake, up_after=10), []
        api = api_for(fake, clock, notices)
        assert api.get("/version")["version"]
        clock.start(how)
        before = len(fake.requests)
        status = api.get("/nodes/pve1/qemu/9000/status/current")  # protected: pveproxy proxies it to pvedaemon
        assert status["status"] == "stopped"
        assert notices[0] == f"the Proxmox API{' (node pve1)' if how == 'pvedaemon' else ''} not answering ({seen}) since 0s; " \
                             "retrying until 60s"
        assert notices[-1].endswith("answers again after 12.5s")
        assert clock.slept == [0.5, 1.0, 2.0, 4.0, 5.0]  # a growing pause, at most 5 s
        sent = fake.requests[before:]
        assert [r.status for r in sent] == ([595] * 5 if how == "pvedaemon" else []) + [200]
        assert api.outages.ridden_out == [("pve1" if how == "pvedaemon" else "", 12.5)]
        assert fake.problems == []


def test_a_first_contact_that_fails_is_not_waited_for():
    """A wrong port or a node whose daemon is down before anything answered: a setting to fix, at once."""
    with new_fake("9.1") as fake:
        clock, notices = Clock(), []
        api = api_for(fake, clock, notices)
        fake.add_template()
        fake.api_down("pvedaemon")
        with pytest.raises(PveUnreachable, match=r"could not reach the node \(595 Connection refused\)"):
            api.get("/nodes/pve1/qemu/9000/status/current")
        assert clock.slept == [] and notices == []


def test_past_the_deadline_it_fails_naming_the_request_then_at_once_until_it_answers():
    with new_fake("8.4") as fake:
        fake.add_template()
        clock, notices = Clock(), []
        api = api_for(fake, clock, notices)
        api.get("/version")
        fake.api_down("pvedaemon")
        with pytest.raises(PveUnreachable) as exc:
            api.get("/nodes/pve1/qemu/9000/status/current")
        assert exc.value.message == ("GET /nodes/pve1/qemu/9000/status/current: node pve1 of the Proxmox API has not answered "
                                     "for 60s (595 Connection refused); vmbench waits 60s for a restart of pveproxy or pvedaemon")
        assert "systemctl status pveproxy pvedaemon" in exc.value.hint
        assert sum(clock.slept) == 60 and len(notices) == 6  # said every 10 s
        slept = len(clock.slept)
        with pytest.raises(PveUnreachable, match="has not answered for 60s"):  # given up: no second minute
            api.post("/nodes/pve1/qemu/9000/status/stop")
        assert len(clock.slept) == slept
        fake.api_up()
        assert api.get("/nodes/pve1/qemu/9000/status/current")["status"] == "stopped"
        assert notices[-1] == "the Proxmox API (node pve1) answers again after 60.0s"


def test_a_lost_answer_is_sent_again_only_when_that_is_safe():
    with new_fake("9.1") as fake:
        fake.add_template()
        clock, notices = Clock(), []
        api = api_for(fake, clock, notices)
        api.get("/version")
        fake.lose_answer("GET", "/nodes/{node}/qemu/{vmid}/config")
        assert api.get("/nodes/pve1/qemu/9000/config")["name"] == "debian12-tmpl"  # read again
        fake.lose_answer(*CLONE)
        with pytest.raises(PveAnswerLost) as exc:
            api.post("/nodes/pve1/qemu/9000/clone", {"newid": 100, "name": "x", "full": False})
        assert exc.value.message.startswith("POST /nodes/pve1/qemu/9000/clone: the Proxmox API stopped answering "
                                            "after the request was sent (")
        assert "it may or may not have taken effect" in exc.value.message
        assert fake.calls().count(CLONE) == 1 and 100 in fake.vms  # it did: the caller must look


# ---- the driver ------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_a_clone_whose_answer_was_lost_is_found_not_made_twice(version, tmp_path, monkeypatch):
    with new_fake(version) as fake:
        fake.add_template()
        drv, s, clock = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        prepare(drv, s)
        progress = RecordingProgress()
        drv.progress = progress
        fake.lose_answer(*CLONE)
        req = request(s)
        res = drv.new_resources("r0a1b2c3d", req)
        drv.create_vm("r0a1b2c3d", req, res)
        assert fake.calls().count(CLONE) == 1 and sorted(fake.vms) == [100, 9000]
        assert res.storage["pve"]["vmid"] == 100 and fake.vms[100].config["tags"] == "vmbench;vmbench-r0a1b2c3d"
        assert ("warn", f"cloning template 9000 into {res.name} (VMID 100): the answer was lost (Remote end closed connection without "
                        "response), but VM 100 exists: waiting for its clone") in progress.events
        drv.remove_vm(res)
        assert sorted(fake.vms) == [9000] and fake.problems == []
        drv.close()


# ---- whole runs --------------------------------------------------------------------------------


class Restarts(Guests):
    """Guests whose node's pvedaemon stops once the first guest fio starts (``clock`` brings it back)."""

    def __init__(self) -> None:
        super().__init__()
        self.clock: OutageClock | None = None

    def _result(self, vm, argv, data):
        out = super()._result(vm, argv, data)
        if self.clock is not None and self.clock.began is None and any(str(a).startswith("--output-format") for a in argv):
            self.clock.start("pvedaemon")
            self.clock = None  # once
        return out


def outage_run(fake: FakePve, backend: Restarts, tmp_path, monkeypatch, db, up_after: float | None) -> LoadRun:
    lr = LoadRun(fake, backend, tmp_path, monkeypatch, db, MATRIX_JOBS)
    clock = OutageClock(fake, up_after)
    clock.t = lr.clock.t
    lr.driver.clock, lr.driver.sleep = clock.now, clock.sleep
    lr.progress = lr.runner.progress
    backend.clock = clock
    return lr


@pytest.mark.parametrize("version", VERSIONS)
def test_a_pvedaemon_restart_in_the_middle_of_the_guests_fio_is_ridden_out(version, tmp_path, monkeypatch, db):
    backend = Restarts()
    with new_fake(version, backend=backend) as fake:
        lr = outage_run(fake, backend, tmp_path, monkeypatch, db, up_after=10)
        out = lr.run()
        assert out.status == "ok", out.error
        assert {(m["side"], m["job"]) for m in db.rows("measurements", out.run_id)} == {("host", "w"), ("guest", "w")}
        warns = [m for kind, m in lr.runner.progress.events if kind == "warn"]
        assert "the Proxmox API (node pve1) not answering (595 Connection refused) since 0s; retrying until 60s" in warns
        assert "the Proxmox API (node pve1) answers again after 12.5s" in warns
        refused = [r for r in fake.requests if r.status == 595]
        assert refused and {(r.method, r.template) for r in refused} == {EXEC_STATUS}
        # (issue 39 item 5) the report names the QEMU the VM ran: the boot's evidence (running-qemu)
        qemu = {"8.4": "9.2.0", "9.1": "10.1.2"}[version]
        env = dict(db.resolve_run(out.run_id).environment)
        assert build_report(load_run(db, out.run_id))[0]["versions"].startswith(f"Proxmox VE {version}.") and \
            f", QEMU {qemu}, fio " in build_report(load_run(db, out.run_id))[0]["versions"]
        db.set_environment(out.run_id, Environment({k: v for k, v in env.items() if k not in ("qemu_version", "pveversion")}))  # no pveversion
        assert f", QEMU {qemu}, fio " in build_report(load_run(db, out.run_id))[0]["versions"]
        assert sorted(fake.vms) == [9000] and fake.problems == []
        lr.driver.close()


def test_an_api_down_past_the_deadline_fails_the_run_naming_it_then_cleanup_removes_what_is_left(tmp_path, monkeypatch, db):
    backend = Restarts()
    with new_fake("8.4", backend=backend) as fake:
        lr = outage_run(fake, backend, tmp_path, monkeypatch, db, up_after=None)
        with pytest.raises(VmbenchError) as exc:
            lr.run()
        message = exc.value.message
        assert "GET /nodes/pve1/qemu/100/agent/exec-status: node pve1 of the Proxmox API has not answered for 60s " \
               "(595 Connection refused)" in message, message
        assert "`vmbench cleanup SCENARIO` removes it once its host answers again" in exc.value.hint
        assert db.resolve_run(lr.runner.run_id).status == "failed"
        left = [m for kind, m in lr.runner.progress.events if kind == "warn" and m.startswith("cleanup: ")]
        assert len(left) == 1 and "vmbench-" in left[0] and "has not answered" in left[0], left
        assert sorted(fake.vms) == [100, 9000]
        lr.driver.close()

        fake.api_up()
        drv, _, _ = make_driver(tmp_path, monkeypatch, scenario_for(fake, MATRIX_JOBS), Node(fake, kvm=True))
        found, _ = find_leftovers(drv, StatePaths(tmp_path / "state"))
        assert [f.kind for f in found] == ["vm"] and found[0].run_tag == lr.runner.tag
        assert remove_leftovers(drv, found) == []
        assert sorted(fake.vms) == [9000] and fake.problems == []
        drv.close()
