"""What a guest must have for a scenario, and the check of a template vmbench did not make
(pure, but for :func:`check_guest`).

vmbench's own image has everything (``vmbench/images/recipes/debian12``); a Proxmox template the user
brought may not.  At the first boot of such a template the guest is asked, through the agent,
for every command the scenario's layers and jobs run and for fio's version; what is missing
is one clear error naming the commands and their Debian packages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..scenario.model import FilesystemLayer, LuksLayer, LvmLayer, PartitionLayer
from ..scenario.spec import Scenario
from ..transport.base import Transport

#: fio's json+ output with nanosecond latencies (``clat_ns``), which vmbench parses: fio 3.0
FIO_BASE = ((3, 0), "json+ output with nanosecond latencies (vmbench's parser)")
#: the io_uring engine: fio 3.13
FIO_IO_URING = ((3, 13), "ioengine io_uring")


@dataclass(frozen=True)
class Tool:
    command: str
    package: str
    why: str


ALWAYS = (Tool("fio", "fio", "every measurement"), Tool("lsblk", "util-linux", "finding the scratch disk by serial"))
LAYER_TOOLS = {
    "partition": (Tool("parted", "parted", "partition layers"),),
    "lvm": (Tool("lvcreate", "lvm2", "lvm layers"),),
    "lvm-thin": (Tool("lvcreate", "lvm2", "lvm layers"), Tool("thin_check", "thin-provisioning-tools", "lvm thin layers")),
    "luks": (Tool("cryptsetup", "cryptsetup-bin", "luks layers"),),
    "ext2": (Tool("mkfs.ext2", "e2fsprogs", "ext2 layers"),),
    "ext3": (Tool("mkfs.ext3", "e2fsprogs", "ext3 layers"),),
    "ext4": (Tool("mkfs.ext4", "e2fsprogs", "ext4 layers"),),
    "xfs": (Tool("mkfs.xfs", "xfsprogs", "xfs layers"),),
    "btrfs": (Tool("mkfs.btrfs", "btrfs-progs", "btrfs layers"),),
}


@dataclass(frozen=True)
class GuestNeeds:
    """The commands a scenario runs in the guest, and the oldest fio that does all it asks."""

    tools: tuple[Tool, ...] = ALWAYS
    fio_min: tuple[int, ...] = FIO_BASE[0]
    fio_why: str = FIO_BASE[1]


def layer_key(layer: object) -> str:
    if isinstance(layer, LvmLayer):
        return "lvm-thin" if layer.thin else "lvm"
    if isinstance(layer, FilesystemLayer):
        return layer.fs.value
    if isinstance(layer, (PartitionLayer, LuksLayer)):
        return layer.kind
    raise TypeError(f"not a layer: {layer!r}")


def guest_needs(scenario: Scenario) -> GuestNeeds:
    """What ``scenario`` runs in its guests."""
    tools: dict[str, Tool] = {t.command: t for t in ALWAYS}
    for stack in scenario.stacks:
        for layer in stack.layers:
            for t in LAYER_TOOLS[layer_key(layer)]:
                tools.setdefault(t.command, t)
    fio_min, why = FIO_BASE
    uring = [j.name for j in scenario.jobs if j.ioengine == "io_uring" and j.jobfile is None]
    uring += [j.name for j in scenario.jobs if j.jobfile is not None
              and re.search(r"^\s*ioengine\s*=\s*io_uring\b", j.jobfile.text, re.M)]
    if uring:
        fio_min, why = FIO_IO_URING[0], f"{FIO_IO_URING[1]} (job {', '.join(uring)})"
    return GuestNeeds(tuple(tools.values()), fio_min, why)


def check_argv(needs: GuestNeeds) -> list[str]:
    """One shell in the guest: ``missing CMD`` per absent command, then ``fio --version``."""
    names = " ".join(t.command for t in needs.tools)
    script = (f'for c in {names}; do command -v "$c" >/dev/null 2>&1 || echo "missing $c"; done; '
              'fio --version 2>/dev/null || true')
    return ["sh", "-c", script]


def fio_version(text: str) -> tuple[int, ...] | None:
    """``fio-3.33`` -> (3, 33)."""
    m = re.search(r"fio-(\d+)\.(\d+)(?:\.(\d+))?", text)
    return tuple(int(g) for g in m.groups() if g is not None) if m else None


def problems(stdout: str, needs: GuestNeeds) -> list[str]:
    """What the check's output says is missing or too old, one line each."""
    by_name = {t.command: t for t in needs.tools}
    out = []
    for line in stdout.splitlines():
        if line.startswith("missing "):
            t = by_name.get(line[8:].strip())
            if t is not None:
                out.append(f"{t.command} (package {t.package}; for {t.why})")
    if "fio" not in {line[8:].strip() for line in stdout.splitlines() if line.startswith("missing ")}:
        got = fio_version(stdout)
        if got is None:
            out.append("fio's version (fio --version printed nothing vmbench reads)")
        elif got < needs.fio_min:
            want = ".".join(map(str, needs.fio_min))
            out.append(f"fio {'.'.join(map(str, got))} is older than {want}, which {needs.fio_why} needs")
    return out


def check_guest(guest: Transport, needs: GuestNeeds) -> list[str]:
    """Ask a running guest; returns what is missing (empty: it has everything)."""
    got = guest.run(check_argv(needs), timeout=60, check=False)
    return problems(got.stdout, needs)
