"""A user's existing VM, read only: its disk and CPU settings as vmbench's axes (issue 18).

``vmbench tune`` starts from them and ``vmbench advise`` writes its apply snippets against
them.  Reading never changes the VM: libvirt's domain XML (``virDomainGetXMLDesc``) and the
Proxmox ``GET /nodes/{node}/qemu/{vmid}/config``, plus read-only ``zfs get`` of its disk's
zvol or dataset where the host transport reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, TypeVar

from ..scenario.model import VmConfig

if TYPE_CHECKING:
    from ..scenario.model import Hypervisor, Scenario


T = TypeVar("T")


def read_choice(enum: Any, value: str | None, what: str, where: str, unknown: list[str]) -> Any:
    """``value`` as a member of the Choice ``enum``; None when the VM states none (absent, empty or
    "default"), or when it is not one vmbench knows (said in ``unknown``, naming ``where``)."""
    if value is None or value in ("", "default"):
        return None
    try:
        return enum.parse(value)
    except ValueError:
        unknown.append(f"{what}: {where} has {value!r}, not one of {enum.allowed()}")
        return None


def assume(value: T | None, default: T, note: str, assumed: list[str]) -> T:
    """``value``, or the hypervisor's ``default`` when the VM states none (said in ``assumed``)."""
    if value is not None:
        return value
    assumed.append(note)
    return default


@dataclass(frozen=True)
class CurrentVm:
    """What was read from one VM.

    ``vm``: its settings as a :class:`VmConfig` (bus, cache, aio, iothread, cpu, format,
    limits, detect_zeroes, discard, vcpus, memory; ZFS settings of its disk's storage where
    read).  ``disk``: the disk read (Proxmox ``scsi0``/``virtio0``..., libvirt target ``vda``);
    ``disk_spec``: that disk as configured (the Proxmox option string, or libvirt's ``<disk>``
    element) so an apply snippet keeps its other options.  ``unknown``: what could not be
    expressed as an axis, in words (said, never dropped silently)."""

    source: str  # "libvirt domain web1 (qemu:///system)", "Proxmox VM 101 on node pve1"
    vm: VmConfig
    disk: str
    disk_spec: str
    kind: str  # "libvirt" or "proxmox"
    ident: str  # the domain name or the VMID
    unknown: tuple[str, ...] = ()
    storage: Mapping[str, object] = field(default_factory=dict)  # e.g. {"volblocksize": "16K", "zvol": "rpool/data/vm-101-disk-0"}
    extra: Mapping[str, str] = field(default_factory=dict)  # Proxmox: scsihw, cpu line; libvirt: the <cpu> element
    #: settings the VM does not state, read as the hypervisor's default (said, like ``unknown``)
    assumed: tuple[str, ...] = ()


def read_current(scenario: "Scenario", ident: str, disk: str | None = None) -> CurrentVm:
    """The VM ``ident`` on the scenario's hypervisor, read only: a libvirt domain name
    (read-only connection to ``hypervisor.uri``; over SSH through vmbench's own verified SSH
    connection, as the driver connects) or a Proxmox VMID (one ``GET .../config`` with the
    scenario's API token).  ``disk``: the disk to read (``vda``, ``scsi0``...); default: the
    boot disk."""
    from ..errors import UsageError
    from ..settings import DriverName

    hv = scenario.hypervisor
    if hv.driver is DriverName.LIBVIRT:
        return _read_libvirt(hv, ident, disk)
    if hv.driver is DriverName.PROXMOX:
        return _read_proxmox(hv, ident, disk)
    raise UsageError(f"the scenario's hypervisor.driver is {hv.driver.value}: there is no VM to read {ident} from",
                     "read an existing VM with a scenario whose hypervisor.driver is libvirt or proxmox")


def _read_libvirt(hv: "Hypervisor", name: str, disk: str | None) -> CurrentVm:
    from .libvirt.current import read_domain

    if not hv.remote:
        return read_domain(hv.uri, name, disk=disk)
    from . import make_host
    from .libvirt.bridge import LibvirtBridge

    host = make_host(hv)
    bridge = None
    try:
        opener = getattr(host, "open_stream")
        bridge = LibvirtBridge(opener, hv.uri)
        return read_domain(bridge.local_uri, name, disk=disk, shown_as=hv.uri)
    finally:
        if bridge is not None:
            bridge.close()
        host.close()


def _read_proxmox(hv: "Hypervisor", ident: str, disk: str | None) -> CurrentVm:
    from ..errors import UsageError
    from .proxmox.api import PveApi, read_secret
    from .proxmox.current import read_vm

    cfg = hv.proxmox
    if cfg is None:  # pragma: no cover - the loader always gives driver proxmox its settings
        raise UsageError("the scenario's proxmox settings are missing")
    text = str(ident).strip()
    if not text.isdigit() or not 100 <= int(text) <= 999999999:
        raise UsageError(f"{ident!r} is not a Proxmox VMID (a whole number from 100 to 999999999)",
                         "give the VM's ID as `qm list` shows it")
    api = PveApi(cfg, read_secret(cfg))
    try:
        return read_vm(api, cfg.node, int(text), disk=disk)
    finally:
        try:
            api.session.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
