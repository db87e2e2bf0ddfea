"""The changes a stored run measured, as :class:`~vmbench.advice.model.Recommendation` for one
goal and job, read from the report's own rows and deltas (never figures of its own):

* :func:`from_gaps`: each cell against the baseline (the gap table's ``vs_baseline``:
  one-factor, factorial, cells);
* :func:`from_journey`: each step against the step before (``vs_previous``);
* :func:`from_layers`: a cell's layers against the baseline cell's same layer, stacks of one
  cell with the same layers against each other, and each layer against the one below
  (``vs_below``);
* :func:`from_cpu`: the QEMU process's µs of host CPU per I/O against the baseline
  (:mod:`vmbench.report.cpurows`);
* :func:`from_host_only`: ZFS storage variants measured on the host (:mod:`vmbench.report.hostonly`);
* :mod:`vmbench.advice.loadadvice`: the many-VM runs.

Pure.  The deltas against another reference than the report's (a layer against the
baseline's, a stack against another) use the report's :func:`~vmbench.report.rows.judge_change`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

from ..fio.job import Metric
from ..report import cpurows
from ..report.cpurows import CpuRow
from ..report.facts import suspect_flags
from ..report.hostonly import host_only_rows
from ..report.load import RunData
from ..report.rows import CPU_IDLE_MIN, SATURATED, Row, aggregate, group, journey_rows, judge_change, raw_group
from ..report.runrows import RunRows
from ..report.stats import Delta, change_words
from ..results.plan import StoredPlan
from ..results.records import CellRecord, CryptoRecord, Measurement
from ..scenario.axes import STORAGE_AXES, VM_SETTING_KEYS
from .model import Change, Goal, GoalMetric, Recommendation, Risk
from .risks import allowed, change_risks


@dataclass
class Ctx:
    """One run as the readers need it: its valid cells by name, the risks allowed, the stacks'
    dm-crypt flags, the host's memory (cache notes) and the CPU rows (made once, when asked)."""

    data: RunData
    allow: frozenset[Risk]
    flags: Mapping[str, tuple[str, ...]]
    cells: list[CellRecord] = field(default_factory=list)
    _cpu: list[CpuRow] | None = None
    _made: dict[tuple, list[Row]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.cells:
            self.cells = list(self.data.valid_cells)

    @functools.cached_property
    def by_name(self) -> dict[str, CellRecord]:
        return {c.name: c for c in self.cells}

    @functools.cached_property
    def cpu_by_group(self) -> dict[tuple, CpuRow]:
        """The CPU rows by (cell, stack, layer, job)."""
        return {(str(r.cell), r.stack, r.layer, r.job): r for r in self.cpu_rows()}

    @functools.cached_property
    def sampled_qemu(self) -> bool:
        """Some measurement carries its QEMU process's CPU row (asked once, not for each row)."""
        return any(m.qemu_cpu for m in self.data.measured)

    @property
    def measurements(self) -> list[Measurement]:
        return list(self.data.measurements)

    @property
    def host_memory(self) -> int | None:
        """The host's RAM a read may be served from (:attr:`~vmbench.results.environment.Environment.host_memory_bytes`)."""
        return self.data.environment.host_memory_bytes

    def cpu_rows(self) -> list[CpuRow]:
        if self._cpu is None:
            self._cpu = cpurows.cpu_rows(self.measurements, self.cells, self.data.jobs)
        return self._cpu

    # the report's rows of one job, judged by one metric (None: the job's own): made once per
    # run, whichever reader asks (the report's tables included, for the run's valid cells)
    def gap_rows(self, job: str, metric: Metric | None = None) -> list[Row]:
        return self.rows.gaps([job], {job: metric} if metric is not None else None)

    def layer_rows(self, job: str, metric: Metric | None = None) -> list[Row]:
        return self.rows.layers([job], {job: metric} if metric is not None else None)

    @functools.cached_property
    def rows(self) -> RunRows:
        """The run's rows (:attr:`RunData.rows`), or, for other cells than the run's valid ones, their own."""
        if self.cells == self.data.valid_cells:
            return self.data.rows
        return RunRows(self.measurements, self.cells, self.host_memory)

    def journey_rows(self, job: str, metric: Metric | None = None) -> list[Row]:
        return self._rows("journey", job, metric, lambda jobs, metrics: journey_rows(self.measurements, self.cells, jobs, metrics))

    def _rows(self, table: str, job: str, metric: Metric | None,
              make: Callable[[list[str], dict[str, Metric] | None], list[Row]]) -> list[Row]:
        key = (table, job, metric)
        if key not in self._made:
            self._made[key] = make([job], {job: metric} if metric is not None else None)
        return self._made[key]


# ---- what changed between two cells ---------------------------------------------------------


def cell_changes(cell: CellRecord, ref: CellRecord, *, stacks: bool = False) -> list[Change]:
    """The stored settings that differ between ``ref`` and ``cell`` (axis order, then any other
    key), and, with ``stacks``, their stacks."""
    a, b = ref.settings, cell.settings
    order = VM_SETTING_KEYS + STORAGE_AXES
    in_a, in_b = a.keys(), b.keys()  # their stored keys, looked up directly: every pair of cells comes here
    keys = [k for k in order if k in in_a or k in in_b] + sorted((set(a) | set(b)) - set(order))
    out = [Change(k, a.value(k), b.value(k)) for k in keys if a.value(k) != b.value(k)]
    if stacks and ref.stacks != cell.stacks:
        out.append(Change("stacks", ", ".join(ref.stacks) or None, ", ".join(cell.stacks) or None))
    return out


# ---- one recommendation ------------------------------------------------------------------------


def unit(metric: GoalMetric) -> str:
    if metric is GoalMetric.CPU_PER_IO:
        return "µs/IO (QEMU)"
    if metric is GoalMetric.IOPS:
        return "IOPS"
    if metric is GoalMetric.MBPS:
        return "MB/s"
    return f"ms ({metric.value})"


def improving(metric: GoalMetric, d: Delta) -> bool:
    """The verdict is significant and in the goal's direction."""
    if metric is GoalMetric.CPU_PER_IO:
        return d.verdict == cpurows.CHEAPER
    fio = metric.fio_metric
    assert fio is not None
    up, down = change_words(fio)
    return d.verdict == (up if metric.higher_is_better else down)


def effect(r: Recommendation) -> float:
    """The improvement as a share of the reference (above 0: better for the goal)."""
    v = r.delta.value
    if v is None:
        return float("-inf")
    if r.goal.metric is GoalMetric.CPU_PER_IO:
        return -v / r.reference_value if r.reference_value else -v
    return v if r.goal.metric.higher_is_better else -v


def make(ctx: Ctx, goal: Goal, job: str, cell: str, reference: str, changes: Sequence[Change], value: float | None,
         reference_value: float | None, delta: Delta, repeats: int, evidence: Sequence[str] = (),
         settings: Mapping[str, object] | None = None, row: Row | None = None) -> Recommendation:
    """One measured change; ``row``, the changed cell's row, makes it suspect when its note flags
    the figure (a cache served it, a CPU was the limit: :func:`~vmbench.report.facts.suspect_flags`)."""
    risks = change_risks(changes, ctx.flags)
    flags = suspect_flags(row.note) if row is not None else []
    return Recommendation(goal=goal, job=job, cell=cell, reference=reference, changes=tuple(changes), value=value,
                          reference_value=reference_value, delta=delta, repeats=repeats,
                          improves=improving(goal.metric, delta), evidence=tuple(dict.fromkeys(e for e in evidence if e)),
                          risks=risks, allowed=allowed(risks, ctx.allow),
                          settings=dict(settings if settings is not None else ctx.by_name[cell].settings if cell in ctx.by_name else {}),
                          unit=unit(goal.metric), suspect="; ".join(flags) or None)


# ---- the telemetry that explains a change --------------------------------------------------------


def _pieces(note: str) -> list[str]:
    return [p.strip() for p in (note or "").split(";") if p.strip() and not p.strip().startswith("raw disk shared")]


def row_evidence(ctx: Ctx, this: Row, ref: Row | None, changes: Sequence[Change], ref_name: str = "baseline") -> list[str]:
    """What the rows' telemetry and notes say about the change: write amplification on the
    pool, the host's CPU, cache and saturation notes, the crypto ceiling for a CPU change, and
    the QEMU process's CPU per I/O where it was sampled."""
    out: list[str] = []
    f, g = this.figures, ref.figures if ref is not None else None
    axes = {c.axis for c in changes}
    if f.write_ampl is not None or (g is not None and g.write_ampl is not None):
        what = next((a for a in ("volblocksize", "recordsize", "compression") if a in axes), None)
        out.append(f"pool write amplification {_x(g.write_ampl if g else None)} -> {_x(f.write_ampl)} "
                   f"(pool MB/s written / fio's MB/s)" + (f": the {what} change" if what else ""))
    if f.host_cpu_busy is not None and g is not None and g.host_cpu_busy is not None:
        out.append(f"host CPU busy {g.host_cpu_busy:.0f}% -> {f.host_cpu_busy:.0f}%")
    if f.cpu_busy is not None and g is not None and g.cpu_busy is not None:
        out.append(f"{this.side} CPU busy {g.cpu_busy:.0f}% -> {f.cpu_busy:.0f}%")
    if g is not None and g.saturated:
        out.append(f"{ref_name}: {g.saturated}")
    out += [f"{this.cell}: {p}" for p in _pieces(this.note)]
    if ref is not None:
        out += [f"{ref_name} {ref.cell}: {p}" for p in _pieces(ref.note)]
    if axes & {"cpu", "aes"} and ref is not None:
        out += crypto_evidence(ctx, str(ref.cell), str(this.cell))
    if ref is not None and this.side == "guest" and ref.cell != this.cell:
        out += cpu_evidence(ctx, this, ref)
    return out


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def luks_ciphers(plan: StoredPlan) -> list[tuple[str, int]]:
    """(cipher, key bits) of the plan's LUKS stacks."""
    return list(dict.fromkeys((st.luks.cipher, st.luks.key_bits) for st in plan.stacks if st.luks is not None))


def ceiling(crypto: Sequence[CryptoRecord], cpu: object, cipher: str, key_bits: int) -> CryptoRecord | None:
    """The guest's cryptsetup benchmark row for ``cpu`` (a cell's cpu label) and the cipher."""
    return next((c for c in crypto if c.side == "guest" and c.cpu == cpu and c.cipher == cipher and c.key_bits == key_bits), None)


def ceiling_text(row: CryptoRecord | None) -> str:
    if row is None:
        return "not measured"
    if row.encrypt_mib_s is None:
        return f"n/a ({row.error or 'failed'})"
    aes = "" if row.aes_flag is None else (", aes flag" if row.aes_flag else ", no aes flag")
    return f"{row.encrypt_mib_s:,.0f}/{row.decrypt_mib_s:,.0f} MiB/s encrypt/decrypt{aes}"


def _cpu(ctx: Ctx, cell: str) -> str | None:
    """A cell's CPU label (None: not a cell of the run, or no CPU stored)."""
    found = ctx.by_name.get(cell)
    return found.settings.cpu if found is not None else None


def crypto_evidence(ctx: Ctx, ref_cell: str, cell: str) -> list[str]:
    """The crypto ceiling (cryptsetup benchmark, one CPU) of the two cells' CPU models."""
    if not ctx.data.crypto:
        return []
    a, b = _cpu(ctx, ref_cell), _cpu(ctx, cell)
    out = []
    for cipher, bits in luks_ciphers(ctx.data.plan):
        ra, rb = ceiling(ctx.data.crypto, a, cipher, bits), ceiling(ctx.data.crypto, b, cipher, bits)
        if ra is None and rb is None:
            continue
        out.append(f"crypto ceiling ({cipher} {bits} bits, one CPU): {a} {ceiling_text(ra)} -> {b} {ceiling_text(rb)}")
    return out


def cpu_evidence(ctx: Ctx, this: Row, ref: Row) -> list[str]:
    """The QEMU process's CPU per I/O of the two groups, where it was sampled."""
    if not ctx.sampled_qemu:
        return []
    rows = ctx.cpu_by_group
    a, b = rows.get((str(ref.cell), ref.stack, ref.layer, ref.job)), rows.get((str(this.cell), this.stack, this.layer, this.job))
    if a is None or b is None or a.value("qemu") is None or b.value("qemu") is None:
        return []
    d = b.deltas.get("qemu") if b.baseline == a.cell else None
    tail = f" ({cpurows.describe_delta('qemu', d)})" if d is not None else ""
    return [f"QEMU CPU per I/O {a.value('qemu'):.1f} -> {b.value('qemu'):.1f} µs/IO{tail}"]


# ---- the readers --------------------------------------------------------------------------------


def fio_metric(goal: Goal) -> Metric:
    m = goal.metric.fio_metric
    assert m is not None
    return m


def from_gaps(ctx: Ctx, goal: Goal, job: str) -> list[Recommendation]:
    """Each cell's raw disk against the baseline cell's (the gap table's vs baseline)."""
    metric = fio_metric(goal)
    rows = [r for r in ctx.gap_rows(job, metric) if r.side == "guest"]
    base_name = ctx.cells[0].name if ctx.cells else None
    base = next((r for r in rows if r.cell == base_name), None)
    out = []
    for r in rows:
        d = r.deltas.get("vs_baseline")
        if base is None or r is base or d is None:
            continue
        changes = cell_changes(ctx.by_name[str(r.cell)], ctx.by_name[str(base.cell)])
        if not changes:  # the same VM (a shared raw disk): nothing changed
            continue
        out.append(make(ctx, goal, job, str(r.cell), str(base.cell), changes, r.figures.value_of(metric),
                        base.figures.value_of(metric), d, min(r.figures.repeats, base.figures.repeats),
                        row_evidence(ctx, r, base, changes), row=r))
    return out


def from_journey(ctx: Ctx, goal: Goal, job: str) -> list[Recommendation]:
    """Each journey step against the step before (the journey table's vs previous step)."""
    metric = fio_metric(goal)
    rows = ctx.journey_rows(job, metric)
    out = []
    for prev, r in zip(rows, rows[1:]):
        d = r.deltas.get("vs_previous")
        if d is None:
            continue
        changes = cell_changes(ctx.by_name[str(r.cell)], ctx.by_name[str(prev.cell)], stacks=True)
        if prev.layer != r.layer and not any(c.axis == "stacks" for c in changes):
            changes.append(Change("layer", prev.layer, r.layer))
        out.append(make(ctx, goal, job, str(r.cell), str(prev.cell), changes, r.figures.value_of(metric),
                        prev.figures.value_of(metric), d, min(r.figures.repeats, prev.figures.repeats),
                        row_evidence(ctx, r, prev, changes, "step before"), row=r))
    return out


def from_layers(ctx: Ctx, goal: Goal, job: str) -> list[Recommendation]:
    """Layers of stacks: a cell's layer against the baseline cell's same layer (what a VM
    setting does there: a CPU with AES-NI under LUKS), a stack against the cell's first stack
    with the same layers (perf flags), and each layer against the one below (its cost)."""
    metric = fio_metric(goal)
    rows = [r for r in ctx.layer_rows(job, metric) if r.side == "guest"]
    base_name = ctx.cells[0].name if ctx.cells else None
    by_key = {(r.cell, r.stack, r.layer): r for r in rows}
    out: list[Recommendation] = []
    firsts: dict[tuple, Row] = {}
    for i, r in enumerate(rows):
        if r.layer == "raw":
            continue
        label = f"{r.stack}: {r.layer}"
        below = rows[i - 1] if i > 0 and rows[i - 1].cell == r.cell and rows[i - 1].stack == r.stack else None
        d = r.deltas.get("vs_below")
        if below is not None and d is not None and d.value is not None:
            changes = [Change("layer", below.layer, r.layer)]
            out.append(make(ctx, goal, job, f"{r.cell} ({label})", f"{r.cell} ({r.stack}: {below.layer})", changes,
                            r.figures.value_of(metric),
                            below.figures.value_of(metric), d, min(r.figures.repeats, below.figures.repeats),
                            [f"stack {r.stack}: what the {r.layer.split('+')[-1]} layer costs or gains over {below.layer}"]
                            + _ceiling_line(ctx, r), ctx.by_name[str(r.cell)].settings, row=r))
        base = by_key.get((base_name, r.stack, r.layer))
        if base is not None and r.cell != base_name and base.figures.job_hash == r.figures.job_hash:
            changes = cell_changes(ctx.by_name[str(r.cell)], ctx.by_name[str(base_name)])
            if changes:
                out.append(make(ctx, goal, job, f"{r.cell} ({label})", f"{base_name} ({label})", changes,
                                r.figures.value_of(metric), base.figures.value_of(metric), judge_change(r.figures, base.figures, metric),
                                min(r.figures.repeats, base.figures.repeats),
                                row_evidence(ctx, r, base, changes) + _ceiling_line(ctx, r), ctx.by_name[str(r.cell)].settings,
                                row=r))
        first = firsts.setdefault((r.cell, r.layer), r)
        if first is not r and first.figures.job_hash == r.figures.job_hash:
            changes = [Change("stack", first.stack, r.stack)]
            fa, fb = ctx.flags.get(str(first.stack), ()), ctx.flags.get(str(r.stack), ())
            if fa != fb:
                changes.append(Change("perf_flags", ",".join(fa) or None, ",".join(fb) or None))
            out.append(make(ctx, goal, job, f"{r.cell} ({label})", f"{r.cell} ({first.stack}: {first.layer})", changes,
                            r.figures.value_of(metric), first.figures.value_of(metric), judge_change(r.figures, first.figures, metric),
                            min(r.figures.repeats, first.figures.repeats), [f"{p}" for p in _pieces(r.note)], row=r))
    return out


def _ceiling_line(ctx: Ctx, r: Row) -> list[str]:
    if not r.layer.split("+")[-1].startswith("luks") or not ctx.data.crypto:
        return []
    luks = ctx.data.plan.luks_of.get(str(r.stack))
    if luks is None:
        return []
    cpu = _cpu(ctx, str(r.cell))
    row = ceiling(ctx.data.crypto, cpu, luks.cipher, luks.key_bits)
    return [f"crypto ceiling ({luks.cipher} {luks.key_bits} bits, {cpu}, one CPU): {ceiling_text(row)}"] if row else []


def from_cpu(ctx: Ctx, goal: Goal, job: str) -> list[Recommendation]:
    """The QEMU process's µs of host CPU per I/O of each cell against the baseline's."""
    rows = [r for r in ctx.cpu_rows() if r.job == job]
    base = {(r.stack, r.layer): r for r in rows if r.is_baseline}
    out = []
    for r in rows:
        d = r.deltas.get("qemu")
        ref = base.get((r.stack, r.layer))
        if r.is_baseline or d is None or ref is None:
            continue
        changes = cell_changes(ctx.by_name[r.cell], ctx.by_name[ref.cell])
        if not changes:
            continue
        where = "" if r.layer == "raw" else f" ({r.stack}: {r.layer})"
        evidence = [cpurows.describe_delta(k, r.deltas[k]) for k in cpurows.CLASSES + ("host_rest", "switches")
                    if k in r.deltas and r.deltas[k].verdict in (cpurows.CHEAPER, cpurows.COSTLIER)]
        evidence += [f"{r.cell}: {n}" for n in r.notes]
        if r.tcg:
            evidence.append("vCPUs under TCG: the vCPU threads' time is emulation, not the I/O path alone")
        busy = busy_host(ctx, job, r.cell, ref.cell)
        rec = make(ctx, goal, job, r.cell + where, ref.cell + where, changes, r.value("qemu"), ref.value("qemu"), d,
                   min(r.sampled, ref.sampled), evidence + busy)
        out.append(replace(rec, suspect="the host's CPUs were nearly all busy") if busy else rec)
    return out


def busy_host(ctx: Ctx, job: str, cell: str, ref: str) -> list[str]:
    """:func:`busy_note` for two cells' raw-disk runs of ``job`` (the host's CPU sampled beside the guest)."""
    groups = group(ctx.measurements)
    busy = {}
    for name in (ref, cell):
        rows = groups.get(raw_group(name, job))
        busy[name] = aggregate(rows).host_cpu_busy if rows else None
    return busy_note(busy)


def busy_note(busy: Mapping[str, float | None]) -> list[str]:
    """A warning when the host's CPUs were nearly all busy (% busy per cell) while a cell ran:
    CPU per I/O measured on a CPU-bound host is suspect."""
    if not any(b is not None and b > 100 - CPU_IDLE_MIN for b in busy.values()):
        return []
    shown = ", ".join(f"{n} {b:.0f}%" for n, b in busy.items() if b is not None)
    return [f"the host's CPUs were nearly all busy while it ran ({shown} busy): QEMU's threads competed for CPU, with "
            "each other or with other work, so its CPU per I/O is suspect; measure again on a host with CPU to spare"]


def from_host_only(ctx: Ctx, goal: Goal, job: str) -> list[Recommendation]:
    """ZFS storage variants measured on the host against the first (the host-only table's vs
    baseline; on another metric than IOPS, the same comparison on that metric)."""
    metric = fio_metric(goal)
    rows = host_only_rows(ctx.measurements, ctx.cells, [job])
    if not rows:
        return []
    base = rows[0]
    out = []
    for r in rows[1:]:
        d = r.deltas.get("vs_baseline")
        if d is None:
            continue
        if metric is not Metric.IOPS:
            d = judge_change(r.figures, base.figures, metric)
        changes = cell_changes(ctx.by_name[str(r.cell)], ctx.by_name[str(base.cell)])
        out.append(make(ctx, goal, job, str(r.cell), str(base.cell), changes, r.figures.value_of(metric),
                        base.figures.value_of(metric), d, min(r.figures.repeats, base.figures.repeats),
                        row_evidence(ctx, r, base, changes), row=r))
    return out


def not_compared(d: Delta) -> bool:
    return d.why == SATURATED
