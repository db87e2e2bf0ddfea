"""Parsing and formatting of sizes and durations as admins write them (4k, 1M, 10s)."""

from __future__ import annotations

import math
import re

_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgtp]?)(i?b?)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
_DUR_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$", re.IGNORECASE)
_DUR_MULT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_size(value: object) -> int:
    """Bytes from ``4096``, ``"4k"``, ``"1M"``, ``"1GiB"`` (binary multiples, as fio uses)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a size")
    if isinstance(value, int):
        if value < 0:
            raise ValueError(f"{value} is negative")
        return value
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a size")
    m = _SIZE_RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a size (examples: 4k, 64k, 1M, 2G)")
    number, unit = float(m.group(1)), m.group(2).lower()
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a size")
    result = number * _SIZE_MULT[unit]
    if result != int(result):
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(result)


def parse_duration(value: object) -> float:
    """Seconds from ``10``, ``"10s"``, ``"1m"``, ``"500ms"``."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, (int, float)):
        if not math.isfinite(value) or value < 0:
            raise ValueError(f"{value} is not a duration")
        return float(value)
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a duration")
    m = _DUR_RE.match(value)
    if not m:
        raise ValueError(f"{value!r} is not a duration (examples: 10s, 2m, 500ms)")
    return float(m.group(1)) * _DUR_MULT[(m.group(2) or "s").lower()]


def format_size(nbytes: int) -> str:
    """The shortest exact fio-style spelling: 4096 -> '4k', 1048576 -> '1m', 1000 -> '1000'."""
    for unit in ("p", "t", "g", "m", "k"):
        mult = _SIZE_MULT[unit]
        if nbytes >= mult and nbytes % mult == 0:
            return f"{nbytes // mult}{unit}"
    return str(nbytes)


def human_size(nbytes: int) -> str:
    """For messages: 53687091197 -> '50.0G', 1048576 -> '1.0M'."""
    value = float(nbytes)
    for unit in ("", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.0f}" if unit == "" else f"{value:.1f}{unit}"
        value /= 1024
    return str(nbytes)


def format_duration(seconds: float) -> str:
    seconds = float(seconds)
    if seconds < 60:
        return f"{seconds:.0f}s" if seconds == int(seconds) else f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
