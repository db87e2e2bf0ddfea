"""``vmbench doctor [SCENARIO]``: can this hypervisor host run scenarios, and with which
accelerator?  Checks the scenario's host (this machine by default; each host of a run across several): reachable over SSH
with a known key, fio present, then the driver's own checks (libvirt: QEMU and libvirt
answer, template image present or uploadable, storage usable, KVM usable or not; Proxmox:
API, node, template, storage, accelerator; host only: the storage and ZFS), leftovers, and
the host's crypto API."""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from ..drivers import make_driver
from ..drivers.base import Check, HypervisorDriver, version_check
from ..errors import VmbenchError
from ..paths import StatePaths
from ..progress import NullProgress, Progress
from ..run.fleet import host_storage
from ..scenario.backend import Storage
from ..scenario.model import Hypervisor
from ..scenario import load_scenario
from ..scenario.spec import Scenario
from .cleanup import find_leftovers
from .common import ConsoleProgress, on_hosts
from .fit import fitted, say

__all__ = ["Check", "cmd_doctor", "run_checks"]


def _leftovers_check(driver: HypervisorDriver, state: StatePaths, scenario_path: str | None) -> Check:
    try:
        left, _ = find_leftovers(driver, state)
    except VmbenchError as exc:
        return Check("leftovers", "warn", exc.message)
    return Check("leftovers", "ok" if not left else "warn", f"{len(left)} vmbench resource(s) left from earlier runs",
                 "" if not left else f"vmbench cleanup{' ' + scenario_path if scenario_path else ''}")


def _crypto_check(driver: HypervisorDriver) -> Check:
    try:
        res = driver.host.run(["cryptsetup", "benchmark", "--cipher", "aes-xts-plain64", "--key-size", "256"], timeout=60, check=False)
        ok, why = res.returncode == 0, " ".join((res.stderr or res.stdout).split())[:400]  # the doctor's table wraps it
    except VmbenchError as exc:
        ok, why = False, exc.message
    return Check("host crypto API", "ok" if ok else "warn",
                 "cryptsetup benchmark works" if ok else "cryptsetup benchmark unavailable: " + why,
                 "" if ok else "host crypto ceilings will be reported as unavailable (kernel lacks algif_skcipher, or cryptsetup missing)")


def run_checks(scenario_path: str | None = None, *, uri: str | None = None, template: str = "debian12",
               reprobe: bool = False, progress: Progress | None = None) -> list[Check]:
    """The host checks (root, SSH, fio), the driver's own (:meth:`HypervisorDriver.doctor_checks`),
    leftovers when the hypervisor answered, and the host's crypto API."""
    progress = progress or NullProgress()
    state = StatePaths.default()
    if scenario_path:
        s: Scenario = load_scenario(scenario_path)
        try:
            s = on_hosts(s, progress)  # nodes: all: the cluster's online nodes, each checked
        except VmbenchError as exc:
            return [Check("cluster nodes (nodes: all)", "FAIL", exc.message, exc.hint or "")]
        hv, storage, template = s.hypervisor, s.storage, s.template
    else:
        hv, storage = Hypervisor(uri=uri or "qemu:///system"), Storage()
    if len(hv.members) == 1:
        return _host_checks(hv, storage, state, template=template, reprobe=reprobe, progress=progress, scenario_path=scenario_path)
    out: list[Check] = []
    for member in hv.members:  # a run across several hosts: each host's checks, named by its host
        checks = _host_checks(member, host_storage(member, storage), state, template=template, reprobe=reprobe,
                              progress=progress, scenario_path=scenario_path)
        out += [replace(c, name=f"{member.host_label}: {c.name}") for c in checks]
    return out


def _host_checks(hv: Hypervisor, storage: Storage, state: StatePaths, *, template: str, reprobe: bool, progress: Progress,
                 scenario_path: str | None) -> list[Check]:
    """One host's checks (:func:`run_checks`)."""
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
            fp = host.describe().get("ssh_host_key", "?")
            out.append(Check("ssh", "ok", f"{hv.ssh.label if hv.ssh else where}: connected, host key {fp}"))
        except VmbenchError as exc:
            out.append(Check("ssh", "FAIL", exc.message, exc.hint or ""))
            return out  # nothing else can be checked on a host we cannot reach

    out.append(version_check(host, where, "fio (host)", ["fio", "--version"], "apt-get install fio"))
    checks = driver.doctor_checks(template=template, reprobe=reprobe, progress=progress)
    out += checks.checks
    if checks.answered:
        out.append(_leftovers_check(driver, state, scenario_path))
    out.append(_crypto_check(driver))
    driver.close()
    return out


def cmd_doctor(args: argparse.Namespace) -> int:
    checks = run_checks(args.scenario, uri=args.uri, template=args.template, reprobe=args.probe, progress=ConsoleProgress())
    print(fitted([[c.name, c.status, c.detail] for c in checks], ["check", "status", "detail"], keep=["detail"]))
    hints = [c for c in checks if c.hint and c.status != "ok"]
    for c in hints:
        say(f"hint ({c.name}): {c.hint}")
    return 3 if any(c.status == "FAIL" for c in checks) else 0

