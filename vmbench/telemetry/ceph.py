"""What the Ceph pool under an RBD disk did while fio ran (METHOD rule 8), read cheaply.

The pool's client counters (``ceph df detail``: every client's reads and writes to the pool,
in operations and bytes, cumulative, as the OSDs last reported them to the manager) are read
once just before fio starts and once :data:`LAG_S` seconds after it ends (the manager's
reports trail the OSDs by about five seconds), with ``ceph osd perf`` (each OSD's commit and
apply latency, its last few seconds) at that second reading: three ``ceph`` commands per fio
run, none while it measures.  The difference is what the pool did over fio's ramp and runtime:
its means are the "ceph" telemetry of the measurement (:func:`window_series`).  An earlier
vmbench sampled ``ceph osd pool stats`` and ``ceph osd perf`` every 2 s beside fio, which cost
the measured figure about a tenth on a 2-core host (each ``ceph`` command is a Python process
of about 0.15 s of CPU), and whose rates, the manager's smoothed averages, carried an earlier
job's or the precondition's I/O into the next job's window; :func:`summary` still reads what it
stored.  The user needs the caps ``mgr 'allow r'``; without them the series is missing and a
warning says so.

:class:`CephWatch` asks ``ceph health`` when fio makes no progress (a stall:
:mod:`vmbench.fio.stall`), and every :data:`WATCH_INTERVAL_S` seconds otherwise, and ends the
run when a check of :data:`DEGRADING_CHECKS` appears that was not there when fio started: an
OSD that goes down under a pool without replicas blocks the disk's I/O until fio's deadline
(minutes), a full pool blocks every write (it ends the run once fio stalls on it: reads go
on), and with replicas the rest of the run would measure a degraded cluster beside a healthy
one.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ..errors import CommandError, HypervisorError
from ..transport.base import Transport

log = logging.getLogger(__name__)

#: how often the watch asks ``ceph health`` while fio makes progress (at once when it stalls)
WATCH_INTERVAL_S = 30.0
#: health checks that say the cluster lost I/O capacity, stopped serving some of it, or takes no more writes
DEGRADING_CHECKS = frozenset({"OSD_DOWN", "PG_AVAILABILITY", "PG_DEGRADED", "SLOW_OPS", "POOL_FULL", "OSD_FULL"})
#: of those, the ones that stop writes only: they end a run once fio stalls (a read job goes on)
FULL_CHECKS = frozenset({"POOL_FULL", "OSD_FULL"})
LAG_S = 6.0  # the manager's reports trail the OSDs by about 5 s
#: the counters of a pool in ``ceph df detail``'s stats
COUNTERS = ("rd", "rd_bytes", "wr", "wr_bytes")


@dataclass(frozen=True)
class CephPool:
    """What the sampler asks Ceph about: the ``ceph`` command with the client's options, and the pool."""

    command: tuple[str, ...]
    pool: str
    #: the degrading checks the cluster reported when the run began: flagged on its results
    #: (the environment's health), not a reason to stop it
    known: frozenset[str] = frozenset()


def pool_counters(df: Any, pool: str) -> dict[str, int] | None:
    """A pool's cumulative client counters from ``ceph df detail --format json``; None when absent."""
    got = next((p for p in (df or {}).get("pools") or () if p.get("name") == pool), None) if isinstance(df, dict) else None
    stats = (got or {}).get("stats")
    if not isinstance(stats, dict) or not all(k in stats for k in COUNTERS):
        return None
    return {k: int(stats.get(k) or 0) for k in COUNTERS}


def osd_latency(perf: Any) -> tuple[float | None, float | None]:
    """The OSDs' mean commit and apply latency (ms) from ``ceph osd perf --format json``."""
    infos = (((perf or {}).get("osdstats") or {}).get("osd_perf_infos") or []) if isinstance(perf, dict) else []
    lat = [i.get("perf_stats") or {} for i in infos]
    commit = [float(p.get("commit_latency_ms") or 0) for p in lat]
    apply = [float(p.get("apply_latency_ms") or 0) for p in lat]
    return (sum(commit) / len(commit) if commit else None, sum(apply) / len(apply) if apply else None)


def window_series(before: Mapping[str, int], after: Mapping[str, int], seconds: float,
                  latency: tuple[float | None, float | None] = (None, None)) -> dict[str, Any]:
    """The "ceph" series of one fio run: the pool's client I/O between two readings of its
    counters, as rates over ``seconds`` (fio's ramp and runtime), and the OSDs' latency."""
    secs = max(seconds, 1e-3)
    d = {k: max(0, int(after[k]) - int(before[k])) for k in COUNTERS}
    return {"window_s": round(seconds, 3), "read_bytes": d["rd_bytes"], "write_bytes": d["wr_bytes"],
            "read_ops_total": d["rd"], "write_ops_total": d["wr"],
            "t_s": [round(seconds, 3)], "read_mb_s": [d["rd_bytes"] / secs / 1e6], "write_mb_s": [d["wr_bytes"] / secs / 1e6],
            "read_ops": [d["rd"] / secs], "write_ops": [d["wr"] / secs], "commit_ms": [latency[0]], "apply_ms": [latency[1]]}


def summary(series: dict | None, lag: float = LAG_S) -> dict[str, Any]:
    """``pool_read_mb_s``, ``pool_write_mb_s`` (as a ZFS pool's are named), ``pool_read_ops``,
    ``pool_write_ops``, ``osd_commit_ms``, ``osd_apply_ms``: a window's figures as they are
    (:func:`window_series`); an older run's sampled series, the means over the samples from
    ``lag`` after the start (the fio window as the manager saw it); {} without samples."""
    if not isinstance(series, dict) or not series.get("t_s"):
        return {}
    window = "window_s" in series
    idx = [i for i, t in enumerate(series["t_s"]) if window or t >= lag]
    if not idx:
        return {}
    names = {"read_mb_s": "pool_read_mb_s", "write_mb_s": "pool_write_mb_s", "read_ops": "pool_read_ops",
             "write_ops": "pool_write_ops", "commit_ms": "osd_commit_ms", "apply_ms": "osd_apply_ms"}
    out = {}
    for key, name in names.items():
        values = [series[key][i] for i in idx if i < len(series.get(key) or ()) and series[key][i] is not None]
        if values:
            out[name] = sum(values) / len(values)
    return out


def _ceph_json(transport: Transport, pool: CephPool, *args: str) -> Any:
    got = transport.run([*pool.command, *args, "--format", "json"], timeout=60, check=False)
    if got.returncode != 0:
        raise HypervisorError(f"ceph {' '.join(args)}: {(got.stderr or '').strip()[-200:] or 'failed'}")
    return json.loads(got.stdout or "null")


class CephSampler:
    """:meth:`start` just before fio, :meth:`stop` after it (waits out the manager's lag);
    neither raises (telemetry never fails a measurement)."""

    def __init__(self, transport: Transport, pool: CephPool, *, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.pool = pool
        self.sleep = sleep
        self.clock = clock
        self.before: dict[str, int] | None = None
        self.started = 0.0

    def start(self) -> None:
        try:
            self.before = pool_counters(_ceph_json(self.transport, self.pool, "df", "detail"), self.pool.pool)
            if self.before is None:
                log.warning("%s: Ceph telemetry not recorded: ceph df detail has no counters of pool %s",
                            self.transport.name, self.pool.pool)
        except Exception as exc:  # telemetry never fails a measurement
            log.warning("%s: Ceph telemetry not recorded (does the user have mgr 'allow r'?): %s", self.transport.name, exc)
            self.before = None
        self.started = self.clock()

    def stop(self, seconds: float | None = None) -> dict[str, dict]:
        """The "ceph" series over fio's ``seconds`` (None: the time since :meth:`start`)."""
        if self.before is None:
            return {}
        took = self.clock() - self.started
        try:
            self.sleep(LAG_S)  # what the manager reports of fio's last seconds
            after = pool_counters(_ceph_json(self.transport, self.pool, "df", "detail"), self.pool.pool)
            if after is None:
                raise HypervisorError(f"ceph df detail has no counters of pool {self.pool.pool}")
            try:
                latency = osd_latency(_ceph_json(self.transport, self.pool, "osd", "perf"))
            except Exception as exc:
                log.info("%s: ceph osd perf: %s", self.transport.name, exc)
                latency = (None, None)
            # fio's ramp and runtime; less when it ended early (steady state reached)
            return {"ceph": window_series(self.before, after, min(seconds, took) if seconds else took, latency)}
        except Exception as exc:
            log.warning("%s: Ceph telemetry not recorded: %s", self.transport.name, exc)
            return {}
        finally:
            self.before = None


def degrading_checks(health_json: str) -> dict[str, str]:
    """``ceph health [detail] --format json`` -> {check: its summary, and with ``detail`` the
    first lines that name what it is about ("pool 'vmbench' is full (running out of quota)")}
    of the checks in :data:`DEGRADING_CHECKS`; {} when the text is not that JSON."""
    try:
        checks = (json.loads(health_json or "{}") or {}).get("checks") or {}
    except (ValueError, AttributeError):
        return {}
    out = {}
    for name, c in sorted(checks.items()):
        if name in DEGRADING_CHECKS:
            detail = [str(d.get("message")) for d in (c.get("detail") or [])[:2] if isinstance(d, dict) and d.get("message")]
            summary = str((c.get("summary") or {}).get("message") or "")
            out[name] = summary + (f" ({'; '.join(detail)})" if detail else "")
    return out


def ask_degrading(transport: Transport, pool: CephPool) -> dict[str, str] | None:
    """The degrading checks ``ceph health detail`` reports now; None when Ceph did not answer."""
    try:
        got = transport.run([*pool.command, "health", "detail", "--format", "json"], timeout=20, check=False)
    except CommandError as exc:
        log.warning("%s: ceph health did not answer: %s", transport.name, exc)
        return None
    return degrading_checks(got.stdout) if got.returncode == 0 else None


class CephWatch:
    """:meth:`check` while fio runs: asks Ceph at most every ``interval`` seconds, or at once
    (then at most every ``stalled_interval``) while fio is stalled; raises
    :class:`HypervisorError` when a degrading check appears that the run did not begin with
    (``pool.known``), a full pool or OSD (:data:`FULL_CHECKS`) only once fio stalls on it.
    :attr:`said` is what Ceph answered last, for a stall's progress line."""

    def __init__(self, transport: Transport, pool: CephPool, *, interval: float = WATCH_INTERVAL_S,
                 stalled_interval: float = 5.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.pool = pool
        self.interval = interval
        self.stalled_interval = stalled_interval
        self.clock = clock
        self.asked = clock()
        self.said = ""

    def check(self, stalled: bool = False) -> None:
        wait = self.stalled_interval if stalled else self.interval
        if self.clock() - self.asked < wait:
            return
        self.asked = self.clock()
        got = ask_degrading(self.transport, self.pool)
        if got is None:
            self.said = f"Ceph did not answer ceph health on {self.transport.name}"
            return
        new = {k: v for k, v in got.items() if k not in self.pool.known}
        self.said = ("Ceph: " + "; ".join(f"{k}: {v}" if v else k for k, v in got.items()) if got
                     else "ceph health names no check that stops I/O (the monitors' view)")
        if new and (stalled or not new.keys() <= FULL_CHECKS):
            said = "; ".join(f"{k}: {v}" if v else k for k, v in new.items())
            raise HypervisorError(f"Ceph reported {said} while fio ran on pool {self.pool.pool}: the run stopped "
                                  "rather than wait out fio's deadline or measure a degraded cluster")
