"""Running one boot group (:class:`~vmbench.run.plan.BootGroup`): one VM configuration, or a
host-only run's storage variant.

Its disks (or its storage) are created, the host reference runs on the scratch disk's
storage before the VM boots, then the VM boots, is read back (:func:`read_back`) and each of
its cells' pending steps run: the raw disk once for the cells that share the VM, then each
stack built layer by layer, measured and torn down.  What is created is tracked in the run's
records before it exists and removed at the end; on a failure the runner's cleanup removes it.
"""

from __future__ import annotations

from dataclasses import replace

from ..drivers.base import Accelerator, Guest, VmRequest, VmResources
from ..errors import GuestError, VmbenchError
from ..fio.job import PRECONDITION_BS
from ..guest.crypto import run_benchmarks
from ..guest.disk import ScratchDisk, find_scratch
from ..guest.facts import disk_evidence, guest_facts, root_disk_name
from ..guest.layers import MOUNTPOINT, StackBuilder
from ..results.db import ResultsDB, now
from ..results.records import BootRecord, CryptoRecord, Settings
from ..scenario.axes import settings_of, settings_text, storage_settings_of, vm_key
from ..scenario.model import Cell, FilesystemLayer, Stack
from ..settings import Telemetry
from ..units import human_size
from ..storage.radosbench import RADOS_LAYER
from .cpucost import CpuCost
from . import hostfs
from .evidence import effective_settings, guest_view, problems
from .measure import Where
from .plan import BootGroup, Step
from .session import BootSession

GUEST_WORKDIR = "/run/vmbench"


def read_back(db: ResultsDB, guest: Guest, boot: BootRecord, accel: Accelerator | None) -> tuple[ScratchDisk, dict, dict, bool]:
    """Find the scratch disk in ``guest``, read back its settings and store them with the
    boot (its record, stored): (disk, evidence, effective settings, whether its crypto is broken)."""
    gt = guest.transport
    gt.run(["mkdir", "-p", GUEST_WORKDIR], timeout=60)
    applied = guest.applied()
    facts = guest_facts(gt)
    disk = find_scratch(gt, guest.resources.scratch_serial)
    gdisk = disk_evidence(gt, disk, root_disk_name(gt))
    eff = effective_settings(applied, guest_view(gdisk, facts))
    facts_stored = {k: v for k, v in facts.items() if k != "cpu_flags"}
    facts_stored["cpu_flags"] = " ".join(facts["cpu_flags"])
    db.update_boot(replace(boot, live_xml=applied.native_config, qemu_cmdline=tuple(applied.qemu_cmdline),
                           guest={**facts_stored, "scratch": gdisk, "effective": eff, "applied": applied.typed(), **applied.details}))
    evidence = {"effective": eff, "guest_disk": gdisk, "guest_kernel": facts["kernel"], "guest_aes": facts["aes"],
                "qemu_pid": applied.qemu_pid}
    # Loading aesni_intel without ssse3/pclmulqdq under TCG would oops the guest kernel.
    broken_crypto = bool(accel and accel.name == "tcg" and facts["aes"]
                         and not (facts["ssse3"] and facts["pclmulqdq"]))
    return disk, evidence, eff, broken_crypto


class BootGroupRun:
    """One boot group of a run and its pending steps, driven with the runner's driver,
    database and records."""

    def __init__(self, runner: BootSession, group: BootGroup, steps: list[Step]) -> None:
        self.r = runner
        self.group = group
        self.steps = steps
        self.s = runner.scenario
        self.cpu_costs: dict[int, CpuCost] = {}  # boot id -> its QEMU process's sampler

    def run(self) -> None:
        r, s, group, steps = self.r, self.s, self.group, self.steps
        n = len(r.plan.boots)
        what = "storage" if s.host_only else "VM"
        settings = settings_text(storage_settings_of(group.vm) if s.host_only else settings_of(group.vm))
        if not steps:
            r.progress.step(f"{what} {group.seq}/{n}: already measured ({settings})")
            return
        r.progress.step(f"{what} {group.seq}/{n}: {settings}")
        request = VmRequest(seq=group.seq, vm=group.vm, scratch_size=s.storage.scratch_size, cells=tuple(c.name for c in group.cells))
        res = r.driver.new_resources(r.tag, request)
        r.created.append(res)  # tracked before anything exists, so cleanup always sees it
        assert r.ledger is not None and r.accel is not None and r.measurer is not None and r.outcome is not None
        if not s.host_only:
            r.ledger.add("domain", res.name)
        host_steps = [st for st in steps if st.side == "host"]
        guest_steps = [st for st in steps if st.side == "guest"]
        if s.host_only:
            r.step = f"creating the storage of {group.cells[0].name}"
            r.driver.create_host_reference(r.tag, request, res)
        else:
            r.step = f"creating the disks of VM {group.seq} ({res.name})"
            r.driver.create_vm(r.tag, request, res)
        for v in res.volumes:
            r.ledger.add("volume", v)
        if res.storage_problems:  # a ZFS property did not take: nothing on this storage is measured
            for cell in group.cells:
                r.record_cell(cell, None, res.storage_problems, {"storage": res.storage})
                r.progress.warn(f"cell {cell.name} is INVALID, not measured: " + "; ".join(res.storage_problems))
                r.outcome.invalid_cells.append(cell.name)
            host_steps = guest_steps = []
        if host_steps:
            self._host_reference(request, res, host_steps)
        if guest_steps:
            self._boot(request, res, guest_steps)
        r.step = f"removing {res.name}"
        r.progress.step(f"removing {'the storage of ' + group.cells[0].name if s.host_only else res.name}")
        r.driver.remove_vm(res)
        r.created.remove(res)

    def _host_reference(self, request: VmRequest, res: VmResources, host_steps: list[Step]) -> None:
        """fio on the host, on the scratch disk's storage (before the VM boots)."""
        r, s, group = self.r, self.s, self.group
        assert r.measurer is not None
        target = res.host_target or r.driver.create_host_reference(r.tag, request, res)
        r.step = f"measuring the host on {target}"
        r.progress.step(f"host: fio on {target} ({s.storage.describe() if s.host_only else 'the scratch disk’s storage, before boot'})")
        host_cell = next((c for c in group.cells if c.name == host_steps[0].cell), None)
        cell_id = None if host_cell is None else r.record_cell(host_cell, None, [], {"storage": res.storage}).id
        where = Where(r.host, "host", r.host_workdir, target, "host", cell=host_cell, cell_id=cell_id,
                      settings=storage_settings_of(group.vm) if s.host_only else {}, zfs_pool=s.storage.zfs_pool,
                      host=r.host_of("").label)
        rados = [st for st in host_steps if st.layer == RADOS_LAYER]  # the pool's ceiling first, then librbd on it
        r.measurer.measure(replace(where, layer=RADOS_LAYER), rados)
        r.measurer.measure(where, [st for st in host_steps if st.layer == "host"])
        for name, fs in r.plan.host_filesystems().items():  # then the file jobs, on each filesystem type
            self._host_filesystem(where, name, fs, [st for st in host_steps if st.layer == name])

    def _host_filesystem(self, where: Where, name: str, fs: FilesystemLayer, steps: list[Step]) -> None:
        """The file jobs' like-for-like host row: ``fs`` made on the host's reference volume,
        mounted in the run's host work directory, measured, unmounted and wiped."""
        r = self.r
        assert r.measurer is not None
        if not steps:
            return
        why = hostfs.why_not(r.host, where.target, r.tag, fs)
        if why is not None:
            r.progress.warn(f"host: no {fs.label} for the file jobs ({why}): the host has no like-for-like row for them")
            return
        r.step = f"measuring the host on {fs.label} made on {where.target}"
        r.progress.step(f"host: {fs.label} made on {where.target} for the file jobs")
        try:
            with hostfs.mounted(r.host, where.target, fs, f"{r.host_workdir}/mnt-{fs.label}") as mount:
                r.measurer.measure(replace(where, layer=name, mount=mount), steps)
        except hostfs.NoHostFilesystem as exc:
            r.progress.warn(f"host: {exc.message}: the host has no like-for-like row for the file jobs")

    def _boot(self, request: VmRequest, res: VmResources, guest_steps: list[Step]) -> None:
        """Boot the VM, read it back, run the crypto benchmark and each cell's steps."""
        r, s, group = self.r, self.s, self.group
        assert r.accel is not None
        r.step = f"booting VM {group.seq} ({res.name})"
        r.progress.step(f"booting {res.name} ({r.accel.name})")
        guest = r.driver.boot(r.tag, request, res, r.progress, s.hypervisor.boot_timeout)
        r.boots_started += 1
        r.progress.step(f"{res.name}: guest agent answered after {guest.boot_seconds:.0f}s")
        boot = BootRecord(run_id=r.run_id, seq=group.seq, vm_key=vm_key(group.vm), settings=Settings.of(settings_of(group.vm)),
                          domain_name=guest.name, accelerator=r.accel.name, domain_xml=res.native_config,
                          boot_seconds=guest.boot_seconds, started_at=now(), attempt=r.attempt)
        boot_id = r.db.add_boot(boot)
        r.step = f"reading back the settings of {res.name}"
        disk, evidence, effective = r.inspect(guest, replace(boot, id=boot_id))
        if res.storage:
            evidence["storage"] = res.storage
        self._guest_crypto(guest, boot_id, effective)
        raw_done_by: str | None = None  # cells of one boot share the VM: the raw disk is measured once
        for cell in group.cells:
            cell_steps = [st for st in guest_steps if st.cell == cell.name]
            raw_done_by = self._run_cell(cell, guest, disk, boot_id, evidence, effective, raw_done_by, cell_steps) or raw_done_by

    def _run_cell(self, cell: Cell, guest: Guest, disk: ScratchDisk, boot_id: int, evidence: dict, eff: dict,
                  raw_done_by: str | None, steps: list[Step]) -> str | None:
        """Measure a cell's pending steps; returns the cell's name if it measured the raw disk."""
        r = self.r
        assert r.accel is not None and r.outcome is not None and r.measurer is not None
        if not steps:
            return None
        found = problems(cell.vm, eff, r.accel.name)
        raw_steps = [st for st in steps if st.stack is None]
        measured_raw_in = raw_done_by or (cell.name if raw_steps else None)
        stored = r.db.cell_by_name(r.run_id, cell.name)
        rebuilt = {st.stack for st in steps}
        kept = [l for l in stored.layers if l.get("stack") not in rebuilt] if stored else []  # stacks not rebuilt now
        # which cell's rows are this cell's raw-disk figures (kept from an earlier attempt when not measured now)
        raw_source = measured_raw_in or (stored.raw_measured_in if stored else None) or cell.name
        evidence = dict(evidence, raw_measured_in=raw_source, layers=kept)
        record = r.record_cell(cell, boot_id, found, evidence, stored)
        cell_id = record.id
        if found:
            r.progress.warn(f"cell {cell.name} is INVALID, not measured: " + "; ".join(found))
            r.outcome.invalid_cells.append(cell.name)
            return None
        where = Where(guest.transport, "guest", GUEST_WORKDIR, disk.path, r.accel.name, cell=cell, cell_id=cell_id,
                      boot_id=boot_id, layer="raw", settings=settings_of(cell.vm),
                      # the host is sampled too while the guest's fio runs: its CPU and, on ZFS, the pool
                      host_side=r.host, host_workdir=r.host_workdir, host_target=guest.resources.scratch_path,
                      zfs_pool=self.s.storage.zfs_pool, cpu=self._cpu_cost(boot_id, guest, evidence.get("qemu_pid")),
                      write_rate=cell.vm.limits.write_rate(PRECONDITION_BS), lift_limits=guest.limits_lifted,
                      host=r.host_of("").label)
        if raw_steps:
            r.step = f"measuring {cell.name}: raw disk"
            r.measurer.measure(where, raw_steps)
        elif raw_done_by:
            r.progress.step(f"{cell.name}: raw disk already measured in cell {raw_done_by} (same VM)")
        for stack in cell.stacks:
            stack_steps = [st for st in steps if st.stack == stack.name]
            if not stack_steps:
                continue
            built = self._measure_stack(where, disk, stack, stack_steps)
            record = replace(record, evidence=dict(record.evidence, layers=[*record.evidence["layers"], *built]))
            r.db.update_cell(record)
        return cell.name if raw_steps else None

    def _cpu_cost(self, boot_id: int, guest: Guest, pid: object) -> CpuCost | None:
        """The boot's sampler of its QEMU process (one per boot: its idle cost is measured once);
        none with ``telemetry: off``."""
        if not isinstance(pid, int) or self.s.telemetry is not Telemetry.ON:
            return None
        if boot_id not in self.cpu_costs:
            self.cpu_costs[boot_id] = CpuCost(self.r.host, pid, guest.transport)
        return self.cpu_costs[boot_id]

    def _measure_stack(self, base: Where, disk: ScratchDisk, stack: Stack, steps: list[Step]) -> list[dict]:
        """Build the stack layer by layer (up to its last pending layer), measure the pending
        steps on each layer, tear it down; returns how each layer was built."""
        r = self.r
        assert base.cell is not None and r.measurer is not None
        cell = base.cell
        builder = StackBuilder(base.side, disk, stack)
        top = max(st.depth for st in steps)
        finished = False
        record: list[dict] = []
        try:
            for depth in range(1, top + 1):
                label = stack.layers[depth - 1].label
                r.step = f"in cell {cell.name}"  # the builder's errors name the stack and layer
                r.progress.step(f"{cell.name}: stack {stack.name}: building {label}")
                built = builder.build_next()
                record.append({"stack": stack.name, "layer": built.path, "seconds": round(built.seconds, 2),
                               "commands": built.commands, "device": built.device, "target": built.target})
                if built.is_file:
                    need = max(j.size for j in self.s.jobs)
                    free = builder.free_bytes()
                    if free < need * 1.05:
                        raise GuestError(f"stack {stack.name}: the {built.layer.label} filesystem has {human_size(free)} free; the jobs need {human_size(need)}",
                                         "raise storage.scratch_size or lower the jobs' size")
                layer_steps = [st for st in steps if st.depth == depth]
                if layer_steps:
                    r.step = f"measuring {cell.name}: {built.path}"
                    where = replace(base, target=built.target, stack=stack.name, layer=built.path, depth=depth,
                                    mount=MOUNTPOINT if built.is_file else None)
                    r.measurer.measure(where, layer_steps)
            finished = True
        finally:
            r.progress.step(f"{cell.name}: stack {stack.name}: tearing down")
            try:
                errors = builder.teardown()
            except VmbenchError as exc:
                errors = [exc.message]
            if errors and finished:
                raise GuestError(f"stack {stack.name} did not tear down cleanly: " + "; ".join(errors),
                                 "the next stack cannot start from a clean disk; the VM is removed")
            if errors:
                r.progress.warn(f"stack {stack.name}: teardown after the failure was incomplete (the VM is removed anyway): " + "; ".join(errors))
        return record

    # ---- crypto ceilings -------------------------------------------------------------------

    def _guest_crypto(self, guest: Guest, boot_id: int, eff: dict) -> None:
        r, s, group = self.r, self.s, self.group
        if not s.crypto_benchmark or group.cpu_label in r.crypto_done:
            return
        if r.broken_crypto:
            r.progress.warn(f"{guest.name}: skipping cryptsetup benchmark: CPU {group.cpu_label} has aes without ssse3/pclmulqdq under TCG")
            return
        r.step = f"cryptsetup benchmark in {guest.name}"
        r.progress.step(f"{guest.name}: cryptsetup benchmark for CPU {group.cpu_label}")
        for fig in run_benchmarks(guest.transport, s.crypto_benchmark):
            r.db.add_crypto(CryptoRecord("guest", group.cpu_label, fig.cipher, fig.key_bits, aes_flag=eff.get("guest_aes"),
                                         encrypt_mib_s=fig.encrypt_mib_s, decrypt_mib_s=fig.decrypt_mib_s, error=fig.error,
                                         run_id=r.run_id, boot_id=boot_id, attempt=r.attempt))
        r.crypto_done.add(group.cpu_label)
