"""``load:``: many VMs at once.  A scaling ramp (the same job in 1, 2, 4... clones of a
cell's VM at once) or a noisy neighbour (a victim VM's job alone, then beside aggressor VMs,
then with the aggressors' settings changed, e.g. limited), as load steps.

A load step is a set of VMs started together; each of them (a *member*) is a clone of the
cell's VM, with the phase's setting overrides where it has some.  In each *round* of a step
every member runs one job at the same time: a scaling step has one round per job (every
member runs it); a neighbour phase has one round (the victim runs its job, the aggressors
theirs).  The host reference of a step runs the same round on as many host volumes at once.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Sequence

from ..fio.job import FioJob
from .axes import AXES, AXIS_BY_NAME, settings_of
from .model import VmConfig
from .reader import Context, Section, as_float, as_int, as_name, items
from .vm import read_vm_section

#: VMs in one step, at most (a step's VMs all run at once on one host)
MAX_VMS = 256
DEFAULT_BOOT_PARALLEL = 2
#: seconds the load goes on after each measured window (fio's tail job): covers the start
#: skew between VMs, so the last VM's window is still fully loaded by the first
DEFAULT_TAIL_SECONDS = 5.0
#: seconds added to each job's ramp in a load step: every VM is loaded before any VM's
#: window starts, even when fio starts seconds late in a busy guest
DEFAULT_LEAD_SECONDS = 3.0


class LoadKind(Enum):
    SCALING = "scaling"
    NEIGHBOURS = "neighbours"


class Role(Enum):
    """What a VM does in a load step."""

    PEER = "peer"  # scaling: one of N equal clones
    VICTIM = "victim"  # noisy neighbour: the VM whose latency is the question
    AGGRESSOR = "aggressor"  # noisy neighbour: a busy VM beside it


@dataclass(frozen=True)
class Overrides:
    """VM settings a member has on top of its cell's VM: the axes named, taken from ``vm``."""

    axes: tuple[str, ...] = ()
    vm: VmConfig = VmConfig()

    def apply(self, base: VmConfig) -> VmConfig:
        out = base
        for name in self.axes:
            out = AXIS_BY_NAME[name].merge(out, self.vm)
        return out

    def describe(self) -> dict[str, object]:
        return {k: v for k, v in settings_of(self.vm).items() if k in {AXIS_BY_NAME[a].settings_key for a in self.axes}}


@dataclass(frozen=True)
class LoadMember:
    vm: int  # 0, 1, ... within the step (the victim is 0)
    role: Role
    overrides: Overrides = Overrides()


@dataclass(frozen=True)
class LoadStep:
    index: int  # 1, 2, ... (0 is "no load section")
    name: str  # "1 VM", "alone", "limited"
    members: tuple[LoadMember, ...]

    @property
    def size(self) -> int:
        return len(self.members)


@dataclass(frozen=True)
class LoadSpec:
    kind: LoadKind
    steps: tuple[LoadStep, ...]
    victim_job: str | None = None
    aggressor_job: str | None = None
    boot_parallel: int = DEFAULT_BOOT_PARALLEL
    tail_seconds: float = DEFAULT_TAIL_SECONDS
    lead_seconds: float = DEFAULT_LEAD_SECONDS

    @property
    def max_vms(self) -> int:
        return max(s.size for s in self.steps)

    def lead_for(self, jobs: "Sequence[FioJob]") -> float:
        """The lead a round of these jobs runs with: the same for every VM of the round, and
        for a fixed-rate job no more than its runtime minus its ramp (fio 3.33 writes no log
        at all for a rate-limited job whose ramp is longer than its runtime)."""
        lead = self.lead_seconds
        for job in jobs:
            if job.fixed_rate:
                lead = min(lead, max(0.0, job.runtime - job.ramp))
        return lead

    def as_run(self, job: FioJob, lead: float) -> FioJob:
        """The job as a load step runs it: its ramp lengthened by ``lead``."""
        return replace(job, ramp=job.ramp + lead) if lead else job

    def rounds(self, jobs: tuple[FioJob, ...]) -> tuple[dict[Role, str], ...]:
        """What each member runs, round by round: role -> job name."""
        if self.kind is LoadKind.SCALING:
            return tuple({Role.PEER: j.name} for j in jobs)
        assert self.victim_job is not None and self.aggressor_job is not None
        return ({Role.VICTIM: self.victim_job, Role.AGGRESSOR: self.aggressor_job},)

    def to_json(self) -> dict:
        """The load section as stored with the run's plan (the report reads it back)."""
        return {
            "kind": self.kind.value,
            "victim_job": self.victim_job,
            "aggressor_job": self.aggressor_job,
            "boot_parallel": self.boot_parallel,
            "tail_seconds": self.tail_seconds,
            "lead_seconds": self.lead_seconds,
            "steps": [{"index": s.index, "name": s.name, "vms": [
                {"vm": m.vm, "role": m.role.value, "overrides": m.overrides.describe()} for m in s.members]}
                for s in self.steps],
        }


def _overrides(ctx: Context, sec: Section, key: str) -> Overrides:
    if not sec.has(key):
        return Overrides()
    inner = sec.section(key)
    data = sec.raw(key)
    if not isinstance(data, dict) or not data:
        raise sec.fail(key, "is a mapping of VM settings (the same keys as vm:), e.g. {iops_wr: 200}")
    names = tuple(a.name for a in AXES if a.name in data)
    vm = read_vm_section(inner, VmConfig())
    return Overrides(names, vm)


def parse_load(ctx: Context, top: Section, jobs: list[FioJob]) -> LoadSpec | None:
    """The ``load:`` section, or None without one."""
    if not top.has("load"):
        return None
    sec = top.section("load")
    if not isinstance(top.raw("load"), dict):
        raise top.fail("load", "is a mapping: {vms: [1, 2, 4]} for scaling, or victim:, aggressors: and phases: for a noisy neighbour")
    boot_parallel = sec.get("boot_parallel", as_int(1, 64), DEFAULT_BOOT_PARALLEL)
    tail = sec.get("tail", as_float(2.0), DEFAULT_TAIL_SECONDS)
    lead = sec.get("lead", as_float(0.0), DEFAULT_LEAD_SECONDS)
    for job in jobs:
        if job.jobfile is not None:
            raise top.fail("load", f"job {job.name!r} is a job file; a load step runs built-in jobs only "
                                   "(vmbench adds a tail to the measured job so that every VM's window stays loaded)",
                           "describe the job with rw/bs/iodepth/... keys")
        if job.steadystate is not None:
            raise top.fail("load", f"job {job.name!r} ends when fio judges it steady; in a load step every VM's job "
                                   "runs for the same time, so that each window is loaded by all the others",
                           "drop steadystate: from the job, or run it without load:")
    if sec.has("vms"):
        for key in ("victim", "aggressors", "phases"):
            if sec.has(key):
                raise sec.fail(key, "does not go with vms: (scaling); a noisy neighbour has victim:, aggressors: and phases:")
        scaling = _scaling_steps(ctx, sec)
        sec.done(("vms", "boot_parallel", "tail", "lead"))
        return LoadSpec(LoadKind.SCALING, scaling, boot_parallel=boot_parallel, tail_seconds=tail, lead_seconds=lead)
    for key in ("victim", "aggressors", "phases"):
        if not sec.has(key):
            raise sec.fail(key, "is missing: load: needs vms: [1, 2, 4] (scaling), or victim:, aggressors: and phases: (noisy neighbour)")
    by_name = {j.name: j for j in jobs}

    def job_of(s: Section, what: str) -> FioJob:
        name = s.get("job", as_name)
        if name not in by_name:
            raise s.fail("job", f"no job named {name!r} for the {what}; jobs: {', '.join(by_name)}")
        return by_name[name]

    victim = sec.section("victim")
    vjob = job_of(victim, "victim")
    victim_over = _overrides(ctx, victim, "vm")
    victim.done(("job", "vm"))
    aggr = sec.section("aggressors")
    ajob = job_of(aggr, "aggressors")
    count = aggr.get("count", as_int(1, MAX_VMS - 1))
    aggr_over = _overrides(ctx, aggr, "vm")
    aggr.done(("job", "count", "vm"))
    if vjob.duration != ajob.duration:
        raise aggr.fail("job", f"job {ajob.name!r} runs {ajob.duration:g} s (ramp and runtime) and the victim's job "
                               f"{vjob.name!r} {vjob.duration:g} s; they must run as long, so that each VM's window is loaded by the others",
                        "give both jobs the same runtime and ramp")
    steps: list[LoadStep] = []
    seen: set[str] = set()
    for path, line, value in items(ctx, sec.raw("phases"), "load.phases", sec.line_of("phases")):
        if isinstance(value, str):
            value = {"name": value}
        ph = Section(ctx, value, path, line)
        name = ph.get("name", as_name)
        if name in seen:
            raise ph.fail("name", f"phase {name!r} is named twice")
        seen.add(name)
        n = ph.get("aggressors", as_int(0, count), count)
        over_a = _merge(aggr_over, _overrides(ctx, ph, "aggressor_vm"))
        over_v = _merge(victim_over, _overrides(ctx, ph, "victim_vm"))
        ph.done(("name", "aggressors", "aggressor_vm", "victim_vm"))
        members = (LoadMember(0, Role.VICTIM, over_v),) + tuple(LoadMember(i, Role.AGGRESSOR, over_a) for i in range(1, n + 1))
        steps.append(LoadStep(len(steps) + 1, name, members))
    if not steps:
        raise sec.fail("phases", "lists no phase", "e.g. [{name: alone, aggressors: 0}, {name: busy}, {name: limited, aggressor_vm: {iops_wr: 200}}]")
    sec.done(("victim", "aggressors", "phases", "boot_parallel", "tail", "lead"))
    return LoadSpec(LoadKind.NEIGHBOURS, tuple(steps), victim_job=vjob.name, aggressor_job=ajob.name,
                    boot_parallel=boot_parallel, tail_seconds=tail, lead_seconds=lead)


def _merge(first: Overrides, then: Overrides) -> Overrides:
    if not then.axes:
        return first
    vm = first.vm
    for name in then.axes:
        vm = AXIS_BY_NAME[name].merge(vm, then.vm)
    return Overrides(tuple(a.name for a in AXES if a.name in set(first.axes) | set(then.axes)), vm)


def _scaling_steps(ctx: Context, sec: Section) -> tuple[LoadStep, ...]:
    raw: Any = sec.raw("vms")
    counts = [raw] if isinstance(raw, int) and not isinstance(raw, bool) else raw
    if not isinstance(counts, list) or not counts:
        raise sec.fail("vms", "is a list of VM counts, e.g. [1, 2, 4, 8]")
    parse = as_int(1, MAX_VMS)
    values: list[int] = []
    for v in counts:
        try:
            n = parse(v)
        except ValueError as exc:
            raise sec.fail("vms", f"{v!r}: {exc}") from None
        if values and n <= values[-1]:
            raise sec.fail("vms", f"counts go up: {n} after {values[-1]}", "e.g. [1, 2, 4, 8]")
        values.append(n)
    return tuple(LoadStep(i + 1, f"{n} VM" + ("s" if n > 1 else ""), tuple(LoadMember(v, Role.PEER) for v in range(n)))
                 for i, n in enumerate(values))
