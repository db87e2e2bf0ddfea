"""What the Ceph pool under an RBD disk did while fio ran (METHOD rule 8).

Beside the device sampler, on the host that reaches the cluster, a loop runs Ceph's own
``ceph osd pool stats POOL`` (the pool's client I/O rates) and ``ceph osd perf`` (each OSD's
commit and apply latency) every :data:`INTERVAL_S` seconds, as the run's cephx user; both
answer from the manager's view, which trails the OSDs by about five seconds, so the loop
goes on :data:`LAG_S` seconds after fio and the figures are the means over the samples from
``LAG_S`` after the start: the fio window as the manager saw it.  The user needs the caps
``mgr 'allow r'``; without them the series is missing and a warning says so.

The loop is a fixed shell script (:data:`CEPH_SAMPLER_SCRIPT`); the command and the pool are
its arguments, never part of its text.

Beside it, :class:`CephWatch` asks ``ceph health`` every :data:`WATCH_INTERVAL_S` seconds
while fio runs and ends the run when a check of :data:`DEGRADING_CHECKS` appears that was not
there when fio started: an OSD that goes down under a pool without replicas blocks the disk's
I/O until fio's deadline (minutes), and with replicas the rest of the run would measure a
degraded cluster beside a healthy one.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..errors import CommandError, HypervisorError
from ..transport.base import Transport

log = logging.getLogger(__name__)

INTERVAL_S = 2
WATCH_INTERVAL_S = 5.0
#: health checks that say the cluster lost I/O capacity or stopped serving some of it
DEGRADING_CHECKS = frozenset({"OSD_DOWN", "PG_AVAILABILITY", "PG_DEGRADED", "SLOW_OPS"})
LAG_S = 6.0  # the manager's reports trail the OSDs by about 5 s
#: each sample: "@ <epoch seconds>", the pool stats JSON, "%", the osd perf JSON, ".".
#: Arguments: output file, interval, max seconds, pool, then the ceph command with its client options.
CEPH_SAMPLER_SCRIPT = r"""out=$1; iv=$2; max=$3; pool=$4; shift 4
start=$(date +%s)
while :; do
  now=$(date +%s.%N)
  { echo "@ $now"; "$@" osd pool stats "$pool" --format json 2>/dev/null; echo; echo "%"
    "$@" osd perf --format json 2>/dev/null; echo; echo .; } >> "$out" || exit 1
  [ $(( ${now%.*} - start )) -ge "$max" ] && break
  sleep "$iv"
done
"""


@dataclass(frozen=True)
class CephPool:
    """What the sampler asks Ceph about: the ``ceph`` command with the client's options, and the pool."""

    command: tuple[str, ...]
    pool: str
    #: the degrading checks the cluster reported when the run began: flagged on its results
    #: (the environment's health), not a reason to stop it
    known: frozenset[str] = frozenset()


def sampler_argv(outfile: str, max_s: float, pool: CephPool, interval: int = INTERVAL_S) -> list[str]:
    return ["sh", "-c", CEPH_SAMPLER_SCRIPT, "sh", outfile, str(interval), str(max(1, int(max_s))), pool.pool, *pool.command]


def parse_samples(text: str, pool: str) -> dict[str, list]:
    """The "ceph" series: ``t_s`` (from the first sample), the pool's ``read_mb_s``,
    ``write_mb_s``, ``read_ops``, ``write_ops`` and the OSDs' mean ``commit_ms``/``apply_ms``."""
    out: dict[str, list] = {k: [] for k in ("t_s", "read_mb_s", "write_mb_s", "read_ops", "write_ops", "commit_ms", "apply_ms")}
    t0 = None
    for block in text.split("\n.\n"):
        head, _, rest = block.strip().partition("\n")
        if not head.startswith("@ "):
            continue
        stats_text, _, perf_text = rest.partition("\n%\n")
        try:
            t = float(head[2:])
            stats = json.loads(stats_text or "null")
            perf = json.loads(perf_text or "null")
        except ValueError:
            continue
        rate = next((p.get("client_io_rate") or {} for p in stats or () if p.get("pool_name") == pool), None)
        if rate is None:
            continue
        t0 = t if t0 is None else t0
        infos = ((perf or {}).get("osdstats") or {}).get("osd_perf_infos") or []
        lat = [i.get("perf_stats") or {} for i in infos]
        out["t_s"].append(round(t - t0, 3))
        out["read_mb_s"].append(float(rate.get("read_bytes_sec") or 0) / 1e6)
        out["write_mb_s"].append(float(rate.get("write_bytes_sec") or 0) / 1e6)
        out["read_ops"].append(float(rate.get("read_op_per_sec") or 0))
        out["write_ops"].append(float(rate.get("write_op_per_sec") or 0))
        out["commit_ms"].append(_mean([float(p.get("commit_latency_ms") or 0) for p in lat]))
        out["apply_ms"].append(_mean([float(p.get("apply_latency_ms") or 0) for p in lat]))
    return out if out["t_s"] else {}


def summary(series: dict | None, lag: float = LAG_S) -> dict[str, Any]:
    """Means over the samples from ``lag`` after the start (the fio window as the manager saw
    it): ``pool_read_mb_s``, ``pool_write_mb_s`` (as a ZFS pool's are named), ``pool_read_ops``,
    ``pool_write_ops``, ``osd_commit_ms``, ``osd_apply_ms``; {} without samples in that window."""
    if not isinstance(series, dict) or not series.get("t_s"):
        return {}
    idx = [i for i, t in enumerate(series["t_s"]) if t >= lag]
    if not idx:
        return {}
    names = {"read_mb_s": "pool_read_mb_s", "write_mb_s": "pool_write_mb_s", "read_ops": "pool_read_ops",
             "write_ops": "pool_write_ops", "commit_ms": "osd_commit_ms", "apply_ms": "osd_apply_ms"}
    out = {}
    for key, name in names.items():
        values = [series[key][i] for i in idx if series[key][i] is not None]
        if values:
            out[name] = sum(values) / len(values)
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class CephSampler:
    """:meth:`start` before fio, :meth:`stop` after it (waits out the manager's lag); never raises."""

    def __init__(self, transport: Transport, pool: CephPool, workdir: str, token: str, max_s: float) -> None:
        self.transport = transport
        self.pool = pool
        self.path = f"{workdir}/ceph-{token}.txt"
        self.max_s = max_s + LAG_S + INTERVAL_S
        self.handle: Any = None
        self.started = 0.0

    def start(self) -> None:
        try:
            self.handle = self.transport.spawn(sampler_argv(self.path, self.max_s, self.pool))
            self.started = time.monotonic()
        except Exception as exc:  # telemetry never fails a measurement
            log.warning("%s: Ceph telemetry not recorded (the sampler did not start): %s", self.transport.name, exc)

    def stop(self) -> dict[str, dict]:
        if self.handle is None:
            return {}
        out: dict[str, dict] = {}
        try:
            time.sleep(LAG_S)  # what the manager reports of fio's last seconds
            self.transport.kill(self.handle)
            text = self.transport.read_file(self.path).decode("utf-8", errors="replace")
            series = parse_samples(text, self.pool.pool)
            if series:
                out["ceph"] = series
            else:
                log.warning("%s: Ceph telemetry not recorded: ceph osd pool stats %s gave no sample (does the user "
                            "have mgr 'allow r'?)", self.transport.name, self.pool.pool)
        except Exception as exc:
            log.warning("%s: Ceph telemetry not recorded: %s", self.transport.name, exc)
        finally:
            self.handle = None
            try:
                self.transport.run(["rm", "-f", self.path], timeout=60, check=False)
            except Exception as exc:
                log.warning("%s: could not remove %s: %s", self.transport.name, self.path, exc)
        return out


def degrading_checks(health_json: str) -> dict[str, str]:
    """``ceph health --format json`` -> {check: its summary} of the checks in
    :data:`DEGRADING_CHECKS`; {} when the text is not that JSON."""
    try:
        checks = (json.loads(health_json or "{}") or {}).get("checks") or {}
    except (ValueError, AttributeError):
        return {}
    return {name: str((c.get("summary") or {}).get("message") or "") for name, c in sorted(checks.items())
            if name in DEGRADING_CHECKS}


def ask_degrading(transport: Transport, pool: CephPool) -> dict[str, str] | None:
    """The degrading checks ``ceph health`` reports now; None when Ceph did not answer."""
    try:
        got = transport.run([*pool.command, "health", "--format", "json"], timeout=20, check=False)
    except CommandError as exc:
        log.warning("%s: ceph health did not answer: %s", transport.name, exc)
        return None
    return degrading_checks(got.stdout) if got.returncode == 0 else None


class CephWatch:
    """:meth:`check` while fio runs (asks Ceph at most every ``interval`` seconds): raises
    :class:`HypervisorError` when a degrading check appears that the run did not begin with
    (``pool.known``).  A question Ceph does not answer is skipped, never an error."""

    def __init__(self, transport: Transport, pool: CephPool, *, interval: float = WATCH_INTERVAL_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.transport = transport
        self.pool = pool
        self.interval = interval
        self.clock = clock
        self.asked = clock()

    def check(self) -> None:
        if self.clock() - self.asked < self.interval:
            return
        self.asked = self.clock()
        new = {k: v for k, v in (ask_degrading(self.transport, self.pool) or {}).items() if k not in self.pool.known}
        if new:
            said = "; ".join(f"{k}: {v}" if v else k for k, v in new.items())
            raise HypervisorError(f"Ceph reported {said} while fio ran on pool {self.pool.pool}: the run stopped "
                                  "rather than wait out fio's deadline or measure a degraded cluster")
