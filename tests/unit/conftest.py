"""What the runner tests share: a fake built image and an empty results database, made once
and copied into each test's own state directory (fast)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.fakes import install_fake_image
from vmbench.paths import StatePaths
from vmbench.results.db import ResultsDB


@pytest.fixture(scope="session")
def template(tmp_path_factory) -> Path:
    """A built (fake) image and an empty results database."""
    root = tmp_path_factory.mktemp("template")
    install_fake_image(StatePaths(root / "state"))
    ResultsDB(root / "results.db").close()
    return root


def fresh_state(tmp_path: Path, monkeypatch, template: Path) -> tuple[StatePaths, Path]:
    """A copy of the template's state (made the state vmbench uses) and results database in
    ``tmp_path``: (the state, the database's path)."""
    state = StatePaths(tmp_path / "state")
    shutil.copytree(template / "state", state.root)
    monkeypatch.setenv("VMBENCH_STATE_DIR", str(state.root))
    shutil.copy(template / "results.db", tmp_path / "results.db")
    return state, tmp_path / "results.db"
