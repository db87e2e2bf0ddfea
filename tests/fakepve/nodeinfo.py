"""Node facts: ``GET /nodes/{node}/status`` and the CPU models
(``/nodes/{node}/capabilities/qemu/cpu``), with this host's real kernel and CPU."""

from __future__ import annotations

import os
import platform
import shutil

from .formats import BUILTIN_MODELS, CPU_MODELS
from .handlers import VERSION, api, check_node
from .model import State

AMD = {"athlon", "phenom"}
GENERIC = {"host", "kvm32", "kvm64", "qemu32", "qemu64", "max"}
KERNEL = {"8.4": "6.8.12-11-pve", "9.1": "6.17.2-1-pve"}


def cpu_vendor(model: str) -> str:
    if model in GENERIC or model in BUILTIN_MODELS:
        return "default"
    if model in AMD or model.startswith(("Opteron", "EPYC")):
        return "AuthenticAMD"
    return "GenuineIntel"


def cpu_model_name() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


@api("GET", "/nodes/{node}/status")
def node_status(s: State, p: dict) -> dict:
    check_node(s, p)
    version, repoid = VERSION[s.version]
    cpus = os.cpu_count() or 1
    pages, page = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    avail = os.sysconf("SC_AVPHYS_PAGES") * page
    disk = shutil.disk_usage("/")
    uname = os.uname()
    return {
        "pveversion": f"pve-manager/{version}/{repoid}", "kversion": f"Linux {KERNEL[s.version]} #1 SMP PREEMPT_DYNAMIC PMX",
        "cpu": 0.01, "wait": 0, "uptime": 3600, "idle": 0, "loadavg": [f"{x:.2f}" for x in os.getloadavg()],
        "cpuinfo": {"model": cpu_model_name(), "cpus": cpus, "cores": cpus, "sockets": 1, "mhz": "2000.000",
                    "flags": "fpu sse2 aes", "hvm": "1", "user_hz": 100},
        "current-kernel": {"sysname": "Linux", "release": KERNEL[s.version], "machine": uname.machine,
                           "version": "#1 SMP PREEMPT_DYNAMIC PMX"},
        "boot-info": {"mode": "efi", "secureboot": 0},
        "memory": {"total": pages * page, "used": pages * page - avail, "free": avail, "available": avail},
        "swap": {"total": 0, "used": 0, "free": 0},
        "rootfs": {"total": disk.total, "used": disk.used, "free": disk.free, "avail": disk.free},
        "ksm": {"shared": 0},
    }


@api("GET", "/nodes/{node}/capabilities/qemu/cpu")
def cpu_models(s: State, p: dict) -> list:
    check_node(s, p)
    if p.get("arch") == "aarch64":
        return [{"name": "cortex-a57", "vendor": "ARM", "custom": 0}, {"name": "max", "vendor": "default", "custom": 0}]
    names = sorted(CPU_MODELS | set(BUILTIN_MODELS), key=str.lower)
    return [{"name": n, "vendor": cpu_vendor(n), "custom": 0} for n in names]
