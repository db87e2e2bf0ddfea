"""fio's completion-latency histogram: the one place its percentile rule, its merging and the
percentiles vmbench reports are written.

fio's json+ keeps, per direction, the completion-latency bins (``clat_ns.bins``: bucket value
in ns -> count).  A percentile is the value fio itself would report: the first bucket whose
cumulative count reaches p% of all samples (fio's stat.c ``calc_clat_percentiles``).  Bins
merged (each bucket's counts summed) give exact percentiles across jobs, directions, repeats
and VMs, where averaging percentiles would be wrong (METHOD rule 5).  The runner, the stored
records, the report's tables and plots, ``compare`` and ``history`` all read percentiles
here.
"""

from __future__ import annotations

import bisect
import itertools
import json
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Sequence

#: the percentiles vmbench stores and reports (p50, p95, p99, p99.9)
PERCENTILES = (50.0, 95.0, 99.0, 99.9)
P50, P95, P99, P999 = PERCENTILES


@dataclass(frozen=True)
class Histogram:
    """Completion latency bins: {bucket value in ns: count}."""

    bins: Mapping[int, int] = field(default_factory=dict)

    @property
    def count(self) -> int:
        return sum(self.bins.values())

    def merge(self, other: "Histogram") -> "Histogram":
        """Both histograms' bins, each bucket's counts summed."""
        return Histogram.merged((self, other))

    @classmethod
    def merged(cls, hists: Iterable["Histogram"]) -> "Histogram":
        """The histograms' bins summed bucket by bucket (one histogram alone is itself)."""
        hists = list(hists)
        if len(hists) == 1:
            return hists[0]
        out: dict[int, int] = {}
        for h in hists:
            for value, n in h.bins.items():
                out[value] = out.get(value, 0) + n
        return cls(out)

    def percentile(self, p: float) -> int | None:
        """The value fio itself would report for percentile ``p`` (0..100): the first bucket
        whose cumulative count reaches p% of all samples; None without samples."""
        return self.percentiles((p,))[0]

    def percentiles(self, ps: Sequence[float] = PERCENTILES) -> list[int | None]:
        """:meth:`percentile` of each of ``ps``, the bins sorted and summed once."""
        bins = self.bins
        if not bins:
            return [None for _ in ps]
        if min(bins.values()) < 0:  # counts no cumulative sum orders: bucket by bucket, as fio walks them
            return [self._walk(p) for p in ps]
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

    def _walk(self, p: float) -> int | None:
        total = self.count
        if total == 0:
            return None
        threshold = p / 100.0 * total
        running = 0
        for value in sorted(self.bins):
            running += self.bins[value]
            if running >= threshold:
                return value
        return max(self.bins)

    def percentiles_ms(self, ps: Sequence[float] = PERCENTILES) -> list[float | None]:
        """:meth:`percentiles` in milliseconds."""
        return [None if v is None else v / 1e6 for v in self.percentiles(ps)]

    def to_json(self) -> dict[str, int]:
        return {str(k): v for k, v in sorted(self.bins.items())}

    @classmethod
    def from_json(cls, data: Mapping[str, int]) -> "Histogram":
        return cls(dict(zip(map(int, data), map(int, data.values()))))

    @classmethod
    def from_text(cls, text: str | None) -> "Histogram":
        """The bins as a results database stores them (``clat_bins_json``); none for no text."""
        data = json.loads(text) if text else {}
        return cls.from_json(data) if isinstance(data, dict) else cls()
