"""A stored run's figures for the tools admins graph their nodes with; pure.

:func:`run_points` makes one :class:`Point` per group (side, cell, stack, layer, job, load
step) of a run, with the report's own figures (:func:`vmbench.report.rows.aggregate`: median
IOPS and MB/s, merged-histogram percentiles; the gap as the report makes it: the cell's host
reference over the guest on the job's metric).  Then:

- :func:`influx_lines`: InfluxDB line protocol, as Proxmox VE's metric server writes its own
  (measurement ``vmbench``; tags ``host``, ``node``, ``scenario``, ``side``, ``cell``,
  ``stack``, ``layer``, ``job``, ``load_step``; fields ``iops``, ``mbps``, ``p50``, ``p99``,
  ``p999`` in ms, ``gap``, ``repeats``, ``run_id``, ``run_tag``; the run's start, in seconds,
  as the timestamp: write it with ``precision=s``);
- :func:`openmetrics_text`: OpenMetrics/Prometheus text for node_exporter's textfile
  collector (gauges in base units with the same labels, ``vmbench_run_info`` and
  ``vmbench_run_timestamp_seconds`` for the run; no sample timestamps, which the collector
  refuses), or with ``timestamps`` a whole history for ``promtool tsdb create-blocks-from
  openmetrics``.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Mapping, Sequence

from ..fio.job import Metric
from ..results.db import RunRow
from ..results.environment import Environment
from ..results.records import CellRecord, Measurement
from .across_runs import groups_of, job_metric
from .rows import Figures, aggregate, host_group, host_key

MEASUREMENT = "vmbench"
TAGS = ("host", "node", "scenario", "side", "cell", "stack", "layer", "job", "load_step")


@dataclass(frozen=True)
class Point:
    """One group of one run: its tags (empty ones left out) and its fields."""

    tags: Mapping[str, str]
    fields: Mapping[str, float | int | str]
    time_s: int


def _run_tags(run: RunRow) -> dict[str, str]:
    """The tags every point of a run has: its host, node (Proxmox: the node, else the host) and scenario."""
    env: Environment = run.environment
    return {"host": str(env.hostname or ""), "node": str(env.pve_node or env.hostname or ""), "scenario": run.scenario_name}


def run_time(run: RunRow) -> int:
    """The run's start, seconds since the epoch (its stored ISO time, UTC when it names no zone)."""
    t = datetime.fromisoformat(run.started_at)
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return int(t.timestamp())


def _gap(host: Figures | None, fig: Figures, metric: Metric) -> float | None:
    """host over guest on the job's metric (a latency: guest over host), as the report's gap."""
    if host is None:
        return None
    if metric is Metric.IOPS:
        return host.iops / fig.iops if fig.iops else None
    h, g = statistics.median(host.samples_of(metric)), statistics.median(fig.samples_of(metric))
    a, b = (h, g) if metric.higher_is_better else (g, h)
    return a / b if b else None


def run_points(run: RunRow, measurements: Sequence[Measurement], cells: Sequence[CellRecord]) -> list[Point]:
    """One point per group of the run (invalid cells left out, a load step as its aggregate)."""
    groups = groups_of(measurements, cells, run.plan.load)
    by_name = {c.name: c for c in cells}
    base = _run_tags(run)
    t = run_time(run)
    figs = {k: aggregate(rows) for k, rows in groups.items()}
    out = []
    for key, rows in groups.items():
        fig = figs[key]
        metric = job_metric(key.job, [(run, measurements, cells)], 0, rows)
        host = fig if key.side == "host" else figs.get(host_group(host_key(by_name.get(key.cell or "")), key.job))
        tags = dict(base, side=key.side, cell=key.cell or "", stack=key.stack or "", layer=key.layer, job=key.job,
                    load_step=str(key.load_step) if key.load_step else "")
        if key.vm and key.load_step:
            tags["layer"] = f"{key.layer} aggressors"
        fields: dict[str, float | int | str] = {"iops": fig.iops, "mbps": fig.mb_s}
        for name, v in (("p50", fig.p50_ms), ("p99", fig.p99_ms), ("p999", fig.p999_ms), ("gap", _gap(host, fig, metric))):
            if v is not None and math.isfinite(v):
                fields[name] = v
        fields.update(repeats=fig.repeats, run_id=run.id, run_tag=run.tag)
        out.append(Point({k: v for k, v in tags.items() if v}, fields, t))
    return out


# ---- InfluxDB line protocol -------------------------------------------------------------------


def _escape_key(text: str) -> str:
    """A measurement, tag key or tag value: commas, equals signs and spaces escaped."""
    return text.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=").replace(" ", "\\ ")


def _field(v: float | int | str) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return f"{v}i"
    if isinstance(v, float):
        return repr(v)
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def influx_line(p: Point) -> str:
    tags = "".join(f",{_escape_key(k)}={_escape_key(p.tags[k])}" for k in sorted(p.tags))
    fields = ",".join(f"{_escape_key(k)}={_field(v)}" for k, v in p.fields.items())
    return f"{MEASUREMENT}{tags} {fields} {p.time_s}"


def influx_lines(points: Sequence[Point]) -> str:
    return "".join(influx_line(p) + "\n" for p in points)


# ---- OpenMetrics --------------------------------------------------------------------------------

#: (metric family, the point's field, the factor to its base unit, help)
GAUGES = (
    ("vmbench_iops", "iops", 1.0, "Median IOPS of a fio job's repeats (vmbench)."),
    ("vmbench_bandwidth_bytes_per_second", "mbps", 1e6, "Median bandwidth of a fio job's repeats, bytes per second (vmbench)."),
    ("vmbench_clat_p50_seconds", "p50", 1e-3, "Median completion latency, merged histogram of the repeats (vmbench)."),
    ("vmbench_clat_p99_seconds", "p99", 1e-3, "99th percentile completion latency, merged histogram of the repeats (vmbench)."),
    ("vmbench_clat_p999_seconds", "p999", 1e-3, "99.9th percentile completion latency, merged histogram of the repeats (vmbench)."),
    ("vmbench_gap_ratio", "gap", 1.0, "Host over guest on the job's metric, as the report's gap column (vmbench)."),
    ("vmbench_repeats", "repeats", 1.0, "Repeats of the fio job behind the figures (vmbench)."),
)


def _label_value(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(tags: Mapping[str, str]) -> str:
    return ",".join(f'{k}="{_label_value(tags[k])}"' for k in TAGS if k in tags)


def _number(v: float) -> str:
    return repr(float(v)) if not float(v).is_integer() else str(int(v)) if abs(v) < 1e15 else repr(float(v))


def openmetrics_text(points: Sequence[Point], runs: Sequence[RunRow], *, timestamps: bool = False) -> str:
    """The points as OpenMetrics text, ending in ``# EOF``: a family per figure, each series'
    samples oldest first (with ``timestamps``, each sample stamped with its run's start)."""
    lines: list[str] = []
    for name, field, factor, help_text in GAUGES:
        samples = [p for p in points if field in p.fields]
        if not samples:
            continue
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        by_series: dict[str, list[Point]] = {}
        for p in samples:
            by_series.setdefault(_labels(p.tags), []).append(p)
        for labels, ps in by_series.items():
            for p in sorted(ps, key=lambda q: q.time_s) if timestamps else ps[-1:]:
                value = float(p.fields[field]) * factor
                lines.append(f"{name}{{{labels}}} {_number(value)}" + (f" {p.time_s}" if timestamps else ""))
    lines += _run_families(runs, timestamps)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _run_families(runs: Sequence[RunRow], timestamps: bool) -> list[str]:
    """The run behind the figures: ``vmbench_run_info`` (its tag, id, vmbench version; value 1;
    an OpenMetrics info family with ``timestamps``, else the gauge node_exporter's own ``_info``
    metrics are) and ``vmbench_run_timestamp_seconds`` (its start) per scenario and host."""
    family = "vmbench_run" if timestamps else "vmbench_run_info"
    info = [f"# HELP {family} The run behind a scenario's vmbench figures.", f"# TYPE {family} {'info' if timestamps else 'gauge'}"]
    stamp = ["# HELP vmbench_run_timestamp_seconds When the run behind a scenario's vmbench figures started.",
             "# TYPE vmbench_run_timestamp_seconds gauge"]
    chosen = sorted(runs, key=run_time) if timestamps else list(runs)[-1:]
    by_series: dict[str, list[str]] = {}
    for run in chosen:
        labels = _labels({k: v for k, v in _run_tags(run).items() if v})
        t = f" {run_time(run)}" if timestamps else ""
        info.append(f'vmbench_run_info{{{labels},run_id="{run.id}",run_tag="{_label_value(run.tag)}",'
                    f'vmbench_version="{_label_value(str(run.environment.vmbench_version or ""))}"}} 1{t}')
        by_series.setdefault(labels, []).append(f"vmbench_run_timestamp_seconds{{{labels}}} {run_time(run)}{t}")
    return info + stamp + [line for lines in by_series.values() for line in lines]
