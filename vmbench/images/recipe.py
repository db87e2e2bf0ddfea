"""Guest image recipes: ``vmbench/images/recipes/NAME/recipe.yaml`` plus an optional overlay dir.

A recipe is loaded and validated into a :class:`Recipe`; :func:`compute_hash` keys the
built image on the recipe's bytes, every overlay file and the builder's version.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..errors import PreflightError
from ..paths import recipes_dir

RECIPE_FILE = "recipe.yaml"
MIRROR_ENV = "VMBENCH_DEBIAN_MIRROR"

_REQUIRED: dict[str, type] = {
    "name": str,
    "suite": str,
    "packages": list,
    "size": str,
    "hostname": str,
    "root_label": str,
    "cmdline": str,
}
_OPTIONAL: dict[str, tuple[type, Any]] = {
    "description": (str, ""),
    "arch": (str, "amd64"),
    "variant": (str, "minbase"),
    "components": (list, ("main",)),
    "mirror": (str, "http://deb.debian.org/debian"),
    "mask_units": (list, ()),
    "initrd_modules": (list, ()),
    # true: the initrd carries only initrd_modules and their dependencies (initramfs-tools'
    # MODULES=list), a quarter of the default's size: seconds less to unpack at every boot
    # under TCG, where a guest has no other use for the rest.
    "initrd_minimal": (bool, False),
    "manifest_packages": (list, ()),
    "overlay": (str, None),
    # Installed with apt-get inside the chroot after debootstrap (/proc, /sys, /dev mounted,
    # services kept from starting); for packages whose scripts need them (DKMS modules).
    "chroot_packages": (list, ()),
    # Enabled with `systemctl enable` in the chroot.
    "enable_units": (list, ()),
    # Kernel modules that must exist for the guest's kernel (e.g. built by DKMS).
    "kernel_modules": (list, ()),
}
_SIZE_RE = re.compile(r"^([1-9][0-9]*)([MG])$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
_PKG_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_MODULE_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_UNIT_RE = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.(service|timer|socket|target|mount|path)$")
_LABEL_MAX = 16  # ext4 volume labels


class RecipeError(PreflightError):
    """A recipe file is missing, unreadable or invalid."""


@dataclass(frozen=True)
class Recipe:
    """A validated image recipe."""

    name: str
    directory: Path
    suite: str
    packages: tuple[str, ...]
    size: str
    hostname: str
    root_label: str
    cmdline: str
    description: str = ""
    arch: str = "amd64"
    variant: str = "minbase"
    components: tuple[str, ...] = ("main",)
    mirror: str = "http://deb.debian.org/debian"
    mask_units: tuple[str, ...] = ()
    initrd_modules: tuple[str, ...] = ()
    initrd_minimal: bool = False
    manifest_packages: tuple[str, ...] = ()
    overlay: Path | None = None
    chroot_packages: tuple[str, ...] = ()
    enable_units: tuple[str, ...] = ()
    kernel_modules: tuple[str, ...] = ()

    @property
    def path(self) -> Path:
        return self.directory / RECIPE_FILE

    @property
    def size_bytes(self) -> int:
        return parse_size(self.size)


def parse_size(text: str) -> int:
    """``"2G"`` -> bytes.  Only whole M or G units."""
    m = _SIZE_RE.match(text.strip())
    if not m:
        raise RecipeError(f"bad image size {text!r}", hint="write it like 2G or 1536M")
    return int(m.group(1)) * (1024**3 if m.group(2) == "G" else 1024**2)


def effective_mirror(recipe: Recipe, env: Mapping[str, str] | None = None) -> str:
    """The Debian mirror to use: ``$VMBENCH_DEBIAN_MIRROR`` or the recipe's."""
    env = os.environ if env is None else env
    return env.get(MIRROR_ENV) or recipe.mirror


def recipe_names(recipes: Path | None = None) -> list[str]:
    """Names of the recipes (sub-directories holding a recipe.yaml)."""
    base = Path(recipes) if recipes is not None else recipes_dir()
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if (p / RECIPE_FILE).is_file())


def load_recipe(name: str, recipes: Path | None = None) -> Recipe:
    """Load and validate recipe ``name``; unknown names list the available ones."""
    base = Path(recipes) if recipes is not None else recipes_dir()
    directory = base / name
    if not _NAME_RE.match(name) or not (directory / RECIPE_FILE).is_file():
        names = recipe_names(base)
        raise PreflightError(
            f"unknown image recipe {name!r}",
            hint=f"available recipes in {base}: {', '.join(names) if names else '(none)'}",
        )
    try:
        data = yaml.safe_load((directory / RECIPE_FILE).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise RecipeError(f"cannot read {directory / RECIPE_FILE}: {exc}") from exc
    return parse_recipe(data, directory)


def parse_recipe(data: object, directory: Path) -> Recipe:
    """Validate the parsed YAML of a recipe living in ``directory``."""
    where = directory / RECIPE_FILE
    if not isinstance(data, dict):
        raise RecipeError(f"{where}: expected a mapping at the top level")
    unknown = sorted(set(data) - set(_REQUIRED) - set(_OPTIONAL))
    if unknown:
        raise RecipeError(
            f"{where}: unknown key(s): {', '.join(map(str, unknown))}",
            hint=f"known keys: {', '.join(sorted([*_REQUIRED, *_OPTIONAL]))}",
        )
    values: dict[str, Any] = {}
    for key, typ in _REQUIRED.items():
        if key not in data:
            raise RecipeError(f"{where}: missing key {key!r}")
        values[key] = _typed(where, key, data[key], typ)
    for key, (typ, default) in _OPTIONAL.items():
        values[key] = _typed(where, key, data[key], typ) if key in data else default
    return _build(where, directory, values)


def _typed(where: Path, key: str, value: Any, typ: type) -> Any:
    if not isinstance(value, typ) or (isinstance(value, bool) and typ is not bool):
        raise RecipeError(f"{where}: {key!r} must be a {typ.__name__}, got {value!r}")
    if isinstance(value, list):  # typ is list
        if not all(isinstance(v, str) and v for v in value):
            raise RecipeError(f"{where}: {key!r} must be a list of non-empty strings")
        return tuple(value)
    return value


def _build(where: Path, directory: Path, v: dict[str, Any]) -> Recipe:
    if v["name"] != directory.name:
        raise RecipeError(f"{where}: name {v['name']!r} differs from its directory {directory.name!r}")
    if not _NAME_RE.match(v["name"]):
        raise RecipeError(f"{where}: bad recipe name {v['name']!r}", hint="use [a-z0-9._-]")
    parse_size(v["size"])
    if not v["packages"]:
        raise RecipeError(f"{where}: 'packages' is empty")
    for key in ("packages", "manifest_packages", "chroot_packages"):
        bad = [p for p in v[key] if not _PKG_RE.match(p)]
        if bad:
            raise RecipeError(f"{where}: bad package name(s) in {key!r}: {', '.join(bad)}")
    for key in ("mask_units", "enable_units"):
        bad_units = [u for u in v[key] if not _UNIT_RE.match(u)]
        if bad_units:
            raise RecipeError(f"{where}: bad unit name(s) in {key!r}: {', '.join(bad_units)}")
    both = sorted(set(v["mask_units"]) & set(v["enable_units"]))
    if both:
        raise RecipeError(f"{where}: unit(s) both masked and enabled: {', '.join(both)}")
    for key in ("kernel_modules", "initrd_modules"):
        bad_mods = [m for m in v[key] if not _MODULE_RE.match(m)]
        if bad_mods:
            raise RecipeError(f"{where}: bad module name(s) in {key!r}: {', '.join(bad_mods)}")
    if v["initrd_minimal"] and not v["initrd_modules"]:
        raise RecipeError(f"{where}: 'initrd_minimal' needs 'initrd_modules': the modules that find the root disk")
    if not v["root_label"] or len(v["root_label"]) > _LABEL_MAX:
        raise RecipeError(f"{where}: 'root_label' must be 1..{_LABEL_MAX} characters")
    if not any(tok.startswith("root=") for tok in v["cmdline"].split()):
        raise RecipeError(f"{where}: 'cmdline' must set root= (e.g. root=LABEL={v['root_label']})")
    if not v["mirror"].startswith(("http://", "https://", "file:/")):
        raise RecipeError(f"{where}: 'mirror' must be an http(s):// or file:/ URL")
    overlay = None
    if v["overlay"] is not None:
        overlay = (directory / v["overlay"]).resolve()
        if directory.resolve() not in overlay.parents or not overlay.is_dir():
            raise RecipeError(f"{where}: 'overlay' must be an existing directory inside {directory}")
    return Recipe(
        name=v["name"],
        directory=directory,
        suite=v["suite"],
        packages=v["packages"],
        size=v["size"],
        hostname=v["hostname"],
        root_label=v["root_label"],
        cmdline=" ".join(v["cmdline"].split()),
        description=v["description"],
        arch=v["arch"],
        variant=v["variant"],
        components=v["components"],
        mirror=v["mirror"],
        mask_units=v["mask_units"],
        initrd_modules=v["initrd_modules"],
        initrd_minimal=v["initrd_minimal"],
        manifest_packages=v["manifest_packages"],
        overlay=overlay,
        chroot_packages=v["chroot_packages"],
        enable_units=v["enable_units"],
        kernel_modules=v["kernel_modules"],
    )


def overlay_files(overlay: Path | None) -> list[Path]:
    """Every file and symlink under ``overlay``, sorted by relative path."""
    if overlay is None:
        return []
    found = [p for p in overlay.rglob("*") if p.is_symlink() or p.is_file()]
    return sorted(found, key=lambda p: p.relative_to(overlay).as_posix())


def compute_hash(recipe: Recipe, builder_version: str) -> str:
    """sha256 over the builder version, recipe.yaml's bytes and each overlay file.

    Each overlay entry contributes its relative path, its kind (file, executable file or
    symlink) and its content (or link target); mtimes and other bits do not count.
    """
    h = hashlib.sha256()
    _frame(h, b"vmbench-image-builder", builder_version.encode())
    _frame(h, b"recipe.yaml", recipe.path.read_bytes())
    if recipe.overlay is not None:
        for path in overlay_files(recipe.overlay):
            rel = path.relative_to(recipe.overlay).as_posix().encode()
            if path.is_symlink():
                _frame(h, b"link:" + rel, os.readlink(path).encode())
            else:
                kind = b"exec:" if path.stat().st_mode & 0o111 else b"file:"
                _frame(h, kind + rel, path.read_bytes())
    return h.hexdigest()


def _frame(h: "hashlib._Hash", label: bytes, data: bytes) -> None:
    for part in (label, data):
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
