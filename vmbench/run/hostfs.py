"""The host's like-for-like filesystem for file jobs (fio's file engines, many files).

A file job runs in the mount of each filesystem layer in the guest; its host row runs on a
filesystem of the same type (with the same mkfs and mount options) made on the host's
reference volume, mounted under the run's host work directory, measured, unmounted and wiped
before the VM boots.  Only a volume this run created is formatted (its name carries the run's
tag); where the host cannot (a shared RBD image, no mkfs for that type, a path that is not the
run's own volume) the file job has no host row and the report says the host has no
like-for-like row.  The argv builders are pure; :func:`mounted` runs them.
"""

from __future__ import annotations

import contextlib
import logging
import posixpath
from typing import Iterator

from ..errors import CommandError, VmbenchError
from ..guest.layers import MKFS, mkfs_argv, mount_command, wipe_argv
from ..scenario.model import FilesystemLayer
from ..transport import ops
from ..transport.base import Transport

log = logging.getLogger(__name__)


class NoHostFilesystem(VmbenchError):
    """The host could not make or mount the filesystem (undone): its file jobs have no host row."""


def not_ours(target: str | None, run_tag: str) -> str | None:
    """Why the host's reference ``target`` may not be formatted (None: it is this run's own volume)."""
    if not target or not target.startswith("/"):
        return f"the host's target {target or '(none)'} is not a volume of its own (a shared image)"
    if not posixpath.basename(target).startswith(f"vmbench-{run_tag}-"):
        return f"the host's target {target} is not a volume this run created"
    return None


def mount_argv(target: str, layer: FilesystemLayer, mountpoint: str, *, is_file: bool) -> list[str]:
    """Mount ``target`` (a block device, or an image file through a loop device) at ``mountpoint``."""
    return mount_command(target, layer, mountpoint, ("loop",) if is_file else ())


def teardown_argv(target: str, mountpoint: str) -> list[list[str]]:
    """Unmount (a loop device goes with it) and wipe the filesystem's signatures, so the guest
    gets the volume as it was."""
    return [["umount", mountpoint], wipe_argv(target), ["rmdir", mountpoint]]


def why_not(host: Transport, target: str | None, run_tag: str, layer: FilesystemLayer) -> str | None:
    """Why the host cannot make ``layer``'s filesystem on ``target`` (None: it can)."""
    found = not_ours(target, run_tag)
    if found:
        return found
    if host.run(["which", MKFS[layer.fs]], timeout=30, check=False).returncode != 0:
        return f"the host has no {MKFS[layer.fs]}"
    return None


@contextlib.contextmanager
def mounted(host: Transport, target: str, layer: FilesystemLayer, mountpoint: str) -> Iterator[str]:
    """``layer``'s filesystem made on ``target`` and mounted at ``mountpoint`` for the block;
    unmounted and wiped after it (a failure to undo it raises, unless the block raised).
    :class:`NoHostFilesystem` when it cannot be made or mounted (undone first)."""
    is_file = host.run(["test", "-b", target], timeout=30, check=False).returncode != 0
    ops.mkdir(host, mountpoint, 0o755)
    try:
        host.run(mkfs_argv(target, layer), timeout=600)
        host.run(mount_argv(target, layer, mountpoint, is_file=is_file), timeout=120)
    except CommandError as exc:
        for argv in teardown_argv(target, mountpoint)[1:]:  # nothing is mounted
            host.run(argv, timeout=120, check=False)
        raise NoHostFilesystem(f"{layer.label} on {target}: {exc.message}") from None
    failed = False
    try:
        yield mountpoint
    except BaseException:
        failed = True
        raise
    finally:
        for argv in teardown_argv(target, mountpoint):
            try:
                host.run(argv, timeout=120)
            except VmbenchError as exc:
                if not failed:
                    raise
                log.warning("host filesystem teardown: %s: %s", " ".join(argv), exc)
