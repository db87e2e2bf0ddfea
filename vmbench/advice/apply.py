"""The recommended settings as the exact way to apply them to a user's VM (pure; issue 18).

:func:`snippets` turns stored settings (``settings_of(vm)`` keys and values: bus, cache,
iothread, aio, cpu, format, vcpus, memory_mib, detect_zeroes, discard, the I/O limits, the ZFS
settings) into :class:`~vmbench.advice.model.Snippet` s: Proxmox ``qm set`` commands that keep
the disk's other options, libvirt ``<disk>``/``<controller>``/``<cpu>`` elements for ``virsh
edit``, and ``zfs set`` for the storage.  Each VM setting is edited by its axis's row of the
driver's codec table (:data:`vmbench.drivers.proxmox.codec.CODECS`,
:data:`vmbench.drivers.libvirt.codec.CODECS`), which writes vmbench's own VMs the same way;
a driver's snippets hold only the settings its table has (krbd is Proxmox's).  Only the
keys given are changed, and with a :class:`~vmbench.drivers.existing.CurrentVm` only those whose
value differs from the VM's.  vmbench never runs any of it.
"""

from __future__ import annotations

import shlex
from typing import Mapping

from ..drivers.codec import GUEST_NAME, RENAME_NOTE
from ..drivers.existing import CurrentVm
from ..drivers.libvirt import codec as libvirt_codec
from ..drivers.proxmox import codec as proxmox_codec
from ..drivers.proxmox.codec import BUS_PREFIX, DISK_KEY_RE, DISK_OPTIONS, MAX_INDEX, DiskEdit, VmEdit
from ..drivers.proxmox.propstring import join_disk, parse_disk, parse_options
from ..errors import UsageError
from ..scenario.axes import AXIS_BY_NAME, AXIS_BY_SETTING, VM_SETTING_KEYS, vm_with
from ..scenario.model import LIMIT_NAMES, IoLimits, VmConfig
from .apply_xml import DISK_KEYS, libvirt_snippets
from .apply_zfs import ZFS_KEYS, zfs_snippets
from .model import Snippet

NEXT_START = ("takes effect at the VM's next start (shut it down, then start it; a reboot inside the guest keeps "
              "the running QEMU)")


def vm_keys() -> tuple[str, ...]:
    """The VM settings vmbench applies: the disk's, then the VM's own (cpu, format, vcpus,
    memory_mib); read from the axis table's views when called."""
    return DISK_KEYS + tuple(k for k in VM_SETTING_KEYS if k not in DISK_KEYS)


def taken(kind: str) -> set[str]:
    """The settings keys a driver's codec table has a row for (``proxmox``, ``libvirt``)."""
    codecs = proxmox_codec.CODECS if kind == "proxmox" else libvirt_codec.CODECS
    return {key for c in codecs if (key := AXIS_BY_NAME[c.axis].settings_key) is not None}


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
        mine = tuple(k for k in changed if k in taken(kind))
        if mine and kind == "proxmox":
            out += proxmox_snippets(vm, mine, current, vmid)
        elif mine and kind == "libvirt":
            out += libvirt_snippets(vm, mine, current)
        if zfs:
            disk = proxmox_key(vm, changed, current) if kind == "proxmox" else None
            out += zfs_snippets(zfs, current, kind, vmid, disk=disk)
    return tuple(dict.fromkeys(out))  # the zfs set both kinds share, once


# ---- Proxmox --------------------------------------------------------------------------------


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
    """``qm set`` for the changed settings, and the commands around it (``pvesm set`` for
    krbd first, ``qm disk move`` for a format after)."""
    mine = current if current is not None and current.kind == "proxmox" else None
    if mine is not None:
        key = mine.disk
        volid, opts = parse_disk(mine.disk_spec)
        notes = [f"{mine.source}: {key} keeps its other options"]
    else:
        key, volid, opts = f"{BUS_PREFIX[vm.bus]}0", "<storage>:<volume>", {}
        notes = ["replace <storage>:<volume> with the disk's volume and keep its other options (size=..., ssd=..., "
                 "backup=...) as `qm config VMID` shows them"]
    m = DISK_KEY_RE.match(key)
    prefix = m.group(1) if m else BUS_PREFIX[vm.bus]
    old_bus = mine.vm.bus if mine is not None else vm.bus
    new_key = proxmox_key(vm, changed, current) if "bus" in changed and BUS_PREFIX[vm.bus] != prefix else key
    argv = ["qm", "set", vmid]
    if any(k in DISK_KEYS for k in changed):
        disk = DiskEdit(changed, new_key, opts)
        for codec in proxmox_codec.CODECS:
            codec.edit_disk(vm, disk)
        for name, value in sorted(disk.changes.items(), key=lambda kv: _rank(kv[0])):
            if value is None:
                opts.pop(name, None)
            else:
                opts[name] = value
        argv += [f"--{new_key}", join_disk(volid, opts)]
        notes += disk.notes
    edit = VmEdit(changed, mine, vmid, new_key, volid)
    for codec in proxmox_codec.CODECS:
        codec.edit_vm(vm, edit)
    argv += edit.argv
    notes += edit.notes
    out = [Snippet("proxmox", shlex.join(cmd), note) for cmd, note in edit.before]
    if new_key != key:
        argv += _boot_order(key, new_key, mine, notes)
        out.append(Snippet("proxmox", shlex.join(["qm", "set", vmid, "--delete", key]),
                           f"first detach {key}: its volume stays, as unusedN, and is attached again as {new_key} below"))
        notes.append(RENAME_NOTE.format(old=GUEST_NAME[old_bus], new=GUEST_NAME[vm.bus]))
    notes.append(NEXT_START)
    if len(argv) > 3:
        out.append(Snippet("proxmox", shlex.join(argv), "; ".join(notes)))
    out += [Snippet("proxmox", shlex.join(cmd), note) for cmd, note in edit.after]
    return out


def _rank(option: str) -> int:
    return DISK_OPTIONS.index(option) if option in DISK_OPTIONS else len(DISK_OPTIONS)


def _boot_order(key: str, new_key: str, mine: CurrentVm | None, notes: list[str]) -> list[str]:
    """``--boot order=...`` naming the disk's new key where the VM boots from it."""
    boot = parse_options(mine.extra.get("boot", "") if mine is not None else "", default_key="legacy")
    order = [k.strip() for k in (boot.get("order") or "").split(";") if k.strip()]
    legacy = mine is not None and mine.extra.get("bootdisk") == key
    if key in order or legacy:
        return ["--boot", "order=" + ";".join(new_key if k == key else k for k in (order or [key]))]
    if mine is None:
        notes.append(f"if the VM boots from this disk, add --boot order={new_key} (and its other boot devices)")
    return []


def limits_of(settings: Mapping[str, object]) -> IoLimits:
    """The I/O limits among stored settings (for callers comparing them)."""
    return vm_with(VmConfig(), {k: v for k, v in settings.items() if k in LIMIT_NAMES}).limits


__all__ = ["snippets", "proxmox_snippets", "libvirt_snippets", "zfs_snippets", "limits_of"]
