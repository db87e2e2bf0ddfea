"""The Proxmox VE driver: linked clones of a template VM on a PVE node, through the PVE API;
host fio, host facts and evidence over SSH; guest commands through the API's agent endpoints.

Lifecycle (NOTES.md section 1), every task waited on by its UPID with ``exitstatus`` checked:
``prepare`` checks the API, the node, the template (a template, with ``agent: 1``), the
storage and the accelerator; ``create_vm`` takes a free VMID, makes a linked clone, sets
tags/description/CPU/memory at once (a clone copies the template's tags), allocates the
scratch disk on the scenario's storage (or a temporary zfspool entry per volblocksize) and
reads its volume and host path back; ``boot`` starts it and pings the agent until it
answers; ``remove_vm`` stops, destroys with purge and destroy-unreferenced-disks, checks no
disk of the VMID is left, then deletes a temporary storage entry nobody uses any more.
Everything it creates is named ``vmbench-<tag>-...`` and VMs are tagged ``vmbench``;
:meth:`ProxmoxDriver.leftovers` never lists a VM without that tag.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from ... import __version__
from ...errors import GuestError, HypervisorError, PreflightError, VmbenchError
from ...progress import NullProgress, Progress
from ...scenario.model import VmConfig
from ...settings import Accel, CpuMode, ImageFormat
from ...transport import ops
from .agent import PveAgentTransport
from ..base import Applied, Check, HostChecks, VmRequest, VmResources
from .cluster import TEMPLATE_HINT
from .config import FILE_STORAGES, config_text, description, disk_option, free_disk_key, parse_disk, storage_of, tags, vm_options
from .errors import PveAnswerLost, PveApiError, PveLockedError
from .evidence import applied_from_pve
from .preflight import Preflight
from .rbd import host_target as rbd_host_target
from .node import VmRecord
from .removal import Removal
from .vmids import vmid_for_clone
from ...guest.needs import GuestNeeds, check_guest
from .template import PushResult, TemplateIdentity, TemplatePush, read_identity, template_check_line
from ..base import Accelerator

if TYPE_CHECKING:
    from ...images import Image

log = logging.getLogger(__name__)

BOOT_TIMEOUT = {"kvm": 120.0, "tcg": 300.0}
CLONE_TIMEOUT = {"linked": 600.0, "full": 3600.0}
TASK_TIMEOUT = 300.0
CLONE_ATTEMPTS = 5
QMP_PERL = ('my $v = shift; print to_json({kvm => mon_cmd($v, "query-kvm"), block => mon_cmd($v, "query-block")}, '
            '{canonical => 1})')


def vm_name(run_tag: str, seq: int) -> str:
    return f"vmbench-{run_tag}-{seq}"


def scratch_serial(run_tag: str, seq: int) -> str:
    """At most 20 characters (virtio-blk and ATA serial limits); as the libvirt driver's."""
    return f"VMB{run_tag[1:]}S{seq:03d}"


class PveGuest:
    """A running PVE VM: its agent transport and what PVE and QEMU say it runs with."""

    def __init__(self, driver: "ProxmoxDriver", rec: VmRecord, resources: VmResources, boot_seconds: float) -> None:
        assert rec.vmid is not None
        self.driver = driver
        self.rec = rec
        self.name = resources.name
        self.resources = resources
        self.boot_seconds = boot_seconds
        self.transport = PveAgentTransport(resources.name, driver.api(), rec.node, rec.vmid)

    def applied(self) -> Applied:
        """The config as stored, the QEMU command line (/proc/<pid>/cmdline over SSH, pid from
        status/current) and, where PVE's perl client answers over SSH, QMP query-kvm/query-block."""
        d, rec = self.driver, self.rec
        base = f"/nodes/{rec.node}/qemu/{rec.vmid}"
        config = d.api().get(f"{base}/config") or {}
        status = d.api().get(f"{base}/status/current") or {}
        cmdline = d.qemu_cmdline(status.get("pid"))
        extra: dict[str, Any] = {"pve_status": {k: status.get(k) for k in ("status", "qmpstatus", "pid", "running-qemu",
                                                                            "running-machine", "lock")}}
        qmp = d.qmp_readings(rec.vmid or 0)
        extra.update(qmp)
        applied = applied_from_pve(config, rec.disk_key or "", cmdline, self.resources.scratch_serial,
                                   self.resources.scratch_path, extra)
        kvm = (qmp.get("qmp") or {}).get("kvm") or {}
        if "enabled" in kvm:  # what QEMU itself reports beats what its command line asks
            applied = replace(applied, accelerator="kvm" if kvm["enabled"] else "tcg")
        pid = status.get("pid")
        if pid is not None and str(pid).isdigit():
            applied = replace(applied, qemu_pid=int(pid))
        return applied

    @contextlib.contextmanager
    def limits_lifted(self) -> Iterator[bool]:
        """On Proxmox the disk's limits stay on (a precondition's deadline follows them)."""
        yield False


class ProxmoxDriver(Preflight, Removal):
    """The :class:`~vmbench.drivers.base.HypervisorDriver` of a Proxmox VE node (its state and
    connection: :class:`~.node.PveNode`)."""

    name = "proxmox"
    #: the node holds its own template VM: the runner builds and uploads no image
    needs_image = False

    # ---- host facts ---------------------------------------------------------------------------

    def describe_host(self) -> dict:
        cfg = self.cfg
        out: dict = {
            "driver": self.name, "pve_api": cfg.url, "pve_node": self.node, "pve_token_id": cfg.token_id,
            "pve_template": self.template_vmid or cfg.template, "pve_template_node": self.template_node, "pve_tls": cfg.tls_mode,
            "tls_verify_off": not cfg.tls_verify and not cfg.tls_fingerprint and not cfg.tls_ca_file,
            "pve_clone": cfg.clone, "hostname": ops.first_line(self.host, ["hostname"]), "host_state_dir": self.paths.root,
        }
        try:
            version = self.api().get("/version") or {}
            out.update(pve_version=version.get("version"), pve_release=version.get("release"), pve_repoid=version.get("repoid"))
            status = self.api().get(f"/nodes/{self.node}/status") or {}
            kernel = status.get("current-kernel") or {}
            out.update(pve_node_kernel=kernel.get("release") or status.get("kversion"), pve_node_pveversion=status.get("pveversion"),
                       host_cpu_model=(status.get("cpuinfo") or {}).get("model"),
                       host_memory_mib=int((status.get("memory") or {}).get("total") or 0) >> 20 or None)
        except PveApiError as exc:
            out["pve_api_error"] = exc.message
        pveversion = self._text(["pveversion", "-v"])
        out["pveversion"] = pveversion
        m = re.search(r"^pve-qemu-kvm:\s*(\S+)", pveversion or "", re.M)
        out["qemu_version"] = m.group(1) if m else None
        out.update(self.host.describe())
        out.update(self.storage.facts())
        if self.zfs is None and out.get("pve_storage_type") == "zfspool":
            out["zfs_version"] = self._text(["zfs", "version"])
        return out

    def doctor_checks(self, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
        """The Proxmox API (TLS, token), node, template, storage and accelerator, as a run's
        preflight checks them (``template`` is the scenario's hypervisor.template, already set)."""
        self.refuse_missing_rights = False  # listed on a line of their own, every one
        try:
            accel = self.prepare(accel=self.hv.accel, cpu_models=set(), cpu_modes=set(), progress=progress)
            facts = self.describe_host()
        except VmbenchError as exc:
            return HostChecks((Check("proxmox", "FAIL", exc.message, exc.hint or ""), *self._rights_lines(),
                               *self.push_rights_lines()), answered=False)
        finally:
            self.refuse_missing_rights = True
        status, detail, hint = template_check_line(self.template_config, self.template_vmid, template)
        return HostChecks((
            Check("proxmox", "ok", f"{facts.get('pve_api')}: Proxmox VE {facts.get('pve_version', '?')}, node {facts.get('pve_node')}, "
                                   f"template {facts.get('pve_template')}, TLS {facts.get('pve_tls')}",
                  "TLS verification is off" if facts.get("tls_verify_off") else ""),
            *self._rights_lines(),
            *self.push_rights_lines(),
            Check("template", status, detail, hint),
            Check("accelerator", "ok" if accel.name == "kvm" else "warn", f"{accel.name}: {accel.reason}"),
        ), answered=True)

    def _rights_lines(self) -> tuple[Check, ...]:
        """doctor's line about the token's rights for a run: as preflight read them, or (when
        preflight stopped before) read now, as far as the API answers."""
        if self.rights is None and self.pve_version is not None:
            try:
                self.check_rights(self.run_steps(()))
            except VmbenchError:
                return ()
        return (self.rights.check(),) if self.rights is not None else ()

    def push_rights_lines(self) -> tuple[Check, ...]:
        """doctor's line about what ``vmbench images push`` would need (a warning: a run of a
        template that exists does not need it); none for a template vmbench did not make
        (push leaves it alone) or when the API did not answer."""
        if self.pve_version is None or (self.template_vmid is not None and read_identity(self.template_config) is None):
            return ()
        try:
            line = TemplatePush(self, NullProgress()).rights_line()
        except VmbenchError as exc:
            return (Check("token rights (images push)", "warn", exc.message, exc.hint or ""),)
        return (line,) if line is not None else ()

    # ---- the template -------------------------------------------------------------------------

    def prepare(self, *, image: "Image | None" = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: GuestNeeds | None = None) -> Accelerator:
        """:meth:`Preflight.prepare`; ``guest_needs`` (the scenario's, from
        :func:`~vmbench.guest.needs.guest_needs`; the runner gives it) is what a template vmbench did
        not make is checked for at the first boot (no check when not given)."""
        self.guest_needs, self.guest_checked = guest_needs, False
        return super().prepare(image=image, accel=accel, cpu_models=cpu_models, cpu_modes=cpu_modes, progress=progress, vms=vms)

    def push_template(self, identity: TemplateIdentity, disk: Path, *, replace: bool = False,
                      import_storage: str | None = None, progress: Progress | None = None) -> PushResult:
        """``vmbench images push``: vmbench's template on the scenario's node and storage (:mod:`.template`)."""
        progress = progress or NullProgress()
        self.progress = progress
        return TemplatePush(self, progress).run(identity, disk, replace=replace, import_storage=import_storage)

    def _check_foreign_template(self, guest: "PveGuest", res: VmResources) -> None:
        """The first boot of a template vmbench did not make: the scenario's tools and fio's
        version in the guest, or the clone is removed and the run stops naming what is missing."""
        if self.guest_needs is None or self.guest_checked or read_identity(self.template_config) is not None:
            return
        missing = check_guest(guest.transport, self.guest_needs)
        if not missing:
            self.guest_checked = True
            return
        try:
            self.remove_vm(res)
        except VmbenchError as exc:
            log.warning("removing %s after the template check: %s", res.name, exc.message)
        raise PreflightError(f"template {self.template_vmid} lacks what this scenario runs in the guest: " + "; ".join(missing),
                             "install them in the template (apt-get install the packages named), or let vmbench make its "
                             "own: vmbench images push SCENARIO (with hypervisor.template set to a new name)")

    def _text(self, argv: list[str]) -> str | None:
        try:
            got = self.host.run(argv, timeout=60, check=False)
        except VmbenchError as exc:
            log.warning("%s on %s: %s", argv[0], self.host.name, exc.message)
            return None
        return got.stdout if got.returncode == 0 else None

    # ---- VM lifecycle -------------------------------------------------------------------------

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        return VmResources(name=vm_name(run_tag, request.seq), scratch_path="",
                           scratch_serial=scratch_serial(run_tag, request.seq), host_target=None)

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Clone, configure, allocate the scratch disk; each step recorded as it happens."""
        if self.template_vmid is None or self.accelerator is None:
            raise HypervisorError("prepare() first")
        vm = request.vm
        rec = self.vms.setdefault(res.name, VmRecord(res.name, self.node, run_tag))
        vmid = self._clone(rec, request)
        base = f"/nodes/{self.node}/qemu/{vmid}"
        config = self.api().get(f"{base}/config") or {}
        options = {"tags": tags(run_tag), "protection": False, "onboot": False,
                   "description": description(run_tag, request.seq, request.cells, time.strftime("%Y-%m-%dT%H:%M:%S%z"), __version__),
                   **vm_options(vm, kvm=self.accelerator.name == "kvm", agent=str(config.get("agent") or "1"))}
        self._config(rec, options, f"configuring {res.name} (VMID {vmid})")
        key = free_disk_key(vm.bus, config)
        sid, kind = self.cfg.storage, self.storage.type
        if self.entries is not None and vm.zfs.volblocksize:
            sid, kind = self.entries.ensure(run_tag, vm.zfs.volblocksize, res.name), "zfspool"
            rec.entry = sid
        elif self.rbd is not None and vm.krbd is not None and vm.krbd != self.rbd.krbd:
            sid, kind = self.rbd.ensure(run_tag, vm.krbd, res.name), "rbd"  # the krbd axis: a temporary rbd entry
            rec.entry = sid
        rec.storages.add(sid)
        self._config(rec, {key: disk_option(vm, sid, kind, request.scratch_size, res.scratch_serial)},
                     f"allocating the scratch disk of {res.name} on {sid}")
        config = self.api().get(f"{base}/config") or {}
        volid, _ = parse_disk(str(config.get(key, "")))
        if not volid or storage_of(volid) != sid:
            raise HypervisorError(f"{res.name}: the config has no new disk {key} on {sid} after allocating it (it says {key}: "
                                  f"{config.get(key, 'nothing')})")
        rec.disk_key, rec.scratch_volid = key, volid
        res.volumes.append(volid)
        res.native_config = config_text(config)
        path = self._volume_path(sid, volid)
        res.scratch_path = path
        res.scratch_kind = "block" if path.startswith("/dev/") else "rbd" if path.startswith("rbd:") else "file"
        res.storage["pve"] = {"vmid": vmid, "node": self.node, "template": self.template_vmid, "template_node": self.template_node,
                              "disk": key,
                              "volume": volid, "storage": sid, "storage_type": kind, "task_warnings": rec.warnings}
        if rec.entry and self.entries is not None:
            zvol = f"{self.entries.dataset}/{volid.partition(':')[2]}"
            readback, problems = self.entries.setup_zvol(zvol, vm.zfs, run_tag)
            res.storage.setdefault("volumes", {})[volid] = {"zfs_name": zvol, "readback": readback}
            res.storage_problems += [p for p in problems if p not in res.storage_problems]
        if vm.format is ImageFormat.RAW and path.startswith("/"):
            res.host_target = path  # host fio runs on this very device or file (krbd: the mapped image), before boot
        elif path.startswith("rbd:") and self.ceph is not None:  # librbd: fio's rbd engine, as QEMU's client
            res.host_target = rbd_host_target(self.ceph, volid, vm.cache)
        return res

    def _clone(self, rec: VmRecord, request: VmRequest) -> int:
        """A free VMID and a clone of the template, retried when another client takes the VMID."""
        tvmid, tnode = self.template_vmid, self.template_node or self.node
        full = self.cfg.clone == "full"
        what = f"cloning template {tvmid} into {rec.name}" + (f" on node {self.node}" if tnode != self.node else "")
        for attempt in range(1, CLONE_ATTEMPTS + 1):
            vmid = 0
            try:
                with vmid_for_clone(self.api(), self.cfg.url) as vmid:
                    upid = self.api().post(f"/nodes/{tnode}/qemu/{tvmid}/clone", {
                        "newid": vmid, "name": rec.name, "full": full, "target": self.node if tnode != self.node else None,
                        "description": f"vmbench-run: {rec.run_tag} (being configured)"})
            except PveAnswerLost as exc:  # did the clone happen?  PVE makes the VM (locked) before it answers
                if not self._cloned_anyway(rec, vmid, f"{what} (VMID {vmid})", exc):
                    log.warning("%s: %s; VM %d does not exist: cloning again", what, exc.message, vmid)
                    continue
                return vmid
            except PveApiError as exc:
                taken = "already exists" in " ".join([exc.reason, *exc.errors.values()])
                if taken and attempt < CLONE_ATTEMPTS:
                    log.info("VMID %d was taken meanwhile (%s); trying the next one", vmid, exc.reason)
                    continue
                if isinstance(exc, PveLockedError) and attempt < CLONE_ATTEMPTS:  # the storage's cluster lock timed out
                    log.info("cloning: %s; trying again", exc.reason)
                    self.sleep(2.0 * attempt)
                    continue
                hint = exc.hint
                if "Linked clone feature is not supported" in exc.reason:
                    hint = "the template's storage cannot make linked clones; set hypervisor.clone: full, or move its disks"
                elif "uses local storage" in exc.reason or "non-shared storage" in exc.reason:
                    hint = TEMPLATE_HINT
                raise HypervisorError(f"{what} failed: {exc.message}", hint) from None
            rec.vmid = vmid  # it exists from now on (locked until the clone task ends)
            self.wait_task(upid, CLONE_TIMEOUT[self.cfg.clone], f"{what} (VMID {vmid})", rec)
            return vmid
        raise HypervisorError(f"{what}: no free VMID after {CLONE_ATTEMPTS} attempts")  # pragma: no cover

    def _cloned_anyway(self, rec: VmRecord, vmid: int, what: str, lost: PveApiError) -> bool:
        """Did a clone whose answer was lost happen?  No VM ``vmid``: no.  Else its clone is
        waited for (its lock) and it is ours if it got our name (else it is left alone)."""
        try:
            self.api().get(f"/nodes/{rec.node}/qemu/{vmid}/status/current")
        except PveApiError as exc:
            if exc.gone:
                return False
            raise
        self.progress.warn(f"{what}: the answer was lost ({getattr(lost, 'short', lost.reason)}), but VM {vmid} exists: "
                           "waiting for its clone")
        rec.vmid = vmid
        self._wait_unlocked(rec, CLONE_TIMEOUT[self.cfg.clone], what)
        name = (self.api().get(f"/nodes/{rec.node}/qemu/{vmid}/config") or {}).get("name")
        if name != rec.name:
            rec.vmid = None
            raise HypervisorError(f"{what}: the answer was lost and VM {vmid} is {name or 'unnamed'}, not {rec.name}; left alone")
        return True

    def _wait_unlocked(self, rec: VmRecord, timeout: float, what: str) -> None:
        """Wait (bounded) until the VM's lock is gone: its task (whose id was lost) ended."""
        started = self.clock()
        while (self.api().get(f"/nodes/{rec.node}/qemu/{rec.vmid}/status/current") or {}).get("lock"):
            if self.clock() - started > timeout:
                raise HypervisorError(f"{what}: the VM is still locked after {timeout:g}s",
                                      "its task may still run on the node (Tasks in the GUI)")
            self.sleep(2.0)

    def _config(self, rec: VmRecord, params: dict, what: str) -> None:
        """POST .../config (a task), retried briefly while the VM is still locked."""
        deadline = self.clock() + 30
        while True:
            try:
                upid = self.api().post(f"/nodes/{rec.node}/qemu/{rec.vmid}/config", params)
                break
            except PveLockedError:
                if self.clock() > deadline:
                    raise
                self.sleep(1.0)
        self.wait_task(upid, TASK_TIMEOUT, what, rec)

    def _volume_path(self, sid: str, volid: str) -> str:
        info = self.api().get(f"/nodes/{self.node}/storage/{sid}/content/{volid}") or {}
        path = str(info.get("path") or "")
        if not path:
            raise HypervisorError(f"Proxmox gives no path for volume {volid}")
        return path

    def create_host_reference(self, run_tag: str, request: VmRequest, res: VmResources) -> str:
        """A raw volume owned by the VM on the scratch storage, for host fio when the scratch
        disk is not raw (removed with the VM by destroy-unreferenced-disks)."""
        rec = self.vms.get(res.name)
        if rec is None or rec.vmid is None:
            raise HypervisorError(f"{res.name} was not created; no host reference volume without its VMID")
        sid = rec.entry or self.cfg.storage
        kind = ("rbd" if self.rbd is not None else "zfspool") if rec.entry else self.storage.type
        filename = f"vm-{rec.vmid}-vmbench-hostref" + (".raw" if kind in FILE_STORAGES else "")
        params = {"vmid": rec.vmid, "filename": filename, "size": str(-(-request.scratch_size // 1024)),
                  "format": "raw" if kind in FILE_STORAGES else None}
        try:
            volid = str(self.api().post(f"/nodes/{self.node}/storage/{sid}/content", params))
        except PveApiError as exc:
            raise HypervisorError(f"allocating a raw host reference volume on {sid}: {exc.message}", exc.hint) from None
        res.volumes.append(volid)
        path = self._volume_path(sid, volid)
        if path.startswith("rbd:") and self.ceph is not None:
            path = rbd_host_target(self.ceph, volid, request.vm.cache)
        elif not path.startswith("/"):
            raise HypervisorError(f"host fio needs a device or file on the node, but storage {sid} ({kind}) gives {path}",
                                  "on an rbd storage set storage.type: rbd (fio's rbd engine), else host_baseline: false "
                                  "to measure the guests only")
        res.host_target = path
        return path

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None,
             timeout: float | None = None) -> PveGuest:
        """Start the VM (a task) and ping its agent until it answers, bounded."""
        progress = progress or NullProgress()
        rec = self.vms.get(res.name)
        if rec is None or rec.vmid is None:
            raise HypervisorError(f"{res.name} was not created")
        base = f"/nodes/{rec.node}/qemu/{rec.vmid}"
        try:
            self.wait_task(self.api().post(f"{base}/status/start"), TASK_TIMEOUT, f"starting {res.name} (VMID {rec.vmid})", rec)
        except PveAnswerLost as exc:  # started or not: the status says, the start is sent again if not
            self.progress.warn(f"starting {res.name} (VMID {rec.vmid}): the answer was lost ({exc.short}); checking its status")
            self._wait_unlocked(rec, TASK_TIMEOUT, f"starting {res.name} (VMID {rec.vmid})")
            if (self.api().get(f"{base}/status/current") or {}).get("status") != "running":
                self.wait_task(self.api().post(f"{base}/status/start"), TASK_TIMEOUT, f"starting {res.name} (VMID {rec.vmid})", rec)
        except PveApiError as exc:
            raise GuestError(f"starting {res.name} (VMID {rec.vmid}): {exc.message}", exc.hint) from None
        accel = self.accelerator.name if self.accelerator else "tcg"
        limit = timeout or BOOT_TIMEOUT[accel]
        started = self.clock()
        last = ""
        while True:
            elapsed = self.clock() - started
            status = self.api().get(f"{base}/status/current") or {}
            if status.get("status") != "running":
                raise GuestError(f"{res.name} (VMID {rec.vmid}) stopped while booting (status {status.get('status')})",
                                 f"see the VM's start task and console on node {rec.node}")
            try:
                self.api().post(f"{base}/agent/ping")
            except PveApiError as exc:
                if exc.status != 500:
                    raise
                last = exc.reason
                if "No QEMU guest agent configured" in last:
                    raise GuestError(f"{res.name}: {last}", "the VM config needs agent: 1 before it starts") from None
            else:
                guest = PveGuest(self, rec, res, self.clock() - started)
                self._check_foreign_template(guest, res)
                return guest
            if elapsed > limit:
                raise GuestError(f"{res.name}: the guest agent did not answer within {limit:g}s ({last})",
                                 "is qemu-guest-agent installed and enabled in the template (systemctl enable qemu-guest-agent)?")
            progress.status(f"booting {res.name}: {elapsed:.0f}s, waiting for the guest agent")
            self.sleep(1.0)

    # ---- evidence helpers ---------------------------------------------------------------------

    def qemu_cmdline(self, pid: object) -> list[str]:
        """The QEMU process's argv, over SSH from /proc (pid from status/current)."""
        if not pid or not str(pid).isdigit():
            log.warning("no QEMU pid from the API; the command line is not recorded")
            return []
        try:
            raw = self.host.read_file(f"/proc/{pid}/cmdline")
        except (OSError, VmbenchError) as exc:
            log.warning("cannot read the QEMU command line (pid %s) on %s: %s", pid, self.host.name, exc)
            return []
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]

    def qmp_readings(self, vmid: int) -> dict:
        """QMP query-kvm and query-block through PVE's own client over SSH (best effort)."""
        argv = ["perl", "-MJSON", "-MPVE::QemuServer::Monitor=mon_cmd", "-e", QMP_PERL, str(vmid)]
        try:
            got = self.host.run(argv, timeout=30, check=False)
        except VmbenchError as exc:
            return {"qmp_error": exc.message}
        if got.returncode != 0:
            return {"qmp_error": (got.stderr.strip().splitlines() or ["failed"])[0][:300]}
        try:
            return {"qmp": json.loads(got.stdout)}
        except ValueError:
            return {"qmp_error": "not JSON"}
