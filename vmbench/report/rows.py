"""From a run's loaded measurements to comparisons: gaps to the host, to the baseline,
between layers; journey steps (the targets judged by :mod:`.targets`).  Pure: measurements (grouped by their
:class:`~vmbench.results.key.MeasurementKey`) in, :class:`Row` out (:mod:`.runrows` makes a run's once);
:mod:`vmbench.report.tables` lays them out as tables (it imports this module, never the reverse).

Repeats are combined the honest way: the median of IOPS and bandwidth, with their spread
(coefficient of variation), and percentiles from the merged latency histograms.  Every delta
(gap, vs baseline, vs the layer below, vs the previous step) also carries a bootstrap
interval and a verdict from :mod:`vmbench.report.stats`, in ``Row.deltas``.

Each delta is about the job's :class:`~vmbench.fio.job.Metric` (``metrics``: the plan's, by
job name, :attr:`~vmbench.results.plan.StoredPlan.job_metrics`; a job it does not name is judged by p99 when its stored fio
parameters set a fixed rate, else by IOPS): IOPS and MB/s from each repeat's figure, a
latency percentile from each repeat's own histogram (the stored p50_ns ... p999_ns).  A
fixed-rate group that fell short of its rate (:func:`saturation`) is flagged and compared
with nothing.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Mapping, Sequence

from ..fio.engines import FILE_ENGINES
from ..fio.histogram import P50, P95, P99, P999, PERCENTILES, Histogram
from ..fio.job import Metric
from ..results.key import MeasurementKey
from ..results.records import CellRecord, Measurement, Settings
from ..storage.radosbench import RADOS_LAYER
from .cephnotes import ceph_pool_notes
from . import stats
from .facts import saturation
from .filejobs import NO_HOST_ROW, first_layer, first_rows, host_fs_group, is_file_rows, unit_of
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
    # each repeat's MB/s and latency percentiles (ms, from the repeat's own histogram), in the same order
    mb_s_samples: tuple[float, ...] = ()
    p50_samples: tuple[float, ...] = ()
    p95_samples: tuple[float, ...] = ()
    p99_samples: tuple[float, ...] = ()
    p999_samples: tuple[float, ...] = ()
    saturated: str | None = None  # "saturated (achieved X of Y)": a fixed-rate job short of its rate (see saturation())
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
    # a Ceph pool under an RBD disk (vmbench.telemetry.ceph): its pool MB/s are pool_read/write_mb_s above
    osd_commit_ms: float | None = None  # the OSDs' mean commit latency while fio ran (ceph osd perf)

    def samples_of(self, metric: Metric) -> tuple[float, ...]:
        """Each repeat's figure of ``metric`` (the bootstrap's samples)."""
        return getattr(self, _SAMPLES[metric])

    def value_of(self, metric: Metric) -> float | None:
        """The figure of ``metric`` a table shows: median IOPS or MB/s, merged-histogram percentile (ms)."""
        return getattr(self, _VALUES[metric])


#: the fields of :class:`Figures` holding each metric's samples and figure (a table, not a dict made per call)
_SAMPLES = {Metric.IOPS: "samples", Metric.MBPS: "mb_s_samples", Metric.P50: "p50_samples", Metric.P95: "p95_samples",
            Metric.P99: "p99_samples", Metric.P999: "p999_samples"}
_VALUES = {Metric.IOPS: "iops", Metric.MBPS: "mb_s", Metric.P50: "p50_ms", Metric.P95: "p95_ms", Metric.P99: "p99_ms",
           Metric.P999: "p999_ms"}


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
    settings: Settings = field(default_factory=Settings)
    deltas: dict[str, Delta] = field(default_factory=dict)  # "gap", "vs_baseline"...: interval and verdict
    metric: Metric = Metric.IOPS  # what every delta of the row is about
    unit: str = "IOPS"  # what its IOPS count: a file engine's operations ("files/s")


def aggregate(rows: Sequence[Measurement]) -> Figures:
    """Combine the repeats of one group (:meth:`MeasurementKey.group`): the median IOPS and
    MB/s, the percentiles of their histograms merged."""
    iops = [r.iops for r in rows]
    bws = [r.bw_bytes for r in rows]
    if len(rows) == 1:
        p50, p95, p99, p999 = (rows[0].percentile_ms(p) for p in PERCENTILES)
    else:
        p50, p95, p99, p999 = Histogram.merged(r.clat for r in rows).percentiles_ms(PERCENTILES)
    cv = None
    if len(iops) > 1 and statistics.mean(iops) > 0:
        cv = statistics.stdev(iops) / statistics.mean(iops)
    hashes = {r.job_hash for r in rows}
    mb_s = statistics.median(bws) / 1e6
    return Figures(
        iops=statistics.median(iops),
        mb_s=mb_s,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        p999_ms=p999,
        repeats=len(rows),
        cv=cv,
        job_hash=hashes.pop() if len(hashes) == 1 else "mixed",
        samples=tuple(iops),
        mb_s_samples=tuple(b / 1e6 for b in bws),
        p50_samples=_repeat_ms(rows, P50),
        p95_samples=_repeat_ms(rows, P95),
        p99_samples=_repeat_ms(rows, P99),
        p999_samples=_repeat_ms(rows, P999),
        saturated=saturation(rows),
        **_telemetry_figures(rows, mb_s),
    )


def _telemetry_figures(rows: Sequence[Measurement], mb_s: float) -> dict:
    """The samplers' figures of a group (the telemetry fields of :class:`Figures`); none
    (all None) when no repeat has telemetry."""
    if not any(r.telemetry is not None for r in rows):
        return {}
    pool_write = _tmean(rows, "pool_write_mb_s")
    return dict(
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
        write_ampl=pool_write / mb_s if pool_write is not None and mb_s > 0 and rows[0].job_params.builtin_rw in WRITE_MODES else None,
        host_dev_read_mb_s=_tmean(rows, "host_dev_read_mb_s"),
        host_dev_write_mb_s=_tmean(rows, "host_dev_write_mb_s"),
        host_cpu_busy=_tmean(rows, "host_cpu_busy"),
        host_cpu_idle=_tmean(rows, "host_cpu_idle"),
        osd_commit_ms=_tmean(rows, "osd_commit_ms"),
    )


def _repeat_ms(rows: Sequence[Measurement], p: float) -> tuple[float, ...]:
    """Each repeat's percentile ``p`` in ms, from its own histogram; a repeat without one is
    left out."""
    return tuple(ms for r in rows if (ms := r.percentile_ms(p)) is not None)


def metric_of(job: str, rows: Sequence[Measurement] | None, metrics: Mapping[str, Metric] | None) -> Metric:
    """The metric ``job`` is judged by: ``metrics``' when it names the job; else p99 when its
    stored fio parameters set a fixed rate (as :attr:`FioJob.judged_by`), else IOPS."""
    if metrics and job in metrics:
        return metrics[job]
    params = rows[0].job_params if rows else None
    return Metric.P99 if params is not None and (params.rate_iops is not None or params.rate is not None) else Metric.IOPS


def _tvalues(rows: Sequence[Measurement], key: str) -> list:
    return [v for r in rows if r.telemetry is not None and (v := getattr(r.telemetry, key)) is not None]


def _tmean(rows: Sequence[Measurement], key: str) -> float | None:
    values = _tvalues(rows, key)
    return statistics.mean(values) if values else None


def _tmax(rows: Sequence[Measurement], key: str) -> float | None:
    return max(_tvalues(rows, key), default=None)


def _tworst_scan(rows: Sequence[Measurement]) -> str | None:
    scans = [s for s in _tvalues(rows, "scan") if s in SCANS]
    return max(scans, key=SCANS.index) if scans else None


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


def telemetry_notes(row: Measurement, fig: Figures) -> list[str]:
    """Flags from what the layers below did during the run (METHOD rules 3, 6, 8).  Reads
    judged by the pool's reads where it was sampled (a zvol's own /proc/diskstats counts ARC
    hits as reads), else by the device's.  The pool flags hold for guest rows too (the pool is
    the host's, sampled on the host while fio ran in the guest); "CPU-bound?" is the side fio
    ran on, "host CPU-bound?" the host under a guest run."""
    params = row.job_params
    rw = params.builtin_rw
    notes = []
    arc = f", ARC hit {fig.arc_hit_ratio * 100:.0f}%" if fig.arc_hit_ratio is not None else ""
    if rw in READ_MODES and fig.mb_s > 0 and params.ioengine not in FILE_ENGINES:  # a file engine reads no data
        if fig.pool_read_mb_s is not None:
            if fig.pool_read_mb_s < CACHE_SHARE * fig.mb_s:
                notes.append(f"served from cache? (pool reads {_mb(fig.pool_read_mb_s)} MB/s of fio's {_mb(fig.mb_s)}{arc})")
        elif fig.dev_read_mb_s is not None and fig.dev_read_mb_s < CACHE_SHARE * fig.mb_s:
            notes.append(f"served from cache? (device reads {fig.dev_read_mb_s:.2f} MB/s{arc})")
    if rw in WRITE_MODES and fig.pool_write_mb_s is not None and fig.mb_s > 0 and fig.pool_write_mb_s < POOL_WRITE_SHARE * fig.mb_s:
        notes.append(f"pool wrote {_mb(fig.pool_write_mb_s)} MB/s of fio's {_mb(fig.mb_s)}: compressed or not yet flushed?")
    notes += ceph_pool_notes(fig.mb_s, fig.pool_read_mb_s, fig.write_ampl) if fig.osd_commit_ms is not None and rw in WRITE_MODES else []
    if fig.cpu_idle is not None and fig.cpu_idle < CPU_IDLE_MIN:
        notes.append(f"CPU-bound? ({fig.cpu_idle:.0f}% idle)")
    if fig.host_cpu_idle is not None and fig.host_cpu_idle < CPU_IDLE_MIN:
        notes.append(f"host CPU-bound? ({fig.host_cpu_idle:.0f}% idle)")
    zfs = fig.scan is not None or fig.txg_timeout_s is not None or (
        fig.osd_commit_ms is None and (fig.pool_read_mb_s is not None or fig.pool_write_mb_s is not None))  # not Ceph's pool
    runtime = params.runtime if rw is not None else None
    if zfs and isinstance(runtime, (int, float)):
        txg = fig.txg_timeout_s
        of = f"{txg:g} s" if txg is not None else f"{DEFAULT_TXG_TIMEOUT_S} s, OpenZFS's default"
        if runtime < STEADY_TXGS * (txg if txg is not None else DEFAULT_TXG_TIMEOUT_S):
            notes.append(f"shorter than steady state (runtime {runtime:g} s < {STEADY_TXGS} x zfs_txg_timeout of {of})")
    if fig.scan in ("scrub", "resilver"):
        notes.append(f"{fig.scan} running during the run")
    return notes


def group(measurements: Iterable[Measurement]) -> dict[MeasurementKey, list[Measurement]]:
    """Measurements by their group's key (every repeat of one job on one target), in the
    order they ran (a plain dict: iterating it never hashes a key again, as an OrderedDict's does)."""
    out: dict[MeasurementKey, list[Measurement]] = {}
    for m in measurements:
        out.setdefault(m.group, []).append(m)
    return out


def _once(made: dict[tuple, "Figures"], key: tuple, rows: Sequence[Measurement] | None) -> "Figures | None":
    """``rows`` aggregated, once per ``key`` in ``made`` (None without rows)."""
    if not rows:
        return None
    if key not in made:
        made[key] = aggregate(rows)
    return made[key]


def host_group(cell: str | None, job: str) -> MeasurementKey:
    """The key of the host's rows of ``job`` stored under ``cell`` (None: the one host reference)."""
    return MeasurementKey("host", cell, None, "host", job)


def rados_row(groups: Mapping[MeasurementKey, list[Measurement]], job: str, metric: Metric) -> Row | None:
    """The pool's RADOS ceiling under ``job`` (``rados bench``, on RBD storage), whichever cell
    stores it; None when the run measured none."""
    rows = next((g for k, g in groups.items() if k.side == "host" and k.layer == RADOS_LAYER and k.job == job), None)
    if not rows:
        return None
    return Row(job=job, sync=rows[0].sync, side="RADOS", cell=rows[0].cell, stack=None, layer=RADOS_LAYER,
               figures=aggregate(rows), metric=metric, note="rados bench: the pool's ceiling, not fio's I/O")


def raw_group(cell: str, job: str) -> MeasurementKey:
    """The key of a guest's raw-disk rows of ``job`` in ``cell``."""
    return MeasurementKey("guest", cell, None, "raw", job)


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def _change(a: float, b: float) -> float | None:
    return a / b - 1.0 if b else None


SATURATED = "saturated: short of its fixed rate"  # why a delta was not computed


def judge_gap(host: Figures, guest: Figures, metric: Metric = Metric.IOPS) -> Delta:
    """The host/guest gap of two aggregated groups on ``metric``, with its interval and
    verdict: host over guest for IOPS and MB/s, guest over host for a latency (above 1.00x
    the guest is behind either way).  No delta when a side is saturated."""
    if host.saturated or guest.saturated:
        return Delta(None, None, None, None, SATURATED)
    unit = stats.label(metric) if metric.higher_is_better else f"ms ({stats.label(metric)})"
    if metric.higher_is_better:
        return stats.ratio(host.samples_of(metric), guest.samples_of(metric), unit=unit)
    return stats.ratio(guest.samples_of(metric), host.samples_of(metric), unit=unit)


def judge_change(this: Figures, reference: Figures, metric: Metric = Metric.IOPS) -> Delta:
    """``this`` against ``reference`` on ``metric``, with its interval and verdict; no delta
    when a side is saturated."""
    if this.saturated or reference.saturated:
        return Delta(None, None, None, None, SATURATED)
    return stats.change(this.samples_of(metric), reference.samples_of(metric), metric=metric)


def gap_point(host: Figures, guest: Figures, metric: Metric, delta: Delta) -> float | None:
    """The gap's point figure: host/guest median IOPS as always; for another metric the
    ratio of medians the interval is about."""
    if metric is Metric.IOPS and delta.why != SATURATED:
        return _ratio(host.iops, guest.iops)
    return delta.value


def change_point(this: Figures, reference: Figures, metric: Metric, delta: Delta) -> float | None:
    """A change's point figure: the change of median IOPS as always; for another metric the
    change of medians the interval is about."""
    if metric is Metric.IOPS and delta.why != SATURATED:
        return _change(this.iops, reference.iops)
    return delta.value


def better_than_host(guest: Figures, host: Figures, metric: Metric) -> bool:
    """The guest beats the host by more than 5% on ``metric`` (IOPS: as before)."""
    g, h = guest.value_of(metric), host.value_of(metric)
    if g is None or h is None:
        return False
    return g > h * 1.05 if metric.higher_is_better else g * 1.05 < h


def _deltas(**judged: Delta | None) -> dict[str, Delta]:
    """The deltas that were compared (None: not compared)."""
    return {k: d for k, d in judged.items() if d is not None}


def cache_notes(row: Measurement, host_memory_bytes: int | None) -> list[str]:
    """Where a guest figure may come from a cache rather than the disk (METHOD rule 3)."""
    params, settings = row.job_params, row.settings
    size = params.size or 0
    reads = params.file_job or params.rw not in ("write", "randwrite")
    notes = []
    cache = settings.cache if reads and host_memory_bytes and size < host_memory_bytes else None  # read back only where it counts
    if cache is not None and cache.host_page_cache:
        notes.append(f"reads may come from the host page cache (cache={cache})")
    memory = settings.memory_mib
    if params.direct is False and memory and size < memory << 20:
        notes.append("buffered I/O within the guest's RAM")
    return notes


def host_key(cell: CellRecord | None) -> str | None:
    """The cell name the host rows for ``cell``'s storage are stored under (None: the one
    host reference of a run with one storage setting; see Plan.host_references)."""
    return cell.host_cell if cell is not None else None


def _saturated_notes(fig: Figures, **references: Figures | None) -> list[str]:
    """The saturation flag of a row, and which of its references ("host", "baseline"...) is
    saturated so that the row is not compared with it."""
    notes = [f"{fig.saturated}: not compared"] if fig.saturated else []
    shorts = [name for name, ref in references.items() if ref is not None and ref.saturated]
    if shorts and not fig.saturated:
        notes.append(f"{' and '.join(n.replace('_', ' ') for n in shorts)} saturated: not compared")
    return notes


def gap_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str], host_memory_bytes: int | None = None,
             metrics: Mapping[str, Metric] | None = None) -> list[Row]:
    """Per job: the host, then every valid cell's raw-disk figures, with the gap to the host
    and the change from the first cell (the baseline), on the job's metric (:func:`metric_of`).
    With several storage settings (ZFS axes) each cell is compared with the host on its own
    storage, shown before its first cell."""
    groups = group(measurements)
    hosts: dict[tuple, Figures] = {}  # each host reference aggregated once, not once per cell
    out = []
    firsts = first_groups(groups)
    for job in jobs:
        out += job_gap_rows(groups, cells, job, metric_of(job, firsts.get(job), metrics), host_memory_bytes, hosts)
    return out


def job_gap_rows(groups: Mapping[MeasurementKey, list[Measurement]], cells: Sequence[CellRecord], job: str, metric: Metric,
                 host_memory_bytes: int | None, hosts: dict[tuple, Figures]) -> list[Row]:
    """:func:`gap_rows` of one job judged by ``metric`` (``hosts``: the host references
    aggregated so far, by (cell, job))."""
    order = [c.name for c in cells]
    by_name = {c.name: c for c in cells}
    baseline = order[0] if order else None
    out = []
    shown: set = set()
    base = None
    rados = rados_row(groups, job, metric)
    out += [rados] if rados is not None else []
    for cell in order:
        hkey = host_key(by_name[cell])
        host_rows = groups.get(host_group(hkey, job))
        host = _once(hosts, (hkey, job), host_rows)
        if host_rows and host is not None and hkey not in shown:
            shown.add(hkey)
            of_rados = [f"librbd {host.iops / rados.figures.iops:.2f}x of RADOS"] if rados and rados.figures.iops else []
            out.append(Row(job=job, sync=host_rows[0].sync, side="host", cell=hkey, stack=None, layer="host",
                           figures=host, gap=1.0, note="; ".join(of_rados + _saturated_notes(host) + telemetry_notes(host_rows[0], host)),
                           settings=host_rows[0].settings, metric=metric))
        rows = groups.get(raw_group(cell, job))
        if not rows:
            continue
        sync = rows[0].sync
        fig = aggregate(rows)
        if cell == baseline:
            base = fig
        notes = [f"raw disk shared with {rows[0].shared_from} (same VM)"] if rows[0].shared_from else []
        compared_base = base if base is not None and cell != baseline and base.job_hash == fig.job_hash else None
        compared_host = host if host is not None and host.job_hash == fig.job_hash else None
        notes += _saturated_notes(fig, host=compared_host, baseline=compared_base)
        gap = None
        deltas: dict[str, Delta] = {}
        if host is not None:
            if compared_host is not None:
                deltas["gap"] = judge_gap(host, fig, metric)
                gap = gap_point(host, fig, metric, deltas["gap"])
                if better_than_host(fig, host, metric):
                    notes.append("beats host: cached?")
            else:
                notes.append("job differs from host's; not compared")
        notes += cache_notes(rows[0], host_memory_bytes)
        notes += telemetry_notes(rows[0], fig)
        note = "; ".join(notes)
        vs_base = None
        if compared_base is not None:
            deltas["vs_baseline"] = judge_change(fig, compared_base, metric)
            vs_base = change_point(fig, compared_base, metric, deltas["vs_baseline"])
        out.append(Row(job=job, sync=sync, side="guest", cell=cell, stack=None, layer="raw", figures=fig, gap=gap,
                       vs_baseline=vs_base, note=note, settings=rows[0].settings, deltas=deltas, metric=metric))
    return out


def layer_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str],
               metrics: Mapping[str, Metric] | None = None) -> list[Row]:
    """Per cell, stack and job: host -> raw -> each layer, with each layer's cost relative to
    the one below and to the host, on the job's metric."""
    groups = group(measurements)
    firsts = first_groups(groups)
    out = []
    hosts: dict[tuple, Figures] = {}
    for cell, stack, job, chain in layer_chains(groups, cells, jobs):
        out += chain_rows(groups, hosts, cell, stack, job, metric_of(job, firsts.get(job), metrics), chain)
    return out


Chain = list[tuple[str, list[Measurement] | None]]  # a stack's layers, each with its rows (None: not measured)


def layer_chains(groups: Mapping[MeasurementKey, list[Measurement]], cells: Sequence[CellRecord],
                 jobs: Sequence[str]) -> Iterator[tuple[CellRecord, str, str, Chain]]:
    """Per cell, stack and job, in that order: its raw disk's rows, then each of the stack's
    layers' as stored; a stack of a job with nothing measured left out."""
    layers: dict[tuple, Chain] = {}  # (cell, stack, job) -> its layers' rows, in order
    for k, rows in groups.items():
        if k.side == "guest":
            layers.setdefault((k.cell, k.stack, k.job), []).append((k.layer, rows))
    for cell in cells:
        for stack in cell.stacks:
            for job in jobs:
                chain: Chain = [("raw", groups.get(raw_group(cell.name, job)))]
                chain += layers.get((cell.name, stack, job), [])
                if any(rows is not None for _, rows in chain):
                    yield cell, stack, job, chain


def first_groups(groups: Mapping[MeasurementKey, list[Measurement]]) -> dict[str, list[Measurement]]:
    """Each job's first group of rows (its stored fio parameters say what it is judged by)."""
    out: dict[str, list[Measurement]] = {}
    for k, rows in groups.items():
        out.setdefault(k.job, rows)
    return out


def chain_rows(groups: Mapping[MeasurementKey, list[Measurement]], hosts: dict[tuple, Figures], cell: CellRecord, stack: str,
               job: str, metric: Metric, chain: Chain) -> list[Row]:
    """One stack's rows of one job: its host row, then each measured layer.  A file job's
    (:func:`~vmbench.report.filejobs.is_file_rows`) host row is the host's filesystem of the
    type of its layer; without one its rows say the host has no like-for-like row."""
    files = is_file_rows(first_rows(chain))
    hkey = host_group(host_key(cell), job) if not files else host_fs_group(host_key(cell), first_layer(chain), job)
    host_rows = groups.get(hkey)
    host = _once(hosts, (hkey,), host_rows)
    unit = unit_of(first_rows(chain))
    out = []
    if host_rows and host is not None:
        out.append(Row(job=job, sync=host_rows[0].sync, side="host", cell=cell.name, stack=stack,
                       layer=hkey.layer, figures=host, gap=1.0, metric=metric, unit=unit,
                       note="; ".join(_saturated_notes(host) + telemetry_notes(host_rows[0], host))))
    below = host if not files else None  # a file job's first layer has no layer below it measured
    for layer, lrows in chain:
        if not lrows:
            continue
        fig = aggregate(lrows)
        same_as_host = host is not None and host.job_hash == fig.job_hash
        gap = judge_gap(host, fig, metric) if host is not None and same_as_host else None
        vs_below = judge_change(fig, below, metric) if below is not None else None
        out.append(Row(
            job=job, sync=lrows[0].sync, side="guest", cell=cell.name, stack=stack, layer=layer,
            figures=fig, unit=unit,
            gap=gap_point(host, fig, metric, gap) if host is not None and gap is not None else None,
            vs_below=change_point(fig, below, metric, vs_below) if below is not None and vs_below is not None else None,
            deltas=_deltas(gap=gap, vs_below=vs_below), metric=metric,
            note="; ".join(([NO_HOST_ROW] if files and host is None else [])
                           + _saturated_notes(fig, host=host if same_as_host else None, layer_below=below)
                           + telemetry_notes(lrows[0], fig)),
        ))
        below = fig
    return out


def journey_rows(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str],
                 metrics: Mapping[str, Metric] | None = None) -> list[Row]:
    """Per job, each step's headline: the top measured layer of its first stack (the raw disk
    when it has none), with the gap to the host and the change from the step before, on the
    job's metric."""
    groups = group(measurements)
    out = []
    for job in jobs:
        metric = metric_of(job, next((g for k, g in groups.items() if k.job == job), None), metrics)
        prev: Figures | None = None
        for cell in cells:
            host_rows = groups.get(host_group(host_key(cell), job))
            host = aggregate(host_rows) if host_rows else None
            first = cell.stacks[0] if cell.stacks else None
            candidates = [(k, rows) for k, rows in groups.items()
                          if k.side == "guest" and k.cell == cell.name and k.job == job and k.stack == first]
            if not candidates:
                prev = None
                continue
            key, rows = max(candidates, key=lambda kv: kv[1][0].depth)
            fig = aggregate(rows)
            same_host = host if host is not None and host.job_hash == fig.job_hash else None
            same_prev = prev if prev is not None and prev.job_hash == fig.job_hash else None
            gap = judge_gap(same_host, fig, metric) if same_host is not None else None
            change = judge_change(fig, same_prev, metric) if same_prev is not None else None
            out.append(Row(
                job=job, sync=rows[0].sync, side="guest", cell=cell.name, stack=key.stack, layer=key.layer, figures=fig,
                gap=gap_point(same_host, fig, metric, gap) if same_host is not None and gap is not None else None,
                vs_previous=change_point(fig, same_prev, metric, change) if same_prev is not None and change is not None else None,
                deltas=_deltas(gap=gap, vs_previous=change), metric=metric,
                note="; ".join(_saturated_notes(fig, host=same_host, previous_step=same_prev)),
            ))
            prev = fig
    return out
