"""From a run's loaded measurements to comparisons: gaps to the host, to the baseline,
between layers; journey steps; targets.  Pure: measurements (grouped by their
:class:`~vmbench.results.key.MeasurementKey`) in, :class:`Row` and :class:`TargetResult` out;
:mod:`vmbench.report.tables` lays them out as tables (it imports this module, never the reverse).

Repeats are combined the honest way: the median of IOPS and bandwidth, with their spread
(coefficient of variation), and percentiles from the merged latency histograms.  Every delta
(gap, vs baseline, vs the layer below, vs the previous step) also carries a bootstrap
interval and a verdict from :mod:`vmbench.report.stats`, in ``Row.deltas``.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from ..fio.result import Histogram
from ..results.key import MeasurementKey
from . import stats
from .facts import host_page_cache
from .stats import Delta


@dataclass(frozen=True)
class Figures:
    iops: float
    mb_s: float
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    p999_ms: float | None
    repeats: int
    cv: float | None  # IOPS coefficient of variation across repeats; None for one repeat
    job_hash: str
    samples: tuple[float, ...] = ()  # each repeat's IOPS, in the order they ran (for intervals)
    # the sampler's means over the run (vmbench.telemetry.sampler), averaged over the repeats that have them
    dev_read_mb_s: float | None = None
    dev_write_mb_s: float | None = None
    cpu_busy: float | None = None  # 100 - idle, % of all CPUs of the side fio ran on
    cpu_idle: float | None = None
    # ZFS (vmbench.telemetry.zfs), likewise averaged over the repeats that have them
    pool_read_mb_s: float | None = None  # zpool iostat: the pool's MB/s read and written
    pool_write_mb_s: float | None = None
    arc_hit_ratio: float | None = None  # ARC hits / accesses over the run (0..1)
    arc_size_mb: float | None = None
    scan: str | None = None  # "none", "scrub", "resilver": the worst any repeat saw
    txg_timeout_s: float | None = None  # zfs_txg_timeout (the largest any repeat read)
    write_ampl: float | None = None  # pool write MB/s / fio's MB/s, for write jobs
    # the host sampled while fio ran in a guest ("host-disk", "host-cpu"): the scratch disk's
    # device(s) on the host and the host's CPUs (the pool figures above are the host's too)
    host_dev_read_mb_s: float | None = None
    host_dev_write_mb_s: float | None = None
    host_cpu_busy: float | None = None  # 100 - idle, % of all the host's CPUs
    host_cpu_idle: float | None = None


@dataclass(frozen=True)
class Row:
    """One line of a comparison table."""

    job: str
    sync: bool
    side: str  # host or guest
    cell: str | None
    stack: str | None
    layer: str
    figures: Figures
    gap: float | None = None  # host IOPS / this IOPS
    vs_baseline: float | None = None  # this IOPS / baseline IOPS - 1
    vs_previous: float | None = None  # this IOPS / the previous cell's IOPS - 1 (journeys)
    vs_below: float | None = None  # this IOPS / the layer below's IOPS - 1
    note: str = ""
    settings: dict = field(default_factory=dict)
    deltas: dict[str, Delta] = field(default_factory=dict)  # "gap", "vs_baseline"...: interval and verdict


def aggregate(rows: Sequence[dict]) -> Figures:
    """Combine the repeats of one group (:meth:`MeasurementKey.group`)."""
    iops = [r["iops"] for r in rows]
    bws = [r["bw_bytes"] for r in rows]
    hist = Histogram()
    for r in rows:
        hist = hist.merge(Histogram.from_json(r["clat_bins"]))
    cv = None
    if len(iops) > 1 and statistics.mean(iops) > 0:
        cv = statistics.stdev(iops) / statistics.mean(iops)
    hashes = {r["job_hash"] for r in rows}

    def ms(p: float) -> float | None:
        v = hist.percentile(p)
        return None if v is None else v / 1e6

    mb_s = statistics.median(bws) / 1e6
    pool_write = _tmean(rows, "pool_write_mb_s")
    return Figures(
        iops=statistics.median(iops),
        mb_s=mb_s,
        p50_ms=ms(50.0),
        p95_ms=ms(95.0),
        p99_ms=ms(99.0),
        p999_ms=ms(99.9),
        repeats=len(rows),
        cv=cv,
        job_hash=hashes.pop() if len(hashes) == 1 else "mixed",
        samples=tuple(iops),
        dev_read_mb_s=_tmean(rows, "read_mb_s"),
        dev_write_mb_s=_tmean(rows, "write_mb_s"),
        cpu_busy=_tmean(rows, "cpu_busy"),
        cpu_idle=_tmean(rows, "cpu_idle"),
        pool_read_mb_s=_tmean(rows, "pool_read_mb_s"),
        pool_write_mb_s=pool_write,
        arc_hit_ratio=_tmean(rows, "arc_hit_ratio"),
        arc_size_mb=_tmean(rows, "arc_size_mb"),
        scan=_tworst_scan(rows),
        txg_timeout_s=_tmax(rows, "txg_timeout_s"),
        write_ampl=pool_write / mb_s if pool_write is not None and mb_s > 0 and _rw(rows[0]) in WRITE_MODES else None,
        host_dev_read_mb_s=_tmean(rows, "host_dev_read_mb_s"),
        host_dev_write_mb_s=_tmean(rows, "host_dev_write_mb_s"),
        host_cpu_busy=_tmean(rows, "host_cpu_busy"),
        host_cpu_idle=_tmean(rows, "host_cpu_idle"),
    )


def _tvalues(rows: Sequence[dict], key: str) -> list:
    return [t[key] for r in rows if isinstance(t := r.get("telemetry"), dict) and t.get(key) is not None]


def _tmean(rows: Sequence[dict], key: str) -> float | None:
    values = _tvalues(rows, key)
    return statistics.mean(values) if values else None


def _tmax(rows: Sequence[dict], key: str) -> float | None:
    return max(_tvalues(rows, key), default=None)


def _tworst_scan(rows: Sequence[dict]) -> str | None:
    scans = [s for s in _tvalues(rows, "scan") if s in SCANS]
    return max(scans, key=SCANS.index) if scans else None


def _rw(row: dict) -> str | None:
    """A built-in job's rw (None for a job file's: it can do anything)."""
    params = row.get("job_params") or {}
    return params.get("rw") if params.get("jobfile") is None else None


READ_MODES = ("read", "randread")
WRITE_MODES = ("write", "randwrite")
SCANS = ("none", "scrub", "resilver")  # as vmbench.telemetry.zfs.SCANS, least to most disturbing
CACHE_SHARE = 0.10  # device (or pool) reads under this share of fio's MB/s: served from a cache
CPU_IDLE_MIN = 10.0  # % idle under this: the side's CPUs (or, for a guest run, the host's) were the limit
POOL_WRITE_SHARE = 0.50  # pool writes under this share of fio's MB/s: compressed, or still in RAM
STEADY_TXGS = 3  # a ZFS run shorter than this many zfs_txg_timeout is not steady state (METHOD rule 6)
DEFAULT_TXG_TIMEOUT_S = 5  # OpenZFS's default, for a pool whose zfs_txg_timeout was not read


def _mb(v: float) -> str:
    return f"{v:,.1f}" if v >= 10 else f"{v:.2f}"


def telemetry_notes(row: dict, fig: Figures) -> list[str]:
    """Flags from what the layers below did during the run (METHOD rules 3, 6, 8).  Reads
    judged by the pool's reads where it was sampled (a zvol's own /proc/diskstats counts ARC
    hits as reads), else by the device's.  The pool flags hold for guest rows too (the pool is
    the host's, sampled on the host while fio ran in the guest); "CPU-bound?" is the side fio
    ran on, "host CPU-bound?" the host under a guest run."""
    params = row.get("job_params") or {}
    rw = _rw(row)
    notes = []
    arc = f", ARC hit {fig.arc_hit_ratio * 100:.0f}%" if fig.arc_hit_ratio is not None else ""
    if rw in READ_MODES and fig.mb_s > 0:
        if fig.pool_read_mb_s is not None:
            if fig.pool_read_mb_s < CACHE_SHARE * fig.mb_s:
                notes.append(f"served from cache? (pool reads {_mb(fig.pool_read_mb_s)} MB/s of fio's {_mb(fig.mb_s)}{arc})")
        elif fig.dev_read_mb_s is not None and fig.dev_read_mb_s < CACHE_SHARE * fig.mb_s:
            notes.append(f"served from cache? (device reads {fig.dev_read_mb_s:.2f} MB/s{arc})")
    if rw in WRITE_MODES and fig.pool_write_mb_s is not None and fig.mb_s > 0 and fig.pool_write_mb_s < POOL_WRITE_SHARE * fig.mb_s:
        notes.append(f"pool wrote {_mb(fig.pool_write_mb_s)} MB/s of fio's {_mb(fig.mb_s)}: compressed or not yet flushed?")
    if fig.cpu_idle is not None and fig.cpu_idle < CPU_IDLE_MIN:
        notes.append(f"CPU-bound? ({fig.cpu_idle:.0f}% idle)")
    if fig.host_cpu_idle is not None and fig.host_cpu_idle < CPU_IDLE_MIN:
        notes.append(f"host CPU-bound? ({fig.host_cpu_idle:.0f}% idle)")
    zfs = fig.scan is not None or fig.txg_timeout_s is not None or fig.pool_read_mb_s is not None or fig.pool_write_mb_s is not None
    runtime = params.get("runtime") if rw is not None else None
    if zfs and isinstance(runtime, (int, float)):
        txg = fig.txg_timeout_s
        of = f"{txg:g} s" if txg is not None else f"{DEFAULT_TXG_TIMEOUT_S} s, OpenZFS's default"
        if runtime < STEADY_TXGS * (txg if txg is not None else DEFAULT_TXG_TIMEOUT_S):
            notes.append(f"shorter than steady state (runtime {runtime:g} s < {STEADY_TXGS} x zfs_txg_timeout of {of})")
    if fig.scan in ("scrub", "resilver"):
        notes.append(f"{fig.scan} running during the run")
    return notes


def group(measurements: Iterable[dict]) -> "OrderedDict[MeasurementKey, list[dict]]":
    """Measurements by their group's key (every repeat of one job on one target), in the
    order they ran."""
    out: OrderedDict[MeasurementKey, list[dict]] = OrderedDict()
    for m in measurements:
        out.setdefault(MeasurementKey.of(m, repeat=False), []).append(m)
    return out


def host_group(cell: str | None, job: str) -> MeasurementKey:
    """The key of the host's rows of ``job`` stored under ``cell`` (None: the one host reference)."""
    return MeasurementKey("host", cell, None, "host", job)


def raw_group(cell: str, job: str) -> MeasurementKey:
    """The key of a guest's raw-disk rows of ``job`` in ``cell``."""
    return MeasurementKey("guest", cell, None, "raw", job)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _change(a: float, b: float) -> float | None:
    return a / b - 1.0 if b else None


def judge_gap(host: Figures, guest: Figures) -> Delta:
    """The host/guest gap of two aggregated groups, with its interval and verdict."""
    return stats.ratio(host.samples, guest.samples)


def judge_change(this: Figures, reference: Figures) -> Delta:
    """``this`` against ``reference`` (IOPS), with its interval and verdict."""
    return stats.change(this.samples, reference.samples)


def _deltas(**judged: Delta | None) -> dict[str, Delta]:
    """The deltas that were compared (None: not compared)."""
    return {k: d for k, d in judged.items() if d is not None}


def cache_notes(row: dict, host_memory_bytes: int | None) -> list[str]:
    """Where a guest figure may come from a cache rather than the disk (METHOD rule 3)."""
    params = row.get("job_params") or {}
    settings = row.get("settings") or {}
    size = params.get("size") or 0
    reads = params.get("jobfile") is not None or params.get("rw") not in ("write", "randwrite")
    notes = []
    cache = settings.get("cache")
    if reads and host_page_cache(cache) and host_memory_bytes and size < host_memory_bytes:
        notes.append(f"reads may come from the host page cache (cache={cache})")
    memory = settings.get("memory_mib")
    if params.get("direct") is False and memory and size < memory << 20:
        notes.append("buffered I/O within the guest's RAM")
    return notes


def host_key(cell: dict | None) -> str | None:
    """The cell name the host rows for ``cell``'s storage are stored under (None: the one
    host reference of a run with one storage setting; see Plan.host_references)."""
    return (cell or {}).get("host_cell")


def gap_rows(measurements: Sequence[dict], cells: Sequence[dict], jobs: Sequence[str], host_memory_bytes: int | None = None) -> list[Row]:
    """Per job: the host, then every valid cell's raw-disk figures, with the gap to the host
    and the change from the first cell (the baseline).  With several storage settings (ZFS
    axes) each cell is compared with the host on its own storage, shown before its first cell."""
    groups = group(measurements)
    order = [c["name"] for c in cells]
    by_name = {c["name"]: c for c in cells}
    baseline = order[0] if order else None
    out = []
    for job in jobs:
        shown: set = set()
        base = None
        for cell in order:
            hkey = host_key(by_name[cell])
            host_rows = groups.get(host_group(hkey, job))
            host = aggregate(host_rows) if host_rows else None
            if host_rows and host is not None and hkey not in shown:
                shown.add(hkey)
                out.append(Row(job=job, sync=bool(host_rows[0].get("sync")), side="host", cell=hkey, stack=None, layer="host",
                               figures=host, gap=1.0, note="; ".join(telemetry_notes(host_rows[0], host)),
                               settings=host_rows[0].get("settings") or {}))
            rows = groups.get(raw_group(cell, job))
            if not rows:
                continue
            sync = bool(rows[0]["sync"])
            fig = aggregate(rows)
            if cell == baseline:
                base = fig
            notes = [f"raw disk shared with {rows[0]['shared_from']} (same VM)"] if rows[0].get("shared_from") else []
            gap = None
            deltas: dict[str, Delta] = {}
            if host is not None:
                if host.job_hash == fig.job_hash:
                    gap = _ratio(host.iops, fig.iops)
                    deltas["gap"] = judge_gap(host, fig)
                    if fig.iops > host.iops * 1.05:
                        notes.append("beats host: cached?")
                else:
                    notes.append("job differs from host's; not compared")
            notes += cache_notes(rows[0], host_memory_bytes)
            notes += telemetry_notes(rows[0], fig)
            note = "; ".join(notes)
            vs_base = None
            if base is not None and cell != baseline and base.job_hash == fig.job_hash:
                vs_base = _change(fig.iops, base.iops)
                deltas["vs_baseline"] = judge_change(fig, base)
            out.append(Row(job=job, sync=sync, side="guest", cell=cell, stack=None, layer="raw", figures=fig, gap=gap,
                           vs_baseline=vs_base, note=note, settings=rows[0].get("settings") or {}, deltas=deltas))
    return out


def layer_rows(measurements: Sequence[dict], cells: Sequence[dict], jobs: Sequence[str]) -> list[Row]:
    """Per cell, stack and job: host -> raw -> each layer, with each layer's cost relative to
    the one below and to the host."""
    groups = group(measurements)
    out = []
    for cell in cells:
        for stack in cell.get("stacks") or []:
            for job in jobs:
                host_rows = groups.get(host_group(host_key(cell), job))
                host = aggregate(host_rows) if host_rows else None
                chain: list[tuple[str, list[dict] | None]] = [("raw", groups.get(raw_group(cell["name"], job)))]
                for k, rows in groups.items():
                    if k.side == "guest" and k.cell == cell["name"] and k.stack == stack and k.job == job:
                        chain.append((k.layer, rows))
                if all(rows is None for _, rows in chain):
                    continue
                if host_rows and host is not None:
                    out.append(Row(job=job, sync=bool(host_rows[0]["sync"]), side="host", cell=cell["name"], stack=stack,
                                   layer="host", figures=host, gap=1.0, note="; ".join(telemetry_notes(host_rows[0], host))))
                below = host
                for layer, lrows in chain:
                    if not lrows:
                        continue
                    fig = aggregate(lrows)
                    same_as_host = host is not None and host.job_hash == fig.job_hash
                    out.append(Row(
                        job=job, sync=bool(lrows[0]["sync"]), side="guest", cell=cell["name"], stack=stack, layer=layer,
                        figures=fig,
                        gap=_ratio(host.iops, fig.iops) if host is not None and same_as_host else None,
                        vs_below=_change(fig.iops, below.iops) if below is not None else None,
                        deltas=_deltas(gap=judge_gap(host, fig) if host is not None and same_as_host else None,
                                       vs_below=judge_change(fig, below) if below is not None else None),
                        note="; ".join(telemetry_notes(lrows[0], fig)),
                    ))
                    below = fig
    return out


def journey_rows(measurements: Sequence[dict], cells: Sequence[dict], jobs: Sequence[str]) -> list[Row]:
    """Per job, each step's headline: the top measured layer of its first stack (the raw disk
    when it has none), with the gap to the host and the change from the step before."""
    groups = group(measurements)
    out = []
    for job in jobs:
        prev: Figures | None = None
        for cell in cells:
            host_rows = groups.get(host_group(host_key(cell), job))
            host = aggregate(host_rows) if host_rows else None
            stacks = cell.get("stacks") or []
            first = stacks[0] if stacks else None
            candidates = [(k, rows) for k, rows in groups.items()
                          if k.side == "guest" and k.cell == cell["name"] and k.job == job and k.stack == first]
            if not candidates:
                prev = None
                continue
            key, rows = max(candidates, key=lambda kv: kv[1][0]["depth"])
            fig = aggregate(rows)
            gap = judge_gap(host, fig) if host is not None and host.job_hash == fig.job_hash else None
            change = judge_change(fig, prev) if prev is not None and prev.job_hash == fig.job_hash else None
            out.append(Row(
                job=job, sync=bool(rows[0]["sync"]), side="guest", cell=cell["name"], stack=key.stack, layer=key.layer, figures=fig,
                gap=_ratio(host.iops, fig.iops) if host is not None and gap is not None else None,
                vs_previous=_change(fig.iops, prev.iops) if prev is not None and change is not None else None,
                deltas=_deltas(gap=gap, vs_previous=change),
            ))
            prev = fig
    return out


@dataclass(frozen=True)
class TargetResult:
    target: dict
    cell: str | None
    stack: str | None
    layer: str
    job: str
    figures: Figures
    passed: bool
    failures: tuple[str, ...]


def target_results(measurements: Sequence[dict], targets: Sequence[dict]) -> list[TargetResult]:
    groups = group(measurements)
    out = []
    for t in targets:
        for k, rows in groups.items():
            if k.side != "guest" or k.job != t["job"]:
                continue
            if t.get("cell") and k.cell != t["cell"]:
                continue
            if t.get("stack") and k.stack != t["stack"]:
                continue
            if t.get("layer"):
                if k.layer != t["layer"]:
                    continue
            elif k.stack is None and any(o.stack is not None for o in groups if o.cell == k.cell and o.job == k.job):
                continue  # without a layer, targets judge the stacks' layers, not the raw disk
            fig = aggregate(rows)
            failures = []
            if t.get("min_mb_s") is not None and fig.mb_s < t["min_mb_s"]:
                failures.append(f"{fig.mb_s:.1f} MB/s < {t['min_mb_s']:g}")
            if t.get("min_iops") is not None and fig.iops < t["min_iops"]:
                failures.append(f"{fig.iops:.0f} IOPS < {t['min_iops']:g}")
            if t.get("max_p99_ms") is not None:
                if fig.p99_ms is None:
                    failures.append("no latency histogram to judge p99")
                elif fig.p99_ms > t["max_p99_ms"]:
                    failures.append(f"p99 {fig.p99_ms:.2f} ms > {t['max_p99_ms']:g}")
            out.append(TargetResult(t, k.cell, k.stack, k.layer, k.job, fig, not failures, tuple(failures)))
    return out
