"""The scenario reference page (docs/scenario-reference.md), rendered from the code: the VM
settings from the axis table (:data:`~vmbench.scenario.axes.AXES`), every other section from a
table here, one :class:`Row` per key, with the loader's own constants for values and defaults.
``python -m vmbench.scenario.reference > docs/scenario-reference.md`` regenerates the page;
tests/unit/test_scenario_reference.py fails when the page and the code disagree.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from ..fio.engines import FILE_ENGINES
from ..fio.job import IOENGINES, MIXED_MODES, RW_MODES, FioJob, Metric
from ..fio.profiles import CACHE_BUSTER_RAM_FACTOR, PROFILES
from ..settings import Accel, DriverName, Feature, Filesystem, PlanMode
from ..units import format_size
from .axes import AXES, STORAGE_AXES, Axis
from .goals import GoalMetric, Risk
from .backend import Storage, StorageType, backends
from .hosts import LIBVIRT_ONLY_KEYS, PROXMOX_ONLY_KEYS, driver_storage_problems
from .jobs import DEFAULT_JOBFILE_SIZE
from .load import DEFAULT_BOOT_PARALLEL, DEFAULT_LEAD_SECONDS, DEFAULT_TAIL_SECONDS, MAX_VMS
from .loader import MAX_REPEATS
from .model import Hypervisor, VmConfig
from .stacks import LUKS_PERF_FLAGS
from .targets import DEFAULT_CRYPTO
from .tune import MAX_BOOTS, NOT_WITH_TUNE, TUNE_MIN_REPEATS
from .zfsprops import DATASET, DEFAULT_RECORDSIZE, DEFAULT_VOLBLOCKSIZE, PROPERTIES, ZVOL

COMMAND = "python -m vmbench.scenario.reference"
PAGE = "docs/scenario-reference.md"
TEST = "tests/unit/test_scenario_reference.py"

ALL = "all"
#: the drivers that boot VMs (``none`` is a host_only scenario's: host storage only)
VM_DRIVERS = ", ".join(d.value for d in DriverName if d is not DriverName.NONE)
LIBVIRT = DriverName.LIBVIRT.value
PROXMOX = DriverName.PROXMOX.value


@dataclass(frozen=True)
class Row:
    """One key: its path (``hypervisor.ssh.port``; ``[]`` marks a list's entries), the values it
    takes, its default, the drivers that take it (or "all"), and what it does in one sentence."""

    key: str
    values: str
    default: str
    drivers: str
    what: str

    @property
    def leaf(self) -> str:
        """The last component of the path: the key as the loader names it."""
        return self.key.rsplit(".", 1)[-1].removesuffix("[]")


@dataclass(frozen=True)
class Table:
    """One section of the page: its title, a paragraph before the table, its rows."""

    title: str
    intro: str
    rows: tuple[Row, ...]


# ---- where a setting applies ------------------------------------------------------------------


def _drivers_of(*kinds: StorageType) -> str:
    """The drivers that take one of these storage types, "all" when every driver does."""
    names = [d.value for d in DriverName
             if any(not driver_storage_problems(Hypervisor(driver=d), Storage(type=k)) for k in kinds)]
    return ALL if len(names) == len(DriverName) else ", ".join(names)


#: the storage type of each kind of ZFS volume (vmbench.scenario.zfsprops), and the kinds each storage axis applies to
_STORAGE_OF = {b.zfs_kind: StorageType(b.name) for b in backends() if b.zfs_kind}
_ZFS_KINDS = {"volblocksize": (ZVOL,), "recordsize": (DATASET,), **{p.name: p.applies for p in PROPERTIES}}


# ---- VM settings: the axis table ----------------------------------------------------------------

#: the storage axes vmbench always states on ZFS storage (never ZFS's version-dependent default)
_STATED = {"volblocksize": DEFAULT_VOLBLOCKSIZE, "recordsize": DEFAULT_RECORDSIZE}


def _plain(value: object) -> str:
    """A default as YAML writes it."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _axis_default(axis: Axis) -> str:
    if axis.name in _STATED:
        return f"storage.{axis.name} ({format_size(_STATED[axis.name])})"
    value = axis.setting(VmConfig())
    if value is None:
        return axis.unset
    return _plain(value) + (" (MiB)" if (axis.settings_key or "").endswith("_mib") else "")


def _axis_row(axis: Axis) -> Row:
    if axis.storage:
        kinds = _ZFS_KINDS[axis.name]
        drivers = _drivers_of(*(_STORAGE_OF[k] for k in kinds))
        what = f"{axis.what} ({' and '.join(k + 's' for k in kinds)})"
    else:
        drivers, what = ", ".join(axis.drivers) or VM_DRIVERS, axis.what
    return Row(axis.name, axis.describe, _axis_default(axis), drivers, what)


#: the keys of a ``cpu:`` mapping (vmbench.scenario.axes._cpu)
_CPU_ROWS = (
    Row("cpu.model", "a model name, host-passthrough (or host), max", VmConfig().cpu.label, VM_DRIVERS, "the model, in the mapping form"),
    Row("cpu.aes", Feature.allowed(), Feature.DEFAULT.value, VM_DRIVERS, "the AES flag, as the aes axis"),
    Row("cpu.features", "a mapping FLAG: on/off/default (not aes)", "none", VM_DRIVERS, "other CPU flags forced on or off"),
)


def vm_rows() -> tuple[Row, ...]:
    """A row per axis, in table order; the cpu mapping's keys after cpu."""
    return tuple(row for axis in AXES for row in (_axis_row(axis), *(_CPU_ROWS if axis.name == "cpu" else ())))


# ---- the declarative sections -------------------------------------------------------------------

_DURATION = "a duration (10s, 2m, 500ms) of {}s or more"
_SCENARIO_FILE = "a file (relative to the scenario)"
_VM_SETTINGS = "VM settings (as vm:)"
_GOAL = f"JOB:METRIC or METRIC ({GoalMetric.allowed()})"


def _fio_default(name: str, unset: str = "") -> str:
    """A fio job key's default: the FioJob field's (sizes as fio writes them)."""
    value = {f.name: f.default for f in fields(FioJob)}[name]
    if value is None:
        return unset
    if name in ("bs", "size"):
        return format_size(int(str(value)))
    if isinstance(value, float):
        return f"{value:g}s"
    return _plain(value)


TOP_ROWS: tuple[Row, ...] = (
    Row("name", "a name (letters, digits, . _ = + , -; 64 at most)", "the file's name without .yaml", ALL, "names the run"),
    Row("description", "a text", "none", ALL, "shown in reports"),
    Row("template", "a recipe in vmbench/images/recipes/", "debian12", LIBVIRT, "the guest image (proxmox clones hypervisor.template)"),
    Row("hypervisor", "a mapping", f"driver {LIBVIRT} on this machine", ALL, "where the VMs run: see the hypervisor sections"),
    Row("storage", "a mapping", f"type {StorageType.DIR.value}", ALL, "where scratch disks live: see storage"),
    Row("vm", "a mapping of VM settings", "every setting's default", VM_DRIVERS, "the baseline VM"),
    Row("vary", "a mapping AXIS: [values]", "none", ALL, "cells that each change VM settings from the baseline"),
    Row("mode", PlanMode.allowed(), PlanMode.ONE_FACTOR.value, ALL, "how vary combines: an axis at a time, or every combination"),
    Row("cells", "a list of {name, stacks, VM settings}", "none", ALL, "explicit cells, each changing the baseline"),
    Row("cells[].name", "a name", "required", ALL, "the cell's name"),
    Row("cells[].stacks", "a list of stack names", "every stack", VM_DRIVERS, "the stacks this cell measures"),
    Row("journey", "a list of {name, stacks, VM settings}", "none", ALL, "steps, each changing the step before"),
    Row("journey[].name", "a name", "required", ALL, "the step's name"),
    Row("journey[].stacks", "a list of stack names", "the step before's", VM_DRIVERS, "the stacks this step measures"),
    Row("jobs", "a list of profiles, jobs and job files", "required", ALL, "what fio runs on every target: see jobs"),
    Row("stacks", "a list of layer stacks", "none", VM_DRIVERS, "storage layers built in the guest: see stacks"),
    Row("targets", "a list of goals", "none", VM_DRIVERS, "figures a job must reach: see targets"),
    Row("repeats", f"1 to {MAX_REPEATS}, or a mapping", f"1 ({TUNE_MIN_REPEATS} with tune)", ALL, "runs of every job on every target"),
    Row("host_baseline", "true, false", "true", ALL, "measures the host storage as the reference"),
    Row("telemetry", "on, off", "on", ALL, "samples the devices, CPUs and pools below fio while it runs; off: fio alone"),
    Row("crypto_benchmark", "a list of CIPHER/KEYBITS", "the stacks' LUKS ciphers and " + ", ".join(f"{c}/{k}" for c, k in DEFAULT_CRYPTO),
        VM_DRIVERS, "ciphers for cryptsetup benchmark (none without a LUKS layer)"),
    Row("host_only", "true, false", "false", ALL, f"host storage only, no VM (driver {DriverName.NONE.value}; ZFS storage)"),
    Row("load", "a mapping", "none", VM_DRIVERS, "many VMs at once: see load"),
    Row("tune", "a mapping", "none", VM_DRIVERS, f"a search for better VM settings (not with {', '.join(NOT_WITH_TUNE)})"),
    Row("advise", "a mapping", "tune's goal and allow", ALL, "the question vmbench advise answers"),
)


def _hv(key: str, values: str, default: str, what: str) -> Row:
    """A ``hypervisor.*`` row; its drivers from the loader's driver-only tables."""
    top = key.split(".")[1]
    only = PROXMOX if top in PROXMOX_ONLY_KEYS else LIBVIRT if top in LIBVIRT_ONLY_KEYS else None
    return Row(key, values, default, only or (ALL if top == "driver" else VM_DRIVERS), what)


def _ssh_rows(host: str, port: str, user: str) -> tuple[Row, ...]:
    return (
        _hv("hypervisor.ssh.host", "a host name or address", host, "the SSH host"),
        _hv("hypervisor.ssh.port", "1 to 65535", port, "the SSH port"),
        _hv("hypervisor.ssh.user", "a user name", user, "the SSH user"),
        _hv("hypervisor.ssh.key_file", "a file (~ expanded)", "ssh-agent, the user's keys", "the private key"),
        _hv("hypervisor.ssh.known_hosts", "a file (~ expanded)", "~/.ssh/known_hosts", "where the host key is checked"),
    )


LIBVIRT_ROWS: tuple[Row, ...] = (
    _hv("hypervisor.driver", DriverName.allowed(), f"{LIBVIRT} ({DriverName.NONE.value} with host_only)", "the driver"),
    _hv("hypervisor.uri", "qemu:///system, qemu:///session, qemu+ssh://USER@HOST/system", "qemu:///system (qemu+ssh with ssh.host)",
        "the libvirt connection"),
    _hv("hypervisor.accel", Accel.allowed(), Accel.AUTO.value, "KVM, or QEMU's emulation (tcg)"),
    _hv("hypervisor.boot_timeout", _DURATION.format(10), "120s (KVM), 300s (TCG)",
        "how long a guest may take to boot; one whose console is still empty after half of it (at most 60s KVM, "
        "150s TCG) is started again, once"),
    _hv("hypervisor.machine", "pc, q35", "pc", "the QEMU machine type"),
    _hv("hypervisor.state_dir", "an absolute path", "vmbench's state directory", "vmbench's directory on the host"),
    _hv("hypervisor.ssh", "a mapping", "the URI's user, host and port", "SSH to the host (qemu+ssh URIs only)"),
    *_ssh_rows("the URI's host", "the URI's port, 22", "the URI's user, root"),
    _hv("hypervisor.hosts", "a list of {uri, ssh, state_dir, pool, name}", "one host",
        "a run across several hosts (needs load:): each host's URI, SSH, directory and dir pool, as above"),
    _hv("hypervisor.hosts[].name", "a name", "its SSH host, or localhost", "the host's name in results and reports"),
    _hv("hypervisor.hosts[].pool", "a name", "storage.pool", "the host's libvirt pool of the VMs' disks"),
    _hv("hypervisor.place", "round-robin, or a mapping HOST: VMs", "round-robin",
        "where a step's VMs run: in turn on each host, or the hosts filled in order up to their counts"),
)

PROXMOX_ROWS: tuple[Row, ...] = (
    _hv("hypervisor.driver", PROXMOX, LIBVIRT, "the driver"),
    _hv("hypervisor.host", "a host name or address", "required", "the cluster's API host (and node's SSH host)"),
    _hv("hypervisor.port", "1 to 65535", "8006", "the API port"),
    _hv("hypervisor.node", "a PVE node name", "required (or nodes)", "the node the VMs run on"),
    _hv("hypervisor.nodes", "a list of node names or {name, ssh} mappings, or all", "none (node: one node)",
        "several nodes of the cluster, each a host of the run; a node's SSH host is its name; all: every node online "
        "when the run starts (one GET /nodes, sorted by name; vmbench plan reads none)"),
    Row("hypervisor.nodes[].name", "a PVE node name", "required", PROXMOX, "the node, as the cluster names it"),
    Row("hypervisor.nodes[].ssh", "a mapping (keys as hypervisor.ssh)", "host: the node's name; the rest: hypervisor.ssh",
        PROXMOX, "SSH to this node"),
    _hv("hypervisor.place", "round-robin, or a mapping NODE: VMs (round-robin only with nodes: all)", "round-robin",
        "where a step's VMs run: in turn on each node, or the nodes filled in order up to their counts"),
    _hv("hypervisor.template", "a VMID (100 to 999999999) or a VM name", "required", "the template VM to clone"),
    _hv("hypervisor.storage", "a PVE storage ID", "required", "where scratch disks go without a ZFS storage: section"),
    _hv("hypervisor.token", "a mapping", "required", "the API token (never its secret)"),
    _hv("hypervisor.token.id", "USER@REALM!NAME", "required", "the token's id"),
    _hv("hypervisor.token.secret_file", _SCENARIO_FILE, "one of the two", "the file holding the secret"),
    _hv("hypervisor.token.secret_env", "an environment variable name", "one of the two", "the variable holding the secret"),
    _hv("hypervisor.tls", "a mapping", "the system CAs", "how the API's certificate is checked"),
    _hv("hypervisor.tls.ca_file", _SCENARIO_FILE, "none", "a CA to verify against"),
    _hv("hypervisor.tls.fingerprint", "a SHA-256 (64 hex digits, colons optional)", "none", "a pinned certificate"),
    _hv("hypervisor.tls.verify", "true, false", "true", "false turns checks off (said in every report)"),
    _hv("hypervisor.ssh", "a mapping", "root@host:22", "SSH to the node (host fio, facts, evidence)"),
    *_ssh_rows("hypervisor.host", "22", "root"),
    _hv("hypervisor.timeout", _DURATION.format(5), "30s", "per API request"),
    _hv("hypervisor.accel", Accel.allowed(), Accel.AUTO.value, "KVM, or QEMU's emulation (tcg)"),
    _hv("hypervisor.boot_timeout", _DURATION.format(10), "120s (KVM), 300s (TCG)", "how long a guest may take to boot"),
    _hv("hypervisor.clone", "linked, full", "linked", "how the template is cloned"),
    _hv("hypervisor.state_dir", "an absolute path", "vmbench's state directory", "vmbench's directory on the node"),
)

_RBD = _drivers_of(StorageType.RBD)
_RBD_CLIENT = LIBVIRT  # on Proxmox the pool and client are the node's rbd storage's (vmbench.scenario.ceph refuses them)
_ZFS, _ZVOLS, _DATASETS = (_drivers_of(StorageType.ZFS, StorageType.ZFS_DATASET), _drivers_of(StorageType.ZFS),
                           _drivers_of(StorageType.ZFS_DATASET))
STORAGE_ROWS: tuple[Row, ...] = (
    Row("storage.type", StorageType.allowed(), StorageType.DIR.value, ALL,
        f"files in a dir pool, zvols, files on datasets ({StorageType.ZFS_DATASET.value}: {_DATASETS}), "
        f"or RBD images ({StorageType.RBD.value}: {_RBD})"),
    Row("storage.pool", "a name", "vmbench; rbd", LIBVIRT, "the libvirt pool of the VMs' disks; type rbd: the Ceph pool of the scratch images"),
    Row("storage.scratch_size", "a size of 64m or more", format_size(Storage().scratch_size), ALL, "the scratch disk's size"),
    Row("storage.dataset", "a ZFS dataset below a pool's root", "required with ZFS", _ZFS, "the dataset vmbench creates under"),
    Row("storage.volblocksize", "a power of two, 512 to 128k", format_size(DEFAULT_VOLBLOCKSIZE), _ZVOLS, "the zvols' block size"),
    Row("storage.recordsize", "a power of two, 512 to 1m", format_size(DEFAULT_RECORDSIZE), _DATASETS, "the datasets' record size"),
    Row("storage.sparse", "true, false", "false", _ZVOLS, "thin zvols (zfs create -s)"),
    Row("storage.arc_max", "a size of 1m or more", "not stated", _ZFS,
        "the host's ARC c_max (sizes the cache-buster; the run refuses a default cache-buster smaller than it needs)"),
    Row("storage.properties", "a mapping of ZFS properties (see VM settings)", "ZFS default", _ZFS, "the baseline's ZFS properties"),
    Row("storage.ceph", "a mapping: conf, user, keyring", "required with rbd", _RBD_CLIENT, "how vmbench, fio and QEMU reach the Ceph cluster"),
    Row("storage.ceph.conf", "an absolute path on the host", "/etc/ceph/ceph.conf", _RBD_CLIENT, "the Ceph client configuration (mon_host)"),
    Row("storage.ceph.user", "a cephx user, without client.", "admin", _RBD_CLIENT, "the user vmbench, fio and QEMU connect as"),
    Row("storage.ceph.keyring", "an absolute path on the host", "the one ceph.conf names", _RBD_CLIENT, "the user's keyring (its key becomes a libvirt secret)"),
)

JOB_ROWS: tuple[Row, ...] = (
    Row("jobs[].profile", ", ".join(PROFILES), "none", ALL, "a built-in profile's jobs; job keys given override all of them"),
    Row("jobs[].select", "job names of the profile", "all of them", ALL, "the profile's jobs to run"),
    Row("jobs[].name", "a name", "required (a job file's: its stem)", ALL, "the job's name"),
    Row("jobs[].file", "a fio job file (relative to the scenario)", "none", ALL, "the user's own fio job file"),
    Row("jobs[].env", "a mapping NAME: value", "none", ALL, "values of the job file's ${NAME}"),
    Row("jobs[].rw", ", ".join(RW_MODES), "required", ALL, "the I/O pattern"),
    Row("jobs[].bs", "a size of 512 or more", "required", ALL, "the block size"),
    Row("jobs[].iodepth", "1 to 1024", _fio_default("iodepth"), ALL, "I/Os in flight per job"),
    Row("jobs[].numjobs", "1 to 64", _fio_default("numjobs"), ALL, "parallel fio jobs"),
    Row("jobs[].rwmixread", "0 to 100", _fio_default("rwmixread", "fio's (50)"), ALL, f"the read share ({', '.join(MIXED_MODES)} only)"),
    Row("jobs[].runtime", _DURATION.format(1), _fio_default("runtime"), ALL, "how long fio measures (job files too)"),
    Row("jobs[].ramp", _DURATION.format(0), _fio_default("ramp"), ALL, "warm-up before measuring"),
    Row("jobs[].size", "a size of 1m or more", _fio_default("size"), ALL,
        f"the working set (cache-buster: {CACHE_BUSTER_RAM_FACTOR}x the largest VM's memory or storage.arc_max, "
        f"whichever is larger; a job file's: "
        f"its own, else {format_size(DEFAULT_JOBFILE_SIZE)})"),
    Row("jobs[].direct", "true, false", _fio_default("direct"), ALL, "O_DIRECT (bs a multiple of 512)"),
    Row("jobs[].sync", "true, false", _fio_default("sync"), ALL, "synchronous writes"),
    Row("jobs[].fsync", "0 or more", _fio_default("fsync"), ALL, "an fsync every N writes (0: none)"),
    Row("jobs[].ioengine", ", ".join(IOENGINES + FILE_ENGINES), _fio_default("ioengine"), ALL,
        "fio's I/O engine; a file engine (filecreate ...) makes a file job: run in each filesystem layer's mount only"),
    Row("jobs[].nrfiles", "a whole number of 1 or more", "none (1)", ALL,
        "files per job clone; above 1 a file job, in a directory on each filesystem layer (never on block layers)"),
    Row("jobs[].filesize", "a size of 512 or more", "none (size / nrfiles)", ALL, "each file's size (a file job)"),
    Row("jobs[].openfiles", "a whole number of 1 or more", "none (fio's)", ALL, "files a job keeps open at once"),
    Row("jobs[].create_on_open", "true, false", "none (fio's)", ALL, "create each file when the job opens it (filecreate)"),
    Row("jobs[].file_service_type", "random, roundrobin, sequential", "none (fio's)", ALL, "how a job moves between its files"),
    Row("jobs[].buffer_compress_percentage", "0 to 100", _fio_default("buffer_compress_percentage", "fio's"), ALL,
        "how compressible the data written is"),
    Row("jobs[].refill_buffers", "true, false", _fio_default("refill_buffers", "fio's"), ALL, "fresh data for every write"),
    Row("jobs[].rate_iops", "a whole number of 1 or more", _fio_default("rate_iops", "none"), ALL, "a fixed rate in I/Os a second"),
    Row("jobs[].rate", "a size a second (50M, 50M/s)", _fio_default("rate", "none"), ALL, "a fixed rate in bytes a second"),
    Row("jobs[].steadystate", "iops, iops_slope, bw or bw_slope:BOUND (e.g. iops_slope:0.3%)", "none", ALL,
        "fio ends the job once steady (runtime: the most it runs); the report says whether and when each run was"),
    Row("jobs[].steadystate_duration", _DURATION.format(1), "required with steadystate", ALL, "the window fio judges"),
    Row("jobs[].steadystate_ramp_time", _DURATION.format(0), "0", ALL, "time before fio starts judging"),
    Row("jobs[].sweep", "{iodepth: [1, 2, 4, ...]} or {numjobs: [...]}: two values or more", "none", ALL,
        "one measurement per point (job NAME.qdN / NAME.njN), read as a curve with its knee (not on job files)"),
    Row("jobs[].metric", Metric.allowed(), f"{Metric.P99.value} at a fixed rate, else {Metric.IOPS.value}", ALL,
        "the figure the job is judged by (job files too)"),
)

STACK_ROWS: tuple[Row, ...] = (
    Row("stacks[].name", "a name", "required", VM_DRIVERS, "the stack's name"),
    Row("stacks[].layers", f"a list: partition, lvm, luks, then a filesystem (FS: {', '.join(Filesystem)} or filesystem)", "required",
        VM_DRIVERS, "the layers, bottom up; each a name or {name: options}"),
    Row("stacks[].device", "scratch", "scratch", VM_DRIVERS, "the disk it is built on (also read as disk)"),
    Row("stacks[].measure", "all, top", "all", VM_DRIVERS, "measure every layer or only the top one"),
    Row("stacks[].layers[].partition.align", "a size, a multiple of 4k", "1m", VM_DRIVERS, "the partition's alignment (first layer only)"),
    Row("stacks[].layers[].lvm.type", "linear, thin", "linear", VM_DRIVERS, "a linear or a thin volume"),
    Row("stacks[].layers[].lvm.extent_size", "a power of two of 1m or more", "4m", VM_DRIVERS, "the physical extent size"),
    Row("stacks[].layers[].luks.version", "1, 2", "2", VM_DRIVERS, "the LUKS version"),
    Row("stacks[].layers[].luks.cipher", "a cipher spec", "aes-xts-plain64", VM_DRIVERS, "the cipher"),
    Row("stacks[].layers[].luks.key_size", "128, 256, 512", "512", VM_DRIVERS, "key bits (XTS: two keys)"),
    Row("stacks[].layers[].luks.sector_size", "512, 1024, 2048, 4096", "cryptsetup's", VM_DRIVERS, "the encryption sector size"),
    Row("stacks[].layers[].luks.perf_flags", ", ".join(LUKS_PERF_FLAGS), "none", VM_DRIVERS, "dm-crypt's workqueue bypass"),
    Row("stacks[].layers[].filesystem.type", Filesystem.allowed(), "required", VM_DRIVERS, "the filesystem, in the filesystem: form"),
    Row("stacks[].layers[].FS.mkfs_options", "words, no paths", "none", VM_DRIVERS, "extra mkfs options"),
    Row("stacks[].layers[].FS.mount_options", "mount options", "none", VM_DRIVERS, "extra mount options"),
)

REPEAT_ROWS: tuple[Row, ...] = (
    Row("repeats.min", f"1 to {MAX_REPEATS}", "required", ALL, "runs always made"),
    Row("repeats.max", f"min to {MAX_REPEATS}", "min", ALL, "the most runs (needs until_cv when above min)"),
    Row("repeats.until_cv", "a fraction (0.05) or a percentage (5%)", "none", ALL, "repeat while the IOPS' CV is at or above it"),
)

TARGET_ROWS: tuple[Row, ...] = (
    Row("targets[].job", "a job's name", "required", VM_DRIVERS, "the job the goal is about"),
    Row("targets[].stack", "a stack's name", "every stack", VM_DRIVERS, "limits the goal to a stack"),
    Row("targets[].layer", "raw or a layer path (lvm+luks2+ext4)", "every layer", VM_DRIVERS, "limits the goal to a layer"),
    Row("targets[].cell", "a cell's name", "every cell", VM_DRIVERS, "limits the goal to a cell"),
    Row("targets[].min_iops", "a number of 0 or more", "none", VM_DRIVERS, "IOPS to reach (one of the three is needed)"),
    Row("targets[].min_mb_s", "a number of 0 or more", "none", VM_DRIVERS, "MB/s to reach"),
    Row("targets[].max_p99_ms", "a number of 0 or more", "none", VM_DRIVERS, "p99 latency to stay under, in ms"),
)

LOAD_ROWS: tuple[Row, ...] = (
    Row("load.vms", f"a list of VM counts going up (1 to {MAX_VMS})", "none", VM_DRIVERS, "a scaling ramp: each job in N clones at once"),
    Row("load.boot_parallel", "1 to 64", str(DEFAULT_BOOT_PARALLEL), VM_DRIVERS, "VMs booted at once"),
    Row("load.tail", "seconds, 2 or more", f"{DEFAULT_TAIL_SECONDS:g}", VM_DRIVERS, "load kept on after each window"),
    Row("load.lead", "seconds, 0 or more", f"{DEFAULT_LEAD_SECONDS:g}", VM_DRIVERS, "added to each job's ramp"),
    Row("load.victim", "a mapping", "none", VM_DRIVERS, "a noisy neighbour's measured VM"),
    Row("load.victim.job", "a job's name", "required", VM_DRIVERS, "the victim's job"),
    Row("load.victim.vm", _VM_SETTINGS, "the cell's", VM_DRIVERS, "the victim's own settings"),
    Row("load.aggressors", "a mapping", "none", VM_DRIVERS, "the busy VMs beside the victim"),
    Row("load.aggressors.job", "a job's name (as long as the victim's)", "required", VM_DRIVERS, "the aggressors' job"),
    Row("load.aggressors.count", f"1 to {MAX_VMS - 1}", "required", VM_DRIVERS, "how many aggressors"),
    Row("load.aggressors.vm", _VM_SETTINGS, "the cell's", VM_DRIVERS, "the aggressors' own settings"),
    Row("load.phases", "a list of names or mappings", "none", VM_DRIVERS, "the noisy neighbour's steps"),
    Row("load.phases[].name", "a name", "required", VM_DRIVERS, "the phase's name"),
    Row("load.phases[].aggressors", "0 to count", "count", VM_DRIVERS, "aggressors running in this phase"),
    Row("load.phases[].aggressor_vm", _VM_SETTINGS, "none", VM_DRIVERS, "the aggressors' settings in this phase"),
    Row("load.phases[].victim_vm", _VM_SETTINGS, "none", VM_DRIVERS, "the victim's settings in this phase"),
)

TUNE_ROWS: tuple[Row, ...] = (
    Row("tune.goal", _GOAL, "required", VM_DRIVERS, "the job and figure to improve"),
    Row("tune.axes", "a mapping AXIS: [values] (VM settings)", "required", VM_DRIVERS, "the values to try"),
    Row("tune.allow", f"a list of: {Risk.allowed()}", "none", VM_DRIVERS, "risks a recommendation may carry"),
    Row("tune.budget", "a mapping (boots, time: either or both)", "required", VM_DRIVERS, "what the tune may spend"),
    Row("tune.budget.boots", f"2 to {MAX_BOOTS}", "no limit", VM_DRIVERS, "VM boots"),
    Row("tune.budget.time", "a duration above 0 (90m, 2h)", "no limit", VM_DRIVERS, "estimated time"),
    Row("tune.from", "a mapping", "none", VM_DRIVERS, "an existing VM to start from (read only)"),
    Row("tune.from.vmid", "100 to 999999999", "one of vmid, domain", PROXMOX, "a Proxmox VM"),
    Row("tune.from.domain", "a domain name", "one of vmid, domain", LIBVIRT, "a libvirt domain"),
    Row("tune.from.disk", "a disk name (vdb, scsi1)", "the VM's disk", VM_DRIVERS, "the disk whose settings are read"),
    Row("tune.round", "internal", "none", VM_DRIVERS, "written by vmbench into each round's stored scenario; not by hand"),
    Row("advise.goal", f"{_GOAL}, or a list", "none (tune's goal)", ALL, "the figures the advice is about"),
    Row("advise.allow", f"a list of: {Risk.allowed()}", "none (tune's allow)", ALL, "risks the advice may recommend"),
)


# ---- the page ------------------------------------------------------------------------------------

INTRO = ("Every key a scenario file takes, by section. A key path names nested keys with dots; `[]` marks the entries of a list. "
         f"Drivers: {LIBVIRT}, {PROXMOX}, or {DriverName.NONE.value} (a host_only scenario); \"all\" is every one. "
         "scenarios/ has examples; docs/scenarios.md explains them.")
VM_INTRO = ("Generated from the axis table (vmbench.scenario.axes.AXES). Each can be given under `vm:` (the baseline), in a `cells:` "
            "entry, in a `journey:` step, as a `vary:` axis (a list of values), as a `tune.axes` axis, and in `load:` (`victim.vm`, "
            f"`aggressors.vm`, `phases[].victim_vm`, `phases[].aggressor_vm`). The ZFS settings ({', '.join(STORAGE_AXES)}) apply "
            f"with `storage.type` {StorageType.ZFS.value} or {StorageType.ZFS_DATASET.value}; their baseline may also come from "
            "`storage:`, and they are all a host_only scenario varies. The others are VM settings both drivers take.")


def tables() -> tuple[Table, ...]:
    """The page's sections, in order."""
    return (
        Table("Top level", "The keys of a scenario file.", TOP_ROWS),
        Table("hypervisor (libvirt)", "`hypervisor:` with `driver: libvirt` (the default).", LIBVIRT_ROWS),
        Table("hypervisor (proxmox)", "`hypervisor:` with `driver: proxmox`: a Proxmox VE node, through its API.", PROXMOX_ROWS),
        Table("storage", "`storage:`: where scratch disks live.", STORAGE_ROWS),
        Table("VM settings (vm:, cells, journey, vary)", VM_INTRO, vm_rows()),
        Table("jobs", "`jobs:` entries: a `profile:`, a job (`name:` with rw and bs) or a `file:`. Defaults are a named job's; a profile's "
              "jobs keep their own unless the entry gives the key. A job file takes name, size, runtime, env and metric only.", JOB_ROWS),
        Table("stacks", "`stacks:` entries: storage layers built inside the guest on the scratch disk.", STACK_ROWS),
        Table("repeats", "`repeats: N` (fixed), or a mapping (adaptive):", REPEAT_ROWS),
        Table("targets", "`targets:` entries: goals a job must reach.", TARGET_ROWS),
        Table("load", "`load:`: `vms:` (scaling), or `victim:`, `aggressors:` and `phases:` (noisy neighbour).", LOAD_ROWS),
        Table("tune and advise", "`tune:` (vmbench tune) and `advise:` (vmbench advise).", TUNE_ROWS),
    )


def _table_markdown(table: Table) -> list[str]:
    lines = [f"## {table.title}", "", table.intro, "", "| key | values | default | drivers | what |", "|---|---|---|---|---|"]
    for r in table.rows:
        lines.append("| " + " | ".join([f"`{r.key}`"] + [c.replace("|", "\\|") for c in (r.values, r.default, r.drivers, r.what)]) + " |")
    return lines + [""]


def reference_markdown() -> str:
    """The whole page."""
    lines = ["# Scenario reference", "", f"Generated by `{COMMAND}`; do not edit: `{TEST}` fails when this page and the code disagree.",
             "", INTRO, ""]
    for table in tables():
        lines.extend(_table_markdown(table))
    return "\n".join(lines)


if __name__ == "__main__":
    print(reference_markdown(), end="")
