"""PVE's property strings, read and written (pure): ``a=1,b=2``, a disk's
``local-zfs:vm-100-disk-1,cache=none,size=8G`` (pve-common's parse_property_string)."""

from __future__ import annotations

from typing import Mapping


def parse_options(text: str, default_key: str | None = None) -> dict[str, str]:
    """A PVE property string ``a=1,b=2`` (its first bare item under ``default_key``)."""
    out: dict[str, str] = {}
    for i, item in enumerate(p for p in text.split(",") if p != ""):
        key, eq, value = item.partition("=")
        if not eq:
            if default_key is None or i != 0:
                out[key] = ""
                continue
            key, value = default_key, item
        out[key.strip()] = value.strip()
    return out


def parse_disk(value: str) -> tuple[str, dict[str, str]]:
    """``local-zfs:vm-100-disk-1,cache=none,size=8G`` -> (volid, options)."""
    opts = parse_options(value, default_key="file")
    return opts.pop("file", ""), opts


def join_disk(volid: str, opts: Mapping[str, str]) -> str:
    """(volid, options) -> a disk's property string (a bare item for an empty value)."""
    return ",".join([volid] + [f"{k}={v}" if v != "" else k for k, v in opts.items()])
