"""A run's gap and layer rows (:mod:`.rows`), each made once however often they are read: the
report's tables read them, then the advice section reads the same rows again per job and
goal, and a sweep's curves read the gap rows too (each a second pass over every group of
1,000 cells before: a third of the text report's time).

:class:`RunRows` holds the run's groups, and makes the gap rows of one job on one metric and
the rows of one stack of one cell, job and metric when first asked; the rows of several jobs
are those, in :func:`~vmbench.report.rows.gap_rows`'s and :func:`~vmbench.report.rows.layer_rows`'s
order, the same rows as theirs.  Rows are frozen: readers share them.
"""

from __future__ import annotations

import functools
from typing import Mapping, Sequence

from ..fio.job import Metric
from ..results.key import MeasurementKey
from ..results.records import CellRecord, Measurement
from .rows import Figures, Row, chain_rows, first_groups, group, job_gap_rows, layer_chains, metric_of


class RunRows:
    """The gap and layer rows of ``measurements`` in ``cells`` (a run's valid cells), by job and
    metric (``metrics``: as the functions of :mod:`.rows` take them)."""

    def __init__(self, measurements: Sequence[Measurement], cells: Sequence[CellRecord], host_memory_bytes: int | None = None) -> None:
        self.measurements = measurements
        self.cells = cells
        self.host_memory_bytes = host_memory_bytes
        self._gaps: dict[tuple[str, Metric], list[Row]] = {}
        self._stacks: dict[tuple[str, str, str, Metric], list[Row]] = {}
        self._gap_hosts: dict[tuple, Figures] = {}
        self._layer_hosts: dict[tuple, Figures] = {}

    @functools.cached_property
    def groups(self) -> dict[MeasurementKey, list[Measurement]]:
        return group(self.measurements)

    @functools.cached_property
    def firsts(self) -> dict[str, list[Measurement]]:
        return first_groups(self.groups)

    def metric(self, job: str, metrics: Mapping[str, Metric] | None) -> Metric:
        return metric_of(job, self.firsts.get(job), metrics)

    def gaps(self, jobs: Sequence[str], metrics: Mapping[str, Metric] | None = None) -> list[Row]:
        """:func:`~vmbench.report.rows.gap_rows` of ``jobs``."""
        out: list[Row] = []
        for job in jobs:
            key = (job, self.metric(job, metrics))
            if key not in self._gaps:
                self._gaps[key] = job_gap_rows(self.groups, self.cells, job, key[1], self.host_memory_bytes, self._gap_hosts)
            out += self._gaps[key]
        return out

    def layers(self, jobs: Sequence[str], metrics: Mapping[str, Metric] | None = None) -> list[Row]:
        """:func:`~vmbench.report.rows.layer_rows` of ``jobs``."""
        out: list[Row] = []
        for cell, stack, job, chain in layer_chains(self.groups, self.cells, jobs):
            metric = self.metric(job, metrics)
            key = (cell.name, stack, job, metric)
            if key not in self._stacks:
                self._stacks[key] = chain_rows(self.groups, self._layer_hosts, cell, stack, job, metric, chain)
            out += self._stacks[key]
        return out
