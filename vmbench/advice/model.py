"""The contract of advice: what the user asks (:class:`Goal`), what a setting risks
(:class:`Risk`), and what the advice answers (:class:`Recommendation`, :class:`Advice`).

Plain frozen dataclasses, no logic beyond parsing: :mod:`vmbench.advice.rank` fills them from a
stored run, :mod:`vmbench.tune` reads them to choose its next baseline, the report and the CLI
render them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from ..fio.job import Metric
from ..report.stats import Delta
from ..settings import Choice


class GoalMetric(Choice):
    """What a goal is about: a job's fio figure, or the host CPU it costs per I/O."""

    IOPS = "iops"
    MBPS = "mbps"
    P50 = "p50"
    P95 = "p95"
    P99 = "p99"
    P999 = "p99.9"
    CPU_PER_IO = "cpu-per-io"  # the QEMU process's µs of host CPU per I/O (issue 17)

    @property
    def higher_is_better(self) -> bool:
        return self in (GoalMetric.IOPS, GoalMetric.MBPS)

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
    CRYPT_NO_WORKQUEUE = "crypt-no-workqueue"


#: what each risk costs, in words, shown beside every recommendation that carries it
RISKS: Mapping[Risk, str] = {
    Risk.CACHE_UNSAFE: "cache=unsafe ignores the guest's flushes: a host crash or power loss loses or corrupts "
                       "data the guest believed was on disk",
    Risk.CACHE_WRITEBACK: "cache=writeback keeps writes in the host page cache: safe only if the guest sends "
                          "flushes (barriers on, a filesystem that flushes); otherwise a host crash loses them",
    Risk.ZFS_SYNC_DISABLED: "sync=disabled makes ZFS acknowledge synchronous writes before they are on disk: a "
                            "crash loses up to the last transaction groups (seconds of writes) the guest was told "
                            "were safe",
    Risk.CRYPT_NO_WORKQUEUE: "dm-crypt no_read_workqueue/no_write_workqueue run encryption in the submitting "
                             "context: faster on some CPUs, but known to stall or hang on others (kernel-dependent)",
}


@dataclass(frozen=True)
class Change:
    """One setting between two measured cells, as stored (``VmConfig.settings()`` keys and values,
    or a stack's layer for a layer change)."""

    axis: str
    before: object
    after: object

    def __str__(self) -> str:
        return f"{self.axis}: {_v(self.before)} -> {_v(self.after)}"


def _v(value: object) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    return "default" if value is None else str(value)


@dataclass(frozen=True)
class Recommendation:
    """One measured change and its effect on one goal.

    ``delta`` is ``cell`` against ``reference`` on the goal's metric, with its interval and
    verdict (:mod:`vmbench.report.stats`; for CPU per I/O, :mod:`vmbench.report.cpurows`).
    ``improves``: the verdict is significant and in the goal's direction.  ``allowed``: the
    change carries no risk, or every risk it carries was allowed by name."""

    goal: Goal
    job: str
    cell: str  # the cell with the change
    reference: str  # the cell it is compared with: the baseline, or the journey's step before
    changes: tuple[Change, ...]
    value: float | None  # the goal's figure in ``cell`` (IOPS, MB/s, ms, µs/IO)
    reference_value: float | None  # and in ``reference``
    delta: Delta
    repeats: int  # the fewer of the two cells' repeats
    improves: bool
    evidence: tuple[str, ...] = ()  # telemetry that explains the effect, in words
    risks: tuple[Risk, ...] = ()
    allowed: bool = True
    settings: Mapping[str, object] = field(default_factory=dict)  # ``cell``'s stored settings (what to apply)
    unit: str = ""  # "IOPS", "MB/s", "ms (p99)", "µs/IO"

    @property
    def label(self) -> str:
        return ", ".join(str(c) for c in self.changes) or self.cell


@dataclass(frozen=True)
class Snippet:
    """The exact way to apply settings to a user's VM: ``kind`` "proxmox" (a ``qm set`` argv,
    shown with shlex.join) or "libvirt" (a ``<disk>`` element and, for the CPU, a ``<cpu>``
    element to put in the domain XML) or "zfs" (``zfs set`` argv).  vmbench never runs it."""

    kind: str
    text: str
    note: str = ""


@dataclass(frozen=True)
class Advice:
    """The answer for one run: per goal, the ranked improvements (the first allowed one is the
    recommendation), the changes the evidence does not support, what was not tried that
    commonly matters for the goal, where the best cell stands ("is my number good?"), and the
    snippets that apply the recommendation."""

    run: str
    goals: tuple[Goal, ...]
    recommendations: tuple[Recommendation, ...]  # improving, ranked: allowed first, then by effect
    unsupported: tuple[Recommendation, ...]  # within noise, worse, or not judged (fewer repeats)
    not_tried: tuple[str, ...]
    standing: tuple[str, ...]  # "best cell iothread=on: 71% of the host on the same storage (4k-randread IOPS)"
    apply: tuple[Snippet, ...] = ()
    notes: tuple[str, ...] = ()  # the accelerator, the load, why a goal could not be judged

    def top(self, goal: Goal | None = None) -> Recommendation | None:
        """The recommendation: the first allowed improvement (for ``goal``, or any)."""
        return next((r for r in self.recommendations if r.allowed and r.improves and (goal is None or r.goal == goal)), None)
