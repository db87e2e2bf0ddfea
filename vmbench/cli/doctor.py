"""``vmbench doctor [SCENARIO]``: can this hypervisor host run scenarios, and with which
accelerator?  Checks the scenario's host (this machine by default): reachable over SSH
with a known key, libvirt answers, fio present, template image present or uploadable,
storage usable, KVM usable or not, leftovers."""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..drivers import make_driver
from ..settings import DriverName
from ..errors import VmbenchError
from ..images.placement import host_dir, on_host
from ..paths import StatePaths
from ..progress import NullProgress, Progress
from ..scenario.model import Hypervisor, Scenario, Storage
from ..transport import ops


@dataclass(frozen=True)
class Check:
    name: str
    status: str  # ok, warn, FAIL
    detail: str
    hint: str = ""


def _leftovers_check(driver, state: StatePaths, scenario_path: str | None) -> Check:
    from .cleanup import find_leftovers

    try:
        left, _ = find_leftovers(driver, state)
    except VmbenchError as exc:
        return Check("leftovers", "warn", exc.message)
    return Check("leftovers", "ok" if not left else "warn", f"{len(left)} vmbench resource(s) left from earlier runs",
                 "" if not left else f"vmbench cleanup{' ' + scenario_path if scenario_path else ''}")


def _storage_checks(driver, state: StatePaths, progress: Progress, scenario_path: str | None) -> list[Check]:
    """The storage a host-only scenario measures, its recorded facts, and leftovers."""
    out = []
    try:
        driver.storage.prepare(progress)
        out.append(Check("storage", "ok", f"{driver.storage.label}: {driver.storage.free_bytes() >> 30} GiB free"))
        facts = driver.storage.facts()
        scan = facts.get("zfs_scan")
        out.append(Check("zfs", "warn" if scan else "ok",
                         f"{facts.get('zfs_userland', '?')} / {facts.get('zfs_kmod', '?')}, ashift {facts.get('zpool_ashift', '?')}, "
                         f"zfs_txg_timeout {facts.get('zfs_txg_timeout_s', '?')} s" + (f"; a {scan} is running" if scan else ""),
                         "results taken during a scrub or resilver are flagged" if scan else ""))
    except VmbenchError as exc:
        out.append(Check("storage", "FAIL", exc.message, exc.hint or ""))
        return out
    out.append(_leftovers_check(driver, state, scenario_path))
    return out


def _proxmox_checks(driver, hv: Hypervisor, state: StatePaths, progress: Progress, scenario_path: str | None) -> list[Check]:
    """The Proxmox API (TLS, token), node, template, storage and accelerator, as a run's preflight checks them."""
    out = []
    try:
        accel = driver.prepare(image=None, accel=hv.accel, cpu_models=set(), cpu_modes=set(), progress=progress, vms=[])
        facts = driver.describe_host()
        out.append(Check("proxmox", "ok", f"{facts.get('pve_api')}: Proxmox VE {facts.get('pve_version', '?')}, node {facts.get('pve_node')}, "
                                          f"template {facts.get('pve_template')}, TLS {facts.get('pve_tls')}",
                         "TLS verification is off" if facts.get("tls_verify_off") else ""))
        out.append(Check("accelerator", "ok" if accel.name == "kvm" else "warn", f"{accel.name}: {accel.reason}"))
    except VmbenchError as exc:
        out.append(Check("proxmox", "FAIL", exc.message, exc.hint or ""))
        return out
    out.append(_leftovers_check(driver, state, scenario_path))
    return out


def run_checks(scenario_path: str | None = None, *, uri: str | None = None, template: str = "debian12",
               reprobe: bool = False, progress: Progress | None = None) -> list[Check]:
    progress = progress or NullProgress()
    state = StatePaths.default()
    if scenario_path:
        from ..scenario import load_scenario

        s: Scenario = load_scenario(scenario_path)
        hv, storage, template = s.hypervisor, s.storage, s.template
    else:
        hv, storage = Hypervisor(uri=uri or "qemu:///system"), Storage()
    driver = make_driver(hv, storage, state=state)
    host = driver.host
    where = hv.host_label
    out: list[Check] = []
    if not hv.remote:
        out.append(Check("root", "ok" if os.geteuid() == 0 else "warn", f"running as uid {os.geteuid()}",
                         "" if os.geteuid() == 0 else "qemu:///system, image builds and host fio on pool files need root"))
    if hv.remote:
        try:
            host.run(["true"], timeout=30)
            fp = host.describe().get("ssh_host_key", "?") if hasattr(host, "describe") else "?"
            out.append(Check("ssh", "ok", f"{hv.ssh.label if hv.ssh else where}: connected, host key {fp}"))
        except VmbenchError as exc:
            out.append(Check("ssh", "FAIL", exc.message, exc.hint or ""))
            return out  # nothing else can be checked on a host we cannot reach

    def version(name: str, argv: list[str], hint: str) -> None:
        line = ops.first_line(host, argv)
        out.append(Check(name, "ok", line) if line else Check(name, "FAIL", f"{argv[0]} not found or not working on {where}", hint))

    version("fio (host)", ["fio", "--version"], "apt-get install fio")
    if hv.driver is DriverName.NONE:  # host only: storage, no hypervisor
        out += _storage_checks(driver, state, progress, scenario_path)
        driver.close()
        return out
    if hv.driver is DriverName.PROXMOX:
        out += _proxmox_checks(driver, hv, state, progress, scenario_path)
        driver.close()
        return out
    version("qemu", ["qemu-system-x86_64", "--version"], "apt-get install qemu-system-x86")
    if hv.remote:
        version("virt-ssh-helper", ["virt-ssh-helper", "--version"], "install libvirt-daemon on the host (libvirt >= 8)")

    libvirt_ok = False
    try:
        facts = driver.describe_host()
        out.append(Check("libvirt", "ok", f"{hv.uri}: libvirt {facts['libvirt_version']}, QEMU {facts['qemu_version']}"))
        libvirt_ok = True
    except VmbenchError as exc:
        out.append(Check("libvirt", "FAIL", exc.message, exc.hint or ""))

    from ..images import current_image

    image = None
    try:
        image = current_image(template)
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
                             f"not there yet; the first run uploads {size >> 20} MiB to {dest} ({free >> 30} GiB free)",
                             "" if ok else f"free space on {where} under {driver.paths.root}"))

    kvm_dev = ops.exists(host, "/dev/kvm")
    out.append(Check("/dev/kvm", "ok" if kvm_dev else "warn", "present" if kvm_dev else "absent: guests will run under TCG (slow)"))
    if libvirt_ok:
        try:
            driver.storage.prepare(progress)
            out.append(Check("storage", "ok", f"{driver.storage.label}: {driver.storage.free_bytes() >> 30} GiB free"))
        except VmbenchError as exc:
            out.append(Check("storage", "FAIL", exc.message, exc.hint or ""))
        if image is not None and image_there:
            from ..images.placement import place_image

            driver.image = place_image(image, host, driver.paths, progress)
            if reprobe:
                driver.forget_probe()
            probe = driver.kvm_probe()
            if probe.cached() is None:
                progress.step("probing KVM with a tiny guest (bounded, about 20 s at most)")
            ok, reason = probe()
            out.append(Check("KVM usable", "ok" if ok else "warn", reason,
                             "" if ok else "guests will run under TCG: correct but slow; results record the accelerator"))
        elif image is not None:
            cached = driver.cached_accelerator()
            out.append(Check("KVM usable", "warn", f"not probed yet on {where}" if cached is None else f"last probe: {cached}",
                             "the first run probes it after uploading the template"))
        out.append(_leftovers_check(driver, state, scenario_path))
    try:
        res = host.run(["cryptsetup", "benchmark", "--cipher", "aes-xts-plain64", "--key-size", "256"], timeout=60, check=False)
        ok, why = res.returncode == 0, " ".join((res.stderr or res.stdout).split())[:120]
    except VmbenchError as exc:
        ok, why = False, exc.message
    out.append(Check("host crypto API", "ok" if ok else "warn",
                     "cryptsetup benchmark works" if ok else "cryptsetup benchmark unavailable: " + why,
                     "" if ok else "host crypto ceilings will be reported as unavailable (kernel lacks algif_skcipher, or cryptsetup missing)"))
    driver.close()
    return out
