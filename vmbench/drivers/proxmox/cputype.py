"""The guest CPU as qemu-server spells it (pure): the VM's ``cpu`` option,
``[cputype=]MODEL[,flags=+aes;-pcid]`` with flags from PVE's allow-list only
(``CPUConfig.pm``); ``host`` is vmbench's host-passthrough.  :mod:`.codec`'s cpu row (aes
with it) writes, reads back and edits it through these functions.
"""

from __future__ import annotations

from typing import Any

from ...errors import HypervisorError
from ...scenario.model import CpuConfig
from ...settings import PVE_CPU_FLAGS, CpuMode, Feature
from .propstring import parse_options

#: per-VM CPU flags PVE accepts (qemu-server CPUConfig.pm)
CPU_FLAGS = PVE_CPU_FLAGS
#: the ``cpu`` options other than the model and its flags (none of them an axis)
CPU_OTHER = ("hidden", "hv-vendor-id", "phys-bits", "level", "reported-model", "guest-phys-bits")


def cpu_option(cpu: CpuConfig) -> str:
    """``kvm64``, ``x86-64-v2-AES,flags=+aes``, ``host``, ``max``..."""
    if cpu.mode is CpuMode.HOST_PASSTHROUGH:
        model = "host"
    elif cpu.mode is CpuMode.MAX:
        model = "max"
    else:
        model = cpu.model or "kvm64"
    flags = []
    for name, state in cpu.all_features():
        if name not in CPU_FLAGS:
            raise HypervisorError(f"Proxmox does not take the CPU flag {name} per VM",
                                  "flags Proxmox allows: " + ", ".join(CPU_FLAGS))
        flags.append(("+" if state is Feature.ON else "-") + name)
    return model + (f",flags={';'.join(flags)}" if flags else "")


def cpu_from_config(value: str | None) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``x86-64-v2-AES,flags=+aes;-pcid`` -> ("x86-64-v2-AES", (("aes","on"),("pcid","off"))); host is host-passthrough."""
    opts = parse_options(value or "kvm64", default_key="cputype")
    model = opts.get("cputype") or "kvm64"
    model = {"host": "host-passthrough"}.get(model, model)
    flags = []
    for f in (opts.get("flags") or "").split(";"):
        f = f.strip()
        if f[:1] in "+-" and len(f) > 1:
            flags.append((f[1:], "on" if f[0] == "+" else "off"))
    return model, tuple(flags)


def read_cpu(value: Any, unknown: list[str], assumed: list[str]) -> CpuConfig:
    """A user's VM's ``cpu`` as vmbench's CPU (its aes with it); what it cannot say said in ``unknown``."""
    if value is None or str(value).strip() == "":
        assumed.append("cpu: the VM states no cpu; Proxmox's default is kvm64")
        return CpuConfig(CpuMode.MODEL, "kvm64")
    model, flags = cpu_from_config(str(value))
    opts = parse_options(str(value), default_key="cputype")
    for opt in CPU_OTHER:
        if opt in opts:
            unknown.append(f"cpu: {opt}={opts[opt]} is not a vmbench axis")
    if model.startswith("custom-"):
        unknown.append(f"cpu: {model} is a custom model of /etc/pve/virtual-guest/cpu-models.conf; read as its name")
    aes = Feature.DEFAULT
    feats = []
    for name, state in flags:
        f = Feature.ON if state == "on" else Feature.OFF
        if name == "aes":
            aes = f
        else:
            feats.append((name, f))
    if model == "host-passthrough":
        return CpuConfig(CpuMode.HOST_PASSTHROUGH, None, aes, tuple(sorted(feats)))
    if model == "max":
        return CpuConfig(CpuMode.MAX, None, aes, tuple(sorted(feats)))
    return CpuConfig(CpuMode.MODEL, model, aes, tuple(sorted(feats)))
