"""A disk that boots by itself (BIOS, SYSLINUX) from a built template image, for hypervisors
that boot a VM from its disk rather than from a kernel given on the command line (Proxmox VE:
``vmbench images push``).

The image's root filesystem (ext4, label ``vmbench-root``) is copied unchanged into partition
2; partition 1 (FAT, active) holds the image's kernel and initrd and a ``syslinux.cfg`` whose
``APPEND`` line is the image's own kernel command line (``root=LABEL=vmbench-root ...``), so
the guest boots exactly as under libvirt's direct kernel boot.  Nothing is mounted and no
root is needed: the MBR is written here, the FAT by mtools, SYSLINUX by its mtools installer.
The disk is kept next to the image (``boot-disk-<version>.qcow2``), made once per image hash.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path

from ..command import run
from ..errors import PreflightError
from ..progress import NullProgress, Progress
from .store import Image

#: change when the layout changes: it is part of what a pushed template records
LAYOUT_VERSION = "1"
SECTOR = 512
MiB = 1 << 20
BOOT_START = 1 * MiB  # partition 1 starts at LBA 2048, as every partitioning tool does
MBR_CODE = "/usr/lib/syslinux/mbr/mbr.bin"
#: tool -> the Debian package that ships it
TOOLS = {"mformat": "mtools", "mcopy": "mtools", "syslinux": "syslinux", MBR_CODE: "syslinux-common",
         "qemu-img": "qemu-utils", "dd": "coreutils"}
FAT_TYPE = 0x0E  # FAT16 (LBA)
LINUX_TYPE = 0x83


@dataclass(frozen=True)
class Layout:
    """Where the two partitions are, in bytes."""

    boot_start: int
    boot_size: int
    root_start: int
    root_size: int

    @property
    def total(self) -> int:
        return self.root_start + self.root_size


def layout(kernel_bytes: int, initrd_bytes: int, root_bytes: int) -> Layout:
    """Partition 1 holds kernel and initrd with room to spare (at least 64 MiB, whole 16 MiB),
    partition 2 the root filesystem (whole MiB)."""
    step = 16 * MiB
    boot = max(64 * MiB, -(-(kernel_bytes + initrd_bytes + 16 * MiB) // step) * step)
    root = -(-root_bytes // MiB) * MiB
    return Layout(BOOT_START, boot, BOOT_START + boot, root)


def partition_entry(active: bool, kind: int, start: int, size: int) -> bytes:
    """One 16-byte MBR entry, LBA addressing (CHS fields set to the 'use LBA' values)."""
    chs = b"\xfe\xff\xff"
    return struct.pack("<B3sB3sII", 0x80 if active else 0, chs, kind, chs, start // SECTOR, size // SECTOR)


def mbr(code: bytes, lay: Layout, disk_id: int = 0x564D4221) -> bytes:
    """Sector 0: SYSLINUX's boot code (at most 440 bytes), disk id, the two partitions, 55AA."""
    if len(code) > 440:
        raise ValueError(f"MBR boot code is {len(code)} bytes; at most 440 fit")
    table = (partition_entry(True, FAT_TYPE, lay.boot_start, lay.boot_size)
             + partition_entry(False, LINUX_TYPE, lay.root_start, lay.root_size) + bytes(32))
    return code.ljust(440, b"\0") + struct.pack("<IH", disk_id, 0) + table + b"\x55\xaa"


def syslinux_cfg(cmdline: str) -> str:
    return ("DEFAULT vmbench\nPROMPT 0\nTIMEOUT 0\n"
            "LABEL vmbench\n  LINUX /vmlinuz\n  INITRD /initrd.img\n"
            f"  APPEND {' '.join(cmdline.split())}\n")


def mformat_argv(disk: Path, lay: Layout) -> list[str]:
    """A FAT filesystem in partition 1, its boot sector knowing it starts at LBA 2048."""
    return ["mformat", "-i", f"{disk}@@{lay.boot_start}", "-T", str(lay.boot_size // SECTOR), "-h", "64", "-s", "32",
            "-H", str(lay.boot_start // SECTOR), "-v", "VMBBOOT", "::"]


def mcopy_argv(disk: Path, lay: Layout, sources: list[Path]) -> list[str]:
    return ["mcopy", "-i", f"{disk}@@{lay.boot_start}", *map(str, sources), "::/"]


def syslinux_argv(disk: Path, lay: Layout) -> list[str]:
    return ["syslinux", "--offset", str(lay.boot_start), "--install", str(disk)]


def to_raw_argv(qcow2: Path, raw: Path) -> list[str]:
    return ["qemu-img", "convert", "-f", "qcow2", "-O", "raw", str(qcow2), str(raw)]


def place_root_argv(root_raw: Path, disk: Path, lay: Layout) -> list[str]:
    return ["dd", f"if={root_raw}", f"of={disk}", "bs=1M", f"seek={lay.root_start // MiB}", "conv=notrunc,sparse",
            "status=none"]


def to_qcow2_argv(raw: Path, qcow2: Path) -> list[str]:
    return ["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)]


def disk_name() -> str:
    return f"boot-disk-{LAYOUT_VERSION}.qcow2"


def disk_path(image: Image) -> Path:
    return image.directory / disk_name()


def check_tools() -> None:
    missing = sorted({pkg for tool, pkg in TOOLS.items() if not (os.path.exists(tool) if tool.startswith("/") else shutil.which(tool))})
    if missing:
        raise PreflightError("making a disk that boots by itself needs " + ", ".join(missing) + " on this machine",
                             "apt-get install " + " ".join(missing))


def ensure_boot_disk(image: Image, progress: Progress | None = None) -> Path:
    """The image as a disk that boots by itself (made once per image; returns its path)."""
    progress = progress or NullProgress()
    final = disk_path(image)
    if final.is_file():
        return final
    check_tools()
    lay = layout(image.kernel.stat().st_size, image.initrd.stat().st_size, int(image.manifest.get("root_virtual_bytes") or 0)
                 or _virtual_size(image.root))
    work = image.directory / f".boot-disk.{os.getpid()}"
    work.mkdir(mode=0o755, exist_ok=True)
    try:
        progress.step(f"making a disk of {image.name} that boots by itself (SYSLINUX, {lay.total >> 20} MiB)")
        disk, root_raw, cfg = work / "disk.raw", work / "root.raw", work / "syslinux.cfg"
        with open(disk, "wb") as f:
            f.truncate(lay.total)
            f.write(mbr(Path(MBR_CODE).read_bytes()[:440], lay))
        cfg.write_text(syslinux_cfg(image.cmdline))
        run(mformat_argv(disk, lay), timeout=120)
        run(mcopy_argv(disk, lay, [image.kernel, image.initrd, cfg]), timeout=300)  # named vmlinuz, initrd.img
        run(syslinux_argv(disk, lay), timeout=120)
        run(to_raw_argv(image.root, root_raw), timeout=900)
        run(place_root_argv(root_raw, disk, lay), timeout=900)
        root_raw.unlink()
        tmp = work / disk_name()
        run(to_qcow2_argv(disk, tmp), timeout=900)
        tmp.chmod(0o644)
        tmp.rename(final)
    finally:
        for p in sorted(work.glob("*"), reverse=True):
            p.unlink()
        work.rmdir()
    return final


def _virtual_size(path: Path) -> int:
    return int(json.loads(run(["qemu-img", "info", "--output=json", "-U", str(path)], timeout=60).stdout)["virtual-size"])
