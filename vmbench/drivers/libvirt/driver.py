"""The libvirt driver: linked clones of the template, a scratch disk with a known serial,
the domain defined and started, the guest reached through its agent.

The running domain is :class:`.guest.LibvirtGuest`.  Works on this machine (``qemu:///system``) and on a remote host (``qemu+ssh://``, libvirt's
protocol carried over vmbench's own SSH connection: :mod:`.bridge`).  Every host-side file
action goes through the host transport; disks come from the host storage.  Everything it
creates is named ``vmbench-<run tag>-...`` and the domains carry vmbench metadata;
:meth:`LibvirtDriver.leftovers` finds only such things.
"""

from __future__ import annotations

import atexit
import json
import logging
import re
import time
import xml.etree.ElementTree as ET
from typing import Sequence

from ..base import Accelerator, HostChecks, Leftover, VmRequest, VmResources, create_host_reference, note_volume
from ...storage.leftover import remove_work_leftover, work_leftovers
from ...errors import GuestError, HypervisorError, PreflightError, VmbenchError
from ...images import Image
from ...images.placement import HostImage, place_image
from ...paths import HostPaths, StatePaths
from ...progress import NullProgress, Progress, Silence
from ...guest.needs import GuestNeeds
from ...scenario.backend import Storage
from ...scenario.model import Hypervisor, VmConfig
from ...settings import Accel, CpuMode, ImageFormat
from ...storage import VOLUME_RE, VolumeRole, VolumeStorage, make_volume_storage, volume_name
from ...storage.rbd import rbd_host_target, read_key
from ...transport import ops
from ...transport.base import HostTransport
from .accel import KvmProbe, cached_answer, choose_accelerator
from .bridge import LibvirtBridge
from .connection import agent_command, hypervisor_errors, libvirt, monitor_command, open_connection, require_binding
from .doctor import libvirt_checks
from .guest import LibvirtGuest
from .storage import DirPoolStorage
from .secrets import define_ceph_secret, our_secrets, remove_ceph_secret
from .xml import NS, DomainSpec, domain_xml, rbd_disk

log = logging.getLogger(__name__)

NAME_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-")
CONSOLE_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-[\w-]+\.log$")
BOOT_TIMEOUT = {"kvm": 120.0, "tcg": 300.0}
# A boot whose console is still empty this long after the start (no kernel line, no login
# prompt) is restarted once: under TCG a guest has been seen, rarely, to hang before its kernel
# printed anything, while every other boot of the same image reached its agent in 20 to 60 s.
STALLED_BOOT_SECONDS = {"kvm": 60.0, "tcg": 150.0}
RECONNECT_SECONDS = 60.0
#: how often a booting guest's agent is pinged: an answer is seen at most this late (was 1 s,
#: half a second lost per boot on average); a ping before the agent is up fails at once
AGENT_POLL_SECONDS = 0.25


def domain_name(run_tag: str, seq: int) -> str:
    return f"vmbench-{run_tag}-{seq}"


def scratch_serial(run_tag: str, seq: int) -> str:
    """At most 20 characters (virtio-blk and ATA serial limits)."""
    return f"VMB{run_tag[1:]}S{seq:03d}"


class LibvirtDriver:
    name = "libvirt"
    needs_image = True

    def __init__(self, hv: Hypervisor, storage: Storage, *, host: HostTransport, state: StatePaths, paths: HostPaths,
                 scratch_storage: VolumeStorage | None = None) -> None:
        require_binding(hv.uri)
        self.hv = hv
        self.uri = hv.uri
        self.host = host
        self.state = state
        self.paths = paths
        self._conn = None
        self._lost = False  # the last connection died: reopen with retries
        self._bridge: LibvirtBridge | None = None
        self.image: HostImage | None = None
        self.accelerator: Accelerator | None = None
        #: root disks (linked clones of the template) always live in a libvirt dir pool
        self.pool_storage = DirPoolStorage(lambda: self.conn, storage.pool, host, paths.pool)
        self.ceph = storage.ceph if storage.backend.ceph else None
        #: scratch disks and the host reference: that pool, ZFS (zvols, datasets) or RBD images
        self.storage: VolumeStorage = scratch_storage or (
            make_volume_storage(storage, host) or self.pool_storage)

    # ---- connection ------------------------------------------------------------------------

    @property
    def conn(self) -> "libvirt.virConnect":
        """The libvirt connection, reopened when it died (libvirtd restarted, SSH dropped):
        then for up to RECONNECT_SECONDS, so a run's cleanup outlasts a daemon restart."""
        lost, self._lost = self._lost, False
        if self._conn is not None:
            try:
                alive = self._conn.isAlive() == 1
            except libvirt.libvirtError:
                alive = False
            if not alive:
                log.warning("the libvirt connection to %s was lost; reconnecting", self.uri)
                self.close()
                lost = True
        if self._conn is None:
            deadline = time.monotonic() + (RECONNECT_SECONDS if lost else 0)
            while True:
                try:
                    self._conn = open_connection(self._local_uri(), shown_as=self.uri, host=self.hv.host_label)
                    break
                except VmbenchError:
                    self.close()
                    if time.monotonic() >= deadline:
                        raise
                    time.sleep(2)
        return self._conn

    def _local_uri(self) -> str:
        if not self.hv.remote:
            return self.uri
        if self._bridge is None:
            opener = getattr(self.host, "open_stream", None)
            if opener is None:  # pragma: no cover - make_driver always pairs a remote URI with SSH
                raise PreflightError(f"{self.uri} needs an SSH transport to its host")
            self._bridge = LibvirtBridge(opener, self.uri)
            # close libvirt before the bridge's threads stop at exit, or closing it would wait forever
            atexit.register(self.close)
        return self._bridge.local_uri

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except Exception:  # noqa: BLE001 - closing a dead connection is not an error
                pass
            self._conn = None
        if self._bridge is not None:
            self._bridge.close()
            self._bridge = None

    def describe_host(self) -> dict:
        conn = self.conn
        with hypervisor_errors("reading host facts from libvirt"):
            lib = conn.getLibVersion()
            hv = conn.getVersion()
            info = conn.getInfo()
            hostname = conn.getHostname()
        out = {
            "driver": self.name,
            "libvirt_uri": self.uri,
            "libvirt_version": _version(lib),
            "hypervisor": conn.getType(),
            "qemu_version": _version(hv),
            "hostname": hostname,
            "host_cpu_model": info[0],
            "host_memory_mib": info[1],
            "host_cpus": info[2],
            "host_state_dir": self.paths.root,
        }
        out.update(self.host.describe())
        out.update(self.pool_storage.facts())
        if self.storage is not self.pool_storage:
            out.update(self.storage.facts())
        return out

    # ---- preflight ------------------------------------------------------------------------

    def prepare(self, *, image: Image | None = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: "GuestNeeds | None" = None) -> Accelerator:
        """Everything checked before a VM is created: libvirt reachable, storage usable,
        the template on the host, accelerator decided, CPU models known.  (The cells' other
        settings need no check here: libvirt takes every value the scenario allows.)"""
        if image is None:
            raise PreflightError("the libvirt driver boots vmbench's template image, and none was given",
                                 "run `vmbench images build` for the scenario's template")
        self.conn  # noqa: B018 - raises PreflightError when unreachable
        self.pool_storage.prepare(progress)
        if self.storage is not self.pool_storage:
            self.storage.prepare(progress)
        self.image = place_image(image, self.host, self.paths, progress)
        probe = self.kvm_probe()
        progress.step("checking which accelerator works (KVM or TCG)" if accel is Accel.TCG or probe.cached() is not None
                      else probe.notice())
        self.accelerator = choose_accelerator(accel, probe)
        if CpuMode.HOST_PASSTHROUGH in cpu_modes and self.accelerator.name != "kvm":
            raise PreflightError(
                f"cpu host-passthrough needs KVM, but guests run under TCG here ({self.accelerator.reason})",
                "use a named CPU model such as kvm64 with aes: on, or max",
            )
        known = self.cpu_models()
        unknown = sorted(m for m in cpu_models if m not in known)
        usable = sorted(m for m, ok in known.items() if ok)
        if unknown:
            raise PreflightError(f"libvirt does not know the CPU model(s) {', '.join(unknown)}", "models usable here: " + ", ".join(usable))
        unusable = sorted(m for m in cpu_models if not known[m])
        if unusable:
            raise PreflightError(
                f"QEMU cannot provide the CPU model(s) {', '.join(unusable)} to {self.accelerator.name} guests on this host "
                "(libvirt marks them unusable; their features would be silently dropped)",
                "models usable here: " + ", ".join(usable),
            )
        return self.accelerator

    def doctor_checks(self, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
        return libvirt_checks(self, template=template, reprobe=reprobe, progress=progress)

    def kvm_probe(self) -> KvmProbe:
        assert self.image is not None
        kernel = ops.first_line(self.host, ["uname", "-r"]) or "?"
        key = "|".join([self.uri, self.conn.getHostname(), kernel, str(self.conn.getVersion()), str(self.conn.getLibVersion()), self.image.hash])
        return KvmProbe(self.conn, self.image.kernel, self.paths.consoles, self.host, self._probe_cache, key)

    @property
    def _probe_cache(self):
        return self.state.cache / "accelerator.json"

    def cached_accelerator(self) -> str | None:
        kvm = cached_answer(self._probe_cache, self.uri)
        return None if kvm is None else ("kvm" if kvm else "tcg")

    def forget_probe(self) -> None:
        try:
            self._probe_cache.unlink()
        except OSError:
            pass

    def _domain_type(self) -> str:
        return "kvm" if self.accelerator and self.accelerator.name == "kvm" else "qemu"

    def cpu_models(self) -> dict[str, bool]:
        """Named CPU models libvirt knows for this accelerator -> usable on this host."""
        with hypervisor_errors("reading domain capabilities"):
            caps = self.conn.getDomainCapabilities(None, "x86_64", self.hv.machine, self._domain_type(), 0)
        root = ET.fromstring(caps)
        return {m.text: m.get("usable") != "no" for m in root.findall("./cpu/mode[@name='custom']/model") if m.text}

    # ---- VM lifecycle ---------------------------------------------------------------------

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        """The names a VM will have; filled in by :meth:`create_vm` as things are created."""
        return VmResources(name=domain_name(run_tag, request.seq), scratch_path="",
                           scratch_serial=scratch_serial(run_tag, request.seq), host_target=None)

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        """Create the linked clone and the scratch disk, recording each in ``res`` as soon as
        it exists (so an interrupted creation is still cleaned up)."""
        assert self.image is not None, "prepare() first"
        fmt = request.vm.format
        root_name = volume_name(run_tag, request.seq, VolumeRole.ROOT, ImageFormat.QCOW2)
        scratch_name = volume_name(run_tag, request.seq, VolumeRole.SCRATCH, fmt)
        res.expected_volumes = [root_name, scratch_name]
        root = self.pool_storage.create_volume(root_name, self.template_size(), ImageFormat.QCOW2, backing=self.image.root)
        res.volumes.append(root.name)
        res.root_path = root.path
        scratch = self.storage.create_volume(scratch_name, request.scratch_size, fmt, zfs=request.vm.zfs)
        res.volumes.append(scratch.name)
        res.scratch_path = scratch.path
        res.scratch_kind = scratch.kind
        note_volume(res, scratch)
        if scratch.kind == "rbd" and self.ceph is not None:  # QEMU gets the key through a libvirt secret
            define_ceph_secret(self.conn, res.name, run_tag, self.ceph.user, read_key(self.host, self.ceph))
        if fmt is ImageFormat.RAW:  # fio on the host runs on this very file, device or image, before boot
            res.host_target = rbd_host_target(scratch.path, request.vm.cache) if scratch.kind == "rbd" else scratch.path
        return res

    def template_size(self) -> int:
        """The template's virtual size: the linked clone must be as large."""
        assert self.image is not None
        info = self.host.run(["qemu-img", "info", "--output=json", "--force-share", self.image.root], timeout=60).stdout
        return int(json.loads(info)["virtual-size"])

    def create_host_reference(self, run_tag: str, request: VmRequest, res: VmResources) -> str:
        return create_host_reference(self.storage, run_tag, request, res)

    def domain_spec(self, run_tag: str, request: VmRequest, res: VmResources) -> DomainSpec:
        assert self.image is not None
        ops.mkdir(self.host, self.paths.consoles, 0o755)
        return DomainSpec(
            name=res.name, run_tag=run_tag, vm=request.vm, domain_type=self._domain_type(),
            kernel=self.image.kernel, initrd=self.image.initrd, cmdline=self.image.cmdline,
            root_path=res.root_path, scratch_path=res.scratch_path, scratch_serial=res.scratch_serial,
            console_log=self.console_path(res.name), cells=request.cells, created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            machine=self.hv.machine, volumes=tuple(res.volumes), scratch_kind=res.scratch_kind,
            rbd=rbd_disk(res.scratch_path, res.name) if res.scratch_kind == "rbd" else None,
        )

    def console_path(self, name: str) -> str:
        return f"{self.paths.consoles}/{name}.log"

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None, timeout: float | None = None) -> LibvirtGuest:
        progress = progress or NullProgress()
        spec = self.domain_spec(run_tag, request, res)
        res.native_config = domain_xml(spec)
        with hypervisor_errors(f"defining {res.name}"):
            dom = self.conn.defineXML(res.native_config)
        with hypervisor_errors(f"starting {res.name}"):
            dom.create()
        accel = self.accelerator.name if self.accelerator else "tcg"
        seconds = self.wait_for_agent(dom, res.name, timeout or BOOT_TIMEOUT[accel], progress)
        return LibvirtGuest(self, dom, res, seconds)

    def wait_for_agent(self, dom: "libvirt.virDomain", name: str, timeout: float, progress: Progress) -> float:
        """Ping the agent until it answers; a boot with an empty console after
        :data:`STALLED_BOOT_SECONDS` is restarted once (the deadline starts again)."""
        with Silence(progress, f"host {self.hv.host_label}", f"{name} booting: libvirt and its guest agent") as silence:
            return self._wait_for_agent(dom, name, timeout, progress, silence)

    def _wait_for_agent(self, dom: "libvirt.virDomain", name: str, timeout: float, progress: Progress, silence: Silence) -> float:
        accel = self.accelerator.name if self.accelerator else "tcg"
        stalled_after = min(STALLED_BOOT_SECONDS[accel], timeout / 2)
        started = time.monotonic()
        restarted = False
        last = ""
        while True:
            elapsed = time.monotonic() - started
            try:
                active = dom.isActive()
            except libvirt.libvirtError as exc:
                if not self._connection_alive():  # the host, not the guest, went away
                    raise HypervisorError(f"lost the libvirt connection to host {self.hv.host_label} ({self.uri}) while "
                                              f"{name} booted: {exc.get_error_message()}",
                                              "`vmbench cleanup SCENARIO` once the host answers, then `vmbench run --resume`") from None
                active = False
            silence.answered()
            if not active:
                raise GuestError(f"{name} stopped while booting", self._console_hint(name))
            try:
                agent_command(dom, {"execute": "guest-ping"}, 2)
                return time.monotonic() - started
            except GuestError as exc:
                last = str(exc)
            silence.answered()
            if not restarted and elapsed > stalled_after and self._console_empty(name):
                progress.warn(self._restart_stalled(dom, name, elapsed))
                restarted, started = True, time.monotonic()
                continue
            if elapsed > timeout:
                raise GuestError(f"{name}: the guest agent did not answer within {timeout:g}s ({last})", self._console_hint(name))
            progress.status(f"booting {name}: {elapsed:.0f}s, waiting for the guest agent")
            time.sleep(AGENT_POLL_SECONDS)

    def _connection_alive(self) -> bool:
        try:
            return self._conn is not None and self._conn.isAlive() == 1
        except libvirt.libvirtError:
            return False

    def _console_empty(self, name: str) -> bool:
        text = ops.read_text(self.host, self.console_path(name))
        return text is not None and not text.strip()

    def _restart_stalled(self, dom: "libvirt.virDomain", name: str, elapsed: float) -> str:
        """Log where the vCPU was (for a bug report), power the domain off and start it again;
        return what was done, for the user."""
        try:
            regs = monitor_command(dom, {"execute": "human-monitor-command", "arguments": {"command-line": "info registers"}})
            where = " ".join(re.findall(r"\b(RIP=\S+|CR0=\S+)", str(regs))[:2]) or "no registers"
        except VmbenchError as exc:
            where = exc.message
        said = f"{name}: no console output and no guest agent {elapsed:.0f}s after the start; starting it again, once"
        log.warning("%s (vCPU 0: %s)", said, where)
        with hypervisor_errors(f"restarting {name}"):
            dom.destroy()
            dom.create()
        return said

    def _console_hint(self, name: str) -> str:
        text = ops.read_text(self.host, self.console_path(name))
        if text is None:
            return "no console output was captured"
        lines = [l for l in text.splitlines() if l.strip()][-15:]
        return "last console lines:\n  " + "\n  ".join(lines) if lines else "the console stayed empty"

    def remove_vm(self, res: VmResources) -> None:
        """Destroy and undefine the domain, delete its volumes and console log.  Idempotent;
        reconnects first when the connection to libvirt was lost."""
        errors = []
        dom = None
        for attempt in (1, 2):
            try:
                dom = self.conn.lookupByName(res.name)
                break
            except VmbenchError as exc:
                raise HypervisorError(f"cannot remove {res.name}: {exc.message}", "run `vmbench cleanup` once the host answers") from None
            except libvirt.libvirtError as exc:
                if exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN:
                    break
                if attempt == 1:  # the connection may have died without libvirt noticing yet: reopen once
                    log.warning("looking up %s: %s; reconnecting to libvirt", res.name, exc.get_error_message())
                    self.close()
                    self._lost = True
                    continue
                errors.append(f"{res.name}: {exc.get_error_message()}")  # a dead connection is not "already gone"
        if dom is not None:
            if _is_ours(dom):
                for step in (_destroy, _undefine):
                    try:
                        step(dom)
                    except libvirt.libvirtError as exc:
                        errors.append(f"{res.name}: {exc.get_error_message()}")
            else:
                errors.append(f"{res.name} exists but has no vmbench metadata; left alone")
        for name in dict.fromkeys(res.volumes + res.expected_volumes):
            try:
                self._storage_of(name).delete_volume(name)
            except VmbenchError as exc:
                errors.append(exc.message)
        try:
            ops.remove_file(self.host, self.console_path(res.name))
            if self.ceph is not None:
                remove_ceph_secret(self.conn, res.name)
        except VmbenchError as exc:
            errors.append(f"console log or secret of {res.name}: {exc.message}")
        if errors:
            raise HypervisorError("cleanup incomplete: " + "; ".join(errors), "run `vmbench cleanup` to retry")

    def _storage_of(self, volume: str) -> VolumeStorage:
        """Root disks are in the dir pool; scratch and host reference volumes in the storage."""
        m = VOLUME_RE.match(volume)
        return self.pool_storage if m and m.group(2) == VolumeRole.ROOT.value else self.storage

    # ---- evidence helpers -----------------------------------------------------------------

    def qemu_pid(self, name: str) -> int | None:
        """The QEMU process of domain ``name``, from libvirt's pid file on the host."""
        try:
            pid = self.host.read_file(f"/run/libvirt/qemu/{name}.pid").decode().strip()
        except OSError as exc:
            log.warning("cannot read the QEMU pid of %s: %s", name, exc)
            return None
        return int(pid) if pid.isdigit() else None

    def qemu_cmdline(self, name: str) -> list[str]:
        """The QEMU process's argv, from libvirt's pid file on the host."""
        try:
            pid = self.host.read_file(f"/run/libvirt/qemu/{name}.pid").decode().strip()
            raw = self.host.read_file(f"/proc/{pid}/cmdline")
        except OSError as exc:
            log.warning("cannot read the QEMU command line of %s: %s", name, exc)
            return []
        return [a.decode(errors="replace") for a in raw.split(b"\0") if a]

    def check_step(self, need: int, what: str = "the step's VMs") -> None:
        """Before a load step of a run across several hosts: libvirt and the host's shell still
        answer (reconnecting if they dropped), and ``need`` bytes of memory are available."""
        try:
            with hypervisor_errors(f"asking libvirt on {self.host.name}"):
                self.conn.getLibVersion()
            meminfo = self.host.read_file("/proc/meminfo").decode(errors="replace")
        except (VmbenchError, OSError) as exc:
            raise PreflightError(f"host {self.host.name} does not answer: {getattr(exc, 'message', exc)}",
                                 "check the host and its SSH; `vmbench run --resume` reruns the step") from None
        available = next((int(line.split()[1]) << 10 for line in meminfo.splitlines() if line.startswith("MemAvailable:")), None)
        if available is not None and need > available:
            raise PreflightError(f"{what} need {need >> 20} MiB of memory; {self.host.name} has {available >> 20} MiB available",
                                 "lower the step's VM count or vm.memory, or free memory on the host")

    # ---- leftovers ------------------------------------------------------------------------

    def leftovers(self) -> list[Leftover]:
        out: list[Leftover] = []
        with hypervisor_errors("listing domains"):
            doms = self.conn.listAllDomains(0)
        for dom in doms:
            try:
                m = NAME_RE.match(dom.name())
                if m and _is_ours(dom):
                    state = "running" if dom.isActive() else "shut off"
                    out.append(Leftover("domain", dom.name(), m.group(1), state))
            except libvirt.libvirtError:
                continue  # undefined since the listing (a run on this host cleaning up): not left over
        with hypervisor_errors("listing secrets"):
            out += [Leftover("secret", usage, tag, "libvirt secret (cephx key)") for usage, tag in our_secrets(self.conn)]
        out += self.pool_storage.leftovers()
        if self.storage is not self.pool_storage:
            out += self.storage.leftovers()
        for f in sorted(ops.list_dir(self.host, self.paths.consoles)):
            m = CONSOLE_RE.match(f)
            if m:
                out.append(Leftover("file", f"{self.paths.consoles}/{f}", m.group(1), "console log"))
        return out + work_leftovers(self.host, self.paths.work)

    def remove_leftover(self, item: Leftover) -> None:
        if item.kind == "domain":
            try:
                dom = self.conn.lookupByName(item.name)
            except libvirt.libvirtError:
                return
            if not (NAME_RE.match(item.name) and _is_ours(dom)):
                if _gone(dom):
                    return
                raise HypervisorError(f"{item.name} is not a vmbench domain; left alone")
            with hypervisor_errors(f"removing {item.name}"):
                try:
                    _destroy(dom)
                    _undefine(dom)
                except libvirt.libvirtError as exc:
                    if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                        raise  # else gone in between (a transient domain whose own run removed it): nothing left
        elif item.kind == "volume":
            self.pool_storage.delete_path(item.name)
        elif item.kind == "secret":
            remove_ceph_secret(self.conn, item.name)
        elif item.kind == "file":
            parent, _, base = item.name.rpartition("/")
            if parent == self.paths.consoles and CONSOLE_RE.match(base):
                ops.remove_file(self.host, item.name)
        elif item.kind == "directory":
            remove_work_leftover(self.host, self.paths.work, item)
        elif self.storage is not self.pool_storage:  # what the scratch storage listed: zvols, datasets, RBD images...
            self.storage.delete_path(item.name)


def _is_ours(dom: "libvirt.virDomain") -> bool:
    try:
        dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS, 0)
        return True
    except libvirt.libvirtError:
        return False


def _gone(dom: "libvirt.virDomain") -> bool:
    """Whether the domain no longer exists (removed since it was looked up)."""
    try:
        dom.info()
        return False
    except libvirt.libvirtError as exc:
        return exc.get_error_code() == libvirt.VIR_ERR_NO_DOMAIN


def _destroy(dom: "libvirt.virDomain") -> None:
    if dom.isActive():
        try:
            dom.destroy()
        except libvirt.libvirtError as exc:
            if exc.get_error_code() != libvirt.VIR_ERR_OPERATION_INVALID or dom.isActive():
                raise  # "domain is not running": it stopped by itself in between


def _undefine(dom: "libvirt.virDomain") -> None:
    if dom.isPersistent():
        dom.undefineFlags(0)


def _version(n: int) -> str:
    return f"{n // 1000000}.{n // 1000 % 1000}.{n % 1000}"
