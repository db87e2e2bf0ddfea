"""The official Proxmox VE API schema (``apidata.js`` of pve-docs, as JSON) and a router.

``schemas/pve-<version>-api-schema.json.gz`` are byte-for-byte gzip copies of
``pve-<version>-api-schema.json`` (sha256 of the JSON below); ``$VMBENCH_PVE_SCHEMA_DIR`` may
point at a directory holding the plain JSON files instead.  The tree is a list of nodes
``{path, info: {METHOD: {parameters, returns, permissions, ...}}, children}``.
"""

from __future__ import annotations

import copy
import functools
import gzip
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSIONS = ("8.4", "9.1")
SHA256 = {
    "8.4": "1c835c9b986766c6820d1e15b2a3f90911ed262711d52ecb719616466f69cfc9",
    "9.1": "a84cb189b9aa22cc2ba0cc221f1c9244cbaaf7b64a981916ece4390aaf54772b",
}


class SchemaError(Exception):
    """The fake cannot check something the way PVE would (an unknown named format, an
    unsupported schema keyword, an endpoint the fake does not implement...).  Such errors are
    recorded by the server and make ``FakePve.assert_clean()`` fail the test."""


@dataclass(frozen=True)
class Method:
    method: str
    template: str  # e.g. /nodes/{node}/qemu/{vmid}/config
    info: dict

    @property
    def parameters(self) -> dict:
        return self.info.get("parameters") or {}

    @property
    def returns(self) -> dict:
        return self.info.get("returns") or {}

    @property
    def permissions(self) -> dict | None:
        return self.info.get("permissions")


def _read(version: str) -> bytes:
    if version not in VERSIONS:
        raise ValueError(f"unknown PVE schema version {version!r} (known: {', '.join(VERSIONS)})")
    override = os.environ.get("VMBENCH_PVE_SCHEMA_DIR")
    if override:
        return (Path(override) / f"pve-{version}-api-schema.json").read_bytes()
    return gzip.decompress((HERE / "schemas" / f"pve-{version}-api-schema.json.gz").read_bytes())


@functools.lru_cache(maxsize=None)
def _load(version: str) -> tuple:
    data = json.loads(_read(version))
    methods: dict[tuple[str, str], Method] = {}

    def walk(node: dict) -> None:
        for m, info in (node.get("info") or {}).items():
            methods[(m, node["path"])] = Method(m, node["path"], info)
        for child in node.get("children") or []:
            walk(child)

    for n in data:
        walk(n)
    return data, methods


class _Node:
    def __init__(self) -> None:
        self.fixed: dict[str, _Node] = {}
        self.param: _Node | None = None
        self.param_name = ""
        self.template: str | None = None


class Api:
    """One schema version: methods by (METHOD, template) and a PVE-style path router."""

    def __init__(self, version: str) -> None:
        self.version = version
        _, methods = _load(version)
        # a private deep copy: tests may tweak it (e.g. to force an unknown format)
        self.methods: dict[tuple[str, str], Method] = {
            k: Method(v.method, v.template, copy.deepcopy(v.info)) for k, v in methods.items()
        }
        # PVE (RESTHandler::map_path_to_methods) splits the *unescaped* path on '/' and matches
        # each component: a fixed name, or '{param}' matching one whole component.
        self._tree = _Node()
        for (_m, template) in self.methods:
            node = self._tree
            for comp in [c for c in template.split("/") if c]:
                if comp.startswith("{"):
                    if node.param is None:
                        node.param = _Node()
                        node.param_name = comp[1:-1]
                    node = node.param
                else:
                    node = node.fixed.setdefault(comp, _Node())
            node.template = template

    def route(self, method: str, rel_path: str) -> tuple[Method | None, dict[str, str], str | None]:
        """(method info or None, path parameters, matched template or None).

        As RESTHandler::map_path_to_methods: components split on '/' (empty ones skipped), a
        ``{param}`` matches one whole component by its default regex ``\\S+``; below a subclass
        mounted with ``fragmentDelimiter => ''`` (:data:`GREEDY`) the remaining components are
        joined with '/' into one, so ``content/local:100/vm-100-disk-0.qcow2`` routes with
        ``volume = local:100/vm-100-disk-0.qcow2`` (escaped as %2F or not: the path is
        unescaped before it is split)."""
        node = self._tree
        params: dict[str, str] = {}
        stack = [c for c in rel_path.split("/") if c]
        so_far = ""
        while stack:
            comp = stack.pop(0)
            if comp in node.fixed:
                node = node.fixed[comp]
                so_far += "/" + comp
            elif node.param is not None and re.fullmatch(r"\S+", comp):
                params[node.param_name] = comp
                so_far += "/{" + node.param_name + "}"
                node = node.param
            else:
                return None, {}, None
            if so_far in GREEDY and len(stack) > 1:
                stack = ["/".join(stack)]
        if node.template is None:
            return None, {}, None
        return self.methods.get((method, node.template)), params, node.template

    def method(self, method: str, template: str) -> Method:
        return self.methods[(method, template)]


#: subclasses PVE mounts with ``fragmentDelimiter => ''`` (pve-storage API2/Storage/Status.pm:
#: "volume IDs may contain a slash"): everything below is one path component
GREEDY = frozenset({"/nodes/{node}/storage/{storage}/content"})

INDEX_RE = re.compile(r"^([a-z][a-z_-]*?)(\d+)$")
RANGE_RE = re.compile(r"\(n is 0 to (\d+)")
# maxima PVE uses where the description names no range (qemu-server MAX_NETS, MAX_UNUSED_DISKS,
# MAX_HOSTPCI_DEVICES, MAX_NUMA, MAX_VIRTIOFS, MAX_USB_DEVICES...)
INDEX_MAX = {"net": 31, "ipconfig": 31, "unused": 255, "hostpci": 15, "numa": 7, "virtiofs": 9,
             "usb": 13, "mp": 255, "dev": 255}


def indexed_schema(props: dict, key: str) -> dict | None:
    """The schema of ``virtio1`` in a properties dict that defines ``virtio[n]`` (PVE expands
    these keys; the exported schema keeps one entry)."""
    m = INDEX_RE.match(key)
    if not m:
        return None
    base, n = m.group(1), int(m.group(2))
    sub = props.get(f"{base}[n]")
    if sub is None:
        return None
    desc = str(sub.get("description", ""))
    r = RANGE_RE.search(desc)
    if r:
        top = int(r.group(1))
        if base == "usb":
            top = INDEX_MAX["usb"]  # "0 to 4, ... up to 14"
    elif base in INDEX_MAX:
        top = INDEX_MAX[base]
    else:
        raise SchemaError(f"no index range known for '{base}[n]'")
    if str(n) != m.group(2) or n > top:  # no leading zeros, within range
        return None
    return sub
