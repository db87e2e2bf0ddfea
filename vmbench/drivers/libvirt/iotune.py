"""The scratch disk's I/O limits as libvirt spells them: the disk's ``<iotune>`` (pure).

Each limit axis (vmbench.scenario.model.LIMIT_NAMES, Proxmox's names) is one child of
``<iotune>``: iops -> ``total_iops_sec``, mbps_rd -> ``read_bytes_sec`` (MiB/s as bytes,
truncated as qemu-server does), iops_wr_max -> ``write_iops_sec_max``, and ``burst_length``
the ``*_max_length`` of every burst that is set.  :mod:`.codec` writes, reads back and edits
them one axis at a time through these functions.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any, Mapping

from ...scenario.model import LIMIT_BURSTS, LIMIT_RATES, MiB, IoLimits, limit_bytes, limit_mbps
from ..qemu_cmdline import throttle_option

_IOTUNE_DIRECTION = {"": "total", "rd": "read", "wr": "write"}
#: the order libvirt writes <iotune>'s rates and bursts in (their lengths follow, same order)
IOTUNE_ORDER = ("mbps", "mbps_rd", "mbps_wr", "iops", "iops_rd", "iops_wr",
                "mbps_max", "mbps_rd_max", "mbps_wr_max", "iops_max", "iops_rd_max", "iops_wr_max")


def iotune_name(name: str) -> str:
    """A limit axis as libvirt's <iotune> element: iops -> total_iops_sec, mbps_rd ->
    read_bytes_sec, iops_wr_max -> write_iops_sec_max (its length: that plus ``_length``)."""
    base = name.removesuffix("_max")
    unit, _, direction = base.partition("_")
    tag = f"{_IOTUNE_DIRECTION[direction]}_{'iops' if unit == 'iops' else 'bytes'}_sec"
    return tag + ("_max" if name != base else "")


#: every <iotune> child vmbench writes, in the order it writes them (rates and bursts, then the bursts' lengths)
IOTUNE_TAGS = tuple(iotune_name(n) for n in IOTUNE_ORDER) + tuple(iotune_name(n) + "_length" for n in IOTUNE_ORDER
                                                                   if n.endswith("_max"))


def iotune_entries(limits: IoLimits, name: str) -> dict[str, str]:
    """The <iotune> children of the limit axis ``name`` (none when it is not set): its rate or
    burst, or for ``burst_length`` the length of every burst that is set."""
    if name == "burst_length":
        if limits.burst_length is None:
            return {}
        return {iotune_name(b) + "_length": str(limits.burst_length) for b in limits.bursts()}
    value = limits.get(name)
    if value is None:
        return {}
    return {iotune_name(name): str(int(value) if name.startswith("iops") else limit_bytes(value))}


def ordered_element(tag: str, children: Mapping[str, str], order: tuple[str, ...]) -> ET.Element:
    """``<tag>`` with a child per entry of ``children`` (tag -> text), in ``order`` (others after, as given)."""
    el = ET.Element(tag)
    for name in sorted(children, key=lambda n: order.index(n) if n in order else len(order)):
        ET.SubElement(el, name).text = children[name]
    return el


def iotune_element(limits: IoLimits) -> ET.Element | None:
    """``<iotune>`` with every limit that is set (MiB/s as bytes: x 1048576, truncated as
    qemu-server does) and ``burst_length`` as the ``*_max_length`` of every burst; None
    without limits."""
    entries: dict[str, str] = {}
    for name in LIMIT_RATES + LIMIT_BURSTS + ("burst_length",):
        entries.update(iotune_entries(limits, name))
    return ordered_element("iotune", entries, IOTUNE_TAGS) if limits.given() else None


def iotune_limits(disk: ET.Element) -> dict[str, str]:
    """A disk's ``<iotune>`` keyed by QEMU's throttle options (iops-total, bps-read-max-length...)."""
    iotune = disk.find("iotune")
    out: dict[str, str] = {}
    if iotune is None:
        return out
    for name in LIMIT_RATES + LIMIT_BURSTS:
        for suffix in ("", "_length") if name in LIMIT_BURSTS else ("",):
            text = iotune.findtext(iotune_name(name) + suffix)
            if text is not None:
                out[throttle_option(name) + suffix.replace("_", "-")] = text.strip()
    return out


def read_limits(disk: ET.Element, unknown: list[str]) -> IoLimits:
    """A user's disk's ``<iotune>`` as vmbench's limits; what they cannot say (bursts of
    different lengths, other children) said in ``unknown``."""
    iotune = disk.find("iotune")
    if iotune is None:
        return IoLimits()
    values: dict[str, Any] = {}
    known: set[str] = set()
    lengths: set[int] = set()
    for name in LIMIT_RATES + LIMIT_BURSTS:
        tag = iotune_name(name)
        known.update((tag, tag + "_length"))
        text = (iotune.findtext(tag) or "").strip()
        if text and text.isdigit() and int(text):
            values[name] = int(text) if name.startswith("iops") else limit_mbps(int(text) / MiB)
        length = (iotune.findtext(tag + "_length") or "").strip()
        if length and length.isdigit() and int(length) and name in LIMIT_BURSTS:
            lengths.add(int(length))
    if len(lengths) == 1:
        values["burst_length"] = lengths.pop()
    elif lengths:
        unknown.append(f"burst_length: the bursts last different times ({', '.join(str(n) for n in sorted(lengths))} s); "
                       "vmbench has one burst_length")
    for child in iotune:
        if child.tag not in known:
            unknown.append(f"iotune: <{child.tag}>{(child.text or '').strip()}</{child.tag}> is not a vmbench limit")
    return IoLimits(**values)
