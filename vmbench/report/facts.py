"""What a table's numbers may be trusted for: the admissibility facts stated under each
table (METHOD rules 3, 4, 6, 7), why each group stopped repeating, and whether a fixed-rate
group held its rate (:func:`saturation`).

Pure: stored rows in, ``(facts, missing)`` out.  A fact the stored run does not tell is
never guessed: it goes to ``missing`` and the table says "not stated: ...".
"""

from __future__ import annotations

import statistics
from typing import Iterable, Mapping, Sequence

from ..fio.job import MIXED_MODES
from ..fio.result import stored_direction, stored_steadystate
from ..results.environment import Environment
from ..results.key import MeasurementKey
from ..results.records import CellRecord, JobParams, Measurement
from ..scenario.model import RepeatPolicy
from ..settings import Cache
from .filejobs import file_params
from .zfsfacts import zfs_facts

__all__ = ["RepeatPolicy", "admissibility", "saturation"]

STEADY_RUNTIME_S = 10.0  # below this a run is too short to span several ZFS transaction groups


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _mib(n_bytes: float) -> str:
    mib = n_bytes / (1 << 20)
    return f"{mib / 1024:,.1f} GiB" if mib >= 10 * 1024 else f"{mib:,.0f} MiB"


def _names(names: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(names))


def admissibility(measurements: Sequence[Measurement], cells: Sequence[CellRecord], env: Environment | None,
                  policy: RepeatPolicy, *, storage_cells: Sequence[CellRecord] | None = None) -> tuple[dict[str, str], list[str]]:
    """Facts about the measurements of one table: cache state, sync mode, working set vs
    RAM, runtime vs steady state, repeats, and on ZFS storage the ARC, pool and volume
    (:func:`~vmbench.report.zfsfacts.zfs_facts`, over ``storage_cells``, else ``cells``);
    and what the stored run does not tell."""
    env = env if env is not None else Environment()
    jobs: dict[str, JobParams] = {}
    sync: dict[str, bool] = {}
    counts: dict[MeasurementKey, int] = {}
    for m in measurements:
        jobs.setdefault(m.job, m.job_params)
        sync.setdefault(m.job, m.sync)
        key = m.group  # the group whose repeats are counted
        counts[key] = counts.get(key, 0) + 1
    facts: dict[str, str] = {}
    missing: list[str] = []
    if not jobs:
        return facts, missing
    jobfiles = [j for j, p in jobs.items() if p.jobfile]
    plain = {j: p for j, p in jobs.items() if j not in jobfiles}
    facts["cache"] = _cache(plain, cells, missing, jobfiles, librbd=env.on_librbd)
    synced = [j for j, s in sync.items() if s]
    facts["sync"] = (f"sync writes in {_names(synced)}: compare them only with each other" if synced
                     else "no sync writes (every job asynchronous)")
    facts["working set"] = _working_set(plain, cells, env, missing, jobfiles)
    # a file job does each file once (its runtime only caps it): steady state is not its question
    facts["steady state"] = _steady({j: p for j, p in plain.items() if not file_params(p)}, missing, jobfiles)
    judged = steady_attained(measurements, plain)
    if judged:
        facts["steady state"] = judged if facts["steady state"] == "-" else f"{facts['steady state']}; {judged}"
    ns = sorted(set(counts.values()))
    spread = str(ns[0]) if len(ns) == 1 else f"{ns[0]}..{ns[-1]}"
    facts["repeats"] = f"{spread} per group ({policy.label()})"
    zfs, zfs_missing = zfs_facts(measurements, cells if storage_cells is None else storage_cells, env)
    facts.update(zfs)
    missing += zfs_missing
    return {k: v for k, v in facts.items() if v != "-"}, missing  # an unknown fact is in missing only


def _cache(jobs: dict[str, JobParams], cells: Sequence[CellRecord], missing: list[str], jobfiles: list[str], *,
           librbd: bool = False) -> str:
    parts = []
    modes: dict[object, list[str]] = {}  # a Cache mode, or a stored value that is none
    unknown = []
    for c in cells:
        mode = c.settings.cache or c.settings.value("cache")
        if mode is None:
            unknown.append(c.name)
        else:
            modes.setdefault(mode, []).append(c.name)
    if modes:
        if len(modes) == 1 and not unknown:
            parts.append(f"QEMU cache={next(iter(modes))}")
        else:
            parts.append("QEMU cache " + ", ".join(f"{m} ({_names(n)})" for m, n in modes.items()))
    if unknown:
        missing.append(f"QEMU cache mode of {_names(unknown)}")
    direct = [j for j, p in jobs.items() if p.direct is True]
    buffered = [j for j, p in jobs.items() if p.direct is False]
    undecided = [j for j, p in jobs.items() if p.direct is None] + jobfiles
    if buffered:
        parts.append(f"buffered {_names(buffered)} (vmbench drops the page cache before each buffered run)"
                     + (f", O_DIRECT {_names(direct)}" if direct else ""))
    elif direct:
        parts.append("every job O_DIRECT (guest page cache bypassed)")
    if undecided:
        missing.append(f"O_DIRECT or buffered for {_names(undecided)}")
    host_cached = [str(m) for m in modes if isinstance(m, Cache) and m.host_page_cache]
    if librbd and modes:  # QEMU opens RBD through librbd: no host page cache, librbd's own client cache instead
        parts.append(f"RBD through librbd: no host page cache; librbd's client cache (rbd_cache) "
                     + (f"on with cache={'/'.join(host_cached)}" if host_cached else "off in every cell")
                     + (f", off with cache={'/'.join(str(m) for m in modes if str(m) not in host_cached)}" if host_cached and len(host_cached) < len(modes) else ""))
    elif host_cached:
        parts.append(f"host page cache in use with cache={'/'.join(host_cached)}, not dropped before guest runs")
    elif modes:
        parts.append("host page cache bypassed")
    return "; ".join(parts) or "-"


#: the pieces of a row's note (:mod:`vmbench.report.rows`) that say its figure may not be the I/O
#: path's: a cache served it, or a CPU was the limit.  A change measured on such a row is never
#: recommended, nor a report's headline.
SUSPECT_MARKS = ("cached?", "served from cache?", "from the host page cache", "buffered I/O within the guest's RAM", "CPU-bound?")


def suspect_flags(note: str | None) -> list[str]:
    """The pieces of a row's ``note`` (";"-separated) that flag its figure (:data:`SUSPECT_MARKS`)."""
    return [p.strip() for p in (note or "").split(";") if any(m in p for m in SUSPECT_MARKS)]


def _working_set(jobs: dict[str, JobParams], cells: Sequence[CellRecord], env: Environment, missing: list[str],
                 jobfiles: list[str]) -> str:
    sizes = {j: p.size for j, p in jobs.items() if isinstance(p.size, (int, float))}
    no_size = [j for j in jobs if j not in sizes] + jobfiles
    if no_size:
        missing.append(f"working set of {_names(no_size)}")
    if not sizes:
        return "-"
    biggest = max(sizes.values())
    parts = [f"largest job {_mib(biggest)} ({_names(j for j, s in sizes.items() if s == biggest)})"]
    reads = [p for p in jobs.values() if p.rw not in ("write", "randwrite")]  # reads or mixed
    buffered = any(p.direct is False for p in reads)
    host_cached = sorted({str(mode) for c in cells if (mode := c.settings.cache) is not None and mode.host_page_cache
                          and not env.on_librbd})
    mems = sorted({mib for c in cells if (mib := c.settings.memory_mib) is not None})
    if mems:
        ram = _mib(mems[0] << 20) if len(mems) == 1 else f"{_mib(mems[0] << 20)}..{_mib(mems[-1] << 20)}"
        if biggest < mems[0] << 20:
            parts.append(f"fits in guest RAM {ram}" + (" (buffered reads may come from the guest page cache)" if buffered else ""))
        else:
            parts.append(f"does not fit in guest RAM {ram}" if biggest >= mems[-1] << 20 else f"fits in some guest RAM {ram}")
    elif cells:
        missing.append("guest RAM of the cells")
    host = env.host_memory_mib
    if host:
        if biggest < host << 20:
            parts.append(f"fits in host RAM {_mib(host << 20)}"
                         + (f" (reads under cache={'/'.join(host_cached)} may come from the host page cache)" if host_cached and reads else ""))
        else:
            parts.append(f"does not fit in host RAM {_mib(host << 20)}")
    else:
        missing.append("host RAM (host_memory_mib not recorded)")
    return "; ".join(parts)


def steady_attained(measurements: Sequence[Measurement], jobs: Mapping[str, JobParams]) -> str:
    """What fio's own steady-state detection found, for the jobs that asked for it
    (``steadystate``): steady in every run and after how long (fio ends the job there), or a
    WARNING naming the runs that never were (METHOD rule 6); "" when no job asked."""
    asked = sorted(j for j, p in jobs.items() if p.steadystate)
    runs: dict[str, list[tuple[bool, float]]] = {}
    for m in measurements:
        if m.job not in asked:
            continue
        found = stored_steadystate(m.fio)  # fio's own output
        if found:
            runs.setdefault(m.job, []).append(found)
    parts = []
    for job in asked:
        got, criterion = runs.get(job, []), jobs[job].steadystate
        reached = [t for ok, t in got if ok]
        if got and len(reached) == len(got):
            parts.append(f"{job} steady ({criterion}) in every run, after {sum(reached) / len(reached):.0f} s on average")
        elif got:
            parts.append(f"WARNING: {job} never steady ({criterion}) in {len(got) - len(reached)} of {len(got)} runs, "
                         "which ran their whole runtime")
    return "; ".join(parts)


def _steady(jobs: dict[str, JobParams], missing: list[str], jobfiles: list[str]) -> str:
    times = {j: (p.runtime, p.ramp) for j, p in jobs.items()}
    unknown = [j for j, (rt, ramp) in times.items() if rt is None or ramp is None] + jobfiles
    if unknown:
        missing.append(f"runtime and ramp of {_names(unknown)}")
    known = {j: (float(rt or 0), float(ramp or 0)) for j, (rt, ramp) in times.items() if j not in unknown}  # None: in unknown
    if not known:
        return "-"
    shapes: dict[tuple, list[str]] = {}
    for j, t in known.items():
        shapes.setdefault(t, []).append(j)
    if len(shapes) == 1:
        (rt, ramp), = shapes
        text = f"every job {rt:g} s + {ramp:g} s ramp"
    else:
        text = ", ".join(f"{_names(js)} {rt:g} s + {ramp:g} s ramp" for (rt, ramp), js in shapes.items())
    short = [j for j, (rt, _) in known.items() if rt < STEADY_RUNTIME_S]
    no_ramp = [j for j, (_, ramp) in known.items() if not ramp]
    if short:
        text += f"; WARNING: runtime under {STEADY_RUNTIME_S:g} s ({_names(short)}): too short for steady state"
    if no_ramp:
        text += f"; WARNING: no ramp ({_names(no_ramp)}): start-up included"
    return text


SATURATION_SHARE = 0.97  # a fixed-rate group achieving less than this share of its rate did not hold it


def _directions(params: JobParams) -> list[str]:
    """The directions a built-in job does I/O in (a mixed job's share of 0% is none)."""
    rw = params.rw
    if rw in MIXED_MODES:
        mix = params.rwmixread
        mix = 50 if mix is None else int(mix)
        return [d for d, share in (("read", mix), ("write", 100 - mix)) if share > 0]
    return ["write"] if rw in ("write", "randwrite") else ["read"]


def _achieved(row: Measurement, direction: str, what: str) -> float | None:
    """A repeat's ``what`` ("iops", "bw_bytes") in one direction, from fio's stored output
    (every job clone summed, a load run's tail left out); None when it was not stored."""
    return stored_direction(row.fio, direction, what)


def saturation(rows: Sequence[Measurement]) -> str | None:
    """"saturated (achieved X of Y)" when a fixed-rate group's median achieved rate fell under
    :data:`SATURATION_SHARE` of the rate it was given, else None.  fio's rate_iops/rate hold
    for each job clone (numjobs) and, in a mixed job, for reads and writes each: a mixed job
    is judged per direction from fio's stored output (its total against the sum where that
    was not stored).  A job file's own rate is not read here."""
    if not rows or rows[0].job_params.file_job:
        return None
    params = rows[0].job_params
    rate_iops, rate = params.rate_iops, params.rate
    per_job = rate_iops if rate_iops is not None else rate
    if per_job is None:
        return None
    what = "iops" if rate_iops is not None else "bw_bytes"
    numjobs = int(params.numjobs or 1)
    want = float(per_job) * numjobs
    dirs = _directions(params)

    def fmt(v: float) -> str:
        return f"{v:,.0f}" if what == "iops" else _mb_s(v / 1e6)

    unit = "IOPS" if what == "iops" else "MB/s"
    per = [[_achieved(r, d, what) for r in rows] for d in dirs]
    if len(dirs) > 1 and all(v is not None for vs in per for v in vs):
        got = [statistics.median([v or 0.0 for v in vs]) for vs in per]
        if all(g >= SATURATION_SHARE * want for g in got):
            return None
        parts = [f"{fmt(g)} of {fmt(want)} {d} {unit}" for d, g in zip(dirs, got)]
    else:
        total = statistics.median(float(getattr(r, what)) for r in rows)
        if total >= SATURATION_SHARE * want * len(dirs):
            return None
        parts = [f"{fmt(total)} of {fmt(want * len(dirs))} {unit}"]
    clones = f"; {numjobs} jobs x {fmt(want / numjobs)}" if numjobs > 1 else ""
    return f"saturated (achieved {', '.join(parts)}{clones})"


def _mb_s(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"
