"""The recommended settings as the exact way to apply them to a user's VM (pure; issue 18).

:func:`snippets` turns stored settings (``settings_of(vm)`` keys and values: bus, cache,
iothread, aio, cpu, format, vcpus, memory_mib, detect_zeroes, discard, the I/O limits, the ZFS
settings) into :class:`~vmbench.advice.model.Snippet` s: Proxmox ``qm set`` commands that keep
the disk's other options, libvirt ``<disk>``/``<controller>``/``<cpu>`` elements for ``virsh
edit``, and ``zfs set`` for the storage.  The option grammar and XML are the drivers' own
builders (:mod:`vmbench.drivers.proxmox.config`, :mod:`vmbench.drivers.libvirt.xml`).  Only the
keys given are changed, and with a :class:`~vmbench.drivers.existing.CurrentVm` only those whose
value differs from the VM's.  vmbench never runs any of it.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Mapping

from ..drivers.existing import CurrentVm
from ..drivers.proxmox.config import (BUS_PREFIX, DISK_KEY_RE, MAX_INDEX, burst_length_key, cpu_option, limit_options,
                                      parse_disk, parse_options, scsihw, zeroes_options)
from ..errors import HypervisorError, UsageError
from ..scenario.axes import AXIS_BY_SETTING, VM_SETTING_KEYS, vm_with
from ..scenario.model import LIMIT_NAMES, IoLimits, VmConfig
from ..settings import DetectZeroes, Discard
from ..drivers.codec import GUEST_NAME, RENAME_NOTE
from .apply_xml import DISK_KEYS, libvirt_snippets
from .apply_zfs import ZFS_KEYS, zfs_snippets
from .model import Snippet



def vm_keys() -> tuple[str, ...]:
    """The VM settings vmbench applies: the disk's, then the VM's own (cpu, format, vcpus,
    memory_mib); read from the axis table's views when called."""
    return DISK_KEYS + tuple(k for k in VM_SETTING_KEYS if k not in DISK_KEYS)


def snippets(settings: Mapping[str, object], current: CurrentVm | None = None, vmid: str = "VMID") -> tuple[Snippet, ...]:
    """The commands and XML that apply ``settings`` to ``current`` (its kind only), or, with
    no current VM, to a Proxmox VM and a libvirt domain with placeholders and notes."""
    vm_settings = vm_keys()
    unknown = [k for k in settings if k not in vm_settings and k not in ZFS_KEYS]
    if unknown:
        raise UsageError(f"cannot apply setting(s) {', '.join(map(str, unknown))}: vmbench applies "
                         f"{', '.join(vm_settings + ZFS_KEYS)}")
    base = current.vm if current is not None else VmConfig()
    vm = vm_with(base, settings)
    changed = tuple(k for k in vm_settings if k in settings and (current is None or AXIS_BY_SETTING[k].setting(vm) != AXIS_BY_SETTING[k].setting(base)))
    zfs = {k: settings[k] for k in ZFS_KEYS if k in settings}
    if current is not None and vmid == "VMID" and current.kind == "proxmox":
        vmid = current.ident
    kinds = (current.kind,) if current is not None else ("proxmox", "libvirt")
    out: list[Snippet] = []
    for kind in kinds:
        if "krbd" in changed and kind == "proxmox":  # a setting of the rbd storage, not of the VM
            out.append(krbd_snippet(vm, current))
        rest = tuple(k for k in changed if k != "krbd")  # libvirt has no krbd (the loader refuses it there)
        if rest and kind == "proxmox":
            out += proxmox_snippets(vm, rest, current, vmid)
        elif rest and kind == "libvirt":
            out += libvirt_snippets(vm, rest, current)
        if zfs:
            disk = proxmox_key(vm, changed, current) if kind == "proxmox" else None
            out += zfs_snippets(zfs, current, kind, vmid, disk=disk)
    return tuple(dict.fromkeys(out))  # the zfs set both kinds share, once


# ---- Proxmox --------------------------------------------------------------------------------


def krbd_snippet(vm: VmConfig, current: CurrentVm | None) -> Snippet:
    """krbd is the rbd storage's (``pvesm set``), for every VM on it, from each one's next start."""
    mine = current if current is not None and current.kind == "proxmox" else None
    storage = parse_disk(mine.disk_spec)[0].partition(":")[0] if mine is not None else "<storage>"
    return Snippet("proxmox", shlex.join(["pvesm", "set", storage or "<storage>", "--krbd", "1" if vm.krbd else "0"]),
                   "krbd is a setting of the rbd storage, not of the VM: every VM on it opens its disks this way from its "
                   "next start; for one VM only, add an rbd storage on the same pool with the other krbd and move the "
                   "disk there (qm disk move)")


def _join(volid: str, opts: Mapping[str, str]) -> str:
    return ",".join([volid] + [f"{k}={v}" if v != "" else k for k, v in opts.items()])


def _free_key(prefix: str, used: set[str], prefer: int) -> str:
    if f"{prefix}{prefer}" not in used and prefer <= MAX_INDEX[prefix]:
        return f"{prefix}{prefer}"
    return next((f"{prefix}{i}" for i in range(MAX_INDEX[prefix] + 1) if f"{prefix}{i}" not in used), f"{prefix}{prefer}")


def proxmox_key(vm: VmConfig, changed: tuple[str, ...], current: CurrentVm | None) -> str:
    """The disk's key once the settings are applied (``virtio0`` becomes ``scsi0`` on a SCSI bus)."""
    mine = current if current is not None and current.kind == "proxmox" else None
    if mine is None:
        return f"{BUS_PREFIX[vm.bus]}0"
    m = DISK_KEY_RE.match(mine.disk)
    if "bus" not in changed or m is None or BUS_PREFIX[vm.bus] == m.group(1):
        return mine.disk
    used = set(filter(None, mine.extra.get("keys", "").split(","))) - {mine.disk}
    return _free_key(BUS_PREFIX[vm.bus], used, int(m.group(2)))


def proxmox_snippets(vm: VmConfig, changed: tuple[str, ...], current: CurrentVm | None, vmid: str) -> list[Snippet]:
    """``qm set`` (and ``qm disk move`` for a format) for the changed settings."""
    out: list[Snippet] = []
    notes: list[str] = []
    mine = current if current is not None and current.kind == "proxmox" else None
    if mine is not None:
        key = mine.disk
        volid, opts = parse_disk(mine.disk_spec)
        notes.append(f"{mine.source}: {key} keeps its other options")
    else:
        key, volid, opts = f"{BUS_PREFIX[vm.bus]}0", "<storage>:<volume>", {}
        notes.append("replace <storage>:<volume> with the disk's volume and keep its other options (size=..., ssd=..., "
                     "backup=...) as `qm config VMID` shows them")
    m = DISK_KEY_RE.match(key)
    prefix = m.group(1) if m else BUS_PREFIX[vm.bus]
    old_bus = mine.vm.bus if mine is not None else vm.bus
    new_key = key
    argv = ["qm", "set", vmid]
    disk_changed = any(k in DISK_KEYS for k in changed)
    if "bus" in changed and BUS_PREFIX[vm.bus] != prefix:
        new_key = proxmox_key(vm, changed, current)
    if disk_changed:
        _disk_options(vm, changed, opts, notes, new_key)
        argv += [f"--{new_key}", _join(volid, opts)]
    hw = scsihw(vm) if vm.bus.is_scsi and ("bus" in changed or "iothread" in changed) else None
    if hw and (mine is None or mine.extra.get("scsihw", "lsi") != hw):
        argv += ["--scsihw", hw]
        notes.append(f"scsihw is VM-wide: every SCSI disk of the VM gets the {hw} controller")
    if "cpu" in changed:
        try:
            argv += ["--cpu", cpu_option(vm.cpu)]
        except HypervisorError as exc:
            notes.append(f"cpu {vm.cpu.label} cannot be set on Proxmox: {exc.message}")
    if "vcpus" in changed:
        sockets = int(mine.extra.get("sockets", "1")) if mine is not None else 1
        if sockets > 1 and vm.vcpus % sockets == 0:
            argv += ["--cores", str(vm.vcpus // sockets)]
        else:
            argv += ["--sockets", "1", "--cores", str(vm.vcpus)] if sockets != 1 else ["--cores", str(vm.vcpus)]
    if "memory_mib" in changed:
        argv += ["--memory", str(vm.memory_mib)]
    if new_key != key:
        boot = parse_options(mine.extra.get("boot", "") if mine is not None else "", default_key="legacy")
        order = [k.strip() for k in (boot.get("order") or "").split(";") if k.strip()]
        legacy = mine is not None and mine.extra.get("bootdisk") == key
        if key in order or legacy:
            argv += ["--boot", "order=" + ";".join(new_key if k == key else k for k in (order or [key]))]
        elif mine is None:
            notes.append(f"if the VM boots from this disk, add --boot order={new_key} (and its other boot devices)")
        out.append(Snippet("proxmox", shlex.join(["qm", "set", vmid, "--delete", key]),
                           f"first detach {key}: its volume stays, as unusedN, and is attached again as {new_key} below"))
        notes.append(RENAME_NOTE.format(old=GUEST_NAME[old_bus], new=GUEST_NAME[vm.bus]))
    notes.append("takes effect at the VM's next start (shut it down, then start it; a reboot inside the guest keeps "
                 "the running QEMU)")
    if len(argv) > 3:
        out.append(Snippet("proxmox", shlex.join(argv), "; ".join(notes)))
    if "format" in changed:
        storage = volid.partition(":")[0] if ":" in volid else "<storage>"
        out.append(Snippet("proxmox", shlex.join(["qm", "disk", "move", vmid, new_key, storage, "--format", vm.format.value]),
                           f"a volume's format changes only by copying it: this writes a {vm.format.value} copy (qcow2 "
                           "needs a file storage: dir, nfs, cifs) and keeps the old volume as unusedN (add --delete 1 "
                           "to remove it)"))
    return out


def _disk_options(vm: VmConfig, changed: tuple[str, ...], opts: dict[str, str], notes: list[str], key: str) -> None:
    """Set the changed disk options in ``opts`` (in place, in the disk's own order)."""
    if "cache" in changed:
        opts["cache"] = vm.cache.value
    if "aio" in changed:
        opts["aio"] = vm.aio.value
    if vm.iothread and vm.bus.takes_iothread:
        if "iothread" in changed or "bus" in changed:
            opts["iothread"] = "1"
    elif "iothread" in opts and ("iothread" in changed or "bus" in changed):
        del opts["iothread"]
        if vm.iothread:
            notes.append(f"iothread dropped: {vm.bus} has none")
    if key.startswith("virtio") and "ssd" in opts:
        del opts["ssd"]
        notes.append("ssd dropped: virtio-blk disks have no ssd option")
    if "discard" in changed or "detect_zeroes" in changed:
        probe = replace(vm, discard=vm.discard if "discard" in changed else None,
                        detect_zeroes=vm.detect_zeroes if "detect_zeroes" in changed else None)
        try:
            given = zeroes_options(probe)
        except HypervisorError as exc:
            given = zeroes_options(replace(probe, detect_zeroes=None))
            notes.append(f"detect_zeroes not set: {exc.message}")
        for item in given:
            name, _, value = item.partition("=")
            opts[name] = value
        for name, now in (("discard", vm.discard), ("detect_zeroes", vm.detect_zeroes)):
            if name in changed and now is None:
                opts.pop(name, None)
        if vm.detect_zeroes is DetectZeroes.UNMAP and vm.discard is not Discard.UNMAP:
            notes.append("detect_zeroes=1 is unmap only with discard=on (else on)")
    limits_changed = [k for k in changed if k in LIMIT_NAMES]
    if limits_changed:
        stated = dict(item.split("=", 1) for item in limit_options(vm))
        for name in limits_changed:
            if vm.limits.get(name) is None:  # the limit removed, and its burst's length
                for opt in (name, burst_length_key(name)) if name.endswith("_max") else (name,):
                    opts.pop(opt, None)
            for opt, value in stated.items():
                if opt == name or (name == "burst_length" and opt.endswith("_length")):
                    opts[opt] = value


def limits_of(settings: Mapping[str, object]) -> IoLimits:
    """The I/O limits among stored settings (for callers comparing them)."""
    return vm_with(VmConfig(), {k: v for k, v in settings.items() if k in LIMIT_NAMES}).limits


__all__ = ["snippets", "proxmox_snippets", "libvirt_snippets", "zfs_snippets", "limits_of"]
