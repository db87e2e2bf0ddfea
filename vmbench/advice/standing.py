""""Is my number good?": where the best cell of a run stands for a goal.

* Against the host on the same storage and the same fio job (the gap table's host rows and
  gap delta, on the goal's metric): the best cell's figure as a share of the host's, with the
  gap's interval.
* For a LUKS layer, against the crypto ceiling (cryptsetup benchmark in that guest, one CPU):
  the layer's MB/s as a share of the cipher's encrypt (writes) or decrypt (reads) MiB/s.
* For CPU per I/O, the QEMU process's µs per I/O beside the host fio's own for the same job.

Pure, from the report's rows.
"""

from __future__ import annotations

from ..report.curves import SWEPT, curves
from ..report.load import RunData
from ..report.rows import READ_MODES, WRITE_MODES
from ..report.stats import Delta, label
from .measured import Ctx, ceiling, fio_metric, unit
from .model import Goal, GoalMetric
from .risks import setting_risks

MIB = 1 << 20


def _fmt(v: float | None, metric: GoalMetric) -> str:
    if v is None:
        return "-"
    if metric is GoalMetric.IOPS:
        return f"{v:,.0f}"
    if metric is GoalMetric.MBPS:
        return f"{v:,.1f}"
    return f"{v:.3g}" if v < 1 else f"{v:,.2f}"


def _share(d: Delta) -> str:
    """A gap (host/guest, or guest/host for a latency) as the guest's share of the host."""
    v = d.value
    if not v:
        return "-"
    text = f"{100 / v:.0f}%"
    if d.low and d.high:
        text += f" [{100 / d.high:.0f}, {100 / d.low:.0f}]"
    return text


def host_standing(ctx: Ctx, goal: Goal, job: str) -> list[str]:
    """The best cell's raw disk against the host on its storage."""
    metric = fio_metric(goal)
    rows = ctx.gap_rows(job, metric)
    guests = [r for r in rows if r.side == "guest" and r.figures.value_of(metric) is not None and not r.figures.saturated]
    if not guests:
        return []
    pick = max if goal.metric.higher_is_better else min
    best = pick(guests, key=lambda r: r.figures.value_of(metric) or 0.0)
    gap = best.deltas.get("gap")
    best_cell = ctx.by_name.get(str(best.cell))
    host = next((r for r in rows if r.side == "host" and r.cell == (best_cell.host_cell if best_cell is not None else None)), None)
    what = f"{job} {label(metric)}"
    cell = f"best cell {best.cell}"
    risks = setting_risks(best.settings)
    risky = f" (carries {', '.join(r.value for r in risks)})" if risks else ""
    value = f"{_fmt(best.figures.value_of(metric), goal.metric)} {unit(goal.metric)}"
    if gap is None or gap.value is None or host is None:
        why = "no host reference on the same storage" if host is None else (gap.why if gap is not None else "not compared")
        return [f"{cell}{risky}: {value} ({what}); against the host: - ({why})"]
    hv = f"{_fmt(host.figures.value_of(metric), goal.metric)} {unit(goal.metric)}"
    verdict = f", {gap.verdict}" if gap.verdict else f" (no verdict: {gap.why})"
    share = f"= {_share(gap)} of the host" if goal.metric.higher_is_better else f"(the host's is {_share(gap)} of it)"
    line = f"{cell}{risky}: {value} {share} on the same storage ({what}: host {hv}; gap {gap.value:.2f}x{verdict})"
    notes = [p for p in (best.note or "").split("; ") if "cache" in p or "beats host" in p]
    if notes:
        line += "; " + "; ".join(notes)
    return [line]


def luks_standing(ctx: Ctx, goal: Goal, job: str) -> list[str]:
    """Each LUKS layer's MB/s as a share of the crypto ceiling of its cell's CPU model."""
    if not ctx.data.crypto:
        return []
    rows = [r for r in ctx.layer_rows(job) if r.layer.split("+")[-1].startswith("luks")]
    stacks = ctx.data.plan.luks_of
    out = []
    for r in rows:
        luks = stacks.get(str(r.stack))
        if not luks:
            continue
        cell = ctx.by_name.get(str(r.cell))
        cpu = cell.settings.cpu if cell is not None else None
        c = ceiling(ctx.data.crypto, cpu, luks.cipher, luks.key_bits)
        if c is None or c.encrypt_mib_s is None:
            continue
        rw = measured_rw(ctx, job)
        side = "decrypt" if rw in READ_MODES else "encrypt"
        if rw not in READ_MODES + WRITE_MODES:
            side = "encrypt"
        top = float((c.decrypt_mib_s if side == "decrypt" else c.encrypt_mib_s) or 0.0)
        mib = r.figures.mb_s * 1e6 / MIB
        share = f"{mib / top * 100:.0f}%" if top else "-"
        aes = "" if c.aes_flag is None else (", aes flag" if c.aes_flag else ", no aes flag: software AES")
        out.append(f"cell {r.cell} stack {r.stack} {r.layer}: {mib:,.1f} MiB/s ({job} MB/s) = {share} of the crypto ceiling "
                   f"({luks.cipher} {luks.key_bits} bits {side}, {top:,.0f} MiB/s on one CPU, cpu {cpu}{aes}); "
                   "dm-crypt spreads over the vCPUs, so above 100% is possible")
    return out


def measured_rw(ctx: Ctx, job: str) -> str | None:
    m = next((m for m in ctx.data.measurements if m.job == job), None)
    return m.job_params.builtin_rw if m is not None else None


def cpu_standing(ctx: Ctx, goal: Goal, job: str) -> list[str]:
    """The cheapest cell's QEMU µs per I/O, beside the host fio's own for the same job."""
    rows = [r for r in ctx.cpu_rows() if r.job == job and r.layer == "raw" and r.value("qemu") is not None]
    if not rows:
        return []
    best = min(rows, key=lambda r: r.value("qemu") or 0.0)
    line = f"cheapest cell {best.cell}: QEMU {best.value('qemu'):.1f} µs/IO of host CPU per I/O ({job}, {best.accel})"
    if best.host_fio is not None and best.host_fio.median is not None:
        line += f"; the host's own fio spends {best.host_fio.median:.1f} µs/IO on the same job"
    return [line]


def curve_standing(data: RunData) -> list[str]:
    """What a sweep's guest curves say (report/curves.py): where more queue stopped paying in
    the guest, beside the host's knee on the same job; or that the guest still gained at the
    sweep's end.  [] for a run without sweeps."""
    if not any(j.sweep_of for j in data.plan.jobs) or data.kind.many_vms:
        return []
    rows = data.rows.gaps(data.jobs, data.plan.job_metrics)
    found = curves(rows, data.plan.jobs)
    host_knee = {c.job: c.points[c.knee].value for c in found if c.side == "host" and c.knee is not None}
    out = []
    for c in (c for c in found if c.side == "guest"):
        name, last = SWEPT.get(c.key, c.key), c.points[-1]
        host = f"; the host's knee is at {name} {host_knee[c.job]}" if c.job in host_knee else ""
        if c.knee is None:
            out.append(f"{c.job} ({c.cell}): the guest still gained IOPS at {name} {last.value}: a deeper queue may help{host}")
        elif c.knee < len(c.points) - 1:
            knee = c.points[c.knee]
            gain = last.iops / knee.iops - 1 if knee.iops else 0.0
            p99 = f", p99 x{last.p99_ms / knee.p99_ms:.1f}" if knee.p99_ms and last.p99_ms else ""
            out.append(f"{c.job} ({c.cell}): beyond {name} {knee.value} the guest adds latency, not IOPS "
                       f"({name} {knee.value} -> {last.value}: {gain:+.0%} IOPS{p99}){host}")
    return out
