"""The template image on the hypervisor host: used in place on this machine, uploaded once
to a remote host (into vmbench's directory there) and reused while its hash matches."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..paths import HostPaths
from ..progress import Progress
from ..transport import ops
from ..transport.base import HostTransport, Transport
from ..units import human_size
from . import build as _build
from .store import Image


@dataclass(frozen=True)
class HostImage:
    """Where the template's files are on the hypervisor host."""

    name: str
    hash: str
    root: str
    kernel: str
    initrd: str
    cmdline: str
    uploaded: bool = False


def host_dir(image: Image, paths: HostPaths) -> str:
    """Where the template goes on the host."""
    return f"{paths.images}/{image.directory.name}"


def on_host(image: Image, host: Transport, paths: HostPaths) -> bool:
    """Whether the host already has this image, complete (its manifest, written last, has the hash)."""
    manifest = ops.read_text(host, f"{host_dir(image, paths)}/{_build.MANIFEST}")
    if not manifest:
        return False
    try:
        return bool(json.loads(manifest).get("hash") == image.hash)
    except (ValueError, AttributeError):
        return False


def place_image(image: Image, host: HostTransport, paths: HostPaths, progress: Progress) -> HostImage:
    dest = host_dir(image, paths)
    files = {_build.ROOT_IMAGE: image.root, _build.KERNEL: image.kernel, _build.INITRD: image.initrd}

    def at(d: str, uploaded: bool) -> HostImage:
        return HostImage(name=image.name, hash=image.hash, root=f"{d}/{_build.ROOT_IMAGE}", kernel=f"{d}/{_build.KERNEL}",
                         initrd=f"{d}/{_build.INITRD}", cmdline=image.cmdline, uploaded=uploaded)

    if dest == str(image.directory):
        return at(str(image.directory), False)  # this machine is the host: use the image where it was built
    if on_host(image, host, paths):
        progress.step(f"template {image.name} ({image.hash[:12]}) is already on {host.name}")
        return at(dest, False)
    total = sum(Path(p).stat().st_size for p in files.values())
    progress.step(f"uploading template {image.name} ({human_size(total)}) to {host.name}:{dest}")
    ops.mkdir(host, paths.images, 0o755)
    ops.mkdir(host, dest, 0o755)
    ops.remove_file(host, f"{dest}/{_build.MANIFEST}")  # a manifest is written last: it marks a complete upload
    for name, local in files.items():
        def tick(done: int, size: int, name: str = name) -> None:
            progress.status(f"uploading {name}: {human_size(done)} of {human_size(size)}")

        host.put_file(str(local), f"{dest}/{name}", mode=0o644, progress=tick)
    host.write_file(f"{dest}/{_build.MANIFEST}", json.dumps(image.manifest, indent=2).encode(), 0o644)
    return at(dest, True)
