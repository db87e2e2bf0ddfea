"""The ``hypervisor:`` section (driver, libvirt URI, SSH to a remote host) and ``storage:``."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..settings import Accel, DriverName
from .backend import STORAGE_KEYS as STORAGE_KEYS, Storage, StorageType  # STORAGE_KEYS: the reference's
from .model import Hypervisor, ProxmoxConfig, SshConfig, ZfsSettings
from .parsers import MiB, choice_parser, duration_parser, pattern_parser, size_parser
from .pvenodes import host_name as _hostname, node_members, read_node, read_nodes, read_ssh, wants_all
from .reader import Section, as_bool, as_int, as_name, as_str, items

#: keys of ``hypervisor:`` that only the proxmox driver takes, with what they mean elsewhere
PROXMOX_ONLY_KEYS = {
    "host": " (a libvirt host is named by the URI, qemu+ssh://root@HOST/system, or ssh.host)",
    "port": " (a libvirt host's SSH port goes under ssh.port)",
    "node": "",
    "nodes": " (a Proxmox run across a cluster's nodes)",
    "template": " (libvirt guests come from the top-level template:, a recipe in vmbench/images/recipes/)",
    "storage": " (libvirt scratch disks are set by the top-level storage: section)",
    "token": "",
    "tls": "",
    "timeout": "",
    "clone": "",
}


def read_hypervisor(sec: Section, host_only: bool = False) -> Hypervisor:
    driver = sec.get("driver", DriverName.parse, DriverName.NONE if host_only else DriverName.LIBVIRT)
    if host_only and driver is not DriverName.NONE:
        raise sec.fail("driver", f"a host_only scenario runs no VM; leave driver out (or say none), not {driver.value}")
    if not host_only and driver is DriverName.NONE:
        raise sec.fail("driver", "driver none runs no VM; say host_only: true at the top to measure host storage only")
    if driver is DriverName.PROXMOX:
        return _proxmox_hypervisor(sec)
    for key in PROXMOX_ONLY_KEYS:
        if sec.has(key):
            raise sec.fail(key, f"applies to driver proxmox, not {driver.value}" + PROXMOX_ONLY_KEYS[key],
                           "set driver: proxmox to run on a Proxmox VE node through its API")
    if sec.has("hosts"):
        return _many_libvirt_hosts(sec, driver)
    default_uri = "qemu:///system"
    if sec.has("ssh") and not sec.has("uri") and isinstance(sec.raw("ssh"), dict) and sec.raw("ssh").get("host"):
        ssh_raw = sec.raw("ssh")  # the host named under ssh only: libvirt (if any) over that same SSH
        default_uri = f"qemu+ssh://{ssh_raw.get('user', 'root')}@{ssh_raw['host']}/system"
    uri = sec.get("uri", _libvirt_uri, default_uri)
    accel = sec.get("accel", Accel.parse, Accel.AUTO)
    boot_timeout = sec.get("boot_timeout", duration_parser(10), None)
    machine = sec.get("machine", choice_parser(("pc", "q35")), "pc")
    state_dir = sec.get("state_dir", _abs_path, None)
    ssh = _ssh(sec, uri)
    if sec.has("place"):
        raise sec.fail("place", "places VMs on several hosts; this scenario names one", "list the hosts under hypervisor.hosts")
    sec.done(("driver", "uri", "accel", "boot_timeout", "machine", "state_dir", "ssh"))
    return Hypervisor(driver=driver, uri=uri, accel=accel, boot_timeout=boot_timeout, machine=machine, ssh=ssh,
                      state_dir=state_dir)


#: what each entry of a libvirt ``hypervisor.hosts`` list takes; the rest is shared by every host
LIBVIRT_HOST_KEYS = ("name", "uri", "ssh", "state_dir", "pool")


def _many_libvirt_hosts(sec: Section, driver: DriverName) -> Hypervisor:
    """``hypervisor: {hosts: [{uri:, ssh:, state_dir:, pool:, name:}, ...], place:, accel:, machine:, boot_timeout:}``:
    a run across several libvirt hosts, each with its own URI, SSH, directory and dir pool."""
    for key in LIBVIRT_HOST_KEYS:
        if sec.has(key):
            raise sec.fail(key, "with hypervisor.hosts, each host gives its own " + key + " in its entry",
                           "move it into the entries of hypervisor.hosts")
    shared = Hypervisor(driver=driver, accel=sec.get("accel", Accel.parse, Accel.AUTO),
                        boot_timeout=sec.get("boot_timeout", duration_parser(10), None),
                        machine=sec.get("machine", choice_parser(("pc", "q35")), "pc"))
    hosts: list[Hypervisor] = []
    for path, line, raw in items(sec.ctx, sec.raw("hosts"), f"{sec.path}.hosts", sec.line_of("hosts")):
        sub = Section(sec.ctx, raw, path, line)
        default_uri = "qemu:///system"
        ssh_raw = sub.raw("ssh") if sub.has("ssh") else None
        if not sub.has("uri") and isinstance(ssh_raw, dict) and ssh_raw.get("host"):
            default_uri = f"qemu+ssh://{ssh_raw.get('user', 'root')}@{ssh_raw['host']}/system"
        uri = sub.get("uri", _libvirt_uri, default_uri)
        host = replace(shared, uri=uri, ssh=_ssh(sub, uri), name=sub.get("name", as_name, None),
                       state_dir=sub.get("state_dir", _abs_path, None), pool=sub.get("pool", as_name, None))
        sub.done(LIBVIRT_HOST_KEYS)
        if host.host_label in (h.host_label for h in hosts):
            raise sec.ctx.fail(path, line, f"a second host named {host.host_label!r}: every host of a run has its own name",
                               "give each entry its own name: (the SSH host names it by default)")
        hosts.append(host)
    if not hosts:
        raise sec.fail("hosts", "lists no host", "list each libvirt host: [{uri: qemu+ssh://root@HOST/system}, ...]")
    place = read_place(sec, tuple(h.host_label for h in hosts))
    sec.done(("driver", "accel", "boot_timeout", "machine", "hosts", "place"))
    return replace(hosts[0], hosts=tuple(hosts), place=place)


def read_place(sec: Section, labels: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    """``place: round-robin`` (the default: VM 1 on the first host, VM 2 on the second...) or
    ``place: {HOST: N, ...}``: at most N VMs of a step on HOST, filled in the order given."""
    if not sec.has("place") or sec.raw("place") == "round-robin":
        return ()
    raw = sec.raw("place")
    if not isinstance(raw, dict) or not raw:
        raise sec.fail("place", f"is round-robin or a mapping of host to VMs, e.g. {{{labels[0]}: 1, {labels[-1]}: 3}}")
    out = []
    for name, count in raw.items():
        if str(name) not in labels:
            raise sec.fail("place", f"names {name!r}, which is not one of the run's hosts ({', '.join(labels)})")
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise sec.fail("place", f"{name}: {count!r} is not a number of VMs (0 or more)")
        out.append((str(name), count))
    return tuple(out)


def _libvirt_uri(value: Any) -> str:
    text = as_str(value)
    if not re.match(r"^[a-z0-9+]+://", text):
        raise ValueError(f"{text!r} is not a libvirt URI (example: qemu:///system)")
    parts = urllib.parse.urlsplit(text)
    transport = parts.scheme.partition("+")[2]
    if parts.scheme.partition("+")[0] != "qemu":
        raise ValueError(f"{text!r}: vmbench drives QEMU through libvirt; the URI starts with qemu:// or qemu+ssh://")
    if transport not in ("", "unix", "ssh"):
        raise ValueError(f"{text!r}: transport {transport!r} is not supported; use qemu:///system (this machine) "
                         "or qemu+ssh://root@HOST/system (vmbench verifies the host key itself)")
    if transport == "ssh" and not parts.hostname:
        raise ValueError(f"{text!r} names no host (example: qemu+ssh://root@pve1.example.org/system)")
    if transport == "ssh" and parts.query:
        raise ValueError(f"{text!r}: leave URI parameters out; say key_file and known_hosts under hypervisor.ssh")
    if parts.path not in ("/system", "/session"):
        raise ValueError(f"{text!r}: the URI path is /system or /session")
    return text


def _ssh(sec: Section, uri: str) -> SshConfig | None:
    """SSH settings: from ``hypervisor.ssh``, defaulting to the URI's user, host and port."""
    parts = urllib.parse.urlsplit(uri)
    remote = parts.scheme.endswith("+ssh")
    if not sec.has("ssh"):
        if not remote:
            return None
        return SshConfig(host=parts.hostname or "", port=parts.port or 22, user=parts.username or "root")
    if not remote:
        raise sec.fail("ssh", f"the libvirt URI {uri} is this machine; ssh applies to qemu+ssh://USER@HOST/system URIs")
    return read_ssh(sec.section("ssh"), SshConfig(host=parts.hostname or "", port=parts.port or 22, user=parts.username or "root"))


def _abs_path(value: Any) -> str:
    text = as_str(value)
    if not text.startswith("/") or "\0" in text or ".." in Path(text).parts:
        raise ValueError(f"{text!r} is not an absolute directory path")
    return text.rstrip("/") or "/"


# ---- proxmox ------------------------------------------------------------------------------

PROXMOX_KEYS = ("driver", "host", "port", "node", "nodes", "template", "storage", "token", "tls", "ssh", "timeout", "accel",
                "boot_timeout", "clone", "state_dir", "place")
#: keys of ``hypervisor:`` that only the libvirt driver takes
LIBVIRT_ONLY_KEYS = {
    "uri": "a Proxmox node is reached through its API at host and port, not a libvirt URI",
    "machine": "the machine type is the template's (Proxmox keeps it in the VM config)",
    "hosts": "a Proxmox cluster's nodes are named by nodes:",
}
TOKEN_ID_RE = re.compile(r"[^\s:@!/=]+@[A-Za-z][A-Za-z0-9._-]*![A-Za-z][A-Za-z0-9._-]*")
PVE_STORAGE_RE = re.compile(r"[a-z][a-z0-9._-]*[a-z0-9]")
DNS_NAME_RE = re.compile(r"([a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?\.)*[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?")
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SECRET_HINT = ("put the secret in a file only you can read (secret_file: ~/.config/vmbench/pve1.token, chmod 600) "
               "or in an environment variable (secret_env: VMBENCH_PVE_TOKEN)")


def _proxmox_hypervisor(sec: Section) -> Hypervisor:
    """``hypervisor: {driver: proxmox, host:, node:, template:, storage:, token:, tls:, ssh:, ...}``"""
    for key, why in LIBVIRT_ONLY_KEYS.items():
        if sec.has(key):
            raise sec.fail(key, f"applies to driver libvirt, not proxmox: {why}", "remove the key")
    for key in ("password", "secret"):
        if sec.has(key):
            raise sec.fail(key, "secrets never go in the scenario (it is stored with every run); "
                           "vmbench logs in to the API with a token: token: {id: USER@REALM!NAME, secret_file: ...}",
                           SECRET_HINT)
    for key, what in (("host", "the Proxmox VE node's API host name or address (also its SSH host)"),
                      ("template", "the template VM to clone: its VMID (9000) or its unique name"),
                      ("storage", "the PVE storage ID for scratch disks (local-zfs, local-lvm, local...)"),
                      ("token", "the API token: {id: USER@REALM!NAME, secret_file: FILE} or {id:, secret_env: VAR}")):
        if not sec.has(key):
            raise sec.fail(key, f"is required for driver proxmox: {what}")
    host = sec.get("host", _hostname)
    port = sec.get("port", as_int(1, 65535), 8006)
    node = read_node(sec)
    template = sec.get("template", _pve_template)
    storage = sec.get("storage", pattern_parser(PVE_STORAGE_RE, "a PVE storage ID (lower-case letters, digits, - _ .)"))
    token_id, secret_file, secret_env = _pve_token(sec)
    ca_file, fingerprint, verify = _pve_tls(sec)
    timeout = sec.get("timeout", duration_parser(5), 30.0)
    accel = sec.get("accel", Accel.parse, Accel.AUTO)
    boot_timeout = sec.get("boot_timeout", duration_parser(10), None)
    clone = sec.get("clone", choice_parser(("linked", "full")), "linked")
    state_dir = sec.get("state_dir", _abs_path, None)
    ssh = _pve_ssh(sec, host.strip("[]"), several=sec.has("nodes"))
    nodes = read_nodes(sec, ssh)
    sec.done(PROXMOX_KEYS)
    if nodes:
        node, ssh = nodes[0].name, nodes[0].ssh
    cfg = ProxmoxConfig(host=host, node=node, template=template, storage=storage, token_id=token_id,
                        secret_file=secret_file, secret_env=secret_env, port=port, tls_ca_file=ca_file,
                        tls_fingerprint=fingerprint, tls_verify=verify, timeout=timeout, clone=clone)
    every = wants_all(sec)
    top = Hypervisor(driver=DriverName.PROXMOX, uri=f"{cfg.url}/api2/json/nodes" + (f"/{node}" if node else ""), accel=accel,
                     boot_timeout=boot_timeout, ssh=ssh, state_dir=state_dir, proxmox=cfg, all_nodes=every)
    hv = node_members(top, nodes)
    if every and sec.has("place") and sec.raw("place") != "round-robin":
        raise sec.fail("place", "names nodes, but nodes: all takes the nodes online when the run starts: "
                       "the names cannot be checked before then", "leave place out (round robin), or list the nodes: nodes: [pve1, pve2]")
    if sec.has("place") and not nodes and not every:
        raise sec.fail("place", "places VMs on several nodes; this scenario names one", "list the nodes under hypervisor.nodes")
    return replace(hv, place=read_place(sec, hv.host_labels)) if nodes else hv


def _pve_template(value: Any) -> int | str:
    """A VMID (100..999999999) or a VM name (a DNS name, as PVE requires)."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a VMID or a VM name")
    if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
        vmid = int(value)
        if not 100 <= vmid <= 999999999:
            raise ValueError(f"{vmid} is not a VMID (100 to 999999999)")
        return vmid
    text = as_str(value)
    if not DNS_NAME_RE.fullmatch(text):
        raise ValueError(f"{text!r} is not a VMID or a VM name (a DNS name: letters, digits, -, .)")
    return text


def _scenario_path(sec: Section, value: Any) -> str:
    """A file path: ``~`` expanded; relative to the scenario file's directory."""
    text = as_str(value)
    if "\0" in text:
        raise ValueError("is not a file path")
    path = Path(text).expanduser()
    name = sec.ctx.filename
    if not path.is_absolute() and not name.startswith("<"):
        path = Path(name).resolve().parent / path
    return str(path)


def _pve_token(sec: Section) -> tuple[str, str | None, str | None]:
    """``token: {id: USER@REALM!NAME, secret_file: FILE | secret_env: VAR}``; the secret itself is
    refused, and no message ever repeats a value given under ``token``."""
    if not isinstance(sec.raw("token"), dict):
        raise sec.fail("token", "is a mapping {id: USER@REALM!NAME, secret_file: FILE} (or secret_env: VAR)", SECRET_HINT)
    sub = sec.section("token")
    for key in ("secret", "value", "password"):
        if sub.has(key):
            raise sub.fail(key, "the token secret never goes in the scenario (it is stored with every run)", SECRET_HINT)
    sub.done(("id", "secret_file", "secret_env"))
    if not sub.has("id"):
        raise sub.fail("id", "is required: the token's id, USER@REALM!NAME (e.g. vmbench@pve!bench)")
    token_id = sub.raw("id")
    if not isinstance(token_id, str) or not TOKEN_ID_RE.fullmatch(token_id.strip()):
        secret = isinstance(token_id, str) and "=" in token_id  # USER@REALM!NAME=SECRET: never shown
        raise sub.fail("id", "is not a token id USER@REALM!TOKENNAME like vmbench@pve!bench"
                       + ("; it must not contain the secret" if secret else ""),
                       SECRET_HINT if secret else None)
    has_file, has_env = sub.has("secret_file"), sub.has("secret_env")
    if has_file == has_env:
        raise sub.fail("secret_file" if has_file else "id",
                       "give exactly one of secret_file and secret_env" if has_file else "needs secret_file or secret_env",
                       SECRET_HINT)
    secret_file = sub.get("secret_file", lambda v: _scenario_path(sec, v), None)
    secret_env = sub.get("secret_env", pattern_parser(ENV_NAME_RE, "an environment variable name"), None)
    return token_id.strip(), secret_file, secret_env


def _fingerprint(value: Any) -> str:
    """A SHA-256 certificate fingerprint: 64 hex digits, colons optional -> "AB:CD:..."."""
    if not isinstance(value, str):
        raise ValueError(f"{value!r} is not a SHA-256 fingerprint")
    digits = value.strip().replace(":", "").upper()
    if not re.fullmatch(r"[0-9A-F]{64}", digits):
        raise ValueError(f"{value.strip()!r} is not a SHA-256 fingerprint (64 hex digits, as AB:CD:...; "
                         "pveproxy's: openssl x509 -in /etc/pve/local/pve-ssl.pem -noout -fingerprint -sha256)")
    return ":".join(digits[i:i + 2] for i in range(0, 64, 2))


def _pve_tls(sec: Section) -> tuple[str | None, str | None, bool]:
    """``tls: {ca_file: FILE}`` | ``{fingerprint: AB:CD:...}`` | ``{verify: false}``; none: the system CAs."""
    if not sec.has("tls"):
        return None, None, True
    sub = sec.section("tls")
    sub.done(("ca_file", "fingerprint", "verify"))
    ca_file = sub.get("ca_file", lambda v: _scenario_path(sec, v), None)
    fingerprint = sub.get("fingerprint", _fingerprint, None)
    verify = sub.get("verify", as_bool, True)
    if ca_file and fingerprint:
        raise sub.fail("fingerprint", "give ca_file or fingerprint, not both")
    if not verify and (ca_file or fingerprint):
        raise sub.fail("verify", "verify: false turns certificate checks off; it does not combine with ca_file or fingerprint",
                       "keep ca_file or fingerprint (checked) and drop verify")
    return ca_file, fingerprint, verify


def _pve_ssh(sec: Section, host: str, several: bool = False) -> SshConfig:
    """SSH to the node (host fio, facts, evidence): ``hypervisor.ssh``, host defaulting to ``host``;
    with ``nodes`` (``several``) the defaults of every node's SSH, whose host is the node's own."""
    sub = sec.section("ssh")
    if several and sub.has("host"):
        raise sub.fail("host", "names one machine, but hypervisor.nodes names several: each node's SSH host is its name",
                       "give a node its own SSH host in the list: nodes: [{name: pve2, ssh: {host: 10.0.0.12}}, ...]")
    return read_ssh(sub, SshConfig(host=host))


def driver_storage_problems(hv: Hypervisor, storage: Storage) -> list[tuple[str, str, str]]:
    """What the ``storage:`` section cannot be with the scenario's driver, as (key, message, hint);
    for the loader to report with the storage section's line (the driver refuses it again at preflight)."""
    problem = storage.backend.driver_problem(hv.driver)
    return [] if problem is None else [("type", *problem)]


def read_storage(sec: Section, driver: DriverName | None = None) -> tuple[Storage, ZfsSettings]:
    """The storage and the baseline's ZFS settings (volblocksize/recordsize always stated):
    the section's type, its scratch size, and the rest as that type's backend reads it
    (``driver`` decides what type rbd takes: on Proxmox the pool and client are the node's)."""
    kind = sec.get("type", StorageType.parse, StorageType.DIR)
    scratch = sec.get("scratch_size", size_parser(64 * MiB), 1 << 30)
    return kind.backend().read(sec, scratch, driver)
