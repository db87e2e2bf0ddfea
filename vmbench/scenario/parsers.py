"""Small value parsers shared by the scenario sections (each raises ValueError with the reason)."""

from __future__ import annotations

import re
from typing import Any

from ..units import format_size, parse_duration, parse_size
from .reader import Context, Section, as_str

MiB = 1 << 20


def choice_parser(options: tuple) -> Any:
    def parse(value: Any) -> Any:
        for o in options:
            if value == o or (isinstance(o, int) and isinstance(value, str) and value.strip() == str(o)):
                return o
        raise ValueError(f"{value!r} is not one of: {', '.join(str(o) for o in options)}")

    return parse


def pattern_parser(regex: re.Pattern, what: str) -> Any:
    """A parser of a string that must match ``regex`` whole (``what`` names it in the error)."""
    def parse(value: Any) -> str:
        text = as_str(value)
        if not regex.fullmatch(text):
            raise ValueError(f"{text!r} is not {what}")
        return text

    return parse


def size_parser(minimum: int) -> Any:
    def parse(value: Any) -> int:
        n = parse_size(value)
        if n < minimum:
            raise ValueError(f"{value!r} is below the minimum {format_size(minimum)}")
        return n

    return parse


def duration_parser(minimum: float) -> Any:
    def parse(value: Any) -> float:
        n = parse_duration(value)
        if n < minimum:
            raise ValueError(f"{value!r} is below the minimum {minimum:g}s")
        return n

    return parse


def refuse_duplicates(ctx: Context, sec: Section, key: str, names: list[str]) -> None:
    """Refuse a name used twice in the list under ``key``."""
    seen = set()
    for n in names:
        if n in seen:
            raise sec.fail(key, f"the name {n!r} is used twice")
        seen.add(n)
