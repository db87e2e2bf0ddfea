"""Where a figure moved beyond noise over a series of runs (``vmbench history``): step
detection, pure.

The series is one figure of one group (side, cell, stack, layer, job) over the runs of a
scenario, each run given as its repeats' figures of the job's metric.  A step is found by
binary segmentation, as asv finds steps over commits, but judged with the report's own
intervals (:func:`vmbench.report.stats.change`) instead of a least-squares penalty:

1. for every split of a segment of runs, the repeats of all runs before the split and of all
   runs after it are pooled, and the change of their medians gets its bootstrap interval and
   verdict (never a single repeat: fewer than 3 repeats a side get no verdict);
2. a split is a candidate when that verdict is not "within noise", the change is at least
   ``min_change``, and it is larger than every run-to-run change inside the segments either
   side (the noise the series itself shows between runs that did not step).  A side of one
   run shows none, so at least one side must hold two runs or more: two single runs cannot
   tell a step from the noise between runs, however tight each one's repeats are (runs
   under TCG, or beside another load, differ by more than their repeats do);
3. the largest candidate is a step; each side is searched again the same way.

With the repeats of several runs pooled, a side's spread holds the run-to-run variation as
well as the repeats', so a side of several runs needs a larger move than two single runs
do.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

from ..fio.job import Metric
from . import stats
from .stats import Delta

#: the smallest change of medians called a step (10%, asv's default factor of 1.1: below it a
#: move is not worth an alarm however tight the repeats are; runs under TCG wander by 3-13%)
MIN_CHANGE = 0.10


@dataclass(frozen=True)
class Step:
    """A step before run ``at`` (an index into the series): the runs ``before`` (first, end)
    and ``after`` (first, end) pooled, and their change with its interval and verdict."""

    at: int
    before: tuple[int, int]
    after: tuple[int, int]
    delta: Delta


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def _log_change(a: Sequence[float], b: Sequence[float]) -> float | None:
    """|log(median(a) / median(b))|; None when a median is not positive."""
    ma, mb = _median(a), _median(b)
    if ma <= 0 or mb <= 0:
        return None
    return abs(math.log(ma / mb))


def run_noise(samples: Sequence[Sequence[float]], first: int, end: int) -> float:
    """The largest |log change| between consecutive runs of ``samples[first:end]`` (0 for one run)."""
    out = 0.0
    for i in range(first + 1, end):
        got = _log_change(samples[i], samples[i - 1])
        if got is not None:
            out = max(out, got)
    return out


def find_steps(samples: Sequence[Sequence[float]], metric: Metric = Metric.IOPS, *, min_change: float = MIN_CHANGE) -> list[Step]:
    """The steps of a series (each run's repeats of ``metric``), in order."""
    steps: list[Step] = []
    _search(samples, 0, len(samples), metric, min_change, steps)
    return sorted(steps, key=lambda s: s.at)


def _search(samples: Sequence[Sequence[float]], first: int, end: int, metric: Metric, min_change: float, steps: list[Step]) -> None:
    best: tuple[float, Step] | None = None
    for k in range(first + 1, end):
        step = judge_split(samples, first, k, end, metric, min_change)
        if step is None:
            continue
        size = _log_change(_pool(samples, k, end), _pool(samples, first, k)) or 0.0
        if best is None or size > best[0]:
            best = (size, step)
    if best is None:
        return
    steps.append(best[1])
    _search(samples, first, best[1].at, metric, min_change, steps)
    _search(samples, best[1].at, end, metric, min_change, steps)


def _pool(samples: Sequence[Sequence[float]], first: int, end: int) -> list[float]:
    return [v for run in samples[first:end] for v in run]


def judge_split(samples: Sequence[Sequence[float]], first: int, k: int, end: int, metric: Metric = Metric.IOPS,
                min_change: float = MIN_CHANGE) -> Step | None:
    """The step before run ``k`` of the segment ``[first, end)``, or None when the runs either
    side do not differ beyond noise (see the module's rules)."""
    before, after = _pool(samples, first, k), _pool(samples, k, end)
    if not before or not after:
        return None
    size = _log_change(after, before)
    noise = [run_noise(samples, a, b) for a, b in ((first, k), (k, end)) if b - a > 1]
    if size is None or size < math.log1p(min_change) or not noise or size <= max(noise):
        return None
    delta = stats.change(after, before, metric=metric)
    if delta.verdict in (None, stats.NOISE):
        return None
    return Step(k, (first, k), (k, end), delta)
