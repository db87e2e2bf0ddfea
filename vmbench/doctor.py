"""``vmbench doctor``: can this machine run scenarios, and with which accelerator?"""

from __future__ import annotations

import os
from dataclasses import dataclass

from .errors import CommandError, VmbenchError
from .paths import StatePaths
from .progress import NullProgress, Progress
from .transport.local import LocalTransport


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok, warn, FAIL
    detail: str
    hint: str = ""


def run_checks(uri: str, *, template: str = "debian12", reprobe: bool = False, progress: Progress | None = None) -> list[Check]:
    progress = progress or NullProgress()
    host = LocalTransport()
    state = StatePaths.default()
    out: list[Check] = []

    out.append(Check("root", "ok" if os.geteuid() == 0 else "warn", f"running as uid {os.geteuid()}",
                     "" if os.geteuid() == 0 else "qemu:///system, image builds and host fio on pool files need root"))

    def version(name: str, argv: list[str], hint: str) -> None:
        try:
            out.append(Check(name, "ok", host.run(argv, timeout=30).stdout.strip().splitlines()[0]))
        except (CommandError, IndexError):
            out.append(Check(name, "FAIL", f"{argv[0]} not found or not working", hint))

    version("fio (host)", ["fio", "--version"], "apt-get install fio")
    version("qemu", ["qemu-system-x86_64", "--version"], "apt-get install qemu-system-x86")
    virtlogd = os.path.exists("/run/libvirt/virtlogd-sock")
    out.append(Check("virtlogd", "ok" if virtlogd else "warn", "socket present" if virtlogd else "no /run/libvirt/virtlogd-sock",
                     "" if virtlogd else "start it: virtlogd -d (scripts/ensure-libvirtd does it)"))

    from .drivers.libvirt.driver import VMBENCH_POOL, LibvirtDriver

    driver = LibvirtDriver(uri, state=state, host=host)
    try:
        facts = driver.describe_host()
        out.append(Check("libvirt", "ok", f"{uri}: libvirt {facts['libvirt_version']}, QEMU {facts['qemu_version']}"))
    except VmbenchError as exc:
        out.append(Check("libvirt", "FAIL", exc.message, exc.hint or ""))
        driver = None

    from .images import current_image

    image = None
    try:
        image = current_image(template)
        if image:
            out.append(Check("template image", "ok", f"{template} {image.hash[:12]}, kernel {image.manifest.get('kernel_version', '?')}"))
        else:
            out.append(Check("template image", "FAIL", f"{template} is not built for its current recipe", f"vmbench images build {template}"))
    except VmbenchError as exc:
        out.append(Check("template image", "FAIL", exc.message, exc.hint or ""))

    kvm_dev = os.path.exists("/dev/kvm")
    out.append(Check("/dev/kvm", "ok" if kvm_dev else "warn", "present" if kvm_dev else "absent: guests will run under TCG (slow)"))
    if driver is not None:
        try:
            pool = driver.conn.storagePoolLookupByName(VMBENCH_POOL)
            out.append(Check("storage pool", "ok", f"{VMBENCH_POOL}: {'active' if pool.isActive() else 'inactive'}"))
        except Exception:  # noqa: BLE001 - libvirt raises its own error type
            out.append(Check("storage pool", "ok", f"{VMBENCH_POOL}: not defined yet; created at {state.pool} on first run"))
        if image is not None:
            driver.image = image
            probe = driver.kvm_probe()
            if reprobe:
                try:
                    (state.cache / "accelerator.json").unlink()
                except OSError:
                    pass
            if probe.cached() is None:
                progress.step("probing KVM with a tiny guest (bounded, about 20 s at most)")
            ok, reason = probe()
            out.append(Check("KVM usable", "ok" if ok else "warn", reason,
                             "" if ok else "guests will run under TCG: correct but slow; results record the accelerator"))
        from .cleanup import find_leftovers

        try:
            left, _ = find_leftovers(driver, state)
            out.append(Check("leftovers", "ok" if not left else "warn", f"{len(left)} vmbench resource(s) left from earlier runs",
                             "" if not left else "vmbench cleanup"))
        except VmbenchError as exc:
            out.append(Check("leftovers", "warn", exc.message))
    try:
        res = host.run(["cryptsetup", "benchmark", "--cipher", "aes-xts-plain64", "--key-size", "256"], timeout=60, check=False)
        ok = res.returncode == 0
        out.append(Check("host crypto API", "ok" if ok else "warn",
                         "cryptsetup benchmark works" if ok else "cryptsetup benchmark unavailable: " + " ".join((res.stderr or res.stdout).split())[:120],
                         "" if ok else "host crypto ceilings will be reported as unavailable (kernel lacks algif_skcipher)"))
    except CommandError:
        out.append(Check("host crypto API", "warn", "cryptsetup not installed", "apt-get install cryptsetup-bin"))
    return out
