"""What a user asks of a run (:class:`Goal`, :class:`GoalMetric`) and what a setting risks
(:class:`Risk`, :data:`RISKS`): named by scenarios (``advise:``, ``tune:``), by ``vmbench
advise --goal/--allow``, and used by the advice (:mod:`vmbench.advice`).  Closed choices and
their parsing only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from ..fio.job import Metric
from ..settings import Choice


class GoalMetric(Choice):
    """What a goal is about: a job's fio figure (:class:`~vmbench.fio.job.Metric`, spelled the
    same), or the host CPU it costs per I/O."""

    IOPS = Metric.IOPS.value
    MBPS = Metric.MBPS.value
    P50 = Metric.P50.value
    P95 = Metric.P95.value
    P99 = Metric.P99.value
    P999 = Metric.P999.value
    CPU_PER_IO = "cpu-per-io"  # the QEMU process's µs of host CPU per I/O (issue 17)

    @property
    def higher_is_better(self) -> bool:
        metric = self.fio_metric
        return metric is not None and metric.higher_is_better

    @property
    def fio_metric(self) -> Metric | None:
        """The fio figure this goal judges (None for CPU per I/O)."""
        return None if self is GoalMetric.CPU_PER_IO else Metric(self.value)

    @classmethod
    def of(cls, metric: Metric) -> "GoalMetric":
        return cls(metric.value)


@dataclass(frozen=True)
class Goal:
    """A job and a metric to improve.  ``job`` None: every job of the run, each on this metric.
    ``source`` says where the goal came from, in words ("target 1 (min_mb_s 118 on
    1m-write)", "--goal", "the job's metric")."""

    job: str | None
    metric: GoalMetric
    source: str = "--goal"

    @classmethod
    def parse(cls, text: str, source: str = "--goal") -> "Goal":
        """``JOB:METRIC`` or ``METRIC`` ("4k-randread:p99", "mbps", "cpu-per-io"); ValueError
        naming what is allowed."""
        job, sep, metric = str(text).strip().rpartition(":")
        if not metric:
            raise ValueError(f"{text!r} is not a goal: JOB:METRIC or METRIC, METRIC one of {GoalMetric.allowed()}")
        return cls(job or None, GoalMetric.parse(metric), source)

    def __str__(self) -> str:
        return f"{self.job}:{self.metric.value}" if self.job else self.metric.value


class Risk(Choice):
    """A setting that trades safety for speed; named by ``--allow`` (and ``allow:`` in a tune
    scenario) to let it be recommended first.  What each risks is :data:`RISKS`."""

    CACHE_UNSAFE = "cache-unsafe"
    CACHE_WRITEBACK = "cache-writeback"
    ZFS_SYNC_DISABLED = "zfs-sync-disabled"
    ZFS_CHECKSUM_OFF = "zfs-checksum-off"
    ZFS_DEDUP = "zfs-dedup"
    CRYPT_NO_WORKQUEUE = "crypt-no-workqueue"


def parse_allow(names: Iterable[object], where: str = "--allow") -> frozenset[Risk]:
    """Risk names -> risks; ValueError naming ``where`` and what is allowed."""
    out = set()
    for n in names:
        try:
            out.add(Risk.parse(n))
        except ValueError as exc:
            raise ValueError(f"{where}: {exc}") from None
    return frozenset(out)


#: what each risk costs, in words, shown beside every recommendation that carries it
RISKS: Mapping[Risk, str] = {
    Risk.CACHE_UNSAFE: "cache=unsafe ignores the guest's flushes: a host crash or power loss loses or corrupts "
                       "data the guest believed was on disk",
    Risk.CACHE_WRITEBACK: "cache=writeback keeps writes in a volatile cache on the host (its page cache; on RBD, "
                          "librbd's client cache): safe only if the guest sends "
                          "flushes (barriers on, a filesystem that flushes); otherwise a host crash loses them",
    Risk.ZFS_SYNC_DISABLED: "sync=disabled makes ZFS acknowledge synchronous writes before they are on disk: a "
                            "crash loses up to the last transaction groups (seconds of writes) the guest was told "
                            "were safe",
    Risk.ZFS_CHECKSUM_OFF: "checksum=off stops ZFS checksumming data: corruption on the disks is neither detected "
                           "nor repaired from redundancy",
    Risk.ZFS_DEDUP: "dedup keeps a table of every block's checksum: once it outgrows the ARC every write waits on "
                    "disk reads, and it cannot be undone for data already written",
    Risk.CRYPT_NO_WORKQUEUE: "dm-crypt no_read_workqueue/no_write_workqueue run encryption in the submitting "
                             "context: faster on some CPUs, but known to stall or hang on others (kernel-dependent)",
}
