"""``jobs:``: built-in profiles, explicit jobs and fio job files; fixed rates and the metric each job
is judged by; sizes checked against the scratch disk."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..fio import jobfile, profiles
from ..fio.engines import FILE_ENGINES, layer_refusal
from ..fio.job import IOENGINES, MIXED_MODES, RW_MODES, FioJob, JobFile, Metric
from ..fio.engines import Reason
from ..fio.jobparse import VMBENCH_VARIABLES
from ..units import format_size, human_size
from .backend import Storage
from .model import Cell, FilesystemLayer, Stack, layer_path
from .parsers import MiB, choice_parser, duration_parser, pattern_parser, size_parser, refuse_duplicates
from .reader import Context, Section, as_bool, as_int, as_name, as_str, as_str_list, items

JOB_KEYS = ("rw", "bs", "iodepth", "numjobs", "rwmixread", "runtime", "ramp", "size", "direct", "sync", "fsync", "ioengine",
            "buffer_compress_percentage", "refill_buffers", "rate_iops", "rate", "metric",
            "steadystate", "steadystate_duration", "steadystate_ramp_time",
            "nrfiles", "filesize", "openfiles", "create_on_open", "file_service_type")
#: fio's steady-state criterion: IOPS or bandwidth, its deviation or its slope, a bound (% or absolute)
STEADYSTATE_RE = re.compile(r"(iops|bw)(_slope)?:[0-9]+(\.[0-9]+)?%?")
JOBFILE_KEYS = ("file", "name", "size", "runtime", "env", "metric")
RATE_KEYS = ("rate_iops", "rate")
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# What a job file may not set (see vmbench.fio.jobfile.check): commands, code, replays, host cgroups...
FORBIDDEN_JOBFILE_OPTIONS = tuple(jobfile.REFUSED)
JOBFILE_IOENGINES = jobfile.JOBFILE_IOENGINES
DEFAULT_JOBFILE_SIZE = 256 * MiB  # preconditioned when a job file sets no size of its own
STACK_SLACK = 128 * MiB  # room for partition table, LVM, LUKS and filesystem metadata


def read_jobs(ctx: Context, top: Section, base_dir: Path) -> list[FioJob]:
    entries = items(ctx, top.raw("jobs", None), "jobs", top.line_of("jobs"))
    if not entries:
        raise top.fail("jobs", "the scenario needs at least one job (a profile, a job or a fio job file)",
                       f"built-in profiles: {', '.join(profiles.PROFILES)}")
    jobs: list[FioJob] = []
    for path, line, value in entries:
        sec = Section(ctx, value, path, line)
        if sec.has("profile"):
            profile = sec.get("profile", choice_parser(tuple(profiles.PROFILES)))
            select = sec.get("select", as_str_list, ())
            overrides = _job_overrides(sec, f"profile {profile}")
            sweep = _sweep(sec, overrides)
            sec.done(("profile", "select", "sweep") + JOB_KEYS)
            try:
                expanded = profiles.expand(profile, overrides, select)
            except ValueError as exc:
                raise sec.fail("select", str(exc)) from None
            jobs.extend(p for j in expanded for p in sweep_points(_check_job(sec, j), sweep))
        elif sec.has("file"):
            if sec.has("sweep"):
                raise sec.fail("sweep", "a job file sets its own iodepth and numjobs: sweep: applies to vmbench's jobs and profiles",
                               "list one job file per point, or write the job with rw:, bs: and sweep:")
            jobs.append(_jobfile(sec, base_dir))
        else:
            name = sec.get("name", as_name)
            overrides = _job_overrides(sec, f"job {name}")
            if "rw" not in overrides or "bs" not in overrides:
                raise ctx.fail(path, line, "a job needs rw and bs (or use profile: or file:)",
                               f"rw is one of: {', '.join(RW_MODES)}")
            sweep = _sweep(sec, overrides)
            sec.done(("name", "profile", "file", "sweep") + JOB_KEYS)
            jobs.extend(sweep_points(_check_job(sec, FioJob(name=name, **overrides)), sweep))
    refuse_duplicates(ctx, top, "jobs", [j.name for j in jobs])
    return jobs


def _job_overrides(sec: Section, what: str) -> dict:
    """The entry's job keys, parsed; ``what`` names the job or profile in messages."""
    out: dict[str, Any] = {}
    parsers = {
        "rw": choice_parser(RW_MODES),
        "bs": size_parser(512),
        "iodepth": as_int(1, 1024),
        "numjobs": as_int(1, 64),
        "rwmixread": as_int(0, 100),
        "runtime": duration_parser(1),
        "ramp": duration_parser(0),
        "size": size_parser(1 * MiB),
        "direct": as_bool,
        "sync": as_bool,
        "fsync": as_int(0),
        "ioengine": choice_parser(IOENGINES + FILE_ENGINES),
        "nrfiles": as_int(1, 1 << 20),
        "filesize": size_parser(512),
        "openfiles": as_int(1, 1 << 20),
        "create_on_open": as_bool,
        "file_service_type": choice_parser(("random", "roundrobin", "sequential")),
        "buffer_compress_percentage": as_int(0, 100),
        "refill_buffers": as_bool,
        "steadystate": pattern_parser(STEADYSTATE_RE, "fio's criterion: iops, iops_slope, bw or bw_slope, a colon and a "
                                                      "bound, e.g. iops_slope:0.3%"),
        "steadystate_duration": duration_parser(1),
        "steadystate_ramp_time": duration_parser(0),
    }
    for key, parse in parsers.items():
        if sec.has(key):
            out[key] = sec.get(key, parse)
    named = {"rate_iops": as_int(1), "rate": _rate, "metric": Metric.parse}
    for key, parse in named.items():
        if sec.has(key):
            try:
                out[key] = parse(sec.raw(key))
            except (ValueError, TypeError) as exc:
                raise sec.fail(key, f"{what}: {exc}", _HINTS[key]) from None
    _check_steadystate(sec, out, what)
    if "rate_iops" in out and "rate" in out:
        raise sec.fail("rate", f"{what}: rate_iops and rate are both set; a job runs at one fixed rate",
                       "keep rate_iops (I/Os a second) or rate (bytes a second)")
    return out


def _check_steadystate(sec: Section, out: dict, what: str) -> None:
    """steadystate needs its window (and :func:`_check_job` that the window fits in the runtime)."""
    if "steadystate" not in out:
        for key in ("steadystate_duration", "steadystate_ramp_time"):
            if key in out:
                raise sec.fail(key, f"{what}: {key} without steadystate", "add steadystate: e.g. iops_slope:0.3%")
        return
    if "steadystate_duration" not in out:
        raise sec.fail("steadystate", f"{what}: steadystate needs steadystate_duration: the window fio judges",
                       "e.g. steadystate_duration: 30s, with a runtime of at least that (the most the job runs)")


#: what a sweep may vary, and the name each point's job takes after its job's (``4k-randread.qd8``)
SWEEP_KEYS = {"iodepth": ("qd", 1024), "numjobs": ("nj", 64)}


def _sweep(sec: Section, overrides: dict) -> tuple[str, tuple[int, ...]] | None:
    """``sweep: {iodepth: [1, 2, 4]}`` (or numjobs): the setting and its values, ascending."""
    if not sec.has("sweep"):
        return None
    raw = sec.raw("sweep")
    hint = "e.g. sweep: {iodepth: [1, 2, 4, 8, 16, 32, 64]} (or numjobs: [1, 2, 4]): one setting, two values or more"
    if not isinstance(raw, dict) or len(raw) != 1 or next(iter(raw)) not in SWEEP_KEYS:
        raise sec.fail("sweep", f"a sweep varies one of {', '.join(SWEEP_KEYS)}", hint)
    key, values = next(iter(raw.items()))
    top = SWEEP_KEYS[key][1]
    if (not isinstance(values, list) or len(values) < 2 or len(set(map(str, values))) != len(values)
            or not all(isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top for v in values)):
        raise sec.fail("sweep", f"sweep {key}: two or more different whole numbers from 1 to {top}", hint)
    if key in overrides:
        raise sec.fail(key, f"{key} is swept (sweep: {{{key}: ...}}): the entry sets it too",
                       f"drop {key}: here, or the sweep")
    return key, tuple(sorted(values))


def sweep_points(job: FioJob, sweep: tuple[str, tuple[int, ...]] | None) -> list[FioJob]:
    """``job`` as it is, or one job per point of ``sweep``, named after it (``.qd8``, ``.nj4``)."""
    if sweep is None:
        return [job]
    key, values = sweep
    suffix = SWEEP_KEYS[key][0]
    return [replace(job, name=f"{job.name}.{suffix}{v}", sweep_of=job.name, sweep_key=key,
                    iodepth=v if key == "iodepth" else job.iodepth, numjobs=v if key == "numjobs" else job.numjobs)
            for v in values]


_HINTS = {
    "rate_iops": "I/Os a second, a whole number, e.g. 500 (per job and, in mixed jobs, per direction)",
    "rate": "bytes a second, e.g. 50M or 50M/s (per job and, in mixed jobs, per direction)",
    "metric": None,
}


def _rate(value: Any) -> int:
    """``rate:``: a size a second (``50M``, ``50M/s``, ``512k``), in bytes."""
    text = value.strip() if isinstance(value, str) else value
    if isinstance(text, str) and text.lower().endswith("/s"):
        text = text[:-2].strip()
    return int(size_parser(1)(text))


def _check_job(sec: Section, job: FioJob) -> FioJob:
    if job.rwmixread is not None and job.rw not in MIXED_MODES:
        raise sec.fail("rwmixread", f"only applies to mixed jobs ({', '.join(MIXED_MODES)}); job {job.name} is {job.rw}")
    if job.direct and job.bs % 512:
        raise sec.fail("bs", f"job {job.name}: bs {job.bs} is not a multiple of 512, which direct I/O needs")
    need = (job.steadystate_duration or 0) + (job.steadystate_ramp_time or 0)
    if job.steadystate and job.runtime < need:
        raise sec.fail("runtime", f"job {job.name}: runtime {job.runtime:g}s is under steadystate_duration + "
                       f"steadystate_ramp_time ({need:g}s): fio could never judge the window",
                       "the runtime is the most the job runs; make it longer than the window")
    if job.bs > job.size:
        raise sec.fail("bs", f"job {job.name}: bs {format_size(job.bs)} is larger than size {format_size(job.size)}")
    return job


def _jobfile(sec: Section, base_dir: Path) -> FioJob:
    """A user's fio job file: read as fio reads it (includes read in, ``${NAME}`` from the
    entry's ``env:``) and checked (errors name the file's line), then scaled by the entry's
    ``size:``/``runtime:`` (every section that sets the option, or [global] when none does).
    vmbench rewrites a copy per target when it runs (vmbench.fio.jobfile)."""
    rel = sec.get("file", as_str)
    name = sec.get("name", as_name, Path(rel).stem)
    size = sec.get("size", size_parser(1 * MiB), None)
    runtime = sec.get("runtime", duration_parser(1), None)
    env = sec.get("env", _env, {})
    for key in RATE_KEYS:
        if sec.has(key):
            raise sec.fail(key, f"job file job {name}: {key} only applies to vmbench's own jobs",
                           f"a job file says its own rate: set {key}= in {rel}")
    try:
        metric = Metric.parse(sec.raw("metric")) if sec.has("metric") else None
    except ValueError as exc:
        raise sec.fail("metric", f"job file job {name}: {exc}") from None
    sec.done(JOBFILE_KEYS)
    path = (base_dir / rel) if not Path(rel).is_absolute() else Path(rel)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise sec.fail("file", f"cannot read fio job file {path}: {exc.strerror}") from None
    try:
        parsed = jobfile.parse(data, str(path), env=env)
        jobfile.check(parsed)
        text, overrides = jobfile.scale(parsed.text, str(path), size=size, runtime=runtime)
        scaled = jobfile.parse(text, str(path))
    except jobfile.JobFileError as exc:
        raise sec.fail("file", str(exc), exc.hint) from None
    file_size, size_line = jobfile.effective_size(parsed)
    if size is not None:
        size = jobfile.effective_size(scaled)[0] or size  # with any offset the file sets
        origin = f"size: {format_size(size)} in the jobs entry for {rel}, with any offset the file sets"
    elif file_size is not None:
        size, origin = file_size, f"{_where(parsed, size_line)} (size, with offset when set)"
    else:
        size, origin = DEFAULT_JOBFILE_SIZE, f"vmbench's default for a job file that sets no size ({path})"
    offset, offset_line = jobfile.furthest_offset(scaled)
    run_s, ramp = jobfile.timing(scaled)
    job = JobFile(path=str(path), text=text, runtime=run_s, ramp=ramp, overrides=parsed.notes + tuple(overrides),
                  size_origin=origin, entry_line=sec.line, offset=offset,
                  offset_origin=_where(parsed, offset_line) if offset_line else "")
    return FioJob(name=name, size=size, direct=jobfile.is_direct(scaled), jobfile=job, profile="file", metric=metric)


def _where(parsed: jobfile.ParsedJobFile, line: int | None) -> str:
    path, n = parsed.where(line or 0)
    return f"{path}:{n}"


def _env(value: Any) -> dict[str, str]:
    """``env:``: values for the job file's ``${NAME}`` (written into vmbench's copy)."""
    if not isinstance(value, dict):
        raise ValueError("must be a mapping of variable names to values, e.g. {FIO_BS: 4k}")
    out = {}
    for key, v in value.items():
        if not isinstance(key, str) or not ENV_NAME.fullmatch(key):
            raise ValueError(f"{key!r} is not a variable name (letters, digits and _, not starting with a digit)")
        if key in VMBENCH_VARIABLES:
            raise ValueError(f"{key} is vmbench's own (it names each layer's target or the job's size)")
        if isinstance(v, bool) or not isinstance(v, (str, int, float)):
            raise ValueError(f"{key}: {v!r} is not a text or a number")
        text = str(v)
        if any(c in text for c in ";#\n\r"):
            raise ValueError(f"{key}: a value with ';', '#' or a line break cannot be written into a job file "
                             "(fio reads them as the start of a comment)")
        out[key] = text
    return out


def cache_buster_of(cells: tuple[Cell, ...], storage: Storage) -> tuple[int, str]:
    """The working set a cache-buster job gets unless it sets its size, and how it was sized."""
    return profiles.cache_buster_size(max(c.vm.memory_mib for c in cells) * MiB, storage.arc_max)


def resolve_sizes(ctx: Context, top: Section, jobs: list[FioJob], cells: tuple[Cell, ...], storage: Storage, stacks: list[Stack]) -> list[FioJob]:
    """Cache-buster jobs get a working set of several times the largest VM's RAM or the ARC's
    c_max, whichever is larger (:func:`~vmbench.fio.profiles.cache_buster_size`); every job
    must fit the scratch disk (with room for layer metadata when there are stacks)."""
    out = []
    room = storage.scratch_size - (STACK_SLACK if stacks else 0)
    for job in jobs:
        if job.profile == "cache-buster" and job.size == FioJob.size:
            job = replace(job, size=cache_buster_of(cells, storage)[0])
        jf = job.jobfile
        slack = STACK_SLACK if stacks else 0
        if jf is not None and jf.offset and jf.offset >= room:
            needed = -(-(max(job.size, jf.offset + MiB) + slack) // MiB) * MiB
            raise ctx.fail(
                "jobs", jf.entry_line or top.line_of("jobs"),
                f"job file {jf.offset_origin}: a job starts {human_size(jf.offset)} into its target (offset, and "
                f"offset_increment x numjobs), {Reason.OFFSET.value} ({human_size(max(room, 0))}"
                + (" after layer metadata)" if stacks else ")"),
                f"raise storage.scratch_size to at least {format_size(needed)}, or lower the offset on that line",
            )
        if job.size > room and jf is not None:
            raise ctx.fail(
                "jobs", jf.entry_line or top.line_of("jobs"),
                f"job file {jf.path} touches {human_size(job.size)} of its target ({jf.size_origin}) "
                f"{Reason.TOO_LARGE.value} {human_size(max(room, 0))}" + (" after layer metadata" if stacks else ""),
                f"set size: in the scenario's jobs entry (e.g. size: {format_size(max(room - jf.offset, MiB) // MiB * MiB)}) "
                f"or raise storage.scratch_size to at least {format_size(job.size + slack)}",
            )
        if job.size > room:
            raise top.fail(
                "jobs",
                f"job {job.name} needs {format_size(job.size)} but the scratch disk leaves {format_size(max(room, 0))}"
                + (" after layer metadata" if stacks else ""),
                f"raise storage.scratch_size to at least {format_size(job.size + (STACK_SLACK if stacks else 0))} or lower the job's size",
            )
        out.append(job)
    return out


def check_jobs_vs_stacks(ctx: Context, top: Section, jobs: list[FioJob], stacks: list[Stack]) -> None:
    """A LUKS sector larger than 512 bytes refuses direct I/O in smaller blocks; a file job
    needs a filesystem layer to run on (it is not run on block layers)."""
    measured_fs = [layer_path(st, d) for st in stacks for d in range(1, len(st.layers) + 1)
                   if st.measures(d) and isinstance(st.layers[d - 1], FilesystemLayer)]
    for job in jobs:
        if job.file_job and not measured_fs:
            found = layer_refusal(job.file_what, "raw", False)
            assert found is not None
            raise top.fail("jobs", f"job {job.name}: {found[1]}; this scenario measures no filesystem layer, so it would run nowhere",
                           "add a stack whose top layer is a filesystem, e.g. stacks: [{name: ext4, layers: [{filesystem: ext4}]}]")
    for stack in stacks:
        luks = stack.luks
        if luks and luks.sector_size and luks.sector_size > 512:
            for job in jobs:
                if job.jobfile is None and job.direct and job.bs % luks.sector_size:
                    raise top.fail("stacks", f"stack {stack.name}: LUKS sector size {luks.sector_size} cannot take job {job.name}'s direct {format_size(job.bs)} I/O",
                                   f"use bs a multiple of {luks.sector_size}, or sector_size: 512")
