"""A run across several hosts: each step's figures per host, and the slowest host (pure).

Every load row of such a run names its host (``load.host``).  For each step, side, cell,
layer and job, the rows of each host make one :class:`HostFigures` through
:func:`~vmbench.report.loadrows.step_figures` (the host's VMs summed per repeat, their
histograms merged, never averaged).  Hosts that carry different numbers of VMs compare by
**IOPS per VM**: each complete repeat's sum over the host's VMs divided by their number; the
slowest host is the one with the lowest median of those, against the fastest, as a change
with its bootstrap interval (:func:`vmbench.report.stats.change`) when repeats allow.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict
from dataclasses import dataclass
from typing import Mapping, Sequence

from ..results.plan import LoadPlan
from ..results.records import Measurement, NicRecord
from ..telemetry.nic import NEAR_LINK, NEAR_LINK_RULE
from . import stats
from .loadrows import StepFigures, step_figures, step_groups
from .stats import Delta
from .tables import Column, Table, delta_pct, f_int, f_ms, f_text

SLOWEST_RULE = ("per VM = each complete repeat's IOPS summed over the host's VMs, divided by their number; the slowest host has the "
                "lowest median per-VM IOPS, compared with the fastest's: its median / the fastest's - 1, with a 95% bootstrap "
                f"interval where both have {stats.MIN_REPEATS} or more repeats.")


def hosts_of(measurements: Sequence[Measurement]) -> list[str]:
    """The hosts the load rows name, in order of first appearance."""
    return list(OrderedDict((h, None) for m in measurements if (h := m.load.host)))


@dataclass(frozen=True)
class HostFigures:
    host: str
    fig: StepFigures
    nic: NicRecord | None = None  # the busiest interface of the host's busiest round

    @property
    def per_vm_samples(self) -> tuple[float, ...]:
        return tuple(s / self.fig.vms for s in self.fig.samples) if self.fig.vms else ()


@dataclass(frozen=True)
class HostStep:
    """One step of one (side, cell, stack, layer, job) across the hosts it ran on."""

    hosts: tuple[HostFigures, ...]
    slowest: str | None = None  # None: one host, or no figure to compare
    fastest: str | None = None
    change: Delta | None = None  # the slowest's per-VM IOPS against the fastest's


def _slowest(hosts: Sequence[HostFigures]) -> tuple[str | None, str | None, Delta | None]:
    judged = [h for h in hosts if h.per_vm_samples]
    if len(judged) < 2:
        return None, None, None
    by_median = sorted(judged, key=lambda h: statistics.median(h.per_vm_samples))
    slow, fast = by_median[0], by_median[-1]
    if statistics.median(slow.per_vm_samples) >= statistics.median(fast.per_vm_samples):
        return None, None, None  # every host alike: none is the slowest
    return slow.host, fast.host, stats.change(slow.per_vm_samples, fast.per_vm_samples)



def host_steps(measurements: Sequence[Measurement], plan: LoadPlan) -> list[HostStep]:
    """Each step group's figures per host, in the order stored; [] for a one-host run."""
    out = []
    for key, rows in step_groups(measurements).items():
        by_host: "OrderedDict[str, list[Measurement]]" = OrderedDict()
        for r in rows:
            if (h := r.load.host) is not None:
                by_host.setdefault(h, []).append(r)
        if not by_host:
            continue
        sp = plan.step(key.load_step)
        name = sp.name if sp else str(key.load_step)
        figs = tuple(HostFigures(h, step_figures(rs, name=name, vms=sorted({r.vm for r in rs})), _peak_nic(rs))
                     for h, rs in by_host.items())
        out.append(HostStep(figs, *_slowest(figs)))
    return out


def _peak_nic(rows: Sequence[Measurement]) -> NicRecord | None:
    """The busiest NIC reading of a host's rows (by its share of the link, else by its rate)."""
    readings = [n for r in rows if (n := r.load.nic) is not None]
    return max(readings, key=lambda n: (n.share or 0.0, n.mb_s or 0.0), default=None)


def f_nic(stored: Mapping | None) -> str:
    """A table record's NIC reading (as stored) in words."""
    nic = NicRecord.from_row(stored) if stored else None
    if nic is None:
        return "-"
    if not nic.mb_s:
        return "idle (no interface moved a byte)"
    text = f"{nic.iface} {nic.mb_s:.1f} MB/s"
    if nic.share is None:
        return text + " (no link speed)"
    return text + f" ({nic.share * 100:.0f}% of {nic.speed_mbit} Mb/s)" + (" NEAR LINK" if nic.share >= NEAR_LINK else "")


def _sentence(hs: HostStep) -> str | None:
    if hs.slowest is None or hs.change is None or hs.change.value is None:
        return None
    f = hs.hosts[0].fig
    where = "host volumes" if f.side == "host" else "guest " + "/".join(filter(None, [f.cell, f.stack, f.layer]))
    verdict = f" ({hs.change.verdict})" if hs.change.verdict else f" (no verdict: {hs.change.why})" if hs.change.why else ""
    return (f"Step {f.name}, {where}, {f.job}: {hs.slowest} is the slowest host, "
            f"{hs.change.value * 100:+.1f}% IOPS per VM against {hs.fastest}{verdict}.")


def per_host_table(steps: Sequence[HostStep], plan: LoadPlan, accelerators: Sequence[str]) -> Table:
    records = []
    for hs in steps:
        for h in hs.hosts:
            f = h.fig
            change = hs.change if h.host == hs.slowest else None
            records.append({
                "side": f.side, "cell": f.cell or "", "stack": f.stack or "", "layer": f.layer, "job": f.job, "step": f.name,
                "load_step": f.step, "host": h.host, "vms": f.vms, "iops": f.iops, "per_vm_iops": f.iops / f.vms if f.iops and f.vms else None,
                "vm_min_iops": f.min_iops, "vm_max_iops": f.max_iops, "p99_ms": f.p99_ms, "repeats": len(f.samples),
                "excluded": "; ".join(f.excluded), "slowest": "slowest" if h.host == hs.slowest else "",
                "vs_fastest": change.value if change else None, "vs_fastest_low": change.low if change else None,
                "vs_fastest_high": change.high if change else None, "vs_fastest_verdict": change.verdict if change else None,
                "vs_fastest_why": change.why if change else None, "nic": h.nic.stored if h.nic else None,
            })
    cols = [Column("step", "step"), Column("side", "side"), Column("cell", "cell"), Column("layer", "layer"), Column("job", "job"),
            Column("host", "host"), Column("vms", "VMs"), Column("iops", "IOPS (sum)", f_int),
            Column("per_vm_iops", "IOPS per VM", f_int),
            Column("vm_min_iops", "per-VM IOPS min-max", row_fmt=lambda r: "-" if r.get("vm_min_iops") is None
                   else f"{f_int(r['vm_min_iops'])}-{f_int(r['vm_max_iops'])}"),
            Column("p99_ms", "p99 ms (merged)", f_ms),
            Column("vs_fastest", "slowest host vs fastest", row_fmt=lambda r: delta_pct("vs_fastest")(r) if r.get("slowest") else "",
                   keep=True),
            Column("nic", "NIC (busiest round)", f_nic, detail=not any(r["nic"] for r in records)),
            Column("excluded", "excluded", f_text)]
    acc = "/".join(accelerators) or "not recorded"
    notes = [f"Per host: the rows of each host of each step, under {acc}; IOPS (sum) = the sum over the host's VMs in each "
             "repeat, then the mean over the repeats; p99 = fio's completion latency from the host's VMs' histograms merged "
             "bin by bin (never averaged).", SLOWEST_RULE,
             "A host reference row (side host) is the same job on that host's own storage, on as many volumes as it has VMs.",
             NEAR_LINK_RULE]
    near = sorted({f"{h.host} ({h.nic.iface}, step {h.fig.name})" for hs in steps for h in hs.hosts
                   if h.nic and (h.nic.share or 0) >= NEAR_LINK})
    if near:
        notes.append("WARNING: a round came near its link's speed on " + ", ".join(near) + ": the network may have set its figures.")
    notes += [s for hs in steps if (s := _sentence(hs))]
    return Table("load-hosts", "Per host: each step's figures on each host", cols, records, notes)


def slowest_lines(steps: Sequence[HostStep]) -> list[str]:
    """The sentences naming the slowest host of each step that spans hosts."""
    return [s for hs in steps if (s := _sentence(hs))]

