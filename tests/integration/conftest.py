"""Integration tests: real libvirt + QEMU (KVM or TCG), the real guest image, real fio.

They need root, a running libvirtd and the built template image; ``make test`` provides all
three.  When something is missing they fail with a message saying what (they do not skip:
a CI run that silently skipped them would prove nothing).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vmbench.drivers import make_driver
from vmbench.scenario.model import Hypervisor
from vmbench.errors import VmbenchError
from vmbench.images import current_image

ROOT = Path(__file__).resolve().parents[2]
URI = os.environ.get("VMBENCH_TEST_URI", "qemu:///system")


def pytest_collection_modifyitems(items):
    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def machine():
    """Fails (not skips) when the machine is not prepared."""
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (run `make test` as root)")
    driver = make_driver(Hypervisor(uri=URI))
    try:
        driver.describe_host()
    except VmbenchError as exc:
        pytest.fail(f"libvirt is not reachable: {exc.message} ({exc.hint})")
    if current_image("debian12") is None:
        pytest.fail("the debian12 template image is not built; run `make test` (or `vmbench images build`)")
    yield driver
    driver.close()


def run_tag_resources(driver, tag: str) -> list:
    return [l for l in driver.leftovers() if l.run_tag == tag]


def vmbench(*args: str, timeout: float = 1800, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "vmbench", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout, **kw)


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p
