"""A user's Proxmox VM, read only: its disk and CPU settings as vmbench's axes (issue 18).

:func:`parse_config` is pure: a VM config (``GET /nodes/{node}/qemu/{vmid}/config``, as
``qm config`` shows it) to a :class:`~vmbench.drivers.existing.CurrentVm`, read with the same
grammar :mod:`.config` writes (disk option strings, ``scsihw``, the ``cpu`` line).
:func:`read_vm` makes exactly one request, that GET: nothing on the VM can change.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from ...errors import HypervisorError, UsageError
from ...scenario.model import Hypervisor, LIMIT_BURSTS, LIMIT_RATES, CpuConfig, IoLimits, VmConfig, limit_mbps
from ...settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat
from ..existing import CurrentVm, assume
from ..existing import read_choice as _choice
from .api import PveApi, read_secret
from .config import DISK_KEY_RE, cpu_from_config, parse_disk, parse_options, storage_of, volume_format

#: the disk read when none is named and ``boot: order=`` names none, in this order
DEFAULT_DISKS = ("scsi0", "virtio0", "sata0", "ide0")
SCSIHW_BUS = {"virtio-scsi-single": Bus.VIRTIO_SCSI, "virtio-scsi-pci": Bus.VIRTIO_SCSI_SHARED}
#: the ``cpu`` options other than the model and its flags (none of them an axis)
_CPU_OTHER = ("hidden", "hv-vendor-id", "phys-bits", "level", "reported-model", "guest-phys-bits")
_TRUE = ("1", "on", "yes", "true")


def parse_config(config: Mapping[str, Any], *, vmid: int | str, node: str, disk: str | None = None) -> CurrentVm:
    """The settings of ``disk`` (``scsi0``, ``virtio1``...; default: the first disk of ``boot:
    order=``, else scsi0, virtio0, sata0, ide0) and the VM's CPU, vCPUs and memory.  What the
    config leaves to qemu-server is read as its default and said in ``assumed``; what no axis
    expresses is said in ``unknown``."""
    source = f"Proxmox VM {vmid} on node {node}"
    key = _pick_disk(config, source, disk)
    volid, opts = parse_disk(str(config[key]))
    unknown: list[str] = []
    assumed: list[str] = []
    prefix = DISK_KEY_RE.match(key).group(1)  # type: ignore[union-attr]  # _pick_disk checked it
    hw = str(config.get("scsihw") or "")
    if prefix == "virtio":
        bus = Bus.VIRTIO_BLK
    elif prefix == "sata":
        bus = Bus.SATA
    elif prefix == "scsi":
        bus = SCSIHW_BUS.get(hw, Bus.VIRTIO_SCSI_SHARED)
        if hw not in SCSIHW_BUS:
            unknown.append(f"bus: {key} is on SCSI controller {hw or 'lsi (the default)'}, not virtio-scsi-single or "
                           f"virtio-scsi-pci; read as {bus}")
    else:
        bus = Bus.SATA
        unknown.append(f"bus: {key} is an IDE disk, not on a bus vmbench measures ({Bus.allowed()}); read as sata")
    iothread = str(opts.get("iothread", "0")).lower() in _TRUE
    if iothread and bus is Bus.VIRTIO_SCSI_SHARED:
        iothread = False
        unknown.append(f"iothread: {key} has iothread=1, which Proxmox ignores with scsihw {hw or 'lsi'} "
                       "(it needs virtio-scsi-single); read as off")
    cache = assume(_choice(Cache, opts.get("cache"), "cache", key, unknown), Cache.NONE,
                   f"cache: {key} states none; Proxmox's default is none (O_DIRECT)", assumed)
    aio = assume(_choice(Aio, opts.get("aio"), "aio", key, unknown), Aio.IO_URING,
                 f"aio: {key} states none; Proxmox's default is io_uring (native or threads on LVM, CIFS "
                 "and krbd storages when the cache is not direct)", assumed)
    fmt = _choice(ImageFormat, volume_format(volid, opts), "format", key, unknown) or ImageFormat.RAW
    discard = None if "discard" not in opts else Discard.UNMAP if opts["discard"] == "on" else Discard.IGNORE
    zeroes: DetectZeroes | None = None
    if "detect_zeroes" in opts:
        if opts["detect_zeroes"].strip().lower() in ("0", "off", "no", "false"):
            zeroes = DetectZeroes.OFF
        else:
            zeroes = DetectZeroes.UNMAP if discard is Discard.UNMAP else DetectZeroes.ON
    cpu = _cpu(config.get("cpu"), unknown, assumed)
    vm = VmConfig(vcpus=_vcpus(config, unknown), memory_mib=_memory(config, unknown, assumed), bus=bus, cache=cache,
                  iothread=iothread, aio=aio, cpu=cpu, format=fmt, detect_zeroes=zeroes, discard=discard,
                  limits=_limits(key, opts, unknown))
    extra = {k: str(config[k]) for k in ("scsihw", "cpu", "boot", "bootdisk", "cores", "sockets") if config.get(k) is not None}
    extra["keys"] = ",".join(sorted(k for k in config if DISK_KEY_RE.match(k)))  # every bus slot in use (CD-ROMs too)
    storage: dict[str, object] = {"storage": storage_of(volid), "volume": volid} if ":" in volid else {"path": volid}
    return CurrentVm(source=source, vm=vm, disk=key, disk_spec=str(config[key]), kind="proxmox", ident=str(vmid),
                     unknown=tuple(unknown), storage=storage, extra=extra, assumed=tuple(assumed))


def read_vm(api: Any, node: str, vmid: int, *, disk: str | None = None) -> CurrentVm:
    """The VM ``vmid`` on ``node`` through the driver's API client (:class:`~.api.PveApi`):
    one ``GET /nodes/{node}/qemu/{vmid}/config``, nothing else."""
    config = api.get(f"/nodes/{node}/qemu/{vmid}/config")
    if not isinstance(config, Mapping):
        raise HypervisorError(f"Proxmox VM {vmid} on node {node}: GET .../config gave {type(config).__name__}, not a config")
    return parse_config(config, vmid=vmid, node=node, disk=disk)


# ---- the parts --------------------------------------------------------------------------------


def is_disk(config: Mapping[str, Any], key: str) -> bool:
    """A bus disk (``scsiN``/``virtioN``/``sataN``/``ideN``) that is not a CD-ROM or empty."""
    if not DISK_KEY_RE.match(key) or key not in config:
        return False
    volid, opts = parse_disk(str(config[key]))
    return opts.get("media") != "cdrom" and volid not in ("", "none", "cdrom")


def disk_keys(config: Mapping[str, Any]) -> list[str]:
    """The VM's disks, by bus and index (efidisk, tpmstate, unused and CD-ROMs left out)."""
    keys = [k for k in config if is_disk(config, k)]
    return sorted(keys, key=lambda k: (DEFAULT_DISKS.index(re.sub(r"\d+$", "0", k)), int(re.sub(r"^\D+", "", k))))


def _pick_disk(config: Mapping[str, Any], source: str, disk: str | None) -> str:
    disks = disk_keys(config)
    if disk is not None:
        if is_disk(config, disk):
            return disk
        why = "is a CD-ROM or empty" if disk in config and DISK_KEY_RE.match(disk) else \
            "is not a bus disk vmbench reads (scsiN, virtioN, sataN, ideN)" if disk in config else "does not exist"
        raise HypervisorError(f"{source}: disk {disk} {why}", f"its disks: {', '.join(disks) or 'none'}")
    boot = parse_options(str(config.get("boot") or ""), default_key="legacy")
    for key in (k.strip() for k in (boot.get("order") or "").split(";")):
        if is_disk(config, key):
            return key
    if config.get("bootdisk") and is_disk(config, str(config["bootdisk"])):
        return str(config["bootdisk"])
    for key in DEFAULT_DISKS:
        if is_disk(config, key):
            return key
    if disks:
        return disks[0]
    raise HypervisorError(f"{source} has no disk (scsiN, virtioN, sataN or ideN)",
                          "vmbench reads a VM's disk settings from one of its disks")


def _number(text: str | None) -> float:
    try:
        return float(text or 0)
    except ValueError:
        return 0.0


def _limits(key: str, opts: Mapping[str, str], unknown: list[str]) -> IoLimits:
    values: dict[str, Any] = {}
    lengths = set()
    for name in LIMIT_RATES + LIMIT_BURSTS:
        n = _number(opts.get(name))
        if n > 0:
            values[name] = int(n) if name.startswith("iops") else limit_mbps(n)
        if name in LIMIT_BURSTS:
            alias = name.replace("mbps", "bps")
            length = max(_number(opts.get(f"{alias}_length")), _number(opts.get(f"{name.removesuffix('_max')}_length")))
            if length > 0 and name in values:
                lengths.add(int(length))
    if len(lengths) == 1:
        values["burst_length"] = lengths.pop()
    elif lengths:
        unknown.append(f"burst_length: the bursts of {key} last different times "
                       f"({', '.join(str(n) for n in sorted(lengths))} s); vmbench has one burst_length")
    for opt in ("bps", "bps_rd", "bps_wr"):
        if _number(opts.get(opt)) > 0:
            unknown.append(f"{opt}: {key} has {opt}={opts[opt]} (bytes/s), which qemu-server does not apply")
    return IoLimits(**values)


def _cpu(value: Any, unknown: list[str], assumed: list[str]) -> CpuConfig:
    if value is None or str(value).strip() == "":
        assumed.append("cpu: the VM states no cpu; Proxmox's default is kvm64")
        return CpuConfig(CpuMode.MODEL, "kvm64")
    model, flags = cpu_from_config(str(value))
    opts = parse_options(str(value), default_key="cputype")
    for opt in _CPU_OTHER:
        if opt in opts:
            unknown.append(f"cpu: {opt}={opts[opt]} is not a vmbench axis")
    if model.startswith("custom-"):
        unknown.append(f"cpu: {model} is a custom model of /etc/pve/virtual-guest/cpu-models.conf; read as its name")
    aes = Feature.DEFAULT
    feats = []
    for name, state in flags:
        f = Feature.ON if state == "on" else Feature.OFF
        if name == "aes":
            aes = f
        else:
            feats.append((name, f))
    if model == "host-passthrough":
        return CpuConfig(CpuMode.HOST_PASSTHROUGH, None, aes, tuple(sorted(feats)))
    if model == "max":
        return CpuConfig(CpuMode.MAX, None, aes, tuple(sorted(feats)))
    return CpuConfig(CpuMode.MODEL, model, aes, tuple(sorted(feats)))


def _int(value: Any, default: int) -> int:
    try:
        return int(str(value).strip()) if value is not None and str(value).strip() else default
    except ValueError:
        return default


def _vcpus(config: Mapping[str, Any], unknown: list[str]) -> int:
    cores, sockets = _int(config.get("cores"), 1), _int(config.get("sockets"), 1)
    total = max(1, cores) * max(1, sockets)
    if config.get("vcpus") is not None and _int(config["vcpus"], total) != total:
        unknown.append(f"vcpus: {config['vcpus']} of {total} vCPUs are online (vcpus:); read as {total}")
    return total


def _memory(config: Mapping[str, Any], unknown: list[str], assumed: list[str]) -> int:
    raw = config.get("memory")
    if raw is None or str(raw).strip() == "":
        assumed.append("memory: the VM states none; Proxmox's default is 512 MiB")
        return 512
    opts = parse_options(str(raw), default_key="current")  # 8.x+: "[current=]MiB"
    value = _int(opts.get("current"), -1)
    if value <= 0:
        unknown.append(f"memory: {raw!r} is not a number of MiB; read as 512")
        return 512
    return value


def read_current(hv: Hypervisor, ident: str, disk: str | None) -> CurrentVm:
    """The VM with VMID ``ident`` on the scenario's node: one ``GET .../config`` with its API token."""
    cfg = hv.proxmox
    if cfg is None:  # pragma: no cover - the loader always gives driver proxmox its settings
        raise UsageError("the scenario's proxmox settings are missing")
    text = str(ident).strip()
    if not text.isdigit() or not 100 <= int(text) <= 999999999:
        raise UsageError(f"{ident!r} is not a Proxmox VMID (a whole number from 100 to 999999999)",
                         "give the VM's ID as `qm list` shows it")
    api = PveApi(cfg, read_secret(cfg))
    try:
        return read_vm(api, cfg.node, int(text), disk=disk)
    finally:
        try:
            api.session.close()
        except Exception:  # noqa: BLE001 - closing is best effort
            pass
