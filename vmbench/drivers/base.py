"""What the orchestrator needs from a hypervisor (libvirt today, Proxmox next).

One small Protocol; each driver keeps its own API details (libvirt XML, PVE REST) inside.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ..progress import Progress
from ..scenario.model import VmConfig
from ..transport.base import Transport


@dataclass(frozen=True)
class Accelerator:
    """Which accelerator guests run with, and why."""

    name: str  # "kvm" or "tcg"
    reason: str
    probed: bool = False


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
    volumes: list[str] = field(default_factory=list)
    domain_xml: str = ""
    started: bool = False


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

    def evidence(self) -> dict:
        """What the hypervisor says it applied (live config, block layer, accelerator)."""
        ...


class HypervisorDriver(Protocol):
    name: str

    def describe_host(self) -> dict:
        """Versions and facts recorded with every run."""
        ...

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        """The names the VM will have, before anything is created."""
        ...

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Create disks (not the domain), recording each in ``res`` as it appears; the host
        may run fio on ``res.host_target`` before boot."""
        ...

    def boot(self, run_tag: str, request: VmRequest, resources: VmResources, progress: Progress, timeout: float | None) -> Guest:
        """Define and start the VM, wait until its guest agent answers."""
        ...

    def remove_vm(self, resources: VmResources) -> None:
        """Stop and remove the VM and its disks; safe to call twice or on half-made VMs."""
        ...

    def leftovers(self) -> list[Leftover]:
        ...

    def remove_leftover(self, leftover: Leftover) -> None:
        ...
