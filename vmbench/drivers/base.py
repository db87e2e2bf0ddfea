"""What the orchestrator needs from a hypervisor (libvirt today, Proxmox next).

One small Protocol; each driver keeps its own API details (libvirt XML, PVE REST) inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from typing import TYPE_CHECKING

from ..progress import Progress
from ..scenario.model import VmConfig
from ..settings import Accel, CpuMode
from ..transport.base import Transport

if TYPE_CHECKING:
    from ..images import Image


@dataclass(frozen=True)
class Accelerator:
    """Which accelerator guests run with, and why."""

    name: str  # "kvm" or "tcg"
    reason: str


@dataclass(frozen=True)
class VmRequest:
    """One VM to create: its settings, template, scratch disk, and the cells it serves."""

    seq: int
    vm: VmConfig
    scratch_size: int
    pool: str
    cells: tuple[str, ...]


@dataclass
class VmResources:
    """What a driver created for one VM (so it can always be removed)."""

    name: str
    scratch_path: str  # the scratch disk's backing file on the host
    scratch_serial: str
    host_target: str | None  # a raw file on the same storage for host fio, when the scratch isn't raw
    volumes: list[str] = field(default_factory=list)  # paths of created volumes
    domain_xml: str = ""
    pool: str = ""
    expected_volumes: list[str] = field(default_factory=list)  # names, recorded before creation


@dataclass(frozen=True)
class Leftover:
    kind: str  # "domain", "volume", "file"
    name: str
    run_tag: str
    detail: str = ""


class Guest(Protocol):
    """A running VM: its guest transport and the hypervisor's view of it."""

    name: str
    transport: Transport
    resources: VmResources
    boot_seconds: float

    def evidence(self) -> dict:
        """What the hypervisor says it applied: live configuration, block layer, iothreads,
        accelerator, the QEMU command line (keys as read by :mod:`vmbench.evidence`)."""
        ...


class HypervisorDriver(Protocol):
    """What the runner needs from a hypervisor.  Everything a driver creates is named
    ``vmbench-<run tag>-...`` and tagged, so :meth:`leftovers` finds only its own things."""

    name: str

    def prepare(self, *, image: "Image", accel: Accel, pool: str, cpu_models: set[str], cpu_modes: set[CpuMode],
                machine: str, progress: Progress) -> Accelerator:
        """Preflight, before anything is created: reachable, storage usable, accelerator
        decided, CPU models available.  Raises PreflightError."""
        ...

    def describe_host(self) -> dict:
        """Versions and facts recorded with every run."""
        ...

    def pool_free_bytes(self, pool: str) -> int:
        ...

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        """The names the VM will have, before anything is created."""
        ...

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Create disks (not the domain), recording each in ``res`` as it appears; the host
        may run fio on ``res.host_target`` before boot."""
        ...

    def create_host_reference(self, run_tag: str, pool: str, size: int, seq: int = 0) -> str:
        """A raw file on the scratch disks' storage, for host fio when the scratch isn't raw."""
        ...

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None,
             timeout: float | None = None) -> Guest:
        """Define and start the VM; return once its guest agent answers (bounded)."""
        ...

    def remove_vm(self, res: VmResources) -> None:
        """Stop and remove the VM and its disks; safe to call twice or on half-made VMs."""
        ...

    def leftovers(self) -> list[Leftover]:
        ...

    def remove_leftover(self, leftover: Leftover) -> None:
        ...
