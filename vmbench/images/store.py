"""Built guest images on disk: find the current one, list them, build when needed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..paths import StatePaths
from ..progress import Progress
from . import build as _build
from .recipe import load_recipe
from .recipe import recipe_names as _recipe_names


@dataclass(frozen=True)
class Image:
    """A built template image: boot it with ``kernel``, ``initrd`` and ``cmdline``."""

    name: str
    hash: str
    directory: Path
    root: Path
    kernel: Path
    initrd: Path
    cmdline: str
    manifest: dict[str, Any] = field(compare=False, hash=False)


def recipe_names(recipes: Path | None = None) -> list[str]:
    """Names of the available image recipes."""
    return _recipe_names(recipes)


def load_image(directory: Path) -> Image | None:
    """The image in ``directory``, or None if it is incomplete or not an image."""
    try:
        manifest = json.loads((directory / _build.MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict):
        return None
    try:
        image = Image(
            name=str(manifest["name"]),
            hash=str(manifest["hash"]),
            directory=directory,
            root=directory / _build.ROOT_IMAGE,
            kernel=directory / _build.KERNEL,
            initrd=directory / _build.INITRD,
            cmdline=str(manifest["cmdline"]),
            manifest=manifest,
        )
    except KeyError:
        return None
    if not all(p.is_file() for p in (image.root, image.kernel, image.initrd)):
        return None
    return image


def current_image(
    name: str, *, state: StatePaths | None = None, recipes: Path | None = None
) -> Image | None:
    """The built image of recipe ``name`` matching the recipe as it is now, if any."""
    state = state or StatePaths.default()
    recipe = load_recipe(name, recipes)
    digest = _build.image_hash(recipe)
    image = load_image(state.images / _build.image_dirname(name, digest))
    if image is None or image.hash != digest or image.name != name:
        return None
    return image


def list_images(*, state: StatePaths | None = None) -> list[Image]:
    """Every complete image in the state directory, newest build first."""
    state = state or StatePaths.default()
    if not state.images.is_dir():
        return []
    found = [
        img
        for d in state.images.iterdir()
        if d.is_dir() and not d.name.startswith(".")
        for img in [load_image(d)]
        if img is not None
    ]
    return sorted(found, key=lambda i: (str(i.manifest.get("built_at", "")), i.name), reverse=True)


def ensure_image(
    name: str,
    *,
    state: StatePaths | None = None,
    recipes: Path | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> Image:
    """Build recipe ``name`` if its current image is missing (or ``force``); return it."""
    state = state or StatePaths.default()
    recipe = load_recipe(name, recipes)
    if not force:
        image = current_image(name, state=state, recipes=recipes)
        if image is not None:
            return image
    directory = _build.build_image(recipe, state, progress)
    image = load_image(directory)
    if image is None:  # pragma: no cover - build_image checks what it wrote
        raise RuntimeError(f"image build left an incomplete image in {directory}")
    return image
