"""Building and tearing down in-guest storage stacks on the scratch disk.

Pure argv builders (tested for their exact commands) and a :class:`StackBuilder` that runs
them through a guest transport, one layer at a time, so fio can measure each layer before
the next is built.  Everything starts from a :class:`~vmbench.guest.disk.ScratchDisk`,
found by serial; nothing here takes a device name from a scenario.  LUKS keys go to
cryptsetup on stdin.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import dataclass, field

from ..errors import CommandError, GuestError
from ..scenario.model import FilesystemLayer, Layer, LuksLayer, LvmLayer, PartitionLayer, Stack, layer_path
from ..settings import Filesystem
from ..transport.base import Transport
from .disk import ScratchDisk, holders

log = logging.getLogger(__name__)

VG = "vmbench_vg"
LV = "vmbench_lv"
THIN_POOL = "vmbench_pool"
CRYPT = "vmbench_crypt"
MOUNTPOINT = "/mnt/vmbench"
FIO_FILE = "vmbench-fio.dat"
LUKS_ITERATIONS = "1000"  # key derivation speed is not what we measure; keep luksFormat fast
MKFS = {
    Filesystem.EXT2: "mkfs.ext2",
    Filesystem.EXT3: "mkfs.ext3",
    Filesystem.EXT4: "mkfs.ext4",
    Filesystem.XFS: "mkfs.xfs",
    Filesystem.BTRFS: "mkfs.btrfs",
}
EXT = (Filesystem.EXT2, Filesystem.EXT3, Filesystem.EXT4)
PERF_FLAGS_KERNEL = (5, 9)  # dm-crypt no_read_workqueue / no_write_workqueue


def kernel_version(release: str) -> tuple[int, int]:
    """(major, minor) of a kernel release string such as 6.1.0-50-amd64."""
    parts = release.split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


# ---- pure argv builders ----------------------------------------------------------------------


def partition_argv(disk: str, layer: PartitionLayer) -> list[list[str]]:
    return [
        ["parted", "--script", "--align", "optimal", disk, "unit", "B", "mklabel", "gpt", "mkpart", "vmbench", str(layer.align), "100%"],
        ["udevadm", "settle"],
    ]


def lvm_argv(device: str, layer: LvmLayer, size: int) -> list[list[str]]:
    cmds = [
        ["pvcreate", "--yes", device],
        ["vgcreate", "--yes", "--physicalextentsize", f"{layer.extent_size}b", VG, device],
    ]
    if layer.thin:
        virtual = (size * 8 // 10) // layer.extent_size * layer.extent_size
        cmds += [
            ["lvcreate", "--yes", "--type", "thin-pool", "--name", THIN_POOL, "--extents", "90%FREE", VG],
            ["lvcreate", "--yes", "--type", "thin", "--name", LV, "--virtualsize", f"{virtual}b", "--thinpool", THIN_POOL, VG],
        ]
    else:
        cmds.append(["lvcreate", "--yes", "--wipesignatures", "y", "--name", LV, "--extents", "100%FREE", VG])
    cmds.append(["udevadm", "settle"])
    return cmds


def lvm_device() -> str:
    return f"/dev/{VG}/{LV}"


def lvm_teardown_argv(pv: str) -> list[list[str]]:
    return [["lvremove", "--yes", VG], ["vgremove", "--yes", VG], ["pvremove", "--yes", pv]]


def luks_format_argv(device: str, layer: LuksLayer) -> list[str]:
    argv = [
        "cryptsetup", "luksFormat", "--batch-mode", "--type", f"luks{layer.version}",
        "--cipher", layer.cipher, "--key-size", str(layer.key_size),
        "--pbkdf", "pbkdf2", "--pbkdf-force-iterations", LUKS_ITERATIONS, "--hash", "sha256",
    ]
    if layer.sector_size:
        argv += ["--sector-size", str(layer.sector_size)]
    return argv + ["--key-file", "-", device]


def luks_open_argv(device: str, layer: LuksLayer) -> list[str]:
    argv = ["cryptsetup", "open", "--type", f"luks{layer.version}", "--key-file", "-"]
    for flag in layer.perf_flags:
        argv.append(f"--perf-{flag}")
    return argv + [device, CRYPT]


def luks_device() -> str:
    return f"/dev/mapper/{CRYPT}"


def luks_teardown_argv() -> list[list[str]]:
    return [["cryptsetup", "close", CRYPT]]


def mkfs_argv(device: str, layer: FilesystemLayer) -> list[str]:
    opts = list(layer.mkfs_options)
    if layer.fs in EXT:
        base = [MKFS[layer.fs], "-F", "-q"]
        # Without this, ext3/4 zero their inode tables and journal in the background,
        # during the measurements, unless the user chose otherwise.
        if layer.fs is not Filesystem.EXT2 and not any(o.startswith("-E") for o in opts):
            base += ["-E", "lazy_itable_init=0,lazy_journal_init=0"]
    else:
        base = [MKFS[layer.fs], "-f", "-q"]
    return base + opts + [device]


def mount_command(device: str, layer: FilesystemLayer, mountpoint: str, extra_options: tuple[str, ...] = ()) -> list[str]:
    """``mount`` of ``layer``'s filesystem with its options (and ``extra_options``, e.g. loop)."""
    opts = list(layer.mount_options) + list(extra_options)
    return ["mount", "-t", layer.fs.value, *(["-o", ",".join(opts)] if opts else []), device, mountpoint]


def mount_argv(device: str, layer: FilesystemLayer) -> list[list[str]]:
    return [["mkdir", "-p", MOUNTPOINT], mount_command(device, layer, MOUNTPOINT)]


def fs_teardown_argv() -> list[list[str]]:
    return [["umount", MOUNTPOINT]]


def wipe_argv(device: str) -> list[str]:
    return ["wipefs", "--all", "--quiet", device]


# ---- execution -------------------------------------------------------------------------------


@dataclass
class BuiltLayer:
    layer: Layer
    depth: int
    path: str  # layer path name: 'partition+lvm+ext4'
    device: str  # the block device this layer provides (for a filesystem: the one under it)
    target: str  # what fio runs on: a block device, or a file on the filesystem
    is_file: bool
    seconds: float = 0.0
    commands: list[list[str]] = field(default_factory=list)


class StackBuilder:
    """Builds one stack layer by layer on the scratch disk; tears it down in reverse."""

    def __init__(self, guest: Transport, disk: ScratchDisk, stack: Stack, *, timeout: float = 600) -> None:
        self.guest = guest
        self.disk = disk
        self.stack = stack
        self.timeout = timeout
        self.built: list[BuiltLayer] = []
        self._key = secrets.token_bytes(64)  # random per stack; only ever on cryptsetup's stdin

    @property
    def device(self) -> str:
        """The block device the next layer goes on."""
        return self.built[-1].device if self.built else self.disk.path

    def _run(self, argv: list[str], *, input: bytes | None = None) -> None:
        self.guest.run(argv, input=input, timeout=self.timeout)

    def build_next(self) -> BuiltLayer:
        depth = len(self.built) + 1
        layer = self.stack.layers[depth - 1]
        below = self.device
        started = time.monotonic()
        cmds: list[list[str]] = []
        try:
            if isinstance(layer, PartitionLayer):
                cmds = partition_argv(below, layer)
                for c in cmds:
                    self._run(c)
                device = self._only_partition()
                built = BuiltLayer(layer, depth, layer_path(self.stack, depth), device, device, False)
            elif isinstance(layer, LvmLayer):
                cmds = lvm_argv(below, layer, self._size(below))
                for c in cmds:
                    self._run(c)
                built = BuiltLayer(layer, depth, layer_path(self.stack, depth), lvm_device(), lvm_device(), False)
            elif isinstance(layer, LuksLayer):
                if layer.perf_flags:
                    self._check_perf_flags_supported()
                cmds = [luks_format_argv(below, layer), luks_open_argv(below, layer)]
                self._run(cmds[0], input=self._key)
                self._run(cmds[1], input=self._key)
                built = BuiltLayer(layer, depth, layer_path(self.stack, depth), luks_device(), luks_device(), False)
            else:
                cmds = [mkfs_argv(below, layer)] + mount_argv(below, layer)
                for c in cmds:
                    self._run(c)
                built = BuiltLayer(layer, depth, layer_path(self.stack, depth), below, f"{MOUNTPOINT}/{FIO_FILE}", True)
        except CommandError as exc:
            raise GuestError(
                f"building layer {layer.label} of stack {self.stack.name} failed: {exc.message}",
                "the command's error output is above; the VM is cleaned up",
            ) from None
        built.seconds = time.monotonic() - started
        built.commands = cmds
        self.built.append(built)
        return built

    def _check_perf_flags_supported(self) -> None:
        release = self.guest.read_file("/proc/sys/kernel/osrelease").decode().strip()
        if kernel_version(release) < PERF_FLAGS_KERNEL:
            raise GuestError(
                f"stack {self.stack.name}: the guest kernel {release} has no dm-crypt no_read/no_write_workqueue flags "
                f"(they need Linux {'.'.join(map(str, PERF_FLAGS_KERNEL))} or later)",
                "remove perf_flags from the luks layer, or use a newer guest image",
            )

    def free_bytes(self) -> int:
        out = self.guest.run(["df", "--output=avail", "-B1", MOUNTPOINT], timeout=60).stdout.split()
        return int(out[-1])

    def _size(self, device: str) -> int:
        return int(self.guest.run(["blockdev", "--getsize64", device], timeout=60).stdout.strip())

    def _only_partition(self) -> str:
        out = self.guest.run(["lsblk", "--json", "--list", "--output", "PATH,TYPE", self.disk.path], timeout=60).stdout
        parts = [d["path"] for d in json.loads(out)["blockdevices"] if d.get("type") == "part"]
        if len(parts) != 1:
            raise GuestError(f"expected one partition on {self.disk.path} after partitioning, found {parts}")
        return parts[0]

    def teardown(self) -> list[str]:
        """Undo every built layer, top first; wipe signatures so the next stack starts clean.
        Returns what could not be undone (empty when clean)."""
        errors = []
        while self.built:
            built = self.built.pop()
            layer = built.layer
            below = self.built[-1].device if self.built else self.disk.path
            if isinstance(layer, FilesystemLayer):
                steps = fs_teardown_argv() + [wipe_argv(built.device)]
            elif isinstance(layer, LuksLayer):
                steps = luks_teardown_argv() + [wipe_argv(below)]
            elif isinstance(layer, LvmLayer):
                steps = lvm_teardown_argv(below) + [wipe_argv(below)]
            else:
                steps = [wipe_argv(built.device), wipe_argv(self.disk.path), ["udevadm", "settle"]]
            for argv in steps:
                try:
                    self.guest.run(argv, timeout=120)
                except (CommandError, GuestError) as exc:
                    errors.append(f"{' '.join(argv)}: {exc}")
        errors += leftovers_in_guest(self.guest, self.disk)
        return errors


def leftovers_in_guest(guest: Transport, disk: ScratchDisk) -> list[str]:
    """Anything a stack could leave behind: children of the scratch disk, device-mapper
    devices, a mount on vmbench's mountpoint.  Empty when the next stack can start clean."""
    out = []
    left = holders(guest, disk)
    if left:
        out.append(f"still on the scratch disk after teardown: {', '.join(left)}")
    dm = guest.run(["dmsetup", "ls"], timeout=60, check=False).stdout.strip()
    if dm and "No devices found" not in dm:
        out.append(f"device-mapper devices left: {' '.join(dm.split())}")
    mnt = guest.run(["findmnt", "--noheadings", "--output", "TARGET", "--mountpoint", MOUNTPOINT], timeout=60, check=False)
    if mnt.returncode == 0 and mnt.stdout.strip():
        out.append(f"{MOUNTPOINT} is still mounted")
    return out
