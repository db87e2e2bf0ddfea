"""What the layers below fio did while it ran (METHOD rule 8): device I/O and CPU time.

A sampler started just before fio (:meth:`Transport.spawn`) appends ``/proc/diskstats`` and
the aggregate ``cpu`` line of ``/proc/stat`` to a file about once a second; it is killed
right after fio, one last sample is taken, and the file is read back, removed and parsed
into per-second series (pure functions, :func:`parse_samples` and :func:`series`):

* ``disk``: ``{"t_s": [...], "devices": {name: {"read_mb_s": [...], "write_mb_s": [...]}},
  "primary": name | None, "all_devices": bool}`` -- the devices under fio's target (the disk
  at the bottom, and the target's own device when that is another one, e.g. dm-0);
  ``primary`` is the one the report shows (None: sum them all); ``all_devices`` says the
  devices under the target could not be found and every whole disk was recorded instead.
* ``cpu``: ``{"t_s": [...], "user": [...], "system": [...], "iowait": [...], "steal": [...],
  "idle": [...]}`` in percent of all CPUs.

While fio runs in a guest whose scratch disk lives on the host, a second sampler on the host
records the host's side of it (:func:`run_fio`'s ``host_side``): its "disk" and "cpu" are
stored as "host-disk" and "host-cpu" (:data:`HOST_SOURCES`, :func:`as_host`); the pool's
series keep their names, as a pool is only ever sampled on the host.

Given a ZFS pool (the host's storage is a zvol or a dataset), the sampler also runs
``zpool iostat -Hplv -T u POOL 1 COUNT`` beside it into ``<file>.zpool``, adds the ARC counters
of ``/proc/spl/kstat/zfs/arcstats`` to each sample, and records ``zpool status POOL``'s scan
line and ``zfs_txg_timeout`` at the start and at the end: the "zpool" and "arc" series of
:mod:`vmbench.telemetry.zfs`.

The sampler is a fixed shell script (:data:`SAMPLER_SCRIPT`, never built from data; the pool
name, checked against :data:`vmbench.telemetry.zfs.POOL_NAME`, is one of its arguments) that
stops by itself after ``max_s`` seconds, and so does ``zpool iostat`` (its count), so nothing
is left running even if the kill is lost.  It stays out of the measured work's way: it runs at
a low priority (``renice 10`` of itself, which ``zpool iostat`` inherits) and starts two
processes a second (``cat``, ``sleep``; the CPU line is read by the shell itself).  Where even
that would take the measured vCPUs' time (fio in a guest: its own sampler, and the host's
beside it unless a ZFS pool is sampled) it runs as two samples only, one just before fio and
one just after (``loop=False``): the series is then one interval, its means the same.  Two
samples without a pool are each their command's output (no file), the first one with the
devices under the target: two guest commands a run, each a few processes (under TCG a process
start in a guest costs 0.05 to 0.3 s).
Telemetry never fails a measurement: any error is a warning and no series.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from . import zfs
from .ceph import summary as ceph_summary
from ..transport.base import Transport

log = logging.getLogger(__name__)

INTERVAL_S = 1
SECTOR = 512
#: each sample: a blank line, "@ <uptime seconds>", /proc/diskstats, the aggregate cpu line,
#: (with a pool) arcstats' hits, misses, size, c, c_min, c_max lines, "." -- a sample cut short
#: by the kill has no "." and is ignored.  With a pool, an "@zfs" section ("status ok" and the
#: scan lines when ``zpool status`` answered, "txg_timeout N", ".") before the first sample, and
#: ``zpool iostat`` in the background (not for a single sample) into "<output file>.zpool",
#: its errors into "<output file>.zerr", stopped with the loop.
#: Arguments: output file ("-": standard output, for a single sample without a pool), interval
#: seconds, max seconds (0: one sample, at the normal priority: nothing else of vmbench's runs)[, pool].
SAMPLER_SCRIPT = r"""out=$1; iv=$2; max=$3; pool=$4
if [ "$out" = - ]; then exec 3>&1; else exec 3>>"$out" || exit 1; fi
[ "$max" -gt 0 ] && renice -n 10 -p $$ >/dev/null 2>&1
read start _ < /proc/uptime
start=${start%.*}
zp=
arc=/proc/spl/kstat/zfs/arcstats
if [ -n "$pool" ]; then
  { echo; echo "@zfs"
    if command -v timeout >/dev/null 2>&1; then st=$(timeout 20 zpool status "$pool" 2>/dev/null); else st=$(zpool status "$pool" 2>/dev/null); fi \
      && { echo "status ok"; printf '%s\n' "$st" | grep -E '(scan|scrub):'; }
    txg=/sys/module/zfs/parameters/zfs_txg_timeout
    [ -r "$txg" ] && read v < "$txg" && echo "txg_timeout $v"
    echo .; } >&3 || exit 1
  if [ "$max" -gt 0 ]; then
    zpool iostat -Hplv -T u "$pool" "$iv" $(( max / iv + 2 )) > "$out.zpool" 2> "$out.zerr" &
    zp=$!
  fi
fi
rc=0
while :; do
  read up _ < /proc/uptime
  read -r cpu < /proc/stat
  { echo; echo "@ $up"; cat /proc/diskstats; echo "$cpu"
    [ -n "$pool" ] && [ -r "$arc" ] && grep -E '^(hits|misses|size|c|c_min|c_max) ' "$arc"
    echo .; } >&3 || { rc=1; break; }
  [ $(( ${up%.*} - start )) -ge "$max" ] && break
  sleep "$iv"
done
[ -n "$zp" ] && kill "$zp" 2>/dev/null
exit $rc
"""
#: the devices under a target (:func:`target_devices`): a device itself, a file's filesystem's
#: source (findmnt; a btrfs subvolume's "[/...]" cut off), then lsblk's inverse tree of that
#: device, "KNAME TYPE" lines, printed only when lsblk succeeds; nothing when it cannot be told.
#: Argument: the target.
DEVICES_SCRIPT = r"""dev=$1
case $dev in
  /dev/*) ;;
  *) dev=$(findmnt -n -o SOURCE --target "$dev") || dev=; dev=${dev%%\[*} ;;
esac
case $dev in /dev/*) rows=$(lsblk -n -s -r -o KNAME,TYPE "$dev") && printf '%s\n' "$rows" ;; esac
"""
#: a sample with the devices under its target first, in one command (a guest command costs 0.1
#: to 0.8 s under TCG): :data:`DEVICES_SCRIPT`'s output, then the sample (its blank line first).
#: Arguments: the target, then :data:`SAMPLER_SCRIPT`'s.
FIRST_SAMPLE_SCRIPT = DEVICES_SCRIPT + "shift\n" + SAMPLER_SCRIPT
#: where a two-sample sampler without a pool writes its samples: its command's output, kept here
#: (no file in the guest to read back and remove)
TO_OUTPUT = "-"
CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")
_SKIP = re.compile(r"^(loop|ram|zram|sr|fd|nbd)\d+$")


#: the zvol or dataset under fio's target, read after the run (:func:`vmbench.telemetry.zfs.parse_volume`)
VOLUME_SOURCE = "zfs-volume"

#: the host sampler's series during a guest fio run, as stored ("zpool" and "arc" keep their names)
HOST_SOURCES = {"disk": "host-disk", "cpu": "host-cpu"}


def as_host(sampled: dict[str, dict]) -> dict[str, dict]:
    """A host sampler's series during a guest run, under the names they are stored with."""
    return {HOST_SOURCES.get(k, k): v for k, v in sampled.items()}


def sampler_argv(outfile: str, max_s: float, interval: int = INTERVAL_S, pool: str | None = None) -> list[str]:
    """The sampler's command: always :data:`SAMPLER_SCRIPT`, the data only as arguments (a
    ``pool`` that is not a valid pool name is refused: ValueError)."""
    argv = ["sh", "-c", SAMPLER_SCRIPT, "sh", outfile, str(max(1, int(interval))), str(max(0, int(max_s)))]
    return argv + [zfs.check_pool_name(pool)] if pool is not None else argv


def first_sample_argv(target: str, outfile: str, pool: str | None = None) -> list[str]:
    """One sample into ``outfile`` with the devices under ``target`` printed first
    (:data:`FIRST_SAMPLE_SCRIPT`, :func:`parse_devices`)."""
    return ["sh", "-c", FIRST_SAMPLE_SCRIPT, "sh", target, *sampler_argv(outfile, 0, pool=pool)[4:]]


def devices_argv(target: str) -> list[str]:
    return ["sh", "-c", DEVICES_SCRIPT, "sh", target]


def parse_devices(text: str) -> tuple[list[str], str | None] | None:
    """:func:`target_devices` of :data:`DEVICES_SCRIPT`'s output (up to a sample's blank line)."""
    lines = text.splitlines()
    rows = [line.split() for line in lines[:lines.index("") if "" in lines else len(lines)]]
    rows = [r for r in rows if len(r) >= 2 and re.fullmatch(r"[A-Za-z0-9_.:-]+", r[0])]
    if not rows:
        return None
    top = rows[0][0]
    disks = list(dict.fromkeys(r[0] for r in rows if r[1] == "disk"))
    names = list(dict.fromkeys([top, *disks]))
    return names, (disks[0] if len(disks) == 1 else top)


@dataclass(frozen=True)
class Sample:
    t: float  # uptime seconds
    disks: dict[str, tuple[int, int]]  # kernel name -> (sectors read, sectors written)
    cpu: dict[str, int]  # CPU_FIELDS -> jiffies
    arc: dict[str, int] = field(default_factory=dict)  # telemetry_zfs.ARC_FIELDS -> value (with a pool)
    #: kernel name -> (I/Os completed, ms spent on them, ms the device was busy): reads and
    #: writes together, from /proc/diskstats' fields 4+8, 7+11 and 13 (io_ticks)
    busy: dict[str, tuple[int, int, int]] = field(default_factory=dict)


def parse_samples(text: str) -> list[Sample]:
    """The complete samples of a sampler's file (see :data:`SAMPLER_SCRIPT`), in order."""
    out: list[Sample] = []
    t: float | None = None
    disks: dict[str, tuple[int, int]] = {}
    cpu: dict[str, int] | None = None
    arc: dict[str, int] = {}
    busy: dict[str, tuple[int, int, int]] = {}
    for line in text.splitlines():
        if line.startswith("@"):  # a sample ("@ <uptime>"), or another section ("@zfs")
            try:
                t = float(line[2:].strip()) if line.startswith("@ ") else None
            except ValueError:
                t = None
            disks, cpu, arc, busy = {}, None, {}, {}
        elif line == ".":
            if t is not None and cpu is not None:
                out.append(Sample(t, disks, cpu, arc, busy))
            t, disks, cpu, arc, busy = None, {}, None, {}, {}
        elif t is None:
            continue
        elif line.startswith("cpu "):
            parts = line.split()[1:]
            try:
                values = [int(v) for v in parts]
            except ValueError:
                t = None  # a damaged sample
                continue
            if len(values) >= 4:
                values += [0] * (len(CPU_FIELDS) - len(values))
                cpu = dict(zip(CPU_FIELDS, values))
        elif (got := zfs.parse_arc_line(line)) is not None:
            arc[got[0]] = got[1]
        else:
            parts = line.split()
            if len(parts) >= 10:
                try:
                    disks[parts[2]] = (int(parts[5]), int(parts[9]))
                    if len(parts) >= 14:
                        busy[parts[2]] = (int(parts[3]) + int(parts[7]), int(parts[6]) + int(parts[10]), int(parts[12]))
                except ValueError:
                    continue
    return out


def series(samples: Sequence[Sample], devices: Sequence[str] | None, primary: str | None = None) -> dict[str, dict]:
    """Per-interval deltas of ``samples`` as the "disk" and "cpu" series (both {} with fewer
    than two samples), and "arc" when every sample has the ARC counters.  ``devices`` None:
    every whole disk seen (``all_devices``)."""
    samples = sorted(samples, key=lambda s: s.t)
    samples = [s for i, s in enumerate(samples) if i == 0 or s.t > samples[i - 1].t]
    if len(samples) < 2:
        return {}
    t0 = samples[0].t
    all_devices = devices is None
    names = list(devices) if devices is not None else sorted(
        {n for s in samples for n in s.disks if not _SKIP.match(n) and not _is_partition(n, s.disks)})
    names = [n for n in names if all(n in s.disks for s in samples)]
    t_s: list[float] = []
    busy_names = {n for n in names if all(n in s.busy for s in samples)}
    disk: dict[str, dict[str, list[Any]]] = {n: {"read_mb_s": [], "write_mb_s": [],
                                                 **({"util_pct": [], "await_ms": []} if n in busy_names else {})} for n in names}
    cpu: dict[str, list[float]] = {k: [] for k in ("user", "system", "iowait", "steal", "idle")}
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        t_s.append(round(b.t - t0, 3))
        for n in names:
            (r0, w0), (r1, w1) = a.disks[n], b.disks[n]
            disk[n]["read_mb_s"].append(round(max(0, r1 - r0) * SECTOR / dt / 1e6, 4))
            disk[n]["write_mb_s"].append(round(max(0, w1 - w0) * SECTOR / dt / 1e6, 4))
            if n in busy_names:
                util, wait = _busy(a.busy[n], b.busy[n], dt)
                disk[n]["util_pct"].append(util)
                disk[n]["await_ms"].append(wait)
        d = {k: max(0, b.cpu[k] - a.cpu[k]) for k in CPU_FIELDS}
        total = sum(d.values()) or 1
        cpu["user"].append(round((d["user"] + d["nice"]) * 100 / total, 2))
        cpu["system"].append(round((d["system"] + d["irq"] + d["softirq"]) * 100 / total, 2))
        for k in ("iowait", "steal", "idle"):
            cpu[k].append(round(d[k] * 100 / total, 2))
    out: dict[str, dict] = {
        "disk": {"t_s": t_s, "devices": disk, "primary": primary if primary in disk else None, "all_devices": all_devices},
        "cpu": {"t_s": list(t_s), **cpu}}
    arc = zfs.arc_series([(s.t, s.arc) for s in samples])
    if arc:
        out["arc"] = arc
    return out


def _busy(a: tuple[int, int, int], b: tuple[int, int, int], dt: float) -> tuple[float, float | None]:
    """A device's utilisation (% of the interval it was busy) and mean time per I/O (ms,
    queue and service, as iostat's await; None without I/O) between two samples."""
    ios, ms, ticks = (max(0, y - x) for x, y in zip(a, b))
    return round(min(100.0, ticks / (dt * 1000) * 100), 2), (round(ms / ios, 4) if ios else None)


def _is_partition(name: str, disks: dict) -> bool:
    """sda1 of sda, nvme0n1p1 of nvme0n1, vdb1 of vdb (when the disk is there too)."""
    return any(name != d and name.startswith(d) and re.fullmatch(r"p?\d+", name[len(d):]) for d in disks)


# ---- on a side ---------------------------------------------------------------------------------


def target_devices(transport: Transport, target: str) -> tuple[list[str], str | None] | None:
    """The kernel names of the devices under ``target`` (a device, or a file in a mount):
    its own device first, then the disk(s) at the bottom; and the one to report (the single
    disk, else the target's device).  None when it cannot be told (an overlay, a tmpfs...)."""
    return parse_devices(transport.run(devices_argv(target), timeout=30, check=False).stdout)


_SNAPSHOT = object()  # the handle of a sampler that takes two samples only (loop=False)


class Sampler:
    """One sampler on a side: :meth:`start` before fio, :meth:`stop` after (both never raise).
    With ``zfs_pool`` it also records that pool and the ARC (:mod:`vmbench.telemetry.zfs`).
    ``target`` None: every whole disk (the side's device of interest is not known)."""

    def __init__(self, transport: Transport, target: str | None, workdir: str, token: str, max_s: float,
                 zfs_pool: str | None = None, loop: bool = True) -> None:
        self.transport = transport
        #: False: one sample at the start and one at the end, nothing running between them
        #: (where a loop would take the measured vCPUs' time: fio in a TCG guest)
        self.loop = loop
        self.target = target
        self.path = f"{workdir}/telemetry-{token}.txt"
        self.max_s = max_s
        self.pool: str | None = None
        if zfs_pool is not None:
            if zfs.valid_pool_name(zfs_pool):
                self.pool = zfs_pool
            else:
                log.warning("%s: ZFS telemetry not recorded: %r is not a pool name vmbench accepts",
                            transport.name, zfs_pool)
        self.handle: Any = None
        self.devices: tuple[list[str], str | None] | None = None
        self.failed = False
        #: two samples without a pool: each is its command's output, the first kept here until
        #: the second (no file on the side: none to read back and remove, two commands in all)
        self.to_output = not loop and self.pool is None
        self.first = ""

    @property
    def files(self) -> list[str]:
        """Every file the sampler may write (removed by :meth:`stop`)."""
        if self.to_output:
            return []
        return [self.path] + ([self.path + ".zpool", self.path + ".zerr"] if self.pool else [])

    @property
    def out(self) -> str:
        """Where the samples go: the file, or the command's output (:data:`TO_OUTPUT`)."""
        return TO_OUTPUT if self.to_output else self.path

    def start(self) -> None:
        try:
            local = self.target and not self.target.startswith("rbd:")  # an RBD image has no device here
            timeout = 60 if self.pool else 30
            if self.loop:
                self.devices = target_devices(self.transport, self.target) if local and self.target else None
                self._say_devices(bool(local))
                self.handle = self.transport.spawn(sampler_argv(self.path, self.max_s, pool=self.pool))
            else:  # the first of two samples, taken now (with the devices under the target); the second by stop()
                if local and self.target:
                    got = self.transport.run(first_sample_argv(self.target, self.out, self.pool), timeout=timeout)
                    self.devices = parse_devices(got.stdout)
                else:
                    got = self.transport.run(sampler_argv(self.out, 0, pool=self.pool), timeout=timeout)
                self.first = got.stdout if self.to_output else ""
                self._say_devices(bool(local))
                self.handle = _SNAPSHOT
        except Exception as exc:  # telemetry never fails a measurement
            self.failed = True
            log.warning("%s: telemetry not recorded (the sampler did not start): %s", self.transport.name, exc)

    def _say_devices(self, local: bool) -> None:
        if self.devices is None and not local:
            log.info("%s: no local device under %s; recording every whole disk", self.transport.name, self.target or "the target")
        elif self.devices is None:
            log.warning("%s: cannot tell the devices under %s; recording every whole disk", self.transport.name, self.target)

    def stop(self) -> dict[str, dict]:
        """Kill the sampler, take a last sample, read the files back and remove them (two
        samples without a pool: the last one's output after the first's, no file)."""
        if self.handle is None:
            return {}
        out: dict[str, dict] = {}
        try:
            if self.handle is not _SNAPSHOT:
                self.transport.kill(self.handle)
            self.handle = None
            got = self.transport.run(sampler_argv(self.out, 0, pool=self.pool), timeout=60 if self.pool else 30)
            text = (self.first + got.stdout if self.to_output
                    else self.transport.read_file(self.path).decode("ascii", errors="replace"))
            names, primary = self.devices if self.devices is not None else (None, None)
            out = series(parse_samples(text), names, primary)
            if not out:
                log.warning("%s: telemetry not recorded: fewer than two samples", self.transport.name)
            if self.pool:
                if out and "arc" not in out:
                    log.warning("%s: ARC counters not recorded (no /proc/spl/kstat/zfs/arcstats?)", self.transport.name)
                zpool = self._zpool(text)
                if zpool:
                    out["zpool"] = zpool
                volume = self._volume()
                if volume:
                    out[VOLUME_SOURCE] = volume
        except Exception as exc:
            log.warning("%s: telemetry not recorded: %s", self.transport.name, exc)
            out = {}
        finally:
            try:
                if self.handle is not None and self.handle is not _SNAPSHOT:
                    self.transport.kill(self.handle)
            except Exception as exc:
                log.warning("%s: could not stop the telemetry sampler: %s", self.transport.name, exc)
            try:
                if self.files:
                    self.transport.run(["rm", "-f", *self.files], timeout=60, check=False)
            except Exception as exc:
                log.warning("%s: could not remove %s: %s", self.transport.name, " ".join(self.files), exc)
        return out

    def _zpool(self, text: str) -> dict:
        """The "zpool" series from ``zpool iostat``'s file and the "@zfs" sections of ``text``."""
        scan, txg = zfs.parse_zfs_state(text)
        if scan is None:
            log.warning("%s: zpool status %s did not answer: scrub/resilver state not known", self.transport.name, self.pool)
        try:
            iostat = self.transport.read_file(self.path + ".zpool").decode("utf-8", errors="replace")
        except Exception as exc:
            iostat = ""
            log.warning("%s: zpool iostat %s not recorded: %s", self.transport.name, self.pool, exc)
        start, reports = zfs.parse_zpool_iostat(iostat)
        if not reports and iostat:
            log.warning("%s: zpool iostat %s: no complete report after the first%s", self.transport.name, self.pool,
                        self._errors())
        elif not reports:
            log.warning("%s: zpool iostat %s wrote nothing%s", self.transport.name, self.pool, self._errors())
        return zfs.zpool_series(start, reports, scan, txg)

    def _volume(self) -> dict:
        """The "zfs-volume" series: the zvol's or dataset's compression, compressratio,
        logicalused and used under the target, read once fio is done ({}: not read)."""
        argv = zfs.volume_argv(self.target) if self.target else None
        if argv is None:
            return {}
        try:
            got = self.transport.run(argv, timeout=60, check=False)
        except Exception as exc:  # the volume's usage never costs the run's other series
            log.warning("%s: the volume's compressratio not read: %s", self.transport.name, exc)
            return {}
        if got.returncode != 0:
            log.warning("%s: %s: %s", self.transport.name, " ".join(argv[:3]), got.stderr.strip()[:200])
            return {}
        return zfs.parse_volume(got.stdout)

    def _errors(self) -> str:
        try:
            err = self.transport.read_file(self.path + ".zerr").decode("utf-8", errors="replace").strip()
        except Exception:
            return ""
        return f": {err.splitlines()[0][:200]}" if err else ""


#: the samplers' series a measurement stores, by source, and the :func:`summary` parameter each is
#: (fio's own series are "fio-*"): the side fio ran on, the pool's (always the host's) and, for a
#: guest run, the host's own device and CPU
SUMMARY_SOURCES = {"disk": "disk", "cpu": "cpu", "zpool": "zpool", "arc": "arc", "host-disk": "host_disk",
                   "host-cpu": "host_cpu", "ceph": "ceph", VOLUME_SOURCE: "zfs_volume"}


def summary_of(by_source: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`summary` of a measurement's stored series ({source: series}; any other source left out)."""
    return summary(**{"disk": None, "cpu": None, **{SUMMARY_SOURCES[s]: v for s, v in by_source.items() if s in SUMMARY_SOURCES}})


def summary(disk: dict | None, cpu: dict | None, zpool: dict | None = None, arc: dict | None = None, *,
            host_disk: dict | None = None, host_cpu: dict | None = None, ceph: dict | None = None,
            zfs_volume: dict | None = None) -> dict[str, Any]:
    """Means over the run: ``read_mb_s``/``write_mb_s`` of the primary device (or the sum of
    all recorded), ``cpu_busy`` (100 - idle) and ``cpu_idle``; with ZFS series also
    ``pool_read_mb_s``, ``pool_write_mb_s``, ``scan``, ``txg_timeout_s``, ``arc_hit_ratio``
    (None: no ARC accesses) and ``arc_size_mb`` (:func:`vmbench.telemetry.zfs.summary`);
    with the host's series of a guest run ("host-disk", "host-cpu") also
    ``host_dev_read_mb_s``, ``host_dev_write_mb_s``, ``host_cpu_busy``, ``host_cpu_idle``;
    with a Ceph pool's series (RBD) the pool's ``pool_read_mb_s``, ``pool_write_mb_s`` and ops,
    and the OSDs' latency (:func:`vmbench.telemetry.ceph.summary`); only what the series have."""
    out: dict[str, Any] = {}
    out.update(_side(disk, cpu, "read_mb_s", "write_mb_s", "cpu_busy", "cpu_idle"))
    out.update(_device_busy(disk, "dev"))
    out.update(_device_busy(host_disk, "host_dev"))
    out.update(zfs.summary(zpool, arc, zfs_volume))
    out.update(ceph_summary(ceph))
    out.update(_side(host_disk, host_cpu, "host_dev_read_mb_s", "host_dev_write_mb_s", "host_cpu_busy", "host_cpu_idle"))
    return out


def _device_busy(disk: dict | None, prefix: str) -> dict[str, float]:
    """``<prefix>_util_pct`` and ``<prefix>_await_ms``: the means of the device the report
    shows (the primary, or the only one), where its series have them."""
    if not isinstance(disk, dict) or not isinstance(disk.get("devices"), dict) or not disk["devices"]:
        return {}
    devices = disk["devices"]
    name = disk.get("primary") if disk.get("primary") in devices else (next(iter(devices)) if len(devices) == 1 else None)
    got = devices.get(name) if name is not None else None
    out: dict[str, float] = {}
    for key in ("util_pct", "await_ms"):
        v = _mean((got or {}).get(key) or [])
        if v is not None:
            out[f"{prefix}_{key}"] = v
    return out


def _side(disk: dict | None, cpu: dict | None, read: str, write: str, busy: str, idle_key: str) -> dict[str, float]:
    out: dict[str, float] = {}
    if isinstance(disk, dict) and isinstance(disk.get("devices"), dict) and disk["devices"]:
        devices = disk["devices"]
        chosen = [disk["primary"]] if disk.get("primary") in devices else list(devices)
        for key, name in (("read_mb_s", read), ("write_mb_s", write)):
            per = [_mean(devices[d].get(key) or []) for d in chosen]
            if all(v is not None for v in per):
                out[name] = sum(per)  # type: ignore[arg-type]
    if isinstance(cpu, dict):
        idle = _mean(cpu.get("idle") or [])
        if idle is not None:
            out[idle_key] = idle
            out[busy] = 100.0 - idle
    return out


def _mean(values: Sequence[float]) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(values) / len(values) if values else None

