"""A fio job as vmbench runs it: one frozen value, rendered to the same argv on every side.

The host and the guest run ``fio_argv(job, target, output)``; only ``--filename``,
``--output`` and the paths of fio's own logs differ.  :func:`check_identical` refuses a
comparison whose other parameters differ (METHOD rule 2).  A job file runs as a rewritten copy
per target (:mod:`vmbench.fio.jobfile`) whose name carries the digest of the rewritten text with
target and paths as placeholders, so the same check covers the file's contents.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

from ..errors import VmbenchError
from ..units import format_size

RW_MODES = ("read", "write", "randread", "randwrite", "rw", "randrw", "readwrite")
MIXED_MODES = ("rw", "randrw", "readwrite")
IOENGINES = ("libaio", "io_uring", "psync", "sync")
TARGET_ENV = "VMBENCH_TARGET"
SIZE_ENV = "VMBENCH_SIZE"
LOG_AVG_MSEC = 1000  # fio's own time series: one point per second
LOG_PATH_OPTIONS = ("--write_iops_log=", "--write_lat_log=")
_JOBFILE_COPY = re.compile(r"/job-[0-9a-f]+-([0-9a-f]{16})\.fio$")


@dataclass(frozen=True)
class JobFile:
    """A user's own fio job file (``text``: after the scenario's size:/runtime:), run as a copy
    rewritten for each target (see :mod:`vmbench.fio.jobfile`)."""

    path: str
    text: str
    runtime: float | None = None  # from the file, for estimates only
    ramp: float = 0.0
    overrides: tuple[str, ...] = ()  # what the scenario's size:/runtime: changed, one line each
    size_origin: str = field(default="", compare=False)  # where the job's size comes from, for messages
    entry_line: int = field(default=0, compare=False)  # the scenario line of the jobs entry
    offset: int = field(default=0, compare=False)  # where the furthest job (clone) starts on the target
    offset_origin: str = field(default="", compare=False)  # the job file's line that puts it there, for messages

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()


@dataclass(frozen=True)
class FioJob:
    name: str
    rw: str = "randread"
    bs: int = 4096
    iodepth: int = 4
    numjobs: int = 1
    rwmixread: int | None = None
    runtime: float = 10.0
    ramp: float = 2.0
    size: int = 256 << 20
    direct: bool = True
    sync: bool = False
    fsync: int = 0
    ioengine: str = "libaio"
    profile: str | None = None
    jobfile: JobFile | None = field(default=None, compare=True)
    #: the data written: how compressible (fio's buffer_compress_percentage) and fresh for
    #: every write (refill_buffers), for compression tests; None: fio's defaults
    buffer_compress_percentage: int | None = None
    refill_buffers: bool | None = None

    @property
    def is_sync(self) -> bool:
        """Sync writes are their own universe (METHOD rule 4)."""
        if self.jobfile is not None:
            from .jobparse import fio_true, parse

            parsed = parse(self.jobfile.text, self.jobfile.path)
            return any(o.name in ("sync", "fsync", "fdatasync") and o.value is not None and fio_true(o)
                       for sec in parsed.sections for o in sec.options)
        return (self.sync or self.fsync > 0) and self.writes

    @property
    def writes(self) -> bool:
        if self.jobfile is not None:
            return True
        return self.rw not in ("read", "randread")

    @property
    def duration(self) -> float | None:
        """Seconds fio measures plus ramp; None when a job file does not say."""
        if self.jobfile is not None:
            if self.jobfile.runtime is None:
                return None
            return self.jobfile.runtime + self.jobfile.ramp
        return self.runtime + self.ramp

    def describe(self) -> str:
        if self.jobfile is not None:
            return f"job file {self.jobfile.path}"
        parts = [self.rw, format_size(self.bs), f"QD{self.iodepth}"]
        if self.numjobs > 1:
            parts.append(f"x{self.numjobs} jobs")
        if self.rwmixread is not None:
            parts.append(f"{self.rwmixread}% reads")
        if self.sync:
            parts.append("sync")
        if self.fsync:
            parts.append(f"fsync/{self.fsync}")
        if not self.direct:
            parts.append("buffered")
        if self.buffer_compress_percentage is not None:
            parts.append(f"data {self.buffer_compress_percentage}% compressible")
        if self.refill_buffers:
            parts.append("refilled")
        return " ".join(parts)

    def params(self) -> dict:
        """Every parameter that shapes the I/O (stored with each result)."""
        d = asdict(self)
        for key in ("buffer_compress_percentage", "refill_buffers"):  # unset: as stored before they existed
            if d[key] is None:
                del d[key]
        if self.jobfile is not None:
            d["jobfile"] = {"path": self.jobfile.path, "sha256": self.jobfile.sha256}
        return d


def fio_argv(job: FioJob, target: str, output: str, *, fio: str = "fio", jobfile_path: str | None = None,
             log_prefix: str | None = None) -> list[str]:
    """The exact fio command for ``job`` against ``target`` writing json+ to ``output``;
    with ``log_prefix``, fio also writes its IOPS and latency logs there (one point a second).

    For a job file, ``jobfile_path`` is the rewritten copy on that side (it names the target
    and its own logs; ``log_prefix`` is unused); the target is also in the ``VMBENCH_TARGET``
    environment variable (see :func:`fio_env`).
    """
    if job.jobfile is not None:
        if not jobfile_path:
            raise ValueError("a job-file job needs jobfile_path")
        return [fio, "--output-format=json+", f"--output={output}", jobfile_path]
    argv = [
        fio,
        f"--name={job.name}",
        f"--filename={target}",
        f"--rw={job.rw}",
        f"--bs={job.bs}",
        f"--iodepth={job.iodepth}",
        f"--numjobs={job.numjobs}",
        f"--ioengine={job.ioengine}",
        f"--direct={int(job.direct)}",
        f"--size={job.size}",
        "--time_based=1",
        f"--runtime={_secs(job.runtime)}",
        f"--ramp_time={_secs(job.ramp)}",
        "--group_reporting=1",
        "--randrepeat=0",
        "--percentile_list=50:95:99:99.9",
    ]
    if job.rwmixread is not None:
        argv.append(f"--rwmixread={job.rwmixread}")
    if job.sync:
        argv.append("--sync=1")
    if job.fsync:
        argv.append(f"--fsync={job.fsync}")
    if job.buffer_compress_percentage is not None:
        argv.append(f"--buffer_compress_percentage={job.buffer_compress_percentage}")
    if job.refill_buffers is not None:
        argv.append(f"--refill_buffers={int(job.refill_buffers)}")
    if log_prefix:
        argv += [f"--write_iops_log={log_prefix}", f"--write_lat_log={log_prefix}", f"--log_avg_msec={LOG_AVG_MSEC}"]
    argv += ["--output-format=json+", f"--output={output}"]
    return argv


def fio_env(job: FioJob, target: str) -> dict[str, str]:
    """Environment for the fio command: job files find their target here."""
    env = {TARGET_ENV: target}
    env[SIZE_ENV] = str(job.size)
    return env


def precondition_job(job: FioJob) -> FioJob:
    """A sequential 1M write over the job's region, so reads never hit unwritten holes."""
    return FioJob(
        name=f"precondition-{job.name}",
        rw="write",
        bs=1 << 20,
        iodepth=8,
        numjobs=1,
        runtime=0,
        ramp=0,
        size=job.size,
        direct=True,
        ioengine=job.ioengine if job.jobfile is None else "libaio",
    )


def precondition_argv(job: FioJob, target: str, output: str, *, fio: str = "fio") -> list[str]:
    """Like :func:`fio_argv` but size-based (writes the whole region once), not time-based."""
    pre = precondition_job(job)
    return [
        fio,
        f"--name={pre.name}",
        f"--filename={target}",
        "--rw=write",
        f"--bs={pre.bs}",
        f"--iodepth={pre.iodepth}",
        f"--ioengine={pre.ioengine}",
        "--direct=1",
        f"--size={pre.size}",
        "--output-format=json",
        f"--output={output}",
    ]


def comparable_params(argv: Sequence[str]) -> list[str]:
    """The argv without what legitimately differs between sides: the fio binary, the target
    (``--filename``), the output file, fio's logs (paths, averaging) and the path of a job file,
    of which only the digest of its rewritten text is kept (``jobfile=<digest>``)."""
    out = []
    for arg in list(argv)[1:]:
        if arg.startswith("--"):
            # --log_avg_msec only sets how fio averages its logs, not the I/O (runs stored before
            # vmbench kept fio's logs have none, and can still be resumed)
            if not arg.startswith(("--filename=", "--output=", "--log_avg_msec=") + LOG_PATH_OPTIONS):
                out.append(arg)
        elif (m := _JOBFILE_COPY.search(arg)) is not None:
            out.append(f"jobfile={m.group(1)}")
    return out


def check_identical(host_argv: Sequence[str], guest_argv: Sequence[str]) -> None:
    """Refuse to compare host and guest runs whose fio parameters differ (METHOD rule 2)."""
    a, b = comparable_params(host_argv), comparable_params(guest_argv)
    if a != b:
        diff = sorted(set(a) ^ set(b))
        raise VmbenchError(
            "host and guest fio jobs differ; refusing to compare them: " + " ".join(diff),
            hint="this is a vmbench bug: both sides must be built from the same job",
        )


def job_hash(job: FioJob) -> str:
    """A short digest of the job's parameters: rows with equal hashes ran the same job."""
    blob = json.dumps(job.params(), sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _secs(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() else f"{value:g}"
