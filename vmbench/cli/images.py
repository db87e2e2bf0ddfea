"""``vmbench images build`` and ``vmbench images list``: the guest template images on this
machine (``vmbench images push`` is :mod:`.push`)."""

from __future__ import annotations

import argparse

from ..images import current_image, ensure_image, list_images, recipe_names
from .common import ConsoleProgress


def cmd_images_build(args: argparse.Namespace) -> int:
    image = ensure_image(args.name, force=args.force, progress=ConsoleProgress())
    print(f"{image.name}: {image.directory} (hash {image.hash[:12]})")
    return 0


def cmd_images_list(args: argparse.Namespace) -> int:
    # imported here: `vmbench images build` runs under Debian's python3 with only python3-yaml while
    # scripts/bootstrap makes the .venv, so this module imports nothing else (tests/unit/test_cli_imports.py)
    from tabulate import tabulate

    current = {}
    for n in recipe_names():
        img = current_image(n)
        if img:
            current[n] = img.hash
    rows = [[i.name, i.hash[:12], "current" if current.get(i.name) == i.hash else "outdated", i.manifest.get("built_at", "?"),
             i.manifest.get("kernel_version", "?"), str(i.directory)] for i in list_images()]
    print(tabulate(rows, headers=["recipe", "hash", "state", "built", "kernel", "directory"], tablefmt="simple"))
    missing = [n for n in recipe_names() if n not in current]
    for n in missing:
        print(f"{n}: not built for its current recipe (vmbench images build {n})")
    return 0

