"""Running the plan's fio steps on one target and storing each result.

One :class:`Where` value says where a measurement runs (side, target, cell, layer...);
:class:`Measurer` preconditions the target once and runs the steps given to it, checking
that the guest's fio argv is the host's for the same job (METHOD rule 2).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

from .fio.job import job_hash
from .fio.runner import precondition, run_fio
from .plan import Step
from .progress import Progress
from .results.db import ResultsDB
from .scenario.model import Cell, Scenario
from .transport.base import Transport
from .units import format_duration, format_size

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Where:
    """Where one layer's measurements run."""

    side: Transport
    side_name: str  # "host" or "guest"
    workdir: str
    target: str  # the device or file fio opens
    accelerator: str  # what ran the guest ("kvm", "tcg"); "host" on the host
    cell: Cell | None = None
    cell_id: int | None = None
    boot_id: int | None = None
    stack: str | None = None
    layer: str = "host"
    depth: int = 0
    settings: dict = field(default_factory=dict)

    @property
    def slow(self) -> bool:
        return self.side_name == "guest" and self.accelerator == "tcg"

    @property
    def label(self) -> str:
        return "host" if self.cell is None else f"{self.cell.name}: {self.layer}"


def _drop_caches(side: Transport) -> None:
    side.run(["sync"], timeout=300)
    side.write_file("/proc/sys/vm/drop_caches", b"3\n", mode=None)


class Measurer:
    def __init__(self, scenario: Scenario, db: ResultsDB, run_id: int, attempt: int, progress: Progress,
                 host_argv: dict[str, tuple[str, ...]] | None = None) -> None:
        self.scenario = scenario
        self.db = db
        self.run_id = run_id
        self.attempt = attempt
        self.progress = progress
        #: job -> the host's fio argv, which the guest's must match but for target and output
        self.host_argv: dict[str, tuple[str, ...]] = dict(host_argv or {})

    def measure(self, where: Where, steps: Sequence[Step]) -> None:
        """Precondition ``where.target`` once, then run each step on it, storing each result."""
        if not steps:
            return
        s = self.scenario
        jobs = {j.name: j for j in s.jobs}
        biggest = max(s.jobs, key=lambda j: j.size)
        self.progress.step(f"{where.label}: preconditioning {format_size(biggest.size)} of {where.target}")
        pre = precondition(where.side, biggest, where.target, where.workdir, slow=where.slow)
        log.debug("precondition %s: %s", where.target, pre)
        for i, step in enumerate(steps, 1):
            job = jobs[step.job]
            label = f"{where.label}: {job.name}" + (f" #{step.repeat}" if s.repeats > 1 else "")
            dur = job.duration
            self.progress.step(f"{label} ({i}/{len(steps)}, {format_duration(dur) if dur else '?'})")
            if not job.direct:
                _drop_caches(where.side)
            must_match = self.host_argv.get(job.name) if where.side_name == "guest" else None
            run = run_fio(where.side, job, where.target, where.workdir, label=label, progress=self.progress,
                          slow=where.slow, must_match=must_match)
            if where.side_name == "host":
                self.host_argv[job.name] = run.argv
            pcts = run.result.percentiles()
            self.db.add_measurement(
                self.run_id, cell_id=where.cell_id, boot_id=where.boot_id, attempt=self.attempt, side=where.side_name,
                stack=where.stack, layer=where.layer, depth=where.depth, job=job.name, job_params_json=job.params(),
                job_hash=job_hash(job), sync=job.is_sync, repeat=step.repeat, target=where.target, argv_json=list(run.argv),
                settings_json=where.settings, accelerator=where.accelerator, started_at=time.strftime("%Y-%m-%dT%H:%M:%S"),
                iops=run.result.iops, bw_bytes=run.result.bw_bytes, p50_ns=pcts[50.0], p95_ns=pcts[95.0], p99_ns=pcts[99.0],
                p999_ns=pcts[99.9], clat_bins_json=run.result.clat.to_json(), fio_json=run.raw_json,
            )
            self.progress.status(f"{label}: {run.result.iops:,.0f} IOPS, {run.result.bw_bytes / 1e6:,.1f} MB/s")
