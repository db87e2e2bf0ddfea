"""Running one load unit (:class:`~vmbench.run.plan.LoadUnit`): many VMs at once.

Its VMs' disks are created one by one, then the host reference runs (the same round on as
many host volumes at once) before the VMs boot, ``boot_parallel`` at a time.  On each layer
of each cell, every VM preconditions its target, then each round starts fio in every VM
together (threads released by one barrier just before fio starts), with a tail after the
measured window so the load outlasts every VM's window.  Each VM's clock is read against
this machine's before the round; fio's epoch-stamped logs then give every VM's measured
window and loaded time in one clock: the start skew, and whether each window was fully
loaded by every other VM (a VM whose window was not is kept, flagged and excluded from the
step's figures).  A unit is atomic: its measurements are stored in one transaction when it
finished; on any failure every VM of it is removed and nothing of it is stored.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from typing import Callable, Iterator, Sequence, TypeVar

from ..drivers.base import Guest, VmRequest, VmResources
from ..errors import VmbenchError
from ..fio import window as fio_window
from ..fio.job import PRECONDITION_BS, FioJob, to_precondition
from ..fio.runner import FioRequest, FioRun, Sampling, Together, run_fio
from ..guest.disk import ScratchDisk
from ..guest.layers import StackBuilder
from ..telemetry import nic
from ..results.db import now
from ..results.records import BootRecord, LoadRecord, Measurement, Settings
from ..scenario.load import LoadMember, Role
from ..scenario.model import Cell, Stack
from ..settings import Telemetry
from ..transport.base import Transport
from .evidence import problems
from .measure import Where, drop_caches, measurement_of, precondition_at
from .plan import LoadUnit, Step
from .session import RunSession
from ..scenario.axes import settings_of, vm_key

log = logging.getLogger(__name__)
T = TypeVar("T")
#: how long VMs wait for each other at the start of a round before giving up
BARRIER_SECONDS = 600.0
CLOCK_READINGS = 3
PAUSE_MS = 1000.0
#: a clock that moved more than this against the host's during a round is not trusted
DRIFT_MS = 1000.0


@dataclass
class Member:
    """One VM of the unit as it runs: its member, request, resources and (once booted) guest."""

    member: LoadMember
    request: VmRequest
    res: VmResources
    guest: Guest | None = None
    boot_id: int | None = None
    disk: ScratchDisk | None = None
    problems: tuple[str, ...] = ()
    host: str = ""  # the name of the host it runs on ('' in a one-host run)

    @property
    def label(self) -> str:
        return f"VM {self.member.vm} ({self.member.role.value})" + (f" on {self.host}" if self.host else "")


@dataclass(frozen=True)
class Side:
    """Where one member's fio runs in a round."""

    vm: int
    role: Role
    transport: Transport
    where: Where
    host: str = ""  # the host its VM (or its host volume) is on, in a run across several hosts


@contextlib.contextmanager
def on_host(host: str) -> Iterator[None]:
    """In a run across several hosts, a failure says which host it happened on."""
    try:
        yield
    except VmbenchError as exc:
        if host and not exc.message.startswith(f"on host {host}: "):
            exc.message = f"on host {host}: {exc.message}"
            exc.args = (exc.message,)
        raise


def clock_offset(side: Transport, clock: Callable[[], float] = time.time) -> tuple[float, float] | None:
    """``side``'s clock minus this machine's, and the uncertainty (ms): the reading with the
    shortest round trip of a few ``date`` calls.  None when the side cannot tell."""
    samples = []
    for _ in range(CLOCK_READINGS):
        before = clock()
        try:
            out = side.run(["date", "+%s.%N"], timeout=60).stdout.strip()
        except (VmbenchError, OSError) as exc:
            log.warning("cannot read the clock of %s: %s", side.name, exc)
            return None
        after = clock()
        try:
            samples.append((before, float(out), after))
        except ValueError:
            log.warning("%s: date printed %r", side.name, out[:40])
            return None
    offset, uncertainty = fio_window.clock_offset(samples)
    return offset * 1000.0, uncertainty * 1000.0


def in_parallel(calls: Sequence[Callable[[], T]], workers: int, on_failure: Callable[[], None] | None = None) -> list[T]:
    """Run ``calls`` on ``workers`` threads; their results in order.  On the first failure
    (or Ctrl-C) the calls not started are cancelled, ``on_failure`` runs (it should make the
    running calls end soon, e.g. by removing what they wait for), every running call is
    waited for, and the first error is raised: nothing keeps running behind the caller."""
    results: dict[int, T] = {}
    ex = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="vmbench-load")
    futures: dict[Future, int] = {}
    try:
        futures = {ex.submit(call): i for i, call in enumerate(calls)}
        for f in as_completed(futures):
            results[futures[f]] = f.result()
    except BaseException:
        for f in futures:
            f.cancel()
        if on_failure is not None:
            try:
                on_failure()
            except Exception:  # noqa: BLE001 - the first error is the one to report
                log.exception("after a failure in a parallel step")
        ex.shutdown(wait=True, cancel_futures=True)
        raise
    ex.shutdown(wait=True)
    return [results[i] for i in range(len(calls))]


def _offset_during(before: tuple[float, float] | None, after: tuple[float, float] | None, before_at: float,
                   after_at: float) -> tuple[float, float, float] | None:
    """A side's clock offset over a round from readings before and after it: (the mean offset,
    its uncertainty, how far the clock drifted from the host's during the round), ms."""
    if before is None or after is None:
        return None
    drift = after[0] - before[0]
    return (before[0] + after[0]) / 2, max(before[1], after[1]) + abs(drift) / 2, drift


def _excluded(off: tuple[float, float, float] | None, c: "fio_window.Coverage | None") -> str | None:
    """Why a VM's row is left out of its step's figures, or None."""
    if off is not None and abs(off[2]) > DRIFT_MS:
        # fio times I/O on the guest's clock: a clock off by seconds makes its IOPS and latency wrong
        return f"the guest's clock drifted {off[2] / 1000:+.1f} s during the round: its IOPS and latencies were timed on it"
    if c is not None and not c.loaded:
        return f"VM {c.short_of} was not loaded during {c.short_ms:.0f} ms of this VM's measured window"
    return None


def _clock_note(off: tuple[float, float, float] | None) -> str | None:
    if off is None:
        return "the clock could not be read: the window was not checked"
    if abs(off[2]) > DRIFT_MS:
        return (f"the clock drifted {off[2] / 1000:+.1f} s against the host's during the round: "
                "its window cannot be placed, so whether it was loaded was not checked")
    return None


class LoadStepRun:
    """One unit of a load run, driven with the runner's driver, database and records."""

    def __init__(self, runner: RunSession, unit: LoadUnit, steps: list[Step]) -> None:
        self.r = runner
        self.unit = unit
        self.steps = steps
        self.s = runner.scenario
        assert self.s.load is not None
        self.load = self.s.load
        self.jobs = {j.name: j for j in self.s.jobs}
        self.rows: list[tuple[Measurement, dict[str, dict]]] = []
        self.members: list[Member] = []
        self.evidence: dict = {}  # VM 0's readings, stored with each cell
        self.link_speeds: dict[str, dict[str, int | None]] = {}  # host -> interface -> Mb/s (read once)

    # ---- the unit ------------------------------------------------------------------------

    def run(self) -> None:
        r, unit = self.r, self.unit
        n = unit.step.size
        total = len(self.r.plan.load_units())
        where_from = f"load unit {self.unit_no}/{total}: {unit.label}, {n} VM{'s' if n > 1 else ''}"
        if not self.steps:
            r.progress.step(f"{where_from}: already measured")
            return
        r.progress.step(where_from)
        assert r.ledger is not None
        many = len(r.hosts) > 1
        if many:
            self._check_hosts()
        for m, seq, placed in zip(unit.step.members, unit.seqs, unit.hosts):
            vm = unit.vm_of(m)
            request = VmRequest(seq=seq, vm=vm, scratch_size=self.s.storage.scratch_size, cells=tuple(c.name for c in unit.boot.cells))
            res = r.driver_for(placed).new_resources(r.tag, request)
            r.placed[res.name] = placed
            r.created.append(res)  # tracked before anything exists
            r.ledger.add("domain", res.name)
            self.members.append(Member(m, request, res, host=placed if many else ""))
        for mem in self.members:
            r.step = f"creating the disks of {mem.res.name} ({unit.label}{' on ' + mem.host if mem.host else ''})"
            with on_host(mem.host):
                r.driver_for(mem.host).create_vm(r.tag, mem.request, mem.res)
            for v in mem.res.volumes:
                r.ledger.add("volume", v)
        storage_problems = sorted({p for mem in self.members for p in mem.res.storage_problems})
        if storage_problems:
            for cell in unit.boot.cells:
                self._invalid(cell, storage_problems, {"storage": self.members[0].res.storage})
            self._remove_all()
            return
        if unit.has_host:
            self._host_reference()
        guest_steps = [st for st in self.steps if st.side == "guest"]
        if guest_steps:
            self._boot_all()
            for cell in unit.boot.cells:
                self._cell(cell, [st for st in guest_steps if st.cell == cell.name])
        r.step = f"storing the measurements of {unit.label}"
        r.db.add_measurements(r.run_id, self.rows)
        r.progress.step(f"{unit.label}: {len(self.rows)} measurement(s) stored")
        self._remove_all()

    def _check_hosts(self) -> None:
        """Before anything of the unit exists, each host with VMs in it says it is still there
        and has the memory they need (``check_step``), or refuses the unit naming itself (a
        host or node gone since the step before)."""
        r, unit = self.r, self.unit
        need: dict[str, list[int]] = {}
        for m, placed in zip(unit.step.members, unit.hosts):
            need.setdefault(placed, []).append(unit.vm_of(m).memory_mib << 20)
        for label, mems in need.items():
            r.step = f"checking host {label} before {unit.label}"
            r.driver_for(label).check_step(sum(mems), f"the {len(mems)} VM(s) placed there")

    @property
    def unit_no(self) -> int:
        return self.r.plan.load_units().index(self.unit) + 1

    def _remove_all(self) -> None:
        r = self.r
        r.step = f"removing the VMs of {self.unit.label}"
        for mem in reversed(self.members):
            r.progress.step(f"removing {mem.res.name}" + (f" on {mem.host}" if mem.host else ""))
            r.driver_for(mem.host).remove_vm(mem.res)
            r.created.remove(mem.res)
        self.members = []

    def _invalid(self, cell: Cell, found: list[str], evidence: dict) -> None:
        r = self.r
        assert r.outcome is not None
        r.record_cell(cell, None, found, evidence)
        r.progress.warn(f"cell {cell.name} ({self.unit.label}) is INVALID, not measured: " + "; ".join(found))
        if cell.name not in r.outcome.invalid_cells:
            r.outcome.invalid_cells.append(cell.name)

    # ---- booting ---------------------------------------------------------------------------

    def _boot_all(self) -> None:
        r = self.r
        assert r.accel is not None
        r.step = f"booting the VMs of {self.unit.label}"
        hosts = sorted({mem.host for mem in self.members})
        par = self.load.boot_parallel
        r.progress.step(f"booting {len(self.members)} VM(s), {par} at a time"
                        + (f" on each of {len(hosts)} hosts" if len(hosts) > 1 else "") + f" ({r.accel.name})")
        # each host boots its own VMs boot_parallel at a time
        slots = {h: threading.BoundedSemaphore(par) for h in hosts}

        def boot(mem: Member) -> Callable[[], Guest]:
            def call() -> Guest:
                with slots[mem.host], on_host(mem.host):
                    return r.driver_for(mem.host).boot(r.tag, mem.request, mem.res, None, self.s.hypervisor.boot_timeout)
            return call

        def stop_booting() -> None:  # a failed or interrupted boot: make the others end soon
            for mem in self.members:
                try:
                    r.driver_for(mem.host).remove_vm(mem.res)
                except Exception as exc:  # noqa: BLE001 - the runner's cleanup removes it again
                    log.warning("removing %s while its boot was stopped: %s", mem.res.name, exc)

        # submitted host by host in turn, so that every host's slots fill from the start
        per_host = [[m for m in self.members if m.host == h] for h in hosts]
        order = [m for turn in itertools.zip_longest(*per_host) for m in turn if m is not None]
        booted = dict(zip(map(id, order), in_parallel([boot(m) for m in order], par * len(hosts), stop_booting)))
        guests = [booted[id(m)] for m in self.members]
        r.boots_started += len(guests)
        for mem, guest in zip(self.members, guests):
            mem.guest = guest
            r.progress.step(f"{mem.res.name}{' on ' + mem.host if mem.host else ''}: guest agent answered after {guest.boot_seconds:.0f}s")
            record = BootRecord(run_id=r.run_id, seq=mem.request.seq, vm_key=vm_key(mem.request.vm),
                                settings=Settings.of(settings_of(mem.request.vm)), domain_name=guest.name, accelerator=r.accel.name,
                                domain_xml=mem.res.native_config, boot_seconds=guest.boot_seconds, started_at=now(),
                                attempt=r.attempt, load_step=self.unit.step.index, vm=mem.member.vm)
            mem.boot_id = r.db.add_boot(record)
            r.step = f"reading back the settings of {mem.res.name}"
            disk, evidence, eff = r.inspect(guest, replace(record, id=mem.boot_id))
            mem.disk = disk
            mem.problems = tuple(f"{mem.label}: {p}" for p in problems(mem.request.vm, eff, r.accel.name))
            if mem.member.vm == 0:
                self.evidence = dict(evidence, storage=mem.res.storage) if mem.res.storage else evidence

    # ---- the host reference -----------------------------------------------------------------

    def _host_reference(self) -> None:
        r = self.r
        steps = [st for st in self.steps if st.side == "host"]
        if not steps:
            return
        targets = []
        for mem in self.members:
            with on_host(mem.host):
                targets.append(mem.res.host_target or r.driver_for(mem.host).create_host_reference(r.tag, mem.request, mem.res))
        hosts = sorted({mem.host for mem in self.members})
        r.progress.step(f"host: {len(targets)} volume(s) at once, before the VMs boot"
                        + (f", placed as the VMs are ({', '.join(hosts)})" if len(hosts) > 1 else ""))
        sides = []
        for mem, t in zip(self.members, targets):
            rh = r.host_of(mem.host)
            sides.append(Side(mem.member.vm, mem.member.role, rh.transport,
                              Where(rh.transport, "host", rh.workdir, t, "host", settings={}, zfs_pool=self.s.storage.zfs_pool,
                                    host=rh.label),
                              host=mem.host))
        cell_id = None
        if self.unit.host_cell is not None:
            cell = next(c for c in self.unit.boot.cells if c.name == self.unit.host_cell)
            cell_id = r.record_cell(cell, None, [], {"storage": self.members[0].res.storage}).id
        sides = [replace(sd, where=replace(sd.where, cell_id=cell_id)) for sd in sides]
        self._measure(sides, steps, "host")

    # ---- a cell's layers --------------------------------------------------------------------

    def _cell(self, cell: Cell, steps: list[Step]) -> None:
        r = self.r
        assert r.accel is not None
        found = [p for mem in self.members for p in mem.problems]
        stored = r.db.cell_by_name(r.run_id, cell.name)
        evidence = dict(self.evidence, load_step=self.unit.step.index,
                        vms={mem.member.vm: mem.res.name for mem in self.members})
        if found:
            self._invalid(cell, found, evidence)
            return
        cell_id = r.record_cell(cell, self.members[0].boot_id, [], evidence, stored).id
        sides = []
        sampled: set[str] = set()
        for mem in self.members:
            assert mem.guest is not None and mem.disk is not None
            rh = r.host_of(mem.host)
            # each host is sampled once per round, alongside its first VM (VM 0 on the primary)
            samples = mem.host not in sampled
            sampled.add(mem.host)
            sides.append(Side(mem.member.vm, mem.member.role, mem.guest.transport, Where(
                mem.guest.transport, "guest", "/run/vmbench", mem.disk.path, r.accel.name, cell=cell, cell_id=cell_id,
                boot_id=mem.boot_id, layer="raw", settings=settings_of(mem.request.vm),
                host_side=rh.transport if samples else None, host_workdir=rh.workdir,
                host_target=mem.res.scratch_path, zfs_pool=self.s.storage.zfs_pool,
                write_rate=mem.request.vm.limits.write_rate(PRECONDITION_BS), lift_limits=mem.guest.limits_lifted, host=rh.label),
                host=mem.host))
        raw = [st for st in steps if st.stack is None]
        if raw:
            self._measure(sides, raw, f"{cell.name}: raw")
        for stack in cell.stacks:
            stack_steps = [st for st in steps if st.stack == stack.name]
            if stack_steps:
                self._stack(sides, stack, stack_steps, cell)

    def _stack(self, sides: list[Side], stack: Stack, steps: list[Step], cell: Cell) -> None:
        r = self.r
        builders = {mem.member.vm: StackBuilder(mem.guest.transport, mem.disk, stack)
                    for mem in self.members if mem.disk is not None and mem.guest is not None}
        top = max(st.depth for st in steps)
        try:
            for depth in range(1, top + 1):
                label = stack.layers[depth - 1].label
                r.step = f"in cell {cell.name}: building {label} in {len(builders)} VM(s)"
                r.progress.step(f"{cell.name}: stack {stack.name}: building {label} in every VM")
                built = in_parallel([b.build_next for b in builders.values()], len(builders))
                layer_steps = [st for st in steps if st.depth == depth]
                if layer_steps:
                    by_vm = dict(zip(builders, built))
                    layer = built[0].path
                    here = [replace(sd, where=replace(sd.where, target=by_vm[sd.vm].target, stack=stack.name, layer=layer, depth=depth))
                            for sd in sides]
                    self._measure(here, layer_steps, f"{cell.name}: {layer}")
        finally:
            errors = []
            for vm, b in builders.items():
                try:
                    errors += [f"VM {vm}: {e}" for e in b.teardown()]
                except VmbenchError as exc:
                    errors.append(f"VM {vm}: {exc.message}")
            if errors:
                r.progress.warn(f"stack {stack.name}: teardown incomplete (the VMs are removed): " + "; ".join(errors))

    # ---- rounds -------------------------------------------------------------------------------

    def _measure(self, sides: list[Side], steps: list[Step], label: str) -> None:
        """Precondition every side's target (at once), then every round and repeat."""
        r = self.r
        by_job = {j.name: j for j in self.s.jobs}
        todo = [(sd, pre) for sd in sides
                if (pre := to_precondition([by_job[name] for name in {st.job for st in steps if st.vm == sd.vm}])) is not None]
        if todo:
            r.step = f"preconditioning {label} on {len(todo)} target(s)"
            r.progress.step(f"{label}: preconditioning {len(todo)} of {len(sides)} target(s) at once (those whose jobs read)")
            in_parallel([functools.partial(precondition_at, sd.where, pre) for sd, pre in todo], len(todo))
        else:
            r.progress.step(f"{label}: not preconditioned (no job here reads)")
        by_vm = {sd.vm: sd for sd in sides}
        roles = {m.vm: m.role for m in self.unit.step.members}
        for rnd_no, rnd in enumerate(self.load.rounds(self.s.jobs), 1):
            for rep in sorted({st.repeat for st in steps}):
                these = [st for st in steps if st.repeat == rep and rnd.get(roles[st.vm]) == st.job]
                if these:
                    self._round([by_vm[st.vm] for st in these], these, label, rnd_no)

    def _round(self, sides: list[Side], steps: list[Step], label: str, round_no: int) -> None:
        r = self.r
        lead = self.load.lead_for([self.jobs[st.job] for st in steps])
        jobs = [self.load.as_run(self.jobs[st.job], lead) for st in steps]
        rep = steps[0].repeat
        what = ", ".join(sorted({j.name for j in jobs}))
        r.step = f"measuring {label}: {what} #{rep} in {len(sides)} VM(s) at once"
        r.progress.step(f"{label}: {what} #{rep}: {len(sides)} at once")
        for sd, job in zip(sides, jobs):
            if not job.direct:
                drop_caches(sd.transport)
        vms = [sd.vm for sd in sides]
        read_clocks = [functools.partial(clock_offset, sd.transport) for sd in sides]
        before = dict(zip(vms, in_parallel(read_clocks, len(sides))))
        before_at = time.time() * 1000
        nic_hosts = sorted({sd.host for sd in sides if sd.host})
        nic_before = {h: nic.read_counters(r.host_of(h).transport) for h in nic_hosts}
        started = time.monotonic()
        runs = self._run_together(sides, jobs, label)
        nic_rates = self._nic_rates(nic_before, time.monotonic() - started)
        # each clock is read again after the round: a guest clock that drifted is placed by
        # the offset interpolated to its window, and flagged when it drifted too far to trust
        after_at = time.time() * 1000
        after = dict(zip(vms, in_parallel(read_clocks, len(sides))))
        offsets = {vm: _offset_during(before[vm], after[vm], before_at, after_at) for vm in vms}
        if sides[0].where.side_name == "host":
            for job, run in zip(jobs, runs):
                r.measurer.host_argv.setdefault(job.name, run.argv)  # type: ignore[union-attr]
        placement = RoundPlacement.of(sides, runs, offsets)
        step_name = self.unit.step.name
        for sd, st, job, run in zip(sides, steps, jobs, runs):
            load = placement.load_json(sd.vm, step_name, round_no)
            if sd.host:  # a run across several hosts: the row's host, and its busiest NIC over the round
                load = dict(load, host=sd.host, nic=nic_rates.get(sd.host))
            m = replace(measurement_of(st.key(), sd.where, job, run, r.attempt), role=sd.role.value, load=LoadRecord.from_row(load))
            self.rows.append((m, dict(getattr(run, "series", None) or {})))
        skew = placement.skew
        r.progress.status(f"{label}: {what} #{rep}: " + ", ".join(f"VM {sd.vm} {run.result.iops:,.0f} IOPS" for sd, run in zip(sides, runs))
                          + ("" if skew is None else f"; start skew {skew:.0f} ms"))

    def _nic_rates(self, before: dict[str, dict[str, tuple[int, int]] | None], seconds: float) -> dict[str, dict | None]:
        """Each host's busiest interface over the round (:mod:`vmbench.telemetry.nic`), as stored."""
        out: dict[str, dict | None] = {}
        for host, counters in before.items():
            transport = self.r.host_of(host).transport
            after = nic.read_counters(transport) if counters is not None else None
            if counters is None or after is None:
                out[host] = None
                continue
            if host not in self.link_speeds:
                self.link_speeds[host] = nic.read_speeds(transport, sorted(after))
            rate = nic.busiest(counters, after, seconds, self.link_speeds[host])
            out[host] = rate.to_json() if rate is not None else None
        return out

    def _run_together(self, sides: list[Side], jobs: list[FioJob], label: str) -> list[FioRun]:
        """fio in every side at once, each with its tail; their runs in order."""
        r = self.r
        # every side's fio starts at once, sets its job up and waits, armed (vmbench.fio.gate);
        # once every side is armed, one barrier releases them all.  Before, the barrier sent the
        # fio commands off and fio's start-up in starved guests was inside the skew: 1.5-2.3 s
        # with 8 TCG guests on 2 cores (bench/start_skew.py); a common start time on each
        # guest's clock measured worse still, 3.6-5.6 s
        barrier = threading.Barrier(len(sides))
        armed = len(sides) > 1

        def start() -> None:
            barrier.wait(BARRIER_SECONDS)

        def request(sd: Side, job: FioJob) -> FioRequest:
            w = sd.where
            sampling = Sampling(telemetry=(w.side_name == "guest" or sd.vm == 0) and self.s.telemetry is Telemetry.ON,
                                zfs_pool=w.zfs_pool if w.side_name == "host" and sd.vm == 0 or w.host_side else None,
                                host_side=w.host_side, host_workdir=w.host_workdir if w.host_side else "",
                                host_target=w.host_target if w.host_side else None)
            must_match = r.measurer.host_argv.get(job.name) if w.side_name == "guest" else None  # type: ignore[union-attr]
            return FioRequest(job, w.target, w.workdir, f"{label}: {job.name} VM {sd.vm}", slow=w.slow, must_match=must_match,
                              sampling=sampling, together=Together(self.load.tail_seconds, epoch_logs=True,
                                                                    before_start=start, armed=armed))

        def go(sd: Side, job: FioJob) -> Callable[[], FioRun]:
            def call() -> FioRun:
                try:
                    with on_host(sd.host):
                        return run_fio(sd.transport, request(sd, job))
                except BaseException:
                    barrier.abort()
                    raise
            return call

        return in_parallel([go(sd, job) for sd, job in zip(sides, jobs)], len(sides))


@dataclass(frozen=True)
class RoundPlacement:
    """A round's measured windows on this machine's clock: each VM's clock offset over the
    round (mean, uncertainty, drift; None when unread), its window, the offsets trusted to
    place it (``known``), whether every window could be checked, each window's coverage by
    the others' load (when checked), the windows placed and their start skew."""

    offsets: dict[int, tuple[float, float, float] | None]
    windows: dict[int, fio_window.FioWindow]
    known: dict[int, float]
    checked: bool
    cover: dict[int, fio_window.Coverage]
    placed: dict[int, fio_window.FioWindow]
    skew: float | None

    @classmethod
    def of(cls, sides: Sequence[Side], runs: Sequence[FioRun],
           offsets: dict[int, tuple[float, float, float] | None]) -> RoundPlacement:
        windows = {sd.vm: run.window for sd, run in zip(sides, runs) if run.window is not None}
        known = {vm: o[0] for vm, o in offsets.items() if o is not None and abs(o[2]) <= DRIFT_MS}
        checked = len(windows) == len(sides) and len(known) == len(sides)
        # fio pauses (about 0.25 s) between the measured job and its tail: the check is per
        # second, as fio's logs are, so a pause under a second counts as loaded
        bridged = {vm: replace(w, tail_from_ms=w.measured_to_ms) if w.tail_from_ms - w.measured_to_ms < PAUSE_MS else w
                   for vm, w in windows.items()}
        cover = fio_window.coverage(bridged, known) if checked else {}
        placed = {vm: w for vm, w in windows.items() if vm in known}
        # the skew over the VMs whose windows can be placed (all of them, normally)
        skew = fio_window.start_skew_ms(placed, known) if len(placed) > 1 or checked else None
        return cls(offsets, windows, known, checked, cover, placed, skew)

    def load_json(self, vm: int, step_name: str, round_no: int) -> dict:
        """What VM ``vm``'s row of the round stores of it (its ``load_json``)."""
        off = self.offsets.get(vm)
        w = self.windows.get(vm)
        c = self.cover.get(vm)
        shift = self.known.get(vm, 0.0)
        skew = self.skew
        return {
            "step": step_name, "round": round_no, "start_skew_ms": None if skew is None else round(skew, 1),
            "clock_offset_ms": None if off is None else round(off[0], 1),
            "clock_uncertainty_ms": None if off is None else round(off[1], 1),
            "clock_drift_ms": None if off is None else round(off[2], 1),
            "clock_note": _clock_note(off),
            "window": None if w is None else {k: round(v - shift, 1) for k, v in w.__dict__.items()},
            "tail_pause_ms": None if w is None else round(max(0.0, w.tail_from_ms - w.measured_to_ms), 1),
            "loaded": None if c is None else c.loaded, "short_ms": None if c is None else round(c.short_ms, 1),
            "short_of_vm": None if c is None else c.short_of,
            "skew_of_vms": sorted(self.placed) if skew is not None and not self.checked else None,
            "excluded": _excluded(off, c),
        }
