"""A real one-node Ceph cluster for tests: one mon, one mgr, one BlueStore OSD, on 127.0.0.1.

Debian 12's Ceph 16 (``ceph-mon ceph-mgr ceph-osd ceph-common``, installed by
scripts/bootstrap), deployed by hand as Ceph's manual deployment describes, without systemd,
cephadm or ceph-volume: everything lives under one directory (confs, keyrings, the mon's
store, the mgr's and the OSD's data with the OSD's BlueStore in a sparse file, logs, the run
dir with the admin sockets), nothing is read from or written to ``/etc/ceph`` or
``/var/lib/ceph``.  The mon listens on a free port of 127.0.0.1 (msgr2 only), the mgr and
the OSD bind 127.0.0.1 too, so two clusters run side by side (different dirs and ports)::

    cluster = CephCluster.start(tmp_path / "ceph")
    try:
        subprocess.run(["rbd", "ls", cluster.pool], env=cluster.client_env(), ...)
    finally:
        cluster.stop()

It makes a pool ``vmbench`` (size 1, application rbd, ``rbd pool init``) and a cephx user
``client.vmbench`` (``mon 'profile rbd' osd 'profile rbd pool=vmbench' mgr 'allow r'``: the
last for the pool's statistics vmbench samples) with its own
keyring and a client conf (``conf_path``: ``mon_host``, and the keyring in
``[client.vmbench]``) that ``rbd --id vmbench``, fio's rbd engine (``CEPH_CONF``,
``--clientname=vmbench``) and QEMU (``rbd:vmbench/img:id=vmbench:conf=...``) read.

The daemons run in the foreground as children of this process (``-f``): ``stop()`` sends
SIGTERM, then SIGKILL past a deadline.  A cluster still running when the interpreter exits
is stopped by an ``atexit`` handler, and each daemon gets SIGTERM from the kernel if the
process that started it dies without cleaning up (``PR_SET_PDEATHSIG``; start the cluster
from the main thread: the signal follows the starting *thread*).  Every command has a
timeout; a cluster that does not reach HEALTH_OK in time is stopped and the error carries
``ceph -s`` and the end of each daemon's log.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

MON_ID = "a"
MGR_ID = "x"
OSD_ID = 0  # the first OSD of a new cluster (``ceph osd new`` hands out 0)
POOL = "vmbench"
USER = "vmbench"
#: the OSD's BlueStore: a sparse file of this size (it holds what the tests write, no more)
OSD_BLOCK_SIZE = 6 * 1024**3
HEALTH_TIMEOUT = 180.0  # start() -> HEALTH_OK (16-24 s seen on an idle machine)
STOP_TIMEOUT = 30.0  # SIGTERM -> SIGKILL
COMMAND_TIMEOUT = 60.0  # one ceph/rbd/ceph-osd command
DAEMONS = ("ceph-mon", "ceph-mgr", "ceph-osd")
#: mgr modules never loaded (not even imported): optional ones a test cluster does not use;
#: less memory and a faster start.  The always-on ones (balancer, crash, devicehealth,
#: orchestrator, pg_autoscaler, progress, rbd_support, status, telemetry, volumes) cannot be
#: left out: the mgr then reports them failed (HEALTH_ERR MGR_MODULE_ERROR).  ``ceph osd
#: perf`` and ``ceph osd pool stats`` are the mgr's own commands, not modules'.
MGR_DISABLED_MODULES = ("alerts diskprediction_local influx insights localpool mirroring nfs prometheus restful "
                        "selftest snap_schedule stats telegraf test_orchestrator zabbix")

_PR_SET_PDEATHSIG = 1
_running: set["CephCluster"] = set()
_running_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _die_with_parent() -> None:  # preexec_fn: SIGTERM when the starting thread's process dies
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def _tail(path: Path, lines: int = 20, width: int = 300) -> str:
    """The last ``lines`` non-blank lines of a log, each cut at ``width`` characters."""
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"({exc})"
    return "\n".join(line[:width] for line in [l for l in text.splitlines() if l.strip()][-lines:])


def _run(argv: list[str], *, timeout: float = COMMAND_TIMEOUT) -> str:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        raise CephError(f"{' '.join(argv)}: no answer within {timeout:g}s") from exc
    if done.returncode != 0:
        raise CephError(f"{' '.join(argv)} failed (exit {done.returncode}): {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


class CephError(RuntimeError):
    pass


class CephCluster:
    """One mon, one mgr and one OSD under ``base_dir``; see the module's docstring."""

    def __init__(self, base_dir: Path, mon_port: int) -> None:
        self.base_dir = Path(base_dir).resolve()
        self.mon_port = mon_port
        self.mon_host = f"127.0.0.1:{mon_port}"
        self.fsid = str(uuid.uuid4())
        self.pool = POOL
        self.user = USER
        d = self.base_dir
        self.admin_conf_path = d / "ceph.conf"  # the daemons' and the admin's conf
        self.admin_keyring_path = d / "ceph.client.admin.keyring"
        self.conf_path = d / "client.conf"  # what a client (client.vmbench) reads
        self.keyring_path = d / f"ceph.client.{USER}.keyring"
        self.log_dir, self.run_dir = d / "log", d / "run"
        self.mon_data, self.mgr_data, self.osd_data = d / "mon", d / "mgr", d / "osd"
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: seconds: "health_ok" (start() -> HEALTH_OK, all PGs active+clean: start() returns), "stop"
        self.timings: dict[str, float] = {}

    # ---- public API ------------------------------------------------------------------------

    @classmethod
    def start(cls, base_dir: Path, *, mon_port: int | None = None, health_timeout: float = HEALTH_TIMEOUT) -> "CephCluster":
        """Deploy and start a new cluster in ``base_dir`` (created; it must be empty), make the
        pool and the user, and return once ``ceph status`` says HEALTH_OK with every PG
        active+clean.  On any failure (``health_timeout`` included) the daemons are stopped
        and the CephError says why, with ``ceph -s`` and the end of the daemons' logs."""
        for daemon in DAEMONS:
            if shutil.which(daemon) is None:
                raise CephError(f"{daemon} is missing: run scripts/bootstrap (apt-get install ceph-mon ceph-mgr ceph-osd ceph-common)")
        base_dir = Path(base_dir)
        base_dir.mkdir(parents=True, exist_ok=True)
        if any(base_dir.iterdir()):
            raise CephError(f"{base_dir} is not empty")
        cluster = cls(base_dir, mon_port or free_port())
        with _running_lock:
            _running.add(cluster)
        try:
            cluster._deploy(health_timeout)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def stop(self, timeout: float = STOP_TIMEOUT, *, discard_block: bool = False) -> None:
        """SIGTERM the daemons (the OSD first: it waits for the mon to mark it down, 5 s when
        the mon is gone already), SIGKILL those still running after ``timeout``.  Files stay
        (confs, logs), but with ``discard_block`` the OSD's BlueStore file goes: the only big
        one (what was written to the pool)."""
        started = time.monotonic()
        deadline = started + timeout
        stopped = bool(self.procs)
        for stage in (["osd"], ["mgr", "mon"]):
            procs = [self.procs.pop(kind) for kind in stage if kind in self.procs]
            for proc in procs:
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for proc in procs:
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(timeout=10)
        with _running_lock:
            _running.discard(self)
        if stopped:
            self.timings["stop"] = time.monotonic() - started
        if discard_block:
            (self.osd_data / "block").unlink(missing_ok=True)

    def __enter__(self) -> "CephCluster":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def admin_env(self) -> dict[str, str]:
        """The environment for a tool run as client.admin (``CEPH_CONF`` is the cluster's conf,
        whose ``[client.admin]`` names the admin keyring)."""
        return {**os.environ, "CEPH_CONF": str(self.admin_conf_path)}

    def client_env(self) -> dict[str, str]:
        """The environment a client process (rbd --id vmbench, fio's rbd engine, qemu-img)
        runs with: ``CEPH_CONF`` is the client conf."""
        return {**os.environ, "CEPH_CONF": str(self.conf_path)}

    def ceph(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """The ceph CLI as client.admin; its stdout."""
        return _run(["ceph", "--conf", str(self.admin_conf_path), "--name", "client.admin",
                     "--keyring", str(self.admin_keyring_path), "--connect-timeout", str(int(min(timeout, 30))), *args],
                    timeout=timeout)

    def ceph_json(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> Any:
        """``ceph ARGS --format json``, parsed."""
        return json.loads(self.ceph(*args, "--format", "json", timeout=timeout))

    def rbd(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """The rbd CLI as client.vmbench with the client conf; its stdout."""
        return _run(["rbd", "--conf", str(self.conf_path), "--id", self.user, *args], timeout=timeout)

    def key(self) -> str:
        """client.vmbench's secret (base64), as a libvirt ceph secret or QEMU's key-secret takes it."""
        return self.ceph("auth", "get-key", f"client.{self.user}").strip()

    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items() if proc.poll() is None}

    def rss_kib(self) -> dict[str, int]:
        """Resident memory of each running daemon (VmRSS, KiB)."""
        out = {}
        for name, pid in self.pids().items():
            try:
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1])
            except OSError:
                pass
        return out

    def status(self) -> dict[str, Any]:
        """``ceph status --format json`` (the mon's view: PG states reach it from the mgr
        every ``mon_mgr_digest_period``, 5 s)."""
        return self.ceph_json("status", timeout=30)

    def wait_healthy(self, timeout: float = HEALTH_TIMEOUT, *, since: float | None = None) -> None:
        """Until ``ceph status`` says HEALTH_OK with every PG active+clean (right after the
        pools are made, health is already OK while their PGs are still unknown there); past
        ``timeout`` a CephError with ``ceph -s`` and the daemons' logs (``since``: the
        ``time.monotonic()`` the error counts from, when the wait is the end of a longer one)."""
        begin = time.monotonic() if since is None else since
        deadline = time.monotonic() + timeout
        last = ""
        while True:
            self._check_alive()
            try:
                status = self.status()
                health, pgmap = status["health"], status["pgmap"]
                states = {s["state_name"]: s["count"] for s in pgmap.get("pgs_by_state", [])}
                if health["status"] != "HEALTH_OK":
                    last = f"{health['status']} {json.dumps(health.get('checks', {}))}"
                elif not pgmap.get("num_pgs") or set(states) != {"active+clean"}:
                    last = f"HEALTH_OK, PGs {json.dumps(states)}"
                else:
                    return
            except (CephError, ValueError, KeyError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise CephError(f"the test Ceph cluster in {self.base_dir} is not HEALTH_OK with all PGs active+clean "
                                f"after {time.monotonic() - begin:.0f}s (last: {last})\n{self.diagnostics()}")
            time.sleep(1)

    def diagnostics(self) -> str:
        """``ceph -s`` and the end of each daemon's log, for an error message."""
        try:
            status = self.ceph("-s", timeout=20)
        except CephError as exc:
            status = str(exc)
        parts = [f"ceph -s:\n{status}"]
        for log in sorted(self.log_dir.glob("*")):
            parts.append(f"--- {log.name} (end):\n{_tail(log)}")
        return "\n".join(parts)

    # ---- deployment ------------------------------------------------------------------------

    def _deploy(self, health_timeout: float) -> None:
        started = time.monotonic()
        for d in (self.log_dir, self.run_dir, self.mon_data, self.mgr_data, self.osd_data, self.base_dir / "crash"):
            d.mkdir(mode=0o700)
        self._write_confs()
        self._make_mon()
        self._spawn("mon", ["ceph-mon", "-f", "-i", MON_ID])
        self._wait(started + health_timeout, "the mon to answer", lambda: self.ceph("mon", "stat", timeout=20))
        self._make_mgr()
        self._spawn("mgr", ["ceph-mgr", "-f", "-i", MGR_ID])
        self._make_osd()
        self._spawn("osd", ["ceph-osd", "-f", "-i", str(OSD_ID)])
        self._wait(started + health_timeout, "the OSD to be up",
                   lambda: self.ceph_json("osd", "stat", timeout=20).get("num_up_osds") == 1)
        self.ceph("osd", "pool", "create", POOL, "8", "8", "replicated", "--size", "1")
        self.ceph("osd", "pool", "application", "enable", POOL, "rbd")
        self._run_admin(["rbd", "pool", "init", POOL], timeout=120)  # waits for the PGs to be active
        self.ceph("auth", "get-or-create", f"client.{USER}", "mon", "profile rbd", "osd", f"profile rbd pool={POOL}", "mgr", "allow r",
                  "-o", str(self.keyring_path))
        self.keyring_path.chmod(0o600)
        self.wait_healthy(max(1.0, started + health_timeout - time.monotonic()), since=started)
        self.timings["health_ok"] = time.monotonic() - started

    def _write_confs(self) -> None:
        d = self.base_dir
        log = f"{self.log_dir}/$name.log"
        self.admin_conf_path.write_text(f"""\
# test cluster (tests/ceph.py): the daemons' and client.admin's conf
[global]
fsid = {self.fsid}
mon_host = v2:{self.mon_host}
mon_initial_members = {MON_ID}
public_addr = 127.0.0.1
cluster_addr = 127.0.0.1
ms_bind_msgr1 = false
ms_bind_msgr2 = true
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
auth_allow_insecure_global_id_reclaim = false
run_dir = {self.run_dir}
crash_dir = {d}/crash
mon_cluster_log_file = {self.log_dir}/cluster.log
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
# the machine's root fs may sit below the default 30% free: no MON_DISK_LOW warning
mon_data_avail_warn = 10
mgr_initial_modules = iostat
mgr_disabled_modules = {MGR_DISABLED_MODULES}

# logs, keyrings and data per daemon section: in [global] clients would read them too
[mon]
mon_data = {self.mon_data}
keyring = {self.mon_data}/keyring
log_file = {log}

[mgr]
mgr_data = {self.mgr_data}
keyring = {self.mgr_data}/keyring
log_file = {log}

[osd]
osd_data = {self.osd_data}
keyring = {self.osd_data}/keyring
log_file = {log}
osd_objectstore = bluestore
# BlueStore's block device: a sparse file $osd_data/block (bluestore_block_path would fail
# mkfs with "Too many levels of symbolic links": left unset)
bluestore_block_create = true
bluestore_block_size = {OSD_BLOCK_SIZE}
osd_memory_target = 1073741824

[client.admin]
keyring = {self.admin_keyring_path}
""")
        self.conf_path.write_text(f"""\
# test cluster (tests/ceph.py): what client.{USER} reads (CEPH_CONF, rbd --conf, QEMU's conf=)
[global]
fsid = {self.fsid}
mon_host = {self.mon_host}

[client.{USER}]
keyring = {self.keyring_path}
""")

    def _make_mon(self) -> None:
        d = self.base_dir
        mon_keyring = d / "mon-mkfs.keyring"
        _run(["ceph-authtool", "--create-keyring", str(mon_keyring), "--gen-key", "-n", "mon.", "--cap", "mon", "allow *"])
        _run(["ceph-authtool", "--create-keyring", str(self.admin_keyring_path), "--gen-key", "-n", "client.admin",
              "--cap", "mon", "allow *", "--cap", "osd", "allow *", "--cap", "mds", "allow *", "--cap", "mgr", "allow *"])
        _run(["ceph-authtool", str(mon_keyring), "--import-keyring", str(self.admin_keyring_path)])
        monmap = d / "monmap"
        _run(["monmaptool", "--create", "--fsid", self.fsid, "--addv", MON_ID, f"[v2:{self.mon_host}]", str(monmap)])
        _run(["ceph-mon", "--conf", str(self.admin_conf_path), "--mkfs", "-i", MON_ID, "--monmap", str(monmap),
              "--keyring", str(mon_keyring)], timeout=120)

    def _make_mgr(self) -> None:
        self.ceph("auth", "get-or-create", f"mgr.{MGR_ID}", "mon", "allow profile mgr", "osd", "allow *", "mds", "allow *",
                  "-o", str(self.mgr_data / "keyring"))

    def _make_osd(self) -> None:
        osd_uuid = str(uuid.uuid4())
        secret = _run(["ceph-authtool", "--gen-print-key"]).strip()
        new = self.osd_data / "new.json"
        new.write_text(json.dumps({"cephx_secret": secret}))
        osd_id = self.ceph("osd", "new", osd_uuid, "-i", str(new)).strip()
        new.unlink()
        if osd_id != str(OSD_ID):
            raise CephError(f"ceph osd new gave id {osd_id!r}, not {OSD_ID}")
        (self.osd_data / "keyring").write_text(f"[osd.{OSD_ID}]\n\tkey = {secret}\n")
        (self.osd_data / "keyring").chmod(0o600)
        _run(["ceph-osd", "--conf", str(self.admin_conf_path), "-i", str(OSD_ID), "--mkfs", "--osd-uuid", osd_uuid],
             timeout=300)

    def stop_osd(self, timeout: float = STOP_TIMEOUT) -> None:
        """Stop the OSD as an admin would (SIGTERM: it tells the mon it goes down), keeping its data."""
        proc = self.procs.pop("osd")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)

    def start_osd(self, timeout: float = HEALTH_TIMEOUT) -> None:
        """Start the OSD :meth:`stop_osd` stopped again, and wait for HEALTH_OK with every PG active+clean."""
        self._spawn("osd", ["ceph-osd", "-f", "-i", str(OSD_ID)])
        self.wait_healthy(timeout)

    def _run_admin(self, argv: list[str], timeout: float = COMMAND_TIMEOUT) -> str:
        return _run([argv[0], "--conf", str(self.admin_conf_path), "--name", "client.admin", *argv[1:]], timeout=timeout)

    def _spawn(self, kind: str, argv: list[str]) -> None:
        out = open(self.log_dir / f"{kind}.out", "ab")
        try:
            self.procs[kind] = subprocess.Popen([*argv, "--conf", str(self.admin_conf_path)], stdin=subprocess.DEVNULL,
                                                stdout=out, stderr=subprocess.STDOUT, cwd=self.base_dir,
                                                start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            out.close()

    def _check_alive(self) -> None:
        for kind, proc in self.procs.items():
            if proc.poll() is not None:
                raise CephError(f"ceph-{kind} of the test cluster in {self.base_dir} exited ({proc.returncode})\n{self.diagnostics()}")

    def _wait(self, deadline: float, what: str, probe) -> None:
        last = ""
        while True:
            self._check_alive()
            try:
                if probe():
                    return
            except (CephError, ValueError) as exc:
                last = str(exc)
            if time.monotonic() > deadline:
                raise CephError(f"test Ceph cluster in {self.base_dir}: gave up waiting for {what} "
                                f"({last or 'no error'})\n{self.diagnostics()}")
            time.sleep(1)


@atexit.register
def _stop_all() -> None:
    with _running_lock:
        clusters = list(_running)
    for cluster in clusters:
        cluster.stop(timeout=15)
