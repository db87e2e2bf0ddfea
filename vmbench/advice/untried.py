"""What commonly matters for a goal, by goal metric: the next experiments to suggest when a
run did not measure them ("not measured: aio io_uring, virtio-scsi with iothread").

A small table, not a model: each :class:`Candidate` names settings (the axes'
``settings_key`` names of :mod:`vmbench.scenario.axes`, with their typed values: a
:class:`~vmbench.settings.Cache`, a flag...; a host storage property as stored) and where it
applies.  :func:`not_tried` keeps those no valid cell of the run has.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

from ..results.records import Settings
from ..settings import Aio, Bus, Cache
from .model import GoalMetric

VARIED = "*"  # a value that means "any value other than the baseline's": the axis was varied
AES = "+aes"  # a CPU with AES-NI: host-passthrough, max, or a model with +aes


@dataclass(frozen=True)
class Candidate:
    """Settings worth measuring for a goal.  ``applies``: "vm" (a guest run), "zvol" (ZFS
    zvols), "dataset" (ZFS datasets), "zfs" (either), "luks" (a stack with a LUKS layer);
    ``writes``: only for a job that writes."""

    settings: Mapping[str, object]
    why: str
    applies: str = "vm"
    writes: bool = False

    @property
    def label(self) -> str:
        return " with ".join(_label(k, v) for k, v in self.settings.items())


def _label(key: str, value: object) -> str:
    if value is VARIED:
        return f"{key} (another value)"
    if value is True:
        return key
    if key == "cpu" and value == AES:
        return "a CPU model with AES-NI (host-passthrough, or +aes)"
    return f"{key} {value}"


_LATENCY = (
    Candidate({"aio": Aio.IO_URING}, "fewer syscalls per I/O than threads"),
    Candidate({"iothread": True}, "takes the disk's I/O off QEMU's main loop"),
    Candidate({"bus": Bus.VIRTIO_SCSI, "iothread": True}, "one controller per disk (Proxmox virtio-scsi-single) with its own iothread"),
    Candidate({"cache": Cache.NONE}, "O_DIRECT on the host: no double caching, no page-cache copies"),
)
_ZFS_WRITES = (
    Candidate({"volblocksize": VARIED}, "the zvol's block size against the guest's I/O size (write amplification)",
              applies="zvol", writes=True),
    Candidate({"recordsize": VARIED}, "the dataset's record size against the guest's I/O size (write amplification)",
              applies="dataset", writes=True),
    Candidate({"compression": "lz4"}, "fewer bytes to the pool for compressible data", applies="zfs", writes=True),
)
_LUKS = (Candidate({"cpu": AES}, "without the aes flag the guest encrypts in software (see the crypto ceiling)", applies="luks"),)

#: by goal metric, in the order they are suggested
COMMON: Mapping[GoalMetric, tuple[Candidate, ...]] = {
    GoalMetric.IOPS: _LATENCY + _ZFS_WRITES + _LUKS,
    GoalMetric.P50: _LATENCY + _LUKS,
    GoalMetric.P95: _LATENCY + _LUKS,
    GoalMetric.P99: _LATENCY + _LUKS,
    GoalMetric.P999: _LATENCY + _LUKS,
    GoalMetric.MBPS: (Candidate({"aio": Aio.IO_URING}, "fewer syscalls per I/O than threads"),
                      Candidate({"iothread": True}, "takes the disk's I/O off QEMU's main loop")) + _ZFS_WRITES + _LUKS,
    GoalMetric.CPU_PER_IO: (Candidate({"iothread": True}, "the I/O path's CPU on a thread of its own"),
                            Candidate({"aio": Aio.IO_URING}, "fewer syscalls per I/O than threads"),
                            Candidate({"aio": Aio.NATIVE}, "Linux AIO: no thread pool")),
}


def has_aes(cpu: object) -> bool:
    label = str(cpu or "")
    return "+aes" in label or label in ("host-passthrough", "host", "max")


def measured(c: Candidate, cells: Sequence[Settings]) -> bool:
    """Some cell (stored settings) has every setting of ``c``; a :data:`VARIED` setting is
    measured when the cells hold two values or more of it."""
    for key, want in c.settings.items():
        if want is VARIED and len({repr(s.value(key)) for s in cells}) < 2:
            return False
    fixed = {k: v for k, v in c.settings.items() if v is not VARIED}
    return any(all(_matches(s, k, v) for k, v in fixed.items()) for s in cells)


def _matches(stored: Settings, key: str, want: object) -> bool:
    """Whether a cell's stored setting ``key`` is ``want``: read back typed through its axis;
    a value no axis reads back (a host storage property) as stored."""
    have = stored.value(key)
    if key == "cpu" and want == AES:
        return has_aes(have)
    typed = stored.typed(key)
    if typed is not None:
        return typed == want
    if isinstance(want, bool):
        return have is want or str(have).lower() == str(want).lower()
    return str(have) == str(want)


def not_tried(metric: GoalMetric, cells: Sequence[Settings], *, guest: bool, storage: str = "",
              writes: bool = False, luks: bool = False) -> list[Candidate]:
    """The candidates for ``metric`` that apply to the run (``guest``: it ran VMs;
    ``storage``: "zvol", "dataset", "rbd" or ""; ``writes``: the goal's job writes; ``luks``: a stack
    has a LUKS layer) and that no cell measured."""
    out = []
    for c in COMMON.get(metric, ()):
        if c.applies == "vm" and not guest:
            continue
        if c.applies in ("zvol", "dataset") and storage != c.applies:
            continue
        if c.applies == "zfs" and storage not in ("zvol", "dataset"):
            continue
        if c.applies == "luks" and not (luks and guest):
            continue
        if c.writes and not writes:
            continue
        if storage == "rbd" and "aio" in c.settings:
            continue  # librbd does its own I/O: aio does not apply to an RBD disk
        if not measured(c, cells):
            out.append(c)
    return out


# ---- the shipped scenario to run next ------------------------------------------------------------


@dataclass(frozen=True)
class NextRun:
    """A shipped scenario (``scenarios/`` of the source tree) that measures settings a run did
    not try: what the advice suggests running next when the run measured no change worth
    making.  ``axes``: the stored settings it varies; ``drivers``: the hypervisor drivers it is
    for (``none``: host only); ``storage``: "", "zvol", "dataset", "rbd" or "zfs" (either ZFS
    kind); ``tune``: it is a tune (``vmbench tune``).  tests/unit/test_next_run.py loads each
    and checks that it varies its ``axes`` on its drivers and storage."""

    path: str
    compares: str
    axes: frozenset[str]
    drivers: tuple[str, ...] = ("libvirt",)
    storage: str = ""
    tune: bool = False

    @property
    def command(self) -> str:
        return f"vmbench {'tune' if self.tune else 'run'} {self.path}"

    def fits(self, driver: str, storage: str) -> bool:
        return driver in self.drivers and (self.storage == storage or (self.storage == "zfs" and storage in ("zvol", "dataset")))


_ZFS_HOSTS = ("libvirt", "proxmox", "none")  # a host-only ZFS run measures the host's pool under any of them

#: in the order they are suggested when several cover as much
NEXT_RUNS: tuple[NextRun, ...] = (
    NextRun("scenarios/tune.yaml", "it tries bus, cache, iothread and aio one change at a time (4K random reads) and "
            "keeps each that helps", frozenset({"bus", "cache", "iothread", "aio"}), tune=True),
    NextRun("scenarios/bus-and-iothread.yaml", "it compares every bus with and without an iothread (4K random I/O, 1M reads)",
            frozenset({"bus", "iothread"})),
    NextRun("scenarios/cache-modes.yaml", "it compares every QEMU cache mode (4K writes, sync and async, 4K reads, 1M writes)",
            frozenset({"cache"})),
    NextRun("scenarios/proxmox.yaml", "it compares Proxmox's default disk against one change at a time (aio, cache, "
            "iothread, bus)", frozenset({"aio", "cache", "iothread", "bus"}), drivers=("proxmox",)),
    NextRun("scenarios/cpu-aes.yaml", "it compares LUKS2 with kvm64 (no AES-NI) against CPU models with AES-NI",
            frozenset({"cpu"})),
    NextRun("scenarios/cpu-per-io.yaml", "it compares the host CPU per I/O by bus, iothread and aio at a fixed rate",
            frozenset({"bus", "iothread", "aio"})),
    NextRun("scenarios/zfs-volblocksize.yaml", "it compares zvol volblocksizes on the host (small random and large "
            "sequential writes)", frozenset({"volblocksize"}), drivers=_ZFS_HOSTS, storage="zvol"),
    NextRun("scenarios/zfs-recordsize.yaml", "it compares dataset recordsizes, raw and qcow2, host and guest",
            frozenset({"recordsize", "format"}), storage="dataset"),
    NextRun("scenarios/zfs-compression.yaml", "it compares compression off and lz4 on compressible and incompressible data",
            frozenset({"compression"}), drivers=_ZFS_HOSTS, storage="zfs"),
)


def next_run(candidates: Sequence[Candidate], driver: str, storage: str = "") -> NextRun | None:
    """The shipped scenario for ``driver`` and ``storage`` that measures the most of
    ``candidates`` (each counted when the scenario varies every setting it names), the
    first in :data:`NEXT_RUNS` of those that measure as many; None when none measures any."""
    best, covered = None, 0
    for n in NEXT_RUNS:
        if not n.fits(driver, storage):
            continue
        count = len({c.label for c in candidates if set(c.settings) <= n.axes})
        if count > covered:
            best, covered = n, count
    return best
