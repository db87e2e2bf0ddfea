"""``vmbench doctor``'s checks of a libvirt host: QEMU and libvirt answer, the template image
is built (and on a remote host, or room to upload it), /dev/kvm, the storage (vmbench's own
dir pool looked at, never created: the run creates it), and whether KVM works (a tiny probe
guest, cached)."""

from __future__ import annotations

from typing import Protocol

from ...errors import VmbenchError
from ...images import Image, current_image
from ...images.placement import HostImage, host_dir, on_host, place_image
from ...paths import HostPaths, StatePaths
from ...progress import Progress
from ...scenario.model import Hypervisor
from ...storage import VolumeStorage
from ...transport import ops
from ...transport.base import HostTransport
from ..base import Check, HostChecks, version_check
from ...units import human_size
from .storage import DirPoolStorage
from .accel import KvmProbe


class CheckedHost(Protocol):
    """What the checks need of the libvirt driver (which satisfies it)."""

    hv: Hypervisor
    host: HostTransport
    state: StatePaths
    paths: HostPaths
    storage: VolumeStorage
    image: HostImage | None

    def describe_host(self) -> dict: ...

    def forget_probe(self) -> None: ...

    def kvm_probe(self) -> KvmProbe: ...

    def cached_accelerator(self) -> str | None: ...


def libvirt_checks(driver: CheckedHost, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
    hv, host = driver.hv, driver.host
    where = hv.host_label
    out = [version_check(host, where, "qemu", ["qemu-system-x86_64", "--version"], "apt-get install qemu-system-x86")]
    if hv.remote:
        out.append(version_check(host, where, "virt-ssh-helper", ["virt-ssh-helper", "--version"],
                                 "install libvirt-daemon on the host (libvirt >= 8)"))
    libvirt_ok = False
    try:
        facts = driver.describe_host()
        out.append(Check("libvirt", "ok", f"{hv.uri}: libvirt {facts['libvirt_version']}, QEMU {facts['qemu_version']}"))
        libvirt_ok = True
    except VmbenchError as exc:
        out.append(Check("libvirt", "FAIL", exc.message, exc.hint or ""))

    image: Image | None = None
    try:
        image = current_image(template, state=driver.state)
        if image:
            out.append(Check("template image", "ok", f"{template} {image.hash[:12]}, kernel {image.manifest.get('kernel_version', '?')}"))
        else:
            out.append(Check("template image", "FAIL", f"{template} is not built for its current recipe", f"vmbench images build {template}"))
    except VmbenchError as exc:
        out.append(Check("template image", "FAIL", exc.message, exc.hint or ""))
    image_there = image is not None and (not hv.remote or on_host(image, host, driver.paths))
    if image is not None and hv.remote:
        dest = host_dir(image, driver.paths)
        if image_there:
            out.append(Check("image on host", "ok", f"{dest} (hash matches)"))
        else:
            size = sum(p.stat().st_size for p in (image.root, image.kernel, image.initrd))
            parent = driver.paths.root if ops.exists(host, driver.paths.root) else "/"
            free = ops.free_bytes(host, parent)
            ok = free > size * 1.2
            out.append(Check("image on host", "ok" if ok else "FAIL",
                             f"not there yet; the first run uploads {size >> 20} MiB to {dest}"
                             + ("" if ok else f", with {human_size(free)} free there"),
                             "" if ok else f"free space on {where} under {driver.paths.root}"))

    kvm_dev = ops.exists(host, "/dev/kvm")
    out.append(Check("/dev/kvm", "ok" if kvm_dev else "warn", "present" if kvm_dev else "absent: guests will run under TCG (slow)"))
    if libvirt_ok:
        try:
            if isinstance(driver.storage, DirPoolStorage):  # looked at, not created: the run does that
                out.append(Check("storage", *driver.storage.survey()))
            else:
                driver.storage.prepare(progress)
                out.append(Check("storage", "ok", f"{driver.storage.label}: {human_size(driver.storage.free_bytes())} free"))
        except VmbenchError as exc:
            out.append(Check("storage", "FAIL", exc.message, exc.hint or ""))
        if image is not None and image_there:
            driver.image = place_image(image, host, driver.paths, progress)
            if reprobe:
                driver.forget_probe()
            probe = driver.kvm_probe()
            if probe.cached() is None:
                progress.step(probe.notice())
            ok, reason = probe()
            out.append(Check("KVM usable", "ok" if ok else "warn", reason,
                             "" if ok else "guests will run under TCG: correct but slow; results record the accelerator"))
        elif image is not None:
            cached = driver.cached_accelerator()
            out.append(Check("KVM usable", "warn", f"not probed yet on {where}" if cached is None else f"last probe: {cached}",
                             "the first run probes it after uploading the template"))
    return HostChecks(tuple(out), answered=libvirt_ok)
