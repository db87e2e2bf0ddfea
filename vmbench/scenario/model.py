"""A validated scenario: frozen dataclasses, no raw dicts downstream."""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Sequence, Union

from ..settings import (KNOWN_CPU_FLAGS, Accel, Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, DriverName, Feature, Filesystem,
                        ImageFormat)
from ..transport.sshconfig import SshConfig as SshConfig  # re-exported: the scenario names it, the transport defines it

MiB = 1 << 20


@dataclass(frozen=True)
class CpuConfig:
    mode: CpuMode = CpuMode.MODEL
    model: str | None = "kvm64"
    aes: Feature = Feature.DEFAULT
    features: tuple[tuple[str, Feature], ...] = ()  # other flags forced on/off

    @property
    def label(self) -> str:
        name = self.model if self.mode is CpuMode.MODEL else self.mode.value
        flags = ""
        if self.aes is Feature.ON:
            flags += "+aes"
        elif self.aes is Feature.OFF:
            flags += "-aes"
        for feat, state in self.features:
            flags += ("+" if state is Feature.ON else "-") + feat
        return f"{name}{flags}"

    def all_features(self) -> tuple[tuple[str, Feature], ...]:
        """Every forced flag, aes first."""
        out = [] if self.aes is Feature.DEFAULT else [("aes", self.aes)]
        return tuple(out) + tuple(f for f in self.features if f[1] is not Feature.DEFAULT)


def parse_cpu_label(label: str) -> CpuConfig:
    """A stored CPU label (:attr:`CpuConfig.label`: ``kvm64``, ``host-passthrough``, ``max``,
    ``x86-64-v2-AES+aes``, ``qemu64-aes+pcid``) back to a :class:`CpuConfig`.  Model names
    hold no ``+``; a ``-flag`` ending the model name is read as a flag only for known flag names."""
    text = label.strip()
    if not text:
        raise ValueError("an empty CPU label")
    stem, plus, rest = text.partition("+")
    flags: list[tuple[str, Feature]] = []
    while True:  # known flags removed at the end of the model name (qemu64-aes, x86-64-v2-AES-pcid)
        m = next((f for f in KNOWN_CPU_FLAGS if stem.endswith("-" + f) and len(stem) > len(f) + 1), None)
        if m is None:
            break
        flags.insert(0, (m, Feature.OFF))
        stem = stem[: -len(m) - 1]
    if plus:
        for sign, name in _split_flags("+" + rest):
            flags.append((name, Feature.ON if sign == "+" else Feature.OFF))
    aes = next((s for n, s in flags if n == "aes"), Feature.DEFAULT)
    feats = tuple(sorted((n, s) for n, s in flags if n != "aes"))
    if stem in ("host-passthrough", "host"):
        return CpuConfig(CpuMode.HOST_PASSTHROUGH, None, aes, feats)
    if stem == "max":
        return CpuConfig(CpuMode.MAX, None, aes, feats)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", stem):
        raise ValueError(f"{label!r} is not a CPU label (a model name, host-passthrough or max, then +flag/-flag)")
    return CpuConfig(CpuMode.MODEL, stem, aes, feats)


def _split_flags(text: str) -> list[tuple[str, str]]:
    """``+aes-spec-ctrl+pcid`` -> [("+","aes"), ("-","spec-ctrl"), ("+","pcid")]."""
    out: list[tuple[str, str]] = []
    for sign, name in re.findall(r"([+-])([^+-]+)", text):
        if out and sign == "-" and any(k.startswith(out[-1][1] + "-" + name) for k in KNOWN_CPU_FLAGS):
            out[-1] = (out[-1][0], out[-1][1] + "-" + name)
        else:
            out.append((sign, name))
    return out


@dataclass(frozen=True)
class ZfsSettings:
    """The ZFS settings of a cell's scratch storage (``storage.type`` zfs or zfs-dataset):
    None/empty where the scenario leaves ZFS's own default (never for volblocksize and
    recordsize on ZFS storage: the loader always states them)."""

    volblocksize: int | None = None  # zvols
    recordsize: int | None = None  # datasets
    properties: tuple[tuple[str, str], ...] = ()  # (name, value), sorted by name

    def get(self, name: str) -> str | None:
        return dict(self.properties).get(name)

    def with_property(self, name: str, value: str) -> "ZfsSettings":
        props = dict(self.properties)
        props[name] = value
        return ZfsSettings(self.volblocksize, self.recordsize, tuple(sorted(props.items())))

    def key(self) -> str:
        return f"vbs={self.volblocksize};rs={self.recordsize};" + ";".join(f"{k}={v}" for k, v in self.properties)


#: the per-disk I/O limits, by their Proxmox names: the rates (IOPS, MiB/s), their bursts, and
#: the length of every burst; each is an axis of its own (vmbench.scenario.axes)
LIMIT_RATES = ("iops", "iops_rd", "iops_wr", "mbps", "mbps_rd", "mbps_wr")
LIMIT_BURSTS = tuple(f"{r}_max" for r in LIMIT_RATES)
LIMIT_NAMES = LIMIT_RATES + LIMIT_BURSTS + ("burst_length",)


def limit_bytes(mbps: float) -> int:
    """MiB/s as the bytes per second QEMU gets: truncated, as qemu-server's ``int($v * 1024 * 1024)``."""
    return int(mbps * MiB)


def limit_mbps(value: float) -> float:
    """A MiB/s figure as vmbench states it: to the thousandth (about 1 KiB/s), a whole number as an int."""
    rounded = round(float(value), 3)
    return int(rounded) if rounded == int(rounded) else rounded


@dataclass(frozen=True)
class IoLimits:
    """The scratch disk's I/O limits (QEMU's throttling), as Proxmox names them: None is no
    limit.  ``iops*`` are operations per second, ``mbps*`` MiB per second (Proxmox's
    "megabytes"); ``*_max`` is a burst above its rate, which lasts ``burst_length`` seconds
    (every burst that is set; QEMU's default 1).  A total and its read or write rate exclude
    each other, and a burst needs its rate (vmbench.scenario.vm checks both)."""

    iops: int | None = None
    iops_rd: int | None = None
    iops_wr: int | None = None
    mbps: float | None = None
    mbps_rd: float | None = None
    mbps_wr: float | None = None
    iops_max: int | None = None
    iops_rd_max: int | None = None
    iops_wr_max: int | None = None
    mbps_max: float | None = None
    mbps_rd_max: float | None = None
    mbps_wr_max: float | None = None
    burst_length: int | None = None

    def get(self, name: str) -> float | None:
        return getattr(self, name)

    def given(self) -> dict[str, float]:
        """The limits that are set, in :data:`LIMIT_NAMES` order."""
        return {n: v for n in LIMIT_NAMES if (v := self.get(n)) is not None}

    def bursts(self) -> tuple[str, ...]:
        """The bursts that are set (``iops_max``, ``mbps_rd_max``...)."""
        return tuple(n for n in LIMIT_BURSTS if self.get(n) is not None)

    def write_rate(self, block: int) -> float | None:
        """Bytes a second these limits let through for writes of ``block`` bytes, bursts left
        aside (QEMU counts each request as one operation); None when no limit holds writes."""
        rates = [float(limit_bytes(v)) for n in ("mbps", "mbps_wr") if (v := self.get(n)) is not None]
        rates += [float(v * block) for n in ("iops", "iops_wr") if (v := self.get(n)) is not None]
        return min(rates) if rates else None


@dataclass(frozen=True)
class VmConfig:
    """Everything about a VM that needs its own boot."""

    vcpus: int = 2
    memory_mib: int = 1024
    bus: Bus = Bus.VIRTIO_BLK
    cache: Cache = Cache.NONE
    iothread: bool = False
    aio: Aio = Aio.THREADS
    cpu: CpuConfig = CpuConfig()
    format: ImageFormat = ImageFormat.RAW
    zfs: ZfsSettings = ZfsSettings()  # the scratch storage's ZFS settings (ZFS storage only)
    detect_zeroes: DetectZeroes | None = None  # None: the hypervisor's default (libvirt off, Proxmox on/unmap)
    discard: Discard | None = None  # None: the hypervisor's default (ignore)
    limits: IoLimits = IoLimits()  # the scratch disk's I/O limits; none by default
    #: Proxmox rbd storage only: the scratch disk mapped through the kernel (krbd, a temporary
    #: storage entry with ``krbd 1`` on the same pool) or through librbd; None: as the storage says
    krbd: bool | None = None

    def storage_key(self) -> str:
        """Equal keys mean the same host storage settings (one host reference serves both)."""
        return self.zfs.key()



# ---- in-guest storage layers ------------------------------------------------------------


@dataclass(frozen=True)
class PartitionLayer:
    align: int = 1 * MiB

    kind = "partition"

    @property
    def label(self) -> str:
        return "partition"


@dataclass(frozen=True)
class LvmLayer:
    thin: bool = False
    extent_size: int = 4 * MiB

    kind = "lvm"

    @property
    def label(self) -> str:
        return "lvm-thin" if self.thin else "lvm"


@dataclass(frozen=True)
class LuksLayer:
    version: int = 2
    cipher: str = "aes-xts-plain64"
    key_size: int = 512
    sector_size: int | None = None  # None: cryptsetup's own choice
    perf_flags: tuple[str, ...] = ()  # no_read_workqueue, no_write_workqueue

    kind = "luks"

    @property
    def label(self) -> str:
        return f"luks{self.version}"


@dataclass(frozen=True)
class FilesystemLayer:
    fs: Filesystem = Filesystem.EXT4
    mkfs_options: tuple[str, ...] = ()
    mount_options: tuple[str, ...] = ()

    kind = "filesystem"

    @property
    def label(self) -> str:
        return self.fs.value


Layer = Union[PartitionLayer, LvmLayer, LuksLayer, FilesystemLayer]


@dataclass(frozen=True)
class Stack:
    name: str
    layers: tuple[Layer, ...]
    measure_all: bool = True  # fio on every layer; False: only on the top layer

    def measures(self, depth: int) -> bool:
        """Whether fio runs on the layer at ``depth`` (1 = the first layer above the raw disk)."""
        return self.measure_all or depth == len(self.layers)

    @property
    def filesystem(self) -> FilesystemLayer | None:
        last = self.layers[-1] if self.layers else None
        return last if isinstance(last, FilesystemLayer) else None

    @property
    def luks(self) -> LuksLayer | None:
        return next((l for l in self.layers if isinstance(l, LuksLayer)), None)

    def describe(self) -> str:
        return " -> ".join(["raw"] + [l.label for l in self.layers])


def layer_path(stack: Stack | None, depth: int) -> str:
    """The name of a measured layer: 'raw', or the labels up to ``depth`` joined by '+'."""
    if stack is None or depth == 0:
        return "raw"
    return "+".join(l.label for l in stack.layers[:depth])


# ---- scenario ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """One point of the matrix: a named VM configuration and the stacks measured in it."""

    name: str
    vm: VmConfig
    stacks: tuple[Stack, ...] = ()
    changed: tuple[str, ...] = ()  # the settings that differ from the baseline / previous step


@dataclass(frozen=True)
class Target:
    """A throughput/latency goal for a job on a layer; reports mark pass or fail."""

    job: str
    layer: str | None = None  # a layer path ('raw', 'luks2+ext4') or None for every layer
    stack: str | None = None
    cell: str | None = None
    min_iops: float | None = None
    min_mb_s: float | None = None
    max_p99_ms: float | None = None

    def describe(self) -> str:
        parts = []
        if self.min_mb_s is not None:
            parts.append(f"MB/s >= {self.min_mb_s:g}")
        if self.min_iops is not None:
            parts.append(f"IOPS >= {self.min_iops:g}")
        if self.max_p99_ms is not None:
            parts.append(f"p99 <= {self.max_p99_ms:g} ms")
        return ", ".join(parts)


@dataclass(frozen=True)
class ProxmoxConfig:
    """How vmbench reaches a Proxmox VE node through its API (``hypervisor.driver: proxmox``).

    The API token's secret is never here: only where to read it at connect time
    (``secret_file`` or ``secret_env``).  TLS is verified against ``tls_ca_file``, pinned
    to ``tls_fingerprint`` (SHA-256 of the server certificate), checked against the system
    CAs (neither given), or off only when the scenario says ``tls: {verify: false}``."""

    host: str  # the API host (also the SSH host unless ssh.host says otherwise)
    node: str  # the PVE node the VMs run on (the template's node)
    template: int | str  # a VMID, or the unique name of a template VM
    storage: str  # the PVE storage ID for scratch disks
    token_id: str  # user@realm!tokenname
    secret_file: str | None = None
    secret_env: str | None = None
    port: int = 8006
    tls_ca_file: str | None = None
    tls_fingerprint: str | None = None  # "AB:CD:..." (64 hex digits)
    tls_verify: bool = True  # False only when the scenario says so (printed in every report)
    timeout: float = 30.0  # seconds per API request
    clone: str = "linked"  # linked | full (full only where the template's storage can't link)

    @property
    def user(self) -> str:
        return self.token_id.partition("!")[0]

    @property
    def token_name(self) -> str:
        return self.token_id.partition("!")[2]

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"https://{host}:{self.port}"

    @property
    def secret_source(self) -> str:
        """Where the secret is read from, for messages (never the secret)."""
        if self.secret_file:
            return f"the file {self.secret_file} (hypervisor.token.secret_file)"
        return f"the environment variable {self.secret_env} (hypervisor.token.secret_env)"

    @property
    def tls_mode(self) -> str:
        """How the server certificate is checked, in words (recorded with every run)."""
        if self.tls_fingerprint:
            return f"pinned certificate SHA-256 {self.tls_fingerprint}"
        if self.tls_ca_file:
            return f"verified against CA file {self.tls_ca_file}"
        if not self.tls_verify:
            return "verification OFF (tls.verify: false)"
        return "verified against the system CA store"


@dataclass(frozen=True)
class Hypervisor:
    driver: DriverName = DriverName.LIBVIRT
    uri: str = "qemu:///system"  # libvirt's URI; for proxmox the API URL of the node
    accel: Accel = Accel.AUTO
    boot_timeout: float | None = None  # None: 120 s with KVM, 300 s with TCG
    machine: str = "pc"
    ssh: SshConfig | None = None  # None: the hypervisor is this machine
    state_dir: str | None = None  # vmbench's directory on the hypervisor host; None: the default
    proxmox: ProxmoxConfig | None = None  # driver proxmox only
    name: str | None = None  # this host's name in a many-host run (default: its SSH host, or localhost)
    pool: str | None = None  # this host's libvirt dir pool for VM disks (default: storage.pool)
    #: a run across several hosts (libvirt) or nodes (proxmox): each a whole one-host Hypervisor,
    #: the first one being this one's own settings; () for one host, this one
    hosts: tuple["Hypervisor", ...] = ()
    #: explicit placement, host name -> at most that many VMs of a step, filled in order; (): round robin
    place: tuple[tuple[str, int], ...] = ()
    #: proxmox ``nodes: all``: every online node of the cluster, read when the run starts (the
    #: CLI replaces this Hypervisor by the node list it read); until then ``hosts`` is () and no node is named
    all_nodes: bool = False

    @property
    def remote(self) -> bool:
        return self.ssh is not None

    @property
    def host_label(self) -> str:
        """The host's name: in results, reports and messages, and its VMs' placement."""
        if self.name:
            return self.name
        return self.ssh.host if self.ssh else "localhost"

    @property
    def members(self) -> tuple["Hypervisor", ...]:
        """Every host of the run, in order (one: this one)."""
        return self.hosts or (self,)

    @property
    def several(self) -> bool:
        """Whether the run spreads its VMs over several hosts (``nodes: all`` counts as several before it is read)."""
        return len(self.members) > 1 or self.all_nodes

    @property
    def host_labels(self) -> tuple[str, ...]:
        return tuple(h.host_label for h in self.members)

    def member(self, label: str) -> "Hypervisor":
        """The host named ``label`` (KeyError when it is not one of the run's)."""
        for h in self.members:
            if h.host_label == label:
                return h
        raise KeyError(label)


@dataclass(frozen=True)
class CephConfig:
    """How a Ceph client reaches the cluster (``storage.ceph``, type rbd; on Proxmox, read from
    the node's rbd storage): the configuration file (its ``mon_host``), the cephx user (without
    ``client.``), its keyring (None: the one the configuration names, as every Ceph client finds
    it), the pool of the images and, where the configuration has none (an external cluster of a
    Proxmox storage: its ``monhost``), the monitors (``host:port`` joined by ',')."""

    pool: str = "rbd"
    conf: str = "/etc/ceph/ceph.conf"
    user: str = "admin"
    keyring: str | None = None
    mon_host: str | None = None


@dataclass(frozen=True)
class RepeatPolicy:
    """How many times each job runs on each target: ``min`` always; then, while the IOPS
    coefficient of variation of that job's repeats on that target is ``until_cv`` or more,
    one more, up to ``max``.  Without ``until_cv`` (or with ``max == min``) it is fixed."""

    min: int = 1
    max: int = 1
    until_cv: float | None = None  # a fraction: 0.05 is 5%

    @property
    def adaptive(self) -> bool:
        return self.until_cv is not None and self.max > self.min

    @staticmethod
    def cv(iops: Sequence[float]) -> float | None:
        """stdev/mean of the values; None for fewer than two (not known yet)."""
        if len(iops) < 2:
            return None
        mean = statistics.mean(iops)
        sd = statistics.stdev(iops)
        if mean <= 0:
            return 0.0 if sd == 0 else math.inf
        return sd / mean

    def wants_more(self, iops: Sequence[float]) -> bool:
        """Whether a target/job with these stored repeats (in any order) needs one more:
        only once ``min`` are done, below ``max``, while the CV is not known or >= until_cv."""
        if not self.adaptive or len(iops) < self.min or len(iops) >= self.max:
            return False
        cv = self.cv(iops)
        return cv is None or cv >= self.until_cv  # type: ignore[operator]

    def threshold_label(self) -> str:
        return "" if self.until_cv is None else f"{self.until_cv * 100:g}%"

    def describe(self) -> str:
        if not self.adaptive:
            return str(self.min)
        return f"{self.min}..{self.max} until CV < {self.threshold_label()}"

    def to_json(self) -> dict:
        return {"min": self.min, "max": self.max, "until_cv": self.until_cv}

    def label(self) -> str:
        """The policy in words, for reports: "fixed 3 repeats", "3..10 repeats until IOPS CV < 5%"."""
        if not self.adaptive:
            return f"fixed {_count(self.min, 'repeat')}"
        return f"{self.min}..{self.max} repeats until IOPS CV < {self.threshold_label()}"

    def stop(self, n: int, cv: float | None) -> str:
        """Why a group with ``n`` repeats and IOPS CV ``cv`` has that many."""
        if not self.adaptive:
            if n < self.min:
                return f"{n} of {self.min} repeats (run incomplete)"
            return f"fixed {_count(n, 'repeat')}"
        if cv is not None and n >= self.min and cv < (self.until_cv or 0):
            return f"stopped at CV {_percent(cv)} < {self.threshold_label()}"
        if n >= self.max:
            return f"max {self.max} repeats, CV {_percent(cv)}"
        return f"{n} of max {self.max} repeats, CV {_percent(cv)} (run incomplete)"


def _percent(v: float | None) -> str:
    return "-" if v is None else f"{v * 100:.1f}%"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
