"""The runner against a fake hypervisor: preflight creates nothing, a run measures exactly the
plan's steps, every failure and interruption cleans up and names its step, resume runs only
what is missing (on the same host only)."""

import functools
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes import (
    FakeDriver, FakeHost, FakeStorage, fio_run, is_fio_run, is_precondition, without_target_and_output,
)
from tests.unit.conftest import fresh_state
from vmbench.cli.cleanup import find_leftovers, remove_leftovers
from vmbench.cli.main import main
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.errors import CommandError, GuestError, HypervisorError, Interrupted, PreflightError
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.results.key import MeasurementKey
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario

# one baseline and two cache values: three boots; a stack of two layers; two jobs
SCENARIO = """
name: t
storage: {scratch_size: 256M}
vm: {cache: none}
vary: {cache: [writeback, unsafe]}
stacks:
  - {name: s, layers: [partition, ext4]}
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: j2, rw: read, bs: 1M, size: 16M, runtime: 1s, ramp: 0s}
"""

# a qcow2 scratch disk (the host measures a raw reference volume), LUKS (crypto benchmarks),
# a buffered job (caches dropped before it)
LUKS = """
name: l
storage: {scratch_size: 256M}
vm: {cache: none, format: qcow2}
stacks:
  - {name: l, layers: [{luks: {cipher: aes-xts-plain64, key_size: 512}}, xfs]}
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: j2, rw: read, bs: 4k, size: 16M, runtime: 1s, ramp: 0s, direct: false}
"""

# cells a and c share a VM configuration: one boot, the raw disk measured once
SHARED = """
name: c
storage: {scratch_size: 256M}
cells:
  - {name: a, stacks: []}
  - {name: b, cache: writeback, stacks: []}
  - {name: c, stacks: [s]}
stacks:
  - {name: s, layers: [partition]}
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
"""


@dataclass
class Env:
    tmp: Path
    state: StatePaths
    db: ResultsDB

    def runner(self, driver: FakeDriver, text: str = SCENARIO, resume=None) -> Runner:
        return Runner(scenario(text), self.db, RecordingProgress(), driver=driver, state=self.state, resume=resume)

    def run_row(self, run_id: int) -> dict:
        return dict(self.db.conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())


@functools.lru_cache(maxsize=None)
def scenario(text: str):
    return parse_scenario(textwrap.dedent(text), "t.yaml")



@pytest.fixture
def env(tmp_path, monkeypatch, template):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    db = ResultsDB(db_path)
    db.conn.execute("PRAGMA synchronous = OFF")  # every row is a commit: no fsync in tests
    yield Env(tmp_path, state, db)
    db.close()


def keys(env: Env, run_id: int) -> set[MeasurementKey]:
    return env.db.measurement_keys(run_id)


def warnings(runner: Runner) -> list[str]:
    return [m for kind, m in runner.progress.events if kind == "warn"]


def assert_nothing_left(env: Env, runner: Runner, driver: FakeDriver) -> None:
    assert driver.storage.volumes == {} and driver.vms == {} and driver.leftovers() == []
    assert set(driver.storage.deleted) >= set(driver.storage.created)
    assert runner.created == []
    if runner.host_workdir:
        assert runner.host_workdir.startswith(f"{driver.paths.work}/vmbench-{runner.tag}-")
        assert ["rm", "-rf", "--one-file-system", "--", runner.host_workdir] in driver.host.commands
        assert runner.host_workdir not in driver.host.dirs
    assert not (env.state.runs / f"{runner.tag}.json").exists()  # the ledger
    assert driver.closed >= 1


# ---- preflight ---------------------------------------------------------------------------------


@pytest.mark.parametrize("driver, message", [
    (lambda: FakeDriver(host=FakeHost(fio=False)), "fio is not installed on localhost"),
    (lambda: FakeDriver(storage=FakeStorage(free=2 << 30)), "fake pool on localhost has 2.0G free; this scenario needs about 2.5G"),
    (lambda: FakeDriver(fail_at="prepare"), "fake prepare: injected failure"),
], ids=["no-fio", "storage-too-small", "prepare"])
def test_preflight_failure_creates_nothing(env, driver, message):
    driver = driver()
    runner = env.runner(driver)
    with pytest.raises(PreflightError) as exc:
        runner.run()
    assert message in exc.value.message
    assert driver.creates == 0 and driver.boots == 0
    assert driver.storage.volumes == {} and driver.storage.created == []
    assert env.db.runs() == []  # no run row
    assert not driver.host.ran("mktemp") and not driver.host.fio_runs
    assert not env.state.runs.exists() or list(env.state.runs.iterdir()) == []


def test_preflight_refuses_a_missing_image(env, tmp_path, monkeypatch):
    empty = StatePaths(tmp_path / "empty")
    monkeypatch.setenv("VMBENCH_STATE_DIR", str(empty.root))
    driver = FakeDriver()
    runner = Runner(scenario(SCENARIO), env.db, RecordingProgress(), driver=driver, state=empty)
    with pytest.raises(PreflightError, match="template image 'debian12' is not built"):
        runner.run()
    assert driver.creates == 0 and driver.storage.created == [] and env.db.runs() == []


# ---- a normal run ------------------------------------------------------------------------------


def test_run_measures_exactly_the_plan_and_removes_everything(env):
    driver = FakeDriver()
    runner = env.runner(driver)
    outcome = runner.run()
    assert (outcome.status, outcome.error, outcome.invalid_cells, outcome.skipped_steps) == ("ok", None, [], 0)
    steps = runner.plan.steps()
    assert len(steps) == 2 + 3 * 3 * 2  # host, then 3 boots x (raw, partition, partition+ext4) x 2 jobs

    # one boot per distinct VM configuration
    assert driver.boots == driver.creates == driver.removed == runner.boots_started == len(runner.plan.boots) == 3
    boots = env.db.rows("boots", outcome.run_id)
    assert [b["settings"]["cache"] for b in boots] == ["none", "writeback", "unsafe"]
    assert all(b["guest"]["effective"]["guest_write_cache"] == "write back" for b in boots)

    # every step stored once, nothing else
    rows = env.db.rows("measurements", outcome.run_id)
    assert keys(env, outcome.run_id) == {s.key() for s in steps} and len(rows) == len(steps)
    assert all(c["valid"] == 1 and c["problems"] == [] for c in env.db.rows("cells", outcome.run_id))
    assert len(driver.host.fio_runs) == 2 and len(driver.guest_fio_runs) == 18
    assert len(driver.host.preconditions) == 1 and len([c for c in driver.guest_commands if is_precondition(c)]) == 9

    # the guest runs the host's fio command, but for the target and the output file
    host_argv = {next(a for a in argv if a.startswith("--name=")): argv for argv in driver.host.fio_runs}
    for argv in driver.guest_fio_runs:
        host = host_argv[next(a for a in argv if a.startswith("--name="))]
        assert without_target_and_output(argv) == without_target_and_output(host) and argv != host
    scratch = "--filename=" + driver.storage.root
    assert all(any(a.startswith(scratch) for a in argv) for argv in driver.host.fio_runs)  # the scratch volume
    assert {a for argv in driver.guest_fio_runs for a in argv if a.startswith("--filename=")} == {
        "--filename=/dev/vdb", "--filename=/dev/vdb1", "--filename=/mnt/vmbench/vmbench-fio.dat"}
    assert {r["layer"] for r in rows} == {"host", "raw", "partition", "partition+ext4"}
    assert {r["host"] for r in rows} == {"localhost"}  # every row names the host it ran on (a guest's: its VM's host)

    # every command the run issued is one the fakes know (else they answered exit 127)
    assert driver.host.unknown == [] and [c for g in driver.guests for c in g.transport.unknown] == []
    # stacks were torn down: nothing mounted, no partition, no device-mapper device left
    assert all(not g.transport.mounts and not g.transport.partitions and not g.transport.dm for g in driver.guests)
    assert warnings(runner) == []

    assert runner.host_workdir and driver.host.ran("mktemp", "-d", "-p", driver.paths.work)
    assert_nothing_left(env, runner, driver)
    row = env.run_row(outcome.run_id)
    assert (row["status"], row["error"], row["attempts"]) == ("ok", None, 1)
    environment = env.db.resolve_run(outcome.run_id).environment
    assert environment["host_kernel"] == "6.1.0-28-amd64" and environment["accelerator"] == "tcg"
    assert environment["hostname"] == "fakehost" and environment["run_tag"] == runner.tag


def test_cells_sharing_a_vm_share_one_boot_and_its_raw_disk(env):
    driver = FakeDriver()
    runner = env.runner(driver, SHARED)
    outcome = runner.run()
    assert outcome.status == "ok"
    assert driver.boots == len(runner.plan.boots) == 2 and len(runner.scenario.cells) == 3
    assert keys(env, outcome.run_id) == {s.key() for s in runner.plan.steps()}
    assert len(driver.guest_fio_runs) == 3  # a: raw, c: partition (c's raw is a's), b: raw
    c = env.db.cell_by_name(outcome.run_id, "c")
    assert c is not None and c.raw_measured_in == "a"
    assert_nothing_left(env, runner, driver)


def test_qcow2_scratch_host_measures_a_raw_reference_volume_and_luks_has_crypto_ceilings(env):
    driver = FakeDriver()
    runner = env.runner(driver, LUKS)
    outcome = runner.run()
    assert outcome.status == "ok"
    assert [n.rsplit("-", 1)[1] for n in driver.storage.created] == ["root.qcow2", "scratch.qcow2", "hostref.raw"]
    hostref = driver.storage.root + "/" + driver.storage.created[2]
    assert {a for argv in driver.host.fio_runs for a in argv if a.startswith("--filename=")} == {f"--filename={hostref}"}
    assert keys(env, outcome.run_id) == {s.key() for s in runner.plan.steps()}
    guest = driver.guests[0].transport
    formats = guest.ran("cryptsetup", "luksFormat")
    assert len(formats) == 1 and formats[0][-1] == "/dev/vdb"
    key = guest.inputs[guest.commands.index(formats[0])]
    assert key and all(key.hex() not in " ".join(c) for c in guest.commands)
    crypto = env.db.rows("crypto", outcome.run_id)
    assert {r["side"] for r in crypto} == {"guest", "host"} and all(r["encrypt_mib_s"] == 1500.0 for r in crypto)
    # caches dropped before each run of the buffered job, on its side
    drop = ("/proc/sys/vm/drop_caches", b"3\n")
    assert driver.host.writes.count(drop) == 1 and guest.writes.count(drop) == 3
    assert sum(is_fio_run(c, "j2") for c in guest.commands) == 3
    assert_nothing_left(env, runner, driver)


# ---- failures ------------------------------------------------------------------------------------


@dataclass
class Case:
    id: str
    setup: object  # FakeDriver -> None, or FakeDriver kwargs
    step: str  # what the error must name
    done: int  # how many of plan.steps() (in order) are stored
    error: type = Exception
    scenario: str = SCENARIO


def driver_for(case: Case) -> FakeDriver:
    if isinstance(case.setup, dict):
        return FakeDriver(**case.setup)
    driver = FakeDriver()
    case.setup(driver)
    return driver


CASES = [
    Case("create", {"fail_at": "create"}, "creating the disks of VM 1 (vmbench-", 0, HypervisorError),
    Case("create-scratch", lambda d: setattr(d.storage, "fail_on_create", "scratch"), "creating the disks of VM 1", 0, HypervisorError),
    Case("create-vm-2", {"fail_at": "create", "fail_nth": 2}, "creating the disks of VM 2", 8, HypervisorError),
    Case("host-reference", {"fail_at": "reference"}, "creating the disks of VM 1", 0, HypervisorError, LUKS),
    Case("host-fio-j2", lambda d: d.host.fail_on(fio_run("j2")), "measuring the host on /var/lib/vmbench-fake/pool/vmbench-", 1,
         CommandError),
    Case("boot", {"fail_at": "boot"}, "booting VM 1 (vmbench-", 2, GuestError),
    Case("boot-vm-3", {"fail_at": "boot", "fail_nth": 3}, "booting VM 3", 14, GuestError),
    Case("applied", {"fail_at": "applied"}, "reading back the settings of vmbench-", 2, HypervisorError),
    Case("guest-facts", lambda d: d.fail_guest(("lsblk", "--json", "--bytes")), "reading back the settings of vmbench-", 2,
         CommandError),
    Case("raw-disk-fio", lambda d: d.fail_guest(fio_run()), "measuring baseline: raw disk", 2, CommandError),
    Case("raw-disk-job-j2", lambda d: d.fail_guest(fio_run("j2")), "measuring baseline: raw disk", 3, CommandError),
    Case("precondition", lambda d: d.fail_guest(is_precondition, nth=2), "measuring baseline: partition", 4, CommandError),
    Case("layer-partition", lambda d: d.fail_guest(("parted",)), "in cell baseline: building layer partition of stack s", 4, GuestError),
    Case("layer-ext4", lambda d: d.fail_guest(("mkfs.ext4",)), "in cell baseline: building layer ext4 of stack s", 6, GuestError),
    Case("layer-ext4-mount", lambda d: d.fail_guest(("mount",)), "in cell baseline: building layer ext4 of stack s", 6, GuestError),
    Case("partition-job-j1", lambda d: d.fail_guest(fio_run("j1"), nth=2), "measuring baseline: partition", 4, CommandError),
    Case("ext4-job-j2", lambda d: d.fail_guest(fio_run("j2"), nth=3), "measuring baseline: partition+ext4", 7, CommandError),
    Case("vm-2-ext4-job-j1", lambda d: d.fail_guest(fio_run("j1"), nth=6), "measuring cache=writeback: partition+ext4", 12,
         CommandError),
    Case("layer-luks", lambda d: d.fail_guest(("cryptsetup", "luksFormat")), "in cell baseline: building layer luks2 of stack l", 4, GuestError, LUKS),
    Case("layer-luks-open", lambda d: d.fail_guest(("cryptsetup", "open")), "in cell baseline: building layer luks2 of stack l", 4, GuestError, LUKS),
    Case("layer-xfs", lambda d: d.fail_guest(("mkfs.xfs",)), "in cell baseline: building layer xfs of stack l", 6, GuestError, LUKS),
    Case("crypto-benchmark", lambda d: d.fail_guest(("cryptsetup", "benchmark"), error=GuestError),
         "cryptsetup benchmark in vmbench-", 2, GuestError, LUKS),
    Case("remove", {"fail_at": "remove"}, "removing vmbench-", 8, HypervisorError),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_failure_at_each_phase_cleans_up_and_names_the_step(env, case):
    driver = driver_for(case)
    runner = env.runner(driver, case.scenario)
    with pytest.raises(case.error) as exc:
        runner.run()
    assert case.step in str(exc.value)
    run_id = runner.run_id
    row = env.run_row(run_id)
    assert row["status"] == "failed" and case.step in row["error"]
    assert runner.outcome.status == "failed" and runner.outcome.error == row["error"]
    # what finished before the failure is stored, and nothing after it
    assert keys(env, run_id) == {s.key() for s in runner.plan.steps()[: case.done]}
    assert_nothing_left(env, runner, driver)
    # the remove that failed is retried by the cleanup; a stack is torn down after a failure
    assert not [w for w in warnings(runner) if "cleanup" in w or "incomplete" in w]
    assert all(not g.transport.mounts and not g.transport.partitions and not g.transport.dm for g in driver.guests)


def test_failed_cleanup_is_reported_and_keeps_the_ledger(env):
    driver = FakeDriver(fail_at="remove")
    driver.fail_guest(fio_run())  # fails boot 1; then the cleanup's remove fails too
    runner = env.runner(driver)
    with pytest.raises(CommandError):
        runner.run()
    row = env.run_row(runner.run_id)
    assert row["status"] == "failed"
    assert "measuring baseline: raw disk" in row["error"] and "cleanup incomplete" in row["error"]
    assert [w for w in warnings(runner) if w.startswith("cleanup: ")]
    assert (env.state.runs / f"{runner.tag}.json").exists()  # for `vmbench cleanup`
    assert {l.kind for l in driver.leftovers()} == {"domain", "volume"}
    # which finds and removes them
    found, live = find_leftovers(driver, env.state)
    assert live == {} and {l.run_tag for l in found} == {runner.tag} and [l.kind for l in found][0] == "domain"
    assert remove_leftovers(driver, found, env.state) == []
    assert driver.leftovers() == [] and not (env.state.runs / f"{runner.tag}.json").exists()


@pytest.mark.parametrize("where", ["boot", "guest-fio"])
def test_ctrl_c_stops_cleans_up_and_marks_the_run_interrupted(env, where):
    if where == "boot":
        driver = FakeDriver(fail_at="boot", fail_with=KeyboardInterrupt)
        step = "booting VM 1"
    else:
        driver = FakeDriver()
        driver.fail_guest(fio_run(), nth=3, error=KeyboardInterrupt)
        step = "measuring baseline: partition"
    runner = env.runner(driver)
    with pytest.raises(Interrupted) as exc:
        runner.run()
    assert "removed everything" in exc.value.message and f"--resume {runner.run_id}" in exc.value.hint
    row = env.run_row(runner.run_id)
    assert row["status"] == "interrupted" and step in row["error"]
    assert_nothing_left(env, runner, driver)


# ---- resume --------------------------------------------------------------------------------------


def failed_run(env: Env, setup) -> tuple[Runner, int]:
    driver = FakeDriver()
    setup(driver)
    runner = env.runner(driver)
    with pytest.raises(CommandError):
        runner.run()
    return runner, runner.run_id


@pytest.mark.parametrize("side, nth", [("host", 2), ("guest", 1), ("guest", 6), ("guest", 7), ("guest", 9), ("guest", 18)])
def test_resume_runs_exactly_the_missing_steps(env, side, nth, capsys):
    if side == "host":
        first, run_id = failed_run(env, lambda d: d.host.fail_on(fio_run(), nth=nth))
        done = nth - 1
    else:
        first, run_id = failed_run(env, lambda d: d.fail_guest(fio_run(), nth=nth))
        done = 2 + nth - 1
    steps = first.plan.steps()
    before = {r["id"]: r for r in env.db.rows("measurements", run_id)}
    assert keys(env, run_id) == {s.key() for s in steps[:done]}

    driver = FakeDriver()  # the same (fake) host, a new process
    runner = env.runner(driver, resume=env.db.resolve_run(run_id))
    outcome = runner.run()
    missing = steps[done:]
    assert (outcome.status, outcome.run_id, outcome.skipped_steps) == ("ok", run_id, done)
    assert runner.tag != first.tag

    # exactly the missing fio runs, in new VMs for the boots with pending steps only
    assert len(driver.host.fio_runs) == sum(s.side == "host" for s in missing)
    assert len(driver.guest_fio_runs) == sum(s.side == "guest" for s in missing)
    pending_boots = {s.boot for s in missing if s.side == "guest"}
    assert driver.boots == runner.boots_started == len(pending_boots)
    assert driver.creates == len({s.boot for s in missing})  # host steps need boot 1's storage, not its guest

    rows = env.db.rows("measurements", run_id)
    assert keys(env, run_id) == {s.key() for s in steps} and len(rows) == len(steps)
    assert {r["id"]: r for r in rows if r["id"] in before} == before  # earlier rows kept as they were
    assert {MeasurementKey(r["side"], r["cell_id"] and env.db.conn.execute("SELECT name FROM cells WHERE id = ?", (r["cell_id"],)).fetchone()[0],
                           r["stack"], r["layer"], r["job"], r["repeat"]) for r in rows if r["attempt"] == 2} == {s.key() for s in missing}
    assert len({c["name"] for c in env.db.rows("cells", run_id)}) == len(env.db.rows("cells", run_id))  # no duplicate cells
    assert env.db.conn.execute("SELECT attempts FROM runs WHERE id = ?", (run_id,)).fetchone()[0] == 2
    row = env.run_row(run_id)
    assert (row["status"], row["error"]) == ("ok", None)
    attempts = env.db.resolve_run(run_id).environment["attempts"]
    assert attempts == [{"attempt": 2, "run_tag": runner.tag}]
    assert_nothing_left(env, runner, driver)
    # one run, named by both tags: the first attempt's and the resumed one's (which named its VMs)
    assert env.db.resolve_run(run_id).tags == (first.tag, runner.tag)
    header, _ = build_report(load_run(env.db, run_id))
    assert header["run"] == f"{run_id} ({first.tag}, resumed as {runner.tag})"
    assert main(["runs", "--db", str(env.db.path)]) == 0
    out = capsys.readouterr().out
    assert f" {first.tag}, {runner.tag} " in out, out


@pytest.mark.parametrize("driver, differs", [
    (lambda: FakeDriver(host=FakeHost(kernel="6.9.0-1-amd64")), "host_kernel: '6.1.0-28-amd64' then, '6.9.0-1-amd64' now"),
    (lambda: FakeDriver(hostname="otherhost"), "hostname: 'fakehost' then, 'otherhost' now"),
], ids=["kernel", "hostname"])
def test_resume_refused_on_a_different_host(env, driver, differs):
    _, run_id = failed_run(env, lambda d: d.fail_guest(fio_run(), nth=3))
    stored = keys(env, run_id)
    driver = driver()
    runner = env.runner(driver, resume=env.db.resolve_run(run_id))
    with pytest.raises(PreflightError, match="ran on a different host or setup") as exc:
        runner.run()
    assert differs in exc.value.message
    assert driver.creates == 0 and driver.boots == 0 and driver.storage.created == []
    row = env.run_row(run_id)
    assert (row["status"], row["attempts"]) == ("failed", 1) and keys(env, run_id) == stored


TWO_STACKS = """
name: t2
storage: {scratch_size: 256M}
stacks:
  - {name: s1, layers: [partition]}
  - {name: s2, layers: [ext4]}
jobs:
  - {name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
"""


def test_resume_keeps_how_earlier_stacks_were_built(env):
    driver = FakeDriver()
    driver.fail_guest(("mkfs.ext4",))  # s1 built and measured, s2 fails
    first = env.runner(driver, TWO_STACKS)
    with pytest.raises(GuestError):
        first.run()
    assert [l["stack"] for l in env.db.cell_by_name(first.run_id, "baseline").layers] == ["s1"]
    env.runner(FakeDriver(), TWO_STACKS, resume=env.db.resolve_run(first.run_id)).run()
    assert [l["stack"] for l in env.db.cell_by_name(first.run_id, "baseline").layers] == ["s1", "s2"]
