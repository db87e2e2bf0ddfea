"""The RADOS ceiling under an RBD pool: ``rados bench`` with the job's block size and depth.

The layer below librbd is the object store itself.  ``rados bench`` measures it as Ceph's own
tool does, with the job's block size as the object size and ``iodepth x numjobs`` operations
in flight, for the job's runtime: ``write`` for a write job, and for a read job a prefill
``write`` then ``seq`` (sequential) or ``rand`` reads of those objects.  It is not fio's I/O:
every write makes a new object, where librbd writes into 4 MiB objects, so the report shows
it as the ceiling of the pool, not as a like-for-like row.  Mixed jobs have no RADOS row.

**Bounded.**  Every bench writes at most :func:`bench_objects` objects (``--max-objects``):
the job's size in objects of its block size (the region fio reads or writes), at least one
per operation in flight and at most :data:`MAX_BENCH_BYTES`; a prefill writes exactly that
and stops, a write bench stops at its runtime or at that bound, whichever comes first.  The
run's preflight checks that the largest of them and the scratch images fit the pool's free
space and quota with a margin (:func:`room_refusal`) before anything is created.

**Found again.**  Each bench has a run name ``vmbench-<run tag>-<token>``.  Before it writes
anything, a marker object of that name is put in vmbench's own namespace :data:`NAMESPACE`,
and the bench writes into a namespace of its own, :func:`bench_namespace` (``vmbench-bench.<run
name>``), so its objects are found from the marker's name alone, even after a bench killed
before ``rados`` wrote its run-name object: ``vmbench cleanup`` lists :data:`NAMESPACE` only,
and removes a marker's namespace's ``benchmark_data`` objects, then the marker
(:func:`cleanup_argvs`).  Objects an older vmbench left in :data:`NAMESPACE` itself (its
benches wrote there) are found by their run name or their ``benchmark_data_<host>_<pid>``
prefix.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..fio.job import FioJob
from ..scenario.model import CephConfig
from ..units import human_size, parse_size
from .cephcli import client_args

NAMESPACE = "vmbench-bench"
#: the kind of a leftover bench in ``vmbench cleanup``'s list
BENCH_KIND = "rados objects"
#: the layer of a RADOS ceiling row (a host measurement, beside the host's fio rows)
RADOS_LAYER = "rados"
RUN_NAME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-[0-9a-f]{8}$")
#: what an older vmbench's killed bench left in :data:`NAMESPACE`: ``rados bench``'s own object names
OBJECT_PREFIX_RE = re.compile(r"^(benchmark_data_.+_\d+)_object\d+$")
#: the text of a bench's marker object (never anything of the user's)
MARKER_TEXT = b"vmbench: rados bench objects in the namespace named by this object's namespace and name\n"
MiB = 1 << 20
#: at most this much is written by one bench (objects of the job's block size)
MAX_BENCH_BYTES = 1 << 30
#: how long a prefill may take to write its objects (it stops when it has them)
PREFILL_SECONDS = 300
#: the pool must keep this share of its free space (and of the room its quota leaves) free
ROOM_MARGIN = 0.2
#: fio's rw -> rados bench's mode (a read needs objects written first)
MODES = {"write": "write", "randwrite": "write", "read": "seq", "randread": "rand"}


def rados_mode(job: FioJob) -> str | None:
    """The ``rados bench`` mode that measures the pool under ``job``; None for a mixed job or a job file."""
    return None if job.jobfile is not None else MODES.get(job.rw)


def bench_namespace(run_name: str) -> str:
    """The namespace of one bench's objects: its own, named after its run name."""
    return f"{NAMESPACE}.{run_name}"


def client_argv(cfg: CephConfig, namespace: str = NAMESPACE) -> list[str]:
    """``rados`` as the scenario's user, in one of vmbench's namespaces of the pool (an operation
    the cluster does not answer gives up, as every Ceph command vmbench runs: :mod:`.cephcli`)."""
    return ["rados", *client_args(cfg), "-p", cfg.pool, "-N", namespace]


def concurrency(job: FioJob) -> int:
    return max(1, int(job.iodepth) * int(job.numjobs))


def seconds(job: FioJob) -> int:
    return max(1, int(round(job.runtime or 0)))


def bench_objects(job: FioJob) -> int:
    """The most objects one bench of ``job`` writes: its size in objects of its block size, at
    least one per operation in flight, at most :data:`MAX_BENCH_BYTES` of them."""
    bs = max(1, parse_size(job.bs))
    want = -(-int(job.size) // bs)
    return max(concurrency(job), min(want, max(1, MAX_BENCH_BYTES // bs)))


def bench_bytes(job: FioJob) -> int:
    """What one bench of ``job`` writes at most (``rados bench`` may start one object more)."""
    return (bench_objects(job) + 1) * max(1, parse_size(job.bs))


def marker_argv(cfg: CephConfig, run_name: str) -> list[str]:
    """Put the bench's marker object (:data:`MARKER_TEXT` on stdin) before the bench writes anything."""
    return client_argv(cfg) + ["put", run_name, "-"]


def write_argv(cfg: CephConfig, job: FioJob, run_name: str, *, prefill: bool = False) -> list[str]:
    """The write bench (the measurement of a write job: its runtime; the prefill of a read job:
    until it has its objects), in the run's own namespace; its objects stay for the reads."""
    secs = PREFILL_SECONDS if prefill else seconds(job)
    return client_argv(cfg, bench_namespace(run_name)) + [
        "bench", str(secs), "write", "-b", str(parse_size(job.bs)), "-t", str(concurrency(job)),
        "--max-objects", str(bench_objects(job)), "--no-cleanup", "--run-name", run_name, "--format", "json"]


def read_argv(cfg: CephConfig, job: FioJob, run_name: str, mode: str) -> list[str]:
    return client_argv(cfg, bench_namespace(run_name)) + [
        "bench", str(seconds(job)), mode, "-t", str(concurrency(job)), "--run-name", run_name, "--format", "json"]


def cleanup_argvs(cfg: CephConfig, run_name: str) -> list[tuple[list[str], bool]]:
    """Removing one bench's objects, in order: (argv, whether it must succeed).  Its namespace's
    ``benchmark_data`` objects (fast with its run-name object, by listing the namespace
    without), that run-name object (gone already is fine), then the marker: kept until the
    objects are gone, so a cleanup that fails leaves it for ``vmbench cleanup``."""
    own = client_argv(cfg, bench_namespace(run_name))
    return [(own + ["cleanup", "--prefix", "benchmark_data", "--run-name", run_name], True),
            (own + ["rm", run_name], False),
            (client_argv(cfg) + ["rm", run_name], True)]


def old_cleanup_argv(cfg: CephConfig, name: str) -> list[str]:
    """An older vmbench's leftover in :data:`NAMESPACE` itself: by its run name, or by its
    ``benchmark_data_<host>_<pid>`` prefix."""
    if RUN_NAME_RE.match(name):
        return client_argv(cfg) + ["cleanup", "--run-name", name]
    return client_argv(cfg) + ["cleanup", "--prefix", name]


@dataclass(frozen=True)
class PoolSpace:
    """What ``ceph df detail`` says of a pool: bytes free for new data (``max_avail``, after
    replication and the full ratio), what it stores, and its quotas (0: none)."""

    max_avail: int
    stored: int
    objects: int
    quota_bytes: int
    quota_objects: int

    @classmethod
    def from_df(cls, df: dict, pool: str) -> "PoolSpace | None":
        """From ``ceph df detail --format json``; None when the pool is not in it."""
        got = next((p for p in df.get("pools") or () if p.get("name") == pool), None)
        if got is None:
            return None
        st = got.get("stats") or {}

        def n(key: str) -> int:
            return int(st.get(key) or 0)

        return cls(max_avail=n("max_avail"), stored=n("stored"), objects=n("objects"), quota_bytes=n("quota_bytes"),
                   quota_objects=n("quota_objects"))


def room_refusal(space: PoolSpace, pool: str, need_bytes: int, need_objects: int, what: str) -> tuple[str, str] | None:
    """(message, hint) when ``need_bytes`` and ``need_objects`` (``what``: their parts in words)
    would not fit the pool with :data:`ROOM_MARGIN` of its free space (and of the room its quota
    leaves) to spare; None when they fit.  Pure."""
    keep = 1 - ROOM_MARGIN
    hint = ("lower storage.scratch_size or the read and write jobs' size (a RADOS bench writes the job's size "
            "once, at most 1 GiB), or free space in the pool")
    if need_bytes > space.max_avail * keep:
        return (f"Ceph pool {pool} has {human_size(space.max_avail)} free (ceph df: max_avail); this run writes up to "
                f"{human_size(need_bytes)} ({what}), more than {ROOM_MARGIN:.0%} short of filling it", hint)
    if space.quota_bytes and need_bytes > (space.quota_bytes - space.stored) * keep:
        return (f"Ceph pool {pool}'s quota leaves {human_size(max(0, space.quota_bytes - space.stored))} "
                f"({human_size(space.stored)} stored of max_bytes {human_size(space.quota_bytes)}); this run writes up to "
                f"{human_size(need_bytes)} ({what}), more than {ROOM_MARGIN:.0%} short of the quota", hint + " or raise the quota")
    if space.quota_objects and need_objects > (space.quota_objects - space.objects) * keep:
        return (f"Ceph pool {pool}'s quota leaves {max(0, space.quota_objects - space.objects):,} objects "
                f"({space.objects:,} of max_objects {space.quota_objects:,}); this run makes up to {need_objects:,} "
                f"({what})", hint + " or raise the quota")
    return None


@dataclass(frozen=True)
class RadosResult:
    """What ``rados bench`` reported: operations a second, bytes a second, its latencies (s)."""

    iops: float
    bw_bytes: float
    avg_lat_s: float | None
    max_lat_s: float | None
    min_lat_s: float | None
    seconds: float

    def to_json(self) -> dict[str, Any]:
        return {"iops": self.iops, "bw_bytes": self.bw_bytes, "avg_lat_s": self.avg_lat_s, "max_lat_s": self.max_lat_s,
                "min_lat_s": self.min_lat_s, "seconds": self.seconds}


def parse_bench(text: str) -> tuple[RadosResult, dict]:
    """``rados bench --format json`` output (after any lines it prints first) -> the result and the JSON."""
    start = text.find("{")
    if start < 0:
        raise ValueError("rados bench printed no JSON")
    data = json.loads(text[start:])
    made = data.get("total_writes_made", data.get("total_reads_made"))
    took = float(data.get("total_time_run") or 0)
    if made is None or took <= 0:
        raise ValueError("rados bench reported no operations")
    size = float(data.get("write_size") or data.get("read_size") or data.get("op_size") or 0)

    def f(key: str) -> float | None:
        v = data.get(key)
        return None if v in (None, "") else float(v)

    ops = float(made) / took
    return RadosResult(iops=ops, bw_bytes=ops * size, avg_lat_s=f("average_latency"), max_lat_s=f("max_latency"),
                       min_lat_s=f("min_latency"), seconds=took), data
