"""A stored run -> :class:`~vmbench.advice.model.Advice`: which measured change to make for the
user's goal, with its evidence; what the evidence does not support; what was not tried;
where the best cell stands; the snippets that apply the recommendation.

Pure: :func:`advise` reads a loaded run (:class:`~vmbench.report.load.RunData`) and nothing
else.  The goals, when none are given: the run's ``advise.goals`` (the scenario's
``advise:`` section, stored in the plan), else its targets (``min_mb_s`` -> MB/s,
``min_iops`` -> IOPS, ``max_p99_ms`` -> p99 of the target's job), else each job on its own
metric, plus CPU per I/O when the run sampled QEMU's CPU.  Risks allowed: those given and the
run's ``advise.allow``.

Ranking, per goal in order: the improvements (the verdict significant and in the goal's
direction) whose every risk is allowed, by effect size; then the risky ones, each labelled
with what it risks.  The rest (within noise, worse, not judged) is ``unsupported``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from ..report.cpurows import has_qemu_cpu
from ..report.load import RunData
from ..report.loadtables import load_header
from ..results.kind import RunKind
from ..results.records import Settings
from ..scenario.axes import AXIS_BY_SETTING, settings_of, settings_text
from ..scenario.model import LIMIT_RATES
from . import measured, untried
from .loadadvice import from_neighbours, scaling_standing
from .measured import Ctx, effect
from .model import NOT_MEASURED, Advice, Goal, GoalMetric, Recommendation, Risk, Snippet
from .risks import stack_flags, volume_risk_notes
from .standing import cpu_standing, curve_standing, host_standing, luks_standing, measured_rw
from ..scenario.backend import advice_kind

if TYPE_CHECKING:  # a user's VM as a driver read it; the drivers are not imported to make a report
    from ..drivers.existing import CurrentVm

TARGET_GOALS = (("min_mb_s", GoalMetric.MBPS), ("min_iops", GoalMetric.IOPS), ("max_p99_ms", GoalMetric.P99))


def default_goals(data: RunData) -> tuple[Goal, ...]:
    """The run's own question: ``advise.goals``, else its targets, else each job's metric
    (and CPU per I/O where QEMU's CPU was sampled).  A stored goal that does not parse is left
    out (:func:`advise` says so in its notes)."""
    if data.plan.advise.goals:
        return data.plan.advise.goals
    goals = []
    for i, t in enumerate(data.targets, 1):
        for key, metric in TARGET_GOALS:
            value = getattr(t, key)
            if value is not None and t.job:
                goals.append(Goal(str(t.job), metric, f"target {i} ({key} {value:g} on {t.job})"))
    if goals:
        return tuple(dict.fromkeys(goals))
    metrics = data.plan.job_metrics
    for job in _jobs(data):
        m = metrics.get(job)
        goals.append(Goal(job, GoalMetric.of(m) if m is not None else GoalMetric.IOPS, "the job's metric"))
    if not data.kind.many_vms and has_qemu_cpu(data.measurements):
        goals += [Goal(job, GoalMetric.CPU_PER_IO, "the run sampled QEMU's CPU") for job in data.jobs]
    return tuple(dict.fromkeys(goals))


def advise(data: RunData, goals: Sequence[Goal] = (), allow: frozenset[Risk] = frozenset(), current: CurrentVm | None = None,
           vm: str | None = None) -> Advice:
    """The advice for one loaded run.  ``current``: a user's VM read with
    :func:`vmbench.drivers.read_current` (the snippets keep its disk's other options);
    ``vm``: the VMID or domain name the snippets name when no VM was read."""
    stored = data.plan.advise  # the run's advise: section: its goals and risks, and what of them does not read
    ctx = Ctx(data, frozenset(allow) | stored.allow, stack_flags(data.plan.stacks, data.scenario_text))
    goals = tuple(goals) or default_goals(data)
    notes = _run_notes(data) + list(stored.notes) + (_current_notes(current, data) if current is not None else [])
    recs: list[Recommendation] = []
    unsupported: list[Recommendation] = []
    standing: list[str] = []
    not_tried: list[str] = []
    candidates: list[untried.Candidate] = []
    for goal in goals:
        jobs = [goal.job] if goal.job else _jobs(data)
        for job in jobs:
            found, stand, more = _for_job(ctx, goal, job)
            if goal.job and job not in data.jobs:
                more = [f"goal {goal}: the run has no job {job} (its jobs: {', '.join(data.jobs) or 'none'})"]
            good = [r for r in found if r.improves]
            recs += sorted(good, key=lambda r: (not r.allowed or bool(r.suspect), -effect(r)))
            unsupported += [r for r in found if not r.improves]
            standing += stand
            notes += more
            if not found and not more and job in data.jobs:
                notes.append(f"goal {_goal_label(goal, job)}: the run measured no change to judge (one cell, or no comparable rows)")
            elif found and not any(r.delta.judged for r in found):
                notes.append(f"goal {_goal_label(goal, job)}: nothing could be judged "
                             f"({_why_unjudged(found)})")
            lines, missing = _not_tried(ctx, goal, job)
            not_tried += lines
            candidates += missing
    standing += curve_standing(data)
    driver = driver_of(data)
    after = untried.next_run(candidates, driver, _storage_kind(data))
    advice = Advice(run=f"{data.run.id} ({data.run.tag})", goals=goals, recommendations=tuple(recs),
                    unsupported=tuple(unsupported), not_tried=tuple(dict.fromkeys(not_tried)),
                    standing=tuple(dict.fromkeys(standing)), notes=tuple(dict.fromkeys(notes)), driver=driver,
                    next_run=f"run `{after.command}` next: {after.compares}" if after is not None else "")
    top = advice.top()
    if top is None:
        return advice
    snippets, why = apply_snippets(top, current, vm)
    return replace(advice, apply=snippets, notes=advice.notes + ((why,) if why else ()))


def driver_of(data: RunData) -> str:
    """The run's hypervisor driver (libvirt, proxmox, none), as recorded, or as an older run's
    facts tell it."""
    env = data.environment
    if env.driver:
        return str(env.driver)
    if data.kind is RunKind.HOST_ONLY:
        return "none"
    return "proxmox" if env.pve_version or env.pve_api else "libvirt"


def _current_notes(current: CurrentVm, data: RunData) -> list[str]:
    """What was read from the user's VM, and where it differs from the run's baseline (the
    advice is about the run's cells: a difference means the run did not start where the VM is)."""
    mine = settings_of(current.vm)
    shown = settings_text({k: v for k, v in mine.items() if k not in ("vcpus", "memory_mib")})
    notes = [f"your VM: {current.source}, disk {current.disk} (read only, not changed): {shown}"]
    cells = data.valid_cells
    base = cells[0].settings if cells else Settings()
    differ = [f"{k} {mine[k]} (the run: {base[k]})" for k in mine
              if k in base and k not in ("vcpus", "memory_mib") and not base.is_setting_of(k, current.vm)]
    if differ:
        notes.append("your VM differs from the run's baseline in " + ", ".join(differ)
                     + ": the measured changes start from the baseline, not from your VM")
    notes += [f"your VM, assumed: {a}" for a in getattr(current, "assumed", ())]
    notes += [f"your VM, not an axis vmbench varies: {u}" for u in current.unknown]
    return notes


def _jobs(data: RunData) -> list[str]:
    """The jobs a run's goals are about: a neighbour run's victim job, else every job."""
    if data.kind is RunKind.NEIGHBOURS and data.load is not None and data.load.victim_job:
        return [data.load.victim_job]
    return data.jobs


def _goal_label(goal: Goal, job: str) -> str:
    return f"{job}:{goal.metric.value}"


def _why_unjudged(found: Sequence[Recommendation]) -> str:
    whys = list(dict.fromkeys(r.delta.why for r in found if r.delta.why))
    return "; ".join(whys) or "no verdict"


Found = tuple[list[Recommendation], list[str], list[str]]  # (measured changes, standing lines, notes)


def _for_job(ctx: Ctx, goal: Goal, job: str) -> Found:
    """(every measured change, standing lines, notes) for one goal and job, by the run's kind."""
    data = ctx.data
    if goal.metric is GoalMetric.CPU_PER_IO:
        if data.kind.many_vms or not has_qemu_cpu(data.measurements):
            return [], [], [f"goal {_goal_label(goal, job)}: the run did not sample the QEMU process's CPU (no CPU per I/O)"]
        return measured.from_cpu(ctx, goal, job), cpu_standing(ctx, goal, job), []
    return FOR_JOB[data.kind](ctx, goal, job)


def _host_only(ctx: Ctx, goal: Goal, job: str) -> Found:
    return measured.from_host_only(ctx, goal, job), [], []


def _neighbours(ctx: Ctx, goal: Goal, job: str) -> Found:
    assert ctx.data.load is not None
    return from_neighbours(ctx, goal, job, ctx.data.load)


def _scaling(ctx: Ctx, goal: Goal, job: str) -> Found:
    assert ctx.data.load is not None
    stand, notes = scaling_standing(ctx, goal, job, ctx.data.load)
    return [], stand, notes


def _one_vm(cells: Callable[[Ctx, Goal, str], list[Recommendation]]) -> Callable[[Ctx, Goal, str], Found]:
    """One VM per cell: the cells' changes (``cells``), the layers', where the host and LUKS stand."""
    def found(ctx: Ctx, goal: Goal, job: str) -> Found:
        return (cells(ctx, goal, job) + measured.from_layers(ctx, goal, job),
                host_standing(ctx, goal, job) + luks_standing(ctx, goal, job), [])
    return found


#: what each kind of run measured for a goal (a new kind: its function here)
FOR_JOB: dict[RunKind, Callable[[Ctx, Goal, str], Found]] = {
    RunKind.MATRIX: _one_vm(measured.from_gaps), RunKind.JOURNEY: _one_vm(measured.from_journey),
    RunKind.HOST_ONLY: _host_only, RunKind.SCALING: _scaling, RunKind.NEIGHBOURS: _neighbours,
}


def _storage_kind(data: RunData) -> str:
    return advice_kind(data.plan.storage, data.environment.storage_type)


def _not_tried(ctx: Ctx, goal: Goal, job: str) -> tuple[list[str], list[untried.Candidate]]:
    """What commonly matters for the goal and was not measured: its lines, and (one VM per
    cell) the candidates they name."""
    data, lp = ctx.data, ctx.data.load
    if data.kind.many_vms:
        if data.kind is RunKind.NEIGHBOURS and lp is not None and not any(
                k in v.overrides for s in lp.steps for v in s.vms for k in LIMIT_RATES):
            return [f"{_goal_label(goal, job)}{NOT_MEASURED}an I/O limit on the aggressors (iops_wr, mbps_wr in a phase's overrides)"], []
        return [], []
    settings = [c.settings for c in ctx.cells]
    rw = measured_rw(ctx, job)
    luks = bool(data.plan.luks_of)
    found = untried.not_tried(goal.metric, settings, guest=data.kind is not RunKind.HOST_ONLY, storage=_storage_kind(data),
                              writes=rw is None or "write" in str(rw) or rw == "randrw", luks=luks)
    return [f"{_goal_label(goal, job)}{NOT_MEASURED}{c.label} ({c.why})" for c in found], found


def _run_notes(data: RunData) -> list[str]:
    """The accelerator and the load every figure was measured under."""
    accels = sorted({str(b.accelerator) for b in data.boots if b.accelerator}) \
        or sorted({str(m.accelerator) for m in data.measurements if m.side == "guest" and m.accelerator})
    out = []
    if data.kind is RunKind.HOST_ONLY:
        out.append("host only: fio ran on the host, no VM (no accelerator)")
    elif accels:
        out.append(f"guests ran under {', '.join(accels)}"
                   + ("; under TCG (software emulation) the figures include the emulation's cost: the ranking holds for "
                      "this machine, measure again under KVM before acting on it" if any("tcg" in a.lower() for a in accels) else ""))
    out.append(f"load: {load_header(data.load)}" if data.load is not None else "load: one VM at a time, one fio job at a time")
    return out + volume_risk_notes(data.cells)


def changed_settings(r: Recommendation) -> dict[str, object]:
    """The settings a recommendation changes that a VM or its storage has (not a layer, a
    stack or an aggressor's limit)."""
    return {c.axis: c.after for c in r.changes if c.axis in AXIS_BY_SETTING and c.after is not None}


def apply_snippets(r: Recommendation, current: CurrentVm | None = None, vm: str | None = None) -> tuple[tuple[Snippet, ...], str | None]:
    """The snippets that apply ``r``'s changed settings (:mod:`vmbench.advice.apply`), and why
    there are none when so."""
    settings = changed_settings(r)
    if not settings:
        return (), "the recommendation changes no VM or storage setting: no command to apply"
    # imported here, when a recommendation is to be applied: the drivers' codec tables it reads
    # would add a tenth of a second to every report that recommends nothing
    from .apply import snippets

    ident = vm or (current.ident if current is not None else "") or "VMID"
    return tuple(snippets(settings, current, ident)), None


def goal_sources(goals: Sequence[Goal]) -> Mapping[str, str]:
    return {str(g): g.source for g in goals}
