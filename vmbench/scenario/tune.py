"""``advise:`` (the question a run's advice answers) and ``tune:`` (a search for better VM
settings, round by round), read into frozen dataclasses.

``advise: {goal: JOB:METRIC | [..], allow: [risk, ...]}`` is stored in the run's plan as
``plan["advise"]`` = ``{"goals": [...], "allow": [...]}`` (:meth:`AdviseSpec.to_json`), which
``vmbench advise`` reads.

``tune:`` names a goal, the candidate values of VM axes, the risks allowed, a budget and,
optionally, an existing VM to start from::

    tune:
      goal: 4k-randread:iops
      axes: {bus: [virtio-scsi, sata], cache: [writeback], iothread: [true], aio: [io_uring, threads]}
      allow: []                      # risk names (cache-unsafe, cache-writeback, ...)
      budget: {boots: 7, time: 90m}  # either or both
      from: {domain: web1}           # or {vmid: 101}; with disk: vdb / scsi1

``vmbench tune`` (:mod:`vmbench.tune`) runs each round as a stored one-factor run.  A round's
stored scenario is this file with ``vm:`` set to the round's baseline and a ``tune.round``
section written by vmbench (:func:`round_text`); the loader reads it back into exactly the
round's cells, so ``vmbench run --resume`` of a round and ``vmbench tune --resume`` run the
same plan.  ``tune.round`` is vmbench's own; it is not meant to be written by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import yaml

from ..fio.job import FioJob
from ..settings import DriverName
from ..units import format_duration, parse_duration
from .goals import Goal, GoalMetric, Risk
from .axes import AXIS_BY_NAME, STORAGE_AXES, VM_AXES, settings_of, vm_key, vm_yaml
from .matrix import shown_value
from .backend import Storage, storage_problems
from .model import Cell, Hypervisor, Stack, VmConfig
from .reader import Context, LineDict, LineList, Section, as_int, as_name, as_str, items, join, load_yaml
from .vm import read_vm_section, vm_problems

TUNE_KEYS = ("goal", "axes", "allow", "budget", "from", "round")
ADVISE_KEYS = ("goal", "allow")
BUDGET_KEYS = ("boots", "time")
FROM_KEYS = ("vmid", "domain", "disk")
ROUND_KEYS = ("id", "number", "start", "start_source", "current", "decided", "cells", "boots", "estimate")
#: the top-level keys a tune scenario does not take: it makes each round's cells itself
NOT_WITH_TUNE = ("vary", "mode", "cells", "journey", "load", "host_only")
#: verdicts (faster / slower / within noise) need 3 repeats per side
TUNE_MIN_REPEATS = 3
#: the most boots a budget may name
MAX_BOOTS = 1000
#: what a tune does not read from a user's VM (:func:`start_from`): its size (vcpus and memory
#: stay the scenario's, so the clones fit this host)
NOT_READ = ("vcpus", "memory")


# ---- advise: ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AdviseSpec:
    """The goals and allowed risks a scenario gives ``vmbench advise`` (``advise:``)."""

    goals: tuple[Goal, ...] = ()
    allow: frozenset[Risk] = frozenset()

    def to_json(self) -> dict:
        return {"goals": [str(g) for g in self.goals], "allow": sorted(r.value for r in self.allow)}


def _goal(sec: Section, key: str, value: Any, jobs: list[FioJob], source: str) -> Goal:
    try:
        goal = Goal.parse(value, source) if isinstance(value, str) else None
    except ValueError as exc:
        raise sec.fail(key, str(exc), "e.g. 4k-randread:iops, 1m-read:mbps, 4k-randwrite:p99") from None
    if goal is None:
        raise sec.fail(key, f"{value!r} is not a goal: JOB:METRIC, METRIC one of {GoalMetric.allowed()}",
                       "e.g. 4k-randread:iops")
    names = [j.name for j in jobs]
    if goal.job is not None and goal.job not in names:
        raise sec.fail(key, f"no job named {goal.job!r}; jobs: {', '.join(names)}")
    return goal


def _allow(sec: Section) -> frozenset[Risk]:
    if not sec.has("allow"):
        return frozenset()
    raw = sec.raw("allow")
    values = raw if isinstance(raw, list) else [raw] if isinstance(raw, str) else None
    if values is None:
        raise sec.fail("allow", f"is a list of risk names, one of: {Risk.allowed()}", "e.g. allow: [cache-writeback]")
    out = set()
    for v in values:
        try:
            out.add(Risk.parse(v))
        except ValueError as exc:
            raise sec.fail("allow", str(exc)) from None
    return frozenset(out)


def parse_advise(ctx: Context, top: Section, jobs: list[FioJob]) -> AdviseSpec | None:
    """The ``advise:`` section, or None without one."""
    if not top.has("advise"):
        return None
    if not isinstance(top.raw("advise"), dict):
        raise top.fail("advise", "is a mapping: {goal: JOB:METRIC or a list of them, allow: [risk names]}")
    sec = top.section("advise")
    sec.done(ADVISE_KEYS)
    raw = sec.raw("goal", None)
    goals = []
    for path, line, value in items(ctx, raw if isinstance(raw, list) else [] if raw is None else [raw], join(sec.path, "goal"),
                                   sec.line_of("goal")):
        goals.append(_goal(sec, "goal", value, jobs, "advise.goal"))
    return AdviseSpec(tuple(goals), _allow(sec))


# ---- tune: -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TuneBudget:
    """What a tune may spend: boots (one per distinct VM configuration of each round) and the
    plan's estimated time (:func:`vmbench.run.plan.estimate`); None is no limit on that one."""

    boots: int | None = None
    seconds: float | None = None

    def to_json(self) -> dict:
        return {"boots": self.boots, "seconds": self.seconds}

    def describe(self) -> str:
        parts = ([f"{self.boots} boots"] if self.boots is not None else []) + \
                ([f"{format_duration(self.seconds)} (estimated)"] if self.seconds is not None else [])
        return ", ".join(parts)


@dataclass(frozen=True)
class TuneFrom:
    """An existing VM to start from, read only: a Proxmox VMID or a libvirt domain."""

    kind: str  # "vmid" or "domain"
    ident: str
    disk: str | None = None

    def describe(self) -> str:
        what = f"Proxmox VM {self.ident}" if self.kind == "vmid" else f"libvirt domain {self.ident}"
        return what + (f", disk {self.disk}" if self.disk else "")


@dataclass(frozen=True)
class Candidate:
    """One candidate value of one axis, as the scenario wrote it (``raw``) and as a cell names it."""

    axis: str
    raw: Any
    label: str

    @property
    def name(self) -> str:
        return f"{self.axis}={self.label}"


@dataclass(frozen=True)
class Decided:
    """An earlier round's decision, as a round's scenario records it."""

    round: int
    run: str  # the round's run tag
    cell: str | None  # the variation kept (None: nothing improved)
    axis: str | None = None
    raw: Any = None

    def to_json(self) -> dict:
        return {"round": self.round, "run": self.run, "cell": self.cell, "axis": self.axis, "value": self.raw}


@dataclass(frozen=True)
class TuneRound:
    """What makes a scenario one round of a tune (``tune.round``, written by vmbench)."""

    id: str  # the tune's tag
    number: int  # 1, 2, ...
    start: VmConfig
    start_source: str
    cells: tuple[Candidate, ...]  # the variations, each one axis changed from the baseline (vm:)
    decided: tuple[Decided, ...] = ()
    current: Mapping[str, Any] = field(default_factory=dict)  # the VM read with from: (CurrentVm's fields but vm)
    boots: int = 0  # planned
    estimate: float = 0.0  # planned seconds (the plan's estimate)


@dataclass(frozen=True)
class TuneSpec:
    """The ``tune:`` section: the goal, the candidate values per axis (in the scenario's
    order), the allowed risks, the budget, where to start; ``round`` when the scenario is one
    round of a tune."""

    goal: Goal
    axes: tuple[tuple[str, tuple[Candidate, ...]], ...]
    allow: frozenset[Risk] = frozenset()
    budget: TuneBudget = TuneBudget()
    source: TuneFrom | None = None
    round: TuneRound | None = None

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        return tuple(c for _, values in self.axes for c in values)

    def plan_json(self, scenario_name: str, baseline: VmConfig) -> dict:
        """``plan["tune"]`` of a round's run (what ``vmbench tune --resume/--show`` read)."""
        r = self.round
        assert r is not None
        return {
            "name": scenario_name,
            "id": r.id,
            "round": r.number,
            "goal": str(self.goal),
            "allow": sorted(a.value for a in self.allow),
            "start": settings_of(r.start),
            "start_vm": vm_yaml(r.start),
            "start_source": r.start_source,
            "baseline": settings_of(baseline),
            "baseline_vm": vm_yaml(baseline),
            "axes": {axis: [_plain(c.raw) for c in values] for axis, values in self.axes},
            "budget": self.budget.to_json(),
            "cells": [{"name": c.name, "axis": c.axis, "value": _plain(c.raw)} for c in r.cells],
            "decided": [d.to_json() for d in r.decided],
            "current": dict(r.current),
            "boots": r.boots,
            "estimate_seconds": r.estimate,
        }


def vary(base: VmConfig, axis: str, raw: Any, ctx: Context | None = None, path: str = "tune.axes", line: int = 0) -> VmConfig:
    """``base`` with one axis set to a value as the scenario writes it."""
    given = LineDict({axis: raw})
    given.line, given.key_lines = line, {axis: line}
    return read_vm_section(Section(ctx or Context("<tune>"), given, path, line), base)


def parse_tune(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, storage: Storage, jobs: list[FioJob],
               stacks: tuple[Stack, ...]) -> tuple[TuneSpec, tuple[Cell, ...]]:
    """The ``tune:`` section and the scenario's cells: the baseline alone for a tune scenario,
    the round's one-factor cells for a round's stored scenario."""
    for key in NOT_WITH_TUNE:
        if top.has(key) and not (key == "host_only" and top.raw(key) in (False, "false", "no", "off")):
            raise top.fail(key, "does not go with tune: (each round's cells are made by vmbench tune: the baseline "
                                "and a one-factor variation per candidate value)",
                           "remove it; list the values to try under tune.axes")
    if not isinstance(top.raw("tune"), dict):
        raise top.fail("tune", "is a mapping: {goal: JOB:METRIC, axes: {AXIS: [values]}, budget: {boots: N, time: 90m}}")
    sec = top.section("tune")
    sec.done(TUNE_KEYS)
    if not sec.has("goal"):
        raise sec.fail("goal", "is required: the job and metric to improve, JOB:METRIC", "e.g. goal: 4k-randread:iops")
    goal = _goal(sec, "goal", sec.raw("goal"), jobs, "tune.goal")
    if goal.job is None:
        if len(jobs) != 1:
            raise sec.fail("goal", f"names no job, and this scenario has {len(jobs)}: a tune improves one job's figure",
                           f"write JOB:{goal.metric.value}, JOB one of {', '.join(j.name for j in jobs)}")
        goal = type(goal)(jobs[0].name, goal.metric, goal.source)
    axes = _axes(ctx, sec, baseline, hv, storage)
    allow = _allow(sec)
    budget = _budget(sec)
    source = _from(sec, hv)
    spec = TuneSpec(goal, axes, allow, budget, source)
    if not sec.has("round"):
        return spec, (Cell(name="baseline", vm=baseline, stacks=stacks),)
    rnd = _round(ctx, sec, spec, baseline, hv, storage)
    cells = [Cell(name="baseline", vm=baseline, stacks=stacks)]
    for c in rnd.cells:
        vm = vary(baseline, c.axis, c.raw, ctx, join(sec.path, "round.cells"), sec.line_of("round"))
        cells.append(Cell(name=c.name, vm=vm, stacks=stacks, changed=(c.axis,)))
    return TuneSpec(goal, axes, allow, budget, source, rnd), tuple(cells)


def _axes(ctx: Context, sec: Section, baseline: VmConfig, hv: Hypervisor, storage: Storage
          ) -> tuple[tuple[str, tuple[Candidate, ...]], ...]:
    if not sec.has("axes"):
        raise sec.fail("axes", "is required: the values to try, by VM axis", "e.g. axes: {cache: [writeback], iothread: [true]}")
    if not isinstance(sec.raw("axes"), dict) or not sec.raw("axes"):
        raise sec.fail("axes", f"is a mapping of VM axes to lists of values to try; axes: {', '.join(VM_AXES)}",
                       "e.g. axes: {bus: [virtio-scsi, sata], cache: [writeback]}")
    axes_sec = sec.section("axes")
    axes_sec.done(VM_AXES)  # an unknown axis is refused, naming the closest
    neutral = VmConfig(zfs=baseline.zfs)
    out = []
    for axis in list(axes_sec.data):
        raw = axes_sec.raw(axis)
        values = raw if isinstance(raw, list) else [raw]
        path = join(axes_sec.path, axis)
        cands: list[Candidate] = []
        seen: dict[str, object] = {}
        for vpath, line, value in items(ctx, values, path, axes_sec.line_of(axis)):
            vm = vary(baseline, axis, value, ctx, axes_sec.path, line)
            label = AXIS_BY_NAME[axis].label(vm, value)
            key = repr(AXIS_BY_NAME[axis].value(vm))
            if key in seen:
                raise ctx.fail(path, line, f"{shown_value(value)} is given twice (or is the same value as {shown_value(seen[key])})",
                               "give each value once")
            seen[key] = value
            problems = storage_problems(vm, storage)
            if problems:
                raise ctx.fail(path, line, f"{axis}={label}: {problems[0][0]}", problems[0][1])
            always = vm_problems(vm, hv) and vm_problems(vary(neutral, axis, value, ctx, axes_sec.path, line), hv)
            if always:
                raise ctx.fail(path, line, f"{axis}={label}: {always[0][0]}", always[0][1])
            cands.append(Candidate(axis, value, label))
        if not cands:
            raise axes_sec.fail(axis, "needs at least one value to try", f"{axis} is {AXIS_BY_NAME[axis].describe}")
        out.append((axis, tuple(cands)))
    return tuple(out)


def _budget(sec: Section) -> TuneBudget:
    if not sec.has("budget"):
        raise sec.fail("budget", "is required: how many boots and/or how much (estimated) time the tune may spend",
                       "e.g. budget: {boots: 12} or budget: {boots: 12, time: 90m}")
    if not isinstance(sec.raw("budget"), dict):
        raise sec.fail("budget", "is a mapping: {boots: N, time: 90m} (either or both)")
    b = sec.section("budget")
    b.done(BUDGET_KEYS)
    boots = b.get("boots", as_int(2, MAX_BOOTS), None, hint="a round needs 2 boots at least: its baseline and one variation")
    seconds = b.get("time", _positive_duration, None, hint="e.g. time: 90m, time: 2h")
    if boots is None and seconds is None:
        raise sec.fail("budget", "names no limit: give boots, time or both", "e.g. budget: {boots: 12, time: 90m}")
    return TuneBudget(boots, seconds)


def _positive_duration(value: Any) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} is not above 0")
    return seconds


def _from(sec: Section, hv: Hypervisor) -> TuneFrom | None:
    if not sec.has("from"):
        return None
    if not isinstance(sec.raw("from"), dict):
        raise sec.fail("from", "is a mapping: {vmid: 101} (Proxmox) or {domain: NAME} (libvirt), with disk: optionally")
    f = sec.section("from")
    f.done(FROM_KEYS)
    given = [k for k in ("vmid", "domain") if f.has(k)]
    if len(given) != 1:
        raise sec.fail("from", "names one VM: vmid: N (Proxmox) or domain: NAME (libvirt)" if not given
                       else "names one VM, not both vmid and domain")
    kind = given[0]
    if kind == "vmid":
        if hv.driver is not DriverName.PROXMOX:
            raise f.fail("vmid", f"is a Proxmox VM; this scenario's driver is {hv.driver.value}",
                         "use from: {domain: NAME} for a libvirt domain")
        ident = str(f.get("vmid", as_int(100, 999_999_999)))
    else:
        if hv.driver is not DriverName.LIBVIRT:
            raise f.fail("domain", f"is a libvirt domain; this scenario's driver is {hv.driver.value}",
                         "use from: {vmid: N} for a Proxmox VM")
        ident = f.get("domain", as_str)
    disk = f.get("disk", as_name, None)
    return TuneFrom(kind, ident, disk)


def _round(ctx: Context, sec: Section, spec: TuneSpec, baseline: VmConfig, hv: Hypervisor, storage: Storage) -> TuneRound:
    r = sec.section("round")
    r.done(ROUND_KEYS)
    tune_id = r.get("id", as_name)
    number = r.get("number", as_int(1))
    start = read_vm_section(r.section("start", required=True), VmConfig(zfs=baseline.zfs))
    start_source = r.get("start_source", as_str, "the scenario's vm: settings")
    current = r.raw("current", None) or {}
    if not isinstance(current, dict):
        raise r.fail("current", "is a mapping (the VM read with tune.from)")
    by_name = {c.name: c for c in spec.candidates}
    cells: list[Candidate] = []
    for path, line, value in items(ctx, r.raw("cells", []), join(r.path, "cells"), r.line_of("cells")):
        if not isinstance(value, dict) or len(value) != 1:
            raise ctx.fail(path, line, "is one axis and its value, e.g. {cache: writeback}")
        (axis, raw), = value.items()
        if axis not in AXIS_BY_NAME:
            raise ctx.fail(path, line, f"{axis!r} is not a VM axis; axes: {', '.join(VM_AXES)}")
        vm = vary(baseline, axis, raw, ctx, path, line)
        if vm_key(vm) == vm_key(baseline):
            raise ctx.fail(path, line, f"{axis}={shown_value(raw)} is the baseline's own setting")
        problems = vm_problems(vm, hv) + storage_problems(vm, storage)
        if problems:
            raise ctx.fail(path, line, f"{axis}={shown_value(raw)}: {problems[0][0]}", problems[0][1])
        label = AXIS_BY_NAME[axis].label(vm, raw)
        cand = Candidate(axis, raw, label)
        cells.append(by_name.get(cand.name, cand))
    decided = []
    for path, line, value in items(ctx, r.raw("decided", []), join(r.path, "decided"), r.line_of("decided")):
        d = Section(ctx, value, path, line)
        d.done(("round", "run", "cell", "axis", "value"))
        decided.append(Decided(d.get("round", as_int(1)), d.get("run", as_name), d.raw("cell", None), d.raw("axis", None),
                               d.raw("value", None)))
    boots = r.get("boots", as_int(0), 0)
    estimate = float(r.get("estimate", lambda v: float(v), 0.0))
    return TuneRound(tune_id, number, start, start_source, tuple(cells), tuple(decided), _plain(current), boots, estimate)


# ---- writing a round's scenario ---------------------------------------------------------------


def vm_from_yaml(data: Mapping[str, Any], where: str = "tune") -> VmConfig:
    """:func:`vm_yaml`'s mapping (as stored in a round's plan) back to the VmConfig."""
    return read_vm_section(Section(Context(where), dict(data), "vm", 0), VmConfig())


def _plain(value: Any) -> Any:
    """A YAML value as plain dicts and lists (LineDict and LineList are not dumpable)."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, LineList)):
        return [_plain(v) for v in value]
    return value


def round_text(text: str, filename: str, *, baseline: VmConfig, rnd: TuneRound) -> str:
    """The stored scenario of one round: the tune's scenario (``text``, a tune scenario or an
    earlier round's) with ``vm:`` set to the round's baseline, ``tune.from`` dropped (the start
    is in ``tune.round.start``) and ``tune.round`` saying what the round is."""
    data = _plain(load_yaml(text, filename))
    data["vm"] = vm_yaml(baseline)
    tune = dict(data["tune"])
    tune.pop("from", None)
    tune["round"] = {
        "id": rnd.id,
        "number": rnd.number,
        "start": vm_yaml(rnd.start),
        "start_source": rnd.start_source,
        **({"current": _plain(dict(rnd.current))} if rnd.current else {}),
        "decided": [{k: v for k, v in d.to_json().items()} for d in rnd.decided],
        "cells": [{c.axis: _plain(c.raw)} for c in rnd.cells],
        "boots": rnd.boots,
        "estimate": round(rnd.estimate, 1),
    }
    data["tune"] = tune
    head = (f"# vmbench tune {rnd.id}, round {rnd.number}: written by vmbench from {filename}\n"
            "# (vm: is this round's baseline; tune.round lists the variations it measures)\n")
    return head + yaml.safe_dump(data, sort_keys=False, default_flow_style=None, allow_unicode=True, width=120)


def start_from(baseline: VmConfig, read: VmConfig, storage: Storage) -> VmConfig:
    """The start of a tune with ``from:``: the scenario's VM with the read VM's disk and CPU
    settings (every axis but :data:`NOT_READ`); its storage settings only where they fit this
    scenario's storage."""
    vm = baseline
    for name in (a for a in VM_AXES if a not in NOT_READ):
        axis = AXIS_BY_NAME[name]
        if name in STORAGE_AXES:
            trial = axis.merge(vm, read)
            if storage_problems(trial, storage):
                continue
            vm = trial
        else:
            vm = axis.merge(vm, read)
    return vm
