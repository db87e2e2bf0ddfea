"""The scenario's targets judged: each target against every group of rows it names (its job,
and its cell, stack and layer where it names them), from the figures of :mod:`.rows`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..fio.job import Metric
from ..results.records import Measurement
from ..scenario.model import Target
from .rows import Figures, aggregate, group, metric_of


@dataclass(frozen=True)
class TargetResult:
    target: Target
    cell: str | None
    stack: str | None
    layer: str
    job: str
    figures: Figures
    passed: bool
    failures: tuple[str, ...]
    metric: Metric = Metric.IOPS  # what the job is judged by (a latency one is shown beside the targets)


def target_results(measurements: Sequence[Measurement], targets: Sequence[Target],
                   metrics: Mapping[str, Metric] | None = None) -> list[TargetResult]:
    groups = group(measurements)
    out = []
    for t in targets:
        for k, rows in groups.items():
            if k.side != "guest" or k.job != t.job:
                continue
            if t.cell and k.cell != t.cell:
                continue
            if t.stack and k.stack != t.stack:
                continue
            if t.layer:
                if k.layer != t.layer:
                    continue
            elif k.stack is None and any(o.stack is not None for o in groups if o.cell == k.cell and o.job == k.job):
                continue  # without a layer, targets judge the stacks' layers, not the raw disk
            fig = aggregate(rows)
            failures = []
            if t.min_mb_s is not None and fig.mb_s < t.min_mb_s:
                failures.append(f"{fig.mb_s:.1f} MB/s < {t.min_mb_s:g}")
            if t.min_iops is not None and fig.iops < t.min_iops:
                failures.append(f"{fig.iops:.0f} IOPS < {t.min_iops:g}")
            if t.max_p99_ms is not None:
                if fig.p99_ms is None:
                    failures.append("no latency histogram to judge p99")
                elif fig.p99_ms > t.max_p99_ms:
                    failures.append(f"p99 {fig.p99_ms:.2f} ms > {t.max_p99_ms:g}")
            out.append(TargetResult(t, k.cell, k.stack, k.layer, k.job, fig, not failures, tuple(failures),
                                    metric_of(k.job, rows, metrics)))
    return out
