"""Small host-side file operations, as argv through a Transport.

Everything vmbench does to a hypervisor host's files goes through these (or through the
transport's ``read_file``/``write_file``/``put_file``), so the same code works on this
machine and over SSH.  Each function builds its argv from fixed words and the paths it is
given; nothing is ever a shell string.
"""

from __future__ import annotations

import posixpath

from ..errors import CommandError
from .base import Transport

_TIMEOUT = 60


def mkdir(host: Transport, path: str, mode: int = 0o700) -> None:
    """``mkdir -p`` with the mode applied to the last directory."""
    host.run(["mkdir", "-p", "-m", f"{mode:o}", "--", path], timeout=_TIMEOUT)


def mkdtemp(host: Transport, parent: str, prefix: str) -> str:
    """A new private directory under ``parent`` (created if missing)."""
    mkdir(host, parent, 0o755)
    out = host.run(["mktemp", "-d", "-p", parent, f"{prefix}XXXXXXXX"], timeout=_TIMEOUT).stdout.strip()
    if not out.startswith(parent.rstrip("/") + "/"):
        raise CommandError(f"{host.name}: mktemp gave an unexpected path {out!r}", argv=["mktemp"])
    return out


def remove_tree(host: Transport, path: str, *, inside: str) -> None:
    """``rm -rf`` of a directory vmbench made, refused unless it lies under ``inside``."""
    norm = posixpath.normpath(path)
    base = posixpath.normpath(inside)
    if not norm.startswith(base + "/") or norm == base:
        raise ValueError(f"refusing to remove {path}: not under {inside}")
    host.run(["rm", "-rf", "--one-file-system", "--", norm], timeout=300)


def remove_file(host: Transport, path: str) -> None:
    host.run(["rm", "-f", "--", path], timeout=_TIMEOUT)


def exists(host: Transport, path: str) -> bool:
    return host.run(["test", "-e", path], timeout=_TIMEOUT, check=False).returncode == 0


def is_dir(host: Transport, path: str) -> bool:
    return host.run(["test", "-d", path], timeout=_TIMEOUT, check=False).returncode == 0


def list_dir(host: Transport, path: str) -> list[str]:
    """Entry names of a directory; [] when it does not exist."""
    res = host.run(["ls", "-1A", "--", path], timeout=_TIMEOUT, check=False)
    return [l for l in res.stdout.splitlines() if l] if res.returncode == 0 else []


def free_bytes(host: Transport, path: str) -> int:
    """Bytes available to root on the filesystem holding ``path``."""
    out = host.run(["df", "-B1", "--output=avail", "--", path], timeout=_TIMEOUT).stdout.split()
    return int(out[-1])


def read_text(host: Transport, path: str) -> str | None:
    """A small text file's contents, or None when it cannot be read."""
    try:
        return host.read_file(path).decode(errors="replace")
    except (OSError, CommandError):
        return None


def first_line(host: Transport, argv: list[str]) -> str | None:
    """The first line a command prints, or None when it fails or is missing."""
    try:
        lines = host.run(argv, timeout=30).stdout.strip().splitlines()
    except CommandError:
        return None
    return lines[0] if lines else None
