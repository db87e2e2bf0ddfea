"""Table models for a run's report (pure): the rows of :mod:`vmbench.report.rows` laid out
as columns, records, notes and facts, rendered by :mod:`vmbench.report.render` (text, JSON)
and :mod:`vmbench.report.html`.  This module calls into rows, never the reverse.

Each delta column X (gap, vs_baseline, vs_below, vs_previous) keeps its point figure under X
and adds X_low, X_high, X_verdict and X_why (the bootstrap interval, the verdict and, when
there is none, why); its text reads "+12.3% [+4.1, +20.2] faster".  The measurement tables
state their admissibility facts (``Table.facts``) and what the stored run does not tell
(``Table.missing``).

Deltas are about each job's metric (``metrics``: the plan's, :attr:`~vmbench.results.plan.StoredPlan.job_metrics`).
A table whose jobs are all judged by IOPS reads as it always did; otherwise its delta
headers name the metric ("vs baseline (p99)"), or, when its jobs differ, each record names
its own (``metric``, the "judged by" column); a latency change reads "+20.0% [+8.1, +33.0]
higher p99, worse".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ..fio.job import Metric
from ..results.environment import Environment
from ..results.plan import PlannedLuks, PlannedStack
from ..results.records import CellRecord, CryptoRecord, Measurement
from ..scenario.axes import setting_columns, setting_text, stored_setting
from ..scenario.model import Target
from . import stats
from .facts import SATURATION_SHARE, RepeatPolicy, admissibility
from .filejobs import FILE_JOBS_NOTE, NO_HOST_ROW, UNITS_NOTE
from .rows import Row, gap_rows, journey_rows, layer_rows
from .targets import TargetResult, target_results

DELTA_SUFFIXES = ("_low", "_high", "_verdict", "_why")


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    fmt: Callable[[Any], str] = str
    row_fmt: Callable[[dict], str] | None = None  # formats from the whole record (a delta with its interval)
    detail: bool = False  # the text report leaves it out first to fit the terminal (``--wide`` shows it)
    keep: bool = False  # the text report keeps it always (the row's answer: a gap, a change, a result)

    def text(self, record: dict) -> str:
        return self.row_fmt(record) if self.row_fmt is not None else self.fmt(record.get(self.key))


@dataclass
class Table:
    name: str
    title: str
    columns: list[Column]
    records: list[dict]
    notes: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)  # admissibility (METHOD rules 3, 4, 6, 7), shown under the table
    missing: list[str] = field(default_factory=list)  # facts the stored run does not tell


# ---- number formats -------------------------------------------------------------------------


def f_int(v: Any) -> str:
    return "-" if v is None else f"{v:,.0f}"


def f_mb(v: Any) -> str:
    return "-" if v is None else (f"{v:,.1f}" if v >= 10 else f"{v:.2f}")


def f_ms(v: Any) -> str:
    if v is None:
        return "-"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    if v >= 1:
        return f"{v:.2f}"
    return f"{v:.3f}"


def f_whole(v: Any) -> str:
    return "-" if v is None else f"{v:.0f}"


def f_ratio(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}x"


def f_pct(v: Any) -> str:
    return "-" if v is None else f"{v * 100:+.1f}%"


def f_cv(v: Any) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def f_text(v: Any) -> str:
    return "" if v is None else str(v)


def f_bool(v: Any) -> str:
    return "yes" if v else "no"


#: what a delta without a verdict for want of repeats says in its cell (its table's note says why)
NO_VERDICT = " (no verdict)"


def _judged(record: dict, key: str, point: Callable[[float], str], bound: Callable[[float], str]) -> str:
    v = record.get(key)
    if v is None:
        return "-"
    verdict = record.get(key + "_verdict")
    if verdict is not None and record.get(key + "_low") is not None:
        return f"{point(v)} [{bound(record[key + '_low'])}, {bound(record[key + '_high'])}] {verdict}"
    why = record.get(key + "_why")
    if why == stats.FEWER:  # the table's note says why, once
        return point(v) + NO_VERDICT
    return f"{point(v)} (no verdict: {why})" if why else point(v)


def delta_pct(key: str) -> Callable[[dict], str]:
    """A change column: "+12.3% [+4.1, +20.2] faster"."""
    return lambda rec: _judged(rec, key, f_pct, lambda b: f"{b * 100:+.1f}")


def delta_ratio(key: str) -> Callable[[dict], str]:
    """A gap column: "5.00x [4.71, 5.32] gap"."""
    return lambda rec: _judged(rec, key, f_ratio, lambda b: f"{b:.2f}")


def delta_fields(row: Row, keys: Sequence[str]) -> dict:
    """X_low, X_high, X_verdict, X_why for each delta key X (None when not judged)."""
    out: dict = {}
    for k in keys:
        d = row.deltas.get(k)
        out.update({k + "_low": d.low if d else None, k + "_high": d.high if d else None,
                    k + "_verdict": d.verdict if d else None, k + "_why": d.why if d else None})
    return out


def verdict_notes(records: Sequence[dict], keys: Sequence[str], metrics: Sequence[Metric] = ()) -> list[str]:
    """How intervals were made (on ``metrics``, the table's), when a table has one; why there
    is no verdict, when so."""
    notes = []
    if any(r.get(k + "_low") is not None for r in records for k in keys):
        notes.append(stats.describe_method(metrics=metrics))
    few = [r.get("repeats") for r in records if any(r.get(k + "_why") == stats.FEWER for k in keys)]
    if few:
        notes.append(f"Deltas carry no verdict where a side has {stats.FEWER} (here as few as {min((n for n in few if n), default=1)}): "
                     "a bootstrap interval cannot tell a change from noise with so few; run with repeats: 3 or more.")
    return notes


# ---- the metric a table's deltas are about ----------------------------------------------------


def table_metrics(rows: Sequence[Row | TargetResult]) -> list[Metric]:
    """The metrics a table's rows are judged by, in order of first use."""
    return list(dict.fromkeys(r.metric for r in rows))


def by_iops(metrics: Sequence[Metric]) -> bool:
    """Every job judged by IOPS: the table reads as before metrics existed."""
    return all(m is Metric.IOPS for m in metrics)


def metric_fields(row: Row, metrics: Sequence[Metric]) -> dict:
    """``metric`` (its label) in a record of a table not judged by IOPS alone."""
    return {} if by_iops(metrics) else {"metric": stats.label(row.metric)}


def metric_header(header: str, metrics: Sequence[Metric]) -> str:
    """A delta column's header naming the metric: "vs baseline (p99)"; "(judged by)" when the
    rows differ (each names its own in the "judged by" column)."""
    if by_iops(metrics):
        return header
    return f"{header} ({stats.label(metrics[0])})" if len(metrics) == 1 else f"{header} (judged by)"


def gap_header(against: str, metrics: Sequence[Metric]) -> str:
    """"gap (host/guest)" for IOPS; "gap (host/guest MB/s)", "gap (guest/host p99)": the
    ratio is always the one that is above 1.00x when the guest is behind."""
    if by_iops(metrics):
        return f"gap (host/{against})"
    if len(metrics) > 1:
        return "gap (judged by)"
    m = metrics[0]
    return f"gap (host/{against} {stats.label(m)})" if m.higher_is_better else f"gap ({against}/host {stats.label(m)})"


def metric_notes(metrics: Sequence[Metric], what: str, gap: bool = True) -> list[str]:
    """What a table's deltas are about when not IOPS alone (``what``: the deltas' names;
    ``gap``: the table has a host/guest gap)."""
    if by_iops(metrics):
        return []
    lat = [stats.label(m) for m in metrics if not m.higher_is_better]
    notes = [f"{what} are about each job's metric ({', '.join(stats.label(m) for m in metrics)}"
             + ("; the judged by column names each row's" if len(metrics) > 1 else "") + "): "
             "a fixed-rate job is judged by p99 unless its metric: says otherwise, its IOPS being the rate it was given."]
    if lat:
        up, down = stats.change_words(next(m for m in metrics if not m.higher_is_better))
        gap_words = ", a gap is the guest's over the host's," if gap else ""
        notes.append(f"For {'/'.join(lat)} lower is better: a change reads '{up}' or '{down}'{gap_words} and "
                     f"{'both are ratios' if gap else 'it is a ratio'} of the medians of each repeat's own percentile "
                     "(the table's latency figures come from the merged histograms).")
    return notes


def saturation_notes(records: Sequence[dict]) -> list[str]:
    if not any("saturated (achieved" in str(r.get("note") or "") for r in records):
        return []
    return [f"saturated (achieved X of Y) = a fixed-rate job whose median achieved rate was under {SATURATION_SHARE:.0%} of its "
            "rate (fio's rate_iops or rate, for each job clone and, in a mixed job, reads and writes each): its figures are not "
            "at that rate, so it is compared with nothing."]


def as_policy(repeats: int | RepeatPolicy | None) -> RepeatPolicy:
    if isinstance(repeats, RepeatPolicy):
        return repeats
    return RepeatPolicy(int(repeats or 1), int(repeats or 1))


def repeat_columns(records: list[dict], policy: RepeatPolicy) -> list[Column]:
    """The CV, and why each group has its repeats, when anything was repeated."""
    if policy.max <= 1 and not any((r.get("repeats") or 1) > 1 for r in records):
        return []
    return [Column("cv", "CV", f_cv, detail=True), Column("repeat_stop", "repeats", f_text, detail=True)]


def _table_facts(measurements: Sequence[Measurement], cells: Sequence[CellRecord], env: Environment | None, policy: RepeatPolicy,
                 layers: Callable[[Measurement], bool] = lambda m: True) -> tuple[dict[str, str], list[str]]:
    names = {c.name for c in cells}
    used = [m for m in measurements if (m.side == "host" or m.cell in names) and layers(m)]
    return admissibility(used, cells, env, policy)


# ---- tables -----------------------------------------------------------------------------------


def figure_fields(row: Row) -> dict:
    f = row.figures
    ops = row.unit != "IOPS"  # a file engine's operations: no data moved
    out = {
        **({"unit": row.unit} if ops else {}),
        "iops": f.iops, "mb_s": None if ops else f.mb_s, "p50_ms": f.p50_ms, "p95_ms": f.p95_ms, "p99_ms": f.p99_ms,
        "p999_ms": f.p999_ms, "repeats": f.repeats, "cv": f.cv,
    }
    if f.dev_read_mb_s is not None or f.cpu_busy is not None:  # sampled (older runs: no keys at all)
        out.update({"dev_read_mb_s": f.dev_read_mb_s, "dev_write_mb_s": f.dev_write_mb_s, "cpu_pct": f.cpu_busy})
    if f.pool_read_mb_s is not None or f.pool_write_mb_s is not None:  # a ZFS pool sampled
        out.update({"pool_read_mb_s": f.pool_read_mb_s, "pool_write_mb_s": f.pool_write_mb_s})
    if f.write_ampl is not None:
        out["write_ampl"] = f.write_ampl
    if f.arc_hit_ratio is not None:
        out["arc_hit_pct"] = f.arc_hit_ratio * 100
    if f.osd_commit_ms is not None:
        out["osd_commit_ms"] = f.osd_commit_ms
    if f.host_cpu_busy is not None or f.host_dev_read_mb_s is not None or f.host_dev_write_mb_s is not None:
        out.update({"host_dev_read_mb_s": f.host_dev_read_mb_s, "host_dev_write_mb_s": f.host_dev_write_mb_s,
                    "host_cpu_pct": f.host_cpu_busy})  # the host under a guest run
    return out


def f_dev(record: dict) -> str:
    r, w = record.get("dev_read_mb_s"), record.get("dev_write_mb_s")
    return "-" if r is None and w is None else f"{f_mb(r)}/{f_mb(w)}"


def f_pool(record: dict) -> str:
    r, w = record.get("pool_read_mb_s"), record.get("pool_write_mb_s")
    return "-" if r is None and w is None else f"{f_mb(r)}/{f_mb(w)}"


def _has(records: list[dict], *keys: str) -> bool:
    return any(r.get(k) is not None for r in records for k in keys)


def telemetry_columns(records: list[dict]) -> list[Column]:
    """Device MB/s and CPU % beside fio's figures, when the run sampled them; the host's CPU %
    while fio ran in a guest, when some guest record has it; the pool's MB/s, the write
    amplification and the ARC hit ratio, when some record has them (ZFS)."""
    cols = []
    if any("dev_read_mb_s" in r or "cpu_pct" in r for r in records):
        cols += [Column("dev_mb_s", "dev MB/s r/w", row_fmt=f_dev, detail=True), Column("cpu_pct", "CPU %", f_whole, detail=True)]
    if _has(records, "host_cpu_pct"):
        cols.append(Column("host_cpu_pct", "host CPU %", f_whole, detail=True))
    if _has(records, "pool_read_mb_s", "pool_write_mb_s"):
        cols.append(Column("pool_mb_s", "pool MB/s r/w", row_fmt=f_pool, detail=True))
    if _has(records, "write_ampl"):
        cols.append(Column("write_ampl", "write ampl.", f_ratio, detail=True))
    if _has(records, "arc_hit_pct"):
        cols.append(Column("arc_hit_pct", "ARC hit %", f_whole, detail=True))
    if _has(records, "osd_commit_ms"):
        cols.append(Column("osd_commit_ms", "OSD commit ms", f_ms, detail=True))
    return cols


def telemetry_table_notes(records: list[dict]) -> list[str]:
    """What the telemetry columns shown mean."""
    shown = {c.header for c in telemetry_columns(records)}
    return ([DEV_NOTE, CPU_NOTE, CACHE_NOTE] if "dev MB/s r/w" in shown else []) + (
        [HOST_TELEMETRY_NOTE, HOST_BOUND_NOTE] if "host CPU %" in shown else []) + (
        [CEPH_TELEMETRY_NOTE] if "OSD commit ms" in shown else
        [ZFS_TELEMETRY_NOTE] if shown & {"pool MB/s r/w", "write ampl.", "ARC hit %"} else [])


DEV_NOTE = ("dev MB/s r/w = mean MB/s read/written by the device under the target while fio ran (/proc/diskstats; "
            "in the guest the scratch disk).")
CPU_NOTE = "CPU % = mean busy share (100 - idle) of all CPUs of the side fio ran on (/proc/stat)."
CACHE_NOTE = "served from cache? = a read job whose device read under 10% of fio's MB/s; CPU-bound? = CPUs under 10% idle."
HOST_TELEMETRY_NOTE = ("host CPU % = mean busy share of all the host's CPUs while fio ran in the guest (guest rows whose "
                       "scratch disk is on the host's storage, sampled on the host beside the guest's own sampler).")
HOST_BOUND_NOTE = "host CPU-bound? = the host's CPUs under 10% idle during a guest run."
#: notes that explain one column: a text report that leaves the column out leaves the note out
NOTE_COLUMNS = {DEV_NOTE: "dev MB/s r/w", CPU_NOTE: "CPU %", HOST_TELEMETRY_NOTE: "host CPU %"}
CEPH_TELEMETRY_NOTE = ("pool MB/s r/w = the Ceph pool's client I/O over fio's ramp and runtime (ceph df detail's counters "
                       "read just before fio and once the manager reported its last seconds; every client of the pool, one "
                       "copy of each write; on guest rows the pool under the guest's RBD disk); write ampl. = pool MB/s "
                       "written / fio's MB/s; OSD commit ms = the OSDs' mean commit latency as fio ended (ceph osd perf). "
                       "Where the pool was measured, served from cache? judges reads by the pool's (a read the pool did not "
                       "serve came from librbd's cache); pool also read / pool wrote N x fio's = another client's I/O or "
                       "librbd's metadata, not the job's.")
ZFS_TELEMETRY_NOTE = ("pool MB/s r/w = mean MB/s the ZFS pool read/wrote while fio ran (zpool iostat, every vdev of the pool; "
                      "on guest rows the host's pool under the guest's scratch disk); "
                      "write ampl. = pool MB/s written / fio's MB/s (write jobs; above 1: parity, copies, metadata, the ZIL; "
                      "below 1: compression, or data still in RAM); ARC hit % = ARC hits / accesses over the run "
                      "(/proc/spl/kstat/zfs/arcstats, the whole ARC). Where the pool was sampled, served from cache? judges "
                      "the pool's reads (a zvol's own device counts ARC hits as reads); pool wrote X MB/s of fio's Y = "
                      "pool writes under 50% of fio's; shorter than steady state = runtime under 3 x zfs_txg_timeout; "
                      "scrub/resilver running = zpool status saw one in progress at the start or the end.")


def f_ops(record: dict) -> str:
    """IOPS, or a file engine's operations a second with their unit ("1,234 files/s")."""
    unit = record.get("unit")
    return f_int(record.get("iops")) + (f" {unit}" if unit and record.get("iops") is not None else "")


def figure_columns(records: Sequence[dict]) -> list[Column]:
    """:data:`FIGURE_COLUMNS`, the first naming operations a second where a file job's row counts them."""
    if not any(r.get("unit") for r in records):
        return FIGURE_COLUMNS
    return [Column("iops", "IOPS or ops/s", row_fmt=f_ops)] + FIGURE_COLUMNS[1:]


def unit_notes(records: Sequence[dict]) -> list[str]:
    return [UNITS_NOTE] if any(r.get("unit") for r in records) else []


FIGURE_COLUMNS = [
    Column("iops", "IOPS", f_int),
    Column("mb_s", "MB/s", f_mb),
    Column("p50_ms", "p50 ms", f_ms),
    Column("p99_ms", "p99 ms", f_ms),
    Column("p999_ms", "p99.9 ms", f_ms, detail=True),
]


def job_label(row: Row) -> str:
    return f"{row.job} (sync)" if row.sync else row.job


def judged_by_column(metrics: Sequence[Metric]) -> list[Column]:
    """The "judged by" column, where a table's rows are judged by different metrics."""
    return [Column("metric", "judged by", f_text)] if len(metrics) > 1 else []


def gap_table(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str], repeats: int | RepeatPolicy,
              host_memory_bytes: int | None = None, *, env: Environment | None = None,
              metrics: Mapping[str, Metric] | None = None, rows: Sequence[Row] | None = None) -> Table:
    """``repeats``: the run's repeat policy (an int for a fixed count); ``env`` the run's
    recorded environment, for the admissibility facts; ``metrics`` each job's metric; ``rows``
    their gap rows where the caller made them (:class:`~vmbench.report.runrows.RunRows`)."""
    policy = as_policy(repeats)
    rows = gap_rows(measurements, cells, jobs, host_memory_bytes, metrics) if rows is None else rows
    used = table_metrics(rows)
    multi_cell = len(cells) > 1
    keys = ("gap", "vs_baseline")
    records = []
    for r in rows:
        rec = {"job": job_label(r), **metric_fields(r, used), "side": r.side, "cell": r.cell or "", "layer": r.layer, **figure_fields(r),
               "gap": r.gap, "vs_baseline": r.vs_baseline, "note": r.note,
               "repeat_stop": policy.stop(r.figures.repeats, r.figures.cv), **delta_fields(r, keys)}
        records.append(rec)
    cols = [Column("job", "job")] + judged_by_column(used) + [Column("side", "side")]
    if multi_cell:
        cols.append(Column("cell", "cell"))
    cols += figure_columns(records)
    cols += telemetry_columns(records)
    cols += repeat_columns(records, policy)
    cols.append(Column("gap", gap_header("guest", used), row_fmt=delta_ratio("gap"), keep=True))
    if multi_cell:
        cols.append(Column("vs_baseline", metric_header("vs baseline", used), row_fmt=delta_pct("vs_baseline"), keep=True))
    cols.append(Column("note", "note", f_text))
    repeated = any(r.figures.repeats > 1 for r in rows)
    notes = [
        "gap = host IOPS / guest IOPS on the same storage and the same fio job (1.00x: no loss; 5.00x: the guest gets a fifth)."
        if by_iops(used) else
        "gap = host / guest on the same storage and the same fio job for IOPS and MB/s, guest / host for a latency "
        "(1.00x: no loss; 5.00x: the guest gets a fifth, or takes five times as long).",
        "Latency is fio's completion latency (clat); percentiles come from fio's json+ histograms"
        + (", merged over repeats; IOPS and MB/s are medians." if repeated or policy.max > 1 else "."),
    ]
    if any(r.sync for r in rows):
        notes.append("(sync) jobs issue synchronous writes: compare them only with each other.")
    if any(r.side == "RADOS" for r in rows):
        notes.append("RADOS = the pool's own ceiling: rados bench with the job's block size as the object size and its "
                     "iodepth x numjobs in flight (a read job reads objects it wrote first); each write makes a new object "
                     "(librbd writes into 4 MiB ones), so it has no gap and no latency histogram; a host row's note says "
                     "what librbd on the host gets of it.")
    if multi_cell:
        of = "IOPS" if by_iops(used) else "the job's metric"
        notes.append(f"vs baseline = change in {of} from the first cell ({cells[0].name}).")
    notes += metric_notes(used, "gap and vs baseline")
    notes += saturation_notes(records)
    notes += telemetry_table_notes(records)
    notes += verdict_notes(records, keys, used)
    env = Environment.from_row(env)
    if host_memory_bytes and not env.host_memory_mib:
        env = env.with_facts(host_memory_mib=host_memory_bytes >> 20)
    facts, missing = _table_facts(measurements, cells, env, policy, lambda m: m.layer in ("host", "raw"))
    return Table("gaps", "Host vs guest, raw scratch disk", cols, records, notes, facts, missing)


def layer_table(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str],
                crypto: Sequence[CryptoRecord] = (), stacks: Sequence[PlannedStack] = (), *,
                repeats: int | RepeatPolicy | None = None, env: Environment | None = None,
                metrics: Mapping[str, Metric] | None = None, rows: Sequence[Row] | None = None) -> Table | None:
    rows = layer_rows(measurements, cells, jobs, metrics) if rows is None else rows
    if not rows:
        return None
    used = table_metrics(rows)
    policy = as_policy(repeats)
    keys = ("vs_below", "gap")
    cpu_of = {c.name: c.settings.cpu for c in cells}
    luks_of = {st.name: st.luks for st in stacks}
    records = []
    for r in rows:
        top = r.layer.split("+")[-1]
        luks = luks_of.get(r.stack or "")
        ceiling = _ceiling(crypto, cpu_of.get(r.cell or ""), luks) if top.startswith("luks") and luks else None
        records.append({"cell": r.cell, "stack": r.stack, "job": job_label(r), **metric_fields(r, used),
                        "layer": r.layer if r.layer == "raw" or r.layer.startswith("host") else "+" + top,
                        "layer_path": r.layer, **figure_fields(r), "vs_below": r.vs_below, "gap": r.gap, "crypto_ceiling": ceiling,
                        **({"note": r.note} if r.note else {}),
                        "repeat_stop": policy.stop(r.figures.repeats, r.figures.cv), **delta_fields(r, keys)})
    cols = [Column("cell", "cell"), Column("stack", "stack"), Column("job", "job")] + judged_by_column(used) + [Column("layer", "layer")]
    cols += figure_columns(records) + telemetry_columns(records) + repeat_columns(records, policy)
    cols += [Column("vs_below", metric_header("vs layer below", used), row_fmt=delta_pct("vs_below"), keep=True),
             Column("gap", gap_header("layer", used), row_fmt=delta_ratio("gap"), keep=True)]
    notes = ["vs layer below = change in IOPS that layer costs (or gains); gap = host IOPS / IOPS at that layer." if by_iops(used) else
             "vs layer below = change in the job's metric that layer costs (or gains); gap = host / layer for IOPS and MB/s, "
             "layer / host for a latency."]
    notes += metric_notes(used, "vs layer below and gap")
    notes += unit_notes(records) + ([FILE_JOBS_NOTE] if any(r.get("unit") or r.get("note", "").startswith(NO_HOST_ROW)
                                                              or r["layer"].startswith("host+") for r in records) else [])
    notes += saturation_notes(records)
    notes += telemetry_table_notes(records)
    if any(r["crypto_ceiling"] for r in records):
        cols.append(Column("crypto_ceiling", "crypto ceiling", f_text))
        notes.append("crypto ceiling = cryptsetup benchmark in that guest for the stack's cipher (one CPU), encrypt/decrypt MiB/s, and whether the guest has the aes flag.")
    if any(r.get("note") for r in records):
        cols.append(Column("note", "note", f_text))
    notes += verdict_notes(records, keys, used)
    stacked = [c for c in cells if c.stacks]
    facts, missing = _table_facts(measurements, stacked, env, policy)
    return Table("layers", "Layer by layer: host -> guest raw disk -> each layer of each stack", cols, records, notes, facts, missing)


def _ceiling(crypto: Sequence[CryptoRecord], cpu: str | None, luks: PlannedLuks) -> str | None:
    for c in crypto:
        if c.side == "guest" and c.cpu == cpu and c.cipher == luks.cipher and c.key_bits == luks.key_bits:
            if c.encrypt_mib_s is None:
                return f"n/a ({c.error or 'failed'})"
            aes = "" if c.aes_flag is None else (", aes" if c.aes_flag else ", no aes")
            return f"{f_mb(c.encrypt_mib_s)}/{f_mb(c.decrypt_mib_s)} MiB/s{aes}"
    return None


def journey_table(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str], *,
                  repeats: int | RepeatPolicy | None = None, env: Environment | None = None,
                  metrics: Mapping[str, Metric] | None = None) -> Table:
    policy = as_policy(repeats)
    keys = ("gap", "vs_previous")
    rows = journey_rows(measurements, cells, jobs, metrics)
    used = table_metrics(rows)
    records = []
    for r in rows:
        records.append({"job": job_label(r), **metric_fields(r, used), "step": r.cell, "layer": r.layer, **figure_fields(r), "gap": r.gap,
                        "vs_previous": r.vs_previous, **({"note": r.note} if r.note else {}),
                        "repeat_stop": policy.stop(r.figures.repeats, r.figures.cv), **delta_fields(r, keys)})
    cols = [Column("job", "job")] + judged_by_column(used) + [Column("step", "step"), Column("layer", "layer measured")] + FIGURE_COLUMNS
    cols += repeat_columns(records, policy)
    cols += [Column("gap", gap_header("step", used), row_fmt=delta_ratio("gap"), keep=True),
             Column("vs_previous", metric_header("vs previous step", used), row_fmt=delta_pct("vs_previous"), keep=True)]
    if any(r.get("note") for r in records):
        cols.append(Column("note", "note", f_text))
    notes = ["Each step's figure is the top measured layer of its first stack (the raw disk without stacks)."]
    notes += metric_notes(used, "gap and vs previous step")
    notes += saturation_notes(records)
    notes += verdict_notes(records, keys, used)
    facts, missing = _table_facts(measurements, cells, env, policy)
    return Table("journey", "Tuning journey: each step's top layer", cols, records, notes, facts, missing)


def crypto_table(crypto: Sequence[CryptoRecord]) -> Table | None:
    if not crypto:
        return None
    records = []
    for c in crypto:
        records.append({
            "side": c.side, "cpu": c.cpu, "aes_flag": c.aes_flag, "cipher": c.cipher, "key_bits": c.key_bits,
            "encrypt_mib_s": c.encrypt_mib_s, "decrypt_mib_s": c.decrypt_mib_s, "error": c.error or "",
        })
    cols = [Column("side", "side"), Column("cpu", "cpu model"), Column("aes_flag", "aes flag", lambda v: "-" if v is None else f_bool(v)),
            Column("cipher", "cipher"), Column("key_bits", "key bits"),
            Column("encrypt_mib_s", "encrypt MiB/s", f_mb), Column("decrypt_mib_s", "decrypt MiB/s", f_mb), Column("error", "note", f_text)]
    return Table("crypto", "Crypto ceiling: cryptsetup benchmark (one CPU, in memory, no disk)", cols, records,
                 ["One CPU's crypto speed (cryptsetup benchmark: one thread, in memory). dm-crypt spreads its work over the "
                  "guest's vCPUs, so LUKS on several vCPUs can go beyond it. Without the aes flag the guest encrypts in software."])


def targets_table(measurements: Sequence[Measurement], targets: Sequence[Target],
                  metrics: Mapping[str, Metric] | None = None) -> Table | None:
    """Each target's PASS/FAIL per matching group; a job judged by a latency also shows that
    figure ("judged by": "p99.9 2.31 ms"), and a saturated fixed-rate group says so."""
    if not targets:
        return None
    results: list[TargetResult] = target_results(measurements, targets, metrics)
    records = []
    for target in targets:
        desc = ", ".join(filter(None, [
            f"MB/s >= {target.min_mb_s:g}" if target.min_mb_s is not None else "",
            f"IOPS >= {target.min_iops:g}" if target.min_iops is not None else "",
            f"p99 <= {target.max_p99_ms:g} ms" if target.max_p99_ms is not None else "",
        ]))
        matched = [t for t in results if t.target is target]
        for t in matched:
            rec = {"target": desc, "cell": t.cell, "stack": t.stack or "", "layer": t.layer, "job": t.job,
                   "iops": t.figures.iops, "mb_s": t.figures.mb_s, "p99_ms": t.figures.p99_ms,
                   "result": "PASS" if t.passed else "FAIL", "why": "; ".join(t.failures)}
            if not t.metric.higher_is_better:
                rec.update({"metric": stats.label(t.metric), "metric_ms": t.figures.value_of(t.metric)})
            if t.figures.saturated:
                rec["note"] = t.figures.saturated
            records.append(rec)
        if not matched:  # its cell was invalid, or the run stopped before it: say so, never drop it
            records.append({"target": desc, "cell": target.cell or "", "stack": target.stack or "",
                            "layer": target.layer or "", "job": target.job, "result": "NOT MEASURED",
                            "why": "no valid measurement matches this target"})
    cols = [Column("target", "target"), Column("cell", "cell", f_text), Column("stack", "stack", f_text), Column("layer", "layer", f_text),
            Column("job", "job", f_text), Column("mb_s", "MB/s", f_mb), Column("iops", "IOPS", f_int), Column("p99_ms", "p99 ms", f_ms),
            Column("result", "result", keep=True), Column("why", "why", f_text)]
    notes = []
    if any(r.get("metric") for r in records):
        cols.insert(-2, Column("metric_ms", "judged by", row_fmt=lambda r: f"{r['metric']} {f_ms(r['metric_ms'])} ms" if r.get("metric") else ""))
        notes.append("judged by = the latency percentile the job is judged by (merged histograms), beside the targets' figures.")
    if any(r.get("note") for r in records):
        cols.append(Column("note", "note", f_text))
        notes += saturation_notes(records)
    return Table("targets", "Targets", cols, records, notes)


def _setting_fmt(key: str) -> Callable[[Any], str]:
    """A cells-table column's text: the setting as plans and cell names write it (on/off, 1G)."""
    return lambda v: f_text(v) if v is None else setting_text(key, v)


def cells_table(cells: Sequence[CellRecord]) -> Table:
    """Every cell with its VM settings, one column per axis (:func:`setting_columns`): those
    every VM states, and those left to the hypervisor when some cell gives one (a cell that
    does not reads as the axis's ``unset``)."""
    keys = list(setting_columns(c.settings for c in cells))
    records = []
    for c in cells:
        rec = {"cell": c.name, **{k: stored_setting(c.settings, k) for k in keys},
               "changed": ", ".join(c.changed) or "-", "stacks": ", ".join(c.stacks) or "-",
               "valid": c.valid, "problems": "; ".join(c.problems)}
        records.append(rec)
    cols = [Column("cell", "cell")] + [Column(k, k.removesuffix("_mib"), _setting_fmt(k)) for k in keys]
    cols += [Column("changed", "changed"), Column("stacks", "stacks"), Column("valid", "measured", f_bool), Column("problems", "problems", f_text)]
    return Table("cells", "Cells (every setting of each VM configuration)", cols, records)
