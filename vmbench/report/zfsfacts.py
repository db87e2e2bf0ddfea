"""What a table's numbers on ZFS storage may be trusted for, as an admin checks it by hand
(METHOD rules 3, 8, 10): the ARC against the working set, the pool's state, the scratch
volume's effective properties and where they come from, how compressible fio's data was and
what the volume made of it, and whether the log device took the sync writes.

Pure: the stored environment (``zpool list``/``zpool status`` as recorded, the ARC), the
cells' read-back volumes and the measurements' telemetry summaries in; facts (a few words
each, flags only when they fire, as "WARNING: ...") and what is not stated out.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..results.environment import Environment
from ..results.records import CellRecord, JobParams, Measurement, Telemetry
from ..telemetry.zfs import PoolState, parse_zpool_list, status_health

FULL_PCT = 80  # a pool fuller than this is slower than the same pool emptier (allocation)
COMPRESSED = 1.10  # a compressratio above this: the pool wrote less than fio
SLOG_IDLE = 0.01  # a log device's share of the pool's writes below this is idle
#: property -> (the value that is risky, None for any but "off"; why): the one table of ZFS
#: properties that trade safety or speed away (the advice labels them, advice/risks.py)
RISKY = {"sync": ("disabled", "sync writes are acknowledged before they are safe"),
         "checksum": ("off", "data is not checksummed"),
         "dedup": (None, "dedup's table lookups slow every write")}
SHOWN = ("compression", "sync", "checksum", "dedup", "primarycache", "logbias")
WRITES = ("write", "randwrite", "rw", "randrw", "readwrite", "trim", "randtrim", "trimwrite")


def _mib(n: float) -> str:
    mib = n / (1 << 20)
    return f"{mib / 1024:,.1f} GiB" if mib >= 10 * 1024 else f"{mib:,.0f} MiB"


def _names(names: Iterable[str]) -> str:
    return ", ".join(dict.fromkeys(names))


def zfs_facts(measurements: Sequence[Measurement], cells: Sequence[CellRecord], env: Environment) -> tuple[dict[str, str], list[str]]:
    """The ZFS facts of one table ({} when the run's storage is not ZFS)."""
    if not env.zfs_pool:
        return {}, []
    facts: dict[str, str] = {}
    missing: list[str] = []
    pool = pool_state(env)
    volumes = effective_properties(cells)
    for key, text in (("ZFS ARC", arc_fact(measurements, env, volumes, missing)),
                      ("ZFS pool", pool_fact(pool, env, missing)),
                      ("ZFS volume", volume_fact(volumes, missing)),
                      ("ZFS compression", compression_fact(measurements, volumes)),
                      ("ZFS log", log_fact(measurements, pool)),
                      ("ZFS waits", waits_fact(measurements))):
        if text:
            facts[key] = text
    return facts, missing


def pool_state(env: Environment) -> PoolState | None:
    """The pool as its stored ``zpool list -v -Hp`` says (None: not recorded or not read)."""
    text = env.zpool_list
    return parse_zpool_list(text) if isinstance(text, str) else None


def effective_properties(cells: Sequence[CellRecord]) -> dict[str, dict[str, tuple[str, str]]]:
    """Each scratch or reference zvol/dataset of the cells: {property: (value, source)} of
    what was read back at creation (source "" where the run did not read it)."""
    out: dict[str, dict[str, tuple[str, str]]] = {}
    for c in cells:
        for v in c.volumes:  # as the run read them back (zfs get)
            if v.zfs_name:
                out[v.zfs_name] = {p: (str(v.readback[p]), str(v.sources[p]) if p in v.sources else "") for p in SHOWN if p in v.readback}
    return out


def _arc_caches(volumes: Mapping[str, Mapping[str, tuple[str, str]]]) -> bool:
    """Whether the ARC may hold the volumes' data (primarycache=all, or not read back)."""
    return not volumes or any("primarycache" not in p or p["primarycache"][0] == "all" for p in volumes.values())


def arc_fact(measurements: Sequence[Measurement], env: Environment, volumes: Mapping, missing: list[str]) -> str:
    c_max, size = env.arc_c_max_bytes, env.arc_size_bytes
    if not c_max:
        missing.append("the ARC's size and c_max (arcstats not read)")
        return ""
    host = env.host_memory_mib
    parts = [f"{_mib(size)} of max {_mib(c_max)}" if size else f"max {_mib(c_max)}"]
    if host:
        parts[0] += f", host RAM {_mib(host << 20)}"
    hits = [h for m in measurements if m.telemetry is not None and isinstance(h := m.telemetry.arc_hit_ratio, (int, float))]
    if hits:
        lo, hi = min(hits) * 100, max(hits) * 100
        parts.append(f"hit {lo:.0f}%" if round(lo) == round(hi) else f"hit {lo:.0f}..{hi:.0f}%")
        parts[-1] += " while fio ran"
    reads = {m.job: m.job_params.size for m in measurements if m.job_params.rw not in WRITES[:2]}
    fits = [j for j, s in reads.items() if isinstance(s, (int, float)) and s < c_max]
    if fits and _arc_caches(volumes):
        parts.append(f"WARNING: reads of {_names(fits)} fit in the ARC: may be served from memory")
    return "; ".join(parts)


def pool_fact(pool: PoolState | None, env: Environment, missing: list[str]) -> str:
    if pool is None:
        missing.append("the pool's capacity, fragmentation and health (zpool list not recorded)")
        return ""
    health = pool.health or status_health(env.zpool_status or "") or "?"
    frag = f"{pool.fragmentation_pct}% fragmented" if pool.fragmentation_pct is not None else "fragmentation -"
    text = f"{pool.name} {pool.capacity_pct if pool.capacity_pct is not None else '?'}% full, {frag}, {health}"
    extra = [f"{kind} {', '.join(pool.vdevs(kind))}" for kind in ("log", "cache", "special", "dedup") if pool.vdevs(kind)]
    if extra:
        text += "; " + "; ".join(extra)
    if pool.capacity_pct is not None and pool.capacity_pct > FULL_PCT:
        text += f"; WARNING: over {FULL_PCT}% full: slower than the same pool emptier"
    if health != "ONLINE":
        text += f"; WARNING: pool {health}, not ONLINE"
    return text


def _source(source: str) -> str:
    return source[len("inherited "):] if source.startswith("inherited from ") else ""


def volume_fact(volumes: Mapping[str, Mapping[str, tuple[str, str]]], missing: list[str]) -> str:
    """The properties every volume shares (or each value), inherited ones with their dataset;
    the risky ones flagged."""
    if not volumes:
        missing.append("the scratch volume's effective properties (not read back)")
        return ""
    parts = []
    for prop in SHOWN:
        seen = {(p[prop][0], _source(p[prop][1])) for p in volumes.values() if prop in p}
        if seen:
            parts.append(f"{prop}=" + "/".join(v + (f" ({src})" if src else "") for v, src in sorted(seen)))
    if any(not p.get(prop, ("", "x"))[1] for p in volumes.values() for prop in SHOWN if prop in p):
        parts.append("sources not read")
    flags = [f"WARNING: {prop}={v} " + (f"inherited {src}" if src else "set") + f": {why}"
             for prop, v, src, why in risky_properties(volumes)]
    return ", ".join(parts) + "".join(f"; {f}" for f in flags)


def risky(prop: str, value: str) -> str | None:
    """Why ``prop=value`` is risky (:data:`RISKY`), None when it is not."""
    bad, why = RISKY.get(prop, ("", ""))
    if not why:
        return None
    return why if (value == bad if bad is not None else value not in ("off", "")) else None


def risky_properties(volumes: Mapping[str, Mapping[str, tuple[str, str]]]) -> list[tuple[str, str, str, str]]:
    """(property, value, "from DATASET" or "" when set on the volume, why) of each risky
    effective property the volumes have, once each."""
    out = []
    for props in volumes.values():
        for prop, (value, source) in props.items():
            why = risky(prop, value)
            if why is not None:
                out.append((prop, value, _source(source), why))
    return list(dict.fromkeys(out))


def data_of(params: JobParams) -> str:
    """How compressible the data fio writes is, from the stored job."""
    if params.jobfile:
        return "as its job file says"
    pct = params.buffer_compress_percentage
    if pct:
        return f"{pct}% compressible"
    return "incompressible" + (" (refilled)" if params.refill_buffers else " (fio's default)")


def compression_fact(measurements: Sequence[Measurement], volumes: Mapping[str, Mapping[str, tuple[str, str]]]) -> str:
    """For writes on a compressing volume: fio's data per job, the volume's compressratio,
    logicalused and used read after each; a job of compressible data whose volume then read
    above :data:`COMPRESSED` flagged.  Incompressible data is never flagged: a ratio above 1
    is then the volume's other blocks (partly written blocks' zeros, earlier jobs' data)."""
    parts, flagged = [], []
    by_job: dict[str, list[tuple[Measurement, Telemetry]]] = {}
    for m in measurements:
        t = m.telemetry
        if t is not None and t.compression not in (None, "off") and m.job_params.rw in WRITES:
            by_job.setdefault(m.job, []).append((m, t))
    for job, ms in by_job.items():
        ratios = [t.compressratio for _, t in ms if isinstance(t.compressratio, (int, float))]
        last, params = ms[-1][1], ms[0][0].job_params
        text = f"{job} {data_of(params)}"
        if ratios:
            text += f", then {max(ratios):.2f}x"
            if last.logicalused_bytes and last.used_bytes:
                text += f" ({_mib(last.logicalused_bytes)} logical, {_mib(last.used_bytes)} used)"
            if max(ratios) > COMPRESSED and params.buffer_compress_percentage:
                flagged.append(job)
            elif max(ratios) > COMPRESSED and not params.jobfile:
                text += ", not from fio's data"
        parts.append(text)
    if not parts:
        return ""
    flag = f"; WARNING: compressible data: the pool wrote less than fio ({_names(flagged)})" if flagged else ""
    return "; ".join(parts) + flag


def write_share(telemetry: Telemetry | None, vdevs_of: Sequence[str]) -> float | None:
    """Those vdevs' (the log's, the special class's) share of the pool's writes over one run
    (None: not sampled)."""
    if telemetry is None:
        return None
    vdevs, pool = telemetry.vdev_write_mb_s, telemetry.pool_write_mb_s
    if not isinstance(vdevs, dict) or not isinstance(pool, (int, float)) or pool <= 0:
        return None
    return min(1.0, sum(float(vdevs.get(n) or 0.0) for n in vdevs_of) / pool)


def log_fact(measurements: Sequence[Measurement], pool: PoolState | None) -> str:
    """For sync writes: "SLOG: took 97% of writes", "SLOG: idle" or "no log device"; the
    special and dedup vdevs' share of the writes and the cache devices' traffic where there
    are some."""
    synced = [m for m in measurements if m.sync and m.job_params.rw in WRITES]
    logs = pool.vdevs("log") if pool is not None else []
    parts = []
    if synced and pool is not None and not logs:
        parts.append("no log device")
    elif synced and logs:
        shares: dict[str, list[float]] = {}
        for m in synced:
            share = write_share(m.telemetry, logs)
            if share is not None:
                shares.setdefault(m.job, []).append(share)
        for job, s in shares.items():
            mean = sum(s) / len(s)
            parts.append(f"SLOG: idle ({job})" if mean < SLOG_IDLE else f"SLOG: took {mean * 100:.0f}% of writes ({job})")
    for kind in ("special", "dedup"):
        got = [write_share(m.telemetry, pool.vdevs(kind)) for m in measurements] if pool is not None and pool.vdevs(kind) else []
        known = [v for v in got if v is not None]
        if known:
            parts.append(f"{kind} vdevs took {max(known) * 100:.0f}% of writes at most")
    caches = pool.vdevs("cache") if pool is not None else []
    fills = [float(vdevs.get(n) or 0.0) for m in measurements for n in caches
             if m.telemetry is not None and isinstance(vdevs := m.telemetry.vdev_write_mb_s, dict)]
    if caches and fills and max(fills) >= 0.05:  # shown where there was some
        parts.append(f"L2ARC written {max(fills):.1f} MB/s at most")
    return "; ".join(parts)


def _directions(rw: object) -> tuple[str, ...]:
    if rw in ("write", "randwrite"):
        return ("write",)
    return ("read", "write") if rw in WRITES else ("read",)


def waits_fact(measurements: Sequence[Measurement]) -> str:
    """Per job and direction, the pool's mean waits while fio ran (``zpool iostat -l``):
    total, and where it went, the disks or ZFS's sync and async queues, the largest named;
    then the devices' % busy and ms per I/O (/proc/diskstats)."""
    by_job: dict[str, list[tuple[Measurement, Mapping[str, float]]]] = {}
    for m in measurements:
        waits = m.telemetry.pool_wait_ms if m.telemetry is not None else None
        if isinstance(waits, dict):
            by_job.setdefault(m.job, []).append((m, waits))
    parts = []
    for job, ms in by_job.items():
        clauses = []
        for d in _directions(ms[0][0].job_params.rw):
            got = {part: _mean_of([waits.get(f"{part}_{d}") for _, waits in ms])
                   for part in ("total", "disk", "syncq", "asyncq")}
            total = got.pop("total")
            if total is None:
                continue
            known = {k: v for k, v in got.items() if v is not None}
            where = ", ".join(f"{k} {_ms(v)}" for k, v in known.items())
            top = max(known, key=lambda k: known[k]) if known else None
            clauses.append(f"{d} {_ms(total)} ms" + (f" ({where}): {top} dominates" if top else ""))
        if clauses:
            parts.append(f"{job} " + ", ".join(clauses + _device_busy([m for m, _ in ms])))
    return "; ".join(parts)


def _ms(v: float) -> str:
    return f"{v:.1f}" if v >= 10 else f"{v:.2f}"


def _device_busy(ms: Sequence[Measurement]) -> list[str]:
    """The devices under fio's target, from /proc/diskstats: % busy and ms per I/O (queue and
    service), on the host and, for guest rows, in the guest and on the host under it."""
    out = []
    for label, side, prefix in (("host", "host", "dev"), ("guest", "guest", "dev"), ("host under guest", "guest", "host_dev")):
        rows = [m.telemetry for m in ms if m.side == side and m.telemetry is not None]
        util = _mean_of([getattr(t, f"{prefix}_util_pct") for t in rows])
        wait = _mean_of([getattr(t, f"{prefix}_await_ms") for t in rows])
        if util is not None:
            out.append(f"{label} device {util:.0f}% busy" + (f" at {_ms(wait)} ms/IO" if wait is not None else ""))
    return out


def _mean_of(values: Sequence[object]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(nums) / len(nums) if nums else None
