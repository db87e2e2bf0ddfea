"""``stacks:``: the storage layers built inside the guest on the scratch disk."""

from __future__ import annotations

import re
from typing import Any

from ..settings import Filesystem
from .model import FilesystemLayer, Layer, LuksLayer, LvmLayer, PartitionLayer, Stack
from .parsers import MiB, choice_parser, size_parser, refuse_duplicates
from .reader import Context, LineDict, Section, as_name, as_str, as_str_list, items, join

LUKS_PERF_FLAGS = ("no_read_workqueue", "no_write_workqueue")


def read_stacks(ctx: Context, top: Section) -> list[Stack]:
    stacks = []
    for path, line, value in items(ctx, top.raw("stacks", None), "stacks", top.line_of("stacks")):
        sec = Section(ctx, value, path, line)
        name = sec.get("name", as_name)
        layers: list[Layer] = []
        for lpath, lline, lvalue in items(ctx, sec.raw("layers"), join(path, "layers"), sec.line_of("layers")):
            layers.append(_layer(ctx, lpath, lline, lvalue, layers))
        if sec.has("device") or sec.has("disk"):
            key = "device" if sec.has("device") else "disk"
            dev = sec.raw(key)
            if dev != "scratch":
                raise sec.fail(key, f"{dev!r}: stacks are only ever built on vmbench's scratch disk; the root disk and other devices are refused",
                               "leave this key out, or write 'scratch'")
        measure = sec.get("measure", choice_parser(("all", "top")), "all")
        sec.done(("name", "layers", "device", "measure"))
        if not layers:
            raise sec.fail("layers", "needs at least one layer (partition, lvm, luks, ext2/3/4, xfs, btrfs)")
        stacks.append(Stack(name=name, layers=tuple(layers), measure_all=measure == "all"))
    refuse_duplicates(ctx, top, "stacks", [s.name for s in stacks])
    return stacks


def _layer(ctx: Context, path: str, line: int, value: Any, below: list[Layer]) -> Layer:
    kinds = ("partition", "lvm", "luks") + tuple(f.value for f in Filesystem) + ("filesystem",)
    if isinstance(value, str):
        kind, opts = value.strip(), None
    elif isinstance(value, dict) and len(value) == 1:
        kind, opts = next(iter(value.items()))
        line = value.line_of(kind) if isinstance(value, LineDict) else line
    else:
        raise ctx.fail(path, line, f"a layer is a name ({', '.join(kinds)}) or a one-key mapping name: {{options}}")
    if kind not in kinds:
        raise ctx.fail(path, line, f"{kind!r} is not a layer; layers: {', '.join(kinds)}")
    sec = Section(ctx, opts, join(path, kind), line)

    if below and isinstance(below[-1], FilesystemLayer):
        raise ctx.fail(path, line, f"nothing can be layered on top of a filesystem ({below[-1].label})",
                       "the filesystem is always the last layer")
    if kind == "partition":
        if below:
            raise ctx.fail(path, line, "partition must be the first layer (on the raw scratch disk)")
        part = PartitionLayer(align=sec.get("align", size_parser(4096), 1 * MiB))
        if part.align % 4096:
            raise sec.fail("align", "must be a multiple of 4 KiB")
        sec.done()
        return part
    if kind == "lvm":
        if any(isinstance(l, LvmLayer) for l in below):
            raise ctx.fail(path, line, "only one lvm layer per stack")
        thin = sec.get("type", choice_parser(("linear", "thin")), "linear") == "thin"
        extent = sec.get("extent_size", size_parser(1 * MiB), 4 * MiB)
        if extent & (extent - 1):
            raise sec.fail("extent_size", "must be a power of two")
        sec.done()
        return LvmLayer(thin=thin, extent_size=extent)
    if kind == "luks":
        if any(isinstance(l, LuksLayer) for l in below):
            raise ctx.fail(path, line, "only one luks layer per stack")
        version = sec.get("version", choice_parser((1, 2)), 2)
        cipher = sec.get("cipher", _cipher, "aes-xts-plain64")
        key_size = sec.get("key_size", choice_parser((128, 256, 512)), 512)
        sector = sec.get("sector_size", choice_parser((512, 1024, 2048, 4096)), None)
        flags = sec.get("perf_flags", as_str_list, ())
        for f in flags:
            if f not in LUKS_PERF_FLAGS:
                raise sec.fail("perf_flags", f"{f!r} is not one of: {', '.join(LUKS_PERF_FLAGS)}")
        if version == 1 and sector not in (None, 512):
            raise sec.fail("sector_size", f"LUKS1 only has 512-byte sectors; {sector} needs version: 2")
        if "xts" in cipher and key_size == 128:
            raise sec.fail("key_size", "XTS needs two keys: use 256 (AES-128) or 512 (AES-256)")
        sec.done()
        return LuksLayer(version=version, cipher=cipher, key_size=key_size, sector_size=sector, perf_flags=tuple(flags))
    # a filesystem
    if kind == "filesystem":
        fs = sec.get("type", Filesystem.parse)
    else:
        fs = Filesystem.parse(kind)
    mkfs = sec.get("mkfs_options", _safe_options, ())
    mount = sec.get("mount_options", _mount_options, ())
    sec.done(("type", "mkfs_options", "mount_options") if kind == "filesystem" else ("mkfs_options", "mount_options"))
    return FilesystemLayer(fs=fs, mkfs_options=mkfs, mount_options=mount)


def _cipher(value: Any) -> str:
    text = as_str(value)
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*(-[a-z0-9]+(:[a-z0-9]+)?)?", text):
        raise ValueError(f"{text!r} is not a cipher spec (example: aes-xts-plain64)")
    return text


def _safe_options(value: Any) -> tuple[str, ...]:
    opts = as_str_list(value)
    for o in opts:
        if "/" in o:
            raise ValueError(f"{o!r}: options may not name devices or paths; vmbench passes the scratch device itself")
    return opts


def _mount_options(value: Any) -> tuple[str, ...]:
    opts = as_str_list(value)
    for o in opts:
        if not re.fullmatch(r"[A-Za-z0-9_=.:,+-]+", o) or "/" in o:
            raise ValueError(f"{o!r} is not a mount option")
    return opts
