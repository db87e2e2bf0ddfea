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

from ..paths import HostPaths, StatePaths
from ..scenario.model import Hypervisor, Storage
from ..settings import DriverName
from ..transport.base import HostTransport

if TYPE_CHECKING:
    from .base import HypervisorDriver

#: driver name -> "module:class", imported only when used
DRIVERS = {
    DriverName.LIBVIRT: "vmbench.drivers.libvirt.driver:LibvirtDriver",
    DriverName.PROXMOX: "vmbench.drivers.proxmox.driver:ProxmoxDriver",  # a PVE node through its API, SSH for host work
    DriverName.NONE: "vmbench.drivers.hostonly:HostOnlyDriver",  # host-only scenarios: storage, no VM
}


def make_host(hv: Hypervisor) -> HostTransport:
    """Where the hypervisor host's commands run: this machine, or SSH to the host."""
    if hv.ssh is None:
        from ..transport.local import LocalTransport

        return LocalTransport()
    from ..transport.ssh import SshTransport

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
