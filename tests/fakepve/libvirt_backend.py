"""LibvirtBackend: a fake PVE VM is a real TCG guest under libvirt, built with vmbench's own
domain XML builder from the PVE configuration.

Mapping (:func:`vm_config`): the boot disk (first in ``boot: order=``) is the clone's qcow2
overlay; the one other disk is vmbench's scratch disk: ``virtioN`` -> virtio-blk, ``scsiN`` ->
virtio-scsi (``scsihw: virtio-scsi-single``: one controller per disk, iothread honoured;
``virtio-scsi-pci``: one shared controller, iothread ignored as PVE does), ``sataN`` -> SATA;
``cache``/``aio``/``iothread``/``serial`` from the drive (PVE defaults: cache none, aio
io_uring), ``detect_zeroes``/``discard`` as qemu-server turns them into QEMU's (:mod:`.qemu`:
detect-zeroes on by default, unmap with ``discard=on``), its I/O limits (``iops_rd``,
``mbps``, ``iops_max``... as QEMU gets them from qemu-server) as the scratch disk's
``<iotune>``, and on QEMU's command line as PVE 9 has them (:func:`add_throttle_chain`: the
disk's ``-object throttle-group`` and a ``throttle`` ``-blockdev`` named ``drive-KEY`` above
libvirt's format node; libvirt 9.0 applies ``<iotune>`` over QMP only, so the command line
vmbench reads back would show no limit); a boot disk whose content was imported (``import-from``: vmbench's own pushed template)
boots from itself through SeaBIOS, as on PVE, any other with the image's kernel; a scratch disk
on an rbd storage (its path ``rbd:...``, tests.fakepve.rbd) is a libvirt network disk through
librbd, the key in a private ephemeral secret per VM (:meth:`LibvirtBackend.rbd_disk`);
``cores``x``sockets`` vCPUs, ``memory`` MiB; ``cpu``: kvm64/qemu64/named models
as libvirt models, ``max`` -> maximum, ``host`` -> host-passthrough, x86-64-v2(-AES)/v3/v4 ->
qemu64 plus their flags, ``flags=+aes;-pcid`` -> features."""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote

from vmbench.drivers.libvirt.secrets import define_ceph_secret
from vmbench.drivers.libvirt.xml import NS, DomainSpec, RbdDisk, domain_xml
from vmbench.fio.rbd import parse_target
from vmbench.storage.rbd import parse_keyring
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat

from . import qemu

from .backends import AgentUnavailable, BackendError, DriveView, VmView, qemu_img, remove_file, sparse_file
from .formats import BUILTIN_MODELS

UNSUPPORTED_FLAGS = {"hv-tlbflush", "hv-evmcs", "nested-virt"}


def parse_cpu(value: str | None) -> CpuConfig:
    """PVE's ``cpu`` option -> vmbench's CpuConfig."""
    cputype, flags = "kvm64", ""
    for part in (value or "").split(","):
        if not part:
            continue
        key, sep, val = part.partition("=")
        if not sep:
            cputype = part
        elif key == "cputype":
            cputype = val
        elif key == "flags":
            flags = val
        else:
            raise BackendError(f"LibvirtBackend: cpu option '{key}' is not supported")
    mode, model = CpuMode.MODEL, cputype
    if cputype in BUILTIN_MODELS:
        model, base = BUILTIN_MODELS[cputype]
        flags = ";".join(f for f in (base, flags) if f)
    elif cputype == "host":
        mode, model = CpuMode.HOST_PASSTHROUGH, None
    elif cputype == "max":
        mode, model = CpuMode.MAX, None
    aes = Feature.DEFAULT
    features: dict[str, Feature] = {}
    for flag in [f for f in flags.split(";") if f]:
        state, name = (Feature.ON if flag[0] == "+" else Feature.OFF), flag[1:]
        if name in UNSUPPORTED_FLAGS:
            raise BackendError(f"LibvirtBackend: cpu flag '{name}' is not supported")
        if name == "aes":
            aes = state
        else:
            features[name] = state
    return CpuConfig(mode=mode, model=model, aes=aes, features=tuple(features.items()))


def boot_order(config: dict) -> list[str]:
    boot = str(config.get("boot", ""))
    m = re.search(r"order=([^,]+)", boot)
    return m.group(1).split(";") if m else []


def split_disks(vm: VmView) -> tuple[DriveView, DriveView | None]:
    disks = [d for d in vm.drives if d.opts.get("media", "disk") != "cdrom"]
    if not disks:
        raise BackendError(f"VM {vm.vmid} has no disk")
    order = boot_order(vm.config)
    ranked = sorted(disks, key=lambda d: (order.index(d.key) if d.key in order else len(order),
                                          ("virtio", "scsi", "sata", "ide").index(d.bus), d.index))
    root, rest = ranked[0], ranked[1:]
    if len(rest) > 1:
        raise BackendError("LibvirtBackend supports one disk besides the boot disk, got " + ", ".join(d.key for d in rest))
    return root, (rest[0] if rest else None)


def vm_config(vm: VmView) -> tuple[VmConfig, DriveView, DriveView | None, list[str]]:
    """(vmbench VmConfig, root drive, scratch drive, PVE warnings at start)."""
    conf = vm.config
    root, scratch = split_disks(vm)
    warnings: list[str] = []
    scsihw = str(conf.get("scsihw", "lsi"))
    bus, iothread, cache, aio, fmt = Bus.VIRTIO_BLK, False, Cache.NONE, Aio.IO_URING, ImageFormat.RAW
    zeroes, discard = DetectZeroes.ON, Discard.IGNORE
    if scratch is not None:
        opts = scratch.opts
        iothread = str(opts.get("iothread", 0)) == "1"
        if scratch.bus == "virtio":
            bus = Bus.VIRTIO_BLK
        elif scratch.bus == "sata":
            bus = Bus.SATA
        elif scratch.bus == "scsi":
            if scsihw == "virtio-scsi-single":
                bus = Bus.VIRTIO_SCSI
            elif scsihw == "virtio-scsi-pci":
                bus = Bus.VIRTIO_SCSI_SHARED if root.bus == "scsi" else Bus.VIRTIO_SCSI
                if iothread:
                    warnings.append("iothread is only valid with virtio disk or virtio-scsi-single controller, ignoring")
                iothread = False
            else:
                raise BackendError(f"LibvirtBackend: scsihw '{scsihw}' is not supported (virtio-scsi-single or virtio-scsi-pci)")
        else:
            raise BackendError(f"LibvirtBackend: {scratch.key}: bus '{scratch.bus}' is not supported")
        cache = Cache.parse(opts.get("cache", "none"))
        aio = Aio.parse(opts.get("aio", "io_uring"))
        fmt = ImageFormat.parse(scratch.fmt)
        zeroes, discard = DetectZeroes.parse(qemu.detect_zeroes(opts)), Discard.parse(qemu.discard(opts))
    memory = int(str(conf.get("memory", "512")).split(",")[0].removeprefix("current="))
    vcpus = int(conf.get("cores", 1)) * int(conf.get("sockets", 1))
    cfg = VmConfig(vcpus=vcpus, memory_mib=memory, bus=bus, cache=cache, iothread=iothread, aio=aio,
                   cpu=parse_cpu(conf.get("cpu")), format=fmt, detect_zeroes=zeroes, discard=discard)
    return cfg, root, scratch, warnings


def add_iotune(disk: ET.Element, opts: dict) -> None:
    """The drive's I/O limits as QEMU gets them from qemu-server (:func:`.qemu.throttle_limits`)
    as the disk's ``<iotune>``, so the guest is really limited (libvirt applies it with
    block_set_io_throttle); nothing without limits."""
    limits = qemu.throttle_limits(opts)
    if not limits:
        return
    iotune = ET.Element("iotune")
    for key, value in limits.items():
        ET.SubElement(iotune, qemu.IOTUNE[key]).text = str(value)
    target = disk.find("target")
    disk.insert(list(disk).index(target) + 1 if target is not None else len(disk), iotune)


QEMU_NS = "http://libvirt.org/schemas/domain/qemu/1.0"
SCRATCH_ALIAS = "ua-vmbench-scratch"
#: libvirt 9.0 numbers the node names of the last disk's chain first: the scratch disk (the
#: domain's last disk, raw, no backing) is libvirt-1; QEMU refuses to start if it is not
SCRATCH_NODE = "libvirt-1-format"


def add_throttle_chain(dom: ET.Element, disk: ET.Element, key: str, opts: dict) -> None:
    """The drive's limits on QEMU's command line as qemu-server 9 puts them: the throttle
    group (:func:`.qemu.throttle_group`) and a ``throttle`` node ``drive-KEY`` above libvirt's
    format node, which the disk's device then uses (``<qemu:override>`` of its ``drive``);
    nothing without limits.  The guest's I/O goes through that node: the limit read back is
    one in effect."""
    if not qemu.throttle_limits(opts):
        return
    ET.SubElement(disk, "alias", name=SCRATCH_ALIAS)
    node = json.dumps({"driver": "throttle", "node-name": f"drive-{key}", "throttle-group": f"throttle-drive-{key}",
                       "file": SCRATCH_NODE}, separators=(",", ":"))
    cmdline = ET.SubElement(dom, f"{{{QEMU_NS}}}commandline")
    for arg in ("-object", qemu.throttle_group(key, opts), "-blockdev", node):
        ET.SubElement(cmdline, f"{{{QEMU_NS}}}arg", value=arg)
    override = ET.SubElement(ET.SubElement(dom, f"{{{QEMU_NS}}}override"), f"{{{QEMU_NS}}}device", alias=SCRATCH_ALIAS)
    ET.SubElement(ET.SubElement(override, f"{{{QEMU_NS}}}frontend"), f"{{{QEMU_NS}}}property", name="drive",
                  type="string", value=f"drive-{key}")


def _remove_domain(dom) -> bool:
    """Destroy (and undefine, if persistent) a domain; True when it is gone."""
    import libvirt

    try:
        persistent = dom.isPersistent()
        if dom.isActive():
            dom.destroy()
        if persistent:
            dom.undefine()
    except libvirt.libvirtError:
        try:
            dom.isActive()
        except libvirt.libvirtError:
            return True  # it vanished (a transient domain after destroy)
        return False
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LibvirtBackend:
    """Real guests: one transient libvirt domain ``<prefix><vmid>`` per started VM, removed on
    stop, destroy or :meth:`close` (only domains carrying this server's run tag)."""

    def __init__(self, uri: str = "qemu:///system", image: str = "debian12", domain_prefix: str = "vmbtest-pve-") -> None:
        if domain_prefix.startswith("vmbench-"):
            raise ValueError("domain names starting with 'vmbench-' belong to vmbench runs")
        self.uri = uri
        self.image_name = image
        self.prefix = domain_prefix
        self.conn = None
        self.image = None
        self.root: Path | None = None
        self.run_tag = ""
        self.started: dict[int, str] = {}
        self.xml: dict[int, str] = {}  # the last domain XML per vmid (for tests)
        self.warnings: dict[int, list[str]] = {}

    def setup(self, root: Path) -> None:
        from vmbench.drivers.libvirt.connection import open_connection
        from vmbench.images import current_image

        self.image = current_image(self.image_name)
        if self.image is None:
            raise BackendError(f"the {self.image_name} image is not built (vmbench images build {self.image_name})")
        self.root = root
        self.run_tag = "fakepve-" + root.name.rsplit("-", 1)[-1][:8]
        (root / "console").mkdir(mode=0o755, exist_ok=True)
        self.conn = open_connection(self.uri)
        self.sweep_stale()

    def sweep_stale(self) -> None:
        """Remove domains (and private directories) left by fake servers whose process died
        (killed test runs): their metadata names the owning pid and root."""
        import libvirt

        for dom in self.conn.listAllDomains(0):
            if not dom.name().startswith(self.prefix):
                continue
            try:
                meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS, 0)
            except libvirt.libvirtError:
                continue
            pid = re.search(r">fakepve-pid=(\d+)<", meta)
            root = re.search(r">fakepve-root=([^<]+)<", meta)
            if not pid or _alive(int(pid.group(1))):
                continue
            if not _remove_domain(dom):
                continue
            if root and re.fullmatch(r"/var/lib/vmbench-fakepve-[0-9a-f]{8}", root.group(1)):
                shutil.rmtree(root.group(1), ignore_errors=True)

    # ---- volumes -------------------------------------------------------------------------

    def template_volume(self, path: str, fmt: str) -> int:
        if fmt != "qcow2":
            raise BackendError("LibvirtBackend needs the template on a directory storage (a qcow2 base volume)")
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(self.image.root), path)
        return int(self.image.manifest.get("root_virtual_bytes") or 0) or self._virtual_size(path)

    @staticmethod
    def _virtual_size(path: str) -> int:
        import subprocess
        out = subprocess.run(["qemu-img", "info", "--output=json", "-U", path], capture_output=True, text=True, check=True).stdout
        return int(json.loads(out)["virtual-size"])

    def create_volume(self, path: str, size: int, fmt: str, backing: str | None = None) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        if backing:
            qemu_img("create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", backing, path, str(size))
        elif fmt == "qcow2":
            qemu_img("create", "-q", "-f", "qcow2", path, str(size))
        else:
            sparse_file(path, size)

    def import_volume(self, source: str, path: str, fmt: str) -> int:
        """qemu-server's import: the source's content converted into the new volume."""
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        qemu_img("convert", "-q", "-O", fmt, source, path)
        return self._virtual_size(path)

    def rename_volume(self, old: str, new: str) -> None:
        os.rename(old, new)

    def remove_volume(self, path: str) -> None:
        remove_file(path)

    # ---- domains -------------------------------------------------------------------------

    def domain_name(self, vmid: int) -> str:
        return f"{self.prefix}{vmid}"

    # ---- an rbd storage's disk: a network disk, its key in a per-VM private secret ----------

    def secret_usage(self, vmid: int) -> str:
        return f"{self.prefix}{self.run_tag}-{vmid}"

    def rbd_disk(self, vmid: int, path: str) -> RbdDisk:
        """The image an rbd storage's path names (``rbd:pool/image:conf=...:mon_host=...:id=...:keyring=...``,
        RBDPlugin::path) as libvirt's network disk: the monitors in a conf of this VM's that QEMU
        (libvirt-qemu) can read, the user's key from the node's keyring in a private ephemeral secret."""
        target = parse_target(path)
        if target is None or not target.keyring:
            raise BackendError(f"LibvirtBackend: {path} is not an rbd image with a keyring")
        conf = target.conf
        if target.mon_host:
            d = self.root / "ceph"
            d.mkdir(mode=0o755, exist_ok=True)
            d.chmod(0o755)
            conf_file = d / f"{vmid}.conf"
            conf_file.write_text(f"[global]\n\tmon_host = {target.mon_host}\n")
            conf_file.chmod(0o644)
            conf = str(conf_file)
        key = parse_keyring(Path(target.keyring).read_text(), target.user)
        if key is None:
            raise BackendError(f"LibvirtBackend: no key of client.{target.user} in {target.keyring}")
        self.remove_secret(vmid)
        define_ceph_secret(self.conn, self.secret_usage(vmid), self.run_tag, target.user, key)
        return RbdDisk(target.spec, conf, target.user, self.secret_usage(vmid))

    def remove_secret(self, vmid: int) -> None:
        import libvirt

        try:
            self.conn.secretLookupByUsage(libvirt.VIR_SECRET_USAGE_TYPE_CEPH, self.secret_usage(vmid)).undefine()
        except libvirt.libvirtError:
            pass  # none (left)

    def domain_xml(self, vm: VmView) -> tuple[str, list[str]]:
        cfg, root, scratch, warnings = vm_config(vm)
        name = self.domain_name(vm.vmid)
        serial = unquote(str(scratch.opts.get("serial", ""))) if scratch else ""
        rbd = self.rbd_disk(vm.vmid, scratch.path) if scratch is not None and scratch.path.startswith("rbd:") else None
        spec = DomainSpec(
            name=name, run_tag=self.run_tag, vm=cfg, domain_type="qemu", kernel=str(self.image.kernel),
            initrd=str(self.image.initrd), cmdline=self.image.cmdline, root_path=root.path,
            scratch_path=scratch.path if scratch else "/nonexistent", scratch_serial=serial,
            console_log=str(self.root / "console" / f"{name}.log"), machine="pc",
            cells=(f"fakepve-root={self.root}", f"fakepve-pid={os.getpid()}"),
            scratch_kind="rbd" if rbd else "file", rbd=rbd,
        )
        dom = ET.fromstring(domain_xml(spec))
        ET.register_namespace("vmbench", NS)
        ET.register_namespace("qemu", QEMU_NS)
        devices = dom.find("devices")
        for disk in devices.findall("disk"):
            src = disk.find("source")
            if scratch is None and src is not None and src.get("file") == "/nonexistent":
                devices.remove(disk)
                continue
            if scratch is not None and src is not None and (scratch.path in (src.get("file"), src.get("dev"))
                                                            or src.get("protocol") == "rbd"):
                add_iotune(disk, scratch.opts)
                add_throttle_chain(dom, disk, scratch.key, scratch.opts)
            if disk.find("serial") is not None and not disk.findtext("serial"):
                disk.remove(disk.find("serial"))
        if scratch is None:
            for ctrl in devices.findall("controller"):
                devices.remove(ctrl)
        if root.boots_itself:  # a disk imported into PVE boots as PVE boots it: SeaBIOS, then the disk's own loader
            os_ = dom.find("os")
            for tag in ("kernel", "initrd", "cmdline"):
                for el in os_.findall(tag):
                    os_.remove(el)
            for disk in devices.findall("disk"):
                src = disk.find("source")
                if src is not None and src.get("file") == root.path:
                    ET.SubElement(disk, "boot", order="1")
        return ET.tostring(dom, encoding="unicode"), warnings

    def start(self, vm: VmView) -> int:
        import libvirt

        xml, warnings = self.domain_xml(vm)
        self.xml[vm.vmid] = xml
        self.warnings[vm.vmid] = warnings
        name = self.domain_name(vm.vmid)
        try:
            self.conn.createXML(xml, 0)
        except libvirt.libvirtError as exc:
            raise BackendError(f"start failed: {exc.get_error_message()}") from None
        self.started[vm.vmid] = name
        pidfile = Path(f"/run/libvirt/qemu/{name}.pid")
        for _ in range(50):
            if pidfile.exists() and pidfile.read_text().strip():
                return int(pidfile.read_text().strip())
            time.sleep(0.1)
        raise BackendError(f"no pid file {pidfile}")

    def _domain(self, vmid: int):
        import libvirt

        try:
            return self.conn.lookupByName(self.domain_name(vmid))
        except libvirt.libvirtError:
            return None

    def stop(self, vm: VmView) -> None:
        self._destroy(vm.vmid)

    def shutdown(self, vm: VmView, timeout: float) -> None:
        dom = self._domain(vm.vmid)
        if dom is not None:
            try:
                dom.shutdown()
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and dom.isActive():
                    time.sleep(0.5)
            except Exception:  # noqa: BLE001 - fall back to a hard stop
                pass
        self._destroy(vm.vmid)

    def _destroy(self, vmid: int) -> None:
        dom = self._domain(vmid)
        self.started.pop(vmid, None)
        if dom is not None and not _remove_domain(dom) and self._domain(vmid) is not None:
            raise BackendError(f"cannot remove domain {self.domain_name(vmid)}")
        self.remove_secret(vmid)

    def running(self, vm: VmView) -> bool:
        dom = self._domain(vm.vmid)
        return bool(dom is not None and dom.isActive())

    def agent(self, vm: VmView, qga_command: dict, timeout: float) -> dict:
        import libvirt
        import libvirt_qemu

        dom = self._domain(vm.vmid)
        if dom is None:
            raise AgentUnavailable("domain not running")
        try:
            reply = libvirt_qemu.qemuAgentCommand(dom, json.dumps(qga_command), max(1, int(timeout)), 0)
        except libvirt.libvirtError as exc:
            msg = exc.get_error_message() or ""
            code = exc.get_error_code()
            if code in (getattr(libvirt, "VIR_ERR_AGENT_UNRESPONSIVE", 86), getattr(libvirt, "VIR_ERR_AGENT_UNSYNCED", 97)):
                raise AgentUnavailable(msg) from None
            m = re.search(r"unable to execute QEMU agent command '[^']+': (.*)", msg, re.S)
            if m:
                return {"error": {"class": "GenericError", "desc": m.group(1).strip()}}
            if "not running" in msg or "agent is not" in msg:
                raise AgentUnavailable(msg) from None
            raise BackendError(f"guest agent: {msg}") from None
        return json.loads(reply) if reply else {"return": {}}

    def close(self) -> None:
        """Remove every domain of this server (by run tag), even after failures."""
        if self.conn is None:
            return
        import libvirt

        try:
            for dom in self.conn.listAllDomains(0):
                if not dom.name().startswith(self.prefix):
                    continue
                try:
                    meta = dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, NS, 0)
                except libvirt.libvirtError:
                    continue
                if f">{self.run_tag}<" in meta:
                    _remove_domain(dom)
            for secret in self.conn.listAllSecrets(0):  # this server's rbd disks' keys
                if (secret.usageID() or "").startswith(f"{self.prefix}{self.run_tag}-"):
                    secret.undefine()
        finally:
            self.started.clear()
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001
                pass
            self.conn = None
