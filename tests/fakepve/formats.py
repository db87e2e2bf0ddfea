"""Named formats (``format: "pve-node"`` etc.), each a validator copied from the PVE source
that registers it, with the same ``die`` text.  ``X-list`` and ``X-opt`` are derived from
``X`` by :meth:`.validate.Checker.check_format`, as in PVE.  A format missing here makes the
checker raise :class:`~.schema.SchemaError`: add it (from its PVE source) rather than
letting it pass.

Sources: pve-common ``JSONSchema.pm`` / ``AccessControl`` (node, vmid, storage-id, configid,
dns-name, urlencoded, disk-size, tag, poolid), pve-storage ``Plugin.pm`` (volume-id,
storage-path, storage-content, storage-vgname/server/options), qemu-server
``QemuServer.pm`` (volume-id-or-qm-path, -or-absolute-path) and ``CPUConfig.pm``
(pve-vm-cpu-conf, pve-phys-bits), ``QemuServer.pm`` (pve-qm-boot, -bootdev, -bootdisk,
-smbios1) at 8.3.13 (PVE 8.4) and 9.1.3 (PVE 9.1)."""

from __future__ import annotations

import re
from typing import Any, Callable

from .validate import FormatDie, parse_size

DNS_LABEL = r"([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)"
IPV4 = r"(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"

CPU_MODELS = {
    "486", "pentium", "pentium2", "pentium3", "coreduo", "core2duo", "Conroe", "Penryn", "Nehalem",
    "Nehalem-IBRS", "Westmere", "Westmere-IBRS", "SandyBridge", "SandyBridge-IBRS", "IvyBridge",
    "IvyBridge-IBRS", "Haswell", "Haswell-IBRS", "Haswell-noTSX", "Haswell-noTSX-IBRS", "Broadwell",
    "Broadwell-IBRS", "Broadwell-noTSX", "Broadwell-noTSX-IBRS", "Skylake-Client", "Skylake-Client-IBRS",
    "Skylake-Client-noTSX-IBRS", "Skylake-Client-v4", "Skylake-Server", "Skylake-Server-IBRS",
    "Skylake-Server-noTSX-IBRS", "Skylake-Server-v4", "Skylake-Server-v5", "Cascadelake-Server",
    "Cascadelake-Server-v2", "Cascadelake-Server-noTSX", "Cascadelake-Server-v4", "Cascadelake-Server-v5",
    "Cooperlake", "Cooperlake-v2", "KnightsMill", "Icelake-Client", "Icelake-Client-noTSX", "Icelake-Server",
    "Icelake-Server-noTSX", "Icelake-Server-v3", "Icelake-Server-v4", "Icelake-Server-v5", "Icelake-Server-v6",
    "SapphireRapids", "SapphireRapids-v2", "GraniteRapids", "athlon", "phenom", "Opteron_G1", "Opteron_G2",
    "Opteron_G3", "Opteron_G4", "Opteron_G5", "EPYC", "EPYC-IBPB", "EPYC-v3", "EPYC-v4", "EPYC-Rome",
    "EPYC-Rome-v2", "EPYC-Rome-v3", "EPYC-Rome-v4", "EPYC-Milan", "EPYC-Milan-v2", "EPYC-Genoa",
    "host", "kvm32", "kvm64", "qemu32", "qemu64", "max",
}
# builtin models: QEMU model + flags (qemu-server CPUConfig $builtin_models)
BUILTIN_MODELS = {
    "x86-64-v2": ("qemu64", "+popcnt;+pni;+sse4.1;+sse4.2;+ssse3"),
    "x86-64-v2-AES": ("qemu64", "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3"),
    "x86-64-v3": ("qemu64", "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3;+avx;+avx2;+bmi1;+bmi2;+f16c;+fma;+abm;+movbe;+xsave"),
    "x86-64-v4": ("qemu64", "+aes;+popcnt;+pni;+sse4.1;+sse4.2;+ssse3;+avx;+avx2;+bmi1;+bmi2;+f16c;+fma;+abm;+movbe;+xsave;"
                            "+avx512f;+avx512bw;+avx512cd;+avx512dq;+avx512vl"),
}
CPU_FLAGS = {
    "8.4": ["pcid", "spec-ctrl", "ibpb", "ssbd", "virt-ssbd", "amd-ssbd", "amd-no-ssb", "pdpe1gb", "md-clear",
            "hv-tlbflush", "hv-evmcs", "aes"],
    "9.1": ["nested-virt", "md-clear", "pcid", "spec-ctrl", "ssbd", "ibpb", "virt-ssbd", "amd-ssbd", "amd-no-ssb",
            "pdpe1gb", "hv-tlbflush", "hv-evmcs", "aes"],
}
CPU_FLAG_ANY = r"([+-])([a-zA-Z0-9\-_\.]+)"
CONTENT_TYPES = {"images", "rootdir", "vztmpl", "iso", "backup", "snippets", "none", "import"}


def _regex_check(regex: str, message: str, flags: int = 0) -> Callable[[str], str]:
    def check(value: str) -> str:
        if re.fullmatch(regex, value, flags) is None:
            raise FormatDie(message.format(value=value))
        return value
    return check


def _noop(value: str) -> str:
    return value


def verify_storage_id(value: str) -> str:
    if len(value) < 2:
        raise FormatDie(f"storage ID '{value}' cannot be shorter than 2 characters\n")
    if re.fullmatch(r"[a-z][a-z0-9\-_.]*[a-z0-9]", value, re.I) is None:
        raise FormatDie(f"storage ID '{value}' contains illegal characters\n")
    return value


def verify_disk_size(value: str) -> str:
    if parse_size(value) is None:
        raise FormatDie(f"value does not look like a valid disk size: {value}\n")
    return value


def verify_volume_id(value: str) -> str:
    if re.fullmatch(r"([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)", value, re.I | re.S) is None:
        raise FormatDie(f"unable to parse volume ID '{value}'\n")
    return value


def verify_volume_id_or_absolute_path(value: str) -> str:
    if value.startswith("/"):
        return value
    return verify_volume_id(value)


def verify_volume_id_or_qm_path(value: str) -> str:
    if value in ("none", "cdrom"):
        return value
    return verify_volume_id_or_absolute_path(value)


def verify_content(value: str) -> str:
    if value not in CONTENT_TYPES:
        raise FormatDie(f"invalid content type '{value}'\n")
    return value


def verify_phys_bits(value: str) -> str:
    msg = "value must be an integer between 8 and 64 or 'host'\n"
    if re.fullmatch(r"host|\d{1,2}", value) is None or (value.isdigit() and not 8 <= int(value) <= 64):
        raise FormatDie(msg)
    return value


DRIVE_NAME = r"(ide[0-3]|sata[0-5]|scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|efidisk0|tpmstate0)"


def verify_bootdev(value: str) -> str:
    if re.fullmatch(DRIVE_NAME, value) and not value.startswith(("efidisk", "tpmstate")):
        return value
    if re.fullmatch(r"net([0-9]|[12][0-9]|3[01])|usb([0-9]|1[0-3])|hostpci([0-9]|1[0-5])", value):
        return value
    raise FormatDie(f"invalid boot device '{value}'\n")


BOOT_FORMAT = {
    "legacy": {"optional": 1, "default_key": 1, "type": "string", "pattern": "[acdn]{1,4}", "default": "cdn"},
    "order": {"optional": 1, "type": "string", "format": "pve-qm-bootdev-list"},
}
B64 = r"[A-Za-z0-9+\/]+={0,2}"
SMBIOS1_FORMAT = {
    "uuid": {"type": "string", "pattern": "[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}", "optional": 1},
    **{k: {"type": "string", "pattern": B64, "optional": 1} for k in ("version", "serial", "manufacturer", "product", "sku", "family")},
    "base64": {"type": "boolean", "optional": 1},
}


def cpu_format(version: str) -> dict:
    fmt: dict[str, Any] = {
        "cputype": {"type": "string", "default": "kvm64", "default_key": 1, "optional": 1},
        "reported-model": {"type": "string", "enum": sorted(CPU_MODELS, key=str.lower), "optional": 1},
        "hidden": {"type": "boolean", "optional": 1, "default": 0},
        "hv-vendor-id": {"type": "string", "pattern": r"[a-zA-Z0-9]{1,12}", "optional": 1},
        "flags": {"type": "string", "pattern": f"{CPU_FLAG_ANY}(;{CPU_FLAG_ANY})*", "optional": 1},
        "phys-bits": {"type": "string", "format": "pve-phys-bits", "optional": 1},
    }
    if version != "8.4":
        fmt["guest-phys-bits"] = {"type": "integer", "minimum": 32, "maximum": 64, "optional": 1}
    return fmt


def cpu_validator(version: str) -> Callable[[dict], dict]:
    flags = CPU_FLAGS[version]
    supported = f"([+-])({'|'.join(re.escape(f) for f in flags)})"

    def validate(cpu: dict) -> dict:
        cputype = cpu.get("cputype")
        if not cputype:
            raise FormatDie("CPU is missing cputype\n")
        if cputype.startswith("custom-"):
            raise FormatDie(f"Custom cputype '{cputype[7:]}' not found\n")
        if cputype not in CPU_MODELS and cputype not in BUILTIN_MODELS:
            raise FormatDie(f"Built-in cputype '{cputype}' is not defined (missing 'custom-' prefix?)\n")
        if cpu.get("flags") and re.fullmatch(f"{supported}(;{supported})*", str(cpu["flags"])) is None:
            raise FormatDie(f"VM-specific CPU flags must be a subset of: {', '.join(flags)}\n")
        if cpu.get("reported-model") is not None:
            raise FormatDie("Property 'reported-model' not allowed in VM-specific CPU config.\n")
        return cpu
    return validate


USER = r"[^\s:/]+@[A-Za-z][A-Za-z0-9.\-_]+"  # pve-access-control Auth/Plugin.pm $user_regex@$realm_regex


def verify_username(value: str) -> str:
    if len(value) < 3:
        raise FormatDie(f"user name '{value}' is too short\n")
    if len(value) > 64:
        raise FormatDie(f"user name '{value}' is too long ({len(value)} > 64)\n")
    if re.fullmatch(USER, value) is None:
        raise FormatDie(f"value '{value}' does not look like a valid user name\n")
    return value


def privilege_check(version: str) -> Callable[[str], str]:
    """AccessControl::verify_privname: a privilege this version has."""
    from .perms import valid_privileges

    valid = valid_privileges(version)

    def check(value: str) -> str:
        if value not in valid:
            raise FormatDie(f"invalid privilege '{value}'\n")
        return value
    return check


def named_formats(version: str) -> tuple[dict[str, Any], dict[str, Callable]]:
    """(formats, validators of hash formats) for one PVE version."""
    formats: dict[str, Any] = {
        "string": _noop,
        "urlencoded": _regex_check(r"[-%a-zA-Z0-9_.!~*'()]*", "invalid urlencoded string: {value}\n"),
        "pve-configid": _regex_check(r"[a-z][a-z0-9_-]+", "invalid configuration ID '{value}'\n", re.I),
        "pve-storage-id": verify_storage_id,
        "pve-bridge-id": _regex_check(r"[-_.\w\d]+", "invalid bridge ID '{value}'\n"),
        "pve-vmid": _regex_check(r"[1-9][0-9]{2,8}", "value does not look like a valid VM ID\n"),
        "pve-node": _regex_check(DNS_LABEL, "value does not look like a valid node name\n"),
        "dns-name": _regex_check(rf"({DNS_LABEL}\.)*{DNS_LABEL}", "value does not look like a valid DNS name\n"),
        "disk-size": verify_disk_size,
        "pve-tag": _regex_check(r"[a-z0-9_][a-z0-9_\-+.]*", "invalid characters in tag\n", re.I),
        "pve-poolid": _regex_check(r"[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}",
                                   "pool name '{value}' contains invalid characters\n"),
        "pve-volume-id": verify_volume_id,
        "pve-volume-id-or-absolute-path": verify_volume_id_or_absolute_path,
        "pve-volume-id-or-qm-path": verify_volume_id_or_qm_path,
        "pve-storage-path": _regex_check(r"/[^;()]+.*", "value does not look like a valid absolute path\n", re.S),
        "pve-storage-content": verify_content,
        "pve-storage-vgname": _regex_check(r"[a-z0-9][a-z0-9\-_.]*[a-z0-9]", "lvm name '{value}' contains illegal characters\n", re.I),
        "pve-storage-options": _regex_check(r"\S+", "invalid options '{value}'\n"),
        # Plugin.pm verify_portal_dns: PVE::Tools::parse_host_and_port (an IPv4 or DNS name with an optional
        # port, an IPv6 address bare or in brackets with one)
        "pve-storage-portal-dns": _regex_check(rf"(?:(?:{IPV4}|({DNS_LABEL}\.)*{DNS_LABEL})(?::\d+)?|\[[0-9a-fA-F:.]+\](?::\d+)?|"
                                               r"[0-9a-fA-F:]*:[0-9a-fA-F:.]+)", "value does not look like a valid portal address\n"),
        "pve-phys-bits": verify_phys_bits,
        "ipv4": _regex_check(IPV4, "value does not look like a valid IPv4 address\n"),
        "pve-vm-cpu-conf": cpu_format(version),
        "pve-qm-boot": BOOT_FORMAT,
        "pve-qm-bootdev": verify_bootdev,
        "pve-qm-bootdisk": _regex_check(DRIVE_NAME, "invalid boot disk '{value}'\n"),
        "pve-qm-smbios1": SMBIOS1_FORMAT,
        # pve-access-control AccessControl.pm, Auth/Plugin.pm
        "pve-userid": verify_username,
        "pve-tokenid": _regex_check(rf"{USER}![A-Za-z][A-Za-z0-9.\-_]+", "value '{value}' does not look like a valid token ID\n"),
        "pve-groupid": _regex_check(r"[A-Za-z0-9.\-_]+", "group name '{value}' contains invalid characters\n"),
        "pve-roleid": _regex_check(r"[A-Za-z0-9.\-_]+", "role name '{value}' contains invalid characters\n"),
        "pve-priv": privilege_check(version),
    }
    validators = {"pve-vm-cpu-conf": cpu_validator(version)}
    return formats, validators
