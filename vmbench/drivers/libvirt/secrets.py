"""The cephx key of a VM's RBD scratch disk as a libvirt secret, one per VM.

libvirt gives QEMU an RBD disk's key only through a secret (``<auth><secret type='ceph'
usage=...>``).  vmbench defines one per VM, named (its usage) like the VM, ephemeral and
private (never written to disk by libvirt, never read back), with a description naming the
run; it is undefined with the VM, and ``vmbench cleanup`` finds leftovers by name and
description.  The key goes from the keyring on the host to libvirt's API, never to an argv,
a log or the results.
"""

from __future__ import annotations

import base64
import re
import xml.etree.ElementTree as ET

from ...errors import HypervisorError
from .connection import libvirt

DESCRIPTION = "vmbench run {tag}: the cephx key of client.{user} for the VM's RBD scratch disk"
USAGE_RE = re.compile(r"^vmbench-([rp][0-9a-f]{8})-\d+$")


def secret_xml(usage: str, run_tag: str, user: str) -> str:
    sec = ET.Element("secret", {"ephemeral": "yes", "private": "yes"})
    ET.SubElement(sec, "description").text = DESCRIPTION.format(tag=run_tag, user=user)
    use = ET.SubElement(sec, "usage", {"type": "ceph"})
    ET.SubElement(use, "name").text = usage
    return ET.tostring(sec, encoding="unicode")


def define_ceph_secret(conn: "libvirt.virConnect", usage: str, run_tag: str, user: str, key: str) -> None:
    """Define the VM's secret (usage ``usage``) holding ``key`` (the keyring's base64 text)."""
    try:
        value = base64.b64decode(key, validate=True)
    except ValueError:
        raise HypervisorError(f"the keyring's key of client.{user} is not base64", "check storage.ceph.keyring") from None
    try:
        secret = conn.secretDefineXML(secret_xml(usage, run_tag, user))
        secret.setValue(value)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"defining the libvirt secret {usage}: {exc.get_error_message()}") from None


def _ours(secret: "libvirt.virSecret") -> str | None:
    """The run tag of a vmbench secret (name and description agree), else None."""
    m = USAGE_RE.match(secret.usageID() or "")
    if m is None or secret.usageType() != libvirt.VIR_SECRET_USAGE_TYPE_CEPH:
        return None
    desc = ET.fromstring(secret.XMLDesc(0)).findtext("description") or ""
    return m.group(1) if desc.startswith(f"vmbench run {m.group(1)}:") else None


def remove_ceph_secret(conn: "libvirt.virConnect", usage: str) -> None:
    """Undefine the VM's secret; none there is fine; one that is not vmbench's is left alone."""
    try:
        secret = conn.secretLookupByUsage(libvirt.VIR_SECRET_USAGE_TYPE_CEPH, usage)
    except libvirt.libvirtError as exc:
        if exc.get_error_code() == libvirt.VIR_ERR_NO_SECRET:
            return
        raise HypervisorError(f"looking up the libvirt secret {usage}: {exc.get_error_message()}") from None
    if _ours(secret) is None:
        raise HypervisorError(f"the libvirt secret {usage} is not vmbench's; left alone")
    try:
        secret.undefine()
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"undefining the libvirt secret {usage}: {exc.get_error_message()}") from None


def our_secrets(conn: "libvirt.virConnect") -> list[tuple[str, str]]:
    """(usage, run tag) of every vmbench secret libvirt holds."""
    out = []
    for secret in conn.listAllSecrets(0):
        try:
            tag = _ours(secret)
        except (libvirt.libvirtError, ET.ParseError):
            continue
        if tag is not None:
            out.append((secret.usageID(), tag))
    return out
