"""What a Proxmox VM really runs with, from its stored config and the QEMU command line (pure).

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
from ..qemu_cmdline import accelerator, cpu_readings, disk_readings, parse_cmdline, throttle_readings, to_applied
from .config import config_bus, config_text, cpu_from_config, drive_zeroes, parse_disk, pve_throttle, volume_format


def applied_from_pve(config: Mapping[str, object], disk_key: str, cmdline: list[str] | tuple[str, ...],
                     serial: str, scratch_path: str, extra: Mapping[str, Any] | None = None) -> Applied:
    """What Proxmox stored and QEMU runs for the scratch disk ``disk_key`` (serial ``serial``)."""
    values: dict[str, Any] = {"config_source": "the Proxmox VM config", "volume": scratch_path or None}
    raw = config.get(disk_key)
    if raw is not None:
        volid, opts = parse_disk(str(raw))
        zeroes, discard = drive_zeroes(opts)
        values.update(config_bus=config_bus(disk_key, _str(config.get("scsihw"))), config_cache=opts.get("cache"),
                      config_aio=opts.get("aio"), config_format=volume_format(volid, opts),
                      config_detect_zeroes=zeroes, config_discard=discard)
        values.update(throttle_readings("config_", pve_throttle(opts)))
        if disk_key.startswith("scsi"):
            values["controller"] = _str(config.get("scsihw")) or "lsi"
        elif disk_key.startswith("sata"):
            values["controller"] = "ahci"
        else:
            values["controller"] = "virtio-blk-pci"
    model, flags = cpu_from_config(_str(config.get("cpu")))
    values.update(cpu_model=model, cpu_flags=flags)
    details: dict[str, Any] = dict(extra or {})
    if cmdline:
        args = parse_cmdline(list(cmdline))
        readings = disk_readings(args, serial, disk_key)
        values.update({k: v for k, v in readings.items() if k.startswith("qemu_") and v is not None})
        values["accelerator"] = accelerator(args)
        values.update(cpu_readings(args))
        details.update(qemu_disk=readings, qemu_cpu=args.cpu, qemu_machine=args.machine)
        if scratch_path.startswith(("rbd:", "/dev/rbd")):  # an rbd storage's disk: librbd, or the kernel's mapping
            values["qemu_krbd"] = {"rbd": False, "host_device": True}.get(str(readings.get("protocol")))
        if readings.get("file") and scratch_path and readings["file"] != scratch_path:
            details["qemu_file_differs"] = f"QEMU opens {readings['file']}, the volume's path is {scratch_path}"
    kvm = str(config.get("kvm", "1")).strip()
    details["config_kvm"] = kvm
    return to_applied(values, native_config=config_text(config), qemu_cmdline=tuple(cmdline or ()), details=details)


def _str(value: object) -> str | None:
    return None if value is None else str(value)

