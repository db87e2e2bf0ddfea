"""Many VMs at once through the Proxmox driver: the real ``Runner`` runs load scenarios (a
noisy neighbour in two phases, a scaling 1 -> 3 VMs) with a real ``ProxmoxDriver`` against
the fake PVE node of tests/fakepve on both schema versions (8.4 and 9.1), every request
validated against that version's official schema (``fake.problems == []``).

Behind the fake's guest agent each started VM is a :class:`~tests.fakes.FakeGuestTransport`
of its own (its files, fio with epoch-stamped logs, its clock), so the runner's whole load
path goes through the API's agent endpoints: boots ``boot_parallel`` at a time in threads,
clock readings, barrier-started fio in every VM, stacks, evidence from the config and
QEMU's command line (each VM its own QEMU pid).

The contract, per step: one linked clone per VM (named ``vmbench-<tag>-<seq>``, tagged),
created one after the other with the request sequence of tests/unit/test_proxmox_contract.py;
each started and driven through its agent; I/O limits only in the scratch disk options of
the VMs whose phase sets them; every VM stopped and destroyed (purge, unreferenced disks) by
the end of its step, in reverse order; nothing left on the node; every measurement stored
per VM with its load step and role.  A failure in the middle of a step (a clone's start
task fails, one VM's agent errors) leaves nothing on the node and keeps the steps before.
"""

from __future__ import annotations

import base64
import logging
import os
import re
import textwrap
from collections.abc import MutableMapping
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import unquote

import pytest

from tests.fakepve import BackendError, NullBackend, VmView
from tests.fakes import FIO_VERSION, FakeGuestTransport, FakePveNode
from tests.unit.test_proxmox_contract import (APPLIED, BOOT, CREATE, DESCRIBE, PING, PREPARE, REMOVE, STORAGE_STATUS, VERSIONS,
                                              VM_CONFIG, assert_no_boolean_words, make_driver, new_fake, params_of,
                                              scenario_text)
from vmbench.drivers.proxmox.driver import scratch_serial
from vmbench.errors import GuestError
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run.plan import make_plan
from vmbench.run.runner import Runner
from vmbench.scenario.model import VmConfig

SECTIONS = """
storage: {scratch_size: 256M}
vm:
  vcpus: 1
  memory: 512M
  bus: virtio-scsi
  cache: none
  aio: native
  iothread: true
  cpu: x86-64-v2-AES
"""
NEIGHBOURS_JOBS = """
jobs:
  - {name: victim, rw: randread, bs: 4k, iodepth: 1, size: 16M, runtime: 2s, ramp: 1s, rate_iops: 100}
  - {name: heavy, rw: randwrite, bs: 4k, iodepth: 16, size: 16M, runtime: 2s, ramp: 1s}
load:
  victim: {job: victim}
  aggressors: {count: 2, job: heavy}
  boot_parallel: 3
  phases:
    - {name: alone, aggressors: 0}
    - {name: limited, aggressor_vm: {iops_wr: 100}}
"""
SCALING_JOBS = """
jobs:
  - {name: w, rw: randwrite, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}
load: {vms: [1, 3], boot_parallel: 2, tail: 2}
"""
SPAWN = 'exec "$@" >/dev/null 2>&1'  # PveAgentTransport.spawn
STDIN_B64 = 'base64 -d | "$@"'  # PveAgentTransport: binary stdin


# ---- the guests behind the fake's agent ------------------------------------------------------


class _Files(MutableMapping):
    """NullBackend's ``files[(vmid, path)]`` as the files of each VMID's guest (guest-file-*)."""

    def __init__(self, guests: dict[int, FakeGuestTransport]) -> None:
        self.guests = guests

    def __getitem__(self, key: tuple[int, str]) -> bytes:
        vmid, path = key
        if vmid not in self.guests:
            raise KeyError(key)
        return self.guests[vmid].files[path]

    def __setitem__(self, key: tuple[int, str], value: bytes) -> None:
        self.guests[key[0]].files[key[1]] = value

    def __delitem__(self, key: tuple[int, str]) -> None:
        del self.guests[key[0]].files[key[1]]

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return iter([(vmid, path) for vmid, g in self.guests.items() for path in g.files])

    def __len__(self) -> int:
        return sum(len(g.files) for g in self.guests.values())


class Guests(NullBackend):
    """Every started VM a FakeGuestTransport of its own behind the agent: commands
    (``setsid -w [env K=V...] argv``, binary stdin, background starts, kills) run there, guest
    files are its files.  Each VM has its own QEMU pid, so the node's /proc/<pid>/cmdline is
    that VM's.  ``agent_fault(vmid, qga_command)`` true: the agent of that VM errors."""

    PID_BASE = 40000

    def __init__(self, vm: VmConfig | None = None) -> None:
        super().__init__(exec_polls=0)
        self.vm = vm  # what every guest runs with (set once the scenario is parsed)
        self.guests: dict[int, FakeGuestTransport] = {}  # running now
        self.booted: list[tuple[int, FakeGuestTransport]] = []  # every start, in order
        self.files = _Files(self.guests)  # type: ignore[assignment]
        self.agent_fault: Callable[[int, dict], bool] | None = None
        self.concurrent = 0  # the most VMs running at once

    def start(self, vm: VmView) -> int:
        assert self.vm is not None
        scratch = next(d for d in vm.drives if d.opts.get("serial"))
        guest = FakeGuestTransport(f"guest {vm.name}", self.vm, unquote(str(scratch.opts["serial"])), scratch_size=scratch.size)
        self.guests[vm.vmid] = guest
        self.booted.append((vm.vmid, guest))
        self._running.add(vm.vmid)
        self.concurrent = max(self.concurrent, len(self._running))
        return self.PID_BASE + vm.vmid

    def stop(self, vm: VmView) -> None:
        super().stop(vm)
        self.guests.pop(vm.vmid, None)

    def agent(self, vm: VmView, qga_command: dict, timeout: float) -> dict:
        if self.agent_fault is not None and vm.vmid in self._running and self.agent_fault(vm.vmid, qga_command):
            raise BackendError("guest agent: injected failure")
        return super().agent(vm, qga_command, timeout)

    def _result(self, vm: VmView, argv: list, data: bytes) -> dict:
        return run_in(self.guests[vm.vmid], list(argv), data)


def run_in(guest: FakeGuestTransport, argv: list[str], data: bytes) -> dict:
    """One agent exec in ``guest``, unwrapped as the guest's shell would."""
    if argv[:2] == ["setsid", "-w"]:
        argv = argv[2:]
    if argv[:3] == ["sh", "-c", SPAWN]:
        guest.spawn(argv[4:])
        return {"exitcode": 0}
    if argv[:3] == ["sh", "-c", STDIN_B64]:
        argv, data = argv[4:], base64.b64decode(data)
    env = None
    if argv[:1] == ["env"]:
        env, argv = {}, argv[1:]
        while argv and "=" in argv[0]:
            key, _, value = argv.pop(0).partition("=")
            env[key] = value
    if argv[:1] == ["kill"]:
        return {"exitcode": 0}
    if argv[:2] == ["sh", "-c"] and "command -v" in argv[2]:  # the first boot's check of a template not vmbench's
        return {"exitcode": 0, "out": FIO_VERSION + "\n"}
    done = guest.run(argv, input=data or None, env=env, check=False)
    return {"exitcode": done.returncode, "out": done.stdout, "err": done.stderr}


class Node(FakePveNode):
    """The node over SSH; host fio runs on the fake's real volume files."""

    def _fio_target_ok(self, target: str) -> bool:
        return super()._fio_target_ok(target) or os.path.isfile(target)


# ---- running a scenario ------------------------------------------------------------------------


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "results.db")
    d.conn.execute("PRAGMA synchronous = OFF")
    yield d
    d.close()


def scenario_for(fake, jobs: str) -> str:
    """The contract tests' scenario (hypervisor section) with these VM settings, jobs and load."""
    text = scenario_text(fake, sections=SECTIONS)
    return text[:text.index("\njobs:\n") + 1] + textwrap.dedent(jobs).lstrip("\n")


class LoadRun:
    """A fake PVE node with guests behind its agent, a ProxmoxDriver and a Runner over them."""

    def __init__(self, fake, backend: Guests, tmp_path: Path, monkeypatch, db: ResultsDB, jobs: str) -> None:
        self.fake, self.backend, self.db = fake, backend, db
        fake.add_template()
        self.node = Node(fake, kvm=True)
        self.driver, self.scenario, self.clock = make_driver(tmp_path, monkeypatch, scenario_for(fake, jobs), self.node)
        backend.vm = self.scenario.cells[0].vm
        self.runner = Runner(self.scenario, db, RecordingProgress(), driver=self.driver, state=StatePaths(tmp_path / "state"))

    def run(self):
        return self.runner.run()


# ---- the request sequence ----------------------------------------------------------------------

NEXTID = ("GET", "/cluster/nextid")
CLONE = ("POST", "/nodes/{node}/qemu/{vmid}/clone")
VOLUME = ("GET", "/nodes/{node}/storage/{storage}/content/{volume}")  # the last request of CREATE
DELETE = ("DELETE", "/nodes/{node}/qemu/{vmid}")
AGENT = "/nodes/{node}/qemu/{vmid}/agent/"
#: before the first step: prepare, the capacity check's storage status, describe_host
PRELUDE = PREPARE + [STORAGE_STATUS] + DESCRIBE


def calls(reqs) -> list[tuple[str, str]]:
    return [(r.method, r.template) for r in reqs]


def steps(fake) -> tuple[list, list[list]]:
    """The routed requests before the first step, and each step's: a step begins with a
    /cluster/nextid that does not follow the end of another VM's CREATE."""
    reqs = [r for r in fake.requests if r.template]
    starts = [i for i, r in enumerate(reqs) if (r.method, r.template) == NEXTID and calls(reqs[i - 1:i]) != [VOLUME]]
    return reqs[:starts[0]], [reqs[a:b] for a, b in zip(starts, starts[1:] + [len(reqs)])]


def vmid_of(r) -> int | None:
    """The VM a request of the boot-and-measure part is about (its path, or its start task)."""
    m = re.search(r"/qemu/(\d+)(/|$)", r.path) or re.search(r":qmstart:(\d+):", r.path)
    return int(m.group(1)) if m else None


def max_overlap(intervals: list[tuple[int, int]]) -> int:
    """The most intervals under way at once (each begins inside at most that many)."""
    return max(sum(1 for a, b in intervals if a <= lo <= b) for lo, _ in intervals)


def check_step(fake, seg: list, n: int, tag: str, seqs: tuple[int, ...], boot_parallel: int) -> list[int]:
    """One step of ``n`` VMs: the VMs' CREATE one after the other, then only their boots and
    agent calls (each VM: start, pings, then the config and QEMU pid read back; at most
    ``boot_parallel`` booting at once), then REMOVE of each, the last created first.  Returns
    the step's VMIDs, in creation order."""
    made, removed = seg[:n * len(CREATE)], seg[len(seg) - n * len(REMOVE):]
    assert calls(made) == CREATE * n and calls(removed) == REMOVE * n
    clones = [r.params for r in made if (r.method, r.template) == CLONE]
    vmids = [int(c["newid"]) for c in clones]
    assert [c["name"] for c in clones] == [f"vmbench-{tag}-{seq}" for seq in seqs] and len(set(vmids)) == n
    options = [r.params for r in made if (r.method, r.template) == ("POST", VM_CONFIG) and "tags" in r.params]
    assert [o["tags"] for o in options] == [f"vmbench;vmbench-{tag}"] * n
    assert [vmid_of(r) for r in removed if (r.method, r.template) == DELETE] == vmids[::-1]
    assert [r.params for r in removed if (r.method, r.template) == DELETE] == [{"purge": "1", "destroy-unreferenced-disks": "1"}] * n
    middle = seg[len(made):len(seg) - len(removed)]
    assert {vmid_of(r) for r in middle} == set(vmids)  # nothing but the step's VMs
    booting = []
    for vmid in vmids:
        own = [r for r in middle if vmid_of(r) == vmid]
        assert calls(own[:len(BOOT)]) == BOOT  # started, pinged until the agent answered
        assert [c for c in calls(own) if not c[1].startswith(AGENT) or c == PING] == BOOT + APPLIED
        assert any(c[1] == AGENT + "exec" for c in calls(own))  # driven through its agent
        booting.append((fake.requests.index(own[0]), fake.requests.index(own[len(BOOT) - 1])))
    assert max_overlap(booting) <= boot_parallel
    return vmids


def _name(argv: list[str]) -> str:
    return next(a for a in argv if a.startswith("--name=")).split("=", 1)[1]


def disk_option(tag: str, seq: int, limited: bool) -> str:
    return (f"local:0.25,cache=none,aio=native,iothread=1,serial={scratch_serial(tag, seq)}"
            + (",iops_wr=100" if limited else "") + ",format=raw")


def nothing_left(lr: "LoadRun") -> None:
    fake = lr.fake
    assert list(fake.vms) == [9000] and [v.name for v in fake.state.volumes.values()] == ["base-9000-disk-0.qcow2"]
    assert not [t for t in fake.tasks.values() if t.status != "stopped"]
    assert lr.driver.vms == {} and lr.driver.leftovers() == [] and lr.runner.created == []
    assert lr.backend.guests == {} and not lr.backend._running
    assert fake.problems == []


def guest_rows(db: ResultsDB, run_id: int) -> list[dict]:
    return [m for m in db.rows("measurements", run_id) if m["side"] == "guest"]


# ---- the runs -----------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_noisy_neighbour_phases_clone_limit_and_remove_every_vm(version, tmp_path, monkeypatch, db):
    backend = Guests()
    with new_fake(version, backend=backend) as fake:
        lr = LoadRun(fake, backend, tmp_path, monkeypatch, db, NEIGHBOURS_JOBS)
        out = lr.run()
        assert out.status == "ok" and out.invalid_cells == []
        tag = out.tag
        units = make_plan(lr.scenario).load_units()
        assert [(u.step.name, u.seqs) for u in units] == [("alone", (1,)), ("limited", (2, 3, 4))]

        prelude, (alone, limited) = steps(fake)
        assert calls(prelude) == PRELUDE
        assert check_step(fake, alone, 1, tag, (1,), 3) == [100]
        assert check_step(fake, limited, 3, tag, (2, 3, 4), 3) == [100, 101, 102]  # VMIDs freed by step 1 are taken again
        assert backend.concurrent == 3 and len(backend.booted) == 4

        # the limit only in the aggressors' scratch disk (VM 1 and 2 of "limited": seq 3 and 4)
        disks = [p for p in params_of(fake, "POST", VM_CONFIG) if "scsi1" in p]
        assert disks == [{"scsi1": disk_option(tag, seq, limited=seq in (3, 4))} for seq in (1, 2, 3, 4)]
        assert_no_boolean_words(fake)

        # stored per VM: step, role; the aggressors' settings and readback carry the limit
        by_step: dict[int, set] = {}
        for m in guest_rows(db, out.run_id):
            by_step.setdefault(m["load_step"], set()).add((m["vm"], m["role"], m["job"], m["settings"].get("iops_wr")))
        assert by_step == {1: {(0, "victim", "victim", None)},
                           2: {(0, "victim", "victim", None), (1, "aggressor", "heavy", 100), (2, "aggressor", "heavy", 100)}}
        boots = {(b["load_step"], b["vm"]): b for b in db.rows("boots", out.run_id)}
        assert set(boots) == {(1, 0), (2, 0), (2, 1), (2, 2)}
        for (step, vm), b in boots.items():
            want = 100 if (step, vm) in ((2, 1), (2, 2)) else "none"
            eff = b["guest"]["effective"]
            assert (eff["config_iops_wr"], eff["qemu_iops_wr"]) == (want, want), (step, vm)
            assert b["domain_name"] == f"vmbench-{tag}-{[1, 2, 3, 4][(step - 1) + vm]}"
        cmdline = " ".join(boots[(2, 1)]["qemu_cmdline"])
        assert ("throttling.iops-write=100" in cmdline) if version == "8.4" else ('"iops-write":100' in cmdline)
        assert "iops-write" not in " ".join(boots[(2, 0)]["qemu_cmdline"])

        # all three ran at once: every window fully loaded by the others, the skew recorded
        for m in guest_rows(db, out.run_id):
            assert m["load"]["loaded"] is True and m["load"]["excluded"] is None and m["load"]["start_skew_ms"] is not None
        # each VM's fio ran in that VM, with the phase's job (the victim's rate-limited)
        (first, alone_guest), *started = backend.booted
        step2 = dict(started)  # booted in parallel: in any order
        assert first == 100 and sorted(step2) == [100, 101, 102]
        assert [_name(a) for a in alone_guest.fio_runs] == ["victim"] and "--rate_iops=100" in alone_guest.fio_runs[0]
        assert [[_name(a) for a in step2[v].fio_runs] for v in (100, 101, 102)] == [["victim"], ["heavy"], ["heavy"]]
        nothing_left(lr)
        lr.driver.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_scaling_one_then_three_vms(version, tmp_path, monkeypatch, db):
    backend = Guests()
    with new_fake(version, backend=backend) as fake:
        lr = LoadRun(fake, backend, tmp_path, monkeypatch, db, SCALING_JOBS)
        out = lr.run()
        assert out.status == "ok"
        prelude, (one, three) = steps(fake)
        assert calls(prelude) == PRELUDE
        assert check_step(fake, one, 1, out.tag, (1,), 2) == [100]
        assert check_step(fake, three, 3, out.tag, (2, 3, 4), 2) == [100, 101, 102]
        assert all("iops_" not in p["scsi1"] for p in params_of(fake, "POST", VM_CONFIG) if "scsi1" in p)
        rows = guest_rows(db, out.run_id)
        assert sorted((m["load_step"], m["vm"], m["role"]) for m in rows) == [(1, 0, "peer"), (2, 0, "peer"), (2, 1, "peer"), (2, 2, "peer")]
        assert db.measurement_keys(out.run_id) == {st.key() for st in make_plan(lr.scenario).steps()}
        assert {(m["load_step"], m["vm"]) for m in db.rows("measurements", out.run_id) if m["side"] == "host"} == \
            {(1, 0), (2, 0), (2, 1), (2, 2)}  # the host reference: 3 volumes at once for 3 VMs
        assert all(m["load"]["loaded"] is True for m in rows)
        nothing_left(lr)
        lr.driver.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_a_failed_start_in_the_middle_of_a_step_leaves_nothing_and_keeps_the_steps_before(version, tmp_path, monkeypatch, db):
    """The limited phase's second start task fails (three boot at once): the step fails, all
    its VMs are stopped and destroyed, step 1's measurements are kept."""
    backend = Guests()
    failure = "start failed: QEMU exited with code 1"
    with new_fake(version, backend=backend, task_outcomes={"qmstart": [None, None, failure]}) as fake:
        lr = LoadRun(fake, backend, tmp_path, monkeypatch, db, NEIGHBOURS_JOBS)
        with pytest.raises(GuestError, match=f"starting vmbench-r[0-9a-f]{{8}}-[234] \\(VMID 10[012]\\): .*{failure}"):
            lr.run()
        run_id = lr.runner.run_id
        assert db.resolve_run(run_id).status == "failed"
        assert {k.load_step for k in db.measurement_keys(run_id)} == {1}
        deletes = [r for r in fake.requests if (r.method, r.template) == ("DELETE", "/nodes/{node}/qemu/{vmid}")]
        assert all(r.params == {"purge": "1", "destroy-unreferenced-disks": "1"} for r in deletes)
        # step 1's VM and the three of step 2, each deleted once; a VM whose start task was still
        # running when the failed step stopped its boots refuses the first DELETE ("VM is running")
        # and the runner's cleanup deletes it again
        assert len([r for r in deletes if r.status == 200]) == 4, [(r.path, r.status) for r in deletes]  # VMIDs are reused
        assert all(r.status == 200 or "is running" in r.reason for r in deletes), [(r.path, r.status, r.reason) for r in deletes]
        nothing_left(lr)
        lr.driver.close()


@pytest.mark.parametrize("version", VERSIONS)
def test_an_agent_error_in_one_vm_fails_the_step_and_leaves_nothing(version, tmp_path, monkeypatch, db):
    """VM 102's agent errors when the limited phase's aggressor job would start in it."""
    backend = Guests()

    def fio_in_102(vmid: int, cmd: dict) -> bool:
        args = cmd.get("arguments") or {}
        return vmid == 102 and cmd["execute"] == "guest-exec" and "--name=heavy" in args.get("arg", [])

    with new_fake(version, backend=backend) as fake:
        lr = LoadRun(fake, backend, tmp_path, monkeypatch, db, NEIGHBOURS_JOBS)
        backend.agent_fault = fio_in_102
        with pytest.raises(GuestError, match="qga command 'guest-exec' failed - guest agent: injected failure"):
            lr.run()
        run_id = lr.runner.run_id
        assert {k.load_step for k in db.measurement_keys(run_id)} == {1}
        assert [r for r in fake.requests if r.status == 500 and "/agent/exec" in r.path]
        nothing_left(lr)
        lr.driver.close()


def test_twelve_vms_at_once_keep_their_api_connections(tmp_path, monkeypatch, db, caplog):
    """Twelve VMs boot and run fio at once, each thread calling the API: the driver's
    connection pool keeps them all (requests' default of 10 made urllib3 discard and warn)."""
    backend = Guests()
    caplog.set_level(logging.WARNING, logger="urllib3")
    with new_fake("9.1", backend=backend) as fake:
        lr = LoadRun(fake, backend, tmp_path, monkeypatch, db,
                     SCALING_JOBS.replace("{vms: [1, 3], boot_parallel: 2, tail: 2}", "{vms: [12], boot_parallel: 12}"))
        out = lr.run()
        assert out.status == "ok" and backend.concurrent == 12
        (step,) = steps(fake)[1]
        assert check_step(fake, step, 12, out.tag, tuple(range(1, 13)), 12) == list(range(100, 112))
        assert not [r for r in caplog.records if "Connection pool is full" in r.getMessage()]
        nothing_left(lr)
        lr.driver.close()
