"""Was each requested setting really applied?  (METHOD rule 11)

The driver reports what the hypervisor applied as typed values
(:class:`~vmbench.drivers.base.Applied`); the guest says how it sees its scratch disk and
CPU (:func:`guest_view`).  :func:`problems` compares the request with both, one row
per setting and source (each VM axis's ``verify`` entries, then what follows from its
setting: its ``derived`` ones, the guest's write cache after the cache mode), and lists every
difference.  A setting the scenario leaves to the hypervisor (detect_zeroes, discard) is
recorded, not compared; so is a setting the disk's QEMU driver does not have (aio on librbd or libiscsi
reads "not applicable").  An I/O limit (iops, mbps_rd, iops_max, burst_length...) is
compared with the configuration's and QEMU's throttling, which read "none" where no such
limit is in effect.  ``aes`` is checked where the guest and QEMU's ``-cpu`` can tell: a
model that has AES-NI by itself (x86-64-v2-AES, Westmere, host on an AES-NI host) counts as
aes on.  A cell with differences is marked invalid and not measured.  Pure functions, no
hypervisor keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..drivers.base import Applied
from ..drivers.qemu_cmdline import CPU_READINGS, NOT_APPLICABLE
from ..errors import VmbenchError
from ..scenario.axes import AXES, Axis
from ..scenario.model import VmConfig
from ..settings import Bus, Feature

GUEST_BUS = {"virtio_blk": Bus.VIRTIO_BLK, "virtio_scsi": Bus.VIRTIO_SCSI, "ahci": Bus.SATA}


def guest_view(guest_disk: dict, guest_facts: dict) -> dict:
    """The guest's own view of the scratch disk and its CPU, as flat typed values."""
    drv = guest_disk.get("driver")
    host_drv = guest_disk.get("scsi_host_driver")
    if drv == "virtio_blk":
        bus = Bus.VIRTIO_BLK.value
    elif drv == "sd" and host_drv in GUEST_BUS:
        b = GUEST_BUS[host_drv]
        if b is Bus.VIRTIO_SCSI:
            root = guest_disk.get("root") or {}
            shared = root.get("scsi_host") is not None and root.get("scsi_host") == guest_disk.get("scsi_host")
            b = Bus.VIRTIO_SCSI_SHARED if shared else Bus.VIRTIO_SCSI
        bus = b.value
    else:
        bus = f"unknown ({drv}/{host_drv})"
    return {
        "guest_bus": bus,
        "guest_write_cache": guest_disk.get("write_cache"),
        "guest_aes": guest_facts.get("aes"),
        "guest_ssse3": guest_facts.get("ssse3"),
        "guest_pclmulqdq": guest_facts.get("pclmulqdq"),
        "guest_cpus": guest_facts.get("cpus"),
    }


def effective_settings(applied: Applied, guest: dict) -> dict:
    """Everything known about what took effect, flat (stored with each cell): the typed
    readings (every axis's, :attr:`Applied.readings`, and the VM's facts), the CPU as QEMU
    runs it, and the guest's view."""
    return {**applied.typed(), **{k: applied.details[k] for k in CPU_READINGS if k in applied.details}, **guest}


@dataclass(frozen=True)
class Check:
    """One setting as one source reports it."""

    what: str  # the setting, as messages name it
    asked: Callable[[VmConfig], object]  # the setting as stored (and as messages show it)
    key: str  # the key in effective_settings()
    source: str  # who reports it; "{config}" is the driver's configuration source
    required: bool = False  # missing evidence makes the cell invalid ("could not be verified")
    axis: "Axis | None" = None  # the axis whose stored value the reading is (None: a derived check, a text)

    def matches(self, vm: VmConfig, got: object) -> bool:
        """Whether the reading ``got`` is the setting asked: an axis's reading (its stored
        spelling) read back typed (a Cache, a flag, a number) and compared with the VM's value;
        a reading that is none of the axis's values, or a derived check's text, as it reads."""
        axis = self.axis
        if axis is not None and axis.from_stored is not None:
            try:
                return axis.value(axis.from_stored(VmConfig(), got)) == axis.value(vm)
            except (ValueError, TypeError, VmbenchError):
                pass
        return str(got) == str(self.asked(vm))


def _checks() -> tuple[Check, ...]:
    """Every (setting, source) pair compared: one per ``verify`` entry of each VM axis
    (vmbench.scenario.axes), then what follows from its setting (its ``derived`` entries:
    the guest's write cache after the cache mode's)."""
    return tuple(check for a in AXES for check in (
        *(Check(a.name, a.setting, key, source, required, a) for key, source, required in a.verify),
        *(Check(d.what, d.asked, d.key, d.source, d.required) for d in a.derived)))


def problems(vm: VmConfig, eff: dict, accelerator: str) -> list[str]:
    """Every difference between what was asked and what was applied."""
    out: list[str] = []
    config = eff.get("config_source") or "the hypervisor configuration"
    unverified: list[str] = []
    for c in _checks():
        got, asked = eff.get(c.key), c.asked(vm)
        if asked is None:
            continue  # left to the hypervisor: what it chose is in eff, nothing to compare
        source = c.source.format(config=config)
        if got is None:
            if c.required:
                unverified.append(f"{c.what} ({source}) could not be verified")
            continue
        if got == NOT_APPLICABLE:
            continue  # the disk's QEMU driver has no such setting: recorded, nothing to compare
        if not c.matches(vm, got):
            out.append(f"{c.what}: asked {asked}, {source} reports {got}")
    qemu_aes, qemu_model = eff.get("qemu_cpu_aes"), eff.get("qemu_cpu_model")
    if vm.cpu.aes is Feature.ON and qemu_aes == "off":
        out.append(f"cpu aes: asked on, QEMU runs -cpu {qemu_model} without aes")
    if vm.cpu.aes is Feature.OFF and qemu_aes == "on":
        out.append(f"cpu aes: asked off, QEMU runs -cpu {qemu_model} with aes")
    if vm.cpu.aes is Feature.ON and eff.get("guest_aes") is False:
        out.append("cpu aes: asked on, the guest has no aes flag")
    if vm.cpu.aes is Feature.OFF and eff.get("guest_aes") is True:
        out.append("cpu aes: asked off, the guest has the aes flag")
    missing = [f for f in ("ssse3", "pclmulqdq") if eff.get(f"guest_{f}") is False]
    if accelerator == "tcg" and eff.get("guest_aes") and missing:
        out.append(
            f"cpu {vm.cpu.label}: the guest has aes but not {' or '.join(missing)}; under TCG Linux's AES-NI driver "
            "faults on that combination (use a model with all three, such as Westmere)"
        )
    out += unverified
    if eff.get("accelerator") is not None and eff["accelerator"] != accelerator:
        out.append(f"accelerator: asked {accelerator}, QEMU reports {eff['accelerator']}")
    return out
