"""A stored time series as plain lines: a sampler's series (the device's MB/s, the CPUs'
busy share, a ZFS pool's MB/s, the ARC's hit ratio...) or fio's logs, as (times in s, values,
unit), which the report's timelines draw."""

from __future__ import annotations

from typing import Any, Mapping


def plain_lines(source: str, s: Any) -> list[tuple[str, Any]]:
    """A sampler's stored series as plain (``t_s``, ``values``, ``unit``) lines, by name: the
    device under the target's MB/s read and written ("dev-read", "dev-write"), the CPUs' busy
    share ("cpu-busy"), a ZFS pool's MB/s read and written and the ARC's hit ratio; the host's
    own device and CPU under a guest run ("host-disk", "host-cpu") as "host-dev-read",
    "host-dev-write", "host-cpu-busy"; fio's logs as they are."""
    if not isinstance(s, dict):
        return []
    if source in ("host-disk", "host-cpu"):
        return [("host-" + name, line) for name, line in plain_lines(source[len("host-"):], s)]
    if source == "zpool":
        return [("pool-read", {"t_s": s.get("t_s"), "values": s.get("read_mb_s"), "unit": "MB/s"}),
                ("pool-write", {"t_s": s.get("t_s"), "values": s.get("write_mb_s"), "unit": "MB/s"})]
    if source == "arc":
        ratio = s.get("hit_ratio") or []
        return [("arc-hit", {"t_s": s.get("t_s"), "values": [None if v is None else 100.0 * v for v in ratio], "unit": "%"})]
    if source == "disk":
        dev = (s.get("devices") or {}).get(s.get("primary") or "") or {}
        return [("dev-read", {"t_s": s.get("t_s"), "values": dev.get("read_mb_s"), "unit": "MB/s"}),
                ("dev-write", {"t_s": s.get("t_s"), "values": dev.get("write_mb_s"), "unit": "MB/s"})]
    if source == "cpu":
        idle = s.get("idle") or []
        return [("cpu-busy", {"t_s": s.get("t_s"), "values": [None if v is None else 100.0 - v for v in idle], "unit": "%"})]
    return [(source, s)]


def has_points(line: Any) -> bool:
    """A plain line with times and values."""
    return isinstance(line, dict) and bool(line.get("t_s")) and bool(line.get("values"))


def line_points(line: Any) -> tuple[list[float], list] | None:
    """A plain line's (times in s, values); None when it has no point (or is no line)."""
    if not has_points(line):
        return None
    return [float(t) for t in line["t_s"]], list(line["values"])


def line_unit(line: Mapping[str, Any]) -> str:
    """A plain line's unit ("" when it names none)."""
    return str(line.get("unit") or "")
