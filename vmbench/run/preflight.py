"""A run's preflight: everything that can fail before anything is provisioned.

fio on the host; the template image built (for a driver that needs one); a resumed run on
the same host and setup as its first attempt; the driver prepared for every VM the run
boots, which gives the accelerator; and room on the storage: for a load run, every step's
VMs fitting the host's memory and storage (:mod:`.capacity`); on ZFS, a cache-buster sized
by default at least :data:`~vmbench.fio.profiles.CACHE_BUSTER_RAM_FACTOR` x the host's ARC
c_max (:func:`cache_buster_refusal`).  A host-only run needs no image, and its storage only.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..drivers.base import Accelerator, HypervisorDriver
from ..errors import CommandError, PreflightError
from ..guest.needs import guest_needs
from ..images import Image, current_image
from ..paths import StatePaths
from ..progress import Progress
from ..results.db import RunRow
from ..fio.profiles import CACHE_BUSTER_RAM_FACTOR
from ..scenario.jobs import cache_buster_of
from ..scenario.spec import Scenario
from ..storage.radosbench import room_refusal
from ..storage.rbd import RbdStorage
from ..storage.zfs import parse_kstat
from ..settings import CpuMode
from ..units import format_size, human_size
from .capacity import check_capacity, rbd_need, read_host_capacity
from .environment import host_differences, host_environment
from .plan import Plan


class RunPreflight:
    """The checks of one run before it creates anything; what they find on the way (the
    template image, the accelerator) is kept as :attr:`image` and :attr:`accel`."""

    def __init__(self, scenario: Scenario, plan: Plan, driver: HypervisorDriver, progress: Progress, state: StatePaths,
                 resume: RunRow | None, host: str | None = None) -> None:
        self.scenario = scenario
        #: in a run across several hosts, the host checked (its own VMs count for its capacity)
        self.on = host
        self.plan = plan
        self.driver = driver
        self.host = driver.host
        self.progress = progress
        self.state = state
        self.resume = resume
        self.image: Image | None = None
        self.accel: Accelerator | None = None

    def check(self) -> None:
        """Everything that can fail before anything is provisioned."""
        s = self.scenario
        where = self.on or s.hypervisor.host_label
        self.progress.step(f"checking {self.host.name} for scenario {s.name}")
        try:
            self.host.run(["fio", "--version"], timeout=30)
        except CommandError:
            raise PreflightError(f"fio is not installed on {where}", "apt-get install fio (make demo does it here)") from None
        self._check_cache_buster(where)
        if s.host_only:
            self._preflight_storage(where)
            return
        # a driver whose hypervisor holds its own template (Proxmox) needs no local image
        self.image = current_image(s.template, state=self.state) if self.driver.needs_image else None
        if self.image is None and self.driver.needs_image:
            raise PreflightError(
                f"the template image {s.template!r} is not built (or its recipe changed)",
                f"run `vmbench images build {s.template}` (make demo does it)",
            )
        if self.resume is not None:  # before anything is prepared on the host
            self._check_same_host()
        cpu_models = {c.vm.cpu.model for c in s.cells if c.vm.cpu.mode is CpuMode.MODEL and c.vm.cpu.model}
        cpu_modes = {c.vm.cpu.mode for c in s.cells}
        # a load step's VMs have their own settings where the step changes some (limits...)
        vms = [c.vm for c in s.cells] + ([u.vm_of(m) for u in self.plan.load_units() for m in u.step.members] if s.load else [])
        self.accel = self.driver.prepare(image=self.image, accel=s.hypervisor.accel, cpu_models=cpu_models,
                                         cpu_modes=cpu_modes, progress=self.progress, vms=list(dict.fromkeys(vms)),
                                         guest_needs=guest_needs(s))
        self.progress.step(f"accelerator: {self.accel.name} ({self.accel.reason})")
        if self.driver.ceph is not None:  # the Ceph pool under the scratch disks: its free space and quotas
            self._check_pool_room()
        if s.load is not None:
            self._check_capacity(where)
            return
        if self.driver.ceph is None:
            self._check_free(where, s.storage.scratch_size * 2 + (2 << 30))

    def _check_pool_room(self) -> None:
        """RBD: the scratch images and the largest RADOS bench fit the pool's free space and
        quotas, with a margin (:func:`~vmbench.storage.radosbench.room_refusal`)."""
        cfg = self.driver.ceph
        assert cfg is not None
        space = RbdStorage(cfg, self.host).space()
        if space is None:
            return  # the storage's own preflight said the pool is missing
        need, objects, what = rbd_need(self.plan)
        refusal = room_refusal(space, cfg.pool, need, objects, what)
        if refusal is not None:
            raise PreflightError(*refusal)

    def _check_cache_buster(self, where: str) -> None:
        """On ZFS: a default-sized cache-buster is no smaller than the host's ARC needs."""
        s = self.scenario
        if not s.storage.zfs or not any(j.profile == "cache-buster" for j in s.jobs):
            return
        try:
            text = self.host.read_file(ARCSTATS).decode(errors="replace")
        except OSError:
            return  # no ARC to read (the ZFS preflight says why ZFS is not usable)
        refusal = cache_buster_refusal(s, parse_kstat(text, ("c_max",)).get("c_max"), where)
        if refusal is not None:
            raise PreflightError(*refusal)

    def _check_capacity(self, where: str) -> None:
        """A load run: every step's VMs fit the host's memory and storage; vCPU overcommit is said."""
        assert self.accel is not None
        cap = read_host_capacity(self.host, self.driver.storage.free_bytes(), self.driver.storage.label)
        check = check_capacity(self.plan, self.accel.name, cap, where, self.on)
        if check.refusals:
            raise PreflightError(*check.refusals[0])
        for warning in check.warnings:
            self.progress.warn(warning)

    def _preflight_storage(self, where: str) -> None:
        """A host-only run: the storage is usable and big enough; no image, no accelerator."""
        if self.resume is not None:
            self._check_same_host()
        self.accel = self.driver.prepare(accel=self.scenario.hypervisor.accel, cpu_models=set(), cpu_modes=set(),
                                         progress=self.progress)
        self._check_free(where, self.scenario.storage.scratch_size * 2)

    def _check_free(self, where: str, need: int) -> None:
        free = self.driver.storage.free_bytes()
        if free < need:
            raise PreflightError(
                f"{self.driver.storage.label} on {where} has {human_size(free)} free; this scenario needs about {human_size(need)}",
                "free some space or lower storage.scratch_size",
            )

    def _check_same_host(self) -> None:
        assert self.resume is not None
        now = {**host_environment(self.host), **self.driver.describe_host()}
        before: Mapping[str, Any] = self.resume.environment
        if self.on is not None:  # a run across several hosts recorded each host's own
            before = (self.resume.environment.hosts or {}).get(self.on) or {}
        diff = host_differences(before, now)
        if diff:
            raise PreflightError(f"run {self.resume.id} ran on a different host or setup"
                                 + (f" ({self.on})" if self.on else "") + "; resuming would mix results: "
                                 + "; ".join(diff), "start a new run instead")


ARCSTATS = "/proc/spl/kstat/zfs/arcstats"


def cache_buster_refusal(s: Scenario, c_max: int | None, where: str) -> tuple[str, str] | None:
    """(message, hint) when a cache-buster job sized by default (not by its own size) is
    smaller than CACHE_BUSTER_RAM_FACTOR x the ARC's ``c_max`` on the host: its reads could
    come from the ARC.  Pure."""
    size, how = cache_buster_of(s.cells, s.storage)
    short = [j.name for j in s.jobs if j.profile == "cache-buster" and j.size == size]
    if not short or not c_max or size >= CACHE_BUSTER_RAM_FACTOR * c_max:
        return None
    return (f"the ARC on {where} may grow to {human_size(c_max)} (c_max), larger than the cache-buster's basis "
            f"({', '.join(short)}: {how}): its reads could come from the ARC",
            f"state it: storage.arc_max: {format_size(-(-c_max >> 20) << 20)} (the working set becomes "
            f"{human_size(CACHE_BUSTER_RAM_FACTOR * c_max)}), or set the job's size")
