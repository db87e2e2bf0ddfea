"""Running a tune: each round a normal stored run, judged by the advice, until the search stops.

Nothing here creates anything on a host: each round runs through ``run_round`` (the CLI's
is the :class:`~vmbench.run.runner.Runner`, which cleans up after itself on success,
failure and Ctrl-C), and is judged by ``judge`` (:func:`vmbench.advice.rank.advise` on the
stored run).  A tune's state is its stored rounds: each round's plan carries ``plan["tune"]``
(:meth:`~vmbench.scenario.tune.TuneSpec.plan_json`), so :func:`load_tune` rebuilds it (the
decisions recomputed from the stored results) and :func:`resume_tune` finishes an
interrupted round with the runner's resume, then goes on.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from ..advice.model import Advice, Goal, Risk
from ..drivers.existing import CurrentVm
from ..errors import UsageError, VmbenchError
from ..progress import Progress
from ..report.load import RunData, load_run
from ..results.plan import TuneRecord, read_plan
from ..results.db import ResultsDB, RunRow
from ..run.plan import estimate, make_plan
from ..scenario.loader import parse_scenario
from ..scenario.model import VmConfig
from ..scenario.spec import Scenario
from ..scenario.tune import Candidate, Decided, TuneBudget, TuneRound, TuneSpec, round_text, vary, vm_from_yaml
from .search import Cost, Decision, Round, RoundPlan, Stop, Variation, decide, next_round, round_scenario
from ..scenario.axes import settings_of, vm_key

#: runs one round's scenario (a new run, or the resume of the stored one given) and returns its run id
RunRound = Callable[[Scenario, "RunRow | None"], int]
#: the advice on one stored run, for goals, allowed risks and the VM read with from: (the
#: signature of :func:`vmbench.advice.rank.advise`)
Judge = Callable[[RunData, Sequence[Goal], frozenset[Risk], CurrentVm | None], Advice]
LoadRun = Callable[[ResultsDB, int], RunData]


def new_tune_id() -> str:
    return "t" + secrets.token_hex(4)


@dataclass(frozen=True)
class Tune:
    """A tune as stored and decided: its rounds, in order, and why it stopped (None: it can go on)."""

    id: str
    name: str
    path: str
    goal: Goal
    allow: frozenset[Risk]
    budget: TuneBudget
    start: VmConfig
    start_source: str
    rounds: tuple[Round, ...]
    stop: str | None = None
    current: Mapping[str, Any] = field(default_factory=dict)  # the VM read with from: (CurrentVm's fields but vm)
    left_out: tuple[tuple[str, str], ...] = ()  # of the last round: (variation, why)
    notes: tuple[str, ...] = ()

    @property
    def final(self) -> VmConfig:
        return self.rounds[-1].after if self.rounds and self.rounds[-1].decision else \
            self.rounds[-1].baseline if self.rounds else self.start

    def changed(self) -> dict[str, object]:
        """The final settings that differ from the start (stored keys and values)."""
        start, final = settings_of(self.start), settings_of(self.final)
        return {k: v for k, v in final.items() if start.get(k) != v}


def current_json(current: CurrentVm | None) -> dict[str, Any]:
    """What a round records of the VM read with ``from:`` (its settings are the tune's start)."""
    if current is None:
        return {}
    return {"source": current.source, "disk": current.disk, "disk_spec": current.disk_spec, "kind": current.kind,
            "ident": current.ident, "unknown": list(current.unknown), "storage": dict(current.storage),
            "extra": dict(current.extra)}


def current_vm(data: Mapping[str, Any], start: VmConfig) -> CurrentVm | None:
    """:func:`current_json` back to the CurrentVm (its VM is the tune's start)."""
    if not data:
        return None
    return CurrentVm(source=str(data.get("source", "")), vm=start, disk=str(data.get("disk", "")),
                     disk_spec=str(data.get("disk_spec", "")), kind=str(data.get("kind", "")), ident=str(data.get("ident", "")),
                     unknown=tuple(data.get("unknown") or ()), storage=dict(data.get("storage") or {}),
                     extra=dict(data.get("extra") or {}))


def make_cost(scenario: Scenario, accel: str) -> Cost:
    """A round's cost in the plan's estimated seconds (what ``vmbench plan`` shows)."""
    return lambda baseline, variations: estimate(make_plan(round_scenario(scenario, baseline, variations)), accel).total


# ---- running ------------------------------------------------------------------------------------


@dataclass
class Tuner:
    """Runs the rounds of one tune of ``scenario`` (a tune scenario, or a round's stored one)."""

    scenario: Scenario
    db: ResultsDB
    progress: Progress
    run_round: RunRound
    judge: Judge
    accel: str = "tcg"
    load: LoadRun | None = None
    spec: TuneSpec = field(init=False)
    cost: Cost = field(init=False)
    current: CurrentVm | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.scenario.tune is None:
            raise UsageError(f"{self.scenario.path} is not a tune scenario", "add a tune: section (see scenarios/tune.yaml)")
        if self.load is None:
            self.load = load_run
        self.spec = self.scenario.tune
        self.cost = make_cost(self.scenario, self.accel)

    def run(self, *, start: VmConfig, start_source: str, current: Mapping[str, Any] | None = None, tune_id: str | None = None,
            history: Sequence[Round] = ()) -> Tune:
        """Rounds until the search stops; ``history``: the rounds already run (a resume)."""
        s, spec = self.scenario, self.spec
        tune_id = tune_id or new_tune_id()
        self.current = current_vm(current or {}, start)
        rounds = list(history)
        while True:
            plan = next_round(spec, start, rounds, s.hypervisor, s.storage, self.cost)
            if isinstance(plan, Stop):
                self.progress.step(f"tune {tune_id}: stopped: {plan.reason}")
                return self._tune(tune_id, start, start_source, current or {}, rounds, plan.reason, ())
            rnd = TuneRound(tune_id, plan.number, start, start_source, tuple(v.candidate for v in plan.variations),
                            tuple(_decided(r) for r in rounds), dict(current or {}), plan.boots, plan.seconds)
            text = round_text(s.text, s.path, baseline=plan.baseline, rnd=rnd)
            scenario = parse_scenario(text, s.path, base_dir=Path(s.path).parent)
            self.progress.step(f"tune {tune_id} round {plan.number}: {len(plan.variations)} variation(s) of the baseline "
                               f"({', '.join(v.name for v in plan.variations)}); {plan.boots} boots"
                               + (f"; left out: {', '.join(n for n, _ in plan.left_out)}" if plan.left_out else ""))
            run_id = self._run(scenario, None, tune_id)
            row = self.db.resolve_run(run_id)
            done = self.decide(_round(row, plan), row)
            rounds.append(done)
            self.progress.step(f"tune {tune_id} round {plan.number} (run {row.tag}): "
                               + (f"kept {done.decision.chosen}: " if done.decision and done.decision.chosen else "")
                               + (done.decision.why if done.decision else ""))

    def _run(self, scenario: Scenario, resume: RunRow | None, tune_id: str) -> int:
        try:
            return self.run_round(scenario, resume)
        except VmbenchError as exc:
            exc.hint = (f"`vmbench tune {self.scenario.path} --resume {tune_id}` finishes this round and goes on"
                        + (f" ({exc.hint})" if exc.hint and "--resume" not in exc.hint else ""))
            raise

    def decide(self, rnd: Round, row: RunRow) -> Round:
        assert self.load is not None
        advice = self.judge(self.load(self.db, row.id), (self.spec.goal,), self.spec.allow, self.current)
        return replace(rnd, decision=decide(advice, self.spec.goal, rnd.variations), status=row.status)

    def _tune(self, tune_id: str, start: VmConfig, start_source: str, current: Mapping[str, Any], rounds: Sequence[Round],
              stop: str | None, left_out: tuple[tuple[str, str], ...]) -> Tune:
        spec = self.spec
        notes = tuple(n for r in rounds for n in r.notes)
        return Tune(tune_id, self.scenario.name, self.scenario.path, spec.goal, spec.allow, spec.budget, start, start_source,
                    tuple(rounds), stop, current, left_out, notes)

    def resume(self, tune_id: str, rows: Sequence[RunRow], alive: Callable[[RunRow], bool]) -> Tune:
        """Finish the tune's last round if it was interrupted or failed (the runner's resume:
        what is stored is kept), then go on."""
        last = rows[-1]
        if last.status == "running" and alive(last):
            raise UsageError(f"round {_number(last)} of tune {tune_id} (run {last.id}) is still running",
                             "wait for it, or stop it first")
        if last.status != "ok":
            self.progress.step(f"tune {tune_id}: resuming round {_number(last)} (run {last.id}, {last.status})")
            scenario = parse_scenario(last.scenario_text, last.scenario_path,
                                      base_dir=Path(last.scenario_path).parent)
            self._run(scenario, last, tune_id)
            rows = [*rows[:-1], self.db.resolve_run(last.id)]
        t = tune_of(rows[0])
        start = vm_from_yaml(t.start_vm, "the tune's start")
        self.current = current_vm(t.current, start)
        rounds = rebuild(rows, self.decide)
        return self.run(start=start, start_source=t.start_source, current=t.current, tune_id=tune_id,
                        history=rounds)


def tune_of(row: RunRow) -> TuneRecord:
    """The tune round a stored run is (refused when it is not one)."""
    t = read_plan(row.plan_json).tune
    if t is None:
        raise UsageError(f"run {row.id} is not a round of a tune", "`vmbench tune --show` lists the tunes stored")
    return t


def _number(row: RunRow) -> int:
    return tune_of(row).round


def _decided(r: Round) -> Decided:
    kept = r.kept
    return Decided(r.number, r.run, kept.name if kept else None, kept.axis if kept else None,
                   kept.candidate.raw if kept else None)


def _round(row: RunRow, plan: RoundPlan | None = None) -> Round:
    """A stored round, undecided (from its plan["tune"])."""
    t = tune_of(row)
    if plan is not None:
        baseline, variations = plan.baseline, plan.variations
    else:
        baseline = vm_from_yaml(t.baseline_vm, f"run {row.id}")
        variations = tuple(Variation(Candidate(c.axis, c.value, c.name.split("=", 1)[1]), vary(baseline, c.axis, c.value))
                           for c in t.cells)
    return Round(t.round, row.id, row.tag, row.status, baseline, tuple(variations), t.boots, t.estimate_seconds)


# ---- the stored state --------------------------------------------------------------------------


def tune_runs(db: ResultsDB, tune_id: str) -> list[RunRow]:
    """The runs of one tune, round by round (an unknown id is refused, naming the tunes stored)."""
    tunes = [(r, t) for r in db.runs() for t in [read_plan(r.plan_json).tune] if t is not None]
    rows = [r for r, t in tunes if t.id == tune_id]
    if not rows:
        known = sorted({t.id for _, t in tunes})
        raise UsageError(f"no tune {tune_id!r} in {db.path}",
                         f"tunes stored: {', '.join(known)}" if known else "`vmbench tune SCENARIO` starts one")
    return sorted(rows, key=_number)


def latest_tune(db: ResultsDB, scenario_path: str | None = None) -> str:
    """The tune of the newest round (of ``scenario_path``, when given)."""
    want = Path(scenario_path).resolve() if scenario_path else None
    for r in reversed(db.runs()):
        t = read_plan(r.plan_json).tune
        if t is not None and (want is None or Path(r.scenario_path).resolve() == want):
            return t.id
    raise UsageError(f"no tune{' of ' + scenario_path if scenario_path else ''} in {db.path}",
                     "`vmbench tune SCENARIO` starts one")


def rebuild(rows: Sequence[RunRow], decide_round: Callable[[Round, RunRow], Round]) -> list[Round]:
    """The rounds of stored runs, each finished one decided again from its stored results.  A
    round followed by another kept what that one started from: where the judge now decides
    otherwise (a newer vmbench), the stored journey is followed and the difference noted."""
    rounds = []
    for i, row in enumerate(rows):
        rnd = _round(row)
        if row.status == "ok":
            rnd = decide_round(rnd, row)
        if i + 1 < len(rows):
            nxt = vm_key(_round(rows[i + 1]).baseline)
            kept = next((v for v in rnd.variations if vm_key(v.vm) == nxt), None)
            if kept is not None and (rnd.decision is None or rnd.decision.chosen != kept.name):
                old = rnd.decision.chosen if rnd.decision else None
                note = (f"round {rnd.number}: the next round started from {kept.name}, which this judge "
                        f"{'does not keep (it keeps ' + old + ')' if old else 'does not find significant'}; "
                        "the journey follows the stored rounds")
                top = None
                if rnd.decision is not None:
                    top = rnd.decision.top if rnd.decision.top and rnd.decision.top.cell == kept.name else None
                decision = Decision(kept.name, top, top, rnd.decision.held_back if rnd.decision else (), note)
                rnd = replace(rnd, decision=decision, notes=rnd.notes + (note,))
        rounds.append(rnd)
    return rounds


def load_tune(db: ResultsDB, tune_id: str, judge: Judge, load: LoadRun | None = None, accel: str = "tcg") -> Tune:
    """A stored tune for ``vmbench tune --show``: its rounds decided from the stored results,
    and why it stopped (the search asked again), or that it can go on."""
    if load is None:
        load = load_run
    rows = tune_runs(db, tune_id)
    first = tune_of(rows[0])
    goal = Goal.parse(first.goal, "tune.goal")
    allow = frozenset(Risk.parse(a) for a in first.allow)
    start = vm_from_yaml(first.start_vm, "the tune's start")
    current = current_vm(first.current, start)

    def decide_round(rnd: Round, row: RunRow) -> Round:
        assert load is not None
        return replace(rnd, decision=decide(judge(load(db, row.id), (goal,), allow, current), goal, rnd.variations))

    rounds = rebuild(rows, decide_round)
    stop = _stop_reason(db, rows[-1], rounds, start, accel)
    return Tune(tune_id, rows[0].scenario_name, rows[0].scenario_path, goal, allow,
                TuneBudget(first.budget_boots, first.budget_seconds), start,
                first.start_source, tuple(rounds), stop, dict(first.current),
                notes=tuple(n for r in rounds for n in r.notes))


def _stop_reason(db: ResultsDB, last: RunRow, rounds: Sequence[Round], start: VmConfig, accel: str) -> str | None:
    """Why a stored tune stopped (None: it did not, and ``--resume`` goes on)."""
    if rounds[-1].decision is None:
        return None
    try:
        scenario = parse_scenario(last.scenario_text, last.scenario_path, base_dir=Path(last.scenario_path).parent)
    except VmbenchError:  # e.g. a job file no longer there: the search cannot be asked again
        return None if rounds[-1].decision.chosen else \
            f"nothing round {rounds[-1].number} tried improved the goal significantly"
    assert scenario.tune is not None
    nxt = next_round(scenario.tune, start, rounds, scenario.hypervisor, scenario.storage, make_cost(scenario, accel))
    return nxt.reason if isinstance(nxt, Stop) else None
