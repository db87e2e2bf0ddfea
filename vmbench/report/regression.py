"""Did a run regress?  What ``vmbench run --quiet`` tells a timer; pure.

A run regressed when it misses one of its scenario's targets (the report's targets table, or
a load step's target), or when ``vmbench history`` finds a step at this run that made a figure
worse (lower IOPS or MB/s, higher latency) beyond noise, against the earlier comparable runs
of the same scenario in the same database.
"""

from __future__ import annotations

from typing import Sequence

from .history import History
from .historyview import describe_step
from .tables import Table


def target_misses(tables: Sequence[Table]) -> list[str]:
    """Each target the report's tables say was missed (FAIL) or could not be judged (NOT MEASURED)."""
    out = []
    for t in tables:
        for r in t.records:
            if t.name == "targets" and r.get("result") in ("FAIL", "NOT MEASURED"):
                out.append(f"target {r.get('target')} for {r.get('job')} at {r.get('layer') or r.get('stack') or r.get('cell') or 'host'}: "
                           f"{r['result']}" + (f" ({r['why']})" if r.get("why") else ""))
            elif t.name.startswith("load-") and str(r.get("target") or "").startswith("FAIL"):
                out.append(f"target for {r.get('job') or r.get('victim_job')} at {r.get('step') or r.get('phase')}: {r['target']}")
    return out


def targets_met(tables: Sequence[Table]) -> int:
    return sum(1 for t in tables if t.name == "targets" for r in t.records if r.get("result") == "PASS")


def worse_steps(history: History, run_id: int) -> list[str]:
    """The steps ``history`` found at run ``run_id`` that made a figure worse, in words (each
    its series and step, then what changed there, on lines of their own)."""
    out = []
    for s, st in history.steps:
        d = st.delta
        if history.runs[st.after[0]].id != run_id or d.value is None:
            continue
        worse = d.value < 0 if s.metric.higher_is_better else d.value > 0
        if worse:
            lines = describe_step(history, s, st)
            out.append("\n".join([f"{s.title}: {lines[0]}", *(line.strip() for line in lines[1:])]))
    return out
