"""The scratch disk's I/O limits as qemu-server spells them (pure): options of the disk,
named as vmbench names them (``iops_rd=500``, ``mbps=12.5`` in MiB/s, ``iops_rd_max=1000``),
and the length of a burst ``iops_rd_max_length=5`` / ``bps_max_length=5`` (qemu-server has
no ``mbps_*_length``).  :mod:`.codec` writes, reads back and edits them one axis at a time
through these functions.
"""

from __future__ import annotations

from typing import Any, Mapping

from ...scenario.model import LIMIT_BURSTS, LIMIT_RATES, IoLimits, VmConfig, limit_bytes, limit_mbps


def burst_length_key(burst: str) -> str:
    """The option holding a burst's length: iops_rd_max -> iops_rd_max_length, mbps_max ->
    bps_max_length (qemu-server has no mbps_*_length)."""
    return burst.replace("mbps", "bps") + "_length"


#: every limit option vmbench writes, in the order it writes them (rates and bursts, then the bursts' lengths)
LIMIT_OPTIONS = LIMIT_RATES + LIMIT_BURSTS + tuple(burst_length_key(b) for b in LIMIT_BURSTS)


def limit_items(limits: IoLimits, name: str) -> dict[str, str]:
    """The options of the limit axis ``name`` (none when it is not set): ``iops_rd=500``, or
    for ``burst_length`` the length of every burst that is set (``iops_rd_max_length=5``)."""
    if name == "burst_length":
        if limits.burst_length is None:
            return {}
        return {burst_length_key(b): str(limits.burst_length) for b in limits.bursts()}
    value = limits.get(name)
    return {} if value is None else {name: str(value)}


def limit_options(vm: VmConfig) -> list[str]:
    """The I/O limits that are set: ``iops_rd=500``, ``mbps=12.5`` (MiB/s), ``iops_rd_max=1000``,
    then ``burst_length`` as the length of every burst that is set (``iops_rd_max_length=5``)."""
    items: dict[str, str] = {}
    for name in LIMIT_RATES + LIMIT_BURSTS + ("burst_length",):
        items.update(limit_items(vm.limits, name))
    return [f"{k}={v}" for k, v in items.items()]


def pve_throttle(opts: Mapping[str, str]) -> dict[str, int]:
    """A stored disk's I/O limits as qemu-server hands them to QEMU (``Blockdev.pm``
    generate_throttle_group; PVE 8's ``throttling.*`` the same), keyed by QEMU's throttle
    options (iops-total, bps-read-max, iops-total-max-length...), those that are not 0: MiB/s
    as truncated bytes; the ``*_length`` aliases of the lengths read too.  ``bps*`` (bytes)
    limits nothing: qemu-server's parse_drive turns it into ``mbps*`` "0.000" (it divides
    ``defined(...)``, not the value, by 1 MiB; 8.3.13 and 9.1.3)."""
    def number(*keys: str) -> float:
        for key in keys:
            try:
                if float(opts.get(key) or 0):
                    return float(opts[key])
            except ValueError:
                pass
        return 0.0

    out: dict[str, int] = {}
    for suffix, qemu in (("", "-total"), ("_rd", "-read"), ("_wr", "-write")):
        values = {f"bps{qemu}": limit_bytes(number(f"mbps{suffix}")),
                  f"bps{qemu}-max": limit_bytes(number(f"mbps{suffix}_max")),
                  f"bps{qemu}-max-length": int(number(f"bps{suffix}_max_length", f"bps{suffix}_length")),
                  f"iops{qemu}": int(number(f"iops{suffix}")),
                  f"iops{qemu}-max": int(number(f"iops{suffix}_max")),
                  f"iops{qemu}-max-length": int(number(f"iops{suffix}_max_length", f"iops{suffix}_length"))}
        out.update({k: v for k, v in values.items() if v})
    return out


def _number(text: str | None) -> float:
    try:
        return float(text or 0)
    except ValueError:
        return 0.0


def read_limits(key: str, opts: Mapping[str, str], unknown: list[str]) -> IoLimits:
    """A user's disk's limit options as vmbench's limits; what they cannot say (bursts of
    different lengths, ``bps*`` limits qemu-server does not apply) said in ``unknown``."""
    values: dict[str, Any] = {}
    lengths = set()
    for name in LIMIT_RATES + LIMIT_BURSTS:
        n = _number(opts.get(name))
        if n > 0:
            values[name] = int(n) if name.startswith("iops") else limit_mbps(n)
        if name in LIMIT_BURSTS:
            alias = name.replace("mbps", "bps")
            length = max(_number(opts.get(f"{alias}_length")), _number(opts.get(f"{name.removesuffix('_max')}_length")))
            if length > 0 and name in values:
                lengths.add(int(length))
    if len(lengths) == 1:
        values["burst_length"] = lengths.pop()
    elif lengths:
        unknown.append(f"burst_length: the bursts of {key} last different times "
                       f"({', '.join(str(n) for n in sorted(lengths))} s); vmbench has one burst_length")
    for opt in ("bps", "bps_rd", "bps_wr"):
        if _number(opts.get(opt)) > 0:
            unknown.append(f"{opt}: {key} has {opt}={opts[opt]} (bytes/s), which qemu-server does not apply")
    return IoLimits(**values)
