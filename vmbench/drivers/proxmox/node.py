"""What the Proxmox driver's parts share: the node's settings, its API client (made on first
use), its SSH transport, its storage and what was made for each VM.  :class:`PveNode` is
the base of :class:`~.preflight.Preflight`, :class:`~.removal.Removal` and the
:class:`~.driver.ProxmoxDriver` built from them."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from ...errors import HypervisorError
from ...paths import HostPaths, StatePaths
from ...progress import NullProgress, Progress
from ...scenario.backend import Storage
from ...scenario.model import CephConfig, Hypervisor
from ...storage import make_zfs_storage
from ...storage.zfs import ZfsStorage
from ...transport.base import HostTransport
from ..base import Accelerator
from .api import PveApi, TaskResult, read_secret
from .cluster import Inventory
from ...guest.needs import GuestNeeds
from .rbd import PveRbd
from .storage import PveStorage, ZfsEntries

if TYPE_CHECKING:
    from .tokenrights import RightsReport

log = logging.getLogger(__name__)


@dataclass
class VmRecord:
    """What this driver made for one VM (kept until it is removed)."""

    name: str
    node: str
    run_tag: str
    vmid: int | None = None
    disk_key: str | None = None
    scratch_volid: str | None = None
    entry: str | None = None  # the temporary storage entry holding the scratch disk (zfspool, or rbd for krbd)
    storages: set[str] = field(default_factory=set)  # where its disks were allocated
    warnings: list[str] = field(default_factory=list)


class PveNode:
    """A Proxmox VE node as the driver reaches it: the API, SSH, the scenario's storage."""

    def __init__(self, hv: Hypervisor, storage: Storage, *, host: HostTransport, state: StatePaths, paths: HostPaths,
                 api: PveApi | None = None, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if hv.proxmox is None:
            raise HypervisorError("the proxmox driver needs hypervisor settings for driver: proxmox")
        self.hv = hv
        self.cfg = hv.proxmox
        self.node = self.cfg.node
        self.host = host
        self.state = state
        self.paths = paths
        self.scenario_storage = storage
        self.clock = clock
        self.sleep = sleep
        self._api = api
        self.zfs: ZfsStorage | None = None
        self.entries: ZfsEntries | None = None
        #: the PVE storage type the scenario's storage backend puts the scratch disks on, when not hypervisor.storage as it is
        pve_type = storage.backend.proxmox_type
        if pve_type == "zfspool" and storage.dataset:  # zvols through temporary zfspool entries on the dataset
            self.zfs = make_zfs_storage(storage, host)
            self.entries = ZfsEntries(self.api, host, self.node, storage.dataset, storage.sparse, per_node=bool(hv.name))
        #: storage.type rbd: hypervisor.storage is an rbd storage; its Ceph client (``ceph``) is read at preflight
        self.rbd: PveRbd | None = None
        if pve_type == "rbd":
            self.rbd = PveRbd(self.api, host, self.node, self.cfg.storage, per_node=bool(hv.name))
        self.ceph: CephConfig | None = None
        self.storage = PveStorage(self.api, self.node, self.cfg.storage, self.zfs, self.rbd)
        self.accelerator: Accelerator | None = None
        self.template_vmid: int | None = None
        self.template_node: str | None = None  # the node the template is on (read at preflight)
        self.inventory = Inventory()  # the cluster as preflight read it
        self.template_config: dict = {}
        self.progress: Progress = NullProgress()
        self.vms: dict[str, VmRecord] = {}
        #: what a template vmbench did not make is checked for at the first boot (once per run)
        self.guest_needs: GuestNeeds | None = None
        self.guest_checked = False
        self.pve_version: str | None = None  # /version's, read at preflight
        #: the token's rights as preflight read them; a required one missing refuses unless this is off (doctor)
        self.rights: "RightsReport | None" = None
        self.refuse_missing_rights = True

    def __repr__(self) -> str:
        return f"ProxmoxDriver({self.cfg.url}, node {self.node})"

    def api(self) -> PveApi:
        """The API client, made on first use (the secret is read then)."""
        if self._api is None:
            self._api = PveApi(self.cfg, read_secret(self.cfg), clock=self.clock, sleep=self.sleep, notice=self._notice)
        return self._api

    def _notice(self, text: str) -> None:
        """What the API says while it waits out an outage (in the progress output and the run's log)."""
        log.warning("%s", text)
        self.progress.warn(text)

    def close(self) -> None:
        if self._api is not None:
            try:
                self._api.session.close()
            except Exception:  # noqa: BLE001 - closing is best effort
                pass
        self.host.close()

    def wait_task(self, upid: str | None, timeout: float, what: str, rec: VmRecord | None = None) -> TaskResult:
        result = self.api().wait_task(upid, timeout, what)
        if result.warnings:
            text = f"{what}: Proxmox finished with {result.exitstatus}: " + "; ".join(result.warnings)
            self.progress.warn(text)
            if rec is not None:
                rec.warnings.append(text)
        return result
