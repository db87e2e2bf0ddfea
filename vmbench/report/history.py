"""One scenario's runs over time (``vmbench history``): each figure run by run, its change from
the previous comparable run, the steps where it moved beyond noise and what changed in the
stored environment there.  Pure: stored runs in, a :class:`History` out.

Which runs and rows are comparable is decided by ``vmbench compare``'s rules
(:mod:`.across_runs`): the same groups (invalid cells left out, a load step as its aggregate),
the same fio parameters, layer and accelerator, and, run by run, a pair that is not the same
experiment is refused with the difference named.  ``compare`` also refuses another host's
runs; history keeps one machine (the latest run's ``hostname``, and node on Proxmox) and
leaves the others out, while its kernel, CPU, QEMU and fio are what history follows across
an upgrade: a change there is named at the step it caused (:mod:`.envdiff`), as
``compare --allow-other-host`` would compare them.  Runs that did not finish (``failed``,
``interrupted``, ``running``) are left out, each with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..fio.job import Metric
from ..results.db import RunRow
from ..results.key import MeasurementKey
from ..results.records import BootRecord, CellRecord, Measurement
from . import stats
from .across_runs import groups_of, job_metric, refusal_of
from .envdiff import Change, differences, run_environment, short_environment
from .rows import Figures, aggregate, judge_change
from .steps import MIN_CHANGE, find_steps


@dataclass(frozen=True)
class HistoryRun:
    """A stored run as history reads it: the run, its measurements as stored, its cells and boots."""

    run: RunRow
    measurements: Sequence[Measurement]
    cells: Sequence[CellRecord]
    boots: Sequence[BootRecord] = ()


@dataclass(frozen=True)
class RunInfo:
    """A run in the history: its label (``#ID``), date, flattened environment (:func:`run_environment`)."""

    id: int
    tag: str
    started_at: str
    environment: Mapping[str, Any]

    @property
    def label(self) -> str:
        return f"#{self.id}"

    @property
    def date(self) -> str:
        return self.started_at[:10]

    @property
    def short(self) -> str:
        return short_environment(self.environment)


@dataclass(frozen=True)
class Point:
    """One run's figure of a series: its figures, the judged metric's median and its interval
    (the 95% bootstrap interval of the median of its repeats; None below 3 repeats), its change
    from the previous comparable point (None for the first of a segment), and why it was not
    compared with the previous point (a new segment starts there)."""

    run: int  # index into History.runs
    figures: Figures
    value: float | None
    low: float | None
    high: float | None
    change: stats.Delta | None = None
    refused: str | None = None


@dataclass(frozen=True)
class Step:
    """A step in a series before point ``at`` (an index into the series' points): the runs
    pooled either side, the change with its interval and verdict, and what changed in the
    stored environment between the runs either side (empty: nothing recorded changed)."""

    at: int
    before: tuple[int, ...]  # run indices
    after: tuple[int, ...]
    delta: stats.Delta
    changes: tuple[Change, ...]


@dataclass(frozen=True)
class Series:
    """One group (side, cell, stack, layer, job, load step) over the runs, judged by ``metric``."""

    key: MeasurementKey
    metric: Metric
    points: tuple[Point, ...]
    steps: tuple[Step, ...] = ()

    @property
    def title(self) -> str:
        k = self.key
        where = "host" if k.side == "host" else ", ".join(filter(None, [f"cell {k.cell}" if k.cell else None,
                                                                         f"stack {k.stack}" if k.stack else None, k.layer]))
        step = f", load step {k.load_step}" + (" aggressors" if k.vm else "") if k.load_step else ""
        return f"{k.job} · {k.side} · {where}{step}"


@dataclass(frozen=True)
class History:
    scenario: str
    runs: tuple[RunInfo, ...]
    series: tuple[Series, ...]
    left_out: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def steps(self) -> list[tuple[Series, Step]]:
        return [(s, st) for s in self.series for st in s.steps]


def median_interval(samples: Sequence[float], confidence: float = 0.95) -> tuple[float | None, float | None]:
    """The bootstrap interval of the median of one run's repeats (percentile method, fixed
    seed, as :mod:`.stats`); (None, None) below :data:`stats.MIN_REPEATS` repeats."""
    a = np.asarray(list(samples), dtype=float)
    if a.size < stats.MIN_REPEATS:
        return None, None
    if np.ptp(a) == 0.0:
        return float(a[0]), float(a[0])
    bootstrap, rng_kw = stats.scipy_bootstrap()
    res = bootstrap((a,), np.median, vectorized=True, n_resamples=stats.RESAMPLES, confidence_level=confidence,
                    method=stats.METHOD, **{rng_kw: np.random.default_rng(0)})
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def _machine(run: RunRow) -> tuple:
    env = run.environment
    return (env.hostname, env.pve_node)


def select_runs(runs: Sequence[HistoryRun]) -> tuple[list[HistoryRun], list[str]]:
    """The runs a history follows (finished, on the latest run's machine, with measurements)
    and why each other run was left out."""
    left: list[str] = []
    done = [r for r in runs if r.run.status == "ok" and r.measurements]
    for r in runs:
        if r.run.status != "ok":
            left.append(f"run {r.run.id} ({r.run.tag}, {r.run.started_at[:10]}): status {r.run.status}"
                        + (" (still running, or killed)" if r.run.status == "running" else "; its measurements are partial"))
        elif not r.measurements:
            left.append(f"run {r.run.id} ({r.run.tag}): no measurements")
    if not done:
        return [], left
    here = _machine(done[-1].run)
    kept = []
    for r in done:
        if _machine(r.run) != here:
            left.append(f"run {r.run.id} ({r.run.tag}): another machine: hostname {r.run.environment.hostname!r}"
                        + (f", node {r.run.environment.pve_node!r}" if here[1] or r.run.environment.pve_node else "")
                        + f", the latest run's is {here[0]!r}" + (f", node {here[1]!r}" if here[1] else ""))
        else:
            kept.append(r)
    return kept, left


def build_history(scenario: str, runs: Sequence[HistoryRun], *, min_change: float = MIN_CHANGE) -> History:
    """The history of ``runs`` (oldest first), each series with its steps."""
    kept, left_out = select_runs(runs)
    infos = tuple(RunInfo(r.run.id, r.run.tag, r.run.started_at, run_environment(r.run.environment, r.boots)) for r in kept)
    groups = [groups_of(r.measurements, r.cells, r.run.plan.load) for r in kept]
    inputs = [(r.run, r.measurements, r.cells) for r in kept]
    keys: list[MeasurementKey] = []
    for g in groups:
        keys += [k for k in g if k not in keys]
    series = []
    latest = len(kept) - 1
    for key in keys:
        first = next(g[key] for g in groups if key in g)
        metric = job_metric(key.job, inputs, latest, first)
        series.append(_series(key, metric, groups, infos, min_change))
    return History(scenario, infos, tuple(series), tuple(left_out))


def _series(key: MeasurementKey, metric: Metric, groups: Sequence[Mapping[MeasurementKey, list[Measurement]]],
            infos: Sequence[RunInfo], min_change: float) -> Series:
    points: list[Point] = []
    prev: tuple[int, list[Measurement], Figures] | None = None
    for i, g in enumerate(groups):
        rows = g.get(key)
        if not rows:
            continue
        fig = aggregate(rows)
        low, high = median_interval(fig.samples_of(metric))
        change, refused = None, None
        if prev is not None:
            refused = refusal_of(key, prev[1], rows, prev[2], fig, infos[prev[0]].label, infos[i].label)
            if refused is None and (fig.saturated or prev[2].saturated):
                refused = f"{key.describe()}: {infos[i].label if fig.saturated else infos[prev[0]].label} {fig.saturated or prev[2].saturated}"
            if refused is None:
                change = judge_change(fig, prev[2], metric)
        points.append(Point(i, fig, fig.value_of(metric), low, high, change, refused))
        prev = (i, rows, fig)
    return Series(key, metric, tuple(points), tuple(_steps(points, metric, infos, min_change)))


def _steps(points: Sequence[Point], metric: Metric, infos: Sequence[RunInfo], min_change: float) -> list[Step]:
    """The steps within each comparable segment of ``points``."""
    out: list[Step] = []
    starts = [i for i, p in enumerate(points) if i == 0 or p.refused is not None] + [len(points)]
    for first, end in zip(starts, starts[1:]):
        seg = points[first:end]
        for st in find_steps([p.figures.samples_of(metric) for p in seg], metric, min_change=min_change):
            before, after = seg[st.at - 1].run, seg[st.at].run
            out.append(Step(first + st.at, tuple(p.run for p in seg[st.before[0]:st.before[1]]),
                            tuple(p.run for p in seg[st.after[0]:st.after[1]]), st.delta,
                            tuple(differences(infos[before].environment, infos[after].environment))))
    return out
