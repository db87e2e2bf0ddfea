"""A Proxmox rbd storage as vmbench measures it: the Ceph client QEMU uses, and the krbd axis.

How a node reaches the storage's cluster is pve-storage's (``PVE/CephConfig.pm``
ceph_connect_option, ``PVE/Storage/RBDPlugin.pm`` path and qemu_blockdev_options), read from
the storage's configuration (``GET /storage/{id}``: pool, monhost, username, krbd, namespace):

* hyperconverged (no ``monhost``): ``conf`` is ``/etc/pve/ceph.conf`` (its ``mon_host`` and
  ``keyring = /etc/pve/priv/$cluster.$name.keyring``);
* external (``monhost``): ``conf`` is ``/etc/pve/priv/ceph/<storage>.conf`` and the monitors are
  the storage's ``monhost`` (PVE 8 puts them in QEMU's ``rbd:...:mon_host=`` filename, PVE 9 in
  the rbd ``-blockdev``'s ``server``);
* the keyring ``/etc/pve/priv/ceph/<storage>.keyring`` where it exists, as ``client.<username>``
  (``admin`` without one).

vmbench's Ceph commands, the host reference (fio's rbd engine) and the RADOS bench use that very
client (:class:`~vmbench.scenario.model.CephConfig`), so the host runs through the same librbd,
user and keyring as the VM's QEMU; the client cache follows the disk's cache mode as QEMU sets it
(:attr:`~vmbench.settings.Cache.librbd_cache`: qemu-server passes the cache mode, QEMU's rbd
driver turns ``rbd_cache`` on unless the cache is direct).  An RBD namespace is refused: fio's
rbd engine cannot open an image in one.

krbd (a VM axis, :mod:`vmbench.scenario.axes`): a cell whose ``krbd`` differs from the storage's
gets its scratch disk on a temporary storage entry ``vmbench-<tag>-krbd`` (``krbd 1``) or
``vmbench-<tag>-librbd`` (``krbd 0``) on the same pool, monitors and user, made before the disk
is allocated and deleted after its VMs are destroyed (PVE's on_delete_hook removes the entry's
keyring copy); the keyring is copied on the node, never through the API.  A node that cannot map
RBD images (no ``rbd`` kernel module) refuses a krbd cell at preflight.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, Mapping

from ...errors import CommandError, HypervisorError, PreflightError
from ...fio.rbd import RbdTarget
from ...scenario.model import CephConfig
from ...settings import Cache
from ...transport import ops
from ...transport.base import Transport
from .api import PveApi
from .entries import release_entry
from .errors import PveApiError

log = logging.getLogger(__name__)

PVE_ETC = "/etc/pve"
#: the temporary entries of the krbd axis: vmbench-<run tag>-krbd | -librbd
KRBD_SUFFIX = {True: "krbd", False: "librbd"}
#: where the kernel's rbd driver shows once loaded
RBD_SYSFS = "/sys/bus/rbd"


# ---- pure: what PVE does ----------------------------------------------------------------------


def keyring_path(storage_id: str) -> str:
    return f"{PVE_ETC}/priv/ceph/{storage_id}.keyring"


def monitors(monhost: str) -> str:
    """A storage's ``monhost`` (PVE::Tools::split_list: ';', ',' or spaces) as Ceph's ``mon_host``:
    ``host[:port]`` joined by ',', an IPv6 address in brackets (CephConfig.pm hostlist)."""
    out = []
    for item in (i for i in re.split(r"[;,\s]+", monhost.strip()) if i):
        m = re.fullmatch(r"\[([^\]]+)\](?::(\d+))?", item) or re.fullmatch(r"([^:]+)(?::(\d+))?", item)
        if m is None:  # a bare IPv6 address
            out.append(f"[{item}]")
            continue
        host, port = m.group(1), m.group(2)
        out.append((f"[{host}]" if ":" in host else host) + (f":{port}" if port else ""))
    return ",".join(out)


def client_of(storage_id: str, scfg: Mapping[str, object], keyring: bool) -> CephConfig:
    """The Ceph client of a PVE rbd storage, as ceph_connect_option makes it (``keyring``:
    whether ``/etc/pve/priv/ceph/<storage>.keyring`` exists on the node)."""
    monhost = scfg.get("monhost")
    external = monhost is not None and str(monhost).strip() != ""
    return CephConfig(pool=str(scfg.get("pool") or "rbd"),
                      conf=f"{PVE_ETC}/priv/ceph/{storage_id}.conf" if external else f"{PVE_ETC}/ceph.conf",
                      user=str(scfg.get("username") or "admin"), keyring=keyring_path(storage_id) if keyring else None,
                      mon_host=monitors(str(monhost)) if external else None)


def is_krbd(scfg: Mapping[str, object]) -> bool:
    return str(scfg.get("krbd", 0)).strip().lower() in ("1", "true", "on", "yes")


def config_problem(storage_id: str, scfg: Mapping[str, object]) -> tuple[str, str] | None:
    """What vmbench cannot measure on this rbd storage, as (message, hint)."""
    if scfg.get("namespace"):
        return (f"Proxmox storage {storage_id} keeps its images in the RBD namespace {scfg['namespace']}; fio's rbd "
                "engine (the host reference) cannot open an image in a namespace",
                "use an rbd storage without a namespace, or host_baseline: false to measure the guests only")
    return None


def entry_id(run_tag: str, krbd: bool, node: str = "") -> str:
    """``node``: the node of a run across several (its own entry), "" for one node."""
    return f"vmbench-{run_tag}-{KRBD_SUFFIX[krbd]}" + (f"-{node.lower()}" if node else "")


def entry_params(entry: str, scfg: Mapping[str, object], krbd: bool, node: str) -> dict:
    """``POST /storage`` of a temporary rbd entry on the same pool, monitors and user, with ``krbd``."""
    out: dict = {"storage": entry, "type": "rbd", "pool": str(scfg.get("pool") or "rbd")}
    for key in ("monhost", "username", "data-pool"):
        if scfg.get(key):
            out[key] = str(scfg[key])
    return {**out, "krbd": krbd, "content": "images", "nodes": node}


def keyring_copy_argv(storage_id: str, entry: str) -> list[str]:
    """The storage's keyring for the entry, copied on the node (the key never leaves it)."""
    return ["cp", keyring_path(storage_id), keyring_path(entry)]


def modprobe_argv() -> list[str]:
    """Whether the kernel can load its rbd driver (a dry run: nothing is loaded)."""
    return ["modprobe", "--dry-run", "rbd"]


def image_of(volid: str) -> str:
    """``ceph-vm:vm-100-disk-1`` -> ``vm-100-disk-1``."""
    return volid.partition(":")[2]


def host_target(cfg: CephConfig, volid: str, cache: Cache) -> str:
    """The scratch image as host fio opens it: fio's rbd engine as the storage's client, with the
    librbd cache QEMU gives a disk with ``cache``."""
    return str(RbdTarget(cfg.pool, image_of(volid), cfg.user, cfg.conf, cfg.keyring, cache=cache.librbd_cache,
                         mon_host=cfg.mon_host))


# ---- the node's rbd storage -------------------------------------------------------------------


class PveRbd:
    """The scenario's PVE rbd storage (``storage.type rbd`` with driver proxmox): its config and
    client (read on first use), the node's kernel, and this run's temporary krbd entries."""

    def __init__(self, api: Callable[[], PveApi], host: Transport, node: str, storage_id: str, per_node: bool = False) -> None:
        self._api = api
        self.host = host
        self.node = node
        self.per_node = per_node  # a run across several nodes: the entries' IDs name this node
        self.id = storage_id
        self._scfg: dict | None = None
        self._client: CephConfig | None = None
        self.users: dict[str, set[str]] = {}  # entry -> VM names whose disks are on it

    def scfg(self) -> dict:
        if self._scfg is None:
            try:
                got = self._api().get(f"/storage/{self.id}") or {}
            except PveApiError as exc:
                raise PreflightError(f"cannot read the configuration of Proxmox storage {self.id}: {exc.message}",
                                     exc.hint or "the token needs Datastore.Audit on /storage") from None
            if str(got.get("type")) != "rbd":
                raise PreflightError(f"storage.type rbd, but Proxmox storage {self.id} (hypervisor.storage) is of type "
                                     f"{got.get('type')}", "name the node's rbd storage in hypervisor.storage, or leave "
                                     "storage.type out")
            self._scfg = dict(got)
        return self._scfg

    def client(self) -> CephConfig:
        """The Ceph client QEMU uses for the storage's disks (:func:`client_of`)."""
        if self._client is None:
            scfg = self.scfg()
            problem = config_problem(self.id, scfg)
            if problem:
                raise PreflightError(problem[0], problem[1])
            self._client = client_of(self.id, scfg, ops.exists(self.host, keyring_path(self.id)))
        return self._client

    @property
    def krbd(self) -> bool:
        return is_krbd(self.scfg())

    def kernel_problem(self) -> str | None:
        """Why the node cannot map RBD images (krbd), or None when it can."""
        if ops.exists(self.host, RBD_SYSFS):
            return None
        try:
            got = self.host.run(modprobe_argv(), timeout=30, check=False)
        except CommandError as exc:
            return f"modprobe could not run: {exc.message}"
        if got.returncode == 0:
            return None
        lines = [l.strip() for l in (got.stderr or got.stdout or "").splitlines() if l.strip()]
        return f"the kernel has no rbd module ({lines[-1] if lines else 'modprobe --dry-run rbd failed'})"

    def ensure(self, run_tag: str, krbd: bool, vm_name: str) -> str:
        """The temporary entry for ``krbd`` (made if missing, with the storage's keyring copied), with ``vm_name`` as a user."""
        sid = entry_id(run_tag, krbd, self.node if self.per_node else "")
        if sid not in self.users:
            try:
                self._api().post("/storage", entry_params(sid, self.scfg(), krbd, self.node))
            except PveApiError as exc:
                if "already defined" not in exc.reason and "already exists" not in exc.reason:
                    raise HypervisorError(f"cannot create the temporary rbd storage {sid} (pool {self.client().pool}, "
                                          f"krbd {int(krbd)}): {exc.message}",
                                          exc.hint or "the token needs Datastore.Allocate on /storage") from None
            self.users[sid] = set()
            if self.client().keyring:
                try:
                    self.host.run(keyring_copy_argv(self.id, sid), timeout=60)
                except CommandError as exc:
                    raise HypervisorError(f"copying the keyring of storage {self.id} for {sid} on {self.host.name}: "
                                          f"{exc.stderr.strip() or exc.message}") from None
        self.users[sid].add(vm_name)
        return sid

    def release(self, sid: str, vm_name: str) -> str | None:
        """``vm_name`` is destroyed: delete the entry once no VM of this run uses it (only the
        config entry: PVE removes its keyring copy; :func:`.entries.release_entry`)."""
        return release_entry(self._api(), self.users, sid, vm_name)
