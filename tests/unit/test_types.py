"""vmbench type-checks: mypy with the project's configuration (setup.cfg ``[mypy]``: the
package, and the module that checks the test fakes against the driver, storage and transport
Protocols) reports no error.  Part of ``make test``."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("mypy") is None,
                    reason="mypy is not installed (pip install -e '.[test]' installs it)")
def test_mypy_finds_no_error() -> None:
    got = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "setup.cfg")], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, f"mypy found errors:\n{got.stdout}{got.stderr}"
