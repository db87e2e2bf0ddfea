"""Bootstrap intervals and verdicts of the report's deltas (vmbench.report.stats), on fixed
samples: bounds are asserted from the fixed seed, verdicts at their edges."""

import dataclasses
import math

import pytest

from vmbench.report import stats
from vmbench.report.stats import Delta, change, ratio

A6 = [1050.0, 1100.0, 1080.0, 1120.0, 1070.0, 1090.0]
B6 = [1000.0, 1020.0, 990.0, 1010.0, 1005.0, 995.0]


def test_change_interval_from_the_fixed_seed():
    d = change(A6, B6)
    assert d.value == pytest.approx(1085.0 / 1002.5 - 1)
    assert d.low == pytest.approx(0.05706, abs=5e-5) and d.high == pytest.approx(0.10831, abs=5e-5)
    assert d.verdict == "faster" and d.why == "the 95% interval excludes 0%"
    assert change(A6, B6) == d  # reproducible
    other = change(A6, B6, seed=1)  # another seed: another (close) interval, same point
    assert other.value == d.value and other.low == pytest.approx(0.05473, abs=5e-5) and other.high == pytest.approx(0.10723, abs=5e-5)
    slower = change(B6, A6)
    assert slower.verdict == "slower" and slower.high < 0 < -slower.high


def test_three_repeats_interval_is_the_non_overlap_of_ranges():
    # with 3 repeats a side the 95% percentile interval is [min(a)/max(b), max(a)/min(b)] - 1
    d = change([1100.0, 1200.0, 1150.0], [1000.0, 1010.0, 990.0])
    assert d.low == pytest.approx(1100 / 1010 - 1, rel=1e-9) and d.high == pytest.approx(1200 / 990 - 1, rel=1e-9)
    assert d.verdict == "faster"


def test_ratio_gap_interval():
    d = ratio([40000.0, 41000.0, 39500.0, 40500.0, 40200.0], [8000.0, 8200.0, 7900.0, 8100.0, 8050.0])
    assert d.value == pytest.approx(40200 / 8050)
    assert d.low == pytest.approx(4.878, abs=5e-4) and d.high == pytest.approx(5.125, abs=5e-4)
    assert d.verdict == "gap" and d.why == "the 95% interval excludes 1.00x"
    assert ratio([8000.0, 8200.0, 7900.0], [40000.0, 41000.0, 39500.0]).verdict == "guest faster"
    assert ratio([1.0, 2.0, 3.0], [1.0, 2.0, 3.0]).verdict == "within noise"


def test_interval_touching_zero_is_within_noise():
    d = change([1000.0, 1100.0, 1200.0], [1000.0, 900.0, 950.0])
    assert d.low == 0.0 and d.high == pytest.approx(1 / 3, abs=1e-4)
    assert d.verdict == "within noise" and d.why == "the 95% interval includes 0%"
    # the gap's edge is 1.0
    g = ratio([1000.0, 1100.0, 1200.0], [1000.0, 900.0, 950.0])
    assert g.low == 1.0 and g.verdict == "within noise"


def test_identical_samples():
    same = change([5.0, 5.0, 5.0], [5.0, 5.0, 5.0])
    assert (same.value, same.low, same.high, same.verdict) == (0.0, 0.0, 0.0, "within noise")
    assert same.why == "no spread in the repeats: the interval is the point"
    up = change([6.0, 6.0, 6.0], [5.0, 5.0, 5.0])
    assert up.low == up.high == up.value == pytest.approx(0.2) and up.verdict == "faster"
    spread_same = change(A6, A6)
    assert spread_same.value == 0.0 and spread_same.low < 0 < spread_same.high and spread_same.verdict == "within noise"


def test_two_repeats_no_verdict_three_repeats_verdict():
    two = change([1100.0, 1200.0], [1000.0, 1010.0])
    assert two == Delta(pytest.approx(1150 / 1005 - 1), None, None, None, "fewer than 3 repeats")
    assert ratio([1.0, 2.0, 3.0], [1.0, 2.0]).verdict is None and ratio([1.0, 2.0, 3.0], [1.0, 2.0]).why == stats.FEWER
    three = change([1100.0, 1200.0, 1150.0], [1000.0, 1010.0, 990.0])
    assert three.verdict == "faster" and three.low is not None


def test_zeros_do_not_crash():
    dead = change([0.0, 0.0, 0.0], [5.0, 5.0, 5.0])
    assert (dead.value, dead.low, dead.high, dead.verdict) == (-1.0, -1.0, -1.0, "slower")
    none = change([0.0, 0.0, 0.0], [0.0, 0.0, 0.0])
    assert none.value is None and none.verdict is None and "median is 0" in none.why
    assert ratio([1.0, 2.0, 3.0], [0.0, 0.0, 1.0]).value is None
    # a zero repeat in the reference makes some resampled medians 0: no interval, no crash
    holed = change([1.0, 2.0, 3.0], [0.0, 5.0, 5.0])
    assert holed.value == pytest.approx(-0.6) and holed.low is None and holed.verdict is None and "unbounded" in holed.why
    assert change([], [1.0]).why == "no measurements"


def test_delta_is_frozen_and_finite():
    d = change(A6, B6)
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.value = 0.0  # type: ignore[misc]
    assert all(math.isfinite(x) for x in (d.value, d.low, d.high)) and d.judged
    assert stats.METHOD == "percentile" and "percentile method" in stats.describe_method()
