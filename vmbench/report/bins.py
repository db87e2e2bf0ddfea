"""Each measurement's stored latency histogram, made once.

A run's measurement rows are aggregated by several tables and drawn by the latency plots;
converting a repeat's stored bins (``clat_bins``: {"ns": count}) into a
:class:`~vmbench.fio.result.Histogram` and sorting them for each percentile cost more than
the rest of its figures.  :func:`~vmbench.report.load.load_run` stores each row's bins as
:class:`StoredBins`, which keep their Histogram once made; :func:`merged` merges a group's
repeats (the sums of :meth:`Histogram.merge`, without a copy per repeat) and
:func:`percentiles` reads several percentiles by :meth:`Histogram.percentile`'s rule with
the bins sorted once.  Nothing here computes another figure than Histogram's own.
"""

from __future__ import annotations

import bisect
import itertools
import json
from typing import Any, Mapping, Sequence

from ..fio.result import Histogram
from ..results.db import LazyJson


class StoredBins(LazyJson):
    """A measurement's stored clat bins: as stored, a dict decoded when read as one
    (:class:`~vmbench.results.db.LazyJson`), and the :class:`Histogram` made from them, once."""

    __slots__ = ("_histogram",)

    @classmethod
    def of(cls, text: str) -> Any:
        """The stored column's text as StoredBins (a value that is no JSON object decoded now)."""
        return cls(text) if text.startswith("{") else json.loads(text)

    def histogram(self) -> Histogram:
        try:
            return self._histogram
        except AttributeError:
            # Histogram.from_json's {int(k): int(v)}, in C loops; the bins as stored only decoded
            # for it, not kept (nothing else reads them in a report)
            bins = json.loads(self.pending) if self.pending is not None else self
            self._histogram: Histogram = Histogram(dict(zip(map(int, bins), map(int, bins.values()))))
            return self._histogram


def histogram_of(row: Mapping) -> Histogram:
    """The measurement's clat histogram (made once when its bins are :class:`StoredBins`)."""
    bins = row["clat_bins"]
    return bins.histogram() if isinstance(bins, StoredBins) else Histogram.from_json(bins)


def merged(rows: Sequence[Mapping]) -> Histogram:
    """The rows' histograms merged: each bin's counts summed, as ``Histogram().merge(a).merge(b)...``."""
    if len(rows) == 1:
        return histogram_of(rows[0])
    out: dict[int, int] = {}
    for r in rows:
        for value, n in histogram_of(r).bins.items():
            out[value] = out.get(value, 0) + n
    return Histogram(out)


def percentiles(hist: Histogram, ps: Sequence[float]) -> list[int | None]:
    """``hist.percentile(p)`` for each of ``ps`` (fio's rule: the first bucket whose
    cumulative count reaches p% of all samples), the bins sorted and summed once."""
    bins = hist.bins
    if not bins or min(bins.values()) < 0:  # no samples, or counts no cumulative sum orders: Histogram's own loop
        return [hist.percentile(p) for p in ps]
    total = sum(bins.values())
    if total == 0:
        return [None for _ in ps]
    values = sorted(bins)
    running = list(itertools.accumulate(map(bins.__getitem__, values)))
    out: list[int | None] = []
    for p in ps:
        i = bisect.bisect_left(running, p / 100.0 * total)
        out.append(values[i] if i < len(values) else max(bins))
    return out
