"""The hosts of a run: one driver per host (a libvirt host, or a Proxmox node), by name.

A one-host run has one; a run across several hosts (``hypervisor.hosts``) has one per host,
the first being the run's primary host (its environment, the host-only parts, the crypto
benchmark).  Every VM is created, measured and removed through the driver of the host it
is placed on (:attr:`~vmbench.run.plan.LoadUnit.hosts`), and each host has its own work
directory for host-side fio.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..drivers import make_driver
from ..drivers.base import HypervisorDriver
from ..errors import PreflightError
from ..paths import StatePaths
from ..scenario.backend import Storage
from ..scenario.model import Hypervisor
from ..transport.base import HostTransport


@dataclass
class RunHost:
    """One host of a run: its name, its driver and (once made) its work directory."""

    label: str
    driver: HypervisorDriver
    workdir: str = ""

    @property
    def transport(self) -> HostTransport:
        return self.driver.host


def host_storage(hv: Hypervisor, storage: Storage) -> Storage:
    """``storage`` as host ``hv`` has it: its own dir pool where it names one."""
    return replace(storage, pool=hv.pool) if hv.pool else storage


def make_hosts(hv: Hypervisor, storage: Storage, state: StatePaths) -> dict[str, RunHost]:
    """A driver for each host of ``hv``, in order, by name (none is connected yet); ``nodes: all``
    is read into a node list before (vmbench.cli.common.on_hosts)."""
    if hv.all_nodes:
        raise PreflightError("hypervisor.nodes: all was not read from the cluster before the run's drivers were made",
                             "a bug: the command reads the cluster's online nodes first (cli.common.on_hosts)")
    return {m.host_label: RunHost(m.host_label, make_driver(m, host_storage(m, storage), state=state)) for m in hv.members}
