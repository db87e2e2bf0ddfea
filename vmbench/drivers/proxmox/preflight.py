"""Preflight of the Proxmox driver: everything checked before a VM is created (token and
TLS, node, SSH reaching that node, the template, its storage's linked clones, the scratch
storage, accelerator, CPU models and, when given, every cell's settings on this setup, an
aio axis included: refused on a storage whose QEMU driver has no aio, such as librbd)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

from ...errors import PreflightError
from ...progress import Progress
from ...guest.needs import GuestNeeds
from ...scenario.model import VmConfig
from ...settings import Accel, CpuMode, DriverName
from ...transport import ops
from ..base import Accelerator
from .config import (NO_LINKED_CLONE, agent_enabled, aio_axis_problem, disk_volumes, storage_block_driver, storage_of,
                     vm_problems)
from .cluster import memory_problem, node_problem, quorum_problem, read_inventory, storage_problem, template_problem
from .errors import PveApiError, PvePermissionError
from .node import PveNode
from .recipe import grant_hint
from .rights import Step, major_of, needs, read_permissions, run_steps
from .tokenrights import RightsReport, read_report, template_setup

if TYPE_CHECKING:
    from ...images import Image

log = logging.getLogger(__name__)


class Preflight(PveNode):
    """The preflight half of :class:`~vmbench.drivers.proxmox.driver.ProxmoxDriver`."""

    def prepare(self, *, image: "Image | None" = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: "GuestNeeds | None" = None) -> Accelerator:
        """Everything checked before a VM is created: token and TLS, node, template, storage,
        accelerator, CPU models (and, given ``vms``, every cell's settings on this setup)."""
        self.progress = progress
        try:
            return self._prepare(accel, cpu_models, cpu_modes, progress, vms)
        except PveApiError as exc:
            raise PreflightError(exc.message, exc.hint) from None

    def _prepare(self, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode], progress: Progress,
                 vms: Sequence[VmConfig]) -> Accelerator:
        cfg = self.cfg
        refused = self.scenario_storage.backend.driver_problem(DriverName.PROXMOX, qualified=True)
        if refused is not None:
            raise PreflightError(*refused)
        progress.step(f"connecting to the Proxmox API at {cfg.url} (TLS {cfg.tls_mode})")
        if not cfg.tls_verify and not cfg.tls_fingerprint and not cfg.tls_ca_file:
            progress.warn(f"TLS certificate verification is OFF for {cfg.url} (tls.verify: false)")
        version = self.api().get("/version") or {}
        self.pve_version = str(version.get("version") or "") or None
        log.debug("Proxmox VE %s", self.pve_version)
        self._check_cluster()
        self._check_ssh_node()
        self._find_template()
        self._check_template_node()
        self.check_rights(self.run_steps(vms))
        self._check_clone_storage()
        self._check_krbd(vms)
        self.storage.prepare(progress)
        self.ceph = self.rbd.client() if self.rbd is not None else None
        self.accelerator = accelerator = self._choose_accelerator(accel)
        if CpuMode.HOST_PASSTHROUGH in cpu_modes and accelerator.name != "kvm":
            raise PreflightError(f"cpu host (host-passthrough) needs KVM, but guests run under TCG here ({accelerator.reason})",
                                 "use a named CPU model such as x86-64-v2-AES, or max")
        self._check_cpu_models(cpu_models)
        storage_type = "zfspool" if self.zfs else self.storage.type
        for vm in vms:
            problems = vm_problems(vm, storage_type, self.template_config, accelerator.name)
            if problems:
                raise PreflightError(problems[0][0], problems[0][1])
        self._check_aio_axis(storage_type, {vm.aio.value for vm in vms})
        return accelerator

    def run_steps(self, vms: Sequence[VmConfig]) -> tuple[Step, ...]:
        """The steps of the rights table a run of ``vms`` makes here: temporary storage
        entries for zvols of a stated volblocksize (any zfs storage section, when the cells
        are not known) and for krbd cells; the rbd storage's configuration."""
        return run_steps(zfs_entries=self.entries is not None and (not vms or any(vm.zfs.volblocksize for vm in vms)),
                         krbd_cells=self.rbd is not None and any(vm.krbd is not None for vm in vms), rbd=self.rbd is not None)

    def check_rights(self, steps: Sequence[Step]) -> RightsReport | None:
        """The token's rights for ``steps`` on this node, storage and template (``GET
        /access/permissions``): a required one missing refuses (unless ``refuse_missing_rights``
        is off: doctor lists them), an optional one is a warning.  None when PVE does not say."""
        setup = template_setup(self.node, self.cfg.storage, self.template_vmid, self.template_config,
                               clustered=len(self.inventory.nodes) > 1)
        try:
            report = read_report(self.api(), self.cfg.token_id, major_of(self.pve_version), setup, steps)
        except PveApiError as exc:
            self.progress.warn(f"cannot read the token's rights ({exc.message}): they are not checked before the run")
            return None
        self.rights = report
        if report.required and self.refuse_missing_rights:
            raise report.error()
        for text in report.warnings():
            self.progress.warn(text)
        return report

    def _check_krbd(self, vms: Sequence[VmConfig]) -> None:
        """A krbd cell (krbd: true, or left to an rbd storage with krbd 1) needs a node that can
        map RBD images: refused here, naming why, before anything exists."""
        if self.rbd is None:
            if any(vm.krbd is not None for vm in vms):  # the scenario refuses it; a driver used directly too
                raise PreflightError("krbd applies to a Proxmox rbd storage (storage.type rbd)", "remove krbd from the cells")
            return
        default = self.rbd.krbd
        if not any(default if vm.krbd is None else vm.krbd for vm in vms):
            return
        problem = self.rbd.kernel_problem()
        if problem:
            what = "storage " + self.cfg.storage + " maps its images (krbd 1)" if default else "krbd: true"
            raise PreflightError(f"{what} needs node {self.node} to map RBD images, but {problem}",
                                 "run the krbd cells on a node with the rbd kernel module (modprobe rbd), or remove "
                                 "krbd from the cells (librbd needs no kernel module)")

    def _check_aio_axis(self, storage_type: str, aios: set[str]) -> None:
        """An aio axis needs a storage whose disks QEMU opens with an aio setting (not librbd
        or libiscsi): refused here, naming the storage.  An rbd storage's ``krbd`` is read from
        the storage configuration (GET /storage, which lists what the token may allocate on)."""
        if len(aios) < 2:
            return
        storage_id = self.cfg.storage
        krbd: bool | None = False
        if storage_type == "rbd":
            krbd = self._krbd(storage_id)
        driver = storage_block_driver(storage_type, krbd)
        if driver is None:
            self.progress.warn(f"cannot tell whether Proxmox storage {storage_id} ({storage_type}) gives QEMU an aio "
                               "setting; cells whose aio reads back 'not applicable' differ in nothing")
            return
        problem = aio_axis_problem(storage_id, storage_type, driver, aios)
        if problem:
            raise PreflightError(problem[0], problem[1])

    def _krbd(self, storage_id: str) -> bool | None:
        """Whether an rbd storage maps its images through the kernel (krbd); None if unknown."""
        try:
            entries = self.api().get("/storage") or []
        except PveApiError as exc:
            log.warning("cannot read the storage configuration: %s", exc.message)
            return None
        entry = next((e for e in entries if isinstance(e, dict) and e.get("storage") == storage_id), None)
        if entry is None:
            return None
        return str(entry.get("krbd", 0)).strip().lower() in ("1", "true", "on", "yes")

    def _check_cluster(self) -> None:
        """This node is in the cluster and online, and the cluster is quorate (GET /nodes; a
        cluster's GET /cluster/status, which needs Sys.Audit: without it, quorum is not checked)."""
        nodes = self.api().get("/nodes") or []
        status = None
        if len(nodes) > 1:
            try:
                status = self.api().get("/cluster/status") or []
            except PvePermissionError as exc:
                self.progress.warn(f"cannot tell whether the cluster is quorate: {exc.message} (the token needs Sys.Audit on /)")
        self.inventory = read_inventory(nodes, status, [])
        problem = node_problem(self.inventory, self.node, "hypervisor.nodes" if self.hv.name else "hypervisor.node", self.cfg.url)
        if problem:
            raise PreflightError(*problem)
        problem = quorum_problem(self.inventory)
        if problem:
            raise PreflightError(*problem)

    def _check_template_node(self) -> None:
        """A template on another node than this one: that node online, and a clone onto this
        one possible (its volumes on shared storage available here; the scratch storage here)."""
        tnode = self.template_node
        if tnode == self.node:
            return
        status = self.inventory
        rows = self.api().get("/cluster/resources", {"type": "storage"}) or []
        config = None
        if any("shared" not in r for r in rows):  # PVE 8: the rows do not say; the storage configuration does
            try:
                config = self.api().get("/storage") or []
            except PveApiError as exc:
                log.warning("cannot read the storage configuration: %s", exc.message)
        self.inventory = inv = read_inventory([], None, rows, config)
        inv.nodes, inv.quorate, inv.clustered = status.nodes, status.quorate, status.clustered
        problem = template_problem(inv, self.template_vmid or 0, tnode or "?", self.template_config, self.node)
        problem = problem or storage_problem(inv, self.cfg.storage, self.node)
        if problem:
            raise PreflightError(*problem)

    def check_step(self, need: int, what: str = "the step's VMs") -> None:
        """Before each load step of a run across a cluster's nodes (the runner's call, with the
        guest memory it places here): this node still in the cluster and online, the cluster
        still quorate (when the token may read it), ``need`` bytes free on the node; else a
        refusal naming the node, before anything of the step exists (a VM cloned onto a node
        that is gone could not be removed through it).  A standalone node: nothing is read."""
        if len(self.inventory.nodes) < 2:
            return
        try:
            nodes = self.api().get("/nodes") or []
            try:
                status = self.api().get("/cluster/status") or []
            except PvePermissionError:  # said once, at preflight
                status = None
        except PveApiError as exc:
            raise PreflightError(exc.message, exc.hint) from None
        inv = read_inventory(nodes, status, [])
        problem = node_problem(inv, self.node, "hypervisor.nodes", self.cfg.url) or quorum_problem(inv)
        if problem:
            raise PreflightError(*problem)
        self.check_memory(need, what)

    def check_memory(self, need: int, what: str = "the step's VMs") -> None:
        """Before a step (the runner's call, knowing what it places here): ``need`` bytes of guest
        memory fit this node's free memory (its /cluster/resources node row; unknown: no check)."""
        try:
            rows = self.api().get("/cluster/resources", {"type": "node"}) or []
        except PveApiError as exc:
            raise PreflightError(exc.message, exc.hint) from None
        inv = read_inventory([{"node": self.node, "status": "online"}], None, rows)
        problem = memory_problem(inv, self.node, need, what)
        if problem:
            raise PreflightError(*problem)

    def _check_ssh_node(self) -> None:
        """Host fio and evidence run over SSH: it must reach the node the VMs run on."""
        hostname = ops.first_line(self.host, ["hostname"])
        if hostname and hostname.split(".")[0].lower() != self.node.lower():
            raise PreflightError(f"{self.host.name} is the host {hostname}, not node {self.node}: host fio and the QEMU "
                                 "evidence would be read on the wrong machine",
                                 f"set hypervisor.host (or hypervisor.ssh.host) to node {self.node}'s address")

    def _find_template(self) -> None:
        want = self.cfg.template
        rows = [r for r in (self.api().get("/cluster/resources", {"type": "vm"}) or []) if r.get("type") == "qemu"]
        if isinstance(want, int):
            found = [r for r in rows if int(r.get("vmid", -1)) == want]
        else:
            found = [r for r in rows if r.get("name") == want]
        if not found:
            self._template_unseen(want)
            raise PreflightError(f"no VM {want} on the cluster at {self.cfg.url} (hypervisor.template)",
                                 "name the template by VMID or unique name; the token needs VM.Audit on it to see it")
        here = [r for r in found if r.get("node") == self.node]
        if len(found) > 1 and len(here) == 1:
            found = here  # a template per node (vmbench images push on local storage): this node's own
        if len(found) > 1:
            ids = ", ".join(str(r.get("vmid")) for r in found)
            raise PreflightError(f"{len(found)} VMs are named {want} (VMIDs {ids}); names are not unique in Proxmox",
                                 "name the template by its VMID (hypervisor.template: VMID), or keep one template of "
                                 "that name per node")
        row = found[0]
        vmid, name = int(row["vmid"]), row.get("name") or "?"
        if str(row.get("template", 0)) not in ("1", "True", "true"):
            raise PreflightError(f"VM {vmid} ({name}) is not a template; vmbench makes linked clones of a template",
                                 f"convert it (it cannot run afterwards): qm template {vmid}")
        self.template_node = tnode = str(row.get("node") or self.node)
        problem = None if tnode == self.node else node_problem(self.inventory, tnode)
        if problem:
            raise PreflightError(f"template {vmid} ({name}) is on node {tnode}, not {self.node}: {problem[0]}",
                                 f"VMs are cloned from the template's node; {problem[1]}")
        config = self.api().get(f"/nodes/{tnode}/qemu/{vmid}/config") or {}
        if not agent_enabled(config.get("agent")):
            raise PreflightError(f"template {vmid} ({name}) has no guest agent enabled (agent: {config.get('agent', 'not set')})",
                                 f"qm set {vmid} --agent enabled=1, with qemu-guest-agent installed and enabled in the guest")
        self.template_vmid, self.template_config = vmid, config

    def _template_unseen(self, want: int | str) -> None:
        """The template is not listed: when the token lacks VM.Audit on it (its VMID, or
        /vms for a name), say so rather than that it does not exist."""
        path = f"/vms/{want}" if isinstance(want, int) else "/vms"
        try:
            have = read_permissions(self.api(), [path]).get(path, {})
        except PveApiError:
            return
        if "VM.Audit" not in have:
            granted = needs(template_setup(self.node, self.cfg.storage, None, {}), [Step.RUN], major_of(self.pve_version) or 9)
            raise PreflightError(f"the token {self.cfg.token_id} lacks VM.Audit on {path}: it cannot see template {want} "
                                 "(hypervisor.template)",
                                 "grant it (vmbench doctor SCENARIO lists everything the token lacks):\n  "
                                 + "\n  ".join(grant_hint([path], granted, self.cfg.token_id)))

    def _check_clone_storage(self) -> None:
        """Linked clones need storage that can make them (not LVM-thick, not iSCSI)."""
        if self.cfg.clone != "linked":
            return
        for key, volid in sorted(disk_volumes(self.template_config).items()):
            if key.startswith("unused"):
                continue
            sid = storage_of(volid)
            try:
                kind = str((self.api().get(f"/nodes/{self.template_node}/storage/{sid}/status") or {}).get("type") or "")
            except PveApiError as exc:
                log.warning("cannot read storage %s of the template: %s", sid, exc.message)
                continue
            if kind in NO_LINKED_CLONE:
                raise PreflightError(f"disk {key} of template {self.template_vmid} is on storage {sid} ({kind}), "
                                     "which cannot make linked clones",
                                     "move the template's disks to zfspool, lvmthin, rbd or a directory storage, "
                                     "or set hypervisor.clone: full (a full copy per VM: slower)")

    def _choose_accelerator(self, accel: Accel) -> Accelerator:
        kvm_dev = ops.exists(self.host, "/dev/kvm")
        if accel is Accel.TCG:
            return Accelerator("tcg", "hypervisor.accel: tcg (config kvm: 0)")
        if accel is Accel.KVM:
            if not kvm_dev:
                raise PreflightError(f"accel: kvm, but node {self.node} has no /dev/kvm",
                                     "enable virtualisation in the node's firmware, or use accel: tcg")
            return Accelerator("kvm", "hypervisor.accel: kvm")
        if kvm_dev:
            return Accelerator("kvm", f"node {self.node} has /dev/kvm")
        return Accelerator("tcg", f"node {self.node} has no /dev/kvm (config kvm: 0)")

    def _check_cpu_models(self, models: set[str]) -> None:
        if not models:
            return
        try:
            known = {str(m.get("name")) for m in (self.api().get(f"/nodes/{self.node}/capabilities/qemu/cpu") or [])}
        except PveApiError as exc:
            log.warning("cannot list the CPU models of node %s: %s", self.node, exc.message)
            return
        unknown = sorted(m for m in models if m not in known)
        if unknown and known:
            raise PreflightError(f"Proxmox does not know the CPU model(s) {', '.join(unknown)}",
                                 "models on this node: " + ", ".join(sorted(known)))

    def cached_accelerator(self) -> str | None:
        return self.accelerator.name if self.accelerator else None
