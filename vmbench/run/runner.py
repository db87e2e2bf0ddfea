"""Running a scenario: provision, measure host and guest layer by layer, store, clean up.

The plan is the program: :meth:`Plan.steps` lists every fio run, and the runner executes the
ones not yet stored (all of them for a new run; the missing ones for ``--resume``), in new
VMs with the same settings.  Everything that can be checked is checked before anything is
created.  Everything created is tracked and removed on success, on failure (reconnecting to
the host first if the connection was lost) and on Ctrl-C/SIGTERM; after a hard kill,
``vmbench cleanup`` finds the leftovers.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import asdict, replace

from .. import __version__
from ..drivers import make_driver
from ..drivers.base import Accelerator, Guest, HypervisorDriver, VmRequest, VmResources
from .environment import host_environment
from ..errors import GuestError, HypervisorError, Interrupted, VmbenchError
from ..fio.job import PRECONDITION_BS
from .evidence import effective_settings, guest_view, problems
from ..guest.crypto import run_benchmarks
from ..guest.disk import ScratchDisk, find_scratch
from ..guest.facts import disk_evidence, guest_facts, root_disk_name
from ..guest.layers import StackBuilder
from ..images import Image
from .cpucost import CpuCost
from .ledger import Ledger
from .loadstep import LoadStepRun
from .measure import Measurer, Where
from ..paths import StatePaths
from .plan import BootGroup, Plan, Step, make_plan
from .preflight import RunPreflight
from .session import RunOutcome
from ..progress import Progress
from ..results.db import ResultsDB, RunRow
from ..results.key import MeasurementKey
from ..scenario.model import Cell, Stack
from ..scenario.spec import Scenario
from .signals import signals_deferred, signals_raise
from ..transport import ops
from ..transport.base import Transport
from ..units import human_size
from ..scenario.axes import settings_of, storage_settings_of, vm_key

log = logging.getLogger(__name__)
GUEST_WORKDIR = "/run/vmbench"


def new_run_tag() -> str:
    return "r" + secrets.token_hex(4)


class Runner:
    def __init__(self, scenario: Scenario, db: ResultsDB, progress: Progress, *, state: StatePaths | None = None,
                 driver: HypervisorDriver | None = None, resume: RunRow | None = None) -> None:
        self.scenario = scenario
        self.plan: Plan = make_plan(scenario)
        self.db = db
        self.progress = progress
        self.state = state or StatePaths.default()
        self.driver = driver or make_driver(scenario.hypervisor, scenario.storage, state=self.state)
        self.host: Transport = self.driver.host
        self.resume = resume
        self.tag = new_run_tag()  # names this attempt's VMs and volumes
        self.created: list[VmResources] = []
        self.accel: Accelerator | None = None
        self.image: Image | None = None
        self.run_id = 0
        self.attempt = 1
        self.host_workdir = ""
        self.outcome: RunOutcome | None = None
        self.crypto_done: set[str] = set()
        self.boots_started = 0  # counted from real boots, for tests
        self.ledger: Ledger | None = None
        self.host_aes: bool | None = None
        self.measurer: Measurer | None = None
        self.step = "checking the host"  # what the run is doing, named in errors
        self.broken_crypto = False
        self.cpu_costs: dict[int, CpuCost] = {}  # boot id -> its QEMU process's sampler

    # ---- preflight -----------------------------------------------------------------------

    def preflight(self) -> None:
        """Everything that can fail before anything is provisioned (:class:`RunPreflight`)."""
        checks = RunPreflight(self.scenario, self.plan, self.driver, self.progress, self.state, self.resume)
        try:
            checks.check()
        finally:  # what the checks found before a refusal is kept too
            self.image, self.accel = checks.image, checks.accel

    # ---- the run -------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        with signals_raise():
            try:
                self.preflight()
            except KeyboardInterrupt:
                raise Interrupted("interrupted before anything was created") from None
            return self._run()

    def _start(self) -> dict[MeasurementKey, dict[int, float]]:
        """Open (or reopen) the run's row; the measurements already stored (Step.group() ->
        {repeat: IOPS})."""
        s = self.scenario
        stored: dict[MeasurementKey, dict[int, float]]
        host_argv: dict[str, tuple[str, ...]]
        if self.resume is not None:
            self.run_id = self.resume.id
            self.attempt = self.db.start_attempt(self.run_id)
            stored = self.db.repeat_iops(self.run_id)
            self.crypto_done = self.db.crypto_cpus(self.run_id)
            host_argv = {m["job"]: tuple(m["argv"]) for m in self.db.rows("measurements", self.run_id) if m["side"] == "host"}
            self.progress.step(f"resuming run {self.run_id} (attempt {self.attempt}): {sum(map(len, stored.values()))} measurement(s) already stored")
        else:
            summary = self.plan.summary()
            summary["targets"] = [asdict(t) for t in s.targets]
            self.run_id = self.db.start_run(tag=self.tag, scenario_name=s.name, scenario_path=s.path, scenario_text=s.text,
                                            plan=summary, version=__version__)
            stored, host_argv = {}, {}
        self.measurer = Measurer(s, self.db, self.run_id, self.attempt, self.progress, host_argv, stored)
        return stored

    def _run(self) -> RunOutcome:
        s = self.scenario
        stored = self._start()
        self.outcome = RunOutcome(self.run_id, self.tag, "running")
        status, error, interrupted, cleanup_errors = "failed", None, False, []
        try:
            self.ledger = Ledger.create(self.state.runs, self.tag, uri=s.hypervisor.uri, scenario=s.path,
                                        host=s.hypervisor.host_label, run_id=self.run_id)
            self._record_environment()
            self.step = f"making a work directory on {self.host.name}"
            self.host_workdir = ops.mkdtemp(self.host, self._host_work_root, f"vmbench-{self.tag}-")
            # a resume also goes on with adaptive repeats an earlier attempt left unfinished
            pending = self.plan.pending_steps(stored)
            self.outcome.skipped_steps = sum(st.repeat in stored.get(st.group(), {}) for st in self.plan.steps())
            if s.load is not None:
                for unit, unit_steps in self.plan.pending_units(stored):
                    LoadStepRun(self, unit, unit_steps).run()
            else:
                for group in self.plan.boots:
                    self._run_group(group, [st for st in pending if st.boot == group.seq])
            if s.crypto_benchmark and not (self.resume and self.db.has_host_crypto(self.run_id)):
                self.step = "host crypto benchmark"
                self._host_crypto()
            status = "ok"
        except KeyboardInterrupt:
            status, error, interrupted = "interrupted", f"interrupted by the user while {self.step}", True
        except VmbenchError as exc:
            exc.message = f"{self.step}: {exc.message}"
            exc.args = (exc.message,)
            error = exc.message
            raise
        except OSError as exc:
            error = f"{self.step}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
            raise
        except Exception as exc:  # a bug: still clean up and record it
            error = f"internal error while {self.step}: {exc!r}"
            raise
        finally:
            with signals_deferred(self.progress):
                cleanup_errors = self._cleanup()
                for problem in cleanup_errors:
                    self.progress.warn(f"cleanup: {problem}")
                if cleanup_errors:
                    status = "failed" if status == "ok" else status
                    error = "; ".join(filter(None, [error, "cleanup incomplete: " + "; ".join(cleanup_errors)]))
                self.db.finish_run(self.run_id, status, error)
                if not cleanup_errors and self.ledger is not None:
                    self.ledger.remove()
                self.outcome.status, self.outcome.error = status, error
                self.driver.close()
        if interrupted:
            if cleanup_errors:
                raise Interrupted("interrupted; some of what this run created could not be removed", "run `vmbench cleanup`")
            raise Interrupted("interrupted; removed everything this run created",
                              f"partial results are in run {self.run_id}; `vmbench run --resume {self.run_id}` finishes it")
        if cleanup_errors:
            raise HypervisorError(f"run {self.run_id} measured everything but could not remove all it created",
                                  "run `vmbench cleanup`")
        return self.outcome

    @property
    def _host_work_root(self) -> str:
        return self.driver.paths.work

    def _record_environment(self) -> None:
        env = host_environment(self.host)
        self.host_aes = env.get("host_aes")
        if self.resume is not None:
            before = dict(self.resume.environment)
            before.setdefault("attempts", []).append({"attempt": self.attempt, "run_tag": self.tag})
            self.db.set_environment(self.run_id, before)
            return
        env.update(self.driver.describe_host())
        assert self.accel is not None
        env.update({
            "accelerator": self.accel.name,
            "accelerator_reason": self.accel.reason,
            "run_tag": self.tag,
        })
        if self.image is not None:
            env["image"] = {"name": self.image.name, "hash": self.image.hash, "manifest": self.image.manifest}
        self.db.set_environment(self.run_id, env)

    def _cleanup(self) -> list[str]:
        errors = []
        for res in reversed(self.created):
            self.progress.step(f"removing {res.name} and its disks")
            try:
                self.driver.remove_vm(res)
            except VmbenchError as exc:
                errors.append(exc.message)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the rest of the cleanup
                log.exception("removing %s", res.name)
                errors.append(f"{res.name}: internal error: {exc!r}")
        self.created.clear()
        if self.host_workdir:
            try:
                ops.remove_tree(self.host, self.host_workdir, inside=self._host_work_root)
            except VmbenchError as exc:
                errors.append(f"host work directory {self.host_workdir}: {exc.message}")
            except Exception as exc:  # noqa: BLE001
                errors.append(f"host work directory {self.host_workdir}: internal error: {exc!r}")
        return errors

    # ---- one boot --------------------------------------------------------------------------

    def _run_group(self, group: BootGroup, steps: list[Step]) -> None:
        s = self.scenario
        n = len(self.plan.boots)
        what = "storage" if s.host_only else "VM"
        settings = ", ".join(f"{k}={v}" for k, v in (storage_settings_of(group.vm) if s.host_only else settings_of(group.vm)).items())
        if not steps:
            self.progress.step(f"{what} {group.seq}/{n}: already measured ({settings})")
            return
        self.progress.step(f"{what} {group.seq}/{n}: {settings}")
        request = VmRequest(seq=group.seq, vm=group.vm, scratch_size=s.storage.scratch_size, cells=tuple(c.name for c in group.cells))
        res = self.driver.new_resources(self.tag, request)
        self.created.append(res)  # tracked before anything exists, so cleanup always sees it
        assert self.ledger is not None and self.accel is not None and self.measurer is not None and self.outcome is not None
        if not s.host_only:
            self.ledger.add("domain", res.name)
        host_steps = [st for st in steps if st.side == "host"]
        guest_steps = [st for st in steps if st.side == "guest"]
        if s.host_only:
            self.step = f"creating the storage of {group.cells[0].name}"
            self.driver.create_host_reference(self.tag, request, res)
        else:
            self.step = f"creating the disks of VM {group.seq} ({res.name})"
            self.driver.create_vm(self.tag, request, res)
        for v in res.volumes:
            self.ledger.add("volume", v)
        if res.storage_problems:  # a ZFS property did not take: nothing on this storage is measured
            for cell in group.cells:
                self.record_cell(cell, None, res.storage_problems, {"storage": res.storage})
                self.progress.warn(f"cell {cell.name} is INVALID, not measured: " + "; ".join(res.storage_problems))
                self.outcome.invalid_cells.append(cell.name)
            host_steps = guest_steps = []
        if host_steps:
            target = res.host_target or self.driver.create_host_reference(self.tag, request, res)
            self.step = f"measuring the host on {target}"
            self.progress.step(f"host: fio on {target} ({s.storage.describe() if s.host_only else 'the scratch disk’s storage, before boot'})")
            host_cell = next((c for c in group.cells if c.name == host_steps[0].cell), None)
            cell_id = None if host_cell is None else self.record_cell(host_cell, None, [], {"storage": res.storage})
            self.measurer.measure(Where(self.host, "host", self.host_workdir, target, "host", cell=host_cell, cell_id=cell_id,
                                        settings=storage_settings_of(group.vm) if s.host_only else {},
                                        zfs_pool=s.storage.zfs_pool), host_steps)
        if guest_steps:
            self.step = f"booting VM {group.seq} ({res.name})"
            self.progress.step(f"booting {res.name} ({self.accel.name})")
            guest = self.driver.boot(self.tag, request, res, self.progress, s.hypervisor.boot_timeout)
            self.boots_started += 1
            self.progress.step(f"{res.name}: guest agent answered after {guest.boot_seconds:.0f}s")
            boot_id = self.db.add_boot(
                self.run_id, seq=group.seq, vm_key=vm_key(group.vm), settings_json=settings_of(group.vm), domain_name=guest.name,
                accelerator=self.accel.name, domain_xml=res.native_config, boot_seconds=guest.boot_seconds, attempt=self.attempt,
            )
            self.step = f"reading back the settings of {res.name}"
            disk, evidence, effective = self.inspect(guest, boot_id)
            if res.storage:
                evidence["storage"] = res.storage
            self._guest_crypto(group, guest, boot_id, effective)
            raw_done_by: str | None = None  # cells of one boot share the VM: the raw disk is measured once
            for cell in group.cells:
                cell_steps = [st for st in guest_steps if st.cell == cell.name]
                raw_done_by = self._run_cell(cell, guest, disk, boot_id, evidence, effective, raw_done_by, cell_steps) or raw_done_by
        self.step = f"removing {res.name}"
        self.progress.step(f"removing {'the storage of ' + group.cells[0].name if s.host_only else res.name}")
        self.driver.remove_vm(res)
        self.created.remove(res)

    def inspect(self, guest: Guest, boot_id: int) -> tuple[ScratchDisk, dict, dict]:
        gt = guest.transport
        gt.run(["mkdir", "-p", GUEST_WORKDIR], timeout=60)
        applied = guest.applied()
        facts = guest_facts(gt)
        disk = find_scratch(gt, guest.resources.scratch_serial)
        gdisk = disk_evidence(gt, disk, root_disk_name(gt))
        eff = effective_settings(applied, guest_view(gdisk, facts))
        facts_stored = {k: v for k, v in facts.items() if k != "cpu_flags"}
        facts_stored["cpu_flags"] = " ".join(facts["cpu_flags"])
        self.db.update_boot(
            boot_id, live_xml=applied.native_config, qemu_cmdline_json=list(applied.qemu_cmdline),
            guest_json={**facts_stored, "scratch": gdisk, "effective": eff, "applied": applied.typed(), **applied.details},
        )
        evidence = {"effective": eff, "guest_disk": gdisk, "guest_kernel": facts["kernel"], "guest_aes": facts["aes"],
                    "qemu_pid": applied.qemu_pid}
        # Loading aesni_intel without ssse3/pclmulqdq under TCG would oops the guest kernel.
        self.broken_crypto = bool(self.accel and self.accel.name == "tcg" and facts["aes"]
                                  and not (facts["ssse3"] and facts["pclmulqdq"]))
        return disk, evidence, eff

    def _run_cell(self, cell: Cell, guest: Guest, disk: ScratchDisk, boot_id: int, evidence: dict, eff: dict,
                  raw_done_by: str | None, steps: list[Step]) -> str | None:
        """Measure a cell's pending steps; returns the cell's name if it measured the raw disk."""
        assert self.accel is not None and self.outcome is not None and self.measurer is not None
        if not steps:
            return None
        found = problems(cell.vm, eff, self.accel.name)
        raw_steps = [st for st in steps if st.stack is None]
        measured_raw_in = raw_done_by or (cell.name if raw_steps else None)
        stored = self.db.cell_by_name(self.run_id, cell.name)
        rebuilt = {st.stack for st in steps}
        stored_evidence = (stored or {}).get("evidence") or {}
        kept = [l for l in stored_evidence.get("layers", []) if l.get("stack") not in rebuilt]  # stacks not rebuilt now
        # which cell's rows are this cell's raw-disk figures (kept from an earlier attempt when not measured now)
        raw_source = measured_raw_in or stored_evidence.get("raw_measured_in") or cell.name
        evidence = dict(evidence, raw_measured_in=raw_source, layers=kept)
        cell_id = self.record_cell(cell, boot_id, found, evidence, stored)
        if found:
            self.progress.warn(f"cell {cell.name} is INVALID, not measured: " + "; ".join(found))
            self.outcome.invalid_cells.append(cell.name)
            return None
        where = Where(guest.transport, "guest", GUEST_WORKDIR, disk.path, self.accel.name, cell=cell, cell_id=cell_id,
                      boot_id=boot_id, layer="raw", settings=settings_of(cell.vm),
                      # the host is sampled too while the guest's fio runs: its CPU and, on ZFS, the pool
                      host_side=self.host, host_workdir=self.host_workdir, host_target=guest.resources.scratch_path,
                      zfs_pool=self.scenario.storage.zfs_pool, cpu=self._cpu_cost(boot_id, guest, evidence.get("qemu_pid")),
                      write_rate=cell.vm.limits.write_rate(PRECONDITION_BS), lift_limits=guest.limits_lifted)
        if raw_steps:
            self.step = f"measuring {cell.name}: raw disk"
            self.measurer.measure(where, raw_steps)
        elif raw_done_by:
            self.progress.step(f"{cell.name}: raw disk already measured in cell {raw_done_by} (same VM)")
        for stack in cell.stacks:
            stack_steps = [st for st in steps if st.stack == stack.name]
            if not stack_steps:
                continue
            built = self._measure_stack(where, disk, stack, stack_steps)
            evidence["layers"] += built
            self.db.update_cell(cell_id, evidence_json=evidence)
        return cell.name if raw_steps else None

    def _cpu_cost(self, boot_id: int, guest: Guest, pid: object) -> CpuCost | None:
        """The boot's sampler of its QEMU process (one per boot: its idle cost is measured once)."""
        if not isinstance(pid, int):
            return None
        if boot_id not in self.cpu_costs:
            self.cpu_costs[boot_id] = CpuCost(self.host, pid, guest.transport)
        return self.cpu_costs[boot_id]

    def record_cell(self, cell: Cell, boot_id: int | None, found: list[str], evidence: dict, stored: dict | None = None) -> int:
        """Add or update a cell's row (a resumed run's, or the one its host reference made)."""
        stored = stored or self.db.cell_by_name(self.run_id, cell.name)
        settings = storage_settings_of(cell.vm) if self.scenario.host_only else settings_of(cell.vm)
        values = dict(settings_json=settings, changed_json=list(cell.changed), stacks_json=[st.name for st in cell.stacks],
                      valid=not found, problems_json=found, evidence_json=evidence)
        if boot_id is not None:
            values["boot_id"] = boot_id
        if stored:
            self.db.update_cell(stored["id"], **values)
            return int(stored["id"])
        return self.db.add_cell(self.run_id, seq=self.scenario.cells.index(cell) + 1, name=cell.name, **values)

    def _measure_stack(self, base: Where, disk: ScratchDisk, stack: Stack, steps: list[Step]) -> list[dict]:
        """Build the stack layer by layer (up to its last pending layer), measure the pending
        steps on each layer, tear it down; returns how each layer was built."""
        assert base.cell is not None and self.measurer is not None
        cell = base.cell
        builder = StackBuilder(base.side, disk, stack)
        top = max(st.depth for st in steps)
        finished = False
        record: list[dict] = []
        try:
            for depth in range(1, top + 1):
                label = stack.layers[depth - 1].label
                self.step = f"in cell {cell.name}"  # the builder's errors name the stack and layer
                self.progress.step(f"{cell.name}: stack {stack.name}: building {label}")
                built = builder.build_next()
                record.append({"stack": stack.name, "layer": built.path, "seconds": round(built.seconds, 2),
                               "commands": built.commands, "device": built.device, "target": built.target})
                if built.is_file:
                    need = max(j.size for j in self.scenario.jobs)
                    free = builder.free_bytes()
                    if free < need * 1.05:
                        raise GuestError(f"stack {stack.name}: the {built.layer.label} filesystem has {human_size(free)} free; the jobs need {human_size(need)}",
                                         "raise storage.scratch_size or lower the jobs' size")
                layer_steps = [st for st in steps if st.depth == depth]
                if layer_steps:
                    self.step = f"measuring {cell.name}: {built.path}"
                    where = replace(base, target=built.target, stack=stack.name, layer=built.path, depth=depth)
                    self.measurer.measure(where, layer_steps)
            finished = True
        finally:
            self.progress.step(f"{cell.name}: stack {stack.name}: tearing down")
            try:
                errors = builder.teardown()
            except VmbenchError as exc:
                errors = [exc.message]
            if errors and finished:
                raise GuestError(f"stack {stack.name} did not tear down cleanly: " + "; ".join(errors),
                                 "the next stack cannot start from a clean disk; the VM is removed")
            if errors:
                self.progress.warn(f"stack {stack.name}: teardown after the failure was incomplete (the VM is removed anyway): " + "; ".join(errors))
        return record

    # ---- crypto ceilings -------------------------------------------------------------------

    def _guest_crypto(self, group: BootGroup, guest: Guest, boot_id: int, eff: dict) -> None:
        s = self.scenario
        if not s.crypto_benchmark or group.cpu_label in self.crypto_done:
            return
        if self.broken_crypto:
            self.progress.warn(f"{guest.name}: skipping cryptsetup benchmark: CPU {group.cpu_label} has aes without ssse3/pclmulqdq under TCG")
            return
        self.step = f"cryptsetup benchmark in {guest.name}"
        self.progress.step(f"{guest.name}: cryptsetup benchmark for CPU {group.cpu_label}")
        for fig in run_benchmarks(guest.transport, s.crypto_benchmark):
            self.db.add_crypto(self.run_id, side="guest", boot_id=boot_id, cpu=group.cpu_label, aes_flag=eff.get("guest_aes"),
                               cipher=fig.cipher, key_bits=fig.key_bits, encrypt_mib_s=fig.encrypt_mib_s,
                               decrypt_mib_s=fig.decrypt_mib_s, error=fig.error, attempt=self.attempt)
        self.crypto_done.add(group.cpu_label)

    def _host_crypto(self) -> None:
        self.progress.step("host: cryptsetup benchmark")
        for fig in run_benchmarks(self.host, self.scenario.crypto_benchmark):
            self.db.add_crypto(self.run_id, side="host", boot_id=None, cpu="host", aes_flag=self.host_aes, cipher=fig.cipher,
                               key_bits=fig.key_bits, encrypt_mib_s=fig.encrypt_mib_s, decrypt_mib_s=fig.decrypt_mib_s,
                               error=fig.error, attempt=self.attempt)
