"""Integration tests: real libvirt + QEMU (KVM or TCG), the real guest image, real fio.

They need root, a running libvirtd and the built template image; ``make test`` provides all
three.  When something is missing they fail with a message saying what (they do not skip:
a CI run that silently skipped them would prove nothing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from vmbench.drivers import make_driver
from vmbench.scenario.model import Hypervisor
from vmbench.errors import VmbenchError
from vmbench.images import current_image

ROOT = Path(__file__).resolve().parents[2]
URI = os.environ.get("VMBENCH_TEST_URI", "qemu:///system")


#: the longest test modules first, so that two workers (make test: -n 2 --dist loadfile, a
#: module stays on one worker with its module fixtures) finish together
LONGEST_FIRST = ("test_load", "test_zfs_storage", "test_faults", "test_axes", "test_shared_run", "test_remote", "test_stacks",
                 "test_ceph", "test_html_report", "test_proxmox")


def pytest_collection_modifyitems(items):
    """Integration tests: marked, the longest modules first, unit tests last (they fill gaps)."""
    def rank(item) -> int:
        if "tests/integration" not in str(item.fspath):
            return len(LONGEST_FIRST) + 1
        module = Path(str(item.fspath)).stem
        return LONGEST_FIRST.index(module) if module in LONGEST_FIRST else len(LONGEST_FIRST)

    for item in items:
        if "tests/integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        elif item.get_closest_marker("serial"):  # make test runs the serial phase on tests/integration only
            raise pytest.UsageError(f"{item.nodeid}: a test marked serial belongs in tests/integration")
    items.sort(key=rank)  # stable: the order within a module is kept


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


def vmbench(*args: str, timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    """``python -m vmbench ARGS``.  Past ``timeout`` (or when the test itself times out) it
    gets Ctrl-C, as a user would give it, so it removes what it made; then the test fails with
    the end of its log.  Each test's own limit (pytest-timeout, setup.cfg) is longer."""
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", *args], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException as exc:
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        if isinstance(exc, subprocess.TimeoutExpired):
            pytest.fail(f"vmbench {' '.join(args)} ran past {timeout:g}s; after Ctrl-C it ended with {proc.returncode}. "
                        f"Its log ends:\n{err[-4000:]}")
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def wait_for(proc, needle: str, lines: list[str], timeout: float = 900) -> str:
    """Read ``proc``'s stderr line by line (kept in ``lines``) until one holds ``needle``: that line."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if needle in line:
            return line
    raise AssertionError(f"never saw {needle!r}:\n" + "".join(lines))


def flat(text: str) -> str:
    """``text`` with its line breaks and runs of spaces made one space: what vmbench prints is
    wrapped to fit a terminal, a phrase the tests look for may span two lines."""
    return " ".join(text.split())


def write(tmp_path: Path, name: str, text: str) -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- one real run shared by the tests that only read it ---------------------------------------

EXAMPLES = Path("/usr/share/doc/fio/examples")
#: fio's own example job files run in the shared boot (tests/integration/test_fio_examples.py)
FIO_EXAMPLES = ("basic-verify.fio", "tiobench-example.fio", "steadystate.fio")

#: the quick scenario of the end-to-end tests (one VM, host and raw disk)
QUICK = """
name: it-quick
storage:
  scratch_size: 512M
vm:
  memory: 768M
  bus: virtio-blk
  cache: none
  aio: native
jobs:
  - {name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 128M, runtime: 3s, ramp: 1s}
  - {name: 1m-read, rw: read, bs: 1M, iodepth: 4, size: 128M, runtime: 3s, ramp: 1s}
"""
#: QUICK with the telemetry test's write job, a queue-depth sweep and a job that ends when steady (fio's
#: examples are added by the fixture)
SHARED = QUICK.replace("name: it-quick", "name: it-shared") + (
    "  - {name: 1m-write, rw: write, bs: 1M, iodepth: 4, size: 128M, runtime: 3s, ramp: 0s}\n"
    "  - {name: qd, rw: randread, bs: 4k, size: 128M, runtime: 2s, ramp: 0s, sweep: {iodepth: [1, 4, 16]}}\n"
    "  - {name: steady, rw: randread, bs: 4k, size: 128M, runtime: 6s, ramp: 0s, steadystate: iops_slope:50%,"
    " steadystate_duration: 2s}\n")


@dataclass(frozen=True)
class SharedRun:
    """``vmbench run`` of :data:`SHARED` plus fio's examples: one boot, read by several tests."""

    scenario: Path
    db_path: Path
    run: subprocess.CompletedProcess


@pytest.fixture(scope="module")
def shared_run(machine, tmp_path_factory) -> SharedRun:
    """One VM (virtio-blk, cache none, aio native) measured on the host and its raw disk with
    the end-to-end jobs, the telemetry job and three of fio's own example files: what
    test_end_to_end, test_telemetry and test_fio_examples check, from one boot."""
    for name in FIO_EXAMPLES:
        if not (EXAMPLES / name).exists():
            pytest.fail(f"{EXAMPLES / name} is missing: install fio-examples (scripts/bootstrap does)")
    tmp = tmp_path_factory.mktemp("shared-run")
    text = SHARED + "".join(f"  - {{file: {EXAMPLES / n}, size: 64M, runtime: 1s}}\n" for n in FIO_EXAMPLES)
    scenario = write(tmp, "shared.yaml", text)
    db_path = tmp / "r.db"
    run = vmbench("run", str(scenario), "--db", str(db_path))
    return SharedRun(scenario, db_path, run)
