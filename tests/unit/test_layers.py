"""vmbench's layering holds (the ``.importlinter`` contracts, in the order docs/layout.md
gives): no module imports a layer above its own, and no package has a circle of imports among
its modules.  Part of ``make test``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_layers_and_no_circles() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    if importlib.util.find_spec("importlinter") is None or not lint.exists():
        pytest.fail("import-linter is missing: pip install -e '.[test]' (make test installs it)")
    got = subprocess.run([str(lint), "--config", str(ROOT / ".importlinter"), "--no-cache"], cwd=ROOT,
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, f"import-linter found a broken contract:\n{got.stdout}{got.stderr}"
    assert "2 kept, 0 broken" in got.stdout, got.stdout
