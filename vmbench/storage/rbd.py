"""Ceph RBD host storage: scratch disks as RBD images in a Ceph pool (``type: rbd``).

Everything runs through the host :class:`~vmbench.transport.base.Transport` with Ceph's own
tools (``ceph``, ``rbd``, ``ceph-conf``) as the scenario's cephx user, so it works on the node
and over SSH.  QEMU opens the images through librbd (the libvirt driver gives the domain a
network disk and the user's key as a libvirt secret); host fio opens them with its ``rbd``
engine, through the same librbd, user and configuration.

Only vmbench's own images are created or removed: named ``vmbench-<run tag>-<seq>-<role>.raw``
and carrying the image metadata ``vmbench.run=<run tag>``; ``vmbench cleanup`` finds leftovers
by both.  Preflight refuses a cluster in ``HEALTH_ERR``, a pool that does not exist and a user
that cannot create an image in it, before anything of the run exists.
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from dataclasses import replace
from typing import Any, Mapping

from .leftover import Leftover
from ..errors import CommandError, HypervisorError, PreflightError
from ..fio.rbd import RbdTarget, parse_target
from ..progress import Progress
from ..scenario.backend import Storage
from ..scenario.model import CephConfig, ZfsSettings
from ..settings import Cache, ImageFormat
from ..transport.base import Transport
from .base import VOLUME_RE, Volume
from .cephcli import OP_TIMEOUT_S, ceph_argv, client_args, rbd_argv
from .radosbench import (BENCH_KIND, MARKER_TEXT, NAMESPACE, OBJECT_PREFIX_RE, RUN_NAME_RE, PoolSpace, cleanup_argvs, client_argv,
                         old_cleanup_argv)

log = logging.getLogger(__name__)

META_KEY = "vmbench.run"
MiB = 1 << 20
#: how long a removal waits for the watch of a QEMU that was killed (not closed) to expire:
#: the OSDs drop a client's watch after ``osd_client_watch_timeout`` (30 s by default)
WATCH_WAIT_S = 75.0


# ---- argv and parsing: pure ------------------------------------------------------------------


def image_spec(cfg: CephConfig, name: str) -> str:
    """``pool/image`` of a vmbench volume (its name without the ``.raw``)."""
    return f"{cfg.pool}/{image_name(name)}"


def image_name(volume: str) -> str:
    return volume[:-4] if volume.endswith(".raw") else volume


def volume_target(cfg: CephConfig, name: str) -> RbdTarget:
    """The image of a vmbench volume as QEMU and host fio open it (:mod:`vmbench.fio.rbd`)."""
    return RbdTarget(cfg.pool, image_name(name), cfg.user, cfg.conf, cfg.keyring, mon_host=cfg.mon_host)


def rbd_host_target(path: str, cache: Cache) -> str:
    """The image at ``path`` as host fio opens it for a VM disk with ``cache``: through librbd
    with the client cache QEMU gives that disk (:attr:`~vmbench.settings.Cache.librbd_cache`)."""
    target = parse_target(path)
    assert target is not None, path
    return str(replace(target, cache=cache.librbd_cache))


def create_argv(cfg: CephConfig, name: str, size: int) -> list[str]:
    return rbd_argv(cfg, "create", "--size", f"{-(-size // MiB)}M", image_spec(cfg, name))


def parse_health(text: str) -> tuple[str, list[str]]:
    """``ceph health --format json`` -> (status, each check's summary)."""
    data = json.loads(text or "{}")
    checks = data.get("checks") or {}
    summaries = [f"{name}: {(c.get('summary') or {}).get('message', '')}".rstrip(": ") for name, c in sorted(checks.items())]
    return str(data.get("status") or data.get("overall_status") or "?"), summaries


def pool_facts(osd_dump: Mapping[str, Any], pool: str) -> dict[str, Any] | None:
    """The pool's replication and placement from ``ceph osd dump``; None when it does not exist."""
    for p in osd_dump.get("pools") or ():
        if p.get("pool_name") == pool:
            return {"size": p.get("size"), "min_size": p.get("min_size"), "pg_num": p.get("pg_num"),
                    "applications": sorted((p.get("application_metadata") or {}).keys())}
    return None


def osd_counts(osd_dump: Mapping[str, Any]) -> dict[str, int]:
    osds = osd_dump.get("osds") or ()
    return {"osds": len(osds), "osds_up": sum(1 for o in osds if o.get("up")), "osds_in": sum(1 for o in osds if o.get("in"))}


def short_version(text: str) -> str:
    """``ceph version 16.2.15 (618f...) pacific (stable)`` -> ``16.2.15 pacific``."""
    words = text.split()
    if len(words) >= 5 and words[:2] == ["ceph", "version"]:
        return f"{words[2]} {words[4]}"
    return text


def parse_keyring(text: str, user: str) -> str | None:
    """The ``key`` of ``[client.<user>]`` in a keyring file."""
    section = None
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1].strip()
        elif section == f"client.{user}" and "=" in line:
            key, value = (x.strip() for x in line.split("=", 1))
            if key == "key":
                return value
    return None


def timed_out(message: str) -> bool:
    """Whether an error says an operation got no answer (librados' ETIMEDOUT, a command's deadline)."""
    return "(110)" in message or "timed out" in message.lower()


def cluster_state(host: Transport, cfg: CephConfig, *, timed_out: bool = False) -> str:
    """What the Ceph cluster under the disk says, for an error message ("the Ceph cluster under
    the disk reports HEALTH_WARN: OSD_DOWN: 1 osds down; ..."), or that it did not answer.
    After an operation that timed out, a HEALTH_OK is not taken for the cause: the monitors keep
    saying it while an OSD that stopped (full, crashed) has no peer to report it, so the OSDs
    are asked directly (one object's stat).  Never raises."""
    try:
        got = host.run(ceph_argv(cfg, "health"), timeout=OP_TIMEOUT_S * 2 + 30, check=False)
        if got.returncode != 0:
            return f"the Ceph cluster did not answer ceph health: {_last_line(got.stderr)}"
        status, checks = parse_health(got.stdout)
        said = status + (f": {'; '.join(checks)}" if checks else "")
        if status != "HEALTH_OK" or not timed_out:
            return f"the Ceph cluster under the disk reports {said}"
        return (f"the Ceph cluster did not answer in time: {osd_answer(host, cfg)}; ceph health says HEALTH_OK, the "
                "monitors' view, which misses an OSD that stopped (full, crashed) with no peer to report it")
    except Exception as exc:  # a message for an error already being raised
        return f"the Ceph cluster could not be asked: {exc}"


#: how long :func:`osd_answer` waits for an OSD
OSD_PROBE_S = 10


def osd_answer(host: Transport, cfg: CephConfig) -> str:
    """Whether the pool's OSDs answer now: the stat of an object that does not exist, in
    vmbench's namespace (an OSD answers "no such object" at once).  Never raises."""
    argv = ["rados", *client_args(cfg), "--rados-osd-op-timeout", str(OSD_PROBE_S), "-p", cfg.pool, "-N", NAMESPACE,
            "stat", "vmbench-osd-probe"]
    try:
        got = host.run(argv, timeout=OSD_PROBE_S + 60, check=False)
    except Exception as exc:
        return f"the OSD probe could not run: {exc}"
    if "No such file" in got.stderr or got.returncode == 0:
        return f"the pool's OSDs answer now (pool {cfg.pool})"
    return f"the OSDs of pool {cfg.pool} did not answer within {OSD_PROBE_S}s ({_last_line(got.stderr)})"


def read_key(host: Transport, cfg: CephConfig) -> str:
    """The user's cephx key, from its keyring on ``host`` (storage.ceph.keyring, else the ones
    the configuration names); never logged, never in an argv."""
    paths = [cfg.keyring] if cfg.keyring else _keyring_paths(host, cfg)
    for path in paths:
        try:
            text = host.read_file(path).decode(errors="replace")
        except OSError:
            continue
        key = parse_keyring(text, cfg.user)
        if key:
            return key
    raise PreflightError(f"no key for client.{cfg.user} in {', '.join(paths) or 'any keyring'} on {host.name}",
                         "name the user's keyring in storage.ceph.keyring")


def _keyring_paths(host: Transport, cfg: CephConfig) -> list[str]:
    got = host.run(["ceph-conf", "--conf", cfg.conf, "--name", f"client.{cfg.user}", "--lookup", "keyring"],
                   timeout=60, check=False)
    return [p.strip() for p in got.stdout.split(",") if p.strip()] if got.returncode == 0 else []


# ---- the storage -----------------------------------------------------------------------------


class RbdStorage:
    """RBD images in ``storage.ceph.pool``, reached as ``client.<user>`` on ``host`` (given the
    scenario's storage, or the client as data: what a Proxmox rbd storage says)."""

    def __init__(self, storage: Storage | CephConfig, host: Transport) -> None:
        cfg = storage if isinstance(storage, CephConfig) else storage.ceph
        assert cfg is not None
        self.cfg: CephConfig = cfg
        self.host = host
        self.label = f"RBD pool {self.cfg.pool} (client.{self.cfg.user})"

    def _run(self, argv: list[str], timeout: float = 120, check: bool = True):
        try:
            return self.host.run(argv, timeout=timeout, check=check)
        except CommandError as exc:
            words = [a for a in argv[1 + len(client_args(self.cfg)):] if not a.startswith("-")][:2]
            raise HypervisorError(f"{' '.join([argv[0], *words])} on {self.host.name} failed: "
                                  f"{_last_line(exc.stderr) if exc.stderr else exc.message}") from None

    def _json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self._run(ceph_argv(self.cfg, *args), timeout=timeout).stdout or "null")

    # ---- preflight --------------------------------------------------------------------------

    def prepare(self, progress: Progress) -> None:
        progress.step(f"checking Ceph pool {self.cfg.pool} as client.{self.cfg.user} on {self.host.name}")
        try:
            got = self.host.run(ceph_argv(self.cfg, "health"), timeout=60, check=False)
        except CommandError as exc:
            raise PreflightError(f"the ceph command cannot run on {self.host.name}: {exc.message}",
                                 "storage.type rbd needs Ceph's client tools on the host (ceph-common)") from None
        if got.returncode != 0:
            raise PreflightError(f"Ceph is not reachable from {self.host.name} as client.{self.cfg.user} with {self.cfg.conf}: "
                                 f"{_last_line(got.stderr)}",
                                 "check storage.ceph (conf, user, keyring) and that the cluster's monitors run")
        status, checks = parse_health(got.stdout)
        if status == "HEALTH_ERR":
            raise PreflightError(f"the Ceph cluster is in HEALTH_ERR: {'; '.join(checks) or 'no details'}",
                                 "vmbench measures a healthy cluster only; `ceph health detail` says what is wrong")
        if pool_facts(self._json("osd", "dump"), self.cfg.pool) is None:
            raise PreflightError(f"Ceph pool {self.cfg.pool} does not exist (storage.pool)",
                                 f"create it: ceph osd pool create {self.cfg.pool} && rbd pool init {self.cfg.pool}")
        self._probe_write()

    def _probe_write(self) -> None:
        """Create and remove one tiny image named like vmbench's (cleanup finds it after kill -9)."""
        name = f"vmbench-r{secrets.token_hex(4)}-0-hostref.raw"
        made = self.host.run(create_argv(self.cfg, name, MiB), timeout=120, check=False)
        if made.returncode != 0:
            raise PreflightError(f"client.{self.cfg.user} cannot create an image in Ceph pool {self.cfg.pool}: "
                                 f"{_last_line(made.stderr)}",
                                 f"give it the rbd profile: ceph auth caps client.{self.cfg.user} mon 'profile rbd' "
                                 f"osd 'profile rbd pool={self.cfg.pool}'")
        self._run(rbd_argv(self.cfg, "rm", "--no-progress", image_spec(self.cfg, name)), timeout=120)
        self.key()  # QEMU needs it: a user without a key is refused now, not at the first boot

    def free_bytes(self) -> int:
        space = self.space()
        return space.max_avail if space is not None else 0

    def space(self) -> PoolSpace | None:
        """The pool's free space, usage and quotas (``ceph df detail``); None: no such pool."""
        return PoolSpace.from_df(self._json("df", "detail"), self.cfg.pool)

    def key(self) -> str:
        """The user's cephx key (for the libvirt secret; never logged)."""
        return read_key(self.host, self.cfg)

    # ---- volumes ----------------------------------------------------------------------------

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None,
                      zfs: ZfsSettings | None = None) -> Volume:
        m = VOLUME_RE.match(name)
        if not m:
            raise HypervisorError(f"{name} is not a vmbench volume name")
        if backing is not None:
            raise HypervisorError(f"{self.label} holds scratch disks only, not linked clones")
        if fmt is not ImageFormat.RAW:
            raise HypervisorError(f"an RBD image is raw; format {fmt.value} is not possible on {self.label}")
        spec = image_spec(self.cfg, name)
        self._run(create_argv(self.cfg, name, size), timeout=300)
        self._run(rbd_argv(self.cfg, "image-meta", "set", spec, META_KEY, m.group(1)), timeout=120)
        return Volume(name=name, path=str(volume_target(self.cfg, name)), format=fmt, kind="rbd",
                      readback={"rbd_image": spec})

    def delete_volume(self, name: str) -> None:
        if not VOLUME_RE.match(name):
            log.warning("not deleting %s: not a vmbench volume", name)
            return
        self.remove_image(image_name(name))

    def remove_image(self, image: str) -> None:
        """Remove an image vmbench made (its name and ``vmbench.run`` metadata agree); gone is fine;
        retried while QEMU, just stopped, still watches it."""
        m = VOLUME_RE.match(image + ".raw")
        if not m:
            raise HypervisorError(f"{self.cfg.pool}/{image} is not named like a vmbench image; left alone")
        spec = f"{self.cfg.pool}/{image}"
        got = self.host.run(rbd_argv(self.cfg, "image-meta", "get", spec, META_KEY), timeout=60, check=False)
        if got.returncode != 0:
            if "error opening image" in got.stderr and "No such file" in got.stderr:
                return  # gone already
            if "failed to get metadata" not in got.stderr:  # that is: no vmbench.run, refused below
                raise HypervisorError(f"reading {spec} on {self.host.name}: {_last_line(got.stderr)}")
        if got.stdout.strip() != m.group(1):
            raise HypervisorError(f"{spec} has no {META_KEY}={m.group(1)} metadata; not vmbench's, left alone")
        last = ""
        deadline = time.monotonic() + WATCH_WAIT_S
        while True:
            done = self.host.run(rbd_argv(self.cfg, "rm", "--no-progress", spec), timeout=300, check=False)
            if done.returncode == 0 or "No such file" in done.stderr:
                return
            last = _last_line(done.stderr)
            watched = any(w in done.stderr for w in ("watchers", "still open", "busy"))
            if not watched or time.monotonic() > deadline:
                break
            time.sleep(3.0)
        raise HypervisorError(f"rbd rm {spec} on {self.host.name}: {last}")

    def delete_path(self, path: str) -> None:
        """``vmbench cleanup`` of a leftover :meth:`leftovers` listed: ``pool/image``, or a
        ``rados bench``'s objects (``pool/namespace/marker or run name or object prefix``)."""
        parts = path.split("/")
        if len(parts) == 3 and parts[1] == NAMESPACE:
            self._remove_bench(parts[2])
            return
        self.remove_image(parts[-1])

    def _remove_bench(self, name: str) -> None:
        """A bench's objects by its marker (its own namespace, then the marker), or what an
        older vmbench left in :data:`NAMESPACE` (by run name or object prefix)."""
        if RUN_NAME_RE.match(name):
            got = self.host.run(client_argv(self.cfg) + ["get", name, "-"], timeout=120, check=False)
            if got.returncode == 0 and got.stdout.encode() == MARKER_TEXT:
                for argv, must in cleanup_argvs(self.cfg, name):
                    done = self.host.run(argv, timeout=600, check=False)
                    if must and done.returncode != 0 and "No such file" not in done.stderr:
                        raise HypervisorError(f"rados {' '.join(argv[-4:-2])} of bench {name} in {self.cfg.pool} on "
                                              f"{self.host.name}: {_last_line(done.stderr)}")
                return
        elif not OBJECT_PREFIX_RE.match(name + "_object0"):
            raise HypervisorError(f"{self.cfg.pool}/{NAMESPACE}/{name} is not a rados bench of vmbench's; left alone")
        self._run(old_cleanup_argv(self.cfg, name), timeout=600)
        if RUN_NAME_RE.match(name):  # its objects may have gone by their prefix already: the run name stays
            self.host.run(client_argv(self.cfg) + ["rm", name], timeout=120, check=False)

    def leftovers(self) -> list[Leftover]:
        """vmbench's images in the pool: named like its volumes, with its metadata."""
        got = self.host.run(rbd_argv(self.cfg, "ls", "--format", "json", self.cfg.pool), timeout=120, check=False)
        if got.returncode != 0:
            raise HypervisorError(f"rbd ls {self.cfg.pool} on {self.host.name}: {_last_line(got.stderr)}")
        out = []
        for image in json.loads(got.stdout or "[]"):
            m = VOLUME_RE.match(f"{image}.raw")
            if not m:
                continue
            meta = self.host.run(rbd_argv(self.cfg, "image-meta", "get", f"{self.cfg.pool}/{image}", META_KEY),
                                 timeout=60, check=False)
            if meta.returncode == 0 and meta.stdout.strip() == m.group(1):
                out.append(Leftover("rbd image", f"{self.cfg.pool}/{image}", m.group(1), f"{META_KEY}={m.group(1)}"))
        return out + self._bench_leftovers()

    def _bench_leftovers(self) -> list[Leftover]:
        """The benches a killed run left: each by its marker in vmbench's namespace (its objects
        in the bench's own namespace), and an older vmbench's objects in that namespace itself."""
        got = self.host.run(client_argv(self.cfg) + ["ls"], timeout=120, check=False)
        if got.returncode != 0:
            raise HypervisorError(f"rados ls in {self.cfg.pool}/{NAMESPACE} on {self.host.name}: {_last_line(got.stderr)}")
        names = set(got.stdout.split())
        out = []
        for n in sorted(o for o in names if RUN_NAME_RE.match(o)):
            out.append(Leftover(BENCH_KIND, f"{self.cfg.pool}/{NAMESPACE}/{n}", RUN_NAME_RE.match(n).group(1),  # type: ignore[union-attr]
                                "a rados bench's objects (by its marker)"))
        prefixes = sorted({m.group(1) for o in names for m in [OBJECT_PREFIX_RE.match(o)] if m})
        out += [Leftover(BENCH_KIND, f"{self.cfg.pool}/{NAMESPACE}/{p}", "", "rados bench objects with no run name")
                for p in prefixes]
        return out

    # ---- facts ------------------------------------------------------------------------------

    def _maybe(self, *args: str) -> Any:
        try:
            got = self.host.run(ceph_argv(self.cfg, *args), timeout=60, check=False)
        except CommandError as exc:
            log.warning("ceph %s: %s", " ".join(args), exc)
            return None
        if got.returncode != 0:
            log.info("ceph %s: %s", " ".join(args), _last_line(got.stderr))
            return None
        try:
            return json.loads(got.stdout or "null")
        except ValueError:
            return None

    def facts(self) -> dict:
        """What is recorded with the run: versions, health, the pool's replication and PGs, the
        OSDs and their object store, the client's librbd cache settings."""
        out: dict = {"storage_type": "rbd", "ceph_pool": self.cfg.pool, "ceph_user": self.cfg.user, "ceph_conf": self.cfg.conf}
        health = self._maybe("health")
        if isinstance(health, dict):
            out["ceph_health"], out["ceph_health_checks"] = parse_health(json.dumps(health))
        versions = self._maybe("versions")
        if isinstance(versions, dict):
            out["ceph_versions"] = sorted({short_version(v) for v in (versions.get("overall") or {})})
        dump = self._maybe("osd", "dump")
        if isinstance(dump, dict):
            out["ceph_pool_facts"] = pool_facts(dump, self.cfg.pool)
            out.update({f"ceph_{k}": v for k, v in osd_counts(dump).items()})
        meta = self._maybe("osd", "metadata")
        if isinstance(meta, list):
            out["ceph_objectstores"] = sorted({str(m.get("osd_objectstore")) for m in meta if m.get("osd_objectstore")})
        out["rbd_client_cache"] = self._client_cache()
        return out

    def _client_cache(self) -> dict[str, str]:
        """The client's librbd cache settings as its configuration gives them (QEMU's cache mode
        may override rbd_cache per disk: writeback turns it on, none and directsync off)."""
        out = {}
        for name in ("rbd_cache", "rbd_cache_policy", "rbd_cache_writethrough_until_flush"):
            got = self.host.run(["ceph-conf", "--conf", self.cfg.conf, "--name", f"client.{self.cfg.user}",
                                 "--show-config-value", name], timeout=60, check=False)
            if got.returncode == 0:
                out[name] = got.stdout.strip()
        return out


def _last_line(text: str) -> str:
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1].strip() if lines else "no message"
