"""Is a difference real?  Bootstrap intervals for the report's deltas (METHOD rule 7).

Every delta the report prints is a ratio of medians of per-repeat figures of the job's
:class:`~vmbench.fio.job.Metric` (IOPS, MB/s, or a latency percentile from each repeat's own
histogram): a cell against the baseline, a layer against the one below, a journey step
against the one before, the host against the guest.  :func:`change` and :func:`ratio` give
that ratio with a confidence interval from :func:`scipy.stats.bootstrap` (two independent
samples, ``paired=False``) and a verdict; :func:`change` words it for the metric (higher
IOPS or MB/s is faster, a higher percentile is worse).

Method: the **percentile** bootstrap, 9,999 resamples, a fixed seed (the same data always
gives the same interval).  BCa was rejected: with 3 to 10 repeats its jackknife
acceleration is often undefined (ties, constant samples) and scipy then returns NaN bounds.
The percentile interval is always defined and errs on the side of caution at small n: with
3 repeats per side the 95% interval of a ratio of medians is exactly
``[min(a)/max(b), max(a)/min(b)]``, so a change is called only when the repeats' ranges do
not overlap.  Fewer than 3 repeats on either side get no interval and no verdict.
"""

from __future__ import annotations

import functools
import inspect
import math
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from ..fio.job import Metric

if TYPE_CHECKING:
    import numpy as np

MIN_REPEATS = 3
RESAMPLES = 9999
METHOD = "percentile"

FEWER = f"fewer than {MIN_REPEATS} repeats"

# change() verdicts (higher IOPS or MB/s = faster; a latency metric's are change_words())
FASTER, SLOWER, NOISE = "faster", "slower", "within noise"
# ratio() verdicts for a host/guest gap: the host really ahead, the guest really ahead
GAP, GUEST_FASTER = "gap", "guest faster"


@functools.lru_cache(maxsize=1)
def scipy_bootstrap() -> tuple[Callable[..., Any], str]:
    """:func:`scipy.stats.bootstrap` and the name of its generator argument, imported when an
    interval is first made (scipy.stats takes about half a second to import; a report whose
    groups have fewer than 3 repeats makes none).  scipy >= 1.15 names the generator ``rng``;
    older releases (setup.cfg allows 1.10) ``random_state``."""
    from scipy import stats as sp

    return sp.bootstrap, "rng" if "rng" in inspect.signature(sp.bootstrap).parameters else "random_state"


@dataclass(frozen=True)
class Delta:
    """A ratio of medians with its interval and verdict.

    ``value`` is the point figure (a change for :func:`change`, a ratio for :func:`ratio`);
    ``low``/``high`` the interval on the same scale (None when not judged); ``verdict`` one
    of the words above (None when not judged) and ``why`` the reason, in words.
    """

    value: float | None
    low: float | None
    high: float | None
    verdict: str | None
    why: str | None

    @property
    def judged(self) -> bool:
        return self.verdict is not None


def label(metric: Metric) -> str:
    """How a table names a metric: "IOPS", "MB/s", "p99"..."""
    return {Metric.IOPS: "IOPS", Metric.MBPS: "MB/s"}.get(metric, metric.value)


def change_words(metric: Metric = Metric.IOPS) -> tuple[str, str]:
    """(the verdict when ``metric`` really went up, when it really went down): "faster" and
    "slower" for IOPS and MB/s; "higher p99, worse" and "lower p99, better" for a latency."""
    if metric.higher_is_better:
        return FASTER, SLOWER
    return f"higher {label(metric)}, worse", f"lower {label(metric)}, better"


def change(a_samples: Sequence[float], b_samples: Sequence[float], *, metric: Metric = Metric.IOPS, seed: int = 0,
           confidence: float = 0.95) -> Delta:
    """``median(a) / median(b) - 1`` (a against the reference b) of ``metric``'s per-repeat
    figures: the first of :func:`change_words` when the whole interval is above 0 ("faster"
    for IOPS), the second when below, "within noise" when it includes 0."""
    unit = label(metric) if metric.higher_is_better else f"ms ({label(metric)})"
    point, low, high, why = _ratio_of_medians(a_samples, b_samples, seed=seed, confidence=confidence, unit=unit)
    if point is None:
        return Delta(None, None, None, None, why)
    value = point - 1.0
    if low is None or high is None:
        return Delta(value, None, None, None, why)
    low, high = low - 1.0, high - 1.0
    up, down = change_words(metric)
    verdict = NOISE if low <= 0.0 <= high else up if low > 0.0 else down
    return Delta(value, low, high, verdict, why or _why(verdict, confidence, "0%"))


def ratio(a_samples: Sequence[float], b_samples: Sequence[float], *, seed: int = 0, confidence: float = 0.95,
          unit: str = "IOPS") -> Delta:
    """``median(a) / median(b)`` (a gap: host over guest, or for a latency guest over host):
    "gap" when the whole interval is above 1.0, "guest faster" when below, "within noise"
    when it includes 1.0.  ``unit`` names the figure in the reasons."""
    point, low, high, why = _ratio_of_medians(a_samples, b_samples, seed=seed, confidence=confidence, unit=unit)
    if point is None:
        return Delta(None, None, None, None, why)
    if low is None or high is None:
        return Delta(point, None, None, None, why)
    verdict = NOISE if low <= 1.0 <= high else GAP if low > 1.0 else GUEST_FASTER
    return Delta(point, low, high, verdict, why or _why(verdict, confidence, "1.00x"))


def _why(verdict: str, confidence: float, neutral: str) -> str:
    where = "includes" if verdict == NOISE else "excludes"
    return f"the {confidence * 100:g}% interval {where} {neutral}"


def _ratio_of_medians(a_samples: Sequence[float], b_samples: Sequence[float], *, seed: int, confidence: float,
                      unit: str = "IOPS") -> tuple[float | None, float | None, float | None, str | None]:
    """(point, low, high, why): the ratio of medians and its bootstrap interval; ``why`` says
    why there is no interval, or that it is the point for repeats without any spread."""
    a = [float(x) for x in a_samples]
    b = [float(x) for x in b_samples]
    if not a or not b:
        return None, None, None, "no measurements"
    mb = median(b)
    if mb == 0.0:
        return None, None, None, f"the reference median is 0 {unit}"
    point = median(a) / mb
    if min(len(a), len(b)) < MIN_REPEATS:
        return point, None, None, FEWER
    if max(a) == min(a) and max(b) == min(b):  # no spread at all: every resample is the point
        return point, point, point, "no spread in the repeats: the interval is the point"
    low, high = bootstrap_interval(a, b, _stat, seed=seed, confidence=confidence)
    if not (math.isfinite(low) and math.isfinite(high)):
        return point, None, None, f"a repeat with 0 {unit} on the reference side leaves the interval unbounded"
    return point, low, high, None


def bootstrap_interval(a: Sequence[float], b: Sequence[float], statistic: Callable[..., Any], *, seed: int,
                       confidence: float) -> tuple[float, float]:
    """The percentile-bootstrap interval of ``statistic(a, b, axis)`` (two independent samples,
    :data:`RESAMPLES` resamples, a fixed ``seed``).  numpy is imported here, with scipy: a report
    whose groups have fewer than 3 repeats makes no interval, and its figures need neither
    (numpy takes a tenth of a second to import)."""
    import numpy as np

    with warnings.catch_warnings(), np.errstate(divide="ignore", invalid="ignore"):
        warnings.simplefilter("ignore")  # scipy's DegenerateDataWarning; bounds are checked by the caller
        bootstrap, rng_kw = scipy_bootstrap()
        res = bootstrap((np.asarray(a, dtype=float), np.asarray(b, dtype=float)), statistic, paired=False, vectorized=True,
                        n_resamples=RESAMPLES, confidence_level=confidence, method=METHOD, **{rng_kw: np.random.default_rng(seed)})
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def median(x: Sequence[float]) -> float:
    """``float(np.median(x))`` of a few figures, without numpy: the middle one, or the two
    middle ones' sum halved, as numpy computes it (np.median takes 10 µs even for one figure,
    and a run asks it for every delta)."""
    s = sorted(x)
    n = len(s)
    return float(s[n // 2]) if n % 2 else float((s[n // 2 - 1] + s[n // 2]) / 2)


def _stat(a: "np.ndarray", b: "np.ndarray", axis: int = -1) -> "np.ndarray":
    import numpy as np

    return np.median(a, axis=axis) / np.median(b, axis=axis)


def describe_method(confidence: float = 0.95, metrics: Iterable[Metric] = ()) -> str:
    """One line for a table's notes: how the intervals were made, on the ``metrics`` the
    table judges by (none given: IOPS)."""
    used = list(dict.fromkeys(metrics)) or [Metric.IOPS]
    of = "median IOPS" if used == [Metric.IOPS] else "medians of each repeat's " + " / ".join(label(m) for m in used)
    own = "; a repeat's latency percentile from its own histogram" if any(not m.higher_is_better for m in used) else ""
    return (f"[low, high] = {confidence * 100:g}% bootstrap interval of the ratio of {of} "
            f"({METHOD} method, {RESAMPLES:,} resamples of the repeats, fixed seed{own}); "
            f"'within noise' when it includes no change; {MIN_REPEATS} or more repeats on both sides are needed for a verdict.")
