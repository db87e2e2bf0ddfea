"""A stored run -> the report's header and tables."""

from __future__ import annotations

import logging

from .. import telemetry
from ..results.db import ResultsDB, RunRow
from .facts import RepeatPolicy
from .tables import Table, cells_table, crypto_table, gap_table, journey_table, layer_table, targets_table


def load_run(db: ResultsDB, ref: str | int | None) -> tuple[RunRow, list[dict], list[dict], list[dict], list[dict]]:
    run = db.resolve_run(ref)
    cells = sorted(db.rows("cells", run.id), key=lambda c: c["seq"])  # scenario order (journey steps), not boot order
    names = {c["id"]: c["name"] for c in cells}
    measurements = db.rows("measurements", run.id)
    for m in measurements:
        m["cell"] = names.get(m["cell_id"])
    attach_telemetry(db, run.id, measurements)
    return run, cells, measurements + shared_raw_rows(cells, measurements), db.rows("crypto", run.id), db.rows("boots", run.id)


def attach_telemetry(db: ResultsDB, run_id: int, measurements: list[dict]) -> None:
    """Each measurement with a sampler's series gets ``telemetry``: the means of
    :func:`vmbench.telemetry.summary` (device MB/s read and written, CPU busy and idle %)."""
    try:
        rows = db.telemetry(run_id)
    except Exception as exc:  # an old database without the table: nothing sampled
        logging.getLogger(__name__).debug("no telemetry: %s", exc)
        return
    by_m: dict[int, dict[str, dict]] = {}
    for r in rows:
        if r.get("measurement_id") is not None and r.get("source") in ("disk", "cpu"):
            by_m.setdefault(r["measurement_id"], {})[r["source"]] = r.get("series")
    for m in measurements:
        got = by_m.get(m["id"])
        if got:
            summ = telemetry.summary(got.get("disk"), got.get("cpu"))
            if summ:
                m["telemetry"] = summ


def shared_raw_rows(cells: list[dict], measurements: list[dict]) -> list[dict]:
    """Cells of one boot share the VM, so its raw disk is measured once, in the first of
    them; the others show those same rows (marked) in the report."""
    out = []
    by_name = {c["name"]: c for c in cells}
    for cell in cells:
        source = (cell.get("evidence") or {}).get("raw_measured_in")
        if not source or source == cell["name"] or source not in by_name:
            continue
        for m in measurements:
            if m["cell"] == source and m["layer"] == "raw" and m["side"] == "guest":
                out.append(dict(m, cell=cell["name"], cell_id=cell["id"], shared_from=source))
    return out


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
    if env.get("ssh_host"):
        header["ssh"] = f"{env.get('ssh_user', '?')}@{env['ssh_host']}:{env.get('ssh_port', 22)}, host key {env.get('ssh_host_key', '?')}"
    if getattr(run, "attempts", 1) > 1:
        header["attempts"] = f"{run.attempts} (resumed; every measurement kept once)"
    valid_cells = [c for c in cells if c["valid"]]
    policy = RepeatPolicy.from_plan(plan)
    tables: list[Table] = [gap_table(measurements, valid_cells, jobs, policy,
                                     host_memory_bytes=(env.get("host_memory_mib") or 0) << 20 or None, env=env)]
    if plan.get("mode") == "journey":
        tables.append(journey_table(measurements, valid_cells, jobs, repeats=policy, env=env))
    lt = layer_table(measurements, valid_cells, jobs, crypto, plan.get("stacks", []), repeats=policy, env=env)
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
