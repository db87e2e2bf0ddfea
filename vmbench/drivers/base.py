"""What the orchestrator needs from a hypervisor: the :class:`HypervisorDriver` and
:class:`Guest` Protocols, exactly what the runner, ``vmbench doctor`` and ``vmbench
cleanup`` call.

Each driver (libvirt, Proxmox, host only) keeps its own API details (libvirt XML, PVE REST)
inside and reports what it applied as typed values (:class:`Applied`).  Code outside a
driver never asks which driver it has: what differs is a method or an attribute here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, ContextManager, Mapping, Protocol, Sequence

from ..progress import Progress
from ..guest.needs import GuestNeeds
from ..scenario import axes
from ..scenario.model import CephConfig, VmConfig
from ..settings import Accel, CpuMode, ImageFormat
from ..transport import ops
from ..transport.base import HostTransport, Transport
from ..storage import HostStorage, Volume, VolumeRole, VolumeStorage, volume_name
from ..storage.leftover import Leftover

if TYPE_CHECKING:
    from ..images import Image
    from ..paths import HostPaths

__all__ = ["Accelerator", "Applied", "Check", "Guest", "HypervisorDriver", "Leftover", "VmRequest", "VmResources"]


@dataclass(frozen=True)
class Accelerator:
    """Which accelerator guests run with, and why."""

    name: str  # "kvm" or "tcg"
    reason: str


@dataclass(frozen=True)
class VmRequest:
    """One VM to create: its settings, scratch disk size, and the cells it serves."""

    seq: int
    vm: VmConfig
    scratch_size: int
    cells: tuple[str, ...]


@dataclass
class VmResources:
    """What a driver created for one VM (so it can always be removed)."""

    name: str
    scratch_path: str  # the scratch disk as the host sees it (file or block device)
    scratch_serial: str
    host_target: str | None  # where host fio runs: the scratch itself when raw, else a raw reference volume
    root_path: str = ""  # the root disk (a linked clone of the template) as the host sees it
    volumes: list[str] = field(default_factory=list)  # names of created volumes, in creation order
    native_config: str = ""  # the domain XML / VM config as defined
    expected_volumes: list[str] = field(default_factory=list)  # names, recorded before creation
    scratch_kind: str = "file"  # "file" or "block" (a zvol): how the VM attaches it
    #: the scratch storage as read back (ZFS: zfs name and properties) and what did not take
    storage: dict = field(default_factory=dict)
    storage_problems: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Applied:
    """What the hypervisor applied, as typed values; None where a source could not tell.

    ``readings``: what each axis reads back, under the keys its ``verify`` names
    (vmbench.scenario.axes): ``config_*`` from the hypervisor's own configuration as it is
    live (the domain XML, ``qm config``), named by ``config_source``; ``qemu_*`` from QEMU
    itself (its block layer, command line, throttling and iothread links).  Each driver's
    codec table reads them, one row per axis; each is also an attribute
    (``applied.qemu_cache``), None where it was not read.  The other fields are facts of the
    VM rather than of an axis; ``details`` holds opaque extra readings, stored as they are."""

    config_source: str = "the hypervisor configuration"
    readings: Mapping[str, object] = field(default_factory=dict)
    controller: str | None = None  # the scratch disk's controller model
    cpu_model: str | None = None  # "kvm64", "host-passthrough", "max"
    cpu_flags: tuple[tuple[str, str], ...] = ()  # forced flags as configured: (flag, "on"|"off")
    accelerator: str | None = None  # "kvm" or "tcg", as QEMU reports it
    volume: str | None = None  # the path attached as the scratch disk
    qemu_pid: int | None = None  # the VM's QEMU process on the host (its threads are sampled for CPU per I/O)
    native_config: str = ""  # opaque: the live domain XML, the VM config
    qemu_cmdline: tuple[str, ...] = ()
    details: dict = field(default_factory=dict)  # opaque extra readings, stored as they are

    def __getattr__(self, name: str) -> object:
        """An axis's reading by its key (``applied.config_cache``): None where it was not read."""
        if name in reading_keys():
            return self.__dict__.get("readings", {}).get(name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def typed(self) -> dict:
        """Every typed value (not the opaque texts), for storing with a boot: every reading an
        axis verifies (None where it was not read) and the VM's facts."""
        out: dict = {"config_source": self.config_source, **{k: self.readings.get(k) for k in reading_keys()}}
        out.update({k: v for k, v in self.readings.items() if k not in out})
        out.update({k: v for k, v in self.__dict__.items()
                    if k not in ("config_source", "readings", "native_config", "qemu_cmdline", "details")})
        return out

    @classmethod
    def of(cls, values: Mapping[str, object], *, native_config: str, qemu_cmdline: Sequence[str],
           details: Mapping[str, object]) -> "Applied":
        """A driver's readings as one: a VM fact under its own field, an axis's reading (a key
        some axis's ``verify`` names) in ``readings``, anything else in ``details``."""
        own = {f.name for f in fields(cls)}
        keys = reading_keys()
        return cls(native_config=native_config, qemu_cmdline=tuple(qemu_cmdline),
                   readings={k: v for k, v in values.items() if k in keys and k not in own},
                   details={**details, **{k: v for k, v in values.items() if k not in keys and k not in own}},
                   **{k: v for k, v in values.items() if k in own})  # type: ignore[arg-type]


def reading_keys() -> tuple[str, ...]:
    """The keys of what a hypervisor reads back: those the axes' ``verify`` entries name but
    the guest's own (``guest_*``), in the axis table's order (read from it when called)."""
    return tuple(dict.fromkeys(key for a in axes.AXES for key, _, _ in a.verify if not key.startswith("guest_")))


@dataclass(frozen=True)
class Check:
    """One line of ``vmbench doctor``: what was checked, ``ok``/``warn``/``FAIL``, and what to
    do about it."""

    name: str
    status: str  # ok, warn, FAIL
    detail: str
    hint: str = ""


@dataclass(frozen=True)
class HostChecks:
    """A driver's own ``vmbench doctor`` lines, and whether its hypervisor (or storage)
    answered: only then can doctor list the leftovers of earlier runs there."""

    checks: tuple[Check, ...]
    answered: bool


def version_check(host: HostTransport, where: str, name: str, argv: list[str], hint: str) -> Check:
    """A doctor line for a tool on the host: its version line, or FAIL with ``hint``."""
    line = ops.first_line(host, argv)
    return Check(name, "ok", line) if line else Check(name, "FAIL", f"{argv[0]} not found or not working on {where}", hint)


class Guest(Protocol):
    """A running VM: its guest transport and the hypervisor's view of it."""

    name: str
    resources: VmResources
    boot_seconds: float

    @property
    def transport(self) -> Transport:
        """Where the guest's commands run (its agent)."""
        ...

    def applied(self) -> Applied:
        """What the hypervisor says it applied to this VM and its scratch disk."""
        ...

    def limits_lifted(self) -> ContextManager[bool]:
        """For the ``with`` block, the scratch disk's I/O limits off in the running VM (a
        precondition never writes through the limits being measured); on leaving, put back
        and read back from the hypervisor (a limit not back in effect raises HypervisorError).
        Yields whether they were lifted: False when the disk has none, or where this
        hypervisor keeps them on (the precondition's deadline then follows the limits)."""
        ...


class HypervisorDriver(Protocol):
    """What the runner, ``vmbench doctor`` and ``vmbench cleanup`` need from a hypervisor.
    Everything a driver creates is named ``vmbench-<run tag>-...`` and tagged, so
    :meth:`leftovers` finds only its own things."""

    #: "libvirt", "proxmox", "none": recorded with runs, never branched on
    name: str
    #: whether guests boot from vmbench's own template image (libvirt), or from a template
    #: the hypervisor holds (Proxmox) or none at all (host only)
    needs_image: bool
    #: the Ceph pool and client under the scratch disks (RBD storage), as known after
    #: :meth:`prepare` (the scenario's on libvirt, the node's rbd storage's on Proxmox): what
    #: the RADOS bench, the Ceph telemetry and fio's rbd engine use; None elsewhere
    ceph: CephConfig | None

    @property
    def host(self) -> HostTransport:
        """Where the hypervisor host's commands run (this machine, or SSH)."""
        ...

    @property
    def storage(self) -> "HostStorage":
        """Where scratch disks live on that host (label, preflight, free space, facts)."""
        ...

    @property
    def paths(self) -> "HostPaths":
        """vmbench's directory on that host (images, consoles, host fio work directories)."""
        ...

    def prepare(self, *, image: "Image | None" = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: "GuestNeeds | None" = None) -> Accelerator:
        """Preflight, before anything is created: reachable, storage usable, template on the
        host (``image`` when :attr:`needs_image`), accelerator decided, CPU models available,
        and each of ``vms`` (the cells' settings) possible on this setup.  ``guest_needs``: the
        commands and fio version the scenario needs in the guest, for a driver whose template
        vmbench did not make (Proxmox checks it at the first boot).  The host-only
        driver checks its storage and answers accelerator "none".  Raises PreflightError."""
        ...

    def cached_accelerator(self) -> str | None:
        """What an earlier probe found ("kvm"/"tcg"), without probing; None if never probed."""
        ...

    def describe_host(self) -> dict:
        """Versions and facts recorded with every run (and compared when a run resumes)."""
        ...

    def doctor_checks(self, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
        """``vmbench doctor``'s lines for this hypervisor (reachable, template, storage,
        accelerator), checked as a run's preflight checks them; ``template`` names the image
        recipe (drivers that need one), ``reprobe`` forgets a cached accelerator probe."""
        ...

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        """The names the VM will have, before anything is created."""
        ...

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Create disks (not the VM), recording each in ``res`` as it appears; the host may
        run fio on ``res.host_target`` before boot."""
        ...

    def create_host_reference(self, run_tag: str, request: VmRequest, res: VmResources) -> str:
        """A raw volume on the scratch disks' storage, for host fio when the scratch isn't
        raw (or there is no VM: host only); recorded in ``res`` (removed with the VM)."""
        ...

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None,
             timeout: float | None = None) -> Guest:
        """Define and start the VM; return once its guest agent answers (bounded)."""
        ...

    def remove_vm(self, res: VmResources) -> None:
        """Stop and remove the VM and its disks; safe to call twice, on half-made VMs and
        after the connection to the hypervisor was lost (it reconnects)."""
        ...

    def check_step(self, need: int, what: str = "the step's VMs") -> None:
        """Before each load step of a run across several hosts: this host still answers (a
        Proxmox node: still in the cluster, online, the cluster quorate) and has ``need``
        bytes of memory for ``what``; else a PreflightError naming the host, before anything
        of the step exists."""
        ...

    def leftovers(self) -> list[Leftover]:
        ...

    def remove_leftover(self, leftover: Leftover) -> None:
        ...

    def close(self) -> None:
        ...


def note_volume(res: VmResources, vol: "Volume") -> None:
    """Record how a scratch or reference volume's storage read back (ZFS) in ``res``."""
    if vol.zfs_name:
        res.storage.setdefault("volumes", {})[vol.name] = {"zfs_name": vol.zfs_name, "readback": vol.readback,
                                                           **({"sources": vol.sources} if vol.sources else {})}
    res.storage_problems += [p for p in vol.problems if p not in res.storage_problems]


def create_host_reference(storage: "VolumeStorage", run_tag: str, request: VmRequest, res: VmResources) -> str:
    """A raw volume on the scratch disk's storage (with its ZFS settings) for host fio, when the
    scratch itself is not raw or there is no VM; recorded in ``res`` before and after it exists."""
    name = volume_name(run_tag, request.seq, VolumeRole.HOSTREF, ImageFormat.RAW)
    res.expected_volumes.append(name)
    vol = storage.create_volume(name, request.scratch_size, ImageFormat.RAW, zfs=request.vm.zfs)
    res.volumes.append(name)
    res.host_target = vol.path
    note_volume(res, vol)
    return vol.path
