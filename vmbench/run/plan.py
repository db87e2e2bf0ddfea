"""What a scenario will do: boots, cells, layers, jobs and how long it should take.

Pure: no side effects.  Cells that share a VM configuration share one boot; jobs and
in-guest layers never need a reboot, so the number of boots equals the number of distinct
VM configurations.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Mapping, Sequence

from ..drivers import LIFTS_LIMITS
from ..fio.job import PRECONDITION_BS, FioJob, to_precondition
from ..results.key import MeasurementKey
from ..results.plan import (PlannedBoot, PlannedCell, PlannedJob, PlannedLuks, PlannedStack, StoredAdvise, StoredPlan, plan_kind,
                             read_load, read_tune)
from ..scenario.load import LoadMember, LoadStep, Role
from ..scenario.backend import host_reference_key
from ..scenario.model import MiB, Cell, FilesystemLayer, Stack, VmConfig, layer_path
from ..scenario.spec import Scenario
from ..units import format_duration, format_size
from ..scenario.axes import settings_of, storage_settings_of, vm_key
from ..storage.radosbench import RADOS_LAYER, rados_mode, seconds


@dataclass(frozen=True)
class BootGroup:
    """One VM configuration's boot: where it runs (``host``, the hypervisor's label: one host
    today), its VM and the cells measured in it."""

    seq: int
    vm: VmConfig
    cells: tuple[Cell, ...]
    host: str = "localhost"

    @property
    def cpu_label(self) -> str:
        return self.vm.cpu.label


@dataclass(frozen=True)
class Measurement:
    """One planned fio run in the guest: a cell, a layer (of a stack, or raw) and a job."""

    cell: str
    stack: str | None
    layer: str
    depth: int
    job: str


@dataclass(frozen=True)
class Step:
    """One fio run the plan asks for: on the host (boot 1's storage, before it boots) or in
    a boot's guest on a cell's layer; a job and a repeat.  The runner executes these in order;
    a stored measurement with the same :meth:`key` is this step done."""

    side: str  # "host" or "guest"
    boot: int  # the boot (VM) whose storage or guest it runs on
    cell: str | None
    stack: str | None
    layer: str
    depth: int
    job: str
    repeat: int
    vm: int = 0  # the VM within a group of VMs run at once (MeasurementKey.vm)
    load_step: int = 0

    def key(self) -> MeasurementKey:
        """What this step measures: the key its stored measurement has."""
        return MeasurementKey(self.side, self.cell, self.stack, self.layer, self.job, self.repeat, self.vm, self.load_step)

    def group(self) -> MeasurementKey:
        """The key without the repeat: one job on one target, whose repeats are compared."""
        return self.key().group()

    def next(self, repeat: int) -> "Step":
        """This step with another repeat number (an adaptive extra)."""
        return replace(self, repeat=repeat)


@dataclass(frozen=True)
class LoadUnit:
    """One load step of one VM configuration (a boot group): its VMs are created and booted
    together, measure every layer of the group's cells round by round, and are removed
    together.  A unit is atomic: its measurements are stored when all of it finished.

    ``seqs`` number its VMs across the run (``vmbench-<tag>-<seq>``); ``host_cell`` is where
    its host reference is stored when it has one (``has_host``: the first unit of each host
    storage setting at this step runs the same round on as many host volumes at once)."""

    boot: BootGroup
    step: LoadStep
    seqs: tuple[int, ...]
    has_host: bool = False
    host_cell: str | None = None
    #: the host each VM runs on, by member (a cluster spreads a step's VMs); () before ``nodes: all`` is read
    hosts: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return f"VM configuration {self.boot.seq}, load step {self.step.index} ({self.step.name})"

    def vm_of(self, member: LoadMember) -> VmConfig:
        return member.overrides.apply(self.boot.vm)


def placement_text(unit: LoadUnit) -> str:
    """Where a unit's VMs run, in words, host by host: "h1: VM 0; h2: VMs 1-3"."""
    by_host: dict[str, list[int]] = {}
    for m, host in zip(unit.step.members, unit.hosts):
        by_host.setdefault(host, []).append(m.vm)
    return "; ".join(f"{host}: {_vm_list(vms)}" for host, vms in by_host.items())


def _vm_list(vms: list[int]) -> str:
    """"VM 0", "VMs 1-3", "VMs 0, 3, 6"."""
    if len(vms) == 1:
        return f"VM {vms[0]}"
    if vms == list(range(vms[0], vms[-1] + 1)):
        return f"VMs {vms[0]}-{vms[-1]}"
    return "VMs " + ", ".join(map(str, vms))


def place_vms(size: int, labels: tuple[str, ...], place: tuple[tuple[str, int], ...] = ()) -> tuple[str, ...]:
    """The host of each of a step's ``size`` VMs, by member: round robin over ``labels``, or
    ``place``'s hosts filled in order, each up to its count (the loader checked there is room)."""
    if not place:
        return tuple(labels[i % len(labels)] for i in range(size))
    slots = [label for label, count in place for _ in range(count)]
    if len(slots) < size:
        raise ValueError(f"placement has room for {len(slots)} VMs, not {size}")
    return tuple(slots[:size])


#: a group's key (MeasurementKey.group()) -> {repeat: IOPS}: what a run has stored (ResultsDB.repeat_iops)
Stored = Mapping[MeasurementKey, Mapping[int, float]]


@dataclass(frozen=True)
class Plan:
    scenario: Scenario
    boots: tuple[BootGroup, ...]

    @property
    def cells(self) -> tuple[Cell, ...]:
        return tuple(c for b in self.boots for c in b.cells)

    def host_references(self) -> list[tuple[BootGroup, str | None]]:
        """Where the host is measured: (boot, the cell its rows are stored under).

        Host-only: every boot (a storage variant), under its first cell.  With VMs: once per
        distinct host storage setting (ZFS volblocksize, compression...), on the first boot
        with it, before it boots; stored under no cell when the whole scenario has one
        storage setting (as always before storage was an axis), else under that boot's first
        cell (:meth:`host_cell` maps every cell to it)."""
        s = self.scenario
        if s.host_only:
            return [(b, b.cells[0].name) for b in self.boots]
        if not s.host_baseline or not self.boots:
            return []
        firsts: dict[str, BootGroup] = {}
        for b in self.boots:
            firsts.setdefault(host_reference_key(b.vm, s.storage), b)
        if len(firsts) == 1:
            return [(self.boots[0], None)]
        return [(b, b.cells[0].name) for b in firsts.values()]

    def host_cell(self, cell: Cell) -> str | None:
        """The cell name the host rows of ``cell``'s storage are stored under (None: no cell)."""
        refs = self.host_references()
        if self.scenario.host_only:
            return next((name for b, name in refs if cell in b.cells), None)
        for b, name in refs:
            if host_reference_key(b.vm, self.scenario.storage) == host_reference_key(cell.vm, self.scenario.storage):
                return name
        return None

    def steps(self) -> list[Step]:
        """Every fio run of the scenario, in the order the runner executes them: each boot's
        host reference first when it has one (:meth:`host_references`: the first boot's
        storage before it boots, and each other storage setting's), then the boot's cells,
        layer by layer, every repeat of every job on a layer before the next layer is built.
        With an adaptive repeat policy these are the ``min`` repeats; the measurer adds the rest."""
        s = self.scenario
        n = s.repeats  # == repeat_policy.min
        out: list[Step] = []
        if s.load is not None:
            return [st for unit in self.load_units() for st in self.unit_steps(unit)]
        refs = dict((b.seq, name) for b, name in self.host_references())
        for boot in self.boots:
            if boot.seq in refs:
                out += self.rados_steps(boot.seq, refs[boot.seq]) if boot.seq == min(refs) else []
                out += [Step("host", boot.seq, refs[boot.seq], None, "host", 0, j.name, r) for r in range(1, n + 1)
                        for j in s.jobs if not j.file_job]
                out += [Step("host", boot.seq, refs[boot.seq], None, name, 0, j.name, r) for name in self.host_filesystems()
                        for r in range(1, n + 1) for j in s.jobs if j.file_job]
            if s.host_only:
                continue
            for cell, layer, stack, depth in boot_layers(boot):
                out += [Step("guest", boot.seq, cell.name, stack.name if stack else None, layer, depth, j.name, r)
                        for r in range(1, n + 1) for j in s.jobs if runs_on(j, stack, depth)]
        return out

    def host_filesystems(self) -> dict[str, FilesystemLayer]:
        """The host's like-for-like filesystems for the file jobs: ``host+<fs>`` -> the first
        measured filesystem layer of that type in the cells' stacks (its mkfs and mount
        options).  None where the host has no volume of its own to make one on: RBD storage
        (a shared image), a load run, a host-only run, no file job or no host baseline."""
        s = self.scenario
        if (s.host_only or s.load is not None or not s.storage.backend.own_reference_volume or not s.host_baseline
                or not any(j.file_job for j in s.jobs)):
            return {}
        out: dict[str, FilesystemLayer] = {}
        for cell in self.cells:
            for _layer, stack, depth in cell_layers(cell):
                fs = filesystem_at(stack, depth)
                if fs is not None:
                    out.setdefault(host_fs_layer(fs), fs)
        return out

    def file_job_layers(self) -> list[str]:
        """Where the file jobs run, in words (``vmbench plan``): the filesystem layers of each
        cell and the host's like-for-like filesystems, or that the host has none."""
        s = self.scenario
        names = [j.name for j in s.jobs if j.file_job]
        if not names:
            return []
        lines = [f"file jobs ({', '.join(names)}) run in the mount of filesystem layers only, never on the raw disk, "
                 "a partition, LVM or LUKS, and take no precondition:"]
        for cell in self.cells:
            fs = [layer for layer, stack, depth in cell_layers(cell) if filesystem_at(stack, depth) is not None]
            lines.append(f"  {cell.name}: {', '.join(fs) or 'none (no filesystem layer)'}")
        hosts = self.host_filesystems()
        lines.append(f"  host: {', '.join(hosts)} (a filesystem of each type made on the host's reference volume)" if hosts
                     else "  host: the host has no like-for-like row (" + self._no_host_fs_reason() + ")")
        return lines

    def _no_host_fs_reason(self) -> str:
        s = self.scenario
        if s.load is not None:
            return "a load run measures its host reference on raw volumes only"
        if not s.storage.backend.own_reference_volume:
            return s.storage.backend.no_host_filesystem()
        return "no host baseline" if not s.host_baseline else "no filesystem layer"

    def rados_jobs(self) -> list[FioJob]:
        """The jobs whose RADOS ceiling is measured: on RBD storage, each read or write job
        (:func:`vmbench.storage.radosbench.rados_mode`) but a file job (it has no block size of objects)."""
        if not self.scenario.storage.backend.ceph or self.scenario.load is not None:
            return []
        return [j for j in self.scenario.jobs if rados_mode(j) is not None and not j.file_job]

    def rados_steps(self, boot: int, cell: str | None) -> list[Step]:
        """``rados bench`` under each of :meth:`rados_jobs`, every repeat, before the first host reference's fio."""
        n = self.scenario.repeats
        return [Step("host", boot, cell, None, RADOS_LAYER, 0, j.name, r) for r in range(1, n + 1) for j in self.rados_jobs()]

    def load_units(self) -> list[LoadUnit]:
        """Every load unit, in the order they run: each VM configuration's steps in turn."""
        s = self.scenario
        assert s.load is not None
        refs = dict((b.seq, name) for b, name in self.host_references())
        out: list[LoadUnit] = []
        seq = 0
        for boot in self.boots:
            for step in s.load.steps:
                seqs = tuple(range(seq + 1, seq + step.size + 1))
                seq += step.size
                # nodes: all names no node before the run reads them: no placement yet
                hosts = () if s.hypervisor.all_nodes else place_vms(step.size, s.hypervisor.host_labels, s.hypervisor.place)
                out.append(LoadUnit(boot, step, seqs, has_host=boot.seq in refs, host_cell=refs.get(boot.seq), hosts=hosts))
        return out

    def unit_steps(self, unit: LoadUnit) -> list[Step]:
        """A unit's fio runs: its host reference (if any), then each cell's layers; on each
        target every round's repeats, each run by every member at once (one Step per member)."""
        s = self.scenario
        assert s.load is not None
        rounds = s.load.rounds(s.jobs)
        k = unit.step.index

        by_name = {j.name: j for j in s.jobs}

        def runs(side: str, cell: str | None, stack: Stack | None, layer: str, depth: int) -> list[Step]:
            return [Step(side, unit.boot.seq, cell, stack.name if stack else None, layer, depth, rnd[m.role], r, vm=m.vm,
                         load_step=k)
                    for rnd in rounds for r in range(1, s.repeats + 1) for m in unit.step.members
                    if m.role in rnd and runs_on(by_name[rnd[m.role]], stack, depth)]

        out = runs("host", unit.host_cell, None, "host", 0) if unit.has_host else []
        for cell, layer, stack, depth in boot_layers(unit.boot):
            out += runs("guest", cell.name, stack, layer, depth)
        return out

    def pending_units(self, stored: Stored) -> list[tuple[LoadUnit, list[Step]]]:
        """Each unit with every one of its steps when any of them is not stored (a unit is
        atomic: it runs again whole), or with none when it is complete."""
        return [(u, steps if any(st.repeat not in stored.get(st.group(), {}) for st in steps) else [])
                for u in self.load_units() for steps in [self.unit_steps(u)]]

    def pending_steps(self, stored: Stored) -> list[Step]:
        """What is left to run, in order, given what a run has stored: every step not stored,
        and, where all of a job's ``min`` repeats on a target are stored but the adaptive
        policy wants more, its next repeat (after the highest stored) in place of its last
        planned one.  The measurer goes on from there."""
        policy = self.scenario.repeat_policy
        assert policy is not None
        out: list[Step] = []
        for step in self.steps():
            have = stored.get(step.group(), {})
            if step.repeat not in have:
                out.append(step)
            elif step.repeat == policy.min and all(r in have for r in range(1, policy.min + 1)) \
                    and policy.wants_more(list(have.values())):
                out.append(step.next(max(have) + 1))
        return out

    def guest_measurements(self) -> list[Measurement]:
        """Every guest fio run of one repeat; the raw disk once per boot (its cells share the VM)."""
        if self.scenario.host_only:
            return []
        if self.scenario.load is not None:
            return [Measurement(st.cell or "", st.stack, st.layer, st.depth, st.job) for st in self.steps()
                    if st.side == "guest" and st.repeat == 1]
        return [
            Measurement(cell.name, stack.name if stack else None, layer, depth, job.name)
            for boot in self.boots
            for cell, layer, stack, depth in boot_layers(boot)
            for job in self.scenario.jobs
            if runs_on(job, stack, depth)
        ]

    def host_measurements(self, repeats: int | None = None) -> int:
        """Host fio runs with ``repeats`` each (default: the policy's min)."""
        n = self.scenario.repeats if repeats is None else repeats
        if self.scenario.load is not None:
            return sum(st.side == "host" for st in self.steps()) // self.scenario.repeats * n
        block = sum(not j.file_job for j in self.scenario.jobs)
        files = sum(j.file_job for j in self.scenario.jobs) * len(self.host_filesystems())
        return (block + files) * n * len(self.host_references())

    def summary(self) -> dict:
        """The plan as data (``vmbench plan --json``: what a run stores, without the targets)."""
        return self.record().to_row(targets=False)

    def record(self) -> StoredPlan:
        """The plan as a run stores it (:meth:`~vmbench.results.plan.StoredPlan.to_row`), with the scenario's targets."""
        s, rados, files = self.scenario, self.rados_jobs(), any(j.file_job for j in self.scenario.jobs)
        policy, guest, hv = s.repeat_policy, len(self.guest_measurements()), s.hypervisor
        assert policy is not None
        settings = storage_settings_of if s.host_only else settings_of
        load = read_load(s.load.to_json()) if s.load else None
        return StoredPlan(
            plan_kind(s.host_only, load, s.plan_mode), s.name, s.plan_mode, s.storage.describe(),
            cells=tuple(PlannedCell(c.name, self.host_cell(c), settings(c.vm), tuple(st.name for st in c.stacks), tuple(c.changed))
                        for c in self.cells),
            boots=tuple(PlannedBoot(b.seq, b.host, tuple(c.name for c in b.cells), settings(b.vm)) for b in self.boots),
            jobs=tuple(PlannedJob(j.name, j.describe(), j.judged_by, j.sweep_of, j.sweep_key, j.sweep_value, j.is_sync, j.file_job,
                                  j.unit if j.file_job else None, j.rate_iops, j.rate) for j in s.jobs),
            stacks=tuple(PlannedStack(st.name, tuple(l.label for l in st.layers), PlannedLuks(st.luks.cipher, st.luks.key_size)
                                      if st.luks else None) for st in s.stacks),
            repeat_policy=policy, targets=tuple(s.targets), load=load, host_baseline=s.host_baseline,
            guest_measurements=guest * s.repeats, host_measurements=self.host_measurements(),
            guest_measurements_max=guest * policy.max, host_measurements_max=self.host_measurements(policy.max),
            rados_measurements=len(rados) * s.repeats if rados else None,
            host_filesystems=tuple(self.host_filesystems()) if files else None, file_jobs=tuple(self.file_job_layers()) if files else None,
            vms_booted=sum(u.step.size for u in self.load_units()) if s.load else None,
            hosts=tuple(hv.host_labels) if len(hv.members) > 1 else (), nodes="all" if hv.all_nodes else None,
            placement="round-robin over the cluster's online nodes, read when the run starts" if hv.all_nodes else
            [{"boot": u.boot.seq, "step": u.step.index, "hosts": list(u.hosts)} for u in self.load_units()] if len(hv.members) > 1 else None,
            # the question vmbench advise answers for this run; a tune's round (vmbench tune --resume/--show)
            stored_advise=StoredAdvise.from_row(s.advise.to_json()) if s.advise is not None else None,
            tune=read_tune(s.tune.plan_json(s.name, s.baseline)) if s.tune is not None and s.tune.round is not None else None)


def make_plan(scenario: Scenario) -> Plan:
    groups: dict[str, list[Cell]] = {}
    vms: dict[str, VmConfig] = {}
    for cell in scenario.cells:
        key = vm_key(cell.vm)
        groups.setdefault(key, []).append(cell)
        vms.setdefault(key, cell.vm)
    host = scenario.hypervisor.host_label
    boots = tuple(BootGroup(seq=i + 1, vm=vms[key], cells=tuple(cells), host=host) for i, (key, cells) in enumerate(groups.items()))
    return Plan(scenario=scenario, boots=boots)


def boot_layers(boot: BootGroup) -> list[tuple[Cell, str, Stack | None, int]]:
    """(cell, layer path, stack, depth) measured in one boot: the cells share the VM, so the
    raw disk is measured once, in the first of them."""
    return [
        (cell, layer, stack, depth)
        for i, cell in enumerate(boot.cells)
        for layer, stack, depth in cell_layers(cell)
        if stack is not None or i == 0
    ]


def filesystem_at(stack: Stack | None, depth: int) -> FilesystemLayer | None:
    """The filesystem layer at ``depth`` of ``stack`` (None: the raw disk or a block layer)."""
    if stack is None or depth < 1:
        return None
    layer = stack.layers[depth - 1]
    return layer if isinstance(layer, FilesystemLayer) else None


def runs_on(job: FioJob, stack: Stack | None, depth: int) -> bool:
    """Whether ``job`` runs on the layer at ``depth`` of ``stack``: a file job
    (:attr:`FioJob.file_job`) on filesystem layers only, any other job everywhere."""
    return not job.file_job or filesystem_at(stack, depth) is not None


def host_fs_layer(fs: FilesystemLayer) -> str:
    """The layer name of the host's like-for-like filesystem of ``fs``'s type: ``host+ext4``."""
    return f"host+{fs.label}"


def cell_layers(cell: Cell) -> list[tuple[str, Stack | None, int]]:
    """(layer path, stack, depth) measured in a cell: raw once, then every layer of every stack."""
    out: list[tuple[str, Stack | None, int]] = [("raw", None, 0)]
    for stack in cell.stacks:
        for depth in range(1, len(stack.layers) + 1):
            if stack.measures(depth):
                out.append((layer_path(stack, depth), stack, depth))
    return out


# ---- estimates -------------------------------------------------------------------------------

BOOT_SECONDS = {"kvm": 15.0, "tcg": 32.0}  # start to guest agent, measured here under TCG: 20-33 s
TEARDOWN_SECONDS = 3.0
FIO_OVERHEAD = {"kvm": 1.5, "tcg": 4.0}
RADOS_OVERHEAD_S = 3.0  # rados bench: connecting, and removing its objects
PRECONDITION_MB_S = {"kvm": 500.0, "tcg": 150.0}
LAYER_BUILD_SECONDS = {"kvm": 3.0, "tcg": 10.0}
CRYPTO_BENCH_SECONDS = {"kvm": 3.0, "tcg": 6.0}  # per cipher
UNKNOWN_JOB_SECONDS = 60.0
FILE_JOB_SECONDS = 5.0  # a file job does each file once: its runtime is only its cap


@dataclass(frozen=True)
class Estimate:
    """Seconds, with every job run the repeat policy's ``min`` times; the ``*_max`` figures
    with ``max`` times (the same unless the policy is adaptive)."""

    accelerator: str
    boots: float
    guest_fio: float
    host_fio: float
    layers: float
    crypto: float
    guest_fio_max: float | None = None
    host_fio_max: float | None = None

    @property
    def total(self) -> float:
        return self.boots + self.guest_fio + self.host_fio + self.layers + self.crypto

    @property
    def total_max(self) -> float:
        guest = self.guest_fio if self.guest_fio_max is None else self.guest_fio_max
        host = self.host_fio if self.host_fio_max is None else self.host_fio_max
        return self.boots + guest + host + self.layers + self.crypto


def estimate(plan: Plan, accelerator: str) -> Estimate:
    accel = accelerator if accelerator in BOOT_SECONDS else "tcg"
    s = plan.scenario

    def job_seconds(job: FioJob, accel_: str) -> float:
        d = job.duration
        d = UNKNOWN_JOB_SECONDS if d is None else min(d, FILE_JOB_SECONDS) if job.file_job else d
        return d + FIO_OVERHEAD[accel_]

    policy = s.repeat_policy
    assert policy is not None
    boots = 0.0 if s.host_only else len(plan.boots) * (BOOT_SECONDS[accel] + TEARDOWN_SECONDS)
    if s.load is not None:
        return _load_estimate(plan, accel)
    references = len(plan.host_references())
    lifts = LIFTS_LIMITS.get(s.hypervisor.driver, False)  # the driver lifts a VM's I/O limits for its precondition
    per_target: list[list[FioJob]] = []  # the jobs of each measured guest layer
    layers = guest_pre = 0.0
    for boot in () if s.host_only else plan.boots:  # each measured layer is preconditioned once
        for _cell, _layer, stack, depth in boot_layers(boot):
            here = [j for j in s.jobs if runs_on(j, stack, depth)]
            per_target.append(here)
            guest_pre += precondition_estimate(to_precondition(here), None if lifts else boot.vm, accel)
        layers += LAYER_BUILD_SECONDS[accel] * sum(len(st.layers) for c in boot.cells for st in c.stacks)
    block_jobs = [j for j in s.jobs if not j.file_job]
    host_jobs = block_jobs + [j for j in s.jobs if j.file_job] * len(plan.host_filesystems())

    def guest(repeats: int) -> float:
        return sum(job_seconds(j, accel) * repeats for here in per_target for j in here) + guest_pre

    def host(repeats: int) -> float:
        rados = sum((seconds(j) * (1 if rados_mode(j) == "write" else 2) + RADOS_OVERHEAD_S) * repeats for j in plan.rados_jobs())
        return references * (sum(job_seconds(j, "kvm") * repeats for j in host_jobs)
                             + precondition_estimate(to_precondition(block_jobs), None, "kvm")) + rados

    cpus = {b.cpu_label for b in plan.boots}
    crypto = len(s.crypto_benchmark) * CRYPTO_BENCH_SECONDS[accel] * (len(cpus) + 1) if s.crypto_benchmark else 0.0
    return Estimate(accelerator=accel, boots=boots, guest_fio=guest(policy.min), host_fio=host(policy.min), layers=layers,
                    crypto=crypto, guest_fio_max=guest(policy.max), host_fio_max=host(policy.max))


def precondition_estimate(job: FioJob | None, vm: VmConfig | None, accel: str) -> float:
    """Seconds to precondition one target for ``job`` (None: nothing to precondition) on a VM
    whose I/O limits hold the writes back (None: the host, or a driver that lifts them: LIFTS_LIMITS)."""
    if job is None:
        return 0.0
    rate = PRECONDITION_MB_S[accel] * 1e6
    limit = vm.limits.write_rate(PRECONDITION_BS) if vm is not None else None
    return job.size / (min(rate, limit) if limit else rate)


def precondition_lines(plan: Plan) -> list[str]:
    """What ``vmbench plan`` says of preconditioning: which targets are written before their
    jobs and why, and how long a target takes where the VM's I/O limits hold the writes."""
    s = plan.scenario
    if s.load is None:
        groups: list[tuple[str, Sequence[FioJob], list[VmConfig]]] = [("every target", s.jobs, [b.vm for b in plan.boots])]
    else:
        rounds = s.load.rounds(s.jobs)
        by_name = {j.name: j for j in s.jobs}
        units = plan.load_units()
        groups = [(f"{role.value} VMs' targets", [by_name[r[role]] for r in rounds if role in r],
                   [u.vm_of(m) for u in units for m in u.step.members if m.role is role])
                  for role in Role if any(role in r for r in rounds)]
    lines = []
    for who, jobs, vms in groups:
        job = to_precondition(jobs)
        if job is None:
            files = sorted({j.name for j in jobs if j.file_job})
            rest = sorted({j.name for j in jobs if not j.file_job})
            lines.append(f"{who}: not preconditioned (" + "; ".join(
                ([f"no job reads: {', '.join(rest)}"] if rest else [])
                + ([f"file jobs lay out their own files: {', '.join(files)}"] if files else [])) + ")")
            continue
        lines.append(f"{who}: {format_size(job.size)} written before the jobs (job {job.name} reads)")
        for limits in sorted({vm.limits for vm in vms if vm.limits.write_rate(PRECONDITION_BS)}, key=repr):
            vm, given = next(v for v in vms if v.limits == limits), ", ".join(f"{k}={v:g}" for k, v in limits.given().items())
            lines.append(f"  the limits {given} are lifted for it ({s.hypervisor.driver.value} sets them to no limit live, then back, "
                         "and reads them back before fio): written at full speed" if LIFTS_LIMITS.get(s.hypervisor.driver, False) else
                         f"  through the limits {given} ({s.hypervisor.driver.value} keeps them on): {(limits.write_rate(PRECONDITION_BS) or 0.0) / MiB:g} "
                         f"MiB/s, about {format_duration(precondition_estimate(job, vm, 'kvm'))} a target")
    return lines


def _load_estimate(plan: Plan, accel: str) -> Estimate:
    """A load run: each unit boots its VMs ``boot_parallel`` at a time (slower as more run:
    a TCG guest keeps a core busy), and every round runs once per target for all its VMs."""
    s = plan.scenario
    assert s.load is not None
    par = s.load.boot_parallel
    boots = guest = host = layers = 0.0
    rounds = s.load.rounds(s.jobs)
    by_name = {j.name: j for j in s.jobs}
    lifts = LIFTS_LIMITS.get(s.hypervisor.driver, False)

    def round_seconds(rnd: dict[Role, str], accel_: str) -> float:
        return max((by_name[j].duration or UNKNOWN_JOB_SECONDS) for j in rnd.values()) + s.load.tail_seconds + s.load.lead_seconds + FIO_OVERHEAD[accel_]  # type: ignore[union-attr]

    per_target = {a: sum(round_seconds(r, a) for r in rounds) * s.repeats for a in ("kvm", accel)}
    pre_jobs = {role: to_precondition([by_name[r[role]] for r in rounds if role in r]) for role in Role}
    for unit in plan.load_units():
        n = unit.step.size
        boots += -(-n // par) * BOOT_SECONDS[accel] * max(1.0, n / 2 if accel == "tcg" else 1.0) + TEARDOWN_SECONDS
        targets = len(boot_layers(unit.boot))
        # the VMs precondition at once: the slowest sets the pace (all share the host's disk)
        guest += targets * (per_target[accel] + sum(precondition_estimate(pre_jobs[m.role], None if lifts else unit.vm_of(m), accel)
                                                    for m in unit.step.members))
        layers += LAYER_BUILD_SECONDS[accel] * sum(len(st.layers) for c in unit.boot.cells for st in c.stacks)
        if unit.has_host:
            host += per_target["kvm"] + sum(precondition_estimate(pre_jobs[m.role], None, "kvm") for m in unit.step.members)
    return Estimate(accelerator=accel, boots=boots, guest_fio=guest, host_fio=host, layers=layers, crypto=0.0)
