"""A user's libvirt domain, read only: its disk and CPU settings as vmbench's axes (issue 18).

:func:`parse_domain` is pure: a domain's XML (as ``virsh dumpxml --inactive`` prints it) to a
:class:`~vmbench.drivers.existing.CurrentVm`, each setting read by its axis's row of
libvirt's codec table (:mod:`.codec`), the row that writes it into vmbench's own domains.  :func:`read_domain` opens libvirt
**read-only** (``virConnectOpenReadOnly``) and asks for the inactive XML (what the user
configured, not what a running guest happens to have): nothing on the domain can change.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from ...errors import HypervisorError, PreflightError
from ...scenario.model import Hypervisor, VmConfig
from ..existing import CurrentVm
from .. import make_host
from .bridge import LibvirtBridge
from .codec import CODECS, text_of, user_domain
from .connection import quiet_errors, libvirt
from .diskbus import target as _target


def parse_domain(xml: str, *, source: str, ident: str, disk: str | None = None) -> CurrentVm:
    """The settings of ``disk`` (a target dev such as ``vda``; default: the first
    ``device="disk"``) and the domain's CPU, vCPUs and memory, each as its axis's row of
    libvirt's codec table reads it.  What libvirt leaves to QEMU is read as QEMU's default and
    said in ``assumed``; what no axis expresses is said in ``unknown``."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as exc:
        raise HypervisorError(f"{source}: the domain XML cannot be read: {exc}") from None
    if root.tag != "domain":
        raise HypervisorError(f"{source}: the XML is a <{root.tag}>, not a <domain>")
    el = _pick_disk(root, source, disk)
    user = user_domain(root, el, [], [])
    vm = VmConfig()
    for codec in CODECS:
        vm = codec.current(user, vm)
    extra = {"name": root.findtext("name") or ident, "cpu": user.extra.get("cpu", ""),
             "iothreads": (root.findtext("iothreads") or "").strip(),
             "targets": ",".join(_target(d).get("dev", "") for d in root.findall("./devices/disk")),
             "scsi_controllers": ",".join(c.get("index", "0") for c in root.findall("./devices/controller[@type='scsi']")),
             **{k: v for k, v in user.extra.items() if k != "cpu"}}
    return CurrentVm(source=source, vm=vm, disk=user.dev, disk_spec=text_of(el), kind="libvirt", ident=ident,
                     unknown=tuple(user.unknown), storage=_storage(el), extra=extra, assumed=tuple(user.assumed))


def read_domain(uri: str, name: str, *, disk: str | None = None, shown_as: str | None = None) -> CurrentVm:
    """The domain ``name`` at ``uri`` through a read-only libvirt connection (``shown_as``:
    the URI as the user wrote it, for messages, when ``uri`` is a local bridge to it)."""
    where = shown_as or uri
    if libvirt is None:
        raise PreflightError("the libvirt Python binding is not installed", "run `make demo` or `pip install libvirt-python`")
    libvirt.registerErrorHandler(quiet_errors, None)
    try:
        conn = libvirt.openReadOnly(uri)
    except libvirt.libvirtError as exc:
        raise PreflightError(f"cannot reach libvirt at {where} (read-only) to read domain {name}: {exc.get_error_message()}",
                             "check the URI and that libvirtd runs there (scripts/ensure-libvirtd, systemctl start libvirtd)") from None
    try:
        try:
            dom = conn.lookupByName(name)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"libvirt domain {name} at {where}: {exc.get_error_message()}",
                                  f"`virsh -c {where} list --all` lists the domains there") from None
        try:
            xml = dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE)
        except libvirt.libvirtError as exc:
            raise HypervisorError(f"reading the XML of libvirt domain {name} at {where}: {exc.get_error_message()}") from None
    finally:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
    return parse_domain(xml, source=f"libvirt domain {name} ({where})", ident=name, disk=disk)


# ---- the parts --------------------------------------------------------------------------------


def _pick_disk(root: ET.Element, source: str, dev: str | None) -> ET.Element:
    disks = root.findall("./devices/disk")
    if dev is not None:
        for el in disks:
            if _target(el).get("dev") == dev:
                if el.get("device", "disk") != "disk":
                    raise HypervisorError(f"{source}: {dev} is a {el.get('device')}, not a disk")
                return el
        names = ", ".join(_target(d).get("dev", "?") for d in disks if d.get("device", "disk") == "disk") or "none"
        raise HypervisorError(f"{source} has no disk with target {dev}", f"its disks: {names}")
    for el in disks:
        if el.get("device", "disk") == "disk":
            return el
    raise HypervisorError(f"{source} has no disk (device='disk')", "vmbench reads a VM's disk settings from one of its disks")


def _storage(disk: ET.Element) -> dict[str, object]:
    src = disk.find("source")
    if src is None:
        return {}
    path = src.get("file") or src.get("dev")
    out: dict[str, object] = {}
    if path:
        out["path"] = path
        if path.startswith("/dev/zvol/"):
            out["zvol"] = path.removeprefix("/dev/zvol/")
    for key in ("pool", "volume", "protocol", "name"):
        if src.get(key):
            out[key] = src.get(key)
    return out


def read_current(hv: Hypervisor, name: str, disk: str | None) -> CurrentVm:
    """The domain ``name`` on ``hv``, read only: a read-only connection to ``hv.uri``, over SSH
    through vmbench's own verified SSH connection as the driver connects."""
    if not hv.remote:
        return read_domain(hv.uri, name, disk=disk)
    host = make_host(hv)
    bridge = None
    try:
        opener = getattr(host, "open_stream")
        bridge = LibvirtBridge(opener, hv.uri)
        return read_domain(bridge.local_uri, name, disk=disk, shown_as=hv.uri)
    finally:
        if bridge is not None:
            bridge.close()
        host.close()
