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
from dataclasses import asdict

from .. import __version__
from ..drivers import make_driver
from ..drivers.base import Accelerator, Guest, HypervisorDriver, VmResources
from .environment import host_environment
from ..errors import HypervisorError, Interrupted, VmbenchError
from ..guest.crypto import run_benchmarks
from ..guest.disk import ScratchDisk
from ..images import Image
from .bootgroup import BootGroupRun, read_back
from .ledger import Ledger
from .loadstep import LoadStepRun
from .measure import Measurer
from ..paths import StatePaths
from .plan import Plan, make_plan
from .preflight import RunPreflight
from .session import RunOutcome
from ..progress import Progress
from ..results.db import ResultsDB, RunRow
from ..results.key import MeasurementKey
from ..scenario.model import Cell
from ..scenario.spec import Scenario
from .signals import signals_deferred, signals_raise
from ..transport import ops
from ..transport.base import Transport
from ..scenario.axes import settings_of, storage_settings_of

log = logging.getLogger(__name__)


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
        self.measurer = Measurer(s, self.db, self.run_id, self.attempt, self.progress, host_argv, stored, run_tag=self.tag,
                                 ceph=self.driver.ceph)
        return stored

    def _run(self) -> RunOutcome:
        stored = self._start()
        self.outcome = RunOutcome(self.run_id, self.tag, "running")
        status, error, interrupted, cleanup_errors = "failed", None, False, []
        try:
            self._measure(stored)
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
            cleanup_errors = self._finish(status, error)
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
            self.driver.close()
        return cleanup_errors

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

    # ---- what a boot group and a load step share ----------------------------------------------

    def inspect(self, guest: Guest, boot_id: int) -> tuple[ScratchDisk, dict, dict]:
        """Find the scratch disk in ``guest`` and read back its settings (:func:`read_back`)."""
        disk, evidence, eff, self.broken_crypto = read_back(self.db, guest, boot_id, self.accel)
        return disk, evidence, eff

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

    # ---- crypto ceilings -------------------------------------------------------------------

    def _host_crypto(self) -> None:
        self.progress.step("host: cryptsetup benchmark")
        for fig in run_benchmarks(self.host, self.scenario.crypto_benchmark):
            self.db.add_crypto(self.run_id, side="host", boot_id=None, cpu="host", aes_flag=self.host_aes, cipher=fig.cipher,
                               key_bits=fig.key_bits, encrypt_mib_s=fig.encrypt_mib_s, decrypt_mib_s=fig.decrypt_mib_s,
                               error=fig.error, attempt=self.attempt)
