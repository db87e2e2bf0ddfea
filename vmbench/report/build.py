"""A stored run -> the report's header and tables."""

from __future__ import annotations

from ..results.db import ResultsDB, RunRow
from .tables import Table, cells_table, crypto_table, gap_table, layer_table, targets_table


def load_run(db: ResultsDB, ref: str | int | None) -> tuple[RunRow, list[dict], list[dict], list[dict], list[dict]]:
    run = db.resolve_run(ref)
    cells = db.rows("cells", run.id)
    names = {c["id"]: c["name"] for c in cells}
    measurements = db.rows("measurements", run.id)
    for m in measurements:
        m["cell"] = names.get(m["cell_id"])
    return run, cells, measurements, db.rows("crypto", run.id), db.rows("boots", run.id)


def build_report(db: ResultsDB, ref: str | int | None = "latest") -> tuple[dict, list[Table]]:
    run, cells, measurements, crypto, boots = load_run(db, ref)
    plan = run.plan
    jobs = [j["name"] for j in plan.get("jobs", [])]
    env = run.environment
    accels = sorted({b["accelerator"] for b in boots}) or [env.get("accelerator", "?")]
    header = {
        "run": f"{run.id} ({run.tag})",
        "scenario": f"{run.scenario_name} ({run.scenario_path})",
        "status": run.status + (f": {run.error}" if run.error else ""),
        "started": run.started_at,
        "finished": run.finished_at or "-",
        "accelerator": ", ".join(accels) + (f" ({env['accelerator_reason']})" if env.get("accelerator_reason") else ""),
        "host": f"{env.get('hostname', '?')}, kernel {env.get('host_kernel', '?')}, {env.get('host_cpu', '?')}",
        "versions": f"QEMU {env.get('qemu_version', '?')}, libvirt {env.get('libvirt_version', '?')}, fio {env.get('host_fio', '?')} (host) / {_guest_fio(boots)} (guest)",
        "boots": str(len(boots)),
    }
    valid_cells = [c for c in cells if c["valid"]]
    tables: list[Table] = [gap_table(measurements, valid_cells, jobs, int(plan.get("repeats", 1)), journey=plan.get("mode") == "journey")]
    lt = layer_table(measurements, valid_cells, jobs, crypto, plan.get("stacks", []))
    if lt:
        tables.append(lt)
    ct = crypto_table(crypto)
    if ct:
        tables.append(ct)
    tt = targets_table(measurements, _targets(run))
    if tt:
        tables.append(tt)
    if len(cells) > 1 or any(not c["valid"] for c in cells):
        tables.append(cells_table(cells))
    return header, tables


def _guest_fio(boots: list[dict]) -> str:
    versions = sorted({(b.get("guest") or {}).get("fio_version", "?") for b in boots})
    return ", ".join(versions) or "?"


def _targets(run: RunRow) -> list[dict]:
    return list(run.plan.get("targets", []))
