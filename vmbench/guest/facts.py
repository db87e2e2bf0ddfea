"""What the guest itself says: kernel, fio version, CPU flags, and how it sees the scratch
disk (driver, controller, write cache).  Stored with every boot; checked against the
requested settings."""

from __future__ import annotations

import posixpath

from ..errors import CommandError, GuestError
from ..transport.base import Transport
from .disk import ScratchDisk, root_source_argv


def cpu_flags(cpuinfo: str) -> list[str]:
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return line.split(":", 1)[1].split()
    return []


def cpu_model_name(cpuinfo: str) -> str:
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return ""


def guest_facts(guest: Transport) -> dict:
    cpuinfo = guest.read_file("/proc/cpuinfo").decode(errors="replace")
    flags = cpu_flags(cpuinfo)
    return {
        "kernel": guest.read_file("/proc/sys/kernel/osrelease").decode().strip(),
        "fio_version": guest.run(["fio", "--version"], timeout=60).stdout.strip(),
        "cpu_model": cpu_model_name(cpuinfo),
        "cpu_flags": flags,
        "aes": "aes" in flags,
        "ssse3": "ssse3" in flags,
        "pclmulqdq": "pclmulqdq" in flags,
        "cpus": sum(1 for line in cpuinfo.splitlines() if line.startswith("processor")),
        "memory_kib": _meminfo_total(guest.read_file("/proc/meminfo").decode()),
    }


def _meminfo_total(text: str) -> int | None:
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1])
    return None


def _read(guest: Transport, path: str) -> str | None:
    try:
        return guest.read_file(path).decode(errors="replace").strip()
    except (GuestError, CommandError):
        return None


def _readlink(guest: Transport, path: str) -> str | None:
    try:
        return guest.run(["readlink", "-f", path], timeout=30).stdout.strip() or None
    except CommandError:
        return None


def disk_evidence(guest: Transport, disk: ScratchDisk, root_disk: str | None = None) -> dict:
    """How the guest sees a disk: its driver (virtio_blk, sd), the SCSI host driver
    (virtio_scsi, ahci), the write cache mode, queue facts."""
    out: dict = {"device": disk.path, "name": disk.name}
    out.update(_block_facts(guest, disk.name))
    if root_disk:
        out["root"] = {"name": root_disk, **_block_facts(guest, root_disk)}
    return out


def _block_facts(guest: Transport, name: str) -> dict:
    sys = f"/sys/block/{name}"
    facts: dict = {}
    driver = _readlink(guest, f"{sys}/device/driver")
    facts["driver"] = posixpath.basename(driver) if driver else None
    devpath = _readlink(guest, sys)
    facts["sysfs_path"] = devpath
    host = None
    if devpath:
        for part in devpath.split("/"):
            if part.startswith("host") and part[4:].isdigit():
                host = part
    facts["scsi_host"] = host
    facts["scsi_host_driver"] = _read(guest, f"/sys/class/scsi_host/{host}/proc_name") if host else None
    facts["write_cache"] = _read(guest, f"{sys}/queue/write_cache")
    facts["scheduler"] = _read(guest, f"{sys}/queue/scheduler")
    facts["rotational"] = _read(guest, f"{sys}/queue/rotational")
    facts["logical_block_size"] = _read(guest, f"{sys}/queue/logical_block_size")
    facts["nr_requests"] = _read(guest, f"{sys}/queue/nr_requests")
    return facts


def root_disk_name(guest: Transport) -> str | None:
    """The whole disk under ``/`` (e.g. vda), for the shared-controller check."""
    try:
        source = guest.run(root_source_argv(), timeout=30).stdout.strip()
        parent = guest.run(["lsblk", "--noheadings", "--nodeps", "--output", "PKNAME", source], timeout=30).stdout.strip()
    except CommandError:
        return None
    return parent or posixpath.basename(source) or None
