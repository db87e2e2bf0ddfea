"""A stored run's plan -> frozen dataclasses: the one reader of the plan JSON.

:meth:`vmbench.run.plan.Plan.summary` writes the plan (with the run's targets) when a run
starts; every later reader (the report, the advice, ``compare``, ``tune --resume/--show``)
takes it from :func:`read_plan`, which reads every version stored so far: plans from before
jobs named their metric, before adaptive repeats (``repeat_policy``), before ``load:``,
``advise:`` and ``tune:`` sections, and before the plan named the host of each boot.  The
run's kind (:class:`~vmbench.results.kind.RunKind`) is decided here, once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping

import yaml

from ..fio.job import Metric
from ..scenario.model import RepeatPolicy, Target
from .kind import RunKind


@dataclass(frozen=True)
class PlannedLuks:
    cipher: str
    key_bits: int
    perf_flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedStack:
    name: str
    layers: tuple[str, ...]
    luks: PlannedLuks | None = None


@dataclass(frozen=True)
class PlannedJob:
    name: str
    describe: str = ""
    metric: Metric | None = None  # None: a plan stored before jobs named one (read as IOPS)
    #: a sweep's point: the job it was made from, the setting swept and this point's value
    sweep_of: str | None = None
    sweep_key: str | None = None
    sweep_value: int | None = None


@dataclass(frozen=True)
class PlannedCell:
    name: str
    host_cell: str | None  # the cell its host reference is stored under
    settings: Mapping[str, Any]
    stacks: tuple[str, ...] = ()


@dataclass(frozen=True)
class PlannedBoot:
    """Where one VM of the plan runs: its boot, its host ("": the run's one host, as every
    plan before hosts were named) and its cells."""

    seq: int
    host: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class PlannedMember:
    """One VM of a load step: its number, its role ("peer", "victim", "aggressor") and the VM
    settings its phase changed (as the scenario's overrides describe them)."""

    vm: int
    role: str | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class LoadStepPlan:
    index: int
    name: str
    vms: tuple[PlannedMember, ...]

    @property
    def size(self) -> int:
        return len(self.vms)

    def count(self, role: str) -> int:
        return sum(1 for v in self.vms if v.role == role)

    def members(self, role: str) -> list[PlannedMember]:
        return [v for v in self.vms if v.role == role]

    def overrides(self, vm: int) -> dict:
        return next((dict(v.overrides) for v in self.vms if v.vm == vm), {})


@dataclass(frozen=True)
class LoadPlan:
    """``plan["load"]`` as stored (:meth:`vmbench.scenario.load.LoadSpec.to_json`)."""

    kind: str  # "scaling" or "neighbours"
    steps: tuple[LoadStepPlan, ...]
    victim_job: str | None = None
    aggressor_job: str | None = None
    tail_seconds: float | None = None

    def step(self, index: int) -> LoadStepPlan | None:
        return next((s for s in self.steps if s.index == index), None)

    def alone(self) -> LoadStepPlan | None:
        """The reference phase: the first with no aggressor, else the first."""
        return next((s for s in self.steps if s.count("aggressor") == 0), self.steps[0] if self.steps else None)


@dataclass(frozen=True)
class TuneCell:
    name: str
    axis: str
    value: Any


@dataclass(frozen=True)
class TuneRecord:
    """A tune round's record (:meth:`vmbench.scenario.tune.TuneSpec.plan_json`): the tune, the
    round, its goal and risks, where the tune started (``start_vm``: the VM as scenario YAML),
    this round's baseline and cells, the user's VM (``current``), the budget and the estimate."""

    id: str
    round: int
    goal: str
    allow: tuple[str, ...]
    start_vm: Mapping[str, Any]
    start_source: str
    baseline_vm: Mapping[str, Any]
    cells: tuple[TuneCell, ...]
    current: Mapping[str, Any]
    budget_boots: Any
    budget_seconds: Any
    boots: int
    estimate_seconds: float


@dataclass(frozen=True)
class StoredPlan:
    """What a run planned, as stored.  ``tune``: a tune round's record, as
    :meth:`vmbench.scenario.tune.TuneSpec.plan_json` wrote it (read by :mod:`vmbench.tune`)."""

    kind: RunKind
    scenario: str = ""
    mode: str = ""
    storage: str = ""
    cells: tuple[PlannedCell, ...] = ()
    boots: tuple[PlannedBoot, ...] = ()
    jobs: tuple[PlannedJob, ...] = ()
    stacks: tuple[PlannedStack, ...] = ()
    repeat_policy: RepeatPolicy = RepeatPolicy(1, 1, None)
    targets: tuple[Target, ...] = ()  # the scenario's, as the run stored them
    load: LoadPlan | None = None
    advise_goals: tuple[str, ...] = ()
    advise_allow: tuple[str, ...] = ()
    tune: TuneRecord | None = None

    @property
    def job_names(self) -> list[str]:
        return [j.name for j in self.jobs]

    @property
    def job_metrics(self) -> dict[str, Metric]:
        """Each planned job's metric by name; a plan stored before jobs had one names none,
        and its jobs read as IOPS."""
        return {j.name: j.metric or Metric.IOPS for j in self.jobs}

    def stack(self, name: str | None) -> PlannedStack | None:
        return next((s for s in self.stacks if s.name == name), None)

    @property
    def luks_of(self) -> dict[str, PlannedLuks]:
        """Each LUKS stack's cipher by stack name."""
        return {s.name: s.luks for s in self.stacks if s.luks is not None}



def read_plan(plan: Mapping[str, Any] | None) -> StoredPlan:
    """The stored plan JSON ``plan`` (any version) as a :class:`StoredPlan`."""
    p: Mapping[str, Any] = plan or {}
    load = _load(p.get("load"))
    advise: Mapping[str, Any] = p["advise"] if isinstance(p.get("advise"), Mapping) else {}
    return StoredPlan(
        kind=_kind(p, load), scenario=str(p.get("scenario") or ""), mode=str(p.get("mode") or ""),
        storage=str(p.get("storage") or ""),
        cells=tuple(_cell(c) for c in p.get("cells") or () if isinstance(c, Mapping) and "name" in c),
        boots=tuple(_boot(b) for b in p.get("boots") or () if isinstance(b, Mapping)),
        jobs=tuple(_job(j) for j in p.get("jobs") or () if isinstance(j, Mapping) and "name" in j),
        stacks=tuple(_stack(s) for s in p.get("stacks") or () if isinstance(s, Mapping) and "name" in s),
        repeat_policy=_repeat_policy(p), targets=tuple(_target(t) for t in p.get("targets") or () if isinstance(t, Mapping) and t.get("job")),
        load=load, advise_goals=tuple(str(g) for g in advise.get("goals") or ()),
        advise_allow=tuple(str(a) for a in advise.get("allow") or ()),
        tune=_tune(p["tune"]) if isinstance(p.get("tune"), Mapping) else None)


def scenario_perf_flags(scenario_text: str) -> dict[str, tuple[str, ...]]:
    """Each LUKS stack's dm-crypt perf_flags as the scenario text a run stored names them
    (its ``stacks:`` section), for plans that do not store them; none from a text that does
    not parse."""
    try:
        doc = yaml.safe_load(scenario_text) if scenario_text else None
    except yaml.YAMLError:
        return {}
    listed = doc.get("stacks") if isinstance(doc, dict) else None
    out: dict[str, tuple[str, ...]] = {}
    for st in listed if isinstance(listed, list) else []:
        if not isinstance(st, dict) or "name" not in st:
            continue
        for layer in st.get("layers") or []:
            luks = layer.get("luks") if isinstance(layer, dict) else None
            flags = luks.get("perf_flags") if isinstance(luks, dict) else None
            if isinstance(flags, list) and flags:
                out[str(st["name"])] = tuple(str(f) for f in flags)
    return out


def _kind(p: Mapping[str, Any], load: LoadPlan | None) -> RunKind:
    if p.get("host_only"):
        return RunKind.HOST_ONLY
    if load is not None:
        return RunKind.NEIGHBOURS if load.kind == "neighbours" else RunKind.SCALING
    if p.get("mode") == "journey":
        return RunKind.JOURNEY
    return RunKind.MATRIX


def _repeat_policy(p: Mapping[str, Any]) -> RepeatPolicy:
    """The policy a stored run's plan carries; runs without one repeated ``repeats`` times."""
    policy = p.get("repeat_policy")
    if isinstance(policy, Mapping):
        lo = int(policy.get("min") or p.get("repeats") or 1)
        return RepeatPolicy(lo, max(lo, int(policy.get("max") or lo)), policy.get("until_cv"))
    n = int(p.get("repeats") or 1)
    return RepeatPolicy(n, n, None)


_TARGET_FIELDS = tuple(f.name for f in fields(Target))


def _target(t: Mapping[str, Any]) -> Target:
    return Target(str(t["job"]), **{k: t.get(k) for k in _TARGET_FIELDS if k != "job"})


def _cell(c: Mapping[str, Any]) -> PlannedCell:
    return PlannedCell(str(c["name"]), c.get("host_cell"), dict(c.get("settings") or {}), tuple(c.get("stacks") or ()))


def _boot(b: Mapping[str, Any]) -> PlannedBoot:
    return PlannedBoot(int(b.get("seq") or 0), str(b.get("host") or ""), tuple(b.get("cells") or ()))


def _job(j: Mapping[str, Any]) -> PlannedJob:
    sweep = j.get("sweep") or {}
    return PlannedJob(str(j["name"]), str(j.get("describe") or ""), Metric.parse(j["metric"]) if j.get("metric") else None,
                      sweep_of=sweep.get("of"), sweep_key=sweep.get("key"),
                      sweep_value=int(sweep["value"]) if sweep.get("value") is not None else None)


def _stack(s: Mapping[str, Any]) -> PlannedStack:
    luks = s.get("luks")
    return PlannedStack(str(s["name"]), tuple(str(x) for x in s.get("layers") or ()),
                        PlannedLuks(str(luks["cipher"]), int(luks.get("key_bits") or 0), tuple(str(f) for f in luks.get("perf_flags") or ()))
                        if isinstance(luks, Mapping) and luks.get("cipher") else None)


def _load(load: Any) -> LoadPlan | None:
    """The run's load section, or None for an ordinary run."""
    if not isinstance(load, Mapping) or not load.get("steps"):
        return None
    steps = tuple(LoadStepPlan(int(s["index"]), str(s.get("name") or s["index"]), tuple(_member(v) for v in s.get("vms") or ()))
                  for s in sorted(load["steps"], key=lambda s: int(s["index"])))
    return LoadPlan(str(load.get("kind") or "scaling"), steps, load.get("victim_job"), load.get("aggressor_job"), load.get("tail_seconds"))


def _member(v: Mapping[str, Any]) -> PlannedMember:
    role = v.get("role")
    return PlannedMember(int(v["vm"]), None if role is None else str(role), dict(v.get("overrides") or {}))


def _tune(t: Mapping[str, Any]) -> TuneRecord:
    budget = t.get("budget") or {}
    return TuneRecord(str(t.get("id")), int(t["round"]), str(t.get("goal") or ""), tuple(str(a) for a in t.get("allow") or ()),
                      dict(t.get("start_vm") or {}), str(t.get("start_source", "")), dict(t.get("baseline_vm") or {}),
                      tuple(TuneCell(str(c["name"]), str(c["axis"]), c["value"]) for c in t.get("cells") or ()),
                      dict(t.get("current") or {}), budget.get("boots"), budget.get("seconds"), int(t.get("boots") or 0),
                      float(t.get("estimate_seconds") or 0.0))
