"""The answer first: a few sentences that open every report, read off the report's own tables.

:func:`summary_lines` is pure: the header and the tables a report prints (with the advice
section) in, at most :data:`MAX_LINES` sentences out.  Every figure in them is the text of a
cell of a table below (:meth:`Column.text` of the same record), never arithmetic of its own, so
the summary and the tables cannot disagree:

* how much slower the guest is: the host-vs-guest gap per job on the baseline's raw disk, with
  its interval and verdict (one VM), or the scaling knee (many VMs), or what each phase did to
  the victim (noisy neighbour), or the best storage variant (host only);
* what to change next: the advice section's first line (the recommendation, its effect and the
  command that applies it; or why there is none and the shipped scenario to run next), or,
  without an advice section, the change that moved a job most among those no note flags;
* the costliest layer;
* the targets met or missed;
* the flags that change how to read it (TCG, figures from a cache, CPU-bound).

A figure a note flags (served from a cache, a CPU at its limit:
:func:`~vmbench.report.facts.suspect_flags`) is never a headline.
"""

from __future__ import annotations

from typing import Mapping, Sequence

from .facts import suspect_flags
from .stats import FEWER, GAP, GUEST_FASTER, MIN_REPEATS, NOISE
from .tables import NO_VERDICT, Table

MAX_LINES = 6


FEWER_SENTENCE = f"No verdicts yet: {FEWER}; `repeats: {MIN_REPEATS}` in the scenario would give them."
#: the advice-next row the summary reads what to change next from (vmbench.advice.table, above this package)
CHANGE_NEXT = "change next"
#: the gap's verdicts (vmbench.report.stats) as the summary says them
GAP_WORDS = {GAP: "the guest slower", GUEST_FASTER: "the guest faster", NOISE: "within noise"}


def summary_lines(header: Mapping[str, str], tables: Sequence[Table]) -> list[str]:
    """The summary of a report whose header and tables are given (see the module doc)."""
    by = {t.name: t for t in tables}
    answer = [*_gaps(by.get("gaps")), *_scaling(by.get("load-scaling")), *_neighbours(by.get("load-neighbours")),
              *_host_only(by.get("host-only")), *_tune(by.get("tune-journey"), by.get("tune-settings"))][:3]
    following = _advice(by.get("advice-next")) or _biggest_change(by.get("gaps"))
    rest = [*_costliest_layer(by.get("layers")), *_targets(by.get("targets"))]
    if any(NO_VERDICT in line for line in answer + following + rest):
        answer, following, rest = ([line.replace(NO_VERDICT, "") for line in part] for part in (answer, following, rest))
        if not any(FEWER in line for line in following):
            following.append(FEWER_SENTENCE)
    flags = _flags(header, tables)
    return (answer + following + rest)[:MAX_LINES - len(flags)] + flags


def _text(t: Table, key: str, record: Mapping) -> str:
    """What the table shows in column ``key`` of ``record``."""
    col = next(c for c in t.columns if c.key == key)
    text = getattr(col, "text", None)  # an older table model's columns have only fmt
    return text(dict(record)) if text is not None else str(col.fmt(record.get(key)))


def _has(t: Table, key: str) -> bool:
    return any(c.key == key for c in t.columns)


def _gaps(t: Table | None) -> list[str]:
    """How much slower the guest is than the host, per job, on the baseline's raw disk."""
    if t is None or not _has(t, "gap"):
        return []
    guests = [r for r in t.records if r.get("side") == "guest" and r.get("layer") == "raw"]
    if not guests:
        return []
    baseline = guests[0].get("cell")
    parts = [f"{r['job']} {_gap_text(t, r)}" for r in guests if r.get("cell") == baseline]
    where = f" of cell {baseline}" if baseline and len({r.get('cell') for r in guests}) > 1 else ""
    header = next(c.header for c in t.columns if c.key == "gap")
    return [f"How much slower the guest is, {header} on the raw disk{where}: " + "; ".join(parts) + "."]


def _gap_text(t: Table, r: Mapping) -> str:
    """The gap as its table prints it, the verdict in words: "6.53x [6.05, 8.47] (the guest slower)"."""
    text, verdict = _text(t, "gap", r), r.get("gap_verdict")
    if verdict in GAP_WORDS and text.endswith(" " + verdict):
        return f"{text.removesuffix(' ' + verdict)} ({GAP_WORDS[verdict]})"
    return text


def _unflagged(records: Sequence[Mapping]) -> list[Mapping]:
    return [r for r in records if not suspect_flags(r.get("note"))]


def _biggest_change(gaps: Table | None) -> list[str]:
    """The cell that changed a job most from the baseline, of those no note flags (said when the
    report has no advice section)."""
    if gaps is None or not _has(gaps, "vs_baseline"):
        return []
    moved = [r for r in _unflagged(gaps.records) if isinstance(r.get("vs_baseline"), (int, float))]
    if not moved:
        return []
    r = max(moved, key=lambda r: abs(r["vs_baseline"]))
    return [f"Biggest change from the baseline: {r['cell']}, {r['job']} {_text(gaps, 'vs_baseline', r)}."]


def _costliest_layer(layers: Table | None) -> list[str]:
    """The layer that cost a job most against the one below, of those no note flags."""
    if layers is None or not _has(layers, "vs_below"):
        return []
    costs = [r for r in _unflagged(layers.records)
             if isinstance(r.get("vs_below"), (int, float)) and r.get("layer") not in ("host", "raw")]
    if not costs:
        return []
    r = min(costs, key=lambda r: r["vs_below"])
    stack = f"stack {r['stack']}, " if r.get("stack") else ""
    return [f"Costliest layer: {r['layer']} ({stack}{r['job']}{', cell ' + r['cell'] if r.get('cell') else ''}): "
            f"{_text(layers, 'vs_below', r)} vs the layer below."]


def _scaling(t: Table | None) -> list[str]:
    if t is None or not t.records:
        return []
    out = []
    for job in dict.fromkeys(r["job"] for r in t.records):
        rows = [r for r in t.records if r["job"] == job and r.get("layer") == "raw"] or [r for r in t.records if r["job"] == job]
        knee = next((r for r in rows if r.get("knee")), None)
        last = rows[-1]
        if knee is not None:
            out.append(f"{job}: the knee is at {knee['vms']} VMs ({_text(t, 'iops', knee)} IOPS in all, "
                       f"p99 {_text(t, 'p99_ms', knee)} ms): past it more VMs add latency, not throughput.")
        else:
            out.append(f"{job}: no knee up to {last['vms']} VMs ({_text(t, 'iops', last)} IOPS in all, p99 {_text(t, 'p99_ms', last)} ms).")
    return out


def _neighbours(t: Table | None) -> list[str]:
    if t is None:
        return []
    out = []
    for r in t.records:
        if r.get("reference") or not r.get("sentence"):
            continue
        figures = (f" (victim p99 {_text(t, 'p99_median_ms', r)} ms, median of repeats, {_text(t, 'p99_change', r)} vs alone)"
                   if r.get("p99_median_ms") is not None else "")
        out.append(f"{r['phase']}: {r['sentence']}{figures}.")
    return out


def _host_only(t: Table | None) -> list[str]:
    if t is None or not t.records:
        return []
    out = []
    for job in dict.fromkeys(r["job"] for r in t.records):
        rows = [r for r in t.records if r["job"] == job and isinstance(r.get("iops"), (int, float))]
        if len(rows) > 1:
            best = max(rows, key=lambda r: r["iops"])
            change = f", {_text(t, 'vs_baseline', best)} vs the first" if best is not rows[0] else " (the first variant)"
            out.append(f"{job}: fastest storage variant {best['storage'] or best['cell']}: {_text(t, 'iops', best)} IOPS{change}.")
    return out


def _tune(journey: Table | None, settings: Table | None) -> list[str]:
    if journey is None or settings is None:
        return []
    changed = [f"{r['setting']} {_text(settings, 'start', r)} -> {_text(settings, 'final', r)}"
               for r in settings.records if r.get("changed")]
    kept = [f"round {r['round']} kept {r['kept']} ({_text(journey, 'effect', r)})" for r in journey.records
            if r.get("kept") and not str(r["kept"]).startswith(("nothing", "(unfinished"))]
    if not changed:
        return [f"The tune kept the start: nothing it tried in {len(journey.records)} round(s) improved the goal significantly."]
    return [f"The tune changed {', '.join(changed)}: " + "; ".join(kept) + "."]


def _targets(t: Table | None) -> list[str]:
    if t is None or not t.records:
        return []
    counts = {k: sum(1 for r in t.records if r.get("result") == k) for k in ("PASS", "FAIL", "NOT MEASURED")}
    failed = [f"{r['target']} ({r['job']})" for r in t.records if r.get("result") == "FAIL"]
    said = ", ".join(f"{n} {k}" for k, n in counts.items() if n)
    return [f"Targets: {said}" + (f"; missed: {'; '.join(failed[:2])}" + (" ..." if len(failed) > 2 else "") if failed else "") + "."]


def _advice(following: Table | None) -> list[str]:
    """What to change next: the advice section's first line (vmbench.advice.table.change_next)."""
    text = next((r["text"] for r in (following.records if following else []) if r.get("what") == CHANGE_NEXT), None)
    return [f"What to change next: {text}."] if text else []


def _flags(header: Mapping[str, str], tables: Sequence[Table]) -> list[str]:
    flags = []
    if "tcg" in str(header.get("accelerator", "")):
        flags.append("guests ran under TCG (no KVM): slow and noisy, not KVM figures")
    notes = " ".join(str(r.get("note") or "") for t in tables for r in t.records)
    if "cached?" in notes:
        flags.append("some figures may come from a cache (note column)")
    if "CPU-bound?" in notes:
        flags.append("some runs were CPU-bound (note column)")
    if header.get("warning"):
        flags.append(str(header["warning"]))
    return [("Read with care: " + "; ".join(flags) + ".")] if flags else []
