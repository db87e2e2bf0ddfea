"""The "CPU per I/O" table (issue 17): what each cell costs the host CPU per I/O, split by
where QEMU spends it, from the rows of :mod:`vmbench.report.cpurows` (pure: stored
measurements in, a :class:`~vmbench.report.tables.Table` out, or None when no measurement
carries a qemu-cpu row: older runs read as before).

Each record holds the median µs/IO of every figure (``<figure>_us``; switches per I/O), each
figure's per-repeat values (``<figure>_samples``), the QEMU total's difference from the
baseline under ``vs_baseline`` with ``vs_baseline_low``/``_high``/``_verdict``/``_why`` as the
other tables' deltas, and every figure's difference under ``deltas``.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..results.environment import Environment
from ..results.records import CellRecord, Measurement
from . import stats
from .cpurows import CLASSES, FIGURES, CpuRow, cpu_rows, describe_delta, has_qemu_cpu
from .facts import RepeatPolicy, admissibility
from .tables import Column, Table, as_policy, f_text, saturation_notes

#: the record key of each figure's median
KEYS = {k: "switches_per_io" if k == "switches" else f"{k}_us" for k in FIGURES}
HEADERS = {"vcpu": "vCPU", "iothread": "iothread", "main": "main loop", "worker": "workers", "other": "other+exited",
           "qemu": "QEMU total", "host_rest": "host rest", "zfs": "ZFS threads", "cgroup": "cgroup", "switches": "switches/IO",
           "guest": "guest", "guest_fio": "guest fio"}
#: the classes a fitted text report leaves out first (``--wide`` shows them)
DETAIL = ("worker", "other")

CLASS_NOTE = ("µs/IO = microseconds of CPU per I/O, the median over repeats, on the host unless named. "
              "vCPU = QEMU's vCPU threads (CPU n/KVM or /TCG: where the guest's code runs, or is emulated); "
              "iothread = QEMU's iothreads (IO <id>: the disk's queue when the VM has iothread on); "
              "main loop = QEMU's main thread (the disk's I/O when there is no iothread, timers, the monitor); "
              "workers = QEMU's thread-pool workers (aio=threads) and io_uring workers; "
              "other+exited = QEMU's other threads (call_rcu, the monitor's iothread, vhost...) and those that exited during "
              "the run; QEMU total = the whole QEMU process (every class); host rest = the host's busy CPU outside this QEMU "
              "process (/proc/stat: the host kernel's block layer, ZFS threads, anything else running); cgroup = the VM's "
              "cgroup (cpu.stat), where the host has one; switches/IO = voluntary and involuntary context switches of "
              "QEMU's threads per I/O; guest = the guest's own busy CPU (its /proc/stat, every vCPU) per I/O; guest fio and "
              "host fio = fio's own CPU (usr + sys) per I/O, in the guest and, as the reference, on the host for the same job.")
ACCOUNTED_NOTE = ("accounted = the share of the QEMU process's CPU that its live threads account for (the lowest over "
                  "repeats); the rest was spent by threads that exited during the run, counted under other+exited.")
ZFS_NOTE = ("ZFS threads = the part of host rest spent in the host's ZFS kernel threads (z_*, txg_*, zvol*, spa_*, arc_*, "
            "dbu_*, dbuf*, dp_*, l2arc*, zthr*: the pool's I/O pipeline, compression and checksums, transaction groups), the idle "
            "VM's share taken off; threads that exited during the run are not counted.")
TCG_NOTE = "under TCG the vCPU share is mostly instruction emulation; the split of the rest stays meaningful."


def f_us(v: Any) -> str:
    if v is None:
        return "-"
    if abs(v) < 0.005:
        v = 0.0  # a difference of clock ticks rounds to nothing: never "-0.00"
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.1f}" if abs(v) >= 1 else f"{v:.2f}"


def f_switches(v: Any) -> str:
    return "-" if v is None else f"{v:.2f}"


def f_share(v: Any) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def f_delta(record: dict) -> str:
    """The QEMU total's difference from the baseline: "-3.1 µs/IO [-4.0, -2.2], cheaper"."""
    v = record.get("vs_baseline")
    if v is None:
        return "-" if not record.get("vs_baseline_why") else f"- ({record['vs_baseline_why']})"
    text = f"{v:+.1f} µs/IO"
    if record.get("vs_baseline_verdict") is not None and record.get("vs_baseline_low") is not None:
        return f"{text} [{record['vs_baseline_low']:+.1f}, {record['vs_baseline_high']:+.1f}], {record['vs_baseline_verdict']}"
    why = record.get("vs_baseline_why")
    return f"{text} (no verdict: {why})" if why else text


def _layer(row: CpuRow) -> str:
    return row.layer if row.stack is None else f"{row.stack}: {row.layer}"


def record(row: CpuRow) -> dict:
    """One table record of a row."""
    rec: dict[str, Any] = {"job": f"{row.job} (sync)" if row.sync else row.job, "cell": row.cell, "stack": row.stack or "",
                           "layer": row.layer, "where": _layer(row), "accel": row.accel, "repeats": row.sampled,
                           "fixed_rate": row.fixed_rate}
    for k in FIGURES:
        rec[KEYS[k]] = row.value(k)
        rec[f"{k}_samples"] = list(row.figures[k].samples)
    rec["host_fio_us"] = row.host_fio.median if row.host_fio else None
    rec["host_fio_samples"] = list(row.host_fio.samples) if row.host_fio else []
    rec["cycles_per_io"] = row.perf_cycles.median
    rec["accounted_share"] = row.accounted_share
    rec["idle_qemu_us"], rec["idle_rest_us"] = row.idle_qemu.median, row.idle_rest.median
    rec["ios"] = row.ios.median
    rec["saturated"] = row.saturated
    rec["baseline"] = row.baseline
    rec["is_baseline"] = row.is_baseline
    q = row.deltas.get("qemu")
    rec.update({"vs_baseline": q.value if q else None, "vs_baseline_low": q.low if q else None,
                "vs_baseline_high": q.high if q else None, "vs_baseline_verdict": q.verdict if q else None,
                "vs_baseline_why": q.why if q else None})
    rec["deltas"] = {k: {"value": d.value, "low": d.low, "high": d.high, "verdict": d.verdict, "why": d.why}
                     for k, d in row.deltas.items()}
    rec["changes"] = "; ".join(describe_delta(k, d) for k, d in row.deltas.items()
                               if k != "qemu" and d.verdict is not None and d.verdict != stats.NOISE)
    rec["note"] = "; ".join(row.notes)
    return rec


def cpu_table(measurements: Sequence[Measurement], cells: Sequence[CellRecord], jobs: Sequence[str], *,
              repeats: int | RepeatPolicy | None = None, env: Environment | None = None) -> Table | None:
    """The "CPU per I/O" table of a single-VM run's guest measurements that carry a qemu-cpu row
    (``cells``: the valid ones, the first the baseline); None when none does."""
    if not has_qemu_cpu(measurements):
        return None
    rows = cpu_rows(measurements, cells, jobs)
    if not rows:
        return None
    records = [record(r) for r in rows]
    multi_cell = len({r.cell for r in rows}) > 1
    cols = [Column("job", "job"), Column("cell", "cell")]
    if any(r.stack for r in rows):
        cols.append(Column("stack", "stack", f_text))
    cols += [Column("layer", "layer"), Column("accel", "accel")]
    cols += [Column(KEYS[k], f"{HEADERS[k]} µs/IO", f_us, detail=k in DETAIL, keep=k == "qemu") for k in CLASSES + ("qemu",)]
    if multi_cell:
        cols.append(Column("vs_baseline", "QEMU vs baseline", row_fmt=f_delta, keep=True))
    cols.append(Column(KEYS["host_rest"], "host rest µs/IO", f_us, detail=True))
    zfs = any(r.get("zfs_us") is not None for r in records)
    if zfs:
        cols.append(Column(KEYS["zfs"], "ZFS threads µs/IO", f_us, detail=True))
    if any(r.get("cgroup_us") is not None for r in records):
        cols.append(Column(KEYS["cgroup"], "cgroup µs/IO", f_us, detail=True))
    cols += [Column(KEYS["switches"], "switches/IO", f_switches, detail=True), Column(KEYS["guest"], "guest µs/IO", f_us),
             Column(KEYS["guest_fio"], "guest fio µs/IO", f_us, detail=True), Column("host_fio_us", "host fio µs/IO", f_us)]
    if any(r.get("cycles_per_io") is not None for r in records):
        cols.append(Column("cycles_per_io", "QEMU cycles/IO", lambda v: "-" if v is None else f"{v:,.0f}", detail=True))
    cols += [Column("accounted_share", "accounted", f_share, detail=True), Column("repeats", "repeats", detail=True)]
    if multi_cell and any(r["changes"] for r in records):
        cols.append(Column("changes", "by figure vs baseline", f_text, detail=True))
    if any(r["note"] for r in records):
        cols.append(Column("note", "note", f_text))
    notes = [CLASS_NOTE, idle_note(rows), accel_note(rows)]
    if any(r.tcg for r in rows):
        notes.append(TCG_NOTE[0].upper() + TCG_NOTE[1:])
    notes += rate_notes(rows)
    if zfs:
        notes.append(ZFS_NOTE)
    notes.append(perf_note(rows))
    notes.append(ACCOUNTED_NOTE)
    if multi_cell:
        notes += delta_notes(rows, cells)
    notes += saturation_notes(records)
    if any(r.sync for r in rows):
        notes.append("(sync) jobs issue synchronous writes: compare them only with each other.")
    policy = as_policy(repeats)
    names = {r.cell for r in rows}
    used = [m for m in measurements if (m.side == "host" or m.cell in names) and not m.load_step]
    facts, missing = admissibility(used, [c for c in cells if c.name in names], env, policy)
    return Table("cpu-per-io", "CPU per I/O", cols, records, notes, facts, missing)


def _span(values: Sequence[float], fmt: Any = f_us) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}..{fmt(hi)}"


def idle_note(rows: Sequence[CpuRow]) -> str:
    """What was subtracted for the idle VM, and for how long it was measured."""
    secs = [s for r in rows for s in r.idle_s]
    if not secs:
        return ("No idle measurement of the VM was stored: nothing was subtracted, and the figures include what the "
                "idle VM costs anyway.")
    qemu = [v for r in rows if (v := r.idle_qemu.median) is not None]
    rest = [v for r in rows if (v := r.idle_rest.median) is not None]
    some = "" if all(len(r.idle_s) == r.sampled for r in rows) else " (in the repeats where it was measured)"
    return (f"The idle VM's CPU, measured before the jobs for {_span(secs, lambda v: f'{v:.0f}')} s, was subtracted from "
            f"every host figure (never below 0){some}: "
            f"{_span(qemu) if qemu else '-'} µs/IO of the QEMU process and {_span(rest) if rest else '-'} µs/IO of the "
            "rest of the host (the medians of the rows); the guest and fio figures are as measured.")


def accel_note(rows: Sequence[CpuRow]) -> str:
    accels = sorted({r.accel for r in rows})
    named = all(r.named for r in rows)
    return (f"Accelerator: {', '.join(accels)}" + (" (from the vCPU threads' names)." if named else
            "; some repeats' QEMU threads were unnamed (no debug-threads), so their split by class is not known."))


def perf_note(rows: Sequence[CpuRow]) -> str:
    """What QEMU cycles/IO is, or why perf counted no cycles (as each run stored it)."""
    whys = list(dict.fromkeys(w for r in rows for w in r.perf_why))
    if any(r.perf_cycles.samples for r in rows):
        return ("QEMU cycles/IO = perf stat cycles of the QEMU process over the job's ramp + runtime, the idle VM's "
                "cycles taken off, per I/O" + (f"; where it is missing: {'; '.join(whys)}." if whys else "."))
    return "QEMU cycles/IO: not measured" + (f": {'; '.join(whys)}." if whys else " (no perf count stored in this run).")


def rate_notes(rows: Sequence[CpuRow]) -> list[str]:
    """The I/O count each figure is divided by, and whether the cells ran at one rate."""
    fixed = {r.job: r.fixed_rate for r in rows if r.fixed_rate}
    free = list(dict.fromkeys(r.job for r in rows if not r.fixed_rate))
    notes = []
    if fixed:
        notes.append("I/Os = measured IOPS × (ramp + runtime): the load is the job's fixed rate ("
                     + ", ".join(f"{j} at {rate}" for j, rate in fixed.items()) + "), the same in every cell.")
    if free:
        notes.append(f"{', '.join(free)} {'is' if len(free) == 1 else 'are'} not fixed-rate: I/Os = measured IOPS × "
                     "(ramp + runtime), and the figures are per I/O at whatever rate each cell reached; they are not "
                     "comparable across cells unless the rate was fixed.")
    return notes


def delta_notes(rows: Sequence[CpuRow], cells: Sequence[CellRecord]) -> list[str]:
    notes = [f"QEMU vs baseline = the QEMU total's µs/IO minus the baseline's (the first cell, {cells[0].name}) for the "
             "same job and layer: lower is cheaper. by figure vs baseline = the other figures whose difference is not "
             "within noise."]
    judged = [d for r in rows for d in r.deltas.values()]
    if any(d.low is not None for d in judged):
        notes.append(f"[low, high] = 95% bootstrap interval of the difference of medians ({stats.METHOD} method, "
                     f"{stats.RESAMPLES:,} resamples of the repeats, fixed seed); 'within noise' when it includes 0; "
                     f"{stats.MIN_REPEATS} or more repeats on both sides are needed for a verdict.")
    sampled: dict[tuple, int] = {(r.cell, r.stack, r.layer, r.job): r.sampled for r in rows}
    few = [min(r.sampled, sampled.get((r.baseline, r.stack, r.layer, r.job), r.sampled))
           for r in rows if any(d.why == stats.FEWER for d in r.deltas.values())]
    if few:
        notes.append(f"Differences carry no verdict where a side has {stats.FEWER} with QEMU sampled (here as few as "
                     f"{min(few)}): run with repeats: 3 or more.")
    return notes

