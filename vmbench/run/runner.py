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
from dataclasses import replace
from typing import Mapping

from .. import __version__
from ..drivers.base import Accelerator, Guest, HypervisorDriver, VmResources
from .environment import host_environment
from .fleet import RunHost, make_hosts
from ..errors import HypervisorError, Interrupted, PreflightError, VmbenchError
from ..guest.crypto import run_benchmarks
from ..guest.disk import ScratchDisk
from ..images import Image
from .bootgroup import BootGroupRun, read_back
from .ledger import Ledger
from .loadstep import LoadStepRun
from .measure import Measurer
from ..paths import StatePaths
from .plan import Plan, make_plan
from .rados import remove_bench
from .preflight import RunPreflight
from .session import RunOutcome
from ..progress import Progress
from ..results.db import ResultsDB, RunRow
from ..results.environment import Environment
from ..results.key import MeasurementKey
from ..results.records import BootRecord, CellRecord, CryptoRecord, Settings
from ..scenario.model import Cell
from ..scenario.spec import Scenario
from .signals import signals_deferred, signals_raise
from ..transport import ops
from ..transport.base import Transport
from ..scenario.axes import settings_of, storage_settings_of
from ..storage.radosbench import NAMESPACE, bench_namespace

log = logging.getLogger(__name__)
#: said when a failed run also left something it made (the cleanup warnings name each)
LEFT_BEHIND_HINT = ("some of what the run made could not be removed (each named above, with its host): "
                    "`vmbench cleanup SCENARIO` removes it once its host answers again, then `vmbench run --resume` finishes the run")


def new_run_tag() -> str:
    return "r" + secrets.token_hex(4)


class Runner:
    def __init__(self, scenario: Scenario, db: ResultsDB, progress: Progress, *, state: StatePaths | None = None,
                 driver: HypervisorDriver | None = None, resume: RunRow | None = None,
                 drivers: Mapping[str, HypervisorDriver] | None = None) -> None:
        self.scenario = scenario
        self.plan: Plan = make_plan(scenario)
        self.db = db
        self.progress = progress
        self.state = state or StatePaths.default()
        if driver is not None:
            drivers = {scenario.hypervisor.host_label: driver}
        #: every host of the run by name (one driver each), the primary first (:mod:`.fleet`)
        self.hosts: dict[str, RunHost] = ({label: RunHost(label, d) for label, d in drivers.items()} if drivers is not None
                                          else make_hosts(scenario.hypervisor, scenario.storage, self.state))
        self.driver = next(iter(self.hosts.values())).driver
        self.host: Transport = self.driver.host
        self.placed: dict[str, str] = {}  # VM name -> the name of the host it was created on
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

    # ---- preflight -----------------------------------------------------------------------

    def preflight(self) -> None:
        """Everything that can fail before anything is provisioned (:class:`RunPreflight`), on
        every host; the hosts of one run must run their guests with the same accelerator."""
        many = len(self.hosts) > 1
        for label, rh in self.hosts.items():
            checks = RunPreflight(self.scenario, self.plan, rh.driver, self.progress, self.state, self.resume,
                                  host=label if many else None)
            try:
                checks.check()
            finally:  # what the checks found before a refusal is kept too
                if rh.driver is self.driver:
                    self.image, self.accel = checks.image, checks.accel
            if self.accel is not None and checks.accel is not None and checks.accel.name != self.accel.name:
                raise PreflightError(f"host {label} runs guests with {checks.accel.name} ({checks.accel.reason}), host "
                                     f"{next(iter(self.hosts))} with {self.accel.name}: their VMs' figures would not compare",
                                     "run on hosts with the same accelerator (hypervisor.accel: tcg forces TCG everywhere)")

    def driver_for(self, host: str) -> HypervisorDriver:
        """The driver of host ``host`` (a name of :attr:`hosts`; '' or an unknown name: the primary)."""
        return self.host_of(host).driver

    def host_of(self, host: str) -> RunHost:
        return self.hosts.get(host) or next(iter(self.hosts.values()))

    def driver_of(self, res: VmResources) -> HypervisorDriver:
        """The driver of the host ``res`` was created on."""
        return self.driver_for(self.placed.get(res.name, ""))

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
            host_argv = {m.job: m.argv for m in self.db.measurements(self.run_id) if m.side == "host"}
            self.progress.step(f"resuming run {self.run_id} (attempt {self.attempt}): {sum(map(len, stored.values()))} measurement(s) already stored")
        else:
            self.run_id = self.db.start_run(RunRow.starting(tag=self.tag, scenario_name=s.name, scenario_path=s.path,
                                                            scenario_text=s.text, plan=self.plan.record().to_row(),
                                                            version=__version__))
            stored, host_argv = {}, {}
        self.measurer = Measurer(s, self.db, self.run_id, self.attempt, self.progress, host_argv, stored, run_tag=self.tag,
                                 ceph=self.driver.ceph)
        return stored

    def _run(self) -> RunOutcome:
        stored = self._start()
        self.outcome = RunOutcome(self.run_id, self.tag, "running")
        status, error, interrupted, cleanup_errors = "failed", None, False, []
        failure: VmbenchError | None = None
        try:
            self._measure(stored)
            status = "ok"
        except KeyboardInterrupt:
            status, error, interrupted = "interrupted", f"interrupted by the user while {self.step}", True
        except VmbenchError as exc:
            exc.message = f"{self.step}: {exc.message}"
            exc.args = (exc.message,)
            error, failure = exc.message, exc
            raise
        except OSError as exc:
            error = f"{self.step}: {exc.strerror or exc}" + (f": {exc.filename}" if exc.filename else "")
            raise
        except Exception as exc:  # a bug: still clean up and record it
            error = f"internal error while {self.step}: {exc!r}"
            raise
        finally:
            cleanup_errors = self._finish(status, error)
            if cleanup_errors and failure is not None:  # e.g. a host lost with VMs on it: what is left, and how it goes
                failure.hint = "; ".join(filter(None, [failure.hint, LEFT_BEHIND_HINT]))
        if interrupted:
            if cleanup_errors:
                raise Interrupted("interrupted; some of what this run created could not be removed", "run `vmbench cleanup`")
            raise Interrupted("interrupted; removed everything this run created",
                              f"partial results are in run {self.run_id}; `vmbench run --resume {self.run_id}` finishes it")
        if cleanup_errors:
            raise HypervisorError(f"run {self.run_id} measured everything but could not remove all it created",
                                  "run `vmbench cleanup`")
        return self.outcome

    def _measure(self, stored: dict[MeasurementKey, dict[int, float]]) -> None:
        """The run between its start and its cleanup: its ledger, environment and work
        directory, then its pending steps (boot group by boot group, or load unit by load
        unit) and the host's crypto benchmark."""
        s = self.scenario
        assert self.outcome is not None
        self.ledger = Ledger.create(self.state.runs, self.tag, uri=s.hypervisor.uri, scenario=s.path,
                                    host=s.hypervisor.host_label, run_id=self.run_id, hosts=list(self.hosts))
        self._record_environment()
        for rh in self.hosts.values():
            self.step = f"making a work directory on {rh.transport.name}"
            rh.workdir = ops.mkdtemp(rh.transport, rh.driver.paths.work, f"vmbench-{self.tag}-")
        self.host_workdir = next(iter(self.hosts.values())).workdir
        # a resume also goes on with adaptive repeats an earlier attempt left unfinished
        pending = self.plan.pending_steps(stored)
        self.outcome.skipped_steps = sum(st.repeat in stored.get(st.group(), {}) for st in self.plan.steps())
        if s.load is not None:
            for unit, unit_steps in self.plan.pending_units(stored):
                LoadStepRun(self, unit, unit_steps).run()
        else:
            for group in self.plan.boots:
                BootGroupRun(self, group, [st for st in pending if st.boot == group.seq]).run()
        if s.crypto_benchmark and not (self.resume and self.db.has_host_crypto(self.run_id)):
            self.step = "host crypto benchmark"
            self._host_crypto()

    def _finish(self, status: str, error: str | None) -> list[str]:
        """Clean up (stop signals only say so meanwhile) and record how the run ended;
        what could not be removed."""
        assert self.outcome is not None
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
            for rh in self.hosts.values():
                rh.driver.close()
        return cleanup_errors

    def _record_environment(self) -> None:
        env = host_environment(self.host)
        self.host_aes = env.get("host_aes")
        if self.resume is not None:
            before = self.resume.environment
            attempts = [*(before.attempts or []), {"attempt": self.attempt, "run_tag": self.tag}]
            self.db.set_environment(self.run_id, before.with_facts(attempts=attempts))
            return
        env.update(self.driver.describe_host())
        if len(self.hosts) > 1:  # each host's own facts, by name (the primary's are the run's)
            env["hosts"] = {label: {**host_environment(rh.transport), **rh.driver.describe_host()}
                            for label, rh in self.hosts.items()}
        assert self.accel is not None
        env.update({
            "accelerator": self.accel.name,
            "accelerator_reason": self.accel.reason,
            "run_tag": self.tag,
        })
        if self.image is not None:
            env["image"] = {"name": self.image.name, "hash": self.image.hash, "manifest": self.image.manifest}
        self.db.set_environment(self.run_id, Environment(env))

    def _cleanup(self) -> list[str]:
        errors = []
        for res in reversed(self.created):
            self.progress.step(f"removing {res.name} and its disks")
            host = self.placed.get(res.name, "") if len(self.hosts) > 1 else ""
            try:
                self.driver_of(res).remove_vm(res)
            except VmbenchError as exc:
                errors.append(f"on host {host}: {exc.message}" if host else exc.message)
            except Exception as exc:  # noqa: BLE001 - a bug must not stop the rest of the cleanup
                log.exception("removing %s", res.name)
                errors.append(f"{res.name}: internal error: {exc!r}")
        self.created.clear()
        errors += self._remove_left_benches()
        for rh in self.hosts.values():
            if not rh.workdir:
                continue
            try:
                ops.remove_tree(rh.transport, rh.workdir, inside=rh.driver.paths.work)
            except VmbenchError as exc:
                errors.append(f"host work directory {rh.workdir} on {rh.label}: {exc.message}")
            except Exception as exc:  # noqa: BLE001
                errors.append(f"host work directory {rh.workdir} on {rh.label}: internal error: {exc!r}")
        return errors

    def _remove_left_benches(self) -> list[str]:
        """The RADOS benches whose objects could not be removed when they ended, tried once more."""
        errors = []
        cfg = self.driver.ceph
        left = self.measurer.left_benches if self.measurer is not None else []
        for side, name in list(left):
            if cfg is not None and remove_bench(side, cfg, name):
                left.remove((side, name))
                continue
            errors.append(f"the rados bench objects of {name} in Ceph pool {cfg.pool if cfg else '?'} "
                          f"(namespace {bench_namespace(name)}, marker {NAMESPACE}/{name}) on {side.name}")
        return errors

    # ---- what a boot group and a load step share ----------------------------------------------

    def inspect(self, guest: Guest, boot: BootRecord) -> tuple[ScratchDisk, dict, dict]:
        """Find the scratch disk in ``guest`` and read back its settings (:func:`read_back`)."""
        disk, evidence, eff, self.broken_crypto = read_back(self.db, guest, boot, self.accel)
        return disk, evidence, eff

    def record_cell(self, cell: Cell, boot_id: int | None, found: list[str], evidence: dict,
                    stored: CellRecord | None = None) -> CellRecord:
        """Add or update a cell's row (a resumed run's, or the one its host reference made:
        its sequence number and, unless ``boot_id`` names one, its boot kept)."""
        stored = stored or self.db.cell_by_name(self.run_id, cell.name)
        settings = storage_settings_of(cell.vm) if self.scenario.host_only else settings_of(cell.vm)
        record = CellRecord(cell.name, run_id=self.run_id, boot_id=boot_id, seq=self.scenario.cells.index(cell) + 1,
                            settings=Settings.of(settings), changed=tuple(cell.changed), stacks=tuple(st.name for st in cell.stacks),
                            valid=not found, problems=tuple(found), evidence=evidence)
        if stored:
            record = replace(record, id=stored.id, seq=stored.seq, boot_id=stored.boot_id if boot_id is None else boot_id)
            self.db.update_cell(record)
            return record
        return replace(record, id=self.db.add_cell(record))

    # ---- crypto ceilings -------------------------------------------------------------------

    def _host_crypto(self) -> None:
        self.progress.step("host: cryptsetup benchmark")
        for fig in run_benchmarks(self.host, self.scenario.crypto_benchmark):
            self.db.add_crypto(CryptoRecord("host", "host", fig.cipher, fig.key_bits, aes_flag=self.host_aes,
                                            encrypt_mib_s=fig.encrypt_mib_s, decrypt_mib_s=fig.decrypt_mib_s, error=fig.error,
                                            run_id=self.run_id, attempt=self.attempt))
