"""The ZFS settings a scenario can turn, one row each: which storage they apply to and what
values ZFS takes.  Pure data and parsers; :mod:`vmbench.storage.zfs` applies them.

``volblocksize`` (zvols) and ``recordsize`` (datasets) are sizes; the rest are ZFS
properties with a closed set of values, each also an axis of its own (``compression``,
``sync``...), like bus or cache.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..units import format_size, parse_size

ZVOL = "zvol"
DATASET = "dataset"
#: the keys of the storage: section that only ZFS storage (type zfs or zfs-dataset) takes
ZFS_STORAGE_KEYS = ("dataset", "volblocksize", "recordsize", "sparse", "properties", "arc_max")
#: what vmbench states when the scenario does not (never ZFS's version-dependent default:
#: OpenZFS 2.2+ creates 16k zvols, 2.1 8k)
DEFAULT_VOLBLOCKSIZE = 16 << 10
DEFAULT_RECORDSIZE = 128 << 10

MIN_BLOCK = 512
MAX_VOLBLOCK = 128 << 10  # without large_blocks, as zvols are commonly created
MAX_RECORD = 1 << 20


@dataclass(frozen=True)
class ZfsProperty:
    name: str
    applies: tuple[str, ...]  # ZVOL, DATASET
    pattern: str  # a full match of the value as ZFS spells it
    describe: str


PROPERTIES: tuple[ZfsProperty, ...] = (
    ZfsProperty("compression", (ZVOL, DATASET),
                r"on|off|lz4|lzjb|zle|gzip|gzip-[1-9]|zstd|zstd-(?:[1-9]|1[0-9])|zstd-fast|zstd-fast-(?:[1-9]|[1-9]0|100|500|1000)",
                "on, off, lz4, lzjb, zle, gzip, gzip-1..9, zstd, zstd-1..19, zstd-fast, zstd-fast-N"),
    ZfsProperty("sync", (ZVOL, DATASET), r"standard|always|disabled", "standard, always, disabled"),
    ZfsProperty("primarycache", (ZVOL, DATASET), r"all|none|metadata", "all, none, metadata"),
    ZfsProperty("secondarycache", (ZVOL, DATASET), r"all|none|metadata", "all, none, metadata"),
    ZfsProperty("logbias", (ZVOL, DATASET), r"latency|throughput", "latency, throughput"),
    ZfsProperty("atime", (DATASET,), r"on|off", "on, off"),
    ZfsProperty("dedup", (ZVOL, DATASET), r"off|on|verify|sha256|sha256,verify|sha512|sha512,verify|skein|skein,verify",
                "off, on, verify, sha256, sha512, skein (,verify)"),
    ZfsProperty("checksum", (ZVOL, DATASET), r"on|off|fletcher2|fletcher4|sha256|sha512|skein|edonr|blake3",
                "on, off, fletcher2, fletcher4, sha256, sha512, skein, edonr, blake3"),
)
PROPERTY_BY_NAME: dict[str, ZfsProperty] = {p.name: p for p in PROPERTIES}
PROPERTY_NAMES: tuple[str, ...] = tuple(PROPERTY_BY_NAME)


def parse_property(name: str, value: Any) -> str:
    """A property's value as ZFS spells it (booleans read as on/off)."""
    prop = PROPERTY_BY_NAME[name]
    if isinstance(value, bool):
        text = "on" if value else "off"
    elif isinstance(value, (str, int)):
        text = str(value).strip().lower()
    else:
        raise ValueError(f"{value!r} is not a value of {name}")
    if not re.fullmatch(prop.pattern, text):
        raise ValueError(f"{text!r} is not a value of {name} (allowed: {prop.describe})")
    return text


def _block(limit: int, what: str) -> Any:
    def parse(value: Any) -> int:
        n = parse_size(value)
        if n < MIN_BLOCK or n > limit or n & (n - 1):
            raise ValueError(f"{value!r}: {what} is a power of two from 512 to {format_size(limit)} (4k, 8k, 16k, 64k...)")
        return n

    return parse


parse_volblocksize = _block(MAX_VOLBLOCK, "volblocksize")
parse_recordsize = _block(MAX_RECORD, "recordsize")

#: ZFS dataset names: pool/child/... (no snapshots, no leading dash)
DATASET_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]*(/[A-Za-z0-9_.:-]+)*$")


def parse_dataset(value: Any) -> str:
    if not isinstance(value, str) or not DATASET_RE.match(value.strip().rstrip("/")):
        raise ValueError(f"{value!r} is not a ZFS dataset name (example: rpool/vmbench)")
    return value.strip().rstrip("/")
