"""Built-in workload profiles (METHOD.md, "Useful workload profiles").

A profile expands to one or more :class:`FioJob`; scenarios name it and may override any
job parameter for all of its jobs, or pick a subset with ``select``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..units import format_size
from .job import FioJob

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def _tuning_matrix() -> list[FioJob]:
    jobs = []
    for bs, label in ((4 * KiB, "4k"), (64 * KiB, "64k"), (1 * MiB, "1m")):
        for rw in ("randread", "randwrite", "read", "write"):
            jobs.append(FioJob(name=f"{label}-{rw}", rw=rw, bs=bs, iodepth=4, sync=True, profile="tuning-matrix"))
    return jobs


def _boot_storm() -> list[FioJob]:
    return [FioJob(name="boot-storm", rw="randread", bs=16 * KiB, iodepth=4, numjobs=4, profile="boot-storm")]


def _oltp() -> list[FioJob]:
    return [
        FioJob(name="oltp", rw="randrw", rwmixread=70, bs=8 * KiB, iodepth=2, numjobs=4, fsync=1, profile="oltp")
    ]


#: the metadata and small-file profiles: each of their jobs' clones works on its own files
META_FILES, META_FILESIZE, META_JOBS, META_RUNTIME = 1024, 4 * KiB, 4, 30.0
SMALL_FILES, SMALL_FILESIZE, SMALL_JOBS = 128, 32 * KiB, 2


def _metadata_churn() -> list[FioJob]:
    """Create, stat and delete many small files, several jobs at once: fio's file engines, one
    operation per file (files/s, stats/s, deletes/s), in a directory on a filesystem layer."""
    base = FioJob(name="metadata", rw="read", bs=META_FILESIZE, iodepth=1, numjobs=META_JOBS, runtime=META_RUNTIME, ramp=0,
                  size=META_FILES * META_FILESIZE, nrfiles=META_FILES, filesize=META_FILESIZE,
                  profile="metadata-churn")
    return [
        replace(base, name="meta-create", ioengine="filecreate", openfiles=1, create_on_open=True),
        replace(base, name="meta-stat", ioengine="filestat"),
        replace(base, name="meta-delete", ioengine="filedelete"),
    ]


def _small_files() -> list[FioJob]:
    """Write, then read, many small files (direct 4k I/O, each file in turn), several jobs at once."""
    base = FioJob(name="small-files", bs=4 * KiB, iodepth=4, numjobs=SMALL_JOBS, runtime=META_RUNTIME, ramp=0,
                  size=SMALL_FILES * SMALL_FILESIZE, nrfiles=SMALL_FILES, filesize=SMALL_FILESIZE, profile="small-files")
    return [replace(base, name="small-files-write", rw="write"), replace(base, name="small-files-read", rw="read")]


def _backup_stream() -> list[FioJob]:
    return [FioJob(name="backup-stream", rw="write", bs=1 * MiB, iodepth=8, profile="backup-stream")]


def _cache_buster() -> list[FioJob]:
    # The working set must be several times the guest's RAM and the ZFS ARC; the scenario
    # loader sets size by cache_buster_size() unless the user sets size.
    return [FioJob(name="cache-buster", rw="randread", bs=128 * KiB, iodepth=4, profile="cache-buster")]


CACHE_BUSTER_RAM_FACTOR = 4


def cache_buster_size(max_guest_ram: int, arc_max: int | None) -> tuple[int, str]:
    """A cache-buster job's working set: :data:`CACHE_BUSTER_RAM_FACTOR` x whichever is larger,
    the largest VM's memory or the ZFS ARC's c_max (``storage.arc_max``); and how, in words."""
    basis = max(max_guest_ram, arc_max or 0)
    size = CACHE_BUSTER_RAM_FACTOR * basis
    arc = format_size(arc_max) if arc_max else "not stated"
    return size, (f"{CACHE_BUSTER_RAM_FACTOR} x max(largest VM's memory {format_size(max_guest_ram)}, ARC c_max {arc})"
                  f" = {format_size(size)}")

PROFILES: dict[str, Callable[[], list[FioJob]]] = {
    "tuning-matrix": _tuning_matrix,
    "boot-storm": _boot_storm,
    "oltp": _oltp,
    "metadata-churn": _metadata_churn,
    "small-files": _small_files,
    "backup-stream": _backup_stream,
    "cache-buster": _cache_buster,
}

def expand(profile: str, overrides: dict, select: tuple[str, ...] = ()) -> list[FioJob]:
    """The jobs of ``profile`` with ``overrides`` applied (KeyError for an unknown profile)."""
    jobs = PROFILES[profile]()
    if select:
        names = {j.name for j in jobs}
        unknown = [s for s in select if s not in names]
        if unknown:
            raise ValueError(f"{', '.join(unknown)} not in profile {profile} (its jobs: {', '.join(sorted(names))})")
        jobs = [j for j in jobs if j.name in select]
    return [replace(j, **overrides) for j in jobs]
