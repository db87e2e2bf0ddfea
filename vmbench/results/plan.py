"""A run's plan as stored <-> frozen dataclasses: the one place that knows the plan JSON.

:meth:`vmbench.run.plan.Plan.record` makes a :class:`StoredPlan` of what a scenario will do,
whose :meth:`StoredPlan.to_row` is what a run stores when it starts (with its targets) and
what ``vmbench plan --json`` prints; every later reader (the report, the advice, ``compare``,
``tune --resume/--show``) takes it from :func:`read_plan`, which reads every version stored
so far: plans from before
jobs named their metric, before adaptive repeats (``repeat_policy``), before ``load:``,
``advise:`` and ``tune:`` sections, and before the plan named the host of each boot.  The
run's kind (:class:`~vmbench.results.kind.RunKind`) is decided here, once.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

import yaml

from ..fio.job import Metric
from ..scenario.goals import Goal, Risk, parse_allow
from ..scenario.model import RepeatPolicy, Target
from .kind import RunKind


@dataclass(frozen=True)
class PlannedLuks:
    cipher: str
    key_bits: int
    perf_flags: tuple[str, ...] = ()  # as older plans stored them (a plan stores none now: scenario_perf_flags)

    def to_row(self) -> dict[str, Any]:
        return {"cipher": self.cipher, "key_bits": self.key_bits, **({"perf_flags": list(self.perf_flags)} if self.perf_flags else {})}


@dataclass(frozen=True)
class PlannedStack:
    name: str
    layers: tuple[str, ...]
    luks: PlannedLuks | None = None

    def to_row(self) -> dict[str, Any]:
        return {"name": self.name, "layers": list(self.layers), "luks": self.luks.to_row() if self.luks else None}


@dataclass(frozen=True)
class PlannedJob:
    name: str
    describe: str = ""
    metric: Metric | None = None  # None: a plan stored before jobs named one (read as IOPS)
    #: a sweep's point: the job it was made from, the setting swept and this point's value
    sweep_of: str | None = None
    sweep_key: str | None = None
    sweep_value: int | None = None
    sync: bool = False  # every write is synchronous (fsync or O_SYNC)
    file_job: bool = False  # a job on files (a user's job file or a file profile), with the unit of its figure
    unit: str | None = None
    rate_iops: Any = None  # a fixed rate, as the job gives it
    rate: Any = None

    def to_row(self) -> dict[str, Any]:
        return {"name": self.name, "describe": self.describe, "sync": self.sync, "metric": self.metric.value if self.metric else None,
                **({"file_job": True, "unit": self.unit} if self.file_job else {}),
                **({"rate_iops": self.rate_iops} if self.rate_iops else {}), **({"rate": self.rate} if self.rate else {}),
                **({"sweep": {"of": self.sweep_of, "key": self.sweep_key, "value": self.sweep_value}} if self.sweep_of else {})}


@dataclass(frozen=True)
class PlannedCell:
    name: str
    host_cell: str | None  # the cell its host reference is stored under
    settings: Mapping[str, Any]
    stacks: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()  # the axes it changes from the baseline

    def to_row(self) -> dict[str, Any]:
        return {"name": self.name, "settings": dict(self.settings), "host_cell": self.host_cell, "changed": list(self.changed),
                "stacks": list(self.stacks)}


@dataclass(frozen=True)
class PlannedBoot:
    """Where one VM of the plan runs: its boot, its host ("": the run's one host, as every
    plan before hosts were named), its VM settings and its cells."""

    seq: int
    host: str
    cells: tuple[str, ...]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_row(self) -> dict[str, Any]:
        return {"seq": self.seq, "host": self.host, "settings": dict(self.settings), "cells": list(self.cells)}


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
    #: the section as stored (:meth:`vmbench.scenario.load.LoadSpec.to_json`): also what the report does not read
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

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
    #: the record as stored: also what ``tune`` does not read back (the axes, the rounds decided...)
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class StoredAdvise:
    """The scenario's ``advise:`` section as the run stored it (the plan's ``advise``): its
    goals and allowed risks as written (what the plan stores back), read as the advice takes
    them: :attr:`goals` (each goal that parses, once), :attr:`allow` (each risk named) and a
    note for each that does not (:attr:`notes`: a stored plan is never refused)."""

    goal_texts: tuple[str, ...] = ()
    allow_texts: tuple[str, ...] = ()

    @classmethod
    def from_row(cls, stored: Any) -> "StoredAdvise | None":
        """The stored section; None for none (the scenario had no ``advise:``)."""
        if not isinstance(stored, Mapping):
            return None
        return cls(tuple(str(g) for g in stored.get("goals") or ()), tuple(str(a) for a in stored.get("allow") or ()))

    def to_row(self) -> dict[str, Any]:
        return {"goals": list(self.goal_texts), "allow": list(self.allow_texts)}

    @functools.cached_property
    def _read(self) -> tuple[tuple[Goal, ...], frozenset[Risk], tuple[str, ...]]:
        goals: list[Goal] = []
        allow: set[Risk] = set()
        notes = []
        for text in self.goal_texts:
            try:
                goals.append(Goal.parse(text, source="the scenario's advise: goals"))
            except ValueError as exc:
                notes.append(f"left out of the stored advise.goals: {exc}")
        for name in self.allow_texts:
            try:
                allow |= parse_allow([name], "advise.allow")
            except ValueError as exc:
                notes.append(f"left out of the stored advise.allow: {exc}")
        return tuple(dict.fromkeys(goals)), frozenset(allow), tuple(notes)

    @property
    def goals(self) -> tuple[Goal, ...]:
        return self._read[0]

    @property
    def allow(self) -> frozenset[Risk]:
        return self._read[1]

    @property
    def notes(self) -> tuple[str, ...]:
        """What is left out: the goals, then the risks, that do not read."""
        return self._read[2]


#: a plan whose scenario had no ``advise:`` section
NO_ADVISE = StoredAdvise()


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
    stored_advise: StoredAdvise | None = None  # the scenario's advise: section (None: it had none)
    tune: TuneRecord | None = None
    host_baseline: bool = True  # the host is measured as the baseline of every gap
    #: how many measurements the plan makes, with every job run the repeat policy's min and max times
    guest_measurements: int = 0
    host_measurements: int = 0
    guest_measurements_max: int = 0
    host_measurements_max: int = 0
    rados_measurements: int | None = None  # RADOS benches (RBD storage with rados jobs); None: none planned
    host_filesystems: tuple[str, ...] | None = None  # with file jobs: the host's like-for-like filesystems
    file_jobs: tuple[str, ...] | None = None  # with file jobs: where they run, in words
    vms_booted: int | None = None  # a load run: VMs booted over its steps
    hosts: tuple[str, ...] = ()  # a run across several hosts: their labels
    placement: Any = None  # where each unit's VMs run (by host), or how (a cluster's nodes: all)
    nodes: str | None = None  # "all": a cluster's online nodes, read when the run starts

    def to_row(self, *, targets: bool = True) -> dict[str, Any]:
        """The plan JSON a run stores (``runs.plan_json``; ``targets``: with the scenario's
        targets, as a run stores them; ``vmbench plan --json`` prints it without)."""
        return {
            "scenario": self.scenario, "mode": self.mode, "host_only": self.kind is RunKind.HOST_ONLY, "storage": self.storage,
            "boots": [b.to_row() for b in self.boots], "cells": [c.to_row() for c in self.cells],
            "jobs": [j.to_row() for j in self.jobs], "stacks": [s.to_row() for s in self.stacks],
            "repeats": self.repeat_policy.min,  # the policy's min: what every job runs at least
            "repeat_policy": self.repeat_policy.to_json(), "host_baseline": self.host_baseline,
            "guest_measurements": self.guest_measurements, "host_measurements": self.host_measurements,
            "guest_measurements_max": self.guest_measurements_max, "host_measurements_max": self.host_measurements_max,
            **({"rados_measurements": self.rados_measurements} if self.rados_measurements is not None else {}),
            **({"host_filesystems": list(self.host_filesystems), "file_jobs": list(self.file_jobs or ())}
               if self.host_filesystems is not None else {}),
            **({"load": dict(self.load.stored), "vms_booted": self.vms_booted} if self.load is not None else {}),
            **({"hosts": list(self.hosts), "placement": self.placement} if self.hosts else {}),
            **({"nodes": self.nodes, "placement": self.placement} if self.nodes else {}),
            **({"advise": self.advise.to_row()} if self.advised else {}),
            **({"tune": dict(self.tune.stored)} if self.tune is not None else {}),
            **({"targets": [asdict(t) for t in self.targets]} if targets else {}),
        }

    @property
    def advised(self) -> bool:
        """Whether the scenario has an ``advise:`` section."""
        return self.stored_advise is not None

    @property
    def advise(self) -> StoredAdvise:
        """The ``advise:`` section as stored (none: no goals, no risks)."""
        return self.stored_advise or NO_ADVISE

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
    load = read_load(p.get("load"))
    return StoredPlan(
        kind=plan_kind(bool(p.get("host_only")), load, str(p.get("mode") or "")), scenario=str(p.get("scenario") or ""),
        mode=str(p.get("mode") or ""),
        storage=str(p.get("storage") or ""),
        cells=tuple(_cell(c) for c in p.get("cells") or () if isinstance(c, Mapping) and "name" in c),
        boots=tuple(_boot(b) for b in p.get("boots") or () if isinstance(b, Mapping)),
        jobs=tuple(_job(j) for j in p.get("jobs") or () if isinstance(j, Mapping) and "name" in j),
        stacks=tuple(_stack(s) for s in p.get("stacks") or () if isinstance(s, Mapping) and "name" in s),
        repeat_policy=_repeat_policy(p), targets=tuple(_target(t) for t in p.get("targets") or () if isinstance(t, Mapping) and t.get("job")),
        load=load, stored_advise=StoredAdvise.from_row(p.get("advise")),
        tune=read_tune(p["tune"]) if isinstance(p.get("tune"), Mapping) else None,
        host_baseline=bool(p.get("host_baseline", True)), guest_measurements=int(p.get("guest_measurements") or 0),
        host_measurements=int(p.get("host_measurements") or 0), guest_measurements_max=int(p.get("guest_measurements_max") or 0),
        host_measurements_max=int(p.get("host_measurements_max") or 0), rados_measurements=p.get("rados_measurements"),
        host_filesystems=_texts(p.get("host_filesystems")), file_jobs=_texts(p.get("file_jobs")), vms_booted=p.get("vms_booted"),
        hosts=tuple(str(h) for h in p.get("hosts") or ()), placement=p.get("placement"), nodes=p.get("nodes"))


def _texts(value: Any) -> tuple[str, ...] | None:
    return tuple(str(v) for v in value) if isinstance(value, (list, tuple)) else None


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


def plan_kind(host_only: bool, load: LoadPlan | None, mode: str) -> RunKind:
    """The kind of a run with this plan: decided here, once, for the plans a run stores and
    for those it reads back."""
    if host_only:
        return RunKind.HOST_ONLY
    if load is not None:
        return RunKind.NEIGHBOURS if load.kind == "neighbours" else RunKind.SCALING
    if mode == "journey":
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
    return PlannedCell(str(c["name"]), c.get("host_cell"), dict(c.get("settings") or {}), tuple(c.get("stacks") or ()),
                       tuple(c.get("changed") or ()))


def _boot(b: Mapping[str, Any]) -> PlannedBoot:
    return PlannedBoot(int(b.get("seq") or 0), str(b.get("host") or ""), tuple(b.get("cells") or ()), dict(b.get("settings") or {}))


def _job(j: Mapping[str, Any]) -> PlannedJob:
    sweep = j.get("sweep") or {}
    return PlannedJob(str(j["name"]), str(j.get("describe") or ""), Metric.parse(j["metric"]) if j.get("metric") else None,
                      sweep_of=sweep.get("of"), sweep_key=sweep.get("key"),
                      sweep_value=int(sweep["value"]) if sweep.get("value") is not None else None, sync=bool(j.get("sync")),
                      file_job=bool(j.get("file_job")), unit=j.get("unit"), rate_iops=j.get("rate_iops"), rate=j.get("rate"))


def _stack(s: Mapping[str, Any]) -> PlannedStack:
    luks = s.get("luks")
    return PlannedStack(str(s["name"]), tuple(str(x) for x in s.get("layers") or ()),
                        PlannedLuks(str(luks["cipher"]), int(luks.get("key_bits") or 0), tuple(str(f) for f in luks.get("perf_flags") or ()))
                        if isinstance(luks, Mapping) and luks.get("cipher") else None)


def read_load(load: Any) -> LoadPlan | None:
    """The run's load section, or None for an ordinary run."""
    if not isinstance(load, Mapping) or not load.get("steps"):
        return None
    steps = tuple(LoadStepPlan(int(s["index"]), str(s.get("name") or s["index"]), tuple(_member(v) for v in s.get("vms") or ()))
                  for s in sorted(load["steps"], key=lambda s: int(s["index"])))
    return LoadPlan(str(load.get("kind") or "scaling"), steps, load.get("victim_job"), load.get("aggressor_job"), load.get("tail_seconds"),
                    stored=dict(load))


def _member(v: Mapping[str, Any]) -> PlannedMember:
    role = v.get("role")
    return PlannedMember(int(v["vm"]), None if role is None else str(role), dict(v.get("overrides") or {}))


def read_tune(t: Mapping[str, Any]) -> TuneRecord:
    """A tune round's record as stored (``plan["tune"]``)."""
    budget = t.get("budget") or {}
    return TuneRecord(str(t.get("id")), int(t["round"]), str(t.get("goal") or ""), tuple(str(a) for a in t.get("allow") or ()),
                      dict(t.get("start_vm") or {}), str(t.get("start_source", "")), dict(t.get("baseline_vm") or {}),
                      tuple(TuneCell(str(c["name"]), str(c["axis"]), c["value"]) for c in t.get("cells") or ()),
                      dict(t.get("current") or {}), budget.get("boots"), budget.get("seconds"), int(t.get("boots") or 0),
                      float(t.get("estimate_seconds") or 0.0), stored=dict(t))
