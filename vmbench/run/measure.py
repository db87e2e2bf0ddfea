"""Running the plan's fio steps on one target and storing each result.

One :class:`Where` value says where a measurement runs (side, target, cell, layer...);
:class:`Measurer` preconditions the target once and runs the steps given to it, checking
that the guest's fio argv is the host's for the same job (METHOD rule 2).  With an adaptive
repeat policy it then runs more repeats of each of those jobs on that target while their
IOPS vary too much (:meth:`RepeatPolicy.wants_more`).  fio's time series, when the run has
them, are stored as telemetry rows of their measurement, and so are the samplers' (for a guest
with a ``host_side``, the host's too: "host-disk", "host-cpu", "zpool", "arc").
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Callable, ContextManager, Iterator, Sequence

from ..fio.engines import layer_refusal
from ..fio.job import FioJob, files_dir, job_hash, to_precondition
from ..fio.runner import FioRequest, FioRun, Sampling, precondition, run_fio
from .cpucost import IDLE_SECONDS, CpuCost
from .plan import Step, Stored
from .rados import bench, rados_measurement
from ..storage.radosbench import RADOS_LAYER, rados_mode, seconds
from ..errors import HypervisorError, VmbenchError
from ..storage.cephcli import client_args
from ..storage.rbd import cluster_state, timed_out
from ..telemetry.ceph import LAG_S as CEPH_LAG_S, CephPool, ask_degrading
from ..progress import Progress
from ..results.db import ResultsDB
from ..results.key import MeasurementKey
from ..results.records import JobParams, Measurement, Settings
from ..scenario.model import CephConfig, Cell, RepeatPolicy
from ..scenario.spec import Scenario
from ..settings import Telemetry
from ..transport.base import Transport
from ..units import format_duration, format_size

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
    #: the ZFS pool under ``target`` on this side (a zvol's or a dataset's), sampled while fio
    #: runs; for a guest, the host's pool under the scratch disk (sampled on ``host_side``)
    zfs_pool: str | None = None
    #: for a guest: the host, sampled too while fio runs in the guest ("host-disk", "host-cpu",
    #: and the pool's "zpool" and "arc"), in ``host_workdir``; ``host_target`` is the scratch
    #: disk's path on the host (a /dev/zvol/... device or a file; None: every whole disk)
    host_side: Transport | None = None
    host_workdir: str = ""
    host_target: str | None = None
    #: for a guest whose QEMU process the host can sample: what each run costs the host's CPU
    cpu: "CpuCost | None" = None
    #: bytes a second the scratch disk's I/O limits let the precondition's 1 MiB writes
    #: through (None: no limit), which its deadline follows
    write_rate: float | None = None
    #: for a guest: its :meth:`Guest.limits_lifted`, around the precondition
    lift_limits: Callable[[], ContextManager[bool]] | None = None
    #: a filesystem layer's mountpoint, where file jobs run (in :func:`files_dir`); None: a block layer
    mount: str | None = None
    #: the name of the host it runs on (of a guest: the host the VM runs on), stored with each row
    host: str = ""

    @property
    def slow(self) -> bool:
        return self.side_name == "guest" and self.accelerator == "tcg"

    @property
    def label(self) -> str:
        return "host" if self.cell is None else f"{self.cell.name}: {self.layer}"


def measurement_of(key: MeasurementKey, where: Where, job: FioJob, run: FioRun, attempt: int) -> Measurement:
    """The record of one fio run: what ran where, and fio's figures (stored as it writes them)."""
    return Measurement(
        side=key.side, layer=key.layer, job=key.job, repeat=key.repeat or 0, cell=key.cell, stack=key.stack, vm=key.vm,
        load_step=key.load_step, host=where.host, cell_id=where.cell_id, boot_id=where.boot_id, attempt=attempt,
        depth=where.depth, job_params=JobParams.from_row(job.params()), job_hash=job_hash(job), sync=job.is_sync,
        target=run.target, argv_json=json.dumps(list(run.argv)), settings=Settings.of(where.settings),
        accelerator=where.accelerator, started_at=time.strftime("%Y-%m-%dT%H:%M:%S"), iops=run.result.iops,
        bw_bytes=run.result.bw_bytes, clat=run.result.clat, fio_json=run.raw_json)


def drop_caches(side: Transport) -> None:
    side.run(["sync"], timeout=300)
    side.write_file("/proc/sys/vm/drop_caches", b"3\n", mode=None)


def cv_label(cv: float | None) -> str:
    return "not known" if cv is None else f"{cv * 100:.1f}%"


def precondition_at(where: Where, job: FioJob) -> dict:
    """Precondition ``where.target`` for ``job`` with the disk's I/O limits lifted where the
    hypervisor can (put back and read back after); where it cannot, through them, with a
    deadline that follows them."""
    with where.lift_limits() if where.lift_limits is not None else contextlib.nullcontext(False) as lifted:
        return precondition(where.side, job, where.target, where.workdir, slow=where.slow,
                            write_rate=None if lifted else where.write_rate)


class Measurer:
    def __init__(self, scenario: Scenario, db: ResultsDB, run_id: int, attempt: int, progress: Progress,
                 host_argv: dict[str, tuple[str, ...]] | None = None, stored: Stored | None = None, run_tag: str = "",
                 ceph: CephConfig | None = None) -> None:
        self.scenario = scenario
        #: the Ceph pool and client under the scratch disks (RBD storage: the scenario's on
        #: libvirt, the node's rbd storage's on Proxmox), as the driver knows it after preflight
        self.ceph = ceph
        self.run_tag = run_tag
        self.db = db
        self.run_id = run_id
        self.attempt = attempt
        self.progress = progress
        #: job -> the host's fio argv, which the guest's must match but for target and output
        self.host_argv: dict[str, tuple[str, ...]] = dict(host_argv or {})
        #: RBD storage: the degrading Ceph checks at the run's first fio step (None: not asked yet)
        self.ceph_known: frozenset[str] | None = None
        #: RADOS benches whose objects could not be removed: (the side they ran on, the run name)
        self.left_benches: list[tuple[Transport, str]] = []
        #: Step.group() -> {repeat: IOPS} of every stored measurement (earlier attempts' too)
        self.iops: dict[MeasurementKey, dict[int, float]] = {k: dict(v) for k, v in (stored or {}).items()}
        assert scenario.repeat_policy is not None
        self.policy: RepeatPolicy = scenario.repeat_policy

    def measure(self, where: Where, steps: Sequence[Step]) -> None:
        """Precondition ``where.target`` once, then run each step on it, storing each result;
        then, with an adaptive policy, one more repeat of each of these jobs at a time (in
        plan order) while :meth:`RepeatPolicy.wants_more` says so for its stored repeats."""
        if not steps:
            return
        if where.cpu is not None and not where.cpu.idle_done:
            self.progress.step(f"{where.label}: the idle VM's CPU on the host, {IDLE_SECONDS:g}s (subtracted from its jobs' CPU per I/O)")
            where.cpu.measure_idle()
        if where.layer != RADOS_LAYER:  # rados bench writes its own objects
            self.precondition(where, {st.job for st in steps})
        for i, step in enumerate(steps, 1):
            self._run(where, step, f"{i}/{len(steps)}")
        if not self.policy.adaptive:
            return
        last: dict[str, Step] = {}  # job -> its last step here: the template of its extras
        for step in steps:
            last[step.job] = step
        while True:
            more = [st for st in last.values() if self.policy.wants_more(self._values(st))]
            if not more:
                break
            for st in more:
                last[st.job] = st.next(max(self.iops[st.group()]) + 1)
                self._run(where, last[st.job])
        for st in last.values():
            self.progress.step(f"{where.label}: {st.job}: {self._stop_reason(st)}")

    def precondition(self, where: Where, job_names: set[str]) -> None:
        """Write the region of the biggest job run here that reads; nothing when none reads."""
        pre_job = to_precondition([j for j in self.scenario.jobs if j.name in job_names])
        if pre_job is None:
            self.progress.step(f"{where.label}: not preconditioned (no job here reads)")
            return
        self.progress.step(f"{where.label}: preconditioning {format_size(pre_job.size)} of {where.target}")
        pre = precondition_at(where, pre_job)
        log.debug("precondition %s: %s", where.target, pre)
        if self.ceph is not None:  # the pool's counters take the precondition in before the first job's reading
            self.progress.step(f"{where.label}: {CEPH_LAG_S:g}s for the Ceph manager to report the precondition's writes")
            time.sleep(CEPH_LAG_S)

    def _values(self, step: Step) -> list[float]:
        return list(self.iops.get(step.group(), {}).values())

    def _stop_reason(self, step: Step) -> str:
        values = self._values(step)
        cv = RepeatPolicy.cv(values)
        if len(values) >= self.policy.max and (cv is None or cv >= (self.policy.until_cv or 0)):
            return f"stopped at max {self.policy.max} repeats (CV {cv_label(cv)} >= {self.policy.threshold_label()})"
        return f"{len(values)} repeats, CV {cv_label(cv)} < {self.policy.threshold_label()}"

    def _ceph_pool(self, where: Where) -> CephPool | None:
        """The Ceph pool to sample and watch while fio runs (RBD storage), as the run's cephx
        user, with the degrading checks the cluster reported at the run's first fio step."""
        cfg = self.ceph
        host = where.side if where.side_name == "host" else where.host_side
        if cfg is None:
            return None
        pool = CephPool(tuple(["ceph", *client_args(cfg)]), cfg.pool)
        if self.ceph_known is None and host is not None:
            self.ceph_known = frozenset(ask_degrading(host, pool) or ())
        return replace(pool, known=self.ceph_known or frozenset())

    @contextlib.contextmanager
    def _ceph_state_on_failure(self, where: Where) -> Iterator[None]:
        """On RBD storage a failed fio run says what the Ceph cluster reports (an OSD down
        blocks the disk's I/O until fio's deadline)."""
        cfg = self.ceph
        host = where.side if where.side_name == "host" else where.host_side
        try:
            yield
        except VmbenchError as exc:
            if cfg is not None and host is not None:
                exc.message = f"{exc.message}; {cluster_state(host, cfg, timed_out=timed_out(exc.message))}"
                exc.args = (exc.message,)
                exc.hint = exc.hint or ("`ceph health detail` says more; once the cluster is healthy, "
                                        "`vmbench cleanup SCENARIO` removes what the run could not")
            raise

    def _run_rados(self, where: Where, step: Step, job: FioJob, label: str) -> None:
        """The pool's RADOS ceiling under ``job`` (:mod:`vmbench.run.rados`), stored as a host row."""
        cfg = self.ceph
        if cfg is None:
            raise HypervisorError("a RADOS bench step, but the driver knows no Ceph pool under the scratch disks")
        self.progress.step(f"{label}: rados bench on pool {cfg.pool} ({rados_mode(job)}, {seconds(job)}s)")
        with self._ceph_state_on_failure(where):
            argv, result, raw = bench(where.side, cfg, job, self.run_tag,
                                      left=lambda name: self.left_benches.append((where.side, name)))
        self.db.add_measurements(self.run_id, [(rados_measurement(
            step.key(), job, argv, result, raw, cell_id=where.cell_id, attempt=self.attempt, settings=where.settings,
            pool=cfg.pool, host=where.host), {})])
        self.iops.setdefault(step.group(), {})[step.repeat] = float(result.iops)
        self.progress.status(f"{label}: RADOS {result.iops:,.0f} ops/s, {result.bw_bytes / 1e6:,.1f} MB/s")

    def _run(self, where: Where, step: Step, counter: str | None = None) -> None:
        """Run one step on ``where`` and store it (its series as telemetry rows); a file job
        in a directory of the layer's mount (never on a block layer)."""
        s = self.scenario
        job = {j.name: j for j in s.jobs}[step.job]
        target = where.target
        if job.file_job:
            if where.mount is None:
                refused = layer_refusal(job.file_what, where.layer, False)
                raise VmbenchError(f"job {job.name}: {refused[1] if refused else 'a file job'}",
                                   "this is a vmbench bug: the plan runs file jobs on filesystem layers only")
            target = files_dir(where.mount)
        label = f"{where.label}: {job.name}" + (f" #{step.repeat}" if self.policy.max > 1 else "")
        if step.layer == RADOS_LAYER:
            return self._run_rados(where, step, job, label)
        dur = job.duration
        if self.policy.adaptive and step.repeat > self.policy.min:  # an adaptive extra
            values = self._values(step)
            cv = RepeatPolicy.cv(values)
            why = (f"CV {cv_label(cv)} >= {self.policy.threshold_label()}" if cv is not None
                   else f"CV not known after {len(values)} run")
            self.progress.step(f"{label} ({why})")
        else:
            self.progress.step(f"{label} ({counter}, {format_duration(dur) if dur else '?'})")
        if not job.direct:
            drop_caches(where.side)
        must_match = self.host_argv.get(job.name) if where.side_name == "guest" else None
        # a guest's pool is the host's: sampled on the host side only (never the host twice)
        on_host = where.side_name == "guest" and where.host_side is not None
        cpu_start = where.cpu.begin(job.duration) if where.cpu is not None else None
        with self._ceph_state_on_failure(where):
            sampling = Sampling(telemetry=s.telemetry is Telemetry.ON,
                                zfs_pool=where.zfs_pool if where.side_name == "host" or on_host else None,
                                host_side=where.host_side if on_host else None,
                                host_workdir=where.host_workdir if on_host else "",
                                host_target=where.host_target if on_host else None, ceph_pool=self._ceph_pool(where))
            run = run_fio(where.side, FioRequest(job, target, where.workdir, label, slow=where.slow, must_match=must_match,
                                                 sampling=sampling), self.progress)
        if where.side_name == "host":
            self.host_argv[job.name] = run.argv
        # the I/Os during the snapshots: the measured rate over ramp and runtime (a fixed-rate job's load)
        # (a file job's are its operations: each file once, not a rate over its runtime, which only caps it)
        ios = sum(d.total_ios for d in run.result.directions) if job.file_job else run.result.iops * (job.ramp + job.runtime)
        cost = where.cpu.end(cpu_start, ios=ios) if where.cpu is not None else None
        series = {**({"qemu-cpu": cost} if cost is not None else {}), **(getattr(run, "series", None) or {})}
        self.db.add_measurements(self.run_id, [(measurement_of(step.key(), where, job, run, self.attempt), series)])
        self.iops.setdefault(step.group(), {})[step.repeat] = float(run.result.iops)
        cv = RepeatPolicy.cv(self._values(step)) if self.policy.adaptive else None
        self.progress.status(f"{label}: {run.result.iops:,.0f} {job.unit}, {run.result.bw_bytes / 1e6:,.1f} MB/s"
                             + (f", CV {cv_label(cv)}" if cv is not None else ""))
