"""A run's recorded environment (METHOD rule 10) as a record: the host, its software, how it
was reached, its storage, as :func:`vmbench.run.environment.host_environment` and the
driver's ``describe_host`` recorded them (``runs.environment_json``).

:class:`Environment` is a frozen record: a read-only mapping of every fact as stored (what
``history`` follows and compares key by key, stored back as it was read: :meth:`to_row`), with
the facts the report, the advice and ``compare`` read as attributes; a fact the run did not
record (or recorded as null) is None.  A fact added or changed makes a new record
(:meth:`with_facts`), never an edit.
Which facts make "the same host" is said here once: :data:`SAME_HOST_KEYS` (a resume needs
them equal) and, of them, :data:`HOST_IDENTITY_KEYS` (what a comparison of results needs
equal).
"""

from __future__ import annotations

from typing import Any, Generic, Mapping, TypeVar, overload

from ..scenario.backend import backend_named
from .frozen import FrozenMapping

T = TypeVar("T")

#: facts that must be equal for a run to be resumed on "the same host"
SAME_HOST_KEYS = ("hostname", "host_kernel", "host_cpu", "qemu_version", "libvirt_version", "host_fio",
                  "driver", "libvirt_uri", "host_state_dir", "pool", "ssh_host_key")
#: What identifies the machine a measurement describes: the SAME_HOST_KEYS that are about
#: the host and its software.  The rest of SAME_HOST_KEYS (driver, URI, state dir, pool, SSH
#: host key) say how vmbench reached it and where it kept its files, which a resume needs
#: equal but a comparison of results does not.
HOST_IDENTITY_KEYS = tuple(k for k in SAME_HOST_KEYS if k in ("hostname", "host_kernel", "host_cpu", "qemu_version", "host_fio"))


class Fact(Generic[T]):
    """One recorded fact, read by the attribute's name (None: not recorded)."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type) -> "Fact[T]": ...

    @overload
    def __get__(self, obj: "Environment", owner: type) -> T | None: ...

    def __get__(self, obj: "Environment | None", owner: type) -> "T | None | Fact[T]":
        if obj is None:
            return self
        return obj._stored.get(self.name)


class Environment(FrozenMapping[Any]):
    """A run's recorded environment; see the module's doc."""

    __slots__ = ()

    # the host and its software
    hostname: Fact[str] = Fact()
    host_kernel: Fact[str] = Fact()
    host_cpu: Fact[str] = Fact()
    host_memory_mib: Fact[int] = Fact()
    qemu_version: Fact[str] = Fact()
    libvirt_version: Fact[str] = Fact()
    host_fio: Fact[str] = Fact()
    vmbench_version: Fact[str] = Fact()
    driver: Fact[str] = Fact()
    accelerator: Fact[str] = Fact()
    accelerator_reason: Fact[str] = Fact()
    # Proxmox VE
    pve_version: Fact[str] = Fact()
    pve_api: Fact[str] = Fact()
    pve_node: Fact[str] = Fact()
    pve_token_id: Fact[str] = Fact()
    pve_tls: Fact[str] = Fact()
    tls_verify_off: Fact[bool] = Fact()
    pveversion: Fact[str] = Fact()  # pveversion -v, a package a line
    # how it was reached
    ssh_host: Fact[str] = Fact()
    ssh_user: Fact[str] = Fact()
    ssh_port: Fact[int] = Fact()
    ssh_host_key: Fact[str] = Fact()
    hosts: Fact[Mapping[str, Any]] = Fact()  # a run across several hosts: each host's own facts, by its label
    attempts: Fact[list] = Fact()  # a resumed run's later attempts: [{"attempt", "run_tag"}]
    # the storage
    storage_type: Fact[str] = Fact()
    zfs_pool: Fact[str] = Fact()
    zfs_dataset: Fact[str] = Fact()
    zfs_userland: Fact[str] = Fact()
    zfs_kmod: Fact[str] = Fact()
    zfs_scan: Fact[str] = Fact()
    zfs_txg_timeout_s: Fact[float] = Fact()
    zpool_ashift: Fact[int] = Fact()
    vdev_ashift: Fact[list] = Fact()
    zpool_list: Fact[str] = Fact()  # zpool list -v -Hp, as read when the run started
    zpool_status: Fact[str] = Fact()
    arc: Fact[Mapping[str, Any]] = Fact()  # c_max_bytes, size_bytes
    ceph_pool: Fact[str] = Fact()
    ceph_user: Fact[str] = Fact()
    ceph_versions: Fact[list] = Fact()
    ceph_health: Fact[str] = Fact()
    ceph_health_checks: Fact[list] = Fact()
    ceph_pool_facts: Fact[Mapping[str, Any]] = Fact()  # size, min_size, pg_num
    ceph_osds: Fact[int] = Fact()
    ceph_osds_up: Fact[int] = Fact()
    ceph_objectstores: Fact[list] = Fact()
    rbd_client_cache: Fact[Mapping[str, Any]] = Fact()

    @classmethod
    def from_row(cls, stored: Mapping[str, Any] | None) -> "Environment":
        return stored if isinstance(stored, Environment) else cls(stored or {})

    def to_row(self) -> dict[str, Any]:
        """The facts as stored (``runs.environment_json``)."""
        return dict(self._stored)

    def with_facts(self, **facts: Any) -> "Environment":
        """A new record: these facts added or changed."""
        return Environment({**self._stored, **facts})

    def fact(self, key: str) -> Any:
        """Any recorded fact by its stored key (None: not recorded): what ``history`` and
        ``compare`` walk key by key."""
        return self._stored.get(key)

    @property
    def on_librbd(self) -> bool:
        """The run's disks are RBD images QEMU opens through librbd: no host page cache under them."""
        backend = backend_named(self.storage_type)
        return backend is not None and not backend.host_page_cache

    @property
    def on_ceph(self) -> bool:
        """A Ceph pool is under the run's disks: the report states the cluster."""
        backend = backend_named(self.storage_type)
        return backend is not None and backend.ceph

    @property
    def host_memory_bytes(self) -> int | None:
        """The host RAM a guest's reads may come from (its page cache under the disk); None
        where there is none (RBD) or the run did not record it."""
        return None if self.on_librbd else (self.host_memory_mib or 0) << 20 or None

    @property
    def arc_c_max_bytes(self) -> float | None:
        """The ARC's c_max when the run started (arcstats)."""
        return (self.arc or {}).get("c_max_bytes")

    @property
    def arc_size_bytes(self) -> float | None:
        return (self.arc or {}).get("size_bytes")

    @property
    def later_tags(self) -> tuple[str, ...]:
        """The run tags of a resumed run's later attempts, in order."""
        return tuple(str(a["run_tag"]) for a in self.attempts or [] if a.get("run_tag"))
