"""Fitting a table into a terminal's width: which columns to keep, which to wrap and to what
width.  No import beyond the standard library, so the command's plans and checks (``vmbench
plan``, ``vmbench doctor``) fit their tables as the report does without loading the report.
:mod:`vmbench.report.render` fits the report's tables with it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence

#: the width the text report, plans and checks fit (a 120-column terminal) unless asked for ``wide``
WIDTH = 120
#: tabulate's room beside a header (its ``MIN_PADDING``)
HEADER_PAD = 2
#: a wrapped text column keeps at least this many characters a line
MIN_WRAP = 16


class FitColumn(Protocol):
    """What fitting reads of a column (:class:`vmbench.report.tables.Column` is one)."""

    @property
    def header(self) -> str: ...

    @property
    def detail(self) -> bool: ...

    @property
    def keep(self) -> bool: ...


@dataclass(frozen=True)
class Fit:
    """How a table is printed in a terminal: the columns kept (indexes), the width each text
    column is wrapped to (None: as is) and the headers of the columns left out."""
    kept: tuple[int, ...]
    wrap: tuple[int | None, ...]
    hidden: tuple[str, ...]


def fit_columns(columns: Sequence[FitColumn], cells: Sequence[Sequence[str]], width: int,
                floors: Sequence[int] = ()) -> Fit:
    """Fit a table into ``width`` columns: leave out its detail columns from the right, then
    wrap its longest text columns (to no less than :data:`MIN_WRAP`, nor than a column's
    ``floors``: its longest word, where words are never cut), then leave out more columns
    from the right (never the first two, never one to keep) until it fits."""
    widths = [max([len(c.header) + HEADER_PAD] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    kept = list(range(len(widths)))

    def total(w: Sequence[int]) -> int:
        return sum(w[i] for i in kept) + 2 * (len(kept) - 1)

    for i in reversed(range(len(widths))):
        if total(widths) > width and columns[i].detail:
            kept.remove(i)
    wrapped = list(widths)
    floor = [max(MIN_WRAP, len(c.header) + HEADER_PAD, floors[i] if i < len(floors) else 0) for i, c in enumerate(columns)]
    while total(wrapped) > width:
        shrinkable = [k for k in kept if wrapped[k] > floor[k]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: wrapped[k])
        wrapped[i] = max(floor[i], wrapped[i] - (total(wrapped) - width))
    for i in reversed(kept[2:]):
        if total(wrapped) > width and not columns[i].keep:
            kept.remove(i)
    wrap = tuple(wrapped[i] if wrapped[i] < widths[i] else None for i in kept)
    return Fit(tuple(kept), wrap, tuple(columns[i].header for i in range(len(widths)) if i not in kept))
