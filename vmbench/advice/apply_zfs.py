"""Apply snippets for the ZFS storage under a VM's disk (pure).

Properties change with ``zfs set`` (compression, recordsize and checksum only for blocks
written afterwards); ``volblocksize`` is fixed when a zvol is created, so applying it means a
new zvol: on Proxmox a storage entry with that ``blocksize`` and ``qm disk move`` onto it,
elsewhere ``zfs create -V -b`` and a copy with the VM shut down.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Mapping

from ..scenario.axes import STORAGE_AXES
from .model import Snippet

if TYPE_CHECKING:
    from ..drivers.existing import CurrentVm

ZFS_KEYS = STORAGE_AXES  # volblocksize, recordsize and the ZFS properties
#: properties that apply only to blocks written after the change
NEW_WRITES_ONLY = ("recordsize", "compression", "checksum", "dedup")


def _target(current: "CurrentVm | None", kind: str) -> tuple[str, str, bool | None]:
    """(dataset or zvol, a note on the placeholder in it, whether it is a zvol (None: not known))."""
    st = current.storage if current is not None else {}
    if st.get("zvol"):
        return str(st["zvol"]), "", True
    if current is not None and current.kind == "proxmox" and st.get("volume"):
        storage, _, name = str(st["volume"]).partition(":")
        if "/" not in name:  # a zfspool volume: <pool>/<name>
            return f"<pool>/{name}", f"<pool>: the pool of storage {storage} (its pool: in /etc/pve/storage.cfg)", None
        return "DATASET", f"DATASET: the dataset holding {name} on storage {storage} (zfs list)", False
    if st.get("path"):
        return "DATASET", f"DATASET: the dataset holding {st['path']} (zfs list -H -o name {st['path']})", False
    return "DATASET", "DATASET: the zvol or dataset of the VM's disk (zfs list)", None


def zfs_snippets(zfs: Mapping[str, object], current: "CurrentVm | None", kind: str, vmid: str = "VMID",
                 disk: str | None = None) -> list[Snippet]:
    """``zfs set`` for the properties and recordsize; a new zvol for volblocksize (``disk``:
    the Proxmox disk key to move, once the other settings are applied)."""
    out: list[Snippet] = []
    target, where, zvol = _target(current, kind)
    notes = [where] if where else []
    inherit = [k for k in ZFS_KEYS if k in zfs and k != "volblocksize" and (zfs[k] is None or zfs[k] == "ZFS default")]
    props = [(k, str(zfs[k])) for k in ZFS_KEYS if k in zfs and k != "volblocksize" and k not in inherit]
    if zvol and any(k == "recordsize" for k, _ in props):
        props = [(k, v) for k, v in props if k != "recordsize"]
        notes.append("recordsize left out: it is a dataset property, and this disk is a zvol (its block size is volblocksize)")
    if props:
        later = [k for k, _ in props if k in NEW_WRITES_ONLY]
        if later:
            notes.append(f"{', '.join(later)} {'applies' if len(later) == 1 else 'apply'} to blocks written from now on; "
                         "data already on disk keeps its old ones")
        out.append(Snippet("zfs", shlex.join(["zfs", "set", *(f"{k}={v}" for k, v in props), target]),
                           "; ".join(["run on the host"] + notes)))
    for k in inherit:
        out.append(Snippet("zfs", shlex.join(["zfs", "inherit", k, target]),
                           "; ".join([f"run on the host: {k} back to its inherited or default value"] + ([where] if where else []))))
    if "volblocksize" in zfs and zfs["volblocksize"] not in (None, "ZFS default"):
        out += _volblocksize(str(zfs["volblocksize"]), current, kind, vmid, target, disk)
    return out


def _volblocksize(vbs: str, current: "CurrentVm | None", kind: str, vmid: str, target: str,
                  disk: str | None) -> list[Snippet]:
    fixed = f"volblocksize is fixed when a zvol is created: {vbs} needs a new zvol and a copy of the disk"
    if kind == "proxmox":
        st = current.storage if current is not None and current.kind == "proxmox" else {}
        storage = str(st.get("storage") or "<storage>")
        disk = disk or (current.disk if current is not None and current.kind == "proxmox" else "scsi0")
        new = f"{storage}-{vbs}" if storage != "<storage>" else f"<storage>-{vbs}"
        return [
            Snippet("proxmox", shlex.join(["pvesm", "add", "zfspool", new, "--pool", "<pool>", "--blocksize", vbs,
                                           "--content", "images"]),
                    f"{fixed}. This adds a storage entry on the same pool whose new zvols get volblocksize {vbs} "
                    f"(<pool>: the pool of {storage} in /etc/pve/storage.cfg); or give {storage} itself that block "
                    f"size for disks made from now on: pvesm set {storage} --blocksize {vbs}"),
            Snippet("proxmox", shlex.join(["qm", "disk", "move", vmid, disk, new, "--delete", "1"]),
                    f"copies {disk} to a new zvol on {new} (the VM may run) and removes the old one once copied"),
        ]
    known = target != "DATASET" and not target.startswith("<")
    src = target if known else "POOL/OLD-ZVOL"
    new = f"{src}-{vbs}" if known else "POOL/NEW-ZVOL"
    return [
        Snippet("zfs", shlex.join(["zfs", "create", "-V", "<size>", "-b", vbs, new]),
                f"{fixed}; <size>: the old zvol's (zfs get -H -o value volsize {src}); add -s for a sparse zvol"
                + ("" if known else "; POOL/OLD-ZVOL: the VM's zvol (zfs list -t volume)")),
        Snippet("zfs", shlex.join(["qemu-img", "convert", "-p", "-n", "-f", "raw", "-O", "raw", f"/dev/zvol/{src}",
                                   f"/dev/zvol/{new}"]),
                f"with the VM shut down: copies the disk; then point the disk's <source dev=...> at /dev/zvol/{new} "
                "(virsh edit) and destroy the old zvol once the VM runs from the new one"),
    ]
