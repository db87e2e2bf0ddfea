"""A figure's tick locators fixed to the ticks it draws, before it is saved (a third of the time
to draw a figure went into ticks beyond the axes' limits that matplotlib makes and leaves out)."""

from __future__ import annotations

from typing import Any

import numpy as np
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter, ScalarFormatter


def drawn_ticks_only(axis: Any) -> None:
    """The axis's tick locators fixed to the ticks it draws.  A locator also places ticks
    beyond the axis's limits, which matplotlib makes (a tick is two lines, two texts and a grid
    line: a third of the time to draw a figure) and then leaves out; the SVG is the same.  Left
    as they are: fixed ticks (their labels are by position), and ticks whose labels depend on
    their neighbours' (a :class:`ScalarFormatter` whose labels or offset would change)."""
    low, high = sorted(axis.get_view_interval())  # the limits, autoscaled by now
    transform = axis.get_transform()
    low_t, high_t = sorted(transform.transform([low, high]))
    slack = (high_t - low_t) * 1e-10  # matplotlib's own test of a drawn tick (Axis._update_ticks)

    def drawn(locs: Any) -> list[float]:
        return [loc for loc, t in zip(locs, transform.transform(np.asarray(locs, dtype=float)))
                if low_t - slack <= t <= high_t + slack]

    major, minor = axis.get_major_locator(), axis.get_minor_locator()
    minor_locs = None
    if isinstance(axis.get_minor_formatter(), NullFormatter) and not isinstance(minor, FixedLocator):
        minor_locs = list(axis.get_minorticklocs())  # less those at a major tick, as drawn
    formatter = axis.get_major_formatter()
    if not isinstance(major, FixedLocator) and isinstance(formatter, (FuncFormatter, NullFormatter, ScalarFormatter)):
        locs = list(major())
        keep = drawn(locs)
        if len(keep) < len(locs) and _same_labels(formatter, locs, keep):
            axis.set_major_locator(FixedLocator(keep))
    if minor_locs is not None:
        keep = drawn(minor_locs)
        if len(keep) < len(minor_locs):
            axis.set_minor_locator(FixedLocator(keep))


def _same_labels(formatter: Any, locs: list[float], keep: list[float]) -> bool:
    """Whether the drawn ticks get the labels they get among all the locator's ticks."""
    if not isinstance(formatter, ScalarFormatter):
        return True  # a FuncFormatter here reads the value alone (THOUSANDS_FORMAT, MS_FORMAT)
    every = dict(zip(locs, formatter.format_ticks(locs)))
    offset = formatter.get_offset()
    return formatter.format_ticks(keep) == [every[x] for x in keep] and formatter.get_offset() == offset
