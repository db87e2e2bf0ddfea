"""The libvirt driver: linked clones of the template, a scratch disk with a known serial,
the domain defined and started, the guest reached through its agent.

Everything it creates is named ``vmbench-<run tag>-...`` and the domains carry vmbench
metadata; :meth:`LibvirtDriver.leftovers` finds only such things.
"""

from __future__ import annotations

import json
import logging
import re
import socket
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path

from ...drivers.base import Accelerator, Leftover, VmRequest, VmResources
from ...errors import GuestError, HypervisorError, PreflightError
from ...images import Image
from ...paths import StatePaths
from ...progress import NullProgress, Progress
from ...settings import Accel, CpuMode, ImageFormat
from ...transport.agent import GuestAgentTransport
from ...transport.base import Transport
from ...transport.local import LocalTransport
from .accel import KvmProbe, choose_accelerator
from .connection import agent_command, hypervisor_errors, libvirt, monitor_command, open_connection
from .xml import NS, DomainSpec, domain_xml, pool_xml, volume_xml

log = logging.getLogger(__name__)

VMBENCH_POOL = "vmbench"
NAME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-")
VOLUME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-\d+-(root|scratch|hostref)\.(qcow2|raw)$")
CONSOLE_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-[\w-]+\.log$")
BOOT_TIMEOUT = {"kvm": 120.0, "tcg": 300.0}


def volume_name(run_tag: str, seq: int, role: str, fmt: str) -> str:
    return f"vmbench-{run_tag}-{seq}-{role}.{fmt}"


def domain_name(run_tag: str, seq: int) -> str:
    return f"vmbench-{run_tag}-{seq}"


def scratch_serial(run_tag: str, seq: int) -> str:
    """At most 20 characters (virtio-blk and ATA serial limits)."""
    return f"VMB{run_tag[1:]}S{seq:03d}"


class LibvirtGuest:
    """A running domain: its agent transport and the hypervisor's view of it."""

    def __init__(self, driver: "LibvirtDriver", dom: "libvirt.virDomain", resources: VmResources, boot_seconds: float) -> None:
        self.driver = driver
        self.dom = dom
        self.name = resources.name
        self.resources = resources
        self.boot_seconds = boot_seconds
        self.transport = GuestAgentTransport(self.name, lambda cmd, timeout: agent_command(dom, cmd, timeout))

    def evidence(self) -> dict:
        """The live domain XML, QEMU's block layer and accelerator, and the QEMU command line."""
        out: dict = {}
        with hypervisor_errors(f"reading the live configuration of {self.name}"):
            out["live_xml"] = self.dom.XMLDesc(0)
        out["query_block"] = monitor_command(self.dom, {"execute": "query-block"})
        out["query_kvm"] = monitor_command(self.dom, {"execute": "query-kvm"})
        out["query_iothreads"] = monitor_command(self.dom, {"execute": "query-iothreads"})
        alias = _scratch_alias(out["live_xml"], self.resources.scratch_serial)
        out["scratch_alias"] = alias
        qom = {}
        for path in _iothread_owners(out["live_xml"], alias):
            try:
                qom[path] = monitor_command(self.dom, {"execute": "qom-get", "arguments": {"path": path, "property": "iothread"}})
            except HypervisorError as exc:
                qom[path] = f"error: {exc}"
        out["qom_iothread"] = qom
        out["qemu_cmdline"] = self.driver.qemu_cmdline(self.name)
        return out


class LibvirtDriver:
    name = "libvirt"

    def __init__(self, uri: str = "qemu:///system", *, state: StatePaths | None = None, host: Transport | None = None) -> None:
        self.uri = uri
        self.state = state or StatePaths.default()
        self.host = host or LocalTransport()
        self._conn = None
        self.image: Image | None = None
        self.accelerator: Accelerator | None = None
        self.machine = "pc"

    # ---- connection, host facts -----------------------------------------------------------

    @property
    def conn(self) -> "libvirt.virConnect":
        if self._conn is None:
            self._conn = open_connection(self.uri)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
            self._conn = None

    @property
    def is_local(self) -> bool:
        host = urllib.parse.urlsplit(self.uri).hostname
        return host in (None, "", "localhost", "127.0.0.1", "::1")

    def describe_host(self) -> dict:
        conn = self.conn
        with hypervisor_errors("reading host facts from libvirt"):
            lib = conn.getLibVersion()
            hv = conn.getVersion()
            info = conn.getInfo()
            hostname = conn.getHostname()
        return {
            "libvirt_uri": self.uri,
            "libvirt_version": _version(lib),
            "hypervisor": conn.getType(),
            "qemu_version": _version(hv),
            "hostname": hostname,
            "host_cpu_model": info[0],
            "host_memory_mib": info[1],
            "host_cpus": info[2],
        }

    # ---- preflight ------------------------------------------------------------------------

    def prepare(self, *, image: Image, accel: Accel, pool: str, cpu_models: set[str], cpu_modes: set[CpuMode], machine: str, progress: Progress) -> Accelerator:
        """Everything checked before anything is provisioned: libvirt reachable, pool usable,
        accelerator decided, CPU models known."""
        if not self.is_local:
            raise PreflightError(
                f"{self.uri} is a remote libvirt; vmbench runs host-side fio locally and cannot reach that host yet",
                "run vmbench on the hypervisor host itself (qemu:///system)",
            )
        self.image = image
        self.machine = machine
        self.conn  # noqa: B018 - raises PreflightError when unreachable
        self.ensure_pool(pool)
        progress.step("checking which accelerator works (KVM or TCG)")
        self.accelerator = choose_accelerator(accel, self.kvm_probe())
        if CpuMode.HOST_PASSTHROUGH in cpu_modes and self.accelerator.name != "kvm":
            raise PreflightError(
                f"cpu host-passthrough needs KVM, but guests run under TCG here ({self.accelerator.reason})",
                "use a named CPU model such as kvm64 with aes: on, or max",
            )
        known = self.cpu_models()
        unknown = sorted(m for m in cpu_models if m not in known)
        usable = sorted(m for m, ok in known.items() if ok)
        if unknown:
            raise PreflightError(
                f"libvirt does not know the CPU model(s) {', '.join(unknown)}",
                "models usable here: " + ", ".join(usable),
            )
        unusable = sorted(m for m in cpu_models if not known[m])
        if unusable:
            raise PreflightError(
                f"QEMU cannot provide the CPU model(s) {', '.join(unusable)} to {self.accelerator.name} guests on this host "
                "(libvirt marks them unusable; their features would be silently dropped)",
                "models usable here: " + ", ".join(usable),
            )
        return self.accelerator

    def kvm_probe(self) -> KvmProbe:
        assert self.image is not None
        key = "|".join([self.uri, socket.gethostname(), _host_kernel(), str(self.conn.getVersion()), str(self.conn.getLibVersion()), self.image.hash])
        return KvmProbe(self.conn, self.image.kernel, self.state.consoles, self.state.cache / "accelerator.json", key)

    def _domain_type(self) -> str:
        return "kvm" if self.accelerator and self.accelerator.name == "kvm" else "qemu"

    def cpu_models(self) -> dict[str, bool]:
        """Named CPU models libvirt knows for this accelerator -> usable on this host."""
        with hypervisor_errors("reading domain capabilities"):
            caps = self.conn.getDomainCapabilities(None, "x86_64", self.machine, self._domain_type(), 0)
        root = ET.fromstring(caps)
        return {m.text: m.get("usable") != "no" for m in root.findall("./cpu/mode[@name='custom']/model") if m.text}

    def ensure_pool(self, name: str) -> "libvirt.virStoragePool":
        conn = self.conn
        try:
            pool = conn.storagePoolLookupByName(name)
        except libvirt.libvirtError:
            if name != VMBENCH_POOL:
                raise PreflightError(f"libvirt has no storage pool named {name!r}", "create it, or use storage.pool: vmbench") from None
            path = self.state.pool
            path.mkdir(parents=True, exist_ok=True)
            with hypervisor_errors(f"creating the storage pool {name} at {path}"):
                pool = conn.storagePoolDefineXML(pool_xml(name, str(path)), 0)
                pool.setAutostart(1)
        if name == VMBENCH_POOL:
            # vmbench's own pool: recreate its directory if someone removed it
            with hypervisor_errors(f"reading the storage pool {name}"):
                path = ET.fromstring(pool.XMLDesc(0)).findtext("./target/path")
            if path and not Path(path).is_dir():
                Path(path).mkdir(parents=True, mode=0o711)
        if not pool.isActive():
            with hypervisor_errors(f"starting the storage pool {name}"):
                pool.create(0)
        with hypervisor_errors(f"refreshing the storage pool {name}"):
            pool.refresh(0)
        return pool

    def pool_free_bytes(self, name: str) -> int:
        with hypervisor_errors(f"reading pool {name}"):
            return int(self.conn.storagePoolLookupByName(name).info()[3])

    # ---- VM lifecycle ---------------------------------------------------------------------

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        """The names a VM will have; filled in by :meth:`create_vm` as things are created."""
        return VmResources(
            name=domain_name(run_tag, request.seq),
            scratch_path="",
            scratch_serial=scratch_serial(run_tag, request.seq),
            host_target=None,
        )

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Create the linked clone and the scratch disk, recording each in ``res`` as soon as
        it exists (so an interrupted creation is still cleaned up)."""
        assert self.image is not None, "prepare() first"
        pool = self.ensure_pool(request.pool)
        fmt = request.vm.format.value
        root_name = volume_name(run_tag, request.seq, "root", "qcow2")
        scratch_name = volume_name(run_tag, request.seq, "scratch", fmt)
        res.pool = request.pool
        res.expected_volumes = [root_name, scratch_name]
        with hypervisor_errors(f"creating the linked clone {root_name}"):
            root = pool.createXML(volume_xml(root_name, self.template_size(), "qcow2", (str(self.image.root), "qcow2")), 0)
        res.volumes.append(root.path())
        with hypervisor_errors(f"creating the scratch disk {scratch_name}"):
            scratch = pool.createXML(volume_xml(scratch_name, request.scratch_size, fmt), 0)
        res.volumes.append(scratch.path())
        res.scratch_path = scratch.path()
        if request.vm.format is ImageFormat.RAW:
            res.host_target = scratch.path()  # fio on the host runs on this very file, before boot
        return res

    def template_size(self) -> int:
        """The template's virtual size: the linked clone must be as large."""
        assert self.image is not None
        info = self.host.run(["qemu-img", "info", "--output=json", "--force-share", str(self.image.root)], timeout=60).stdout
        return int(json.loads(info)["virtual-size"])

    def create_host_reference(self, run_tag: str, pool_name: str, size: int, seq: int = 0) -> str:
        """A raw file on the scratch disks' storage for host fio when the scratch isn't raw."""
        pool = self.ensure_pool(pool_name)
        name = volume_name(run_tag, seq, "hostref", "raw")
        with hypervisor_errors(f"creating {name}"):
            return pool.createXML(volume_xml(name, size, "raw"), 0).path()

    def delete_volume_path(self, path: str) -> None:
        """Delete a vmbench volume by path; a volume that is already gone is fine."""
        try:
            vol = self.conn.storageVolLookupByPath(path)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() == libvirt.VIR_ERR_NO_STORAGE_VOL:
                return
            raise HypervisorError(f"looking up volume {path}: {exc.get_error_message()}") from None
        if not VOLUME_RE.match(vol.name()):
            log.warning("not deleting %s: not a vmbench volume", path)
            return
        with hypervisor_errors(f"deleting volume {path}"):
            vol.delete(0)

    def delete_volume_named(self, pool_name: str, name: str) -> None:
        if not VOLUME_RE.match(name):
            return
        try:
            pool = self.conn.storagePoolLookupByName(pool_name)
            pool.refresh(0)
            vol = pool.storageVolLookupByName(name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() in (libvirt.VIR_ERR_NO_STORAGE_VOL, libvirt.VIR_ERR_NO_STORAGE_POOL):
                return
            raise HypervisorError(f"looking up volume {name}: {exc.get_error_message()}") from None
        with hypervisor_errors(f"deleting volume {name}"):
            vol.delete(0)

    def domain_spec(self, run_tag: str, request: VmRequest, res: VmResources) -> DomainSpec:
        assert self.image is not None
        self.state.consoles.mkdir(parents=True, exist_ok=True)
        return DomainSpec(
            name=res.name,
            run_tag=run_tag,
            vm=request.vm,
            domain_type=self._domain_type(),
            kernel=str(self.image.kernel),
            initrd=str(self.image.initrd),
            cmdline=self.image.cmdline,
            root_path=res.volumes[0],
            scratch_path=res.scratch_path,
            scratch_serial=res.scratch_serial,
            console_log=str(self.console_path(res.name)),
            cells=request.cells,
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            machine=self.machine,
            volumes=tuple(res.volumes),
        )

    def console_path(self, name: str) -> Path:
        return self.state.consoles / f"{name}.log"

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None, timeout: float | None = None) -> LibvirtGuest:
        progress = progress or NullProgress()
        spec = self.domain_spec(run_tag, request, res)
        res.domain_xml = domain_xml(spec)
        with hypervisor_errors(f"defining {res.name}"):
            dom = self.conn.defineXML(res.domain_xml)
        with hypervisor_errors(f"starting {res.name}"):
            dom.create()
        accel = self.accelerator.name if self.accelerator else "tcg"
        timeout = timeout or BOOT_TIMEOUT[accel]
        seconds = self.wait_for_agent(dom, res.name, timeout, progress)
        return LibvirtGuest(self, dom, res, seconds)

    def wait_for_agent(self, dom: "libvirt.virDomain", name: str, timeout: float, progress: Progress) -> float:
        started = time.monotonic()
        last = ""
        while True:
            elapsed = time.monotonic() - started
            try:
                active = dom.isActive()
            except libvirt.libvirtError:
                active = False
            if not active:
                raise GuestError(f"{name} stopped while booting", self._console_hint(name))
            try:
                agent_command(dom, {"execute": "guest-ping"}, 2)
                return time.monotonic() - started
            except GuestError as exc:
                last = str(exc)
            if elapsed > timeout:
                raise GuestError(f"{name}: the guest agent did not answer within {timeout:g}s ({last})", self._console_hint(name))
            progress.status(f"booting {name}: {elapsed:.0f}s, waiting for the guest agent")
            time.sleep(1.0)

    def _console_hint(self, name: str) -> str:
        try:
            text = self.console_path(name).read_text(errors="replace")
        except OSError:
            return "no console output was captured"
        lines = [l for l in text.splitlines() if l.strip()][-15:]
        return "last console lines:\n  " + "\n  ".join(lines) if lines else "the console stayed empty"

    def remove_vm(self, res: VmResources) -> None:
        """Destroy and undefine the domain, delete its volumes and console log. Idempotent."""
        errors = []
        dom = None
        try:
            dom = self.conn.lookupByName(res.name)
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:  # a dead connection is not "already gone"
                errors.append(f"{res.name}: {exc.get_error_message()}")
        if dom is not None:
            if _is_ours(dom):
                for step in (_destroy, _undefine):
                    try:
                        step(dom)
                    except libvirt.libvirtError as exc:
                        errors.append(f"{res.name}: {exc.get_error_message()}")
            else:
                errors.append(f"{res.name} exists but has no vmbench metadata; left alone")
        for path in list(res.volumes) + ([res.host_target] if res.host_target and res.host_target not in res.volumes else []):
            try:
                self.delete_volume_path(path)
            except HypervisorError as exc:
                errors.append(str(exc))
        for name in res.expected_volumes:  # created but interrupted before its path was recorded
            try:
                self.delete_volume_named(res.pool, name)
            except HypervisorError as exc:
                errors.append(str(exc))
        try:
            self.console_path(res.name).unlink()
        except OSError:
            pass
        if errors:
            raise HypervisorError("cleanup incomplete: " + "; ".join(errors), "run `vmbench cleanup` to retry")

    # ---- evidence helpers -----------------------------------------------------------------

    def qemu_cmdline(self, name: str) -> list[str]:
        """The QEMU process's argv, from its pid file (local libvirt only)."""
        try:
            pid = self.host.read_file(f"/run/libvirt/qemu/{name}.pid").decode().strip()
            raw = self.host.read_file(f"/proc/{pid}/cmdline")
        except OSError as exc:
            log.warning("cannot read the QEMU command line of %s: %s", name, exc)
            return []
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]

    # ---- leftovers ------------------------------------------------------------------------

    def leftovers(self) -> list[Leftover]:
        out: list[Leftover] = []
        with hypervisor_errors("listing domains"):
            doms = self.conn.listAllDomains(0)
        for dom in doms:
            m = NAME_RE.match(dom.name())
            if m and _is_ours(dom):
                state = "running" if dom.isActive() else "shut off"
                out.append(Leftover("domain", dom.name(), m.group(1), state))
        with hypervisor_errors("listing storage pools"):
            pools = self.conn.listAllStoragePools(libvirt.VIR_CONNECT_LIST_STORAGE_POOLS_ACTIVE)
        for pool in pools:
            try:
                pool.refresh(0)
                vols = pool.listAllVolumes(0)
            except libvirt.libvirtError:
                continue
            for vol in vols:
                m = VOLUME_RE.match(vol.name())
                if m:
                    out.append(Leftover("volume", vol.path(), m.group(1), f"pool {pool.name()}"))
        if self.state.consoles.is_dir():
            for f in sorted(self.state.consoles.iterdir()):
                m = CONSOLE_RE.match(f.name)
                if m:
                    out.append(Leftover("file", str(f), m.group(1), "console log"))
        return out

    def remove_leftover(self, item: Leftover) -> None:
        if item.kind == "domain":
            try:
                dom = self.conn.lookupByName(item.name)
            except libvirt.libvirtError:
                return
            if not (NAME_RE.match(item.name) and _is_ours(dom)):
                raise HypervisorError(f"{item.name} is not a vmbench domain; left alone")
            with hypervisor_errors(f"removing {item.name}"):
                _destroy(dom)
                _undefine(dom)
        elif item.kind == "volume":
            self.delete_volume_path(item.name)
        elif item.kind == "file":
            path = Path(item.name)
            if path.parent == self.state.consoles and CONSOLE_RE.match(path.name):
                path.unlink(missing_ok=True)


def _is_ours(dom: "libvirt.virDomain") -> bool:
    try:
        dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS, 0)
        return True
    except libvirt.libvirtError:
        return False


def _destroy(dom: "libvirt.virDomain") -> None:
    if dom.isActive():
        dom.destroy()


def _undefine(dom: "libvirt.virDomain") -> None:
    if dom.isPersistent():
        dom.undefineFlags(0)


def _scratch_alias(live_xml: str, serial: str) -> str | None:
    root = ET.fromstring(live_xml)
    for disk in root.findall("./devices/disk"):
        if disk.findtext("serial") == serial:
            alias = disk.find("alias")
            return alias.get("name") if alias is not None else None
    return None


def _iothread_owners(live_xml: str, scratch_alias: str | None) -> list[str]:
    """QOM paths whose 'iothread' link says where the scratch disk's I/O is handled."""
    root = ET.fromstring(live_xml)
    out = []
    for disk in root.findall("./devices/disk"):
        alias = disk.find("alias")
        if alias is not None and alias.get("name") == scratch_alias and disk.find("target").get("bus") == "virtio":
            out.append(f"/machine/peripheral/{scratch_alias}")
    for ctrl in root.findall("./devices/controller[@type='scsi']"):
        alias = ctrl.find("alias")
        if alias is not None and ctrl.get("model") == "virtio-scsi":
            out.append(f"/machine/peripheral/{alias.get('name')}")
    return out


def _version(n: int) -> str:
    return f"{n // 1000000}.{n // 1000 % 1000}.{n % 1000}"


def _host_kernel() -> str:
    import os

    return os.uname().release
