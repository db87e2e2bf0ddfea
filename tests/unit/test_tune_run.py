"""A tune on the fake hypervisor: each round a stored one-factor run through the real
runner, judged (a scripted judge here, the real advice in one test), the kept variation
the next baseline; Ctrl-C leaves nothing behind and --resume finishes the round and goes
on; --show and `vmbench plan` on a tune scenario."""

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes import FakeDriver, IopsScript
from tests.unit.tune_scenarios import tune_yaml
from tests.unit.conftest import fresh_state
from vmbench.advice.model import Advice, Recommendation, Risk
from vmbench.errors import Interrupted, UsageError
from vmbench.paths import StatePaths
from vmbench.progress import RecordingProgress
from vmbench.report.render import Format, render
from vmbench.report.stats import Delta
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import load_scenario
from vmbench.scenario.model import VmConfig
from vmbench.settings import Aio
from vmbench.tune.engine import Tuner, load_tune, tune_runs
from vmbench.tune.report import tune_tables

TUNE = tune_yaml("{boots: 20}")

#: the scripted judge's effect of each variation on the goal (whatever the baseline)
EFFECTS = {"iothread=on": 0.20, "cache=writeback": 0.40, "aio=io_uring": 0.10, "aio=native": 0.03}
RISKY = {"cache=writeback": Risk.CACHE_WRITEBACK}


@dataclass
class Env:
    tmp: Path
    state: StatePaths
    db: ResultsDB

    def scenario(self, text: str = TUNE):
        path = self.tmp / "t.yaml"
        path.write_text(textwrap.dedent(text))
        return load_scenario(path)



@pytest.fixture
def env(tmp_path, monkeypatch, template):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    db = ResultsDB(db_path)
    db.conn.execute("PRAGMA synchronous = OFF")
    yield Env(tmp_path, state, db)
    db.close()


class Rounds:
    """The tuner's run_round: each round (or its resume) through the runner, in a new fake
    hypervisor; ``faults``: FakeDriver arguments for a round's first attempt."""

    def __init__(self, env: Env, faults: dict | None = None, iops: IopsScript | None = None) -> None:
        self.env = env
        self.faults = dict(faults or {})
        self.iops = iops
        self.drivers: list[FakeDriver] = []
        self.runners: list[Runner] = []
        self.interrupt_before: int | None = None

    def __call__(self, scenario, resume) -> int:
        n = scenario.tune.round.number
        if n == self.interrupt_before:
            raise KeyboardInterrupt  # Ctrl-C between two rounds
        driver = FakeDriver(**(self.faults.pop(n, {}) if resume is None else {}), fio_iops=self.iops)
        self.drivers.append(driver)
        runner = Runner(scenario, self.env.db, RecordingProgress(), driver=driver, state=self.env.state, resume=resume)
        self.runners.append(runner)
        return runner.run().run_id


def judge(data, goals, allow, current) -> Advice:
    """The advice, scripted: each variation's effect from EFFECTS, significant above 5%."""
    assert data.plan.mode == "one-factor" and data.plan.tune is not None and data.plan.tune.round >= 1
    goal = goals[0]
    recs, others = [], []
    for cell in data.cells:
        if cell.name == "baseline":
            continue
        pct = EFFECTS.get(cell.name, 0.0)
        improves = pct > 0.05
        risks = (RISKY[cell.name],) if cell.name in RISKY else ()
        delta = Delta(pct, pct - 0.04, pct + 0.04, "faster" if improves else "within noise", None) if improves else \
            Delta(pct, pct - 0.1, pct + 0.1, "within noise", None)
        r = Recommendation(goal, goal.job, cell.name, "baseline", (), 1000.0 * (1 + pct), 1000.0, delta, 3, improves,
                           risks=risks, allowed=set(risks) <= set(allow))
        (recs if improves else others).append(r)
    recs.sort(key=lambda r: (not r.allowed, -(r.delta.value or 0)))
    return Advice(data.run.tag, tuple(goals), tuple(recs), tuple(others), (), ())


def tuner(env: Env, rounds: Rounds, text: str = TUNE, judge=judge) -> Tuner:
    return Tuner(env.scenario(text), env.db, RecordingProgress(), rounds, judge, accel="tcg")


def start(t: Tuner):
    return dict(start=t.scenario.baseline, start_source="the scenario's vm: settings")


def assert_nothing_left(rounds: Rounds) -> None:
    for driver in rounds.drivers:
        assert driver.storage.volumes == {} and driver.vms == {} and driver.leftovers() == [] and driver.closed >= 1


def test_rounds_keep_the_best_safe_improvement_until_nothing_improves(env):
    rounds = Rounds(env)
    t = tuner(env, rounds)
    tune = t.run(**start(t))
    assert [(r.number, r.decision.chosen) for r in tune.rounds] == [(1, "iothread=on"), (2, "aio=io_uring"), (3, None)]
    assert tune.stop == "nothing round 3 tried improved j1:iops significantly"
    assert tune.final == VmConfig(iothread=True, aio=Aio.IO_URING)
    assert tune.changed() == {"iothread": True, "aio": "io_uring"}
    # the risky +40% (cache=writeback) was measured every round and never kept
    assert all(r.decision.held_back and r.decision.held_back[0].cell == "cache=writeback" for r in tune.rounds)

    # each round a stored one-factor run of the tune, booting each configuration once
    rows = tune_runs(env.db, tune.id)
    assert [r.plan_json["tune"]["round"] for r in rows] == [1, 2, 3] and all(r.status == "ok" for r in rows)
    assert [[c["name"] for c in r.plan_json["cells"]] for r in rows] == [
        ["baseline", "bus=virtio-scsi", "cache=writeback", "iothread=on", "aio=io_uring", "bus=sata", "aio=native"],
        ["baseline", "bus=virtio-scsi", "cache=writeback", "aio=io_uring", "aio=native"],
        ["baseline", "bus=virtio-scsi", "cache=writeback"]]
    assert [d.boots for d in rounds.drivers] == [r.boots for r in tune.rounds] == [7, 5, 3]
    assert rows[1].plan_json["tune"]["decided"] == [{"round": 1, "run": rows[0].tag, "cell": "iothread=on", "axis": "iothread",
                                                "value": True}]
    assert rows[2].plan_json["tune"]["baseline"]["aio"] == "io_uring" and rows[2].plan_json["tune"]["start"]["aio"] == "threads"
    assert rows[1].plan_json["advise"] == {"goals": ["j1:iops"], "allow": []}
    assert all(len(env.db.rows("measurements", r.id)) == 3 * (1 + len(r.plan_json["boots"])) for r in rows)  # host + each boot
    assert_nothing_left(rounds)


def test_an_allowed_risk_is_kept(env):
    rounds = Rounds(env)
    t = tuner(env, rounds, TUNE.replace("budget:", "allow: [cache-writeback]\n  budget:"))
    tune = t.run(**start(t))
    assert tune.rounds[0].decision.chosen == "cache=writeback"
    # aio=native is impossible with writeback: left out from round 2 on
    assert [v.name for v in tune.rounds[1].variations] == ["bus=virtio-scsi", "iothread=on", "aio=io_uring", "bus=sata"]


def test_a_boots_budget_trims_a_round_and_stops_the_tune(env, monkeypatch):
    monkeypatch.setitem(EFFECTS, "bus=virtio-scsi", 0.08)
    rounds = Rounds(env)
    t = tuner(env, rounds, TUNE.replace("budget: {boots: 20}", "budget: {boots: 10}"))
    tune = t.run(**start(t))
    assert [r.boots for r in tune.rounds] == [7, 3]  # round 2 trimmed to 2 variations
    assert [v.name for v in tune.rounds[1].variations] == ["bus=virtio-scsi", "cache=writeback"]
    assert [r.decision.chosen for r in tune.rounds] == ["iothread=on", "bus=virtio-scsi"]
    assert tune.stop.startswith("the budget is spent: round 3 needs at least 2 boots and ")
    assert tune.stop.endswith("(estimated); 0 of 10 boots left")
    assert sum(d.boots for d in rounds.drivers) == 10


def test_a_time_budget_stops_the_tune(env):
    from vmbench.tune.search import next_round

    probe = tuner(env, Rounds(env))
    s = probe.scenario
    first = next_round(s.tune, s.baseline, [], s.hypervisor, s.storage, probe.cost)
    budget = first.seconds + 10  # round 1 fits; 10 s more pays for no round
    rounds = Rounds(env)
    t = tuner(env, rounds, TUNE.replace("budget: {boots: 20}", f"budget: {{time: {budget}}}"))
    tune = t.run(**start(t))
    assert [(r.decision.chosen, r.seconds) for r in tune.rounds] == [("iothread=on", round(first.seconds, 1))]
    assert tune.stop.startswith("the budget is spent: round 2 needs at least 2 boots and ") and tune.stop.endswith(" left")


def test_ctrl_c_in_a_round_leaves_nothing_and_resume_finishes_it_and_goes_on(env):
    rounds = Rounds(env, faults={2: dict(fail_at="boot", fail_nth=2, fail_with=KeyboardInterrupt)})
    t = tuner(env, rounds)
    with pytest.raises(Interrupted) as exc:
        t.run(**start(t))
    assert_nothing_left(rounds)
    rows = tune_runs(env.db, rows_id := env.db.runs()[0].plan_json["tune"]["id"])
    assert [(r.plan_json["tune"]["round"], r.status) for r in rows] == [(1, "ok"), (2, "interrupted")]
    assert f"vmbench tune {env.tmp / 't.yaml'} --resume {rows_id}" in exc.value.hint
    interrupted = rows[1].id
    stored = env.db.measurement_keys(interrupted)

    again = Rounds(env)
    tune = Tuner(t.scenario, env.db, RecordingProgress(), again, judge, accel="tcg").resume(rows_id, rows, alive=lambda r: False)
    assert tune.id == rows_id
    assert [(r.number, r.decision.chosen) for r in tune.rounds] == [(1, "iothread=on"), (2, "aio=io_uring"), (3, None)]
    assert tune.rounds[1].run_id == interrupted and env.db.resolve_run(interrupted).attempts == 2
    assert stored < env.db.measurement_keys(interrupted)  # kept, and completed
    assert again.runners[0].outcome.skipped_steps == len(stored)
    assert again.drivers[0].boots == 5 - 1  # the round's first VM was measured before Ctrl-C
    assert_nothing_left(again)


def test_ctrl_c_between_rounds_resumes_with_the_next_round(env):
    rounds = Rounds(env)
    rounds.interrupt_before = 2
    t = tuner(env, rounds)
    with pytest.raises(KeyboardInterrupt):
        t.run(**start(t))
    tune_id = env.db.runs()[0].plan_json["tune"]["id"]
    rows = tune_runs(env.db, tune_id)
    assert len(rows) == 1
    tune = Tuner(t.scenario, env.db, RecordingProgress(), Rounds(env), judge, accel="tcg").resume(tune_id, rows, alive=lambda r: False)
    assert [r.decision.chosen for r in tune.rounds] == ["iothread=on", "aio=io_uring", None]
    assert [r.run_id for r in tune.rounds][0] == rows[0].id


def test_resume_refuses_a_round_still_running(env):
    rounds = Rounds(env, faults={1: dict(fail_at="boot", fail_with=KeyboardInterrupt)})
    t = tuner(env, rounds)
    with pytest.raises(Interrupted):
        t.run(**start(t))
    tune_id = env.db.runs()[0].plan_json["tune"]["id"]
    env.db.conn.execute("UPDATE runs SET status = 'running'")
    rows = tune_runs(env.db, tune_id)
    with pytest.raises(UsageError, match="round 1 of tune .* is still running"):
        t.resume(tune_id, rows, alive=lambda r: True)


def test_show_rebuilds_the_tune_from_the_stored_rounds_and_renders_it(env):
    rounds = Rounds(env)
    t = tuner(env, rounds)
    ran = t.run(**start(t))
    shown = load_tune(env.db, ran.id, judge)
    assert [(r.number, r.run_id, r.decision.chosen, r.boots) for r in shown.rounds] == \
        [(r.number, r.run_id, r.decision.chosen, r.boots) for r in ran.rounds]
    assert shown.final == ran.final and shown.start == ran.start and shown.stop == ran.stop
    head, tables = tune_tables(shown)
    assert head["tune"].startswith(ran.id) and head["stopped"] == ran.stop and head["budget"].startswith("20 boots; spent 15 boots")
    journey = tables[0]
    assert [r["kept"] for r in journey.records] == ["iothread=on", "aio=io_uring", "nothing (best: bus=virtio-scsi)"]
    assert journey.records[0]["before"] == 1000.0 and journey.records[0]["after"] == 1200.0
    text = render(tables, Format.TABLE, head, wide=True)
    assert "+20.0% [+16.0, +24.0] faster" in text
    assert "round 1: cache=writeback improved j1:iops (+40.0% [+36.0, +44.0] faster) but was not taken" in text
    settings = {r["setting"]: (r["start"], r["final"], r["changed"]) for r in tables[1].records}
    assert settings["iothread"] == (False, True, "changed") and settings["aio"] == ("threads", "io_uring", "changed")
    assert settings["bus"] == ("virtio-blk", "virtio-blk", "")
    with pytest.raises(UsageError, match="no tune 'tnope'"):
        load_tune(env.db, "tnope", judge)


def test_a_tune_judged_by_the_real_advice(env):
    """The fake's fio reports scripted IOPS per boot (3 repeats each, boots in plan order):
    round 1's iothread=on is clearly faster, round 2 finds nothing.  A write job: the fake's
    devices read almost nothing, which flags every read as served from cache, and a flagged
    change is never kept."""
    from vmbench.advice.rank import advise

    slow, fast = [1000.0, 1010.0, 990.0], [1500.0, 1510.0, 1490.0]
    # round 1: baseline, bus=virtio-scsi, cache=writeback (faster but risky), iothread=on, aio=io_uring, bus=sata, aio=native
    r1 = slow + slow + fast + fast + slow + slow + slow
    r2 = fast * 5  # round 2: the new baseline and its 4 variations, all alike
    rounds = Rounds(env, iops=IopsScript({"j1": r1 + r2}))
    t = tuner(env, rounds, tune_yaml("{boots: 20}", rw="randwrite"), judge=advise)
    tune = t.run(**start(t))
    assert [r.decision.chosen for r in tune.rounds] == ["iothread=on", None]
    top = tune.rounds[0].decision.top
    assert top.delta.verdict == "faster" and top.repeats == 3 and round(top.value) == 1500
    assert [h.cell for h in tune.rounds[0].decision.held_back] == ["cache=writeback"]
    assert tune.changed() == {"iothread": True}


# ---- the command line ----------------------------------------------------------------------------


@pytest.fixture
def fake_cli(env, monkeypatch):
    """`vmbench tune` with the runner on the fake hypervisor and the scripted judge."""
    import importlib

    cli_tune = importlib.import_module("vmbench.cli.tune")

    drivers: list[FakeDriver] = []

    class FakeRunner(Runner):
        def __init__(self, scenario, db, progress, *, resume=None, **kw):
            drivers.append(FakeDriver())
            super().__init__(scenario, db, progress, driver=drivers[-1], state=env.state, resume=resume)

    monkeypatch.setattr(cli_tune, "Runner", FakeRunner)
    monkeypatch.setattr(cli_tune, "_judge", lambda: judge)
    monkeypatch.setattr(cli_tune, "cached_accelerator", lambda scenario: "tcg")
    monkeypatch.setattr(cli_tune, "log_to_file", lambda path: None)
    return drivers


def test_vmbench_tune_runs_and_prints_the_journey_then_show_prints_it_again(env, fake_cli, capsys):
    from vmbench.cli.main import main

    env.scenario()
    db = str(env.tmp / "results.db")
    assert main(["tune", str(env.tmp / "t.yaml"), "--db", db, "-q"]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "Tuning journey: j1:iops" in out and "Final settings against the start" in out
    assert "Applying the final settings" in out and "virsh" in out or "<disk" in out
    tune_id = ResultsDB(db).runs()[0].plan_json["tune"]["id"]
    assert main(["tune", "--show", tune_id, "--db", db, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["tune"].startswith(tune_id)
    assert [t["name"] for t in doc["tables"]] == ["tune-journey", "tune-settings", "tune-apply"]
    assert [r["kept"] for r in doc["tables"][0]["records"]][:2] == ["iothread=on", "aio=io_uring"]
    assert doc["tables"][2]["records"]  # the snippets that apply iothread and aio
    assert main(["tune", "--resume", tune_id, "--db", db, "-q"]) == 0  # finished: it only says why it stopped
    assert "nothing round 3 tried improved j1:iops significantly" in capsys.readouterr().out
    assert main(["tune", "--db", db]) == 2 and "needs a tune scenario" in capsys.readouterr().err
    (env.tmp / "plain.yaml").write_text(textwrap.dedent(TUNE).split("tune:")[0])
    assert main(["tune", str(env.tmp / "plain.yaml"), "--db", db]) == 2 and "has no tune: section" in capsys.readouterr().err


def test_vmbench_plan_shows_the_start_axes_round_one_and_the_budget(env, capsys):
    from vmbench.cli.main import main

    env.scenario(TUNE.replace("budget: {boots: 20}", "budget: {boots: 11, time: 1h}"))
    assert main(["plan", str(env.tmp / "t.yaml"), "--accel", "tcg"]) == 0
    out = capsys.readouterr().out
    assert "tune:     goal j1:iops (higher is better); allowed risks: none" in out
    assert "start:    the scenario's vm: settings: bus=virtio-blk, cache=none, iothread=off, aio=threads" in out
    assert "budget:   11 boots, 1h00m (estimated)" in out
    assert "bus       virtio-scsi, sata" in out and "aio       io_uring, native" in out
    for n, cell in enumerate(["baseline", "bus=virtio-scsi", "cache=writeback", "iothread=on", "aio=io_uring", "bus=sata", "aio=native"]):
        assert f"{n + 1:>6}  {cell}" in out
    assert "round 1: boots 7, estimated" in out and "at most: 3 round(s), 11 boots" in out and "estimated duration:" in out
    assert main(["plan", str(env.tmp / "t.yaml"), "--accel", "tcg", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tune"]["round1"]["cells"][0] == "bus=virtio-scsi" and doc["tune"]["most"]["rounds"] == 3
    assert [c["name"] for c in doc["cells"]][:2] == ["baseline", "bus=virtio-scsi"]


def test_a_tune_from_a_users_vm_starts_from_its_settings_read_once(env, fake_cli, monkeypatch, capsys):
    import importlib

    from vmbench.drivers.existing import CurrentVm
    from vmbench.scenario.model import VmConfig as Vm
    from vmbench.settings import Bus

    current_mod = importlib.import_module("vmbench.cli.tune")
    reads = []
    read = CurrentVm(source="libvirt domain web1 (qemu:///system)", vm=Vm(bus=Bus.VIRTIO_SCSI, vcpus=8, memory_mib=8192),
                     disk="sda", disk_spec="<disk type='file' device='disk'><target dev='sda' bus='scsi'/></disk>",
                     kind="libvirt", ident="web1", unknown=("discard_granularity",))

    def read_current(scenario, ident, disk=None):
        reads.append((ident, disk))
        return read

    monkeypatch.setattr(current_mod, "read_current", read_current)
    env.scenario(TUNE.replace("budget:", "from: {domain: web1, disk: sda}\n  budget:"))
    db = str(env.tmp / "results.db")
    assert main_(["tune", str(env.tmp / "t.yaml"), "--db", db]) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    assert "start: libvirt domain web1 (qemu:///system) (read only), disk sda: bus=virtio-scsi" in err
    assert "not a vmbench axis, not part of the tune: discard_granularity" in err
    assert reads == [("web1", "sda")]
    rows = ResultsDB(db).runs()
    first = rows[0].plan_json["tune"]
    assert first["start_source"] == "libvirt domain web1 (qemu:///system)" and first["current"]["ident"] == "web1"
    assert first["start"]["bus"] == "virtio-scsi" and first["start"]["vcpus"] == 2  # its disk, not its size
    assert "bus=virtio-scsi" not in [c["name"] for c in first["cells"]]  # the start's own bus
    assert main_(["tune", "--show", "latest", "--db", db]) == 0
    assert reads == [("web1", "sda")]  # never read again


def main_(argv):
    from vmbench.cli.main import main

    return main(argv)


def test_vmbench_run_refuses_a_tune_scenario_before_anything(tmp_path, capsys):
    from vmbench.cli.main import main

    scenario = Path(__file__).resolve().parents[2] / "scenarios" / "tune.yaml"
    db = tmp_path / "r.db"
    assert main(["run", str(scenario), "--db", str(db)]) == UsageError.exit_code
    err = capsys.readouterr().err
    assert "is a tune (it has a tune: section)" in err and "vmbench tune" in err
    assert not db.exists()


def test_a_tune_report_opens_with_what_it_changed(env):
    """Issue 26: the tune's report opens with its answer, its figures those of the journey."""
    from vmbench.report.summary import summary_lines

    rounds = Rounds(env)
    t = tuner(env, rounds)
    head, tables = tune_tables(t.run(**start(t)))
    lines = summary_lines(head, tables)
    assert len(lines) == 1 and lines[0].startswith(
        "The tune changed iothread off -> on, aio threads -> io_uring: round 1 kept iothread=on (+20.0% [+16.0, +24.0] faster); "
        "round 2 kept aio=io_uring (")
    body = render(tables, Format.TABLE, head, wide=True)
    assert "+20.0% [+16.0, +24.0] faster" in body
    assert render(tables, Format.TABLE, head, lines).startswith("Summary\n=======\nThe tune changed iothread off -> on")
