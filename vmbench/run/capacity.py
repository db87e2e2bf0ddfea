"""Whether a run fits the host, before anything is created: a load run's memory, storage and
vCPUs per load unit (pure; the host's figures are read by :func:`read_host_capacity`); what a
run on RBD storage writes to the Ceph pool at once (:func:`rbd_need`)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CommandError, VmbenchError
from ..storage.radosbench import bench_bytes, bench_objects
from ..transport.base import Transport
from ..units import human_size
from .plan import LoadUnit, Plan

MiB = 1 << 20
#: what a VM costs the host beyond its memory: QEMU itself, and under TCG its translation cache
QEMU_OVERHEAD = {"kvm": 128 * MiB, "tcg": 384 * MiB}
#: a linked clone's root disk grows as the guest writes (logs, fio's files): allowed per VM
ROOT_GROWTH = 256 * MiB
STORAGE_SLACK = 2 << 30


@dataclass(frozen=True)
class HostCapacity:
    memory_available: int | None  # bytes (MemAvailable); None: not known
    cpus: int | None
    storage_free: int
    storage_label: str


@dataclass(frozen=True)
class CapacityCheck:
    refusals: tuple[tuple[str, str], ...]  # (message, hint): the run must not start
    warnings: tuple[str, ...]


def read_host_capacity(host: Transport, storage_free: int, storage_label: str) -> HostCapacity:
    mem: int | None = None
    cpus: int | None = None
    try:
        for line in host.read_file("/proc/meminfo").decode(errors="replace").splitlines():
            if line.startswith("MemAvailable:"):
                mem = int(line.split()[1]) * 1024
    except (VmbenchError, OSError, ValueError, IndexError):
        mem = None
    try:
        cpus = int(host.run(["nproc"], timeout=30).stdout.strip())
    except (CommandError, VmbenchError, OSError, ValueError):
        cpus = None
    return HostCapacity(mem, cpus, storage_free, storage_label)


def check_capacity(plan: Plan, accel: str, host: HostCapacity, where: str, on: str | None = None) -> CapacityCheck:
    """Each load unit's VMs must fit the host's free memory and storage (else a refusal naming
    the step, what it needs and what is free); more vCPUs than host CPUs is a warning.  ``on``:
    a run across several hosts, whose VMs placed on host ``on`` are counted (each host's own)."""
    s = plan.scenario
    if s.load is None:
        return CapacityCheck((), ())
    refusals: list[tuple[str, str]] = []
    warnings: list[str] = []
    overhead = QEMU_OVERHEAD.get(accel, QEMU_OVERHEAD["tcg"])
    worst_mem = worst_disk = None
    for unit in plan.load_units():
        vms = [unit.vm_of(m) for m, placed in zip(unit.step.members, unit.hosts) if on is None or placed == on]
        if not vms:
            continue
        mem = sum(vm.memory_mib * MiB + overhead for vm in vms)
        disk = len(vms) * (s.storage.scratch_size * (2 if unit.has_host else 1) + ROOT_GROWTH) + STORAGE_SLACK
        if worst_mem is None or mem > worst_mem[0]:
            worst_mem = (mem, unit)
        if worst_disk is None or disk > worst_disk[0]:
            worst_disk = (disk, unit)
        vcpus = sum(vm.vcpus for vm in vms)
        if host.cpus is not None and vcpus > host.cpus:
            warnings.append(f"load step {unit.step.name!r}: {vcpus} vCPUs on {host.cpus} host CPUs (overcommitted)"
                            + (": under TCG each busy vCPU takes a host core, so the VMs share them" if accel == "tcg" else ""))
    if worst_mem is not None and host.memory_available is not None and worst_mem[0] > host.memory_available:
        mem, unit = worst_mem
        refusals.append((f"load step {unit.step.name!r} ({_count(unit, on)}) needs about {human_size(mem)} of memory "
                         f"(each VM's memory plus {human_size(overhead)} for QEMU under {accel}); {where} has {human_size(host.memory_available)} available",
                         "lower the step's VM count or vm.memory, or free memory on the host"))
    if worst_disk is not None and worst_disk[0] > host.storage_free:
        disk, unit = worst_disk
        refusals.append((f"load step {unit.step.name!r} ({_count(unit, on)}) needs about {human_size(disk)} on {host.storage_label} "
                         f"(a scratch disk{' and a host reference volume' if unit.has_host else ''} of {human_size(s.storage.scratch_size)} per VM); "
                         f"it has {human_size(host.storage_free)} free",
                         "lower storage.scratch_size or the step's VM count, or free space"))
    # deduplicate warnings of steps that repeat per VM configuration
    return CapacityCheck(tuple(refusals), tuple(dict.fromkeys(warnings)))


def _count(unit: LoadUnit, on: str | None) -> str:
    """How many of the unit's VMs a capacity message counts: all, or those on host ``on``."""
    total = f"{unit.step.size} VMs"
    return total if on is None else f"{total}, {sum(h == on for h in unit.hosts)} of them on {on}"


#: an RBD image's objects (librbd's default object size)
RBD_OBJECT = 4 * MiB


def rbd_need(plan: Plan) -> tuple[int, int, str]:
    """What a run on RBD storage writes to the pool at once, at most: (bytes, objects, in
    words).  The scratch images alive together (one VM's, or a load step's every VM) as fio
    fills them, and the largest RADOS bench (:func:`~vmbench.storage.radosbench.bench_bytes`;
    one at a time, each removed before the next).  Pure."""
    s = plan.scenario
    vms = max((u.step.size for u in plan.load_units()), default=1) if s.load is not None else 1
    scratch = vms * s.storage.scratch_size
    jobs = plan.rados_jobs()
    rados = max((bench_bytes(j) for j in jobs), default=0)
    objects = vms * -(-s.storage.scratch_size // RBD_OBJECT) + max((bench_objects(j) + 3 for j in jobs), default=0)
    words = f"{vms} scratch image{'s' if vms > 1 else ''} of {human_size(s.storage.scratch_size)}"
    if jobs:
        worst = max(jobs, key=bench_bytes)
        words += f" and the RADOS bench of job {worst.name}, {human_size(rados)}"
    return scratch + rados, objects, words
