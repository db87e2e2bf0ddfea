"""The contract of advice: what the user asks (:class:`Goal`), what a setting risks
(:class:`Risk`), both defined with the scenario (:mod:`vmbench.scenario.goals`, since scenarios
name them) and re-exported here, and what the advice answers (:class:`Recommendation`,
:class:`Advice`).

Plain frozen dataclasses, no logic beyond parsing: :mod:`vmbench.advice.rank` fills them from a
stored run, :mod:`vmbench.tune` reads them to choose its next baseline, the report and the CLI
render them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..report.stats import Delta
from ..scenario.goals import RISKS, Goal, GoalMetric, Risk

__all__ = ["NOT_MEASURED", "RISKS", "Advice", "Change", "Goal", "GoalMetric", "Recommendation", "Risk", "Snippet"]

#: joins a goal and what it did not measure in ``Advice.not_tried`` ("GOAL: not measured: WHAT")
NOT_MEASURED = ": not measured: "


@dataclass(frozen=True)
class Change:
    """One setting between two measured cells, as stored (``settings_of(vm)`` keys and values,
    or a stack's layer for a layer change)."""

    axis: str
    before: object
    after: object

    def __str__(self) -> str:
        return f"{self.axis}: {_v(self.before)} -> {_v(self.after)}"


def _v(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else str(value)


@dataclass(frozen=True)
class Recommendation:
    """One measured change and its effect on one goal.

    ``delta`` is ``cell`` against ``reference`` on the goal's metric, with its interval and
    verdict (:mod:`vmbench.report.stats`; for CPU per I/O, :mod:`vmbench.report.cpurows`).
    ``improves``: the verdict is significant and in the goal's direction.  ``allowed``: the
    change carries no risk, or every risk it carries was allowed by name."""

    goal: Goal
    job: str
    cell: str  # the cell with the change
    reference: str  # the cell it is compared with: the baseline, or the journey's step before
    changes: tuple[Change, ...]
    value: float | None  # the goal's figure in ``cell`` (IOPS, MB/s, ms, µs/IO)
    reference_value: float | None  # and in ``reference``
    delta: Delta
    repeats: int  # the fewer of the two cells' repeats
    improves: bool
    evidence: tuple[str, ...] = ()  # telemetry that explains the effect, in words
    risks: tuple[Risk, ...] = ()
    allowed: bool = True
    settings: Mapping[str, object] = field(default_factory=dict)  # ``cell``'s stored settings (what to apply)
    unit: str = ""  # "IOPS", "MB/s", "ms (p99)", "µs/IO"
    suspect: str | None = None  # why the measurement cannot be trusted (never the recommendation then)

    @property
    def label(self) -> str:
        return ", ".join(str(c) for c in self.changes) or self.cell


@dataclass(frozen=True)
class Snippet:
    """The exact way to apply settings to a user's VM: ``kind`` "proxmox" (a ``qm set`` argv,
    shown with shlex.join) or "libvirt" (a ``<disk>`` element and, for the CPU, a ``<cpu>``
    element to put in the domain XML) or "zfs" (``zfs set`` argv).  vmbench never runs it."""

    kind: str
    text: str
    note: str = ""


@dataclass(frozen=True)
class Advice:
    """The answer for one run: per goal, the ranked improvements (the first allowed one is the
    recommendation), the changes the evidence does not support, what was not tried that
    commonly matters for the goal, where the best cell stands ("is my number good?"), and the
    snippets that apply the recommendation."""

    run: str
    goals: tuple[Goal, ...]
    recommendations: tuple[Recommendation, ...]  # improving, ranked: allowed first, then by effect
    unsupported: tuple[Recommendation, ...]  # within noise, worse, or not judged (fewer repeats)
    not_tried: tuple[str, ...]
    standing: tuple[str, ...]  # "best cell iothread=on: 71% of the host on the same storage (4k-randread IOPS)"
    apply: tuple[Snippet, ...] = ()
    notes: tuple[str, ...] = ()  # the accelerator, the load, why a goal could not be judged
    driver: str = ""  # the run's hypervisor driver: libvirt, proxmox, none (host only); its snippets come first
    next_run: str = ""  # "run `vmbench tune scenarios/tune.yaml` next: it tries ...": a shipped scenario measuring what was not tried

    def top(self, goal: Goal | None = None) -> Recommendation | None:
        """The recommendation: the first allowed improvement whose measurement is not suspect (for
        ``goal``, or any)."""
        return next((r for r in self.recommendations
                     if r.allowed and r.improves and not r.suspect and (goal is None or r.goal == goal)), None)
