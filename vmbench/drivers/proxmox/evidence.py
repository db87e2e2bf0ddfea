"""What a Proxmox VM really runs with, from its stored config and the QEMU command line (pure):
each axis's readings by its row of Proxmox's codec table (:mod:`.codec`).

The config is read as qemu-server reads it (:mod:`.config`: bus, cache, aio, format,
detect-zeroes, discard and the I/O limits as qemu-server derives them); the command line of the VM's QEMU
through the reader both drivers share (:mod:`vmbench.drivers.qemu_cmdline`: PVE 8's
``-drive`` and PVE 9's nested ``-blockdev`` chains).  A disk whose storage QEMU opens with a
driver that has no aio (librbd, libiscsi) reads ``qemu_aio`` "not applicable", whatever the
config or a ``-drive`` says; on an rbd storage ``qemu_krbd`` says whether QEMU opens the image
through librbd (its rbd driver) or as the kernel's mapped device (host_device).  The I/O limits are read from the config and from the command line's throttling (PVE 8:
``-drive ...,throttling.iops-total=``; PVE 9: the ``-object throttle-group`` of the disk's
throttle node), in IOPS and MiB/s.  The CPU is kept twice: ``cpu_model``/``cpu_flags`` as
configured, ``qemu_cpu_model``/``qemu_cpu_flags``/``qemu_cpu_aes`` as QEMU runs it (the
``-cpu`` qemu-server made from the config: built-in models become ``qemu64`` with flags,
deprecated ones their replacement).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..base import Applied
from ..qemu_cmdline import accelerator, disk_readings, find_disk, parse_cmdline, to_applied
from .codec import CODECS, QemuView, StoredDisk
from .config import config_text
from .propstring import parse_disk


def applied_from_pve(config: Mapping[str, object], disk_key: str, cmdline: list[str] | tuple[str, ...],
                     serial: str, scratch_path: str, extra: Mapping[str, Any] | None = None) -> Applied:
    """What Proxmox stored and QEMU runs for the scratch disk ``disk_key`` (serial ``serial``):
    each axis's readings as its row of Proxmox's codec table reads them."""
    values: dict[str, Any] = {"config_source": "the Proxmox VM config", "volume": scratch_path or None}
    raw = config.get(disk_key)
    stored = StoredDisk(config, disk_key, *parse_disk(str(raw))) if raw is not None else StoredDisk(config, disk_key)
    for codec in CODECS:
        values.update(codec.config(stored))
    details: dict[str, Any] = dict(extra or {})
    if cmdline:
        args = parse_cmdline(list(cmdline))
        readings = disk_readings(args, serial, disk_key)
        qemu = QemuView(readings, find_disk(args, serial, disk_key), args, scratch_path)
        for codec in CODECS:
            values.update(codec.qemu(qemu))
        values["accelerator"] = accelerator(args)
        details.update(qemu_disk=readings, qemu_cpu=args.cpu, qemu_machine=args.machine)
        if readings.get("file") and scratch_path and readings["file"] != scratch_path:
            details["qemu_file_differs"] = f"QEMU opens {readings['file']}, the volume's path is {scratch_path}"
    kvm = str(config.get("kvm", "1")).strip()
    details["config_kvm"] = kvm
    return to_applied(values, native_config=config_text(config), qemu_cmdline=tuple(cmdline or ()), details=details)
