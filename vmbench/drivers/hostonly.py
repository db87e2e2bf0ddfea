"""The ``none`` driver: host-only scenarios, which measure host storage variants with no VM.

It has the driver's shape so the runner, ``vmbench cleanup`` and ``doctor`` treat it like
any other, but it only creates and removes volumes on the scenario's (ZFS) storage through
the host transport: no hypervisor, no image, no accelerator.
"""

from __future__ import annotations

import re

from ..errors import HypervisorError
from ..paths import HostPaths, StatePaths
from ..progress import Progress
from ..scenario.model import Hypervisor, Storage
from ..storage import HostStorage, make_zfs_storage
from ..transport import ops
from ..transport.base import Transport
from .base import VmRequest, VmResources, create_host_reference
from ..storage.leftover import Leftover, remove_work_leftover, work_leftovers



class HostOnlyDriver:
    name = "none"
    needs_image = False

    def __init__(self, hv: Hypervisor, storage: Storage, *, host: Transport, state: StatePaths, paths: HostPaths,
                 scratch_storage: HostStorage | None = None) -> None:
        self.hv = hv
        self.host = host
        self.state = state
        self.paths = paths
        if scratch_storage is None and not storage.type.zfs:
            raise HypervisorError("a host-only scenario needs ZFS storage (storage.type zfs or zfs-dataset)")
        self.storage: HostStorage = scratch_storage or make_zfs_storage(storage, host)

    def prepare_storage(self, progress: Progress) -> None:
        self.storage.prepare(progress)

    def prepare(self, **_: object) -> None:  # pragma: no cover - the runner never asks a host-only driver
        raise HypervisorError("a host-only scenario boots no VM")

    def cached_accelerator(self) -> str | None:
        return None

    def describe_host(self) -> dict:
        out: dict = {"driver": self.name, "hostname": ops.first_line(self.host, ["hostname"]), "host_state_dir": self.paths.root}
        memory = ops.read_text(self.host, "/proc/meminfo") or ""
        m = re.search(r"^MemTotal:\s+(\d+) kB", memory, re.M)
        if m:
            out["host_memory_mib"] = int(m.group(1)) // 1024
        describe = getattr(self.host, "describe", None)
        if describe is not None:
            out.update(describe())
        out.update(self.storage.facts())
        return out

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        return VmResources(name=f"vmbench-{run_tag}-{request.seq}", scratch_path="", scratch_serial="", host_target=None)

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:  # pragma: no cover
        raise HypervisorError("a host-only scenario boots no VM")

    def boot(self, *args: object, **kwargs: object) -> object:  # pragma: no cover
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
        if item.kind in ("zvol", "dataset"):
            self.storage.delete_path(item.name)
        elif item.kind == "directory":
            remove_work_leftover(self.host, self.paths.work, item)

    def close(self) -> None:
        close = getattr(self.host, "close", None)
        if close is not None:
            close()
