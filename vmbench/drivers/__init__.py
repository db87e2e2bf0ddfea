"""Hypervisor drivers, picked by name (``hypervisor.driver``), and the host transport that
goes with a scenario's hypervisor.

:mod:`.base` holds the Protocols every driver satisfies (checked by mypy: see
tests/unit/test_protocols_typecheck.py); :mod:`.libvirt`, :mod:`.proxmox` and
:mod:`.hostonly` are the drivers.  Runner, CLI, doctor and cleanup get their driver from
:func:`make_driver`; nothing else imports a driver module.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ..errors import UsageError
from ..paths import HostPaths, StatePaths
from ..scenario.backend import Storage
from ..scenario.model import Hypervisor
from ..settings import DriverName
from ..transport.base import HostTransport
from ..transport.local import LocalTransport

if TYPE_CHECKING:
    from ..scenario.spec import Scenario
    from .base import HypervisorDriver
    from .existing import CurrentVm

#: driver name -> "module:class", imported only when used
DRIVERS = {
    DriverName.LIBVIRT: "vmbench.drivers.libvirt.driver:LibvirtDriver",
    DriverName.PROXMOX: "vmbench.drivers.proxmox.driver:ProxmoxDriver",  # a PVE node through its API, SSH for host work
    DriverName.NONE: "vmbench.drivers.hostonly:HostOnlyDriver",  # host-only scenarios: storage, no VM
}

#: driver name -> whether its guests lift the scratch disk's I/O limits for a precondition
#: (``Guest.limits_lifted``: libvirt sets them to no limit live, then back; a Proxmox VM keeps
#: them on, so its precondition writes through them).  vmbench plan says and estimates which.
LIFTS_LIMITS = {DriverName.LIBVIRT: True, DriverName.PROXMOX: False, DriverName.NONE: False}

#: driver name -> "module:function" reading a user's existing VM, read only (issue 18)
READERS = {
    DriverName.LIBVIRT: "vmbench.drivers.libvirt.current:read_current",
    DriverName.PROXMOX: "vmbench.drivers.proxmox.current:read_current",
}


def make_host(hv: Hypervisor) -> HostTransport:
    """Where the hypervisor host's commands run: this machine, or SSH to the host."""
    if hv.ssh is None:
        return LocalTransport()
    from ..transport.ssh import SshTransport  # paramiko: imported only for a host reached over SSH (start-up time)

    return SshTransport(hv.ssh)


def make_driver(hv: Hypervisor, storage: Storage | None = None, *, host: HostTransport | None = None,
                state: StatePaths | None = None) -> "HypervisorDriver":
    """The driver of ``hv.driver``; every driver class takes these arguments."""
    state = state or StatePaths.default()
    module, _, cls = DRIVERS[hv.driver].partition(":")
    driver_cls = getattr(importlib.import_module(module), cls)
    driver: HypervisorDriver = driver_cls(hv, storage or Storage(), host=host or make_host(hv), state=state,
                                          paths=HostPaths.for_host(hv.state_dir, state))
    return driver


def read_current(scenario: "Scenario", ident: str, disk: str | None = None) -> "CurrentVm":
    """The VM ``ident`` on the scenario's hypervisor, read only: a libvirt domain name or a
    Proxmox VMID.  ``disk``: the disk to read (``vda``, ``scsi0``...); default: the boot disk."""
    hv = scenario.hypervisor
    if hv.driver not in READERS:
        raise UsageError(f"the scenario's hypervisor.driver is {hv.driver.value}: there is no VM to read {ident} from",
                         "read an existing VM with a scenario whose hypervisor.driver is libvirt or proxmox")
    module, _, func = READERS[hv.driver].partition(":")
    reader = getattr(importlib.import_module(module), func)
    current: CurrentVm = reader(hv, ident, disk)
    return current
