"""scripts/bootstrap builds the guest image with Debian's python3 and python3-yaml while the
.venv is made: the command line and the image builder must load nothing else from outside
the standard library (the other libraries are imported by the commands that use them).
Each command's module is imported only when it runs: every one the parser names exists."""

from __future__ import annotations

import argparse
import importlib
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {"yaml", "_yaml", "cython_runtime", "sitecustomize"}  # yaml's C loader; the interpreter's own hook


def test_the_cli_and_the_image_builder_need_only_the_standard_library_and_yaml():
    code = ("import sys, json\n"
            "import vmbench.cli.main, vmbench.images, vmbench.images.build, vmbench.images.recipe, vmbench.images.commands\n"
            "import vmbench.cli.images\n"  # `vmbench images build`
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    loaded = set(json.loads(out))
    outside = {m for m in loaded - ALLOWED - set(sys.stdlib_module_names) if m != "vmbench" and not m.startswith("_")}
    assert outside == set(), f"imported at load time: {sorted(outside)} (import them inside the command that needs them)"


def _commands(parser: argparse.ArgumentParser):
    """Every Command the parser and its subparsers name."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _commands(sub)
    func = parser.get_default("func")
    if func is not None:
        yield func


def test_every_command_the_parser_names_is_a_function_of_its_module():
    from vmbench.cli.main import build_parser
    from vmbench.cli.parsers import Command

    commands = list(_commands(build_parser()))
    assert len(commands) == 17 and all(isinstance(c, Command) for c in commands)
    for c in commands:
        assert callable(getattr(importlib.import_module(f"vmbench.cli.{c.module}"), c.function)), c
