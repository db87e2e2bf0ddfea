"""ZFS host storage: scratch disks as zvols under a dataset (``type: zfs``) or as raw/qcow2
files on child datasets (``type: zfs-dataset``), on this machine or a remote host.

Everything runs through the host :class:`~vmbench.transport.base.Transport` (``zfs``,
``zpool``, ``truncate``), so it works locally and over SSH, with or without libvirt.

Only vmbench's own things are ever created, changed or destroyed: children of the user's
dataset named ``vmbench-<run tag>-<seq>-<role>`` carrying the user property
``vmbench:run=<run tag>``.  Properties are set at creation, on those only, and read back
with ``zfs get -Hp``; what did not take is reported as the volume's ``problems`` (the cell
is then invalid and not measured).  ``vmbench cleanup`` finds leftovers by the property.
"""

from __future__ import annotations

import logging
import re
import time

from .leftover import Leftover
from ..errors import CommandError, HypervisorError, PreflightError
from ..progress import Progress
from ..scenario.backend import Storage, StorageType
from ..scenario.model import ZfsSettings
from ..settings import ImageFormat
from ..transport.base import Transport
from ..units import format_size
from .base import VOLUME_RE, Volume

log = logging.getLogger(__name__)

PROPERTY = "vmbench:run"
#: the last component of every zvol or dataset vmbench creates
LEAF_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-\d+-(root|scratch|hostref)$")
DEVICE_WAIT_S = 30.0
#: the properties of a new zvol or dataset read back with their source (local, default,
#: inherited from ...): what changes its I/O whoever set it
EFFECTIVE = ("compression", "sync", "checksum", "dedup", "primarycache", "secondarycache", "logbias", "copies")


# ---- argv and parsing: pure ----------------------------------------------------------------


def zfs_name(dataset: str, volume: str) -> str:
    """``tank/vmbench`` + ``vmbench-r1a2b3c4-1-scratch.raw`` -> ``tank/vmbench/vmbench-r1a2b3c4-1-scratch``."""
    return f"{dataset}/{volume.rsplit('.', 1)[0]}"


def create_argv(kind: StorageType, name: str, size: int, zfs: ZfsSettings, tag: str, sparse: bool = False) -> list[str]:
    """``zfs create`` of a zvol (kind zfs) or a child dataset (zfs-dataset) with every
    setting stated, vmbench's property last."""
    argv = ["zfs", "create"]
    if kind is StorageType.ZFS:
        argv += (["-s"] if sparse else []) + ["-V", str(size), "-o", f"volblocksize={zfs.volblocksize}"]
    else:
        argv += ["-o", f"recordsize={zfs.recordsize}"]
    for prop, value in zfs.properties:
        argv += ["-o", f"{prop}={value}"]
    return argv + ["-o", f"{PROPERTY}={tag}", name]


def requested(kind: StorageType, zfs: ZfsSettings) -> dict[str, str]:
    """What ``zfs get -Hp`` must read back, as it prints it."""
    out = {"volblocksize": str(zfs.volblocksize)} if kind is StorageType.ZFS else {"recordsize": str(zfs.recordsize)}
    out.update(dict(zfs.properties))
    return out


def get_argv(name: str, props: list[str]) -> list[str]:
    return ["zfs", "get", "-Hp", "-o", "property,value,source", ",".join(props), name]


def parse_get(text: str) -> dict[str, dict[str, str]]:
    """``zfs get -Hp -o property,value,source`` -> {property: {"value":, "source":}}."""
    out = {}
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3:
            out[parts[0]] = {"value": parts[1], "source": parts[2]}
    return out


def readback_problems(want: dict[str, str], got: dict[str, dict[str, str]]) -> list[str]:
    """Each requested property that did not read back as asked."""
    out = []
    for prop, value in want.items():
        have = got.get(prop, {}).get("value")
        if have != value:
            shown = format_size(int(value)) if prop in ("volblocksize", "recordsize") and value.isdigit() else value
            out.append(f"ZFS {prop} reads back as {have if have is not None else 'nothing'}, not {shown} as asked")
    return out


def list_ours_argv() -> list[str]:
    return ["zfs", "list", "-H", "-p", "-t", "filesystem,volume", "-o", f"name,type,{PROPERTY}"]


def parse_ours(text: str) -> list[tuple[str, str, str]]:
    """(name, type, tag) of every zvol/dataset vmbench made: the property set and the name's
    last component naming the same run."""
    out = []
    for line in text.splitlines():
        parts = line.split("\t")
        if len(parts) != 3:
            continue
        name, kind, tag = parts
        m = LEAF_RE.match(name.rsplit("/", 1)[-1])
        if m and tag == m.group(1):
            out.append((name, kind, tag))
    return out


def scan_state(status: str) -> str | None:
    """"scrub" or "resilver" when ``zpool status`` says one is in progress, else None."""
    for line in status.splitlines():
        text = line.strip()
        if text.startswith("scan:"):
            if "in progress" in text:
                return "resilver" if "resilver" in text else "scrub"
            return None
    return None


def parse_kstat(text: str, names: tuple[str, ...]) -> dict[str, int]:
    """Named values of a ZFS kstat file (``name type data`` lines)."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in names:
            try:
                out[parts[0]] = int(parts[2])
            except ValueError:
                continue
    return out


def parse_ashift(zdb: str) -> list[int]:
    """Every vdev's ``ashift:`` in ``zdb -C POOL`` output."""
    return [int(m) for m in re.findall(r"^\s*ashift:\s*(\d+)\s*$", zdb, re.M)]


def destroy_owned(host: Transport, target: str, tag: str) -> None:
    """``zfs destroy`` of a zvol or dataset only when its ``vmbench:run`` property is ``tag``
    (gone already is fine); retried while a zvol QEMU just closed is still busy."""
    got = host.run(["zfs", "get", "-Hp", "-o", "value", PROPERTY, target], timeout=60, check=False)
    if got.returncode != 0:
        if "does not exist" in got.stderr:
            return
        raise HypervisorError(f"reading {target} on {host.name}: {got.stderr.strip()}")
    if got.stdout.strip() != tag:
        raise HypervisorError(f"{target} has no {PROPERTY}={tag} property; not vmbench's, left alone")
    last = ""
    for _ in range(10):
        done = host.run(["zfs", "destroy", target], timeout=300, check=False)
        if done.returncode == 0 or "does not exist" in done.stderr:
            return
        last = done.stderr.strip()
        if "busy" not in last:
            break
        time.sleep(1.0)
    raise HypervisorError(f"zfs destroy {target} on {host.name}: {last}")


# ---- the storage -----------------------------------------------------------------------------


class ZfsStorage:
    """zvols (``type: zfs``) or files on child datasets (``type: zfs-dataset``) under
    ``storage.dataset`` on ``host``."""

    def __init__(self, storage: Storage, host: Transport) -> None:
        assert storage.dataset is not None and storage.zfs
        self.cfg = storage
        self.kind = storage.type
        self.dataset = storage.dataset
        self.pool = storage.dataset.split("/", 1)[0]
        self.host = host
        what = "zvols" if self.kind is StorageType.ZFS else "datasets"
        self.label = f"ZFS {what} under {self.dataset}"

    def _zfs(self, argv: list[str], timeout: float = 120, check: bool = True):
        try:
            return self.host.run(argv, timeout=timeout, check=check)
        except CommandError as exc:
            raise HypervisorError(f"{' '.join(argv[:2])} on {self.host.name} failed: {exc.stderr.strip() or exc.message}") from None

    # ---- preflight --------------------------------------------------------------------------

    def prepare(self, progress: Progress) -> None:
        progress.step(f"checking ZFS dataset {self.dataset} on {self.host.name}")
        try:
            self.host.run(["zfs", "version"], timeout=60)
        except CommandError as exc:
            missing = exc.returncode in (126, 127) or "not found" in (exc.stderr or "") or "No such file" in (exc.stderr or "")
            raise PreflightError(f"ZFS is not usable on {self.host.name}: "
                                 + ("the zfs command is not installed" if missing else (exc.stderr.strip() or exc.message)),
                                 "storage.type zfs/zfs-dataset needs OpenZFS on the host (zfsutils-linux)") from None
        got = self.host.run(["zfs", "list", "-H", "-p", "-o", "name,type,mounted", self.dataset], timeout=60, check=False)
        if got.returncode != 0:
            raise PreflightError(f"ZFS dataset {self.dataset} does not exist on {self.host.name} (storage.dataset)",
                                 f"create it: zfs create {self.dataset}") from None
        name, kind, mounted = (got.stdout.strip().split("\t") + ["", "", ""])[:3]
        if kind != "filesystem":
            raise PreflightError(f"{self.dataset} on {self.host.name} is a {kind}, not a filesystem dataset (storage.dataset)",
                                 "name a dataset vmbench can create its zvols or child datasets under")
        if self.kind is StorageType.ZFS_DATASET and mounted != "yes":
            raise PreflightError(f"ZFS dataset {self.dataset} on {self.host.name} is not mounted",
                                 "child datasets inherit its mountpoint; mount it (zfs mount) first")

    def free_bytes(self) -> int:
        got = self._zfs(["zfs", "get", "-Hp", "-o", "value", "available", self.dataset], timeout=60)
        return int(got.stdout.strip() or 0)

    # ---- volumes ----------------------------------------------------------------------------

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None,
                      zfs: ZfsSettings | None = None) -> Volume:
        m = VOLUME_RE.match(name)
        if not m:
            raise HypervisorError(f"{name} is not a vmbench volume name")
        if backing is not None:
            raise HypervisorError(f"{self.label} holds scratch disks only, not linked clones")
        settings = zfs or ZfsSettings()
        tag = m.group(1)
        target = zfs_name(self.dataset, name)
        self._zfs(create_argv(self.kind, target, size, settings, tag, self.cfg.sparse), timeout=300)
        want = requested(self.kind, settings)
        asked = list(dict.fromkeys([*want, *EFFECTIVE, PROPERTY, "mountpoint"]))
        got = parse_get(self._zfs(get_argv(target, asked), timeout=60).stdout)
        readback = {k: v["value"] for k, v in got.items()}
        sources = {k: v["source"] for k, v in got.items() if k in EFFECTIVE}
        problems = readback_problems(want, got)
        if got.get(PROPERTY, {}).get("value") != tag:
            problems.append(f"the {PROPERTY} property of {target} did not take")
        if self.kind is StorageType.ZFS:
            if fmt is not ImageFormat.RAW:
                raise HypervisorError(f"a zvol is a raw block device; format {fmt.value} is not possible")
            path = f"/dev/zvol/{target}"
            self._wait_for_device(path)
            return Volume(name=name, path=path, format=fmt, kind="block", zfs_name=target, readback=readback,
                          problems=tuple(problems), sources=sources)
        mountpoint = readback.get("mountpoint", "")
        if not mountpoint.startswith("/"):
            raise HypervisorError(f"{target} on {self.host.name} is not mounted (mountpoint {mountpoint or '?'})")
        path = f"{mountpoint}/{name}"
        if fmt is ImageFormat.RAW:
            self._zfs(["truncate", "-s", str(size), path], timeout=60)
        else:
            self._zfs(["qemu-img", "create", "-q", "-f", fmt.value, path, str(size)], timeout=120)
        return Volume(name=name, path=path, format=fmt, kind="file", zfs_name=target, readback=readback,
                      problems=tuple(problems), sources=sources)

    def _wait_for_device(self, path: str) -> None:
        """zvol device nodes appear through udev, shortly after ``zfs create``."""
        deadline = time.monotonic() + DEVICE_WAIT_S
        self.host.run(["udevadm", "settle", "--timeout=30"], timeout=60, check=False)
        while True:
            if self.host.run(["test", "-b", path], timeout=30, check=False).returncode == 0:
                return
            if time.monotonic() > deadline:
                raise HypervisorError(f"{path} did not appear on {self.host.name} within {DEVICE_WAIT_S:g}s of zfs create",
                                      "is udev running on the host?")
            time.sleep(0.5)

    def delete_volume(self, name: str) -> None:
        if not VOLUME_RE.match(name):
            log.warning("not deleting %s: not a vmbench volume", name)
            return
        self.destroy(zfs_name(self.dataset, name))

    def destroy(self, target: str) -> None:
        """Destroy a zvol/dataset vmbench made (checked by name and property); gone is fine."""
        m = LEAF_RE.match(target.rsplit("/", 1)[-1])
        if not m:
            raise HypervisorError(f"{target} is not named like a vmbench zvol or dataset; left alone")
        destroy_owned(self.host, target, m.group(1))

    def delete_path(self, path: str) -> None:
        """``vmbench cleanup`` of a leftover found by :meth:`leftovers` (a ZFS name)."""
        self.destroy(path)

    def leftovers(self) -> list[Leftover]:
        """Every zvol or dataset on the host with vmbench's property and name, in any pool."""
        got = self.host.run(list_ours_argv(), timeout=120, check=False)
        if got.returncode != 0:
            raise HypervisorError(f"zfs list on {self.host.name}: {got.stderr.strip()}")
        return [Leftover("zvol" if kind == "volume" else "dataset", name, tag, f"{PROPERTY}={tag}")
                for name, kind, tag in parse_ours(got.stdout)]

    # ---- facts ------------------------------------------------------------------------------

    def _text(self, argv: list[str], timeout: float = 60) -> str | None:
        try:
            got = self.host.run(argv, timeout=timeout, check=False)
        except CommandError as exc:
            log.warning("%s: %s", " ".join(argv[:2]), exc)
            return None
        return got.stdout if got.returncode == 0 else None

    def _read(self, path: str) -> str | None:
        try:
            return self.host.read_file(path).decode(errors="replace")
        except OSError:
            return None

    def facts(self) -> dict:
        """What is recorded with the run: versions, pool layout, ashift, ARC, txg timeout,
        scrub/resilver, and the parent dataset's properties."""
        out: dict = {"storage_type": self.kind.value, "zfs_dataset": self.dataset, "zfs_pool": self.pool}
        version = self._text(["zfs", "version"])
        if version:
            lines = version.split()
            out["zfs_userland"] = next((l for l in lines if l.startswith("zfs-") and not l.startswith("zfs-kmod")), lines[0])
            out["zfs_kmod"] = next((l for l in lines if l.startswith("zfs-kmod")), None)
        status = self._text(["zpool", "status", "-P", self.pool])
        out["zpool_status"] = status
        out["zpool_list"] = self._text(["zpool", "list", "-v", "-Hp", self.pool])
        out["zfs_scan"] = scan_state(status or "")
        ashift = self._text(["zpool", "get", "-Hp", "-o", "value", "ashift", self.pool])
        out["zpool_ashift"] = int(ashift.strip()) if ashift and ashift.strip().isdigit() else None
        zdb = self._text(["zdb", "-C", self.pool], timeout=30)
        out["vdev_ashift"] = parse_ashift(zdb) if zdb else None
        arc = parse_kstat(self._read("/proc/spl/kstat/zfs/arcstats") or "", ("size", "c", "c_min", "c_max"))
        out["arc"] = {f"{k}_bytes": v for k, v in arc.items()}
        txg = (self._read("/sys/module/zfs/parameters/zfs_txg_timeout") or "").strip()
        out["zfs_txg_timeout_s"] = int(txg) if txg.isdigit() else None
        props = ["compression", "sync", "primarycache", "logbias", "atime", "recordsize", "checksum", "dedup"]
        got = self._text(get_argv(self.dataset, props))
        out["zfs_dataset_properties"] = {k: v["value"] for k, v in parse_get(got or "").items()}
        return out
