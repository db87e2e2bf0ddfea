"""The search, pure: what the next round measures, what a round decided, when to stop.

A round is a one-factor run: its baseline and one variation per candidate value (each
changes one axis).  Which variations:

* every candidate value of every axis (``tune.axes``) applied to the round's baseline,
  except a value that is already the baseline's, and except a VM configuration measured in
  an earlier round, as a baseline or as a variation (compared by ``VmConfig.key()``).  So
  each (axis, value) is tried once per baseline it differs from: after a change, the other
  axes' values are tried again on the new baseline (settings interact), while the axis just
  changed is not varied again (its other values on the new baseline are exactly the
  configurations the round before measured, and going back is the old baseline);
* a value that is impossible with this baseline (``aio=native`` with a caching mode,
  ``iothread`` on SATA...) is left out, and said so;
* in round-robin order over the axes (the first value of each axis, then the second...), so
  that a budget that cannot take every variation still covers every axis first;
* trimmed to the budget: a round costs one boot for its baseline plus one per variation
  (each a distinct VM configuration: the runner boots each configuration once), and the
  plan's estimated time (:func:`vmbench.run.plan.estimate`, the figure ``vmbench plan``
  shows); a round is run only when it fits in what the earlier rounds left, with at least
  one variation.

After a round, the decision is the advice's top recommendation for the goal
(:meth:`Advice.top`): the best significant improvement that carries no risk or only allowed
ones; it becomes the next baseline.  The tune stops when a round improves nothing
significantly, when no variation is left, or when the budget cannot pay for another round.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Sequence

from ..advice.model import Advice, Goal, Recommendation, RISKS
from ..advice.table import delta_text as effect  # how a recommendation's change reads (CPU per I/O in µs/IO)
from ..scenario.backend import Storage, storage_problems
from ..scenario.model import Cell, Hypervisor, VmConfig
from ..scenario.spec import Scenario
from ..scenario.tune import Candidate, TuneBudget, TuneSpec, vary
from ..scenario.vm import vm_problems
from ..units import format_duration
from ..scenario.axes import vm_key


@dataclass(frozen=True)
class Variation:
    """A candidate value applied to a baseline: one cell of a round."""

    candidate: Candidate
    vm: VmConfig

    @property
    def name(self) -> str:
        return self.candidate.name

    @property
    def axis(self) -> str:
        return self.candidate.axis


@dataclass(frozen=True)
class RoundPlan:
    """What round ``number`` measures: its baseline and variations; what was left out (name,
    why); what it costs (boots, the plan's estimated seconds)."""

    number: int
    baseline: VmConfig
    variations: tuple[Variation, ...]
    left_out: tuple[tuple[str, str], ...]
    boots: int
    seconds: float


@dataclass(frozen=True)
class Stop:
    """Why no further round runs."""

    reason: str


@dataclass(frozen=True)
class Decision:
    """What a round decided: ``chosen`` the variation kept (None: the baseline stays), with its
    recommendation ``top``; ``best`` the largest effect on the goal measured when nothing was
    kept (within noise or not judged); ``held_back`` improvements whose risks were not allowed."""

    chosen: str | None
    top: Recommendation | None
    best: Recommendation | None
    held_back: tuple[Recommendation, ...]
    why: str


@dataclass(frozen=True)
class Round:
    """One round as run: its stored run, baseline, variations, cost and decision (None while
    the run is unfinished)."""

    number: int
    run_id: int
    run: str  # the run's tag
    status: str
    baseline: VmConfig
    variations: tuple[Variation, ...]
    boots: int
    seconds: float
    decision: Decision | None = None
    notes: tuple[str, ...] = ()

    @property
    def kept(self) -> Variation | None:
        chosen = self.decision.chosen if self.decision else None
        return next((v for v in self.variations if v.name == chosen), None)

    @property
    def after(self) -> VmConfig:
        """The baseline the round leaves: its kept variation's VM, or its own baseline."""
        kept = self.kept
        return kept.vm if kept else self.baseline


Cost = Callable[[VmConfig, Sequence[Variation]], float]  # (baseline, variations) -> estimated seconds


def spent(history: Sequence[Round]) -> tuple[int, float]:
    """Boots and estimated seconds the rounds so far cost (as planned)."""
    return sum(r.boots for r in history), sum(r.seconds for r in history)


def measured(history: Sequence[Round]) -> set[str]:
    """Every VM configuration an earlier round measured (its key)."""
    return {k for r in history for k in [vm_key(r.baseline), *(vm_key(v.vm) for v in r.variations)]}


def round_boots(baseline: VmConfig, variations: Sequence[Variation]) -> int:
    """Boots a round takes: one per distinct VM configuration (the runner shares boots)."""
    return len({vm_key(baseline), *(vm_key(v.vm) for v in variations)})


def candidates(spec: TuneSpec, baseline: VmConfig, hv: Hypervisor, storage: Storage, done: set[str]
               ) -> tuple[list[Variation], list[tuple[str, str]]]:
    """The variations of ``baseline`` not measured yet, round-robin over the axes, and the
    values left out as impossible with this baseline (name, why)."""
    per_axis: list[list[Variation]] = []
    left_out: list[tuple[str, str]] = []
    seen = set(done) | {vm_key(baseline)}
    for axis, values in spec.axes:
        mine = []
        for cand in values:
            vm = vary(baseline, axis, cand.raw)
            if vm_key(vm) in seen:
                continue
            problems = vm_problems(vm, hv) + storage_problems(vm, storage)
            if problems:
                left_out.append((cand.name, f"not possible with this baseline: {problems[0][0]}"))
                continue
            seen.add(vm_key(vm))
            mine.append(Variation(cand, vm))
        per_axis.append(mine)
    order = [lst[i] for i in range(max((len(l) for l in per_axis), default=0)) for lst in per_axis if i < len(lst)]
    return order, left_out


def next_round(spec: TuneSpec, start: VmConfig, history: Sequence[Round], hv: Hypervisor, storage: Storage,
               cost: Cost) -> RoundPlan | Stop:
    """The next round, or why there is none (see the module's docstring)."""
    last = history[-1] if history else None
    if last is not None:
        if last.decision is None:
            raise ValueError(f"round {last.number} is not finished")
        if last.decision.chosen is None:
            return Stop(f"nothing round {last.number} tried improved {spec.goal} significantly")
    baseline = last.after if last else start
    number = len(history) + 1
    order, left_out = candidates(spec, baseline, hv, storage, measured(history))
    if not order:
        return Stop("no variation is left: every candidate value was measured against this baseline"
                    + (" or is not possible with it" if left_out else ""))
    boots_used, seconds_used = spent(history)
    budget = spec.budget
    n = len(order)
    while n > 0 and not _fits(budget, boots_used, seconds_used, round_boots(baseline, order[:n]), cost(baseline, order[:n])):
        n -= 1
    if n == 0:
        need_boots, need_seconds = round_boots(baseline, order[:1]), cost(baseline, order[:1])
        return Stop(f"the budget is spent: round {number} needs at least {need_boots} boots and "
                    f"{format_duration(need_seconds)} (estimated); {_left(budget, boots_used, seconds_used)}")
    left_out += [(v.name, "over the budget") for v in order[n:]]
    chosen = tuple(order[:n])
    return RoundPlan(number, baseline, chosen, tuple(left_out), round_boots(baseline, chosen), cost(baseline, chosen))


def _fits(budget: TuneBudget, boots_used: int, seconds_used: float, boots: int, seconds: float) -> bool:
    if budget.boots is not None and boots_used + boots > budget.boots:
        return False
    return budget.seconds is None or seconds_used + seconds <= budget.seconds


def _left(budget: TuneBudget, boots_used: int, seconds_used: float) -> str:
    parts = []
    if budget.boots is not None:
        parts.append(f"{budget.boots - boots_used} of {budget.boots} boots left")
    if budget.seconds is not None:
        parts.append(f"{format_duration(max(0.0, budget.seconds - seconds_used))} of {format_duration(budget.seconds)} left")
    return ", ".join(parts)


def round_scenario(scenario: Scenario, baseline: VmConfig, variations: Sequence[Variation]) -> Scenario:
    """A round as a scenario (for its estimate): the baseline and one cell per variation."""
    stacks = scenario.stacks
    cells = (Cell("baseline", baseline, stacks),) + tuple(Cell(v.name, v.vm, stacks, (v.axis,)) for v in variations)
    return replace(scenario, baseline=baseline, cells=cells, plan_mode="one-factor")


# ---- deciding ------------------------------------------------------------------------------------


def decide(advice: Advice, goal: Goal, variations: Sequence[Variation]) -> Decision:
    """What a finished round keeps: the advice's top recommendation for ``goal`` among the
    round's variations (each against the baseline), or nothing."""
    names = {v.name for v in variations}
    mine = [r for r in advice.recommendations if r.goal == goal and r.cell in names]
    top = advice.top(goal)
    if top is not None and top.cell not in names:
        top = next((r for r in mine if r.allowed and r.improves), None)
    held = tuple(r for r in mine if r.improves and not r.allowed)
    if top is not None:
        why = f"{top.label}: {effect(top)} on {goal}"
        return Decision(top.cell, top, top, held, why)
    others = [r for r in advice.unsupported if r.goal == goal and r.cell in names and r.delta.value is not None]
    sign = 1.0 if goal.metric.higher_is_better else -1.0
    best = max(others, key=lambda r: sign * (r.delta.value or 0.0), default=None)
    why = f"nothing improved {goal} significantly"
    if best is not None:
        why += f" (best: {best.label}, {effect(best)})"
    for r in held:
        allow = ", ".join(k.value for k in r.risks)
        why += f"; {r.label} improved it ({effect(r)}) but risks data on a crash: not taken unless allowed (allow: [{allow}])"
    return Decision(None, None, best, held, why)


def risk_words(r: Recommendation) -> list[str]:
    return [f"{k.value}: {RISKS[k]}" for k in r.risks]


# ---- bounds for vmbench plan -------------------------------------------------------------------


@dataclass(frozen=True)
class Bounds:
    """The most a tune can take within its budget: rounds, boots, estimated seconds (None: the
    budget does not bound it)."""

    rounds: int
    boots: int
    seconds: float


def bounds(spec: TuneSpec, first: RoundPlan, cost: Cost) -> Bounds:
    """The most rounds, boots and estimated time the tune can take within its budget: round 1
    as planned, then as many rounds as what it leaves can pay for, each needing 2 boots and
    the time of a baseline and one variation at least, and measuring at most one variation per
    candidate value."""
    budget = spec.budget
    base = cost(first.baseline, ())
    per_variation = (first.seconds - base) / max(1, len(first.variations))
    least = base + per_variation
    most_per_round = base + per_variation * len(spec.candidates)
    limits = []
    if budget.boots is not None:
        limits.append((budget.boots - first.boots) // 2)
    if budget.seconds is not None:
        limits.append(int((budget.seconds - first.seconds) // max(1.0, least)))
    further = max(0, min(limits))  # a budget always names one limit at least
    most_boots = first.boots + further * (1 + len(spec.candidates))
    most_seconds = first.seconds + further * most_per_round
    if budget.boots is not None:
        most_boots = min(most_boots, budget.boots)
        # the boots left pay for each further round's baseline and, at most, that many variations
        variations = max(0, budget.boots - first.boots - further)
        most_seconds = min(most_seconds, first.seconds + further * base + variations * per_variation)
    if budget.seconds is not None:
        most_seconds = min(most_seconds, budget.seconds)
    return Bounds(1 + further, most_boots, most_seconds)
