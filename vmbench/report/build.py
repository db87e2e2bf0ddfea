"""A stored run -> the report's header and tables."""

from __future__ import annotations

import logging

from ..telemetry import sampler as telemetry
from ..results.db import ResultsDB, RunRow
from .facts import RepeatPolicy
from .hostonly import host_only_table, storage_cells_table
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


#: the samplers' series (fio's own are "fio-*"): the side fio ran on, the pool's (always the host's)
#: and, for a guest run, the host's own device and CPU
SAMPLED = ("disk", "cpu", "zpool", "arc", "host-disk", "host-cpu")


def attach_telemetry(db: ResultsDB, run_id: int, measurements: list[dict]) -> None:
    """Each measurement with a sampler's series gets ``telemetry``: the means of
    :func:`vmbench.telemetry.sampler.summary` (device MB/s read and written, CPU busy and idle %; with
    ZFS the pool's MB/s, the ARC hit ratio and size, the scrub state, zfs_txg_timeout, whichever
    side recorded them; for a guest run sampled on the host too, the host's device MB/s and CPU:
    ``host_dev_read_mb_s``, ``host_dev_write_mb_s``, ``host_cpu_busy``, ``host_cpu_idle``)."""
    try:
        rows = db.telemetry(run_id)
    except Exception as exc:  # an old database without the table: nothing sampled
        logging.getLogger(__name__).debug("no telemetry: %s", exc)
        return
    by_m: dict[int, dict[str, dict]] = {}
    for r in rows:
        if r.get("measurement_id") is not None and r.get("source") in SAMPLED:
            by_m.setdefault(r["measurement_id"], {})[r["source"]] = r.get("series")
    for m in measurements:
        got = by_m.get(m["id"])
        if got:
            summ = telemetry.summary(got.get("disk"), got.get("cpu"), got.get("zpool"), got.get("arc"),
                                     host_disk=got.get("host-disk"), host_cpu=got.get("host-cpu"))
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
    if env.get("driver") == "proxmox":
        header["versions"] = (f"Proxmox VE {env.get('pve_version', '?')} ({env.get('pve_node', '?')}), QEMU {env.get('qemu_version') or '?'}, "
                              f"fio {env.get('host_fio', '?')} (host) / {_guest_fio(boots)} (guest)")
        header["proxmox"] = f"{env.get('pve_api', '?')}, token {env.get('pve_token_id', '?')}, TLS {env.get('pve_tls', '?')}"
        if env.get("tls_verify_off"):
            header["warning"] = "TLS verification of the Proxmox API was turned off for this run (tls: {verify: false})"
    if env.get("ssh_host"):
        header["ssh"] = f"{env.get('ssh_user', '?')}@{env['ssh_host']}:{env.get('ssh_port', 22)}, host key {env.get('ssh_host_key', '?')}"
    if getattr(run, "attempts", 1) > 1:
        header["attempts"] = f"{run.attempts} (resumed; every measurement kept once)"
    if env.get("zfs_pool"):
        header["zfs"] = zfs_header(env)
        if env.get("zfs_scan"):
            header["warning"] = f"a {env['zfs_scan']} was running on pool {env['zfs_pool']} when the run started: results are suspect"
    host_cells = {c["name"]: c.get("host_cell") for c in plan.get("cells", [])}
    for c in cells:  # which host reference each cell is compared with (one per storage setting)
        c["host_cell"] = host_cells.get(c["name"])
    valid_cells = [c for c in cells if c["valid"]]
    policy = RepeatPolicy.from_plan(plan)
    if plan.get("host_only"):
        header["accelerator"] = "none (host only: no VM)"
        header["versions"] = f"fio {env.get('host_fio', '?')} (host)"
        del header["boots"]
        tables = [host_only_table(measurements, valid_cells, jobs, policy, env=env, storage=plan.get("storage", ""))]
        if len(cells) > 1 or any(not c["valid"] for c in cells):
            tables.append(storage_cells_table(cells))
        return header, tables
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


def zfs_header(env: dict) -> str:
    """The recorded ZFS facts in one line: versions, pool, ashift, ARC, txg timeout, scan."""
    arc = env.get("arc") or {}
    parts = [f"{env.get('storage_type', 'zfs')} on {env.get('zfs_dataset', '?')}",
             f"OpenZFS {env.get('zfs_userland', '?')} / {env.get('zfs_kmod') or '?'}",
             f"ashift {env.get('zpool_ashift', '?')}" + (f" (vdevs {','.join(map(str, env['vdev_ashift']))})" if env.get("vdev_ashift") else "")]
    if arc.get("c_max_bytes"):
        parts.append(f"ARC max {arc['c_max_bytes'] / 2**30:.1f} GiB")
    if env.get("zfs_txg_timeout_s") is not None:
        parts.append(f"zfs_txg_timeout {env['zfs_txg_timeout_s']} s")
    parts.append(f"scan: {env.get('zfs_scan') or 'none running'}")
    return ", ".join(parts)


def _guest_fio(boots: list[dict]) -> str:
    versions = sorted({(b.get("guest") or {}).get("fio_version", "?") for b in boots})
    return ", ".join(versions) or "?"


def _targets(run: RunRow) -> list[dict]:
    return list(run.plan.get("targets", []))
