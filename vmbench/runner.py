"""Running a scenario: provision, measure host and guest layer by layer, store, clean up.

Everything that can be checked is checked before anything is created.  Everything created
is tracked and removed on success, on failure and on Ctrl-C/SIGTERM (a second Ctrl-C
during cleanup is ignored; after a hard kill, ``vmbench cleanup`` finds the leftovers).
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import shutil
import signal
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Iterator

from . import __version__
from .drivers.base import Accelerator, Guest, HypervisorDriver, VmRequest, VmResources
from .environment import host_environment
from .errors import CommandError, GuestError, HypervisorError, Interrupted, PreflightError, VmbenchError
from .evidence import effective_settings, problems
from .fio.job import job_hash
from .fio.runner import precondition, run_fio
from .guest.crypto import run_benchmarks
from .guest.disk import ScratchDisk, find_scratch
from .guest.facts import disk_evidence, guest_facts, root_disk_name
from .guest.layers import StackBuilder
from .images import Image, current_image
from .ledger import Ledger
from .paths import StatePaths
from .plan import BootGroup, Plan, make_plan
from .progress import Progress
from .results.db import ResultsDB
from .scenario.model import Cell, Scenario, Stack
from .settings import CpuMode
from .transport.base import Transport
from .units import format_duration, format_size, human_size

log = logging.getLogger(__name__)
GUEST_WORKDIR = "/run/vmbench"


def new_run_tag() -> str:
    return "r" + secrets.token_hex(4)


@dataclass
class RunOutcome:
    run_id: int
    tag: str
    status: str
    invalid_cells: list[str] = field(default_factory=list)
    error: str | None = None


class Runner:
    def __init__(
        self,
        scenario: Scenario,
        db: ResultsDB,
        progress: Progress,
        *,
        state: StatePaths | None = None,
        host: Transport | None = None,
        driver: HypervisorDriver | None = None,
    ) -> None:
        from .drivers.libvirt.driver import LibvirtDriver
        from .transport.local import LocalTransport

        self.scenario = scenario
        self.plan: Plan = make_plan(scenario)
        self.db = db
        self.progress = progress
        self.state = state or StatePaths.default()
        self.host = host or LocalTransport()
        self.driver = driver or LibvirtDriver(scenario.hypervisor.uri, state=self.state, host=self.host)
        self.tag = new_run_tag()
        self.created: list[VmResources] = []
        self.accel: Accelerator | None = None
        self.image: Image | None = None
        self.run_id = 0
        self.host_workdir = ""
        self.outcome: RunOutcome | None = None
        self.crypto_done: set[str] = set()
        self.boots_started = 0  # counted from real boots, for tests
        self.ledger: Ledger | None = None
        self.host_aes: bool | None = None
        self.host_argv: dict[str, tuple[str, ...]] = {}  # job -> the host's fio argv, checked against the guest's

    # ---- preflight -----------------------------------------------------------------------

    def preflight(self) -> None:
        """Everything that can fail before anything is provisioned."""
        s = self.scenario
        self.progress.step(f"checking the machine for scenario {s.name}")
        try:
            self.host.run(["fio", "--version"], timeout=30)
        except CommandError:
            raise PreflightError("fio is not installed on the host", "apt-get install fio (make demo does it)") from None
        self.image = current_image(s.template)
        if self.image is None:
            raise PreflightError(
                f"the template image {s.template!r} is not built (or its recipe changed)",
                f"run `vmbench images build {s.template}` (make demo does it)",
            )
        cpu_models = {c.vm.cpu.model for c in s.cells if c.vm.cpu.mode is CpuMode.MODEL and c.vm.cpu.model}
        cpu_modes = {c.vm.cpu.mode for c in s.cells}
        self.accel = self.driver.prepare(
            image=self.image, accel=s.hypervisor.accel, pool=s.storage.pool, cpu_models=cpu_models,
            cpu_modes=cpu_modes, machine=s.hypervisor.machine, progress=self.progress,
        )
        self.progress.step(f"accelerator: {self.accel.name} ({self.accel.reason})")
        need = s.storage.scratch_size * 2 + (2 << 30)
        free = self.driver.pool_free_bytes(s.storage.pool)
        if free < need:
            raise PreflightError(
                f"storage pool {s.storage.pool} has {human_size(free)} free; this scenario needs about {human_size(need)}",
                "free some space or lower storage.scratch_size",
            )

    # ---- the run -------------------------------------------------------------------------

    def run(self) -> RunOutcome:
        with _signals_raise():
            try:
                self.preflight()
            except KeyboardInterrupt:
                raise Interrupted("interrupted before anything was created") from None
            return self._run()

    def _run(self) -> RunOutcome:
        s = self.scenario
        summary = self.plan.summary()
        summary["targets"] = [asdict(t) for t in s.targets]
        self.run_id = self.db.start_run(
            tag=self.tag, scenario_name=s.name, scenario_path=s.path, scenario_text=s.text, plan=summary, version=__version__,
        )
        self.outcome = RunOutcome(self.run_id, self.tag, "running")
        status, error, interrupted, cleanup_errors = "failed", None, False, []
        try:
            self.ledger = Ledger.create(self.state.runs, self.tag, uri=s.hypervisor.uri, scenario=s.path)
            self._record_environment()
            self.host_workdir = tempfile.mkdtemp(prefix=f"vmbench-{self.tag}-")
            for group in self.plan.boots:
                self._run_group(group)
            if s.crypto_benchmark:
                self._host_crypto()
            status = "ok"
        except KeyboardInterrupt:
            status, error, interrupted = "interrupted", "interrupted by the user", True
        except VmbenchError as exc:
            error = exc.message
            raise
        except OSError as exc:
            error = f"{exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
            raise
        except Exception as exc:  # a bug: still clean up and record it
            error = f"internal error: {exc!r}"
            raise
        finally:
            with _signals_deferred(self.progress):
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
        if interrupted:
            if cleanup_errors:
                raise Interrupted("interrupted; some of what this run created could not be removed", "run `vmbench cleanup`")
            raise Interrupted("interrupted; removed everything this run created", f"partial results are in run {self.run_id}")
        if cleanup_errors:
            raise HypervisorError(f"run {self.run_id} measured everything but could not remove all it created",
                                  "run `vmbench cleanup`")
        return self.outcome

    def _record_environment(self) -> None:
        env = host_environment(self.host)
        self.host_aes = env.get("host_aes")
        env.update(self.driver.describe_host())
        assert self.accel is not None and self.image is not None
        env.update({
            "accelerator": self.accel.name,
            "accelerator_reason": self.accel.reason,
            "image": {"name": self.image.name, "hash": self.image.hash, "manifest": self.image.manifest},
            "run_tag": self.tag,
        })
        self.db.set_environment(self.run_id, env)

    def _cleanup(self) -> list[str]:
        errors = []
        for res in reversed(self.created):
            self.progress.step(f"removing {res.name} and its disks")
            try:
                self.driver.remove_vm(res)
            except VmbenchError as exc:
                errors.append(exc.message)
        self.created.clear()
        if self.host_workdir:
            shutil.rmtree(self.host_workdir, ignore_errors=True)
        return errors

    # ---- one boot --------------------------------------------------------------------------

    def _run_group(self, group: BootGroup) -> None:
        s = self.scenario
        n = len(self.plan.boots)
        settings = ", ".join(f"{k}={v}" for k, v in group.vm.settings().items())
        self.progress.step(f"VM {group.seq}/{n}: {settings}")
        request = VmRequest(seq=group.seq, vm=group.vm, scratch_size=s.storage.scratch_size, pool=s.storage.pool,
                            cells=tuple(c.name for c in group.cells))
        res = self.driver.new_resources(self.tag, request)
        self.created.append(res)  # tracked before anything exists, so cleanup always sees it
        assert self.ledger is not None
        self.ledger.add("domain", res.name)
        self.driver.create_vm(self.tag, request, res)
        for v in res.volumes:
            self.ledger.add("volume", v)
        if s.host_baseline and group.seq == 1:
            target = res.host_target
            if target is None:
                target = self.driver.create_host_reference(self.tag, s.storage.pool, s.storage.scratch_size, group.seq)
                res.host_target = target
                self.ledger.add("volume", target)
            self._measure_host(target)
        self.progress.step(f"booting {res.name} ({self.accel.name if self.accel else '?'})")
        guest = self.driver.boot(self.tag, request, res, self.progress, s.hypervisor.boot_timeout)
        self.boots_started += 1
        self.progress.step(f"{res.name}: guest agent answered after {guest.boot_seconds:.0f}s")
        boot_id = self._record_boot(group, guest)
        disk, evidence, effective = self._inspect(guest, boot_id)
        self._guest_crypto(group, guest, boot_id, effective)
        raw_done_by: str | None = None  # cells of one boot share the VM, so the raw disk is measured once
        for cell in group.cells:
            if self._run_cell(cell, guest, disk, boot_id, evidence, effective, raw_done_by):
                raw_done_by = raw_done_by or cell.name
        self.progress.step(f"removing {res.name}")
        self.driver.remove_vm(res)
        self.created.remove(res)

    def _record_boot(self, group: BootGroup, guest: Guest) -> int:
        return self.db.add_boot(
            self.run_id, seq=group.seq, vm_key=group.vm.key(), settings_json=group.vm.settings(),
            domain_name=guest.name, accelerator=self.accel.name if self.accel else "?",
            domain_xml=guest.resources.domain_xml, boot_seconds=guest.boot_seconds,
        )

    def _inspect(self, guest: Guest, boot_id: int) -> tuple[ScratchDisk, dict, dict]:
        gt = guest.transport
        gt.run(["mkdir", "-p", GUEST_WORKDIR], timeout=60)
        host_ev = guest.evidence()
        facts = guest_facts(gt)
        disk = find_scratch(gt, guest.resources.scratch_serial)
        root = root_disk_name(gt)
        gdisk = disk_evidence(gt, disk, root)
        eff = effective_settings(host_ev, gdisk, facts, guest.resources.scratch_path, guest.resources.scratch_serial)
        facts_stored = {k: v for k, v in facts.items() if k != "cpu_flags"}
        facts_stored["cpu_flags"] = " ".join(facts["cpu_flags"])
        self.db.update_boot(
            boot_id, live_xml=host_ev.get("live_xml"), qemu_cmdline_json=host_ev.get("qemu_cmdline") or [],
            guest_json={**facts_stored, "scratch": gdisk, "effective": eff,
                        "query_block": host_ev.get("query_block"), "query_kvm": host_ev.get("query_kvm"),
                        "qom_iothread": host_ev.get("qom_iothread"), "query_iothreads": host_ev.get("query_iothreads")},
        )
        evidence = {"effective": eff, "guest_disk": gdisk, "guest_kernel": facts["kernel"], "guest_aes": facts["aes"]}
        if self.accel and self.accel.name == "tcg" and facts["aes"] and not (facts["ssse3"] and facts["pclmulqdq"]):
            # Loading aesni_intel would oops the guest kernel and hang every crypto user.
            self.broken_crypto = True
        else:
            self.broken_crypto = False
        return disk, evidence, eff

    def _run_cell(self, cell: Cell, guest: Guest, disk: ScratchDisk, boot_id: int, evidence: dict, eff: dict,
                  raw_done_by: str | None) -> bool:
        """Measure one cell; False if its settings did not take effect (then nothing is measured)."""
        assert self.accel is not None and self.outcome is not None
        found = problems(cell.vm, eff, self.accel.name)
        evidence = dict(evidence, raw_measured_in=raw_done_by or cell.name, layers=[])
        cell_id = self.db.add_cell(
            self.run_id, boot_id=boot_id, seq=self.scenario.cells.index(cell) + 1, name=cell.name,
            settings_json=cell.vm.settings(), changed_json=list(cell.changed), stacks_json=[st.name for st in cell.stacks],
            valid=not found, problems_json=found, evidence_json=evidence,
        )
        if found:
            self.progress.warn(f"cell {cell.name} is INVALID, not measured: " + "; ".join(found))
            self.outcome.invalid_cells.append(cell.name)
            return False
        gt = guest.transport
        if raw_done_by is None:
            self._measure(gt, "guest", cell, cell_id, None, "raw", 0, disk.path, cell.vm.settings())
        else:
            self.progress.step(f"{cell.name}: raw disk already measured in cell {raw_done_by} (same VM)")
        for stack in cell.stacks:
            built = self._measure_stack(gt, cell, cell_id, disk, stack)
            evidence["layers"] += built
            self.db.update_cell(cell_id, evidence_json=evidence)
        return True

    def _measure_stack(self, gt: Transport, cell: Cell, cell_id: int, disk: ScratchDisk, stack: Stack) -> list[dict]:
        """Build, measure and tear down one stack; returns how each layer was built."""
        builder = StackBuilder(gt, disk, stack)
        finished = False
        record: list[dict] = []
        try:
            for depth in range(1, len(stack.layers) + 1):
                self.progress.step(f"{cell.name}: stack {stack.name}: building {stack.layers[depth - 1].label}")
                built = builder.build_next()
                record.append({"stack": stack.name, "layer": built.path, "seconds": round(built.seconds, 2),
                               "commands": built.commands, "device": built.device, "target": built.target})
                if built.is_file:
                    need = max(j.size for j in self.scenario.jobs)
                    free = builder.free_bytes()
                    if free < need * 1.05:
                        raise GuestError(f"stack {stack.name}: the {built.layer.label} filesystem has {human_size(free)} free; the jobs need {human_size(need)}",
                                         "raise storage.scratch_size or lower the jobs' size")
                if stack.measures(depth):
                    self._measure(gt, "guest", cell, cell_id, stack.name, built.path, depth, built.target, cell.vm.settings())
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

    # ---- measurements ----------------------------------------------------------------------

    def _measure_host(self, target: str) -> None:
        self.progress.step(f"host: fio on {target} (the scratch disk's storage, before the VM boots)")
        self._measure(self.host, "host", None, None, None, "host", 0, target, {})

    def _measure(self, side: Transport, side_name: str, cell: Cell | None, cell_id: int | None, stack: str | None,
                 layer: str, depth: int, target: str, settings: dict) -> None:
        s = self.scenario
        slow = side_name == "guest" and self.accel is not None and self.accel.name == "tcg"
        workdir = GUEST_WORKDIR if side_name == "guest" else self.host_workdir
        where = "host" if cell is None else f"{cell.name}: {layer}"
        biggest = max(s.jobs, key=lambda j: j.size)
        self.progress.step(f"{where}: preconditioning {format_size(biggest.size)} of {target}")
        pre = precondition(side, biggest, target, workdir, slow=slow)
        log.debug("precondition %s: %s", target, pre)
        total = len(s.jobs) * s.repeats
        i = 0
        for repeat in range(1, s.repeats + 1):
            for job in s.jobs:
                i += 1
                label = f"{where}: {job.name}" + (f" #{repeat}" if s.repeats > 1 else "")
                dur = job.duration
                self.progress.step(f"{label} ({i}/{total}, {format_duration(dur) if dur else '?'})")
                if not job.direct:
                    _drop_caches(side)
                host_argv = self.host_argv.get(job.name) if side_name == "guest" else None
                run = run_fio(side, job, target, workdir, label=label, progress=self.progress, slow=slow, must_match=host_argv)
                if side_name == "host":
                    self.host_argv[job.name] = run.argv
                pcts = run.result.percentiles()
                self.db.add_measurement(
                    self.run_id, cell_id=cell_id, side=side_name, stack=stack, layer=layer, depth=depth, job=job.name,
                    job_params_json=job.params(), job_hash=job_hash(job), sync=job.is_sync, repeat=repeat, target=target,
                    argv_json=list(run.argv), settings_json=settings, accelerator=self.accel.name if self.accel and side_name == "guest" else "host",
                    started_at=time.strftime("%Y-%m-%dT%H:%M:%S"), iops=run.result.iops, bw_bytes=run.result.bw_bytes,
                    p50_ns=pcts[50.0], p95_ns=pcts[95.0], p99_ns=pcts[99.0], p999_ns=pcts[99.9],
                    clat_bins_json=run.result.clat.to_json(), fio_json=run.raw_json,
                )
                self.progress.status(f"{label}: {run.result.iops:,.0f} IOPS, {run.result.bw_bytes / 1e6:,.1f} MB/s")

    # ---- crypto ceilings -------------------------------------------------------------------

    def _guest_crypto(self, group: BootGroup, guest: Guest, boot_id: int, eff: dict) -> None:
        s = self.scenario
        if not s.crypto_benchmark or group.cpu_label in self.crypto_done:
            return
        if self.broken_crypto:
            self.progress.warn(f"{guest.name}: skipping cryptsetup benchmark: CPU {group.cpu_label} has aes without ssse3/pclmulqdq under TCG")
            return
        self.progress.step(f"{guest.name}: cryptsetup benchmark for CPU {group.cpu_label}")
        for fig in run_benchmarks(guest.transport, s.crypto_benchmark):
            self.db.add_crypto(self.run_id, side="guest", boot_id=boot_id, cpu=group.cpu_label, aes_flag=eff.get("guest_aes"),
                               cipher=fig.cipher, key_bits=fig.key_bits, encrypt_mib_s=fig.encrypt_mib_s,
                               decrypt_mib_s=fig.decrypt_mib_s, error=fig.error)
        self.crypto_done.add(group.cpu_label)

    def _host_crypto(self) -> None:
        self.progress.step("host: cryptsetup benchmark")
        for fig in run_benchmarks(self.host, self.scenario.crypto_benchmark):
            self.db.add_crypto(self.run_id, side="host", boot_id=None, cpu="host", aes_flag=self.host_aes, cipher=fig.cipher,
                               key_bits=fig.key_bits, encrypt_mib_s=fig.encrypt_mib_s, decrypt_mib_s=fig.decrypt_mib_s, error=fig.error)


def _drop_caches(side: Transport) -> None:
    side.run(["sync"], timeout=300)
    side.write_file("/proc/sys/vm/drop_caches", b"3\n", mode=None)


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _on_stop_signals(handler) -> Iterator[None]:
    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)


def _signals_raise() -> contextlib.AbstractContextManager:
    """Ctrl-C, SIGTERM and SIGHUP stop the run, which then cleans up.  Installed explicitly:
    a process started in the background inherits SIGINT ignored, and a run must still stop
    cleanly when asked."""

    def on_stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return _on_stop_signals(on_stop)


def _signals_deferred(progress: Progress) -> contextlib.AbstractContextManager:
    """During cleanup, stop signals only say that cleanup is under way."""

    def on_signal(signum: int, frame: object) -> None:
        progress.warn("cleaning up what this run created; please wait (vmbench cleanup can finish it later)")

    return _on_stop_signals(on_signal)
