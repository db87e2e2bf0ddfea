"""The RADOS ceiling under an RBD pool: ``rados bench`` with the job's block size and depth.

The layer below librbd is the object store itself.  ``rados bench`` measures it as Ceph's own
tool does, with the job's block size as the object size and ``iodepth x numjobs`` operations
in flight, for the job's runtime: ``write`` for a write job, and for a read job a prefill
``write`` then ``seq`` (sequential) or ``rand`` reads of those objects.  It is not fio's I/O:
every write makes a new object, where librbd writes into 4 MiB objects, so the report shows
it as the ceiling of the pool, not as a like-for-like row.  Mixed jobs have no RADOS row.

Its objects live in vmbench's own namespace of the pool (:data:`NAMESPACE`) under a run name
``vmbench-<run tag>-<token>``; ``rados cleanup`` of that run name removes them after each
bench, and ``vmbench cleanup`` finds what a killed run left by listing that namespace only.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..fio.job import FioJob
from ..scenario.model import CephConfig
from ..units import parse_size
from .cephcli import client_args

NAMESPACE = "vmbench-bench"
#: the layer of a RADOS ceiling row (a host measurement, beside the host's fio rows)
RADOS_LAYER = "rados"
RUN_NAME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-[0-9a-f]{8}$")
MiB = 1 << 20
#: fio's rw -> rados bench's mode (a read needs objects written first)
MODES = {"write": "write", "randwrite": "write", "read": "seq", "randread": "rand"}


def rados_mode(job: FioJob) -> str | None:
    """The ``rados bench`` mode that measures the pool under ``job``; None for a mixed job or a job file."""
    return None if job.jobfile is not None else MODES.get(job.rw)


def client_argv(cfg: CephConfig) -> list[str]:
    """``rados`` as the scenario's user, in vmbench's namespace of the pool (an operation the
    cluster does not answer gives up, as every Ceph command vmbench runs: :mod:`.cephcli`)."""
    return ["rados", *client_args(cfg), "-p", cfg.pool, "-N", NAMESPACE]


def concurrency(job: FioJob) -> int:
    return max(1, int(job.iodepth) * int(job.numjobs))


def seconds(job: FioJob) -> int:
    return max(1, int(round(job.runtime or 0)))


def write_argv(cfg: CephConfig, job: FioJob, run_name: str) -> list[str]:
    """The write bench (the measurement of a write job, the prefill of a read job); its objects stay for the reads."""
    return client_argv(cfg) + ["bench", str(seconds(job)), "write", "-b", str(parse_size(job.bs)), "-t", str(concurrency(job)),
                               "--no-cleanup", "--run-name", run_name, "--format", "json"]


def read_argv(cfg: CephConfig, job: FioJob, run_name: str, mode: str) -> list[str]:
    return client_argv(cfg) + ["bench", str(seconds(job)), mode, "-t", str(concurrency(job)), "--run-name", run_name,
                               "--format", "json"]


def cleanup_argv(cfg: CephConfig, run_name: str) -> list[str]:
    return client_argv(cfg) + ["cleanup", "--run-name", run_name]


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
