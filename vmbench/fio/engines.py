"""Why vmbench refuses part of a job file: fio's engines and options, each with its real reason.

Every engine built into fio (its ``engines/`` directory) is named here with what it does; a name
that is not one of them is an external engine, which fio loads as a shared library.  Only the
engines that read and write a disk through the kernel run in vmbench (:data:`DISK_ENGINES`), and,
on a filesystem layer only, the engines that create, stat and delete files and directories
(:data:`FILE_ENGINES`): :func:`layer_refusal` says why a file job is not run on a block layer.
"""

from __future__ import annotations

from enum import Enum


class Reason(Enum):
    """Why a job file (or one of its options) is refused; the value is the phrase every such
    message contains, so a user and a test can tell the reasons apart."""

    COMMAND = "runs a command"
    LOADS_CODE = "an external engine that loads code"
    NETWORK = "needs a server or a network"
    HARDWARE = "needs special hardware"
    NO_DISK_IO = "does no disk I/O"
    FILE_OPERATIONS = "works on files, not on a disk"
    OTHER_OS = "is for another operating system"
    MACHINE = "differs between the host and the guest"
    HOST = "changes the host"
    IO_LOG = "I/O log"
    DELETES = "would delete the target"
    SEVERAL_FILES = "lists several files"
    UNSET_VARIABLE = "is not set"
    OFFSET = "past the end of the scratch disk"
    TOO_LARGE = "but the scratch disk leaves"
    NOT_A_JOB_FILE = "not a fio job file"
    UNSAFE = "vmbench cannot make that safe"


DISK_ENGINES = ("libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "vsync", "posixaio", "mmap", "splice")
#: fio's engines that measure file operations: they run in a filesystem layer's mount, never on a block layer
#: (dircreate, dirstat and dirdelete came after fio 3.33: an older fio refuses them itself)
FILE_ENGINES = ("filecreate", "filestat", "filedelete", "dircreate", "dirstat", "dirdelete")
#: fio's options that make a job work on many files (in a directory): a file job too
MANY_FILE_OPTIONS = ("nrfiles", "openfiles", "filename_format", "directory", "file_service_type", "create_on_open", "unlink")
#: what one operation of a file engine is: the unit its IOPS are reported in ("files/s")
ENGINE_UNITS = {"filecreate": "files/s", "filestat": "stats/s", "filedelete": "deletes/s",
                "dircreate": "dirs/s", "dirstat": "stats/s", "dirdelete": "deletes/s"}

# fio's own engines that vmbench does not run: name -> (reason, what the engine does)
_NET, _HW, _NONE, _FILES, _OS = Reason.NETWORK, Reason.HARDWARE, Reason.NO_DISK_IO, Reason.FILE_OPERATIONS, Reason.OTHER_OS
BUILT_IN: dict[str, tuple[Reason, str]] = {
    "net": (_NET, "sends and receives over a network socket"),
    "netsplice": (_NET, "sends and receives over a network socket"),
    "rdma": (_NET, "transfers over RDMA to a peer"),
    "rados": (_NET, "talks to a Ceph cluster (RADOS objects)"),
    "rbd": (_NET, "talks to a Ceph cluster (RBD images)"),
    "http": (_NET, "talks to an HTTP, S3, Swift or WebDAV server"),
    "nbd": (_NET, "talks to an NBD server"),
    "nfs": (_NET, "talks to an NFS server (libnfs)"),
    "gfapi": (_NET, "talks to a GlusterFS volume"),
    "gfapi_async": (_NET, "talks to a GlusterFS volume"),
    "dfs": (_NET, "talks to a DAOS pool"),
    "libhdfs": (_NET, "talks to an HDFS cluster"),
    "libiscsi": (_NET, "talks to an iSCSI target"),
    "ime_psync": (_NET, "talks to DDN's Infinite Memory Engine servers"),
    "ime_psyncv": (_NET, "talks to DDN's Infinite Memory Engine servers"),
    "ime_aio": (_NET, "talks to DDN's Infinite Memory Engine servers"),
    "librpma_apm_client": (_NET, "transfers over RDMA to a peer (librpma)"),
    "librpma_apm_server": (_NET, "transfers over RDMA to a peer (librpma)"),
    "librpma_gpspm_client": (_NET, "transfers over RDMA to a peer (librpma)"),
    "librpma_gpspm_server": (_NET, "transfers over RDMA to a peer (librpma)"),
    "sg": (_HW, "sends SCSI commands to a SCSI generic device"),
    "bsg": (_HW, "sends SCSI commands to a block SCSI generic device"),
    "mtd": (_HW, "drives an MTD flash device"),
    "dev-dax": (_HW, "maps a DAX device (persistent memory)"),
    "libpmem": (_HW, "maps persistent memory on a DAX filesystem"),
    "pmemblk": (_HW, "uses a persistent memory block pool"),
    "libzbc": (_HW, "drives a zoned SCSI or ATA disk"),
    "io_uring_cmd": (_HW, "sends NVMe commands to an NVMe character device"),
    "xnvme": (_HW, "drives an NVMe device through xNVMe"),
    "libcufile": (_HW, "moves data to an NVIDIA GPU (GPUDirect Storage)"),
    "libhipfile": (_HW, "moves data to an AMD GPU"),
    "libblkio": (_HW, "drives a device through libblkio (vhost-user, VFIO)"),
    "null": (_NONE, "completes every I/O without doing it"),
    "cpuio": (_NONE, "burns CPU"),
    "page_fault": (_NONE, "touches memory pages"),
    "filecreate": (_FILES, "creates files (it measures file creation)"),
    "filedelete": (_FILES, "deletes files (it measures unlink)"),
    "filestat": (_FILES, "stats files (it measures stat)"),
    "dircreate": (_FILES, "creates directories"),
    "dirdelete": (_FILES, "deletes directories"),
    "dirstat": (_FILES, "stats directories"),
    "ftruncate": (_FILES, "truncates a file"),
    "falloc": (_FILES, "allocates and punches holes in a file"),
    "e4defrag": (_FILES, "defragments an ext4 file with a donor file beside it"),
    "windowsaio": (_OS, "is Windows' asynchronous I/O"),
    "solarisaio": (_OS, "is Solaris' asynchronous I/O"),
}
COMMAND_ENGINES = {"exec": "runs a program"}

# options vmbench refuses: canonical name (a prefix ending in * covers a family) -> (reason, what it does)
REFUSED: dict[str, tuple[Reason, str]] = {
    "exec_prerun": (Reason.COMMAND, "runs a command"),
    "exec_postrun": (Reason.COMMAND, "runs a command"),
    "ioengine_lib": (Reason.LOADS_CODE, "loads code from a shared library: an external engine that loads code"),
    "cgroup*": (Reason.HOST, "puts fio into a control group: it changes the host"),
    "trigger*": (Reason.COMMAND, "runs or waits for outside commands (it runs a command)"),
    "replay_*": (Reason.IO_LOG, "replays a recorded I/O log, possibly onto other devices"),
    "read_iolog": (Reason.IO_LOG, "replays a recorded I/O log from a file"),
    "write_iolog": (Reason.IO_LOG, "writes an I/O log to a path vmbench does not manage"),
    "iolog*": (Reason.IO_LOG, "reads or writes an I/O log file"),
    "merge_blktrace*": (Reason.IO_LOG, "reads blktrace files (an I/O log)"),
    "create_only": (Reason.NO_DISK_IO, "only lays out files: it does no disk I/O to measure"),
    "lockfile": (Reason.UNSAFE, "locks files vmbench does not manage"),
    "ioscheduler": (Reason.HOST, "changes the I/O scheduler of the device: it changes the host"),
    "output": (Reason.UNSAFE, "is vmbench's to set"),
    "output-format": (Reason.UNSAFE, "is vmbench's to set"),
    "profile": (Reason.UNSAFE, "runs a built-in fio profile with its own devices"),
    "numa_cpu_nodes": (Reason.MACHINE, "binds the job to NUMA nodes: the NUMA layout differs between the host and the guest"),
    "numa_mem_policy": (Reason.MACHINE, "binds the job's memory to NUMA nodes: the NUMA layout differs between the host and the guest"),
}
# fio's keywords whose value is the machine's own (options.c fio_keywords)
MACHINE_KEYWORDS = {"$mb_memory": "the machine's memory in MiB", "$ncpus": "the machine's CPU count"}


def engine_refusal(value: str) -> tuple[Reason, str] | None:
    """Why vmbench does not run ``ioengine=value`` (None: a disk engine it runs, or a file
    engine, which runs on filesystem layers only: :func:`layer_refusal`)."""
    if value in DISK_ENGINES or value in FILE_ENGINES:
        return None
    hint = f"an engine built into fio that {{}}; vmbench measures the VM's disk with {', '.join(DISK_ENGINES)}"
    if value in COMMAND_ENGINES:
        return Reason.COMMAND, f"{COMMAND_ENGINES[value]}: " + hint.format(Reason.COMMAND.value)
    if value in BUILT_IN:
        reason, what = BUILT_IN[value]
        if reason is Reason.OTHER_OS:
            return reason, f"{what}: an engine built into fio that {reason.value}"
        return reason, f"{what}: " + hint.format(reason.value)
    return Reason.LOADS_CODE, ("names an engine vmbench does not allow: it is not built into fio, so fio would load it "
                               f"from a shared library, {Reason.LOADS_CODE.value}")


def option_refusal(name: str, value: str | None) -> tuple[Reason, str] | None:
    """Why vmbench refuses option ``name`` (canonical) with ``value`` (None: it does not)."""
    for pattern, found in REFUSED.items():
        if name == pattern or (pattern.endswith("*") and name.startswith(pattern[:-1])):
            return found
    if "iolog" in name:
        return Reason.IO_LOG, "reads or writes an I/O log file"
    v = (value or "").strip()
    if name == "zonemode" and v == "zbd":
        return Reason.HARDWARE, f"{Reason.HARDWARE.value}: zonemode=zbd drives a zoned block device, which the VM's disk is not"
    if name == "mem" and v.startswith("cuda"):
        return Reason.HARDWARE, f"puts the I/O buffers in GPU memory: it {Reason.HARDWARE.value} (an NVIDIA GPU)"
    for keyword, what in MACHINE_KEYWORDS.items():
        if keyword in v:
            return Reason.MACHINE, f"uses {keyword} ({what}), which {Reason.MACHINE.value}: the two sides would run different jobs"
    return None


def layer_refusal(what: str, layer: str, fs: bool) -> tuple[Reason, str] | None:
    """Why a file job (``what``: its engine or many-file option, e.g. "ioengine filecreate")
    is not run on ``layer`` (a layer path, "raw" or "host"); None on a filesystem layer (``fs``)."""
    if fs:
        return None
    kind = {"host": "the host's raw volume", "raw": "the raw disk"}.get(layer, f"layer {layer} (a block device)")
    return Reason.FILE_OPERATIONS, (f"{what} {Reason.FILE_OPERATIONS.value}: not run on {kind}; "
                                    "it runs in the mount of each filesystem layer (ext2/3/4, xfs, btrfs)")
