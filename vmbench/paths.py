"""Where vmbench keeps things on the machine it drives.

Everything vmbench creates outside the results database lives under one state directory
(``/var/lib/vmbench`` unless ``VMBENCH_STATE_DIR`` says otherwise), so it is easy to find
and nothing else is touched.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_STATE_DIR = Path("/var/lib/vmbench")
PACKAGE_DIR = Path(__file__).resolve().parent
#: the clone's root when vmbench runs from one (else the directory the package is installed in)
REPO_ROOT = PACKAGE_DIR.parent


@dataclass(frozen=True)
class StatePaths:
    root: Path

    @classmethod
    def default(cls) -> "StatePaths":
        return cls(Path(os.environ.get("VMBENCH_STATE_DIR", DEFAULT_STATE_DIR)))

    @property
    def images(self) -> Path:
        """Built template images, one directory per recipe hash."""
        return self.root / "images"

    @property
    def pool(self) -> Path:
        """Directory of the ``vmbench`` libvirt storage pool (overlays, scratch disks)."""
        return self.root / "pool"

    @property
    def consoles(self) -> Path:
        """Serial console logs of vmbench's VMs."""
        return self.root / "consoles"

    @property
    def runs(self) -> Path:
        """Ledgers of what each run created, for cleanup after a hard kill."""
        return self.root / "runs"

    @property
    def cache(self) -> Path:
        """Small cached facts (accelerator probe results, debootstrap .debs)."""
        return self.root / "cache"


@dataclass(frozen=True)
class HostPaths:
    """vmbench's directory on the hypervisor host (this machine, or a remote one): its pool,
    the template images uploaded there, console logs, and host fio work directories.
    Plain POSIX path strings: they are only ever used through a host Transport."""

    root: str

    @classmethod
    def for_host(cls, state_dir: str | None, local: StatePaths) -> "HostPaths":
        return cls(state_dir or str(local.root))

    @property
    def images(self) -> str:
        return f"{self.root}/images"

    @property
    def pool(self) -> str:
        return f"{self.root}/pool"

    @property
    def consoles(self) -> str:
        return f"{self.root}/consoles"

    @property
    def work(self) -> str:
        """Host fio work directories (one per run, removed with it)."""
        return f"{self.root}/work"


def recipes_dir() -> Path:
    """The directory of guest image recipes: the package's own ``vmbench/images/recipes``
    (package data: an installed vmbench builds images without a clone), or ``$VMBENCH_RECIPES_DIR``."""
    env = os.environ.get("VMBENCH_RECIPES_DIR")
    return Path(env) if env else PACKAGE_DIR / "images" / "recipes"


def in_clone() -> bool:
    """Is this vmbench the code of a clone (or a source tree) of the repository, run from there
    (``make demo``'s editable install, ``python -m vmbench``), rather than an installed package?"""
    return all((REPO_ROOT / name).is_file() for name in ("setup.cfg", "pyproject.toml"))


def default_db_path() -> Path:
    """Where results go unless ``--db`` says: ``$VMBENCH_DB``; in a clone its ``results/vmbench.db``;
    installed, the user's data directory (``$XDG_DATA_HOME/vmbench/vmbench.db``, by default
    ``~/.local/share/vmbench/vmbench.db``), never the installation's directory."""
    env = os.environ.get("VMBENCH_DB")
    if env:
        return Path(env)
    if in_clone():
        return REPO_ROOT / "results" / "vmbench.db"
    data = os.environ.get("XDG_DATA_HOME") or ""
    base = Path(data) if os.path.isabs(data) else Path.home() / ".local" / "share"  # a relative one is ignored, as the spec says
    return base / "vmbench" / "vmbench.db"
