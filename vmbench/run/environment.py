"""The environment recorded with every run (METHOD rule 10), read through the host
transport so it describes the hypervisor host, wherever it is."""

from __future__ import annotations

import platform
import socket
from typing import Any, Mapping

from .. import __version__
from ..guest.facts import cpu_flags, cpu_model_name
from ..results.environment import SAME_HOST_KEYS
from ..transport import ops
from ..transport.base import Transport



def host_environment(host: Transport) -> dict:
    cpuinfo = ops.read_text(host, "/proc/cpuinfo") or ""
    os_release = {}
    for line in (ops.read_text(host, "/etc/os-release") or "").splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            os_release[k] = v.strip('"')
    flags = cpu_flags(cpuinfo)
    return {
        "vmbench_version": __version__,
        "python": platform.python_version(),
        "controller": socket.gethostname(),  # the machine vmbench ran on
        "host_kernel": ops.first_line(host, ["uname", "-r"]),
        "host_os": os_release.get("PRETTY_NAME"),
        "host_cpu": cpu_model_name(cpuinfo),
        "host_microcode": _microcode(cpuinfo),
        "host_aes": "aes" in flags,
        "host_fio": ops.first_line(host, ["fio", "--version"]),
        "host_qemu_binary": ops.first_line(host, ["qemu-system-x86_64", "--version"]),
        "host_cryptsetup": ops.first_line(host, ["cryptsetup", "--version"]),
        "kvm_device": ops.exists(host, "/dev/kvm"),
    }


def _microcode(cpuinfo: str) -> str | None:
    """The CPU's microcode revision as /proc/cpuinfo gives it ("0x..."), None when it does not."""
    for line in cpuinfo.splitlines():
        if line.startswith("microcode"):
            return line.split(":", 1)[1].strip() or None
    return None


def host_differences(before: Mapping[str, Any], now: Mapping[str, Any]) -> list[str]:
    """What differs between two recorded environments on the keys that identify a host
    (:data:`~vmbench.results.environment.SAME_HOST_KEYS`)."""
    return [f"{k}: {before.get(k)!r} then, {now.get(k)!r} now" for k in SAME_HOST_KEYS
            if (before.get(k) is not None or now.get(k) is not None) and before.get(k) != now.get(k)]
