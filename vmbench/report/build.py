"""A loaded run -> the report's header and tables.

:func:`build_report` is pure: a :class:`~vmbench.report.load.RunData` in (loaded once by
:func:`~vmbench.report.load.load_run`, the only report code that reads the database), the
header lines and the table models out, each table laid out by :mod:`.tables` or
:mod:`.hostonly` from the rows of :mod:`.rows` (the CPU per I/O table, after the gap table when the
run sampled QEMU's CPU, by :mod:`.cputables`); a load run's (many VMs at once) by
:mod:`.loadtables` from :mod:`.loadrows`, in place of the single-VM gap and layer tables.  The advice
section a printed report ends with is added above this package, by
:func:`vmbench.advice.table.report_with_advice` (advice reads these rows).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Mapping, Sequence

from ..results.environment import Environment
from ..results.kind import RunKind
from ..results.records import BootRecord
from .cputables import cpu_table
from .curves import curve_table, curves, load_curves
from .hostonly import host_only_rows, host_only_table, storage_cells_table
from .load import RunData
from .loadrows import scaling_rows
from .loadtables import load_header, load_tables
from .tables import Table, cells_table, crypto_table, gap_table, journey_table, layer_table, targets_table


def build_report(data: RunData) -> tuple[dict, list[Table]]:
    """The header lines and the measurement tables of a loaded run (the advice section is
    added by :func:`vmbench.advice.table.report_with_advice`, which reads these rows)."""
    with collector_paused():
        return _build_report(data)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for the block, then as it was: the rows, tables
    and plots of a large run make a few hundred thousand objects, and the collector walked them
    and the run's records again and again (a fifth of the time to make the tables and advice of
    1,000 cells, a tenth of its page's) for the few cycles matplotlib's figures leave, which it
    frees after."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _build_report(data: RunData) -> tuple[dict, list[Table]]:
    run, env, boots = data.run, data.environment, data.boots
    accels = sorted({str(b.accelerator) for b in boots}) or [str(_known(env.accelerator))]
    header = {
        "run": f"{run.id} ({run.tag_label})",
        "scenario": f"{run.scenario_name} ({run.scenario_path})",
        "status": run.status + (f": {run.error}" if run.error else ""),
        "started": run.started_at,
        "finished": run.finished_at or "-",
        "accelerator": ", ".join(map(str, accels)) + (f" ({env.accelerator_reason})" if env.accelerator_reason else ""),
        "host": f"{_known(env.hostname)}, kernel {_known(env.host_kernel)}, {_known(env.host_cpu)}",
        "versions": f"QEMU {_known(env.qemu_version)}, libvirt {_known(env.libvirt_version)}, fio {_known(env.host_fio)} (host) / {_guest_fio(boots)} (guest)",
        "boots": str(len(boots)),
    }
    if env.pve_version or env.pve_api:  # the facts a Proxmox host recorded
        header["versions"] = (f"Proxmox VE {_known(env.pve_version)} ({_known(env.pve_node)}), QEMU {_pve_qemu(env, boots)}, "
                              f"fio {_known(env.host_fio)} (host) / {_guest_fio(boots)} (guest)")
        header["proxmox"] = f"{_known(env.pve_api)}, token {_known(env.pve_token_id)}, TLS {_known(env.pve_tls)}"
        if env.tls_verify_off:
            header["warning"] = "TLS verification of the Proxmox API was turned off for this run (tls: {verify: false})"
    if len(env.hosts or {}) > 1:  # a run across several hosts: each, and how it was reached, a line each
        header.update({f"host {label}": target for label, target in run_hosts(env, keys=True)})
    elif env.ssh_host:
        header["ssh"] = ssh_target(env, keys=True)
    if run.attempts > 1:
        header["attempts"] = f"{run.attempts} (resumed; every measurement kept once)"
    if env.on_ceph:
        header["ceph"] = ceph_header(env)
        if env.ceph_health not in (None, "HEALTH_OK"):
            header["warning"] = (f"the Ceph cluster was in {env.ceph_health} when the run started "
                                 f"({'; '.join(env.ceph_health_checks or []) or 'no details'}): results are suspect")
    if env.zfs_pool:
        header["zfs"] = zfs_header(env)
        if env.zfs_scan:
            header["warning"] = f"a {env.zfs_scan} was running on pool {env.zfs_pool} when the run started: results are suspect"
    return header, TABLES[data.kind](data, header)


def _known(value: object, default: object = "?") -> object:
    """A recorded fact as the header says it: ``default`` where the run did not record it."""
    return default if value is None else value


def ssh_target(env: Mapping[str, Any], *, keys: bool = False) -> str:
    """How a host was reached (``user@host:port``, with its host key), or "this machine"."""
    env = Environment.from_row(env)
    if not env.ssh_host:
        return "this machine"
    return (f"{_known(env.ssh_user)}@{env.ssh_host}:{_known(env.ssh_port, 22)}"
            + (f", host key {_known(env.ssh_host_key)}" if keys else ""))


def run_hosts(env: Mapping[str, Any], *, keys: bool = False) -> list[tuple[str, str]]:
    """Every host of a run, in order: (its name, how it was reached); one for a one-host run
    (named by its SSH host, else "localhost")."""
    env = Environment.from_row(env)
    if env.hosts:
        return [(str(label), ssh_target(facts or {}, keys=keys)) for label, facts in env.hosts.items()]
    return [(str(env.ssh_host or "localhost"), ssh_target(env, keys=keys))]


def hosts_line(env: Mapping[str, Any]) -> str:
    """A run's hosts in a few words (``vmbench runs``): "localhost", "root@pve1:22", or each
    host of a run across several by name with its SSH target."""
    env = Environment.from_row(env)
    hosts = run_hosts(env)
    if len(hosts) == 1 and not env.hosts:
        return hosts[0][0] if hosts[0][1] == "this machine" else hosts[0][1]
    return ", ".join(f"{label} ({target})" for label, target in hosts)


def host_only_tables(data: RunData, header: dict) -> list[Table]:
    """Storage variants measured on the host: no VM, so no accelerator and no guest fio."""
    env, cells = data.environment, list(data.cells)
    header["accelerator"] = "none (host only: no VM)"
    header["versions"] = f"fio {_known(env.host_fio)} (host)"
    del header["boots"]
    tables = [host_only_table(list(data.measurements), data.valid_cells, data.jobs, data.plan.repeat_policy, env=env,
                              storage=data.plan.storage)]
    if any(j.sweep_of for j in data.plan.jobs):
        ct = curve_table(curves(host_only_rows(list(data.measurements), data.valid_cells, data.jobs), data.plan.jobs), env=env)
        tables += [ct] if ct else []
    if len(cells) > 1 or any(not c.valid for c in cells):
        tables.append(storage_cells_table(cells))
    return tables


def many_vm_tables(data: RunData, header: dict) -> list[Table]:
    """Many VMs at once: the load tables replace the single-VM gap and layer tables."""
    assert data.load is not None
    cells = list(data.cells)
    header["load"] = load_header(data.load)
    tables: list[Table] = load_tables(list(data.measurements), data.valid_cells, data.jobs, data.load, targets=data.targets,
                                      env=data.environment, policy=data.plan.repeat_policy)
    if data.load.kind != "neighbours":  # a scaling run's sweeps: a curve per step
        swept = curve_table(load_curves(scaling_rows(list(data.measurements), data.valid_cells, data.load, data.jobs),
                                        data.plan.jobs), env=data.environment)
        if swept is not None:
            tables.append(swept)
    ct = crypto_table(data.crypto)
    if ct:
        tables.append(ct)
    if len(cells) > 1 or any(not c.valid for c in cells):
        tables.append(cells_table(cells))
    return tables


def one_vm_tables(data: RunData, header: dict) -> list[Table]:
    """One VM per cell: the gaps, CPU per I/O where sampled, a journey's steps, the layers, the
    crypto ceiling, the targets and the cells."""
    env, cells, measurements, jobs = data.environment, list(data.cells), list(data.measurements), data.jobs
    valid_cells, policy, metrics = data.valid_cells, data.plan.repeat_policy, data.plan.job_metrics
    gaps = data.rows.gaps(jobs, metrics)
    tables = [gap_table(measurements, valid_cells, jobs, policy, host_memory_bytes=env.host_memory_bytes, env=env,
                        metrics=metrics, rows=gaps)]
    if any(j.sweep_of for j in data.plan.jobs):
        swept = curve_table(curves(gaps, data.plan.jobs), env=env)
        tables += [swept] if swept else []
    cpu = cpu_table(measurements, valid_cells, jobs, repeats=policy, env=env)  # None: no QEMU process was sampled
    if cpu is not None:
        tables.append(cpu)
    if data.kind is RunKind.JOURNEY:
        tables.append(journey_table(measurements, valid_cells, jobs, repeats=policy, env=env, metrics=metrics))
    lt = layer_table(measurements, valid_cells, jobs, data.crypto, data.plan.stacks, repeats=policy, env=env, metrics=metrics,
                     rows=data.rows.layers(jobs, metrics))
    if lt:
        tables.append(lt)
    ct = crypto_table(data.crypto)
    if ct:
        tables.append(ct)
    tt = targets_table(measurements, data.targets, metrics)
    if tt:
        tables.append(tt)
    if len(cells) > 1 or any(not c.valid for c in cells):
        tables.append(cells_table(cells))
    return tables


#: each kind of run's tables (a new kind: its function here); the header is theirs to adjust
TABLES: dict[RunKind, Callable[[RunData, dict], list[Table]]] = {
    RunKind.MATRIX: one_vm_tables, RunKind.JOURNEY: one_vm_tables, RunKind.HOST_ONLY: host_only_tables,
    RunKind.SCALING: many_vm_tables, RunKind.NEIGHBOURS: many_vm_tables,
}


def zfs_header(env: Environment) -> str:
    """The recorded ZFS facts in one line: versions, pool, ashift, ARC, txg timeout, scan."""
    parts = [f"{_known(env.storage_type, 'zfs')} on {_known(env.zfs_dataset)}",
             f"OpenZFS {_known(env.zfs_userland)} / {env.zfs_kmod or '?'}",
             f"ashift {_known(env.zpool_ashift)}" + (f" (vdevs {','.join(map(str, env.vdev_ashift))})" if env.vdev_ashift else "")]
    if env.arc_c_max_bytes:
        parts.append(f"ARC max {env.arc_c_max_bytes / 2**30:.1f} GiB")
    if env.zfs_txg_timeout_s is not None:
        parts.append(f"zfs_txg_timeout {env.zfs_txg_timeout_s} s")
    parts.append(f"scan: {env.zfs_scan or 'none running'}")
    return ", ".join(parts)


def ceph_header(env: Environment) -> str:
    """The recorded Ceph facts in one line: versions, health, the pool, its OSDs, the client cache."""
    pool, cache = env.ceph_pool_facts or {}, env.rbd_client_cache or {}  # as ceph and the client's config told them
    parts = [f"RBD pool {_known(env.ceph_pool)} as client.{_known(env.ceph_user)}",
             f"Ceph {', '.join(env.ceph_versions or ['?'])}", str(env.ceph_health or "health ?"),
             f"size {_known(pool.get('size'))}/min_size {_known(pool.get('min_size'))}, {_known(pool.get('pg_num'))} PGs",
             f"{_known(env.ceph_osds_up)}/{_known(env.ceph_osds)} OSDs up ({', '.join(env.ceph_objectstores or ['?'])})",
             f"client rbd_cache {_known(cache.get('rbd_cache'))} (QEMU's cache=writeback turns it on per disk, none turns it off)"]
    return ", ".join(parts)


def _pve_qemu(env: Environment, boots: Sequence[BootRecord]) -> str:
    """The QEMU a Proxmox run's VMs ran: each boot's evidence (``running-qemu`` of
    status/current), else the node's pve-qemu-kvm package (``pveversion -v``), else ?."""
    running = sorted({v for b in boots if (v := b.running_qemu)})
    return ", ".join(running) or env.qemu_version or "?"


def _guest_fio(boots: Sequence[BootRecord]) -> str:
    versions = sorted({_known(b.guest_fio) for b in boots}, key=str)
    return ", ".join(map(str, versions)) or "?"

