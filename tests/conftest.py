from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def data_dir() -> Path:
    """Real outputs captured from fio, lsblk and a QEMU/libvirt run, used as fixtures."""
    return DATA
