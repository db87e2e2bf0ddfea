"""The ``none`` driver: host-only scenarios, which measure host storage variants with no VM.

It has the driver's shape so the runner, ``vmbench cleanup`` and ``doctor`` treat it like
any other, but it only creates and removes volumes on the scenario's (ZFS) storage through
the host transport: no hypervisor, no image, no accelerator.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, NoReturn, Sequence

from ..errors import HypervisorError, VmbenchError
from ..paths import HostPaths, StatePaths
from ..progress import Progress
from ..guest.needs import GuestNeeds
from ..scenario.backend import Storage
from ..scenario.model import CephConfig, Hypervisor, VmConfig
from ..settings import Accel, CpuMode
from ..storage import VolumeStorage, make_volume_storage
from ..transport import ops
from ..transport.base import HostTransport
from .base import Accelerator, Check, HostChecks, VmRequest, VmResources, create_host_reference
from ..storage.leftover import Leftover, remove_work_leftover, work_leftovers

if TYPE_CHECKING:
    from ..images import Image


class HostOnlyDriver:
    name = "none"
    needs_image = False
    ceph: "CephConfig | None" = None  # host-only scenarios are on ZFS

    def __init__(self, hv: Hypervisor, storage: Storage, *, host: HostTransport, state: StatePaths, paths: HostPaths,
                 scratch_storage: VolumeStorage | None = None) -> None:
        self.hv = hv
        self.host = host
        self.state = state
        self.paths = paths
        volumes = scratch_storage or (make_volume_storage(storage, host) if storage.backend.host_only else None)
        if volumes is None:
            raise HypervisorError("a host-only scenario needs ZFS storage (storage.type zfs or zfs-dataset)")
        self.storage: VolumeStorage = volumes

    def prepare(self, *, image: "Image | None" = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: "GuestNeeds | None" = None) -> Accelerator:
        """The storage is usable; no image, no accelerator, no VM settings to check."""
        self.storage.prepare(progress)
        return Accelerator("none", "host only: no VM")

    def cached_accelerator(self) -> str | None:
        return None

    def describe_host(self) -> dict:
        out: dict = {"driver": self.name, "hostname": ops.first_line(self.host, ["hostname"]), "host_state_dir": self.paths.root}
        memory = ops.read_text(self.host, "/proc/meminfo") or ""
        m = re.search(r"^MemTotal:\s+(\d+) kB", memory, re.M)
        if m:
            out["host_memory_mib"] = int(m.group(1)) // 1024
        out.update(self.host.describe())
        out.update(self.storage.facts())
        return out

    def doctor_checks(self, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
        """The storage a host-only scenario measures and its recorded ZFS facts."""
        out = []
        try:
            self.storage.prepare(progress)
            out.append(Check("storage", "ok", f"{self.storage.label}: {self.storage.free_bytes() >> 30} GiB free"))
            facts = self.storage.facts()
            scan = facts.get("zfs_scan")
            out.append(Check("zfs", "warn" if scan else "ok",
                             f"{facts.get('zfs_userland', '?')} / {facts.get('zfs_kmod', '?')}, ashift {facts.get('zpool_ashift', '?')}, "
                             f"zfs_txg_timeout {facts.get('zfs_txg_timeout_s', '?')} s" + (f"; a {scan} is running" if scan else ""),
                             "results taken during a scrub or resilver are flagged" if scan else ""))
        except VmbenchError as exc:
            out.append(Check("storage", "FAIL", exc.message, exc.hint or ""))
            return HostChecks(tuple(out), answered=False)
        return HostChecks(tuple(out), answered=True)

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        return VmResources(name=f"vmbench-{run_tag}-{request.seq}", scratch_path="", scratch_serial="", host_target=None)

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> NoReturn:  # pragma: no cover
        raise HypervisorError("a host-only scenario boots no VM")

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None,
             timeout: float | None = None) -> NoReturn:  # pragma: no cover
        raise HypervisorError("a host-only scenario boots no VM")

    def create_host_reference(self, run_tag: str, request: VmRequest, res: VmResources) -> str:
        return create_host_reference(self.storage, run_tag, request, res)

    def remove_vm(self, res: VmResources) -> None:
        errors = []
        for name in dict.fromkeys(res.volumes + res.expected_volumes):
            try:
                self.storage.delete_volume(name)
            except HypervisorError as exc:
                errors.append(exc.message)
        if errors:
            raise HypervisorError("cleanup incomplete: " + "; ".join(errors), "run `vmbench cleanup` to retry")

    def leftovers(self) -> list[Leftover]:
        return self.storage.leftovers() + work_leftovers(self.host, self.paths.work)

    def remove_leftover(self, item: Leftover) -> None:
        if item.kind == "directory":
            remove_work_leftover(self.host, self.paths.work, item)
        else:  # what the storage listed: zvols, datasets
            self.storage.delete_path(item.name)

    def check_step(self, need: int, what: str = "the step's VMs") -> None:
        """A host-only run has no load steps."""

    def close(self) -> None:
        self.host.close()
