"""Which accelerator can run guests here: KVM where it really works, TCG otherwise.

``/dev/kvm`` existing is not enough (nested hypervisors may expose a KVM that hangs a
standard guest).  The probe boots the template's kernel in a tiny transient KVM domain with
no root disk: a working KVM reaches the kernel's "unable to mount root" panic within
seconds and the domain stops by itself; a broken one is still running at the deadline and
is destroyed.  The answer is cached per host, QEMU, libvirt and kernel.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from pathlib import Path
from typing import Callable

from ..base import Accelerator
from ...errors import PreflightError, VmbenchError
from ...settings import Accel
from ...transport import ops
from ...transport.base import Transport
from .connection import libvirt
from .xml import probe_xml

log = logging.getLogger(__name__)
PROBE_TIMEOUT = 20.0
BOOT_MARKERS = ("Kernel panic", "Linux version", "VFS:")


def cached_answer(cache_file: Path, uri: str) -> bool | None:
    """What the last probe for ``uri`` said (True: KVM works), without probing; None if never probed."""
    try:
        data = json.loads(cache_file.read_text())
    except (OSError, ValueError):
        return None
    hits = [v for k, v in data.items() if k.startswith(uri + "|")]
    return bool(hits[-1]["kvm"]) if hits else None


def choose_accelerator(requested: Accel, probe: Callable[[], tuple[bool, str]]) -> Accelerator:
    """Pure decision: what was asked, and what the (cached) probe said."""
    if requested is Accel.TCG:
        return Accelerator("tcg", "the scenario asks for tcg")
    ok, reason = probe()
    if ok:
        return Accelerator("kvm", reason)
    if requested is Accel.KVM:
        raise PreflightError(f"the scenario asks for kvm, but KVM is not usable here: {reason}", "use accel: auto or accel: tcg")
    return Accelerator("tcg", f"KVM not usable: {reason}")


class KvmProbe:
    """The probe runs on the hypervisor host (``kernel`` and ``consoles`` are paths there,
    read through ``host``); its answer is cached on this machine."""

    def __init__(self, conn: "libvirt.virConnect", kernel: str, consoles: str, host: Transport, cache_file: Path,
                 cache_key: str, timeout: float = PROBE_TIMEOUT) -> None:
        self.conn = conn
        self.kernel = kernel
        self.consoles = consoles
        self.host = host
        self.cache_file = cache_file
        self.cache_key = cache_key
        self.timeout = timeout

    def notice(self) -> str:
        """What a user is told before the probe boots its guest (nothing boots with a cached answer)."""
        return (f"booting a tiny probe guest to see whether KVM works here (up to about {self.timeout + 5:.0f} s; "
                "once: the answer is cached, vmbench doctor --probe asks again)")

    def cached(self) -> tuple[bool, str] | None:
        try:
            data = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            return None
        hit = data.get(self.cache_key)
        return (bool(hit["kvm"]), str(hit["reason"])) if hit else None

    def __call__(self) -> tuple[bool, str]:
        hit = self.cached()
        if hit is not None:
            return hit[0], hit[1] + " (cached)"
        result = self.probe()
        self._store(result)
        return result

    def _store(self, result: tuple[bool, str]) -> None:
        try:
            data = json.loads(self.cache_file.read_text())
        except (OSError, ValueError):
            data = {}
        data[self.cache_key] = {"kvm": result[0], "reason": result[1], "at": time.strftime("%Y-%m-%dT%H:%M:%S")}
        self.cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.cache_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.cache_file)

    def probe(self) -> tuple[bool, str]:
        try:
            self.conn.getDomainCapabilities(None, "x86_64", None, "kvm", 0)
        except libvirt.libvirtError as exc:
            return False, f"libvirt offers no KVM domains ({exc.get_error_message()})"
        tag = "p" + secrets.token_hex(4)
        name = f"vmbench-{tag}-probe"
        ops.mkdir(self.host, self.consoles, 0o755)
        console = f"{self.consoles}/{name}.log"
        started = time.monotonic()
        try:
            dom = self.conn.createXML(probe_xml(name, tag, str(self.kernel), str(console)), 0)
        except libvirt.libvirtError as exc:
            return False, f"a KVM domain does not start: {exc.get_error_message()}"
        try:
            while time.monotonic() - started < self.timeout:
                if not _active(dom):
                    break
                time.sleep(0.5)
            else:
                return False, f"a KVM guest hung in early boot for {self.timeout:g}s (nested KVM that does not work?)"
            elapsed = time.monotonic() - started
            text = ops.read_text(self.host, console) or ""
            if any(m in text for m in BOOT_MARKERS):
                return True, f"a KVM guest ran its kernel to the expected panic in {elapsed:.1f}s"
            return False, "the KVM probe guest stopped without printing anything"
        finally:
            try:
                dom.destroy()
            except libvirt.libvirtError:
                pass
            try:
                ops.remove_file(self.host, console)
            except VmbenchError:
                pass


def _active(dom: "libvirt.virDomain") -> bool:
    try:
        return bool(dom.isActive())
    except libvirt.libvirtError:
        return False  # a transient domain that stopped is gone
