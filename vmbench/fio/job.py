"""A fio job as vmbench runs it: one frozen value, rendered to the same argv on every side.

The host and the guest run ``fio_argv(job, target, output)``; only ``--filename``,
``--output`` and the paths of fio's own logs differ.  :func:`check_identical` refuses a
comparison whose other parameters differ (METHOD rule 2).  A job file runs as a rewritten copy
per target (:mod:`vmbench.fio.jobfile`) whose name carries the digest of the rewritten text with
target and paths as placeholders, so the same check covers the file's contents.

A load step that runs the same job in several VMs at once adds a *tail* to each run: a second
job section (``vmbench-tail``) with the same I/O options, stonewalled after the measured job, that
keeps the load on while the other VMs finish their measured windows; it is left out of every
figure (:func:`vmbench.fio.result.parse_fio_json`).  :class:`Metric` names the figure a job is
judged by.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from typing import Sequence

from ..errors import VmbenchError
from ..settings import Choice
from ..units import format_size
from .engines import ENGINE_UNITS, FILE_ENGINES
from .jobparse import file_job_option, fio_true, is_file_job, parse
from .rbd import ENGINE as RBD_ENGINE, TARGET_OPTIONS as RBD_TARGET_OPTIONS, parse_target

RW_MODES = ("read", "write", "randread", "randwrite", "rw", "randrw", "readwrite")
MIXED_MODES = ("rw", "randrw", "readwrite")
IOENGINES = ("libaio", "io_uring", "psync", "sync")
TARGET_ENV = "VMBENCH_TARGET"
SIZE_ENV = "VMBENCH_SIZE"
LOG_AVG_MSEC = 1000  # fio's own time series: one point per second
LOG_PATH_OPTIONS = ("--write_iops_log=", "--write_lat_log=")
FILES_DIR = "vmbench-files"  # a file job's directory in a filesystem's mount (made and removed per run)
TAIL_NAME = "vmbench-tail"  # the job section that keeps the load on after the measured job
_JOBFILE_COPY = re.compile(r"/job-[0-9a-f]+-([0-9a-f]{16})\.fio$")


class Metric(Choice):
    """The figure a delta, verdict or target of a job is about."""

    IOPS = "iops"
    MBPS = "mbps"
    P50 = "p50"
    P95 = "p95"
    P99 = "p99"
    P999 = "p99.9"

    @property
    def higher_is_better(self) -> bool:
        return self in (Metric.IOPS, Metric.MBPS)

    @property
    def percentile(self) -> float | None:
        """The completion-latency percentile (50.0 ... 99.9); None for IOPS and MB/s."""
        return None if self.higher_is_better else float(self.value[1:])


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
    #: a fixed rate per job (fio's numjobs) and, in mixed jobs, per direction: I/Os or bytes a
    #: second (fio's rate_iops, rate); None: as fast as it goes
    rate_iops: int | None = None
    rate: int | None = None
    #: the figure this job is judged by (see :attr:`judged_by`); it does not shape the I/O, so
    #: it is neither compared nor stored in :meth:`params`
    metric: Metric | None = field(default=None, compare=False)
    #: a point of a sweep (scenario ``sweep:``): the job it was made from and the setting swept
    #: ("iodepth" or "numjobs"), whose value is this job's; None: not a sweep's point
    sweep_of: str | None = None
    sweep_key: str | None = None
    #: fio's steady-state detection: the criterion (``iops_slope:0.3%``), the window it judges
    #: and the time before it starts judging, in seconds; the job ends when it is met, at its
    #: runtime otherwise.  None: fio's own (off)
    steadystate: str | None = None
    steadystate_duration: float | None = None
    steadystate_ramp_time: float | None = None
    #: many files in a directory (fio's nrfiles, filesize, openfiles, create_on_open,
    #: file_service_type): such a job, like one with a file engine (``ioengine: filecreate``),
    #: is a *file job*, run in each filesystem layer's mount only (:attr:`file_job`); None: unset
    nrfiles: int | None = None
    filesize: int | None = None
    openfiles: int | None = None
    create_on_open: bool | None = None
    file_service_type: str | None = None

    @property
    def file_job(self) -> bool:
        """A job on files in a directory: a file engine (:data:`FILE_ENGINES`) or several files
        (nrfiles above 1; in a job file, any section's).  It runs in a filesystem
        layer's mount (fio's ``--directory``), size-based (each file once), never on a block
        layer, and takes no precondition."""
        if self.jobfile is not None:
            return is_file_job(parse(self.jobfile.text, self.jobfile.path))
        return self.ioengine in FILE_ENGINES or (self.nrfiles or 1) > 1

    @property
    def file_what(self) -> str:
        """What makes this a file job, in words ("ioengine filecreate", "nrfiles")."""
        if self.jobfile is not None:
            found = file_job_option(parse(self.jobfile.text, self.jobfile.path))
            return f"job file {found[0]}:{found[1]}: {found[2]}" if found else f"job file {self.jobfile.path}"
        if self.ioengine in FILE_ENGINES:
            return f"ioengine {self.ioengine}"
        return f"nrfiles={self.nrfiles}"

    @property
    def unit(self) -> str:
        """What its IOPS count: "IOPS", or a file engine's operations ("files/s")."""
        return ENGINE_UNITS.get(self.ioengine, "IOPS") if self.jobfile is None else "IOPS"

    @property
    def sweep_value(self) -> int | None:
        return int(getattr(self, self.sweep_key)) if self.sweep_key else None

    @property
    def fixed_rate(self) -> bool:
        """The job runs at a fixed rate: rate_iops/rate, or a job file that sets one."""
        if self.jobfile is not None:
            parsed = parse(self.jobfile.text, self.jobfile.path)
            return any(o.name in ("rate", "rate_iops") and o.value is not None
                       for sec in parsed.sections for o in sec.options)
        return self.rate_iops is not None or self.rate is not None

    @property
    def judged_by(self) -> Metric:
        """``metric`` when set; else p99 for a fixed-rate job (its IOPS are the rate it was
        given) and IOPS for any other."""
        if self.metric is not None:
            return self.metric
        return Metric.P99 if self.fixed_rate else Metric.IOPS

    @property
    def is_sync(self) -> bool:
        """Sync writes are their own universe (METHOD rule 4)."""
        if self.jobfile is not None:
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
    def reads(self) -> bool:
        """Reads what is on the target (a job file may: it is taken to)."""
        if self.jobfile is not None:
            return True
        if self.file_job:  # fio lays out the files it reads itself
            return False
        return self.rw not in ("write", "randwrite") and self.rwmixread != 0

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
        if self.ioengine in FILE_ENGINES:
            parts = [self.ioengine, f"{self.nrfiles or 1} files of {format_size(self.filesize or self.size)}"]
            return " ".join(parts + ([f"x{self.numjobs} jobs"] if self.numjobs > 1 else []))
        parts = [self.rw, format_size(self.bs), f"QD{self.iodepth}"]
        if self.nrfiles:
            parts.append(f"{self.nrfiles} files" + (f" of {format_size(self.filesize)}" if self.filesize else ""))
        if self.numjobs > 1:
            parts.append(f"x{self.numjobs} jobs")
        if self.rwmixread is not None:
            parts.append(f"{self.rwmixread}% reads")
        if self.sync and self.writes:  # a read has nothing to sync: fio's sync flag only makes writes O_SYNC
            parts.append("sync")
        if self.fsync and self.writes:
            parts.append(f"fsync/{self.fsync}")
        if not self.direct:
            parts.append("buffered")
        if self.buffer_compress_percentage is not None:
            parts.append(f"data {self.buffer_compress_percentage}% compressible")
        if self.refill_buffers:
            parts.append("refilled")
        if self.rate_iops is not None or self.rate is not None:
            per = (["reads and writes each"] if self.rw in MIXED_MODES else []) + (["per job"] if self.numjobs > 1 else [])
            parts.append(f"at {self.rate_iops} IOPS" if self.rate_iops is not None else f"at {_rate(self.rate or 0)}")
            if per:
                parts.append(f"({', '.join(per)})")
        return " ".join(parts)

    def params(self) -> dict:
        """Every parameter that shapes the I/O (stored with each result)."""
        d = asdict(self)
        del d["metric"]  # what the job is judged by, not how it runs
        for key in ("buffer_compress_percentage", "refill_buffers", "rate_iops", "rate", "sweep_of", "sweep_key",
                    "steadystate", "steadystate_duration", "steadystate_ramp_time", *FILE_FIELDS):  # unset: as stored before they existed
            if d[key] is None:
                del d[key]
        if self.jobfile is not None:
            d["jobfile"] = {"path": self.jobfile.path, "sha256": self.jobfile.sha256}
        return d


#: the fields of a file job (unset: as stored before they existed)
FILE_FIELDS = ("nrfiles", "filesize", "openfiles", "create_on_open", "file_service_type")


def fio_argv(job: FioJob, target: str, output: str, *, fio: str = "fio", jobfile_path: str | None = None,
             log_prefix: str | None = None, tail_seconds: float = 0, epoch_logs: bool = False,
             exec_prerun: str | None = None, status_interval: int | None = None) -> list[str]:
    """The exact fio command for ``job`` against ``target`` writing json+ to ``output``;
    with ``log_prefix``, fio also writes its IOPS and latency logs there (one point a second),
    stamped in unix epoch milliseconds with ``epoch_logs``.

    With ``tail_seconds`` a second job section, :data:`TAIL_NAME`, follows the measured job:
    the same I/O options and logs, stonewalled (it starts when the measured job ends), in a
    group of its own, time-based for ``tail_seconds`` without ramp.  On fio's command line
    the options after ``--name=x`` belong to job x alone, so the tail repeats every one of them.
    fio numbers the logs of the measured job's ``numjobs`` clones 1..numjobs and the tail's
    after them (:mod:`vmbench.fio.window`).

    ``exec_prerun`` is the measured job's prerun (its clones run it once set up, before their
    clock starts; :mod:`vmbench.fio.gate`); the tail has none.  With ``status_interval`` fio
    appends its status to the output every that many seconds (:mod:`vmbench.fio.stall`).

    For a job file, ``jobfile_path`` is the rewritten copy on that side (it names the target
    and its own logs; ``log_prefix`` and ``epoch_logs`` are unused; a tail is refused); the
    target is also in the ``VMBENCH_TARGET`` environment variable (see :func:`fio_env`).
    """
    if tail_seconds < 0:
        raise ValueError(f"tail_seconds {tail_seconds} is negative")
    if job.jobfile is not None:
        if tail_seconds:
            raise ValueError("a job-file job cannot have a tail: vmbench does not rewrite its jobs into a second one")
        if not jobfile_path:
            raise ValueError("a job-file job needs jobfile_path")
        return [fio, "--output-format=json+", f"--output={output}", *_status(status_interval), jobfile_path]
    if tail_seconds and job.name == TAIL_NAME:
        raise ValueError(f"a job named {TAIL_NAME} cannot have a tail: its figures would be left out")
    rbd = parse_target(target)
    io = [
        f"--directory={target}" if job.file_job else f"--filename={target}",
        f"--rw={job.rw}",
        f"--bs={job.bs}",
        f"--iodepth={job.iodepth}",
        f"--numjobs={job.numjobs}",
        f"--ioengine={job.ioengine}",
        f"--direct={int(job.direct)}",
        f"--size={file_job_size(job) if job.file_job else job.size}",
    ]
    if rbd is not None:  # librbd in place of the kernel: the image, the user and fio's rbd engine
        io = [*rbd.fio_args(), *(a for a in io[1:] if not a.startswith("--ioengine="))]
    optional = optional_args(job)
    logs = []
    if log_prefix:
        logs = [f"--write_iops_log={log_prefix}", f"--write_lat_log={log_prefix}", f"--log_avg_msec={LOG_AVG_MSEC}"]
        if epoch_logs:
            logs.append("--log_unix_epoch=1")
    argv = [
        *(rbd.env_prefix() if rbd is not None else []),
        fio,
        f"--name={job.name}",
        *io,
        *([] if job.file_job else ["--time_based=1"]),  # a file job does each file once; runtime caps it
        f"--runtime={_secs(job.runtime)}",
        f"--ramp_time={_secs(job.ramp)}",
        "--group_reporting=1",
        "--randrepeat=0",
        "--percentile_list=50:95:99:99.9",
        *optional,
        *logs,
        *([f"--exec_prerun={exec_prerun}"] if exec_prerun else []),
    ]
    if tail_seconds:
        argv += [f"--name={TAIL_NAME}", *io, "--group_reporting=1", "--randrepeat=0", *optional, *logs,
                 "--stonewall", "--new_group", "--time_based=1", f"--runtime={_secs(tail_seconds)}", "--ramp_time=0"]
    argv += ["--output-format=json+", f"--output={output}", *_status(status_interval)]
    return argv


def _status(interval: int | None) -> list[str]:
    return [f"--status-interval={interval}"] if interval else []


def optional_args(job: FioJob) -> list[str]:
    """The options a built-in job sets only when it has them (mix, sync, data, rate, steady state)."""
    optional: list[str] = []
    if job.rwmixread is not None:
        optional.append(f"--rwmixread={job.rwmixread}")
    if job.sync:
        optional.append("--sync=1")
    if job.fsync:
        optional.append(f"--fsync={job.fsync}")
    if job.buffer_compress_percentage is not None:
        optional.append(f"--buffer_compress_percentage={job.buffer_compress_percentage}")
    if job.refill_buffers is not None:
        optional.append(f"--refill_buffers={int(job.refill_buffers)}")
    if job.rate_iops is not None:
        optional.append(f"--rate_iops={job.rate_iops}")
    if job.rate is not None:
        optional.append(f"--rate={job.rate}")
    optional += file_args(job)
    if job.steadystate is not None:
        optional += [f"--steadystate={job.steadystate}", f"--steadystate_duration={_secs(job.steadystate_duration or 0)}"]
        if job.steadystate_ramp_time:
            optional.append(f"--steadystate_ramp_time={_secs(job.steadystate_ramp_time)}")
    return optional


def files_dir(mount: str) -> str:
    """Where a file job runs on a filesystem mounted at ``mount``."""
    return f"{mount.rstrip('/')}/{FILES_DIR}"


def file_job_size(job: FioJob) -> int:
    """A file job's size: each clone's files (nrfiles x filesize) when filesize is set."""
    return (job.nrfiles or 1) * job.filesize if job.filesize else job.size


def file_args(job: FioJob) -> list[str]:
    """fio's many-file options a built-in job sets."""
    out = []
    for key in FILE_FIELDS:
        value = getattr(job, key)
        if value is not None:
            out.append(f"--{key}={int(value) if isinstance(value, bool) else value}")
    return out


def fio_env(job: FioJob, target: str) -> dict[str, str]:
    """Environment for the fio command: job files find their target here."""
    env = {TARGET_ENV: target}
    env[SIZE_ENV] = str(job.size)
    return env


#: the block size of the precondition's writes (:func:`precondition_job`)
PRECONDITION_BS = 1 << 20


def to_precondition(jobs: Sequence[FioJob]) -> FioJob | None:
    """The job whose region a target's precondition writes: the biggest of the jobs that
    read (METHOD rule 6: written data before reads); None when none reads, so a target whose
    jobs only write (an aggressor writing, a write sweep) is not preconditioned."""
    reading = [j for j in jobs if j.reads and not j.file_job]
    return max(reading, key=lambda j: j.size) if reading else None


def precondition_seconds(size: int, rate: float | None, *, slow: bool) -> float:
    """How long the precondition of ``size`` bytes may take: at ``rate`` bytes/s when the
    disk's I/O limits allow no more (:meth:`IoLimits.write_rate`), else at 20 MB/s (TCG) or
    100 MB/s; doubled, plus a minute, as a deadline."""
    floor = (20e6 if slow else 100e6)
    return size / (min(rate, floor) if rate else floor) * (2 if rate else 1) + 60


def precondition_job(job: FioJob) -> FioJob:
    """A sequential 1M write over the job's region, so reads never hit unwritten holes."""
    return FioJob(
        name=f"precondition-{job.name}",
        rw="write",
        bs=PRECONDITION_BS,
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
    rbd = parse_target(target)
    where = [f"--filename={target}", f"--ioengine={pre.ioengine}"] if rbd is None else rbd.fio_args()
    return [
        *(rbd.env_prefix() if rbd is not None else []),
        fio,
        f"--name={pre.name}",
        where[0],
        "--rw=write",
        f"--bs={pre.bs}",
        f"--iodepth={pre.iodepth}",
        *where[1:],
        "--direct=1",
        f"--size={pre.size}",
        "--output-format=json",
        f"--output={output}",
    ]


def comparable_params(argv: Sequence[str]) -> list[str]:
    """The argv without what legitimately differs between sides: the fio binary, the target
    (``--filename``, a file job's ``--directory``; an RBD image's pool, name, user and ``env`` prefix), the output file, fio's
    logs (paths, averaging, time stamps), its status interval, the prerun that arms fio (its gate's paths) and the path of a job
    file, of which only the digest of its rewritten text is kept (``jobfile=<digest>``)."""
    out = []
    for arg in list(argv)[1:]:
        if arg.startswith(RBD_TARGET_OPTIONS):
            continue
        if arg.startswith("--"):
            # --log_avg_msec and --log_unix_epoch only set how fio averages and stamps its logs,
            # --status-interval how often it reports, not the I/O (runs stored before vmbench kept
            # fio's logs or its status have none, and can still be resumed)
            if not arg.startswith(("--filename=", "--directory=", "--output=", "--log_avg_msec=", "--log_unix_epoch=",
                                   "--exec_prerun=", "--status-interval=") + LOG_PATH_OPTIONS):
                out.append(arg)
        elif (m := _JOBFILE_COPY.search(arg)) is not None:
            out.append(f"jobfile={m.group(1)}")
    return out


def check_identical(host_argv: Sequence[str], guest_argv: Sequence[str]) -> None:
    """Refuse to compare host and guest runs whose fio parameters differ (METHOD rule 2)."""
    a, b = comparable_params(host_argv), comparable_params(guest_argv)
    if RBD_ENGINE in host_argv or RBD_ENGINE in guest_argv:  # librbd on the host is the layer below the guest's kernel engine
        a, b = ([x for x in params if not x.startswith("--ioengine=")] for params in (a, b))
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


def _rate(bytes_per_s: int) -> str:
    """50 MiB/s, 512 KiB/s, 1000 B/s: exact, in fio's binary multiples."""
    for unit, mult in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if bytes_per_s >= mult and bytes_per_s % mult == 0:
            return f"{bytes_per_s // mult} {unit}/s"
    return f"{bytes_per_s} B/s"
