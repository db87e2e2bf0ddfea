"""The fakes and the real drivers satisfy the same Protocols the runner is written against.

mypy checks this module (setup.cfg ``[mypy] files``; tests/unit/test_types.py runs it): each
assignment below is a structural check of a class against a Protocol, so a fake that drifts
from the contract, or a Protocol that gains a method a driver lacks, fails the type check.
The functions are never called by mypy; pytest calls the fake ones."""

from __future__ import annotations

from vmbench.drivers.base import Guest, HypervisorDriver
from vmbench.drivers.hostonly import HostOnlyDriver
from vmbench.drivers.libvirt.driver import LibvirtDriver
from vmbench.drivers.libvirt.guest import LibvirtGuest
from vmbench.drivers.libvirt.storage import DirPoolStorage
from vmbench.drivers.proxmox.agent import PveAgentTransport
from vmbench.drivers.proxmox.driver import ProxmoxDriver, PveGuest
from vmbench.drivers.proxmox.storage import PveStorage
from vmbench.storage import HostStorage, VolumeStorage
from vmbench.storage.zfs import ZfsStorage
from vmbench.transport.agent import GuestAgentTransport
from vmbench.transport.base import HostTransport, Transport
from vmbench.transport.local import LocalTransport
from vmbench.transport.ssh import SshTransport
from tests.fakes import FakeDriver, FakeGuestTransport, FakeHost, FakeStorage, ScriptedTransport


def fake_parts() -> tuple[HypervisorDriver, VolumeStorage, HostTransport, Transport, Transport]:
    driver: HypervisorDriver = FakeDriver()
    storage: VolumeStorage = FakeStorage()
    host: HostTransport = FakeHost()
    scripted: Transport = ScriptedTransport()
    return driver, storage, host, scripted, driver.host


def fake_guest(driver: FakeDriver, guest_transport: FakeGuestTransport) -> tuple[Guest, Transport]:
    return driver.guests[0], guest_transport


def real_drivers(libvirt: LibvirtDriver, proxmox: ProxmoxDriver, hostonly: HostOnlyDriver) -> tuple[HypervisorDriver, ...]:
    return libvirt, proxmox, hostonly


def real_guests(libvirt: LibvirtGuest, proxmox: PveGuest) -> tuple[Guest, ...]:
    return libvirt, proxmox


def real_storages(dir_pool: DirPoolStorage, zfs: ZfsStorage, pve: PveStorage) -> tuple[VolumeStorage, VolumeStorage, HostStorage]:
    return dir_pool, zfs, pve


def real_transports(local: LocalTransport, ssh: SshTransport, qga: GuestAgentTransport,
                    pve: PveAgentTransport) -> tuple[HostTransport, HostTransport, Transport, Transport]:
    return local, ssh, qga, pve


def test_the_fakes_are_what_the_runner_is_given() -> None:
    driver, storage, host, scripted, driver_host = fake_parts()
    assert driver.name == "fake" and driver.needs_image
    assert storage.label == "fake pool" and host.describe() == {} and driver_host is driver.host
    assert scripted.name
