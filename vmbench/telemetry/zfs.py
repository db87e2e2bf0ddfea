"""What ZFS did while fio ran (METHOD rules 3, 6, 8): pool I/O, ARC counters, scrubs, txg timeout.

Pure parsers of what the sampler (:data:`vmbench.telemetry.sampler.SAMPLER_SCRIPT`, given a pool)
records on a ZFS host, into the series stored beside "disk" and "cpu":

* ``zpool``: ``{"t_s": [...], "read_mb_s": [...], "write_mb_s": [...], "read_ops": [...],
  "write_ops": [...], "vdevs": {name: {"read_mb_s": [...], "write_mb_s": [...]}},
  "scan": "none" | "scrub" | "resilver" | None, "txg_timeout_s": N | None}`` -- from
  ``zpool iostat -Hplv -T u POOL 1 COUNT`` (:func:`parse_zpool_iostat`; with -l the pool's
  waits, ``"wait_ms": {total_write: [...], disk_write: [...], syncq_write..., asyncq_...}``) and from
  ``zpool status POOL`` and ``/sys/module/zfs/parameters/zfs_txg_timeout`` read at the start
  and at the end (:func:`parse_zfs_state`); ``scan`` says whether a scrub or resilver was in
  progress at either point (None: ``zpool status`` did not answer).
* ``arc``: ``{"t_s": [...], "hits": [...], "misses": [...], "hit_ratio": [...],
  "size_bytes": [...], "c_max_bytes": N, "c_min_bytes": N}`` -- per-interval deltas of the
  ARC counters in ``/proc/spl/kstat/zfs/arcstats`` (the whole ARC, every pool), sampled with
  /proc/diskstats (:func:`arc_series`); ``hit_ratio`` is None for an interval without accesses.

``zpool iostat -Hpv -T u`` as OpenZFS 2.1-2.3 print it (cmd/zpool/zpool_main.c: zpool_do_iostat,
print_iostat, print_vdev_stats, print_iostat_default, print_one_stat; lib/libspl/timestamp.c:
print_timestamp):

* each report starts with ``-T u``'s line, the unix time in whole seconds (``"%lld\\n"``);
* then, with ``-H`` (scripted: no headers, no dashes), one line per vdev: the name, then
  ``\\t``-separated alloc, free, read ops/s, write ops/s, read bytes/s, write bytes/s; with
  ``-p`` the figures are plain integers (``ZFS_NICENUM_RAW``), alloc and free ``0`` where
  they do not apply (below the top-level vdevs);
* the first line is the pool itself, then (``-v``) its vdevs depth first, names without
  indentation (top-level ones ``mirror-0``, ``raidz1-0`` from 2.2 on; plain ``mirror`` in 2.1,
  so a name may repeat: later ones are kept as ``mirror#2``...); an empty line comes before the
  log, dedup and special classes and before the cache devices;
* the first report (``cb_iteration == 1``: no old config) is the average since the pool was
  imported, not an interval: dropped; each later one is the change since the previous report
  divided by its exact interval, i.e. already per second;
* stdout is flushed after each report, so the kill may cut at most the last one: a last
  line without its newline is dropped, and the last report is kept only when it has as many
  lines as the one before it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

#: a pool name vmbench passes on (OpenZFS's own rules are stricter: a letter first)
POOL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*$")
#: the arcstats fields sampled (``name type data`` lines, after two header lines)
ARC_FIELDS = ("hits", "misses", "size", "c", "c_min", "c_max")
SCANS = ("none", "scrub", "resilver")  # in order of what a flag cares about most
_STAMP = re.compile(r"^\d+$")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def valid_pool_name(name: object) -> bool:
    return isinstance(name, str) and len(name) <= 255 and POOL_NAME.fullmatch(name) is not None


def check_pool_name(name: str) -> str:
    """``name`` when vmbench may pass it to zpool; ValueError otherwise."""
    if not valid_pool_name(name):
        raise ValueError(f"not a ZFS pool name vmbench accepts: {name!r} (letters, digits, _ . : -; "
                         "a letter or digit first)")
    return name


# ---- zpool iostat -Hpv -T u ----------------------------------------------------------------------


#: the waits ``zpool iostat -l`` adds after the bandwidth (nanoseconds with -p; "-": none),
#: in its order; scrub and trim waits (and any later column) follow and are not kept
WAITS = ("total_read", "total_write", "disk_read", "disk_write", "syncq_read", "syncq_write", "asyncq_read", "asyncq_write")


@dataclass(frozen=True)
class IostatRow:
    name: str
    read_ops: int  # per second
    write_ops: int
    read_bytes: int  # bytes per second
    write_bytes: int
    waits: tuple[int | None, ...] = ()  # with -l: each of WAITS in ns (None: "-")


@dataclass(frozen=True)
class IostatReport:
    t: int  # unix seconds (-T u)
    rows: tuple[IostatRow, ...]  # the pool first, then its vdevs


def parse_zpool_iostat(text: str) -> tuple[int | None, list[IostatReport]]:
    """The interval reports of ``zpool iostat -Hpv -T u POOL 1 ...`` output, complete ones only,
    without the first (the average since import); and the first report's time (the start)."""
    lines = text.split("\n")
    lines = lines[:-1]  # after the last newline: "" or a line cut by the kill
    found: list[tuple[int, list[IostatRow], bool]] = []  # (time, rows, damaged)
    for line in lines:
        line = line.rstrip("\r")
        if _STAMP.match(line):
            found.append((int(line), [], False))
            continue
        if not line.strip() or not found:
            continue  # the empty line before a class of vdevs; anything before the first report
        t, rows, damaged = found[-1]
        parts = line.split("\t")
        try:
            if not (len(parts) == 7 or len(parts) >= 7 + len(WAITS)) or not parts[0]:
                raise ValueError(line)
            rops, wops, rbytes, wbytes = (int(p) for p in parts[3:7])
            waits = tuple(None if p == "-" else int(p) for p in parts[7:7 + len(WAITS)])
        except ValueError:
            found[-1] = (t, rows, True)
            continue
        rows.append(IostatRow(parts[0], rops, wops, rbytes, wbytes, waits))
    if not found:
        return None, []
    start = found[0][0]
    out = []
    for i, (t, rows, damaged) in enumerate(found):
        if i == 0 or damaged or not rows:
            continue
        if i == len(found) - 1 and len(rows) != len(found[i - 1][1]):
            continue  # the last report, cut short by the kill
        out.append(IostatReport(t, tuple(rows)))
    return start, out


def _named(rows: Sequence[IostatRow]) -> list[tuple[str, IostatRow]]:
    """The vdev rows (without the pool's) by a unique name: a repeated name gets #2, #3..."""
    seen: dict[str, int] = {}
    out = []
    for row in rows[1:]:
        seen[row.name] = seen.get(row.name, 0) + 1
        out.append((row.name if seen[row.name] == 1 else f"{row.name}#{seen[row.name]}", row))
    return out


def zpool_series(start: int | None, reports: Sequence[IostatReport], scan: str | None = None,
                 txg_timeout_s: float | None = None) -> dict:
    """The "zpool" series ({} when there is nothing: no report, no state)."""
    if not reports and scan is None and txg_timeout_s is None:
        return {}
    t0 = start if start is not None else (reports[0].t - 1 if reports else 0)
    pools = [r.rows[0] for r in reports]
    named = [dict(_named(r.rows)) for r in reports]
    names = [n for n in (named[0] if named else {}) if all(n in d for d in named)]
    return {
        "t_s": [r.t - t0 for r in reports],
        "read_mb_s": [_mb(p.read_bytes) for p in pools],
        "write_mb_s": [_mb(p.write_bytes) for p in pools],
        "read_ops": [p.read_ops for p in pools],
        "write_ops": [p.write_ops for p in pools],
        "vdevs": {n: {"read_mb_s": [_mb(d[n].read_bytes) for d in named],
                      "write_mb_s": [_mb(d[n].write_bytes) for d in named]} for n in names},
        "scan": scan,
        "txg_timeout_s": txg_timeout_s,
        **({"wait_ms": {w: [_ms(p.waits[i]) for p in pools] for i, w in enumerate(WAITS)}}
           if pools and all(p.waits for p in pools) else {}),
    }


def _ms(ns: int | None) -> float | None:
    return None if ns is None else round(ns / 1e6, 4)


def _mb(bytes_per_s: int) -> float:
    return round(bytes_per_s / 1e6, 4)


# ---- zpool status and zfs_txg_timeout (the sampler's "@zfs" sections) -------------------------------


def scan_of(line: str) -> str | None:
    """"scrub" or "resilver" for a ``zpool status`` scan line saying one is in progress, "none"
    for any other scan line (finished, canceled, paused, none requested), None for other lines."""
    line = _ANSI.sub("", line).strip()
    head, _, rest = line.partition(":")
    if head not in ("scan", "scrub") or not _:
        return None
    if "in progress" not in rest:
        return "none"
    if "resilver" in rest:
        return "resilver"  # "resilver in progress since", "resilver (mirror-0) in progress since"
    return "scrub" if "scrub" in rest else "none"  # "scrub in progress", "error scrub in progress"


def worst_scan(scans: Sequence[str | None]) -> str | None:
    known = [s for s in scans if s in SCANS]
    return max(known, key=SCANS.index) if known else None


def parse_zfs_state(text: str) -> tuple[str | None, float | None]:
    """From the sampler's ``@zfs`` sections (one at the start, one at the end): whether a
    scrub or resilver was in progress at either ("none", "scrub", "resilver"; None when
    ``zpool status`` never answered), and zfs_txg_timeout in seconds (None: not read)."""
    scans: list[str | None] = []
    txg: float | None = None
    section: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("@"):
            section = [] if line == "@zfs" else None
        elif section is None:
            continue
        elif line == ".":
            if "status ok" in section:
                scans.append(worst_scan([scan_of(x) for x in section]) or "none")
            for x in section:
                parts = x.split()
                if len(parts) == 2 and parts[0] == "txg_timeout":
                    try:
                        txg = float(parts[1])
                    except ValueError:
                        pass
            section = None
        else:
            section.append(line)
    return worst_scan(scans), (int(txg) if txg is not None and txg.is_integer() else txg)


# ---- arcstats -----------------------------------------------------------------------------------


def parse_arc_line(line: str) -> tuple[str, int] | None:
    """One arcstats row (``name type data``) of :data:`ARC_FIELDS`, else None."""
    parts = line.split()
    if len(parts) == 3 and parts[0] in ARC_FIELDS:
        try:
            return parts[0], int(parts[2])
        except ValueError:
            return None
    return None


def arc_series(samples: Sequence[tuple[float, Mapping[str, int]]]) -> dict:
    """The "arc" series of (uptime seconds, arcstats fields) samples, in order and without
    repeated times ({} unless every sample has hits, misses and size, and there are two)."""
    if len(samples) < 2 or not all(all(k in arc for k in ("hits", "misses", "size")) for _, arc in samples):
        return {}
    t0 = samples[0][0]
    out: dict[str, Any] = {"t_s": [], "hits": [], "misses": [], "hit_ratio": [], "size_bytes": []}
    for (_, a), (t, b) in zip(samples, samples[1:]):
        hits, misses = max(0, b["hits"] - a["hits"]), max(0, b["misses"] - a["misses"])
        out["t_s"].append(round(t - t0, 3))
        out["hits"].append(hits)
        out["misses"].append(misses)
        out["hit_ratio"].append(round(hits / (hits + misses), 4) if hits + misses else None)
        out["size_bytes"].append(b["size"])
    last = samples[-1][1]
    out["c_max_bytes"] = last.get("c_max")
    out["c_min_bytes"] = last.get("c_min")
    return out


# ---- means over the run --------------------------------------------------------------------------


def summary(zpool: dict | None, arc: dict | None, volume: dict | None = None) -> dict[str, Any]:
    """``pool_read_mb_s``/``pool_write_mb_s`` (means), ``vdev_write_mb_s`` ({vdev: mean}),
    ``scan``, ``txg_timeout_s``; ``arc_hit_ratio`` (all hits / all accesses over the run, None
    without accesses) and ``arc_size_mb`` (mean); the volume's ``compression``,
    ``compressratio``, ``logicalused_bytes``, ``used_bytes`` read after the run; only what the
    series have."""
    out: dict[str, Any] = {}
    if isinstance(zpool, dict):
        for key, name in (("read_mb_s", "pool_read_mb_s"), ("write_mb_s", "pool_write_mb_s")):
            v = _mean(zpool.get(key) or [])
            if v is not None:
                out[name] = v
        waits = zpool.get("wait_ms")
        if isinstance(waits, dict):
            means = {w: _mean(waits.get(w) or []) for w in WAITS}
            if any(v is not None for v in means.values()):
                out["pool_wait_ms"] = {w: v for w, v in means.items() if v is not None}
        vdevs = zpool.get("vdevs")
        if isinstance(vdevs, dict):
            means = {n: _mean((d or {}).get("write_mb_s") or []) for n, d in vdevs.items() if isinstance(d, dict)}
            if means:
                out["vdev_write_mb_s"] = {n: v for n, v in means.items() if v is not None}
        if zpool.get("scan") in SCANS:
            out["scan"] = zpool["scan"]
        if isinstance(zpool.get("txg_timeout_s"), (int, float)):
            out["txg_timeout_s"] = zpool["txg_timeout_s"]
    if isinstance(arc, dict) and arc.get("hits"):
        hits = sum(v for v in arc.get("hits") or [] if isinstance(v, (int, float)))
        misses = sum(v for v in arc.get("misses") or [] if isinstance(v, (int, float)))
        out["arc_hit_ratio"] = hits / (hits + misses) if hits + misses else None
        size = _mean(arc.get("size_bytes") or [])
        if size is not None:
            out["arc_size_mb"] = size / 1e6
    if isinstance(volume, dict):
        out.update({k: v for k, v in volume.items() if k in ("compression", "compressratio", "logicalused_bytes", "used_bytes")})
    return out


def _mean(values: Sequence[Any]) -> float | None:
    values = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(values) / len(values) if values else None


# ---- the pool's state: zpool list -v -Hp and zpool status (stored with the run) -----------------

#: the vdev classes ``zpool list -v`` heads with a line of their own (the data vdevs come first)
CLASS_HEADS = {"logs": "log", "cache": "cache", "special": "special", "dedup": "dedup", "spares": "spare"}


@dataclass(frozen=True)
class PoolState:
    """A pool as ``zpool list -v -Hp POOL`` states it: capacity and fragmentation in percent
    (None: "-"), health, and each vdev's class ("data", "log", "cache", "special", "dedup",
    "spare") by the name ``zpool iostat -v`` gives it, top-level vdevs only."""

    name: str
    size_bytes: int | None
    alloc_bytes: int | None
    capacity_pct: int | None
    fragmentation_pct: int | None
    health: str
    classes: tuple[tuple[str, str], ...] = ()

    def vdevs(self, kind: str) -> list[str]:
        return [n for n, c in self.classes if c == kind]


def _int(text: str) -> int | None:
    text = text.strip().rstrip("%")
    return int(text) if text.isdigit() else None


def parse_zpool_list(text: str) -> PoolState | None:
    """``zpool list -v -Hp POOL`` (OpenZFS 2.1-2.3): the pool's line (name, size, alloc, free,
    ckpoint, expandsz, frag, cap, dedup, health, altroot; tab-separated), then one line per
    vdev indented by tabs (one tab: top level), a class's vdevs after a line naming it
    ("logs", "cache", "special", "dedup", "spares", space-separated).  None: no pool line."""
    pool: PoolState | None = None
    kind = "data"
    classes: list[tuple[str, str]] = []
    for line in text.splitlines():
        head = line.split(None, 1)[0] if line.strip() else ""
        if not line.startswith("\t") and head in CLASS_HEADS and "\t" not in line.strip():
            kind = CLASS_HEADS[head]
            continue
        parts = line.split("\t")
        if pool is None and len(parts) >= 10 and parts[0]:
            pool = PoolState(parts[0], _int(parts[1]), _int(parts[2]), _int(parts[7]), _int(parts[6]), parts[9].strip())
        elif pool is not None and line.startswith("\t") and not line.startswith("\t\t") and len(parts) > 2 and parts[1]:
            classes.append((parts[1], kind))
    if pool is None:
        return None
    return PoolState(pool.name, pool.size_bytes, pool.alloc_bytes, pool.capacity_pct, pool.fragmentation_pct, pool.health,
                     tuple(classes))


def status_health(status: str) -> str | None:
    """The `` state:`` line of ``zpool status`` (ONLINE, DEGRADED, FAULTED...), None without one."""
    for line in status.splitlines():
        head, sep, rest = line.strip().partition(":")
        if sep and head == "state":
            return rest.strip() or None
    return None


# ---- the volume under fio's target, read after the run -----------------------------------------

#: what is read of the zvol or dataset under fio's target once fio is done
VOLUME_PROPS = ("compression", "compressratio", "logicalused", "used")


def volume_argv(target: str) -> list[str] | None:
    """``zfs get`` of the zvol (``/dev/zvol/NAME``) or of the dataset holding a file (its
    path: zfs resolves it) under fio's target; None for any other device."""
    if target.startswith("/dev/zvol/") and len(target) > len("/dev/zvol/"):
        name = target[len("/dev/zvol/"):]
    elif target.startswith("/") and not target.startswith("/dev/"):
        name = target
    else:
        return None
    return ["zfs", "get", "-Hp", "-o", "property,value", ",".join(VOLUME_PROPS), name]


def parse_volume(text: str) -> dict[str, Any]:
    """``zfs get -Hp -o property,value`` of :data:`VOLUME_PROPS` -> the "zfs-volume" series:
    ``compression`` (text), ``compressratio`` (float: 1.52), ``logicalused``/``used`` (bytes)."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        parts = line.split("\t")  # property, value (and the source, where it was asked for)
        if len(parts) < 2 or parts[0] not in VOLUME_PROPS:
            continue
        prop, value = parts[0], parts[1].strip()
        if prop == "compression":
            out[prop] = value
        elif prop == "compressratio":
            try:
                out[prop] = float(value.rstrip("x"))
            except ValueError:
                continue
        elif value.isdigit():
            out[f"{prop}_bytes"] = int(value)
    return out
