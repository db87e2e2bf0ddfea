"""Apply snippets for libvirt: the domain XML elements to put in with ``virsh edit`` (pure).

The disk keeps everything of its own ``<disk>`` element (source, serial, boot order, ...)
but the ``<driver>`` attributes, the ``<target>`` bus and the ``<iotune>`` that change; each
setting is edited by its axis's row of libvirt's codec table
(:data:`vmbench.drivers.libvirt.codec.CODECS`), which writes vmbench's own domains the same
way, and so are the elements besides the disk (the SCSI controller, ``<iothreads>``,
``<cpu>``, ``<vcpu>``, ``<memory>``).
"""

from __future__ import annotations

import shlex
import xml.etree.ElementTree as ET
from typing import TYPE_CHECKING

from ..drivers.libvirt.codec import CODECS, DomainEdit, disk_edit
from ..scenario.axes import DISK_SETTING_KEYS
from ..scenario.model import VmConfig
from .model import Snippet

if TYPE_CHECKING:
    from ..drivers.existing import CurrentVm

#: the settings keys of the disk (a ``qm set --scsi0`` option, or the ``<disk>`` element)
DISK_KEYS = DISK_SETTING_KEYS
NEXT_START = "takes effect at the domain's next start (virsh shutdown, then virsh start; a reboot inside the guest keeps the running QEMU)"


def render(el: ET.Element) -> str:
    for sub in el.iter():
        if not len(sub) and sub.text is not None and not sub.text.strip():
            sub.text = None  # what is left of a removed child's indentation
    ET.indent(el, space="  ")
    el.tail = None
    return ET.tostring(el, encoding="unicode")


def libvirt_snippets(vm: VmConfig, changed: tuple[str, ...], current: "CurrentVm | None") -> list[Snippet]:
    """``virsh edit NAME`` and the elements that change: ``<disk>``, the SCSI ``<controller>``,
    ``<iothreads>``, ``<cpu>``, ``<vcpu>``, ``<memory>``."""
    mine = current if current is not None and current.kind == "libvirt" else None
    name = mine.extra.get("name") or mine.ident if mine is not None else "NAME"
    out = [Snippet("libvirt", shlex.join(["virsh", "edit", name]),
                   "opens the domain's XML in an editor: put in the elements below, each in place of the one it "
                   f"replaces; {NEXT_START}" + ("" if mine else "; NAME is the domain's name (virsh list --all)"))]
    pieces: list[tuple[ET.Element | str, str]] = []
    if any(k in DISK_KEYS for k in changed):
        disk = disk_edit(vm, changed, mine)
        for codec in CODECS:
            codec.edit_disk(vm, disk)
        out.append(Snippet("libvirt", render(disk.disk), "; ".join(disk.notes + [NEXT_START])))
        pieces += disk.pieces
    domain = DomainEdit(changed, mine)
    for codec in CODECS:
        codec.edit_domain(vm, domain)
    pieces += domain.pieces
    out += [Snippet("libvirt", piece if isinstance(piece, str) else render(piece), note) for piece, note in pieces]
    return out
