"""The host's environment, recorded with every run (METHOD rule 10)."""

from __future__ import annotations

import os
import platform

from . import __version__
from .errors import CommandError
from .guest.facts import cpu_flags, cpu_model_name
from .transport.base import Transport


def host_environment(host: Transport) -> dict:
    def out(argv: list[str]) -> str | None:
        try:
            return host.run(argv, timeout=30).stdout.strip().splitlines()[0]
        except (CommandError, IndexError):
            return None

    try:
        cpuinfo = host.read_file("/proc/cpuinfo").decode(errors="replace")
    except OSError:
        cpuinfo = ""
    os_release = {}
    try:
        for line in host.read_file("/etc/os-release").decode().splitlines():
            if "=" in line:
                k, v = line.split("=", 1)
                os_release[k] = v.strip('"')
    except OSError:
        pass
    flags = cpu_flags(cpuinfo)
    return {
        "vmbench_version": __version__,
        "python": platform.python_version(),
        "host_kernel": os.uname().release,
        "host_os": os_release.get("PRETTY_NAME"),
        "host_cpu": cpu_model_name(cpuinfo),
        "host_aes": "aes" in flags,
        "host_fio": out(["fio", "--version"]),
        "host_qemu_binary": out(["qemu-system-x86_64", "--version"]),
        "host_cryptsetup": out(["cryptsetup", "--version"]),
        "kvm_device": os.path.exists("/dev/kvm"),
    }
