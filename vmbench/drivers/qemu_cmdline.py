"""QEMU's command line read back (pure): which disk options QEMU really runs with.

Both drivers' evidence reads it (libvirt from the domain's log or ``/proc``, Proxmox from
``/proc/<pid>/cmdline`` on the node).  Two forms of disk (NOTES.md section 3):

- legacy ``-drive file=PATH,if=none,id=drive-virtio1,cache=none,aio=io_uring,format=raw,
  detect-zeroes=on,discard=on`` plus ``-device virtio-blk-pci,drive=drive-virtio1,
  iothread=iothread-virtio1,serial=...`` (PVE 8, and 9 with a machine version below 10.0);
- ``-blockdev`` JSON nodes, nested in one chain (PVE 9: throttle -> format -> file) or
  linked by node name (libvirt: ``"file":"libvirt-1-storage"``), and a ``-device``
  (``key=value`` or JSON) with ``drive=`` naming the top node and ``write-cache``.

The scratch disk's device is found by its serial (PVE and libvirt both put it on the
device), else by ``drive=drive-<disk key>`` (PVE), else as the chain holding the scratch
file.  The cache mode comes from the protocol (file) node's ``cache.direct``/``no-flush`` and
the device's ``write-cache`` (or a ``-drive``'s ``cache=``), through
:meth:`~vmbench.settings.Cache.from_flags`; aio from that node (QEMU's default: threads),
or :data:`NOT_APPLICABLE` when the protocol driver has no aio setting (librbd, libiscsi,
NBD...: only file-posix's ``file``/``host_device``/``host_cdrom`` have one, and qemu-server
gives ``aio`` to those only, ``Blockdev.pm`` generate_file_blockdev; a ``-drive`` carries
``aio=`` whatever the protocol, ``QemuServer.pm`` print_drive_commandline_full, and QEMU
ignores it for the others);
the format from the node above it; ``detect-zeroes`` as the chain applies it (the most any
node does: off < on < unmap; QEMU's default off) and ``discard`` as it reaches the storage
(unmap only if every node passes discards on; QEMU's default ignore); the iothread from the
device or, for SCSI, its controller; the accelerator from ``-accel``, ``-machine accel=`` or
``-enable-kvm`` (else a binary named ``kvm`` prefers KVM).

The I/O limits as QEMU runs them (:func:`throttle_readings`, one reading per limit axis in
IOPS, MiB/s and seconds, :data:`NO_LIMIT` where none): from a ``-drive``'s
``throttling.iops-total=``/``throttling.bps-read-max=``/``throttling.iops-total-max-length=``
(PVE 8, ``QemuServer.pm`` print_drive_commandline_full), or from the ``-object
throttle-group`` a ``throttle`` node of the chain names (PVE 9, ``Blockdev.pm``
generate_throttle_group: JSON ``"limits":{"iops-total":...}``; the key=value forms
``limits.iops-total=`` and ``x-iops-total=`` too); :func:`qmp_limits` reads QMP
``query-block`` (libvirt applies ``<iotune>`` with block_set_io_throttle, not on the command
line).

The CPU as QEMU runs it (:func:`cpu_readings`): the ``-cpu`` model, which is not always the
configured one (Proxmox passes its built-in x86-64-v2-AES as ``qemu64,+aes,...`` and maps
deprecated models such as Icelake-Client to others, ``CPUConfig.pm`` get_cpu_options), its
forced flags, and whether it has AES-NI: from a flag, else from the model itself.
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ..scenario.model import LIMIT_BURSTS, LIMIT_NAMES, LIMIT_RATES, MiB, limit_mbps
from ..settings import Cache, DetectZeroes, Discard
from .base import Applied

PROTOCOL_DRIVERS = ("file", "host_device", "host_cdrom", "rbd", "nbd", "iscsi", "nfs", "gluster", "nvme", "ssh",
                    "http", "https")
#: the protocol drivers that have an ``aio`` option (QEMU's file-posix); the others do their
#: own I/O (librbd, libiscsi, libnfs, libgfapi, NBD, userspace NVMe...)
AIO_DRIVERS = ("file", "host_device", "host_cdrom")
#: a setting the disk's QEMU block driver does not have (aio on librbd or libiscsi)
NOT_APPLICABLE = "not applicable"
PASS_THROUGH = ("throttle", "copy-on-read", "zeroinit", "alloc-track", "preallocate", "compress")


def split_opts(text: str) -> list[str]:
    """QEMU's ``a=b,c=d`` with ``,,`` as an escaped comma."""
    out, cur, i = [], [], 0
    while i < len(text):
        ch = text[i]
        if ch == "," and text[i + 1:i + 2] == ",":
            cur.append(",")
            i += 2
            continue
        if ch == ",":
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
        i += 1
    out.append("".join(cur))
    return out


def qemu_opts(text: str, implied: str) -> dict[str, Any]:
    """``-device``/``-object``/``-machine`` arguments: JSON or ``first,k=v,...`` (``first`` under ``implied``)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
            return value if isinstance(value, dict) else {}
        except ValueError:
            return {}
    out: dict[str, Any] = {}
    for i, item in enumerate(split_opts(text)):
        key, eq, value = item.partition("=")
        if not eq:
            if i == 0:
                out[implied] = item
            else:
                out[item] = "on"
            continue
        out[key] = value
    return out


@dataclass
class QemuArgs:
    """The parts of a QEMU command line vmbench reads."""

    binary: str = ""
    devices: list[dict] = field(default_factory=list)
    drives: list[dict] = field(default_factory=list)  # legacy -drive
    nodes: dict[str, dict] = field(default_factory=dict)  # blockdev node-name -> node (nested ones included)
    objects: list[dict] = field(default_factory=list)
    machine: dict = field(default_factory=dict)
    accels: list[str] = field(default_factory=list)
    enable_kvm: bool = False
    cpu: str | None = None


def parse_cmdline(argv: list[str] | tuple[str, ...]) -> QemuArgs:
    out = QemuArgs(binary=argv[0] if argv else "")
    i = 1
    while i < len(argv):
        opt = argv[i]
        arg = argv[i + 1] if i + 1 < len(argv) else ""
        takes = True
        if opt == "-device":
            out.devices.append(qemu_opts(arg, "driver"))
        elif opt == "-drive":
            out.drives.append(qemu_opts(arg, "file"))
        elif opt == "-blockdev":
            node = qemu_opts(arg, "driver")
            _register(node, out.nodes)
        elif opt == "-object":
            out.objects.append(qemu_opts(arg, "qom-type"))
        elif opt in ("-machine", "-M"):
            out.machine.update(qemu_opts(arg, "type"))
        elif opt == "-accel":
            out.accels.append(str(qemu_opts(arg, "accel").get("accel", "")))
        elif opt == "-cpu":
            out.cpu = arg
        elif opt == "-enable-kvm":
            out.enable_kvm = True
            takes = False
        else:
            takes = bool(arg) and not arg.startswith("-") and opt.startswith("-")
        i += 2 if takes else 1
    return out


def _register(node: dict, nodes: dict[str, dict]) -> None:
    """Index a blockdev node and the nodes nested in it by node-name."""
    name = node.get("node-name")
    if isinstance(name, str):
        nodes[name] = node
    for key in ("file", "backing", "image"):
        child = node.get(key)
        if isinstance(child, dict):
            _register(child, nodes)


def accelerator(args: QemuArgs) -> str | None:
    """kvm or tcg, as the command line asks; None when it does not say."""
    for acc in args.accels:
        if acc in ("kvm", "tcg"):
            return acc
    accel = str(args.machine.get("accel") or "")
    if accel:
        return accel.split(":")[0] if accel.split(":")[0] in ("kvm", "tcg") else None
    if args.enable_kvm:
        return "kvm"
    if posixpath.basename(args.binary).endswith("kvm"):
        return "kvm"  # QEMU prefers KVM when its program name ends with kvm (PVE's /usr/bin/kvm)
    return None


def _child(node: dict, nodes: Mapping[str, dict]) -> dict | None:
    child = node.get("file")
    if isinstance(child, str):
        return nodes.get(child)
    return child if isinstance(child, dict) else None


def _chain(top: str, nodes: Mapping[str, dict]) -> list[dict]:
    """The nodes from ``top`` down its ``file`` links (bounded)."""
    out: list[dict] = []
    node = nodes.get(top)
    while node is not None and len(out) < 16:
        out.append(node)
        node = _child(node, nodes)
    return out


def _truthy(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("on", "true", "1", "yes")


def find_device(args: QemuArgs, serial: str, disk_key: str | None) -> dict | None:
    """The scratch disk's -device: by serial, else by PVE's drive id."""
    for dev in args.devices:
        if serial and str(dev.get("serial", "")) == serial:
            return dev
    if disk_key:
        for dev in args.devices:
            if dev.get("drive") == f"drive-{disk_key}" or dev.get("id") == disk_key:
                return dev
    return None


def _top_node_of(args: QemuArgs, path: str) -> str | None:
    """The top of the blockdev chain that opens ``path`` (no device named it)."""
    for name in args.nodes:
        chain = _chain(name, args.nodes)
        referenced = any(_child(n, args.nodes) is args.nodes[name] for n in args.nodes.values())
        if not referenced and any(n.get("filename") == path for n in chain):
            return name
    return None


def _detect_zeroes(values: list[Any]) -> str:
    """What a chain does with zero writes: the most any node does (QEMU's default off)."""
    try:
        parsed = [DetectZeroes.parse(v) for v in values]
    except ValueError:
        return "unknown " + "/".join(str(v) for v in values)
    return max(parsed, key=lambda d: d.rank, default=DetectZeroes.OFF).value


def _discard(values: list[Any]) -> str:
    """Whether the guest's discards reach the storage: only if every node passes them
    (``unmap``/``on``); QEMU's default ignore."""
    try:
        parsed = [Discard.parse(v) for v in values]
    except ValueError:
        return "unknown " + "/".join(str(v) for v in values)
    return Discard.UNMAP.value if parsed and all(d is Discard.UNMAP for d in parsed) else Discard.IGNORE.value


#: a limit that is not in effect: a rate QEMU reports as 0 or not at all, no burst
NO_LIMIT = "none"
_DIRECTION = {"": "total", "rd": "read", "wr": "write"}


def throttle_option(name: str) -> str:
    """A limit axis as QEMU's throttle option: iops -> iops-total, mbps_rd -> bps-read,
    iops_wr_max -> iops-write-max (its burst's length: that plus ``-length``)."""
    base = name.removesuffix("_max")
    unit, _, direction = base.partition("_")
    opt = f"{'iops' if unit == 'iops' else 'bps'}-{_DIRECTION[direction]}"
    return opt + ("-max" if name != base else "")


def qmp_limits(inserted: Mapping[str, Any]) -> dict[str, Any]:
    """QMP ``query-block``'s ``inserted`` (iops, bps_rd, iops_max, bps_wr_max_length...) keyed
    by QEMU's throttle options (iops-total, bps-read, iops-total-max, bps-write-max-length)."""
    out: dict[str, Any] = {}
    for name in LIMIT_RATES + LIMIT_BURSTS:
        qmp = name.replace("mbps", "bps")
        if qmp in inserted:
            out[throttle_option(name)] = inserted[qmp]
        if name in LIMIT_BURSTS and f"{qmp}_length" in inserted:
            out[throttle_option(name) + "-length"] = inserted[f"{qmp}_length"]
    return out


def _whole(value: Any) -> int | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return int(float(str(value)))
    except ValueError:
        return None


def throttle_readings(prefix: str, limits: Mapping[str, Any]) -> dict[str, Any]:
    """QEMU's throttle limits (keyed by :func:`throttle_option` names; bytes per second) as
    one reading per limit axis under ``prefix`` + its name: IOPS, MiB/s (as vmbench states
    them, :func:`~vmbench.scenario.model.limit_mbps`), and ``burst_length``: the length of
    every burst that is set (QEMU's default 1), "mixed (...)" when they differ;
    :data:`NO_LIMIT` where there is none."""
    out: dict[str, Any] = {}
    lengths: dict[str, int] = {}
    for name in LIMIT_NAMES[:-1]:
        value = _whole(limits.get(throttle_option(name)))
        if not value or value < 0:
            out[prefix + name] = NO_LIMIT
            continue
        out[prefix + name] = value if name.startswith("iops") else limit_mbps(value / MiB)
        if name in LIMIT_BURSTS:
            lengths[name] = _whole(limits.get(throttle_option(name) + "-length")) or 1
    if not lengths:
        out[prefix + "burst_length"] = NO_LIMIT
    elif len(set(lengths.values())) == 1:
        out[prefix + "burst_length"] = next(iter(lengths.values()))
    else:
        out[prefix + "burst_length"] = "mixed (" + ", ".join(f"{k} {v}" for k, v in lengths.items()) + ")"
    return out


def _group_limits(args: QemuArgs, chain: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The limits of the throttle group the first ``throttle`` node of ``chain`` names ({}
    when the chain has no throttle node; None when its group is not on the command line)."""
    node = next((n for n in chain if n.get("driver") == "throttle"), None)
    if node is None:
        return {}
    group = node.get("throttle-group")
    obj = next((o for o in args.objects if o.get("qom-type") == "throttle-group" and o.get("id") == group), None)
    if obj is None:
        return None
    if isinstance(obj.get("limits"), dict):
        return dict(obj["limits"])
    out = {k.removeprefix("limits."): v for k, v in obj.items() if k.startswith("limits.")}
    out.update({k[2:]: v for k, v in obj.items() if k.startswith("x-") and k[2:] not in out})
    return out


def drive_protocol(drive: Mapping[str, Any]) -> str | None:
    """The protocol driver of a legacy ``-drive``: ``file.driver=``, else the ``file=``
    prefix QEMU reads (``rbd:pool/image:...``, ``iscsi://portal/target/lun``,
    ``gluster+tcp://...``, ``nbd:...``, ``file:``, ``host_device:``); a plain path is opened
    by file-posix (host_device for a device node, as QEMU's probe picks it)."""
    explicit = drive.get("file.driver")
    if explicit:
        return str(explicit)
    name = str(drive.get("file") or "")
    if not name:
        return None
    if name.startswith("/"):
        return "host_device" if name.startswith("/dev/") else "file"
    m = re.match(r"([a-z][a-z0-9_]*)(?:\+[a-z0-9]+)?:", name)
    return m.group(1) if m else None


def has_aio(protocol: str | None) -> bool:
    """Whether QEMU's ``aio`` means anything for a disk opened with this protocol driver:
    file-posix's, or one vmbench does not know (then the command line's value is taken)."""
    return protocol is None or protocol in AIO_DRIVERS or protocol not in PROTOCOL_DRIVERS


@dataclass(frozen=True)
class QemuDisk:
    """The scratch disk as QEMU's command line has it: its ``-device`` and either a legacy
    ``-drive`` (PVE 8) or the ``-blockdev`` nodes from the one the device names down its
    ``file`` links (PVE 9, libvirt)."""

    device: Mapping[str, Any]
    drive: Mapping[str, Any] | None = None
    chain: tuple[Mapping[str, Any], ...] = ()

    def option(self, name: str) -> list[Any]:
        """The values the disk's nodes give QEMU's option ``name`` (``detect-zeroes``...): the
        ``-drive``'s, else each node's down the chain that sets it; empty where none does."""
        if self.drive is not None:
            return [self.drive[name]] if self.drive.get(name) is not None else []
        return [n[name] for n in self.chain if n.get(name) is not None]


def find_disk(args: QemuArgs, serial: str, disk_key: str | None = None, path: str | None = None) -> QemuDisk | None:
    """The scratch disk on the command line: its device by serial or PVE's drive id, else (no
    device names it) the blockdev chain that opens ``path``; None when neither is there."""
    dev = find_device(args, serial, disk_key)
    if dev is None and path:
        top = _top_node_of(args, path)
        dev = {"drive": top} if top else None
    if dev is None:
        return None
    drive_id = dev.get("drive")
    legacy = next((d for d in args.drives if drive_id and d.get("id") == drive_id), None)
    if legacy is not None:
        return QemuDisk(dev, legacy)
    return QemuDisk(dev, None, tuple(_chain(str(drive_id), args.nodes)) if drive_id else ())


def disk_readings(args: QemuArgs, serial: str, disk_key: str | None = None, path: str | None = None) -> dict[str, Any]:
    """The scratch disk as QEMU runs it: qemu_cache/aio/format/iothread/detect_zeroes/discard,
    its I/O limits (qemu_iops, qemu_mbps_rd... :func:`throttle_readings`), its file and device.  ``path`` finds its blockdev chain when no device names it."""
    out: dict[str, Any] = {}
    disk = find_disk(args, serial, disk_key, path)
    if disk is None:
        return out
    dev = disk.device
    if dev.get("driver"):
        out["device"] = dev.get("driver")
    drive_id = dev.get("drive")
    write_cache = dev.get("write-cache")
    legacy = disk.drive
    if legacy is not None:
        out["file"] = legacy.get("file")
        out["protocol"] = drive_protocol(legacy)
        out["qemu_format"] = legacy.get("format")
        out["qemu_aio"] = (legacy.get("aio") or "threads") if has_aio(out["protocol"]) else NOT_APPLICABLE
        try:
            mode: Cache | None = Cache.parse(legacy.get("cache") or Cache.WRITEBACK.value)  # QEMU's default
        except ValueError:
            mode = None
        if mode is not None and write_cache is not None:
            mode = mode.with_write_cache(_truthy(write_cache, True))
        out["qemu_cache"] = mode.value if mode is not None else f"unknown {legacy.get('cache')}"
        out["qemu_detect_zeroes"] = _detect_zeroes([legacy.get("detect-zeroes") or DetectZeroes.OFF.value])
        out["qemu_discard"] = _discard([legacy.get("discard") or Discard.IGNORE.value])
        out.update(throttle_readings("qemu_", {k.removeprefix("throttling."): v for k, v in legacy.items()
                                               if k.startswith("throttling.")}))
    elif drive_id:
        whole = list(disk.chain)
        chain = [n for n in whole if n.get("driver") not in PASS_THROUGH]
        proto = next((n for n in chain if n.get("driver") in PROTOCOL_DRIVERS or "filename" in n), None)
        fmt = next((n for n in chain if n is not proto and n.get("driver") not in PROTOCOL_DRIVERS), None)
        if proto is not None:
            out["file"] = proto.get("filename")
            out["protocol"] = proto.get("driver")
            out["qemu_aio"] = (proto.get("aio") or "threads") if has_aio(out["protocol"]) else NOT_APPLICABLE
            c: Mapping = proto["cache"] if isinstance(proto.get("cache"), dict) else (fmt or {}).get("cache") or {}
            key = (_truthy(write_cache, True), _truthy(c.get("direct"), False), _truthy(c.get("no-flush"), False))
            found = Cache.from_flags(*key)
            out["qemu_cache"] = found.value if found is not None else f"unknown {key}"
        if fmt is not None:
            out["qemu_format"] = fmt.get("driver")
        elif proto is not None:
            out["qemu_format"] = "raw"
        if whole:
            out["qemu_detect_zeroes"] = _detect_zeroes([n.get("detect-zeroes") or DetectZeroes.OFF.value for n in whole])
            out["qemu_discard"] = _discard([n.get("discard") or Discard.IGNORE.value for n in whole])
            limits = _group_limits(args, whole)
            if limits is not None:
                out.update(throttle_readings("qemu_", limits))
    iothread = dev.get("iothread")
    if not iothread and str(dev.get("driver", "")).startswith("scsi-"):
        ctrl_id = str(dev.get("bus", "")).rsplit(".", 1)[0]
        ctrl = next((d for d in args.devices if d.get("id") == ctrl_id), None)
        if ctrl is not None:
            out["controller"] = ctrl.get("driver")
            iothread = ctrl.get("iothread")
    if dev.get("driver"):
        out["qemu_iothread"] = bool(iothread)
    if iothread:
        out["iothread_object"] = any(o.get("qom-type") == "iothread" and o.get("id") == iothread for o in args.objects)
    return out


def qemu_cpu(args: QemuArgs) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """``-cpu kvm64,enforce,+aes,-pcid`` / ``Westmere,aes=off`` -> (model, flags forced)."""
    if not args.cpu:
        return None, ()
    items = split_opts(args.cpu)
    flags = []
    for item in items[1:]:
        key, eq, value = item.partition("=")
        if key[:1] in "+-" and not eq:
            flags.append((key[1:], "on" if key[0] == "+" else "off"))
        elif eq and value in ("on", "off", "true", "false"):
            flags.append((key, "on" if value in ("on", "true") else "off"))
    return items[0], tuple(flags)


#: QEMU's x86 CPU models and their variants (``-v2``, ``-IBRS``, ``-noTSX``...) by whether
#: they have AES-NI, as ``query-cpu-model-expansion`` of QEMU 7.2 reports them (Proxmox's
#: built-in x86-64-v* models as Proxmox defines them, CPUConfig.pm); host and max follow
#: the host (max under TCG has AES-NI), and a model not listed here is not judged
AES_MODELS = ("Westmere", "SandyBridge", "IvyBridge", "Haswell", "Broadwell", "Skylake-Client", "Skylake-Server",
              "Cascadelake-Server", "Cooperlake", "Icelake-Server", "Icelake-Client", "KnightsMill", "Denverton",
              "Snowridge", "EPYC", "Opteron_G4", "Opteron_G5", "x86-64-v2-AES", "x86-64-v3", "x86-64-v4")
NO_AES_MODELS = ("qemu64", "qemu32", "kvm64", "kvm32", "486", "pentium", "pentium2", "pentium3", "coreduo", "core2duo",
                 "n270", "Conroe", "Penryn", "Nehalem", "athlon", "phenom", "Opteron_G1", "Opteron_G2", "Opteron_G3",
                 "Dhyana", "base")


def _in_family(model: str, families: tuple[str, ...]) -> bool:
    """``model`` is one of ``families`` or a variant of one (Westmere-IBRS, EPYC-Rome-v4)."""
    return model in families or any(model.startswith(f + "-") for f in families)


def model_has_aes(model: str, accel: str | None = None) -> bool | None:
    """Whether a ``-cpu`` model has AES-NI by itself; None when that depends on the host or
    the model is not known here."""
    if model == "x86-64-v2":  # Proxmox's, without AES (x86-64-v2-AES is the one with it)
        return False
    if _in_family(model, AES_MODELS):
        return True
    if _in_family(model, NO_AES_MODELS):
        return False
    if model == "max" and accel == "tcg":
        return True  # TCG emulates AES-NI; max under KVM is the host's CPU
    return None


def cpu_readings(args: QemuArgs) -> dict[str, Any]:
    """The CPU as QEMU runs it: ``qemu_cpu_model``, ``qemu_cpu_flags`` (forced, as
    :func:`qemu_cpu`) and ``qemu_cpu_aes``: "on"/"off" from an ``aes`` flag (the last one
    wins, as in QEMU), else from the model (:func:`model_has_aes`), else None."""
    model, flags = qemu_cpu(args)
    if model is None:
        return {}
    aes: bool | None = None
    for item in split_opts(args.cpu or "")[1:]:
        key, eq, value = item.partition("=")
        if key in ("+aes", "-aes") and not eq:
            aes = key == "+aes"
        elif key == "aes":
            aes = value.strip().lower() in ("on", "true", "yes") if eq else True
    if aes is None:
        aes = model_has_aes(model, accelerator(args))
    return {"qemu_cpu_model": model, "qemu_cpu_flags": flags, "qemu_cpu_aes": None if aes is None else ("on" if aes else "off")}


#: the CPU readings a driver reports from the command line (kept with the effective settings)
CPU_READINGS = ("qemu_cpu_model", "qemu_cpu_flags", "qemu_cpu_aes")


def to_applied(values: Mapping[str, Any], *, native_config: str, qemu_cmdline: tuple[str, ...] | list[str],
               details: Mapping[str, Any]) -> Applied:
    """A driver's typed readings as :class:`Applied` (:meth:`Applied.of`): a VM fact under its
    own field, an axis's reading under the key its ``verify`` names, the rest in ``details``."""
    return Applied.of(values, native_config=native_config, qemu_cmdline=qemu_cmdline, details=details)
