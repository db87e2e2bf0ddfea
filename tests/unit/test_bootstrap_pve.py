"""`make demo` / `make test` on a Proxmox VE node (issue 39 item 6): scripts/bootstrap finds the
node (its /etc/pve, pveversion, or the proxmox-ve / pve-manager package in dpkg's status file)
and stops before installing anything, pointing to the Proxmox path.  The detection runs as
bootstrap runs it, in bash, on fake root directories."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STATUS = """Package: libc6
Status: install ok installed
Version: 2.36-9+deb12u10

Package: {name}
Status: {status}
Priority: optional
Version: 8.4.1

"""


def detect(root: Path) -> bool:
    got = subprocess.run(["bash", "-c", '. scripts/proxmox-node.sh; is_proxmox_node "$1"', "bash", str(root)], cwd=ROOT,
                         capture_output=True, text=True, timeout=30)
    assert got.returncode in (0, 1) and not got.stderr, got
    return got.returncode == 0


def status_file(root: Path, name: str, status: str = "install ok installed") -> Path:
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text(STATUS.format(name=name, status=status))
    return root


@pytest.mark.parametrize("make, pve", [
    (lambda r: r, False),
    (lambda r: (r / "etc/pve").mkdir(parents=True), True),  # pmxcfs mounted
    (lambda r: status_file(r, "pve-manager"), True),
    (lambda r: status_file(r, "proxmox-ve"), True),
    (lambda r: status_file(r, "pve-manager", "deinstall ok config-files"), False),  # removed, its config kept
    (lambda r: status_file(r, "pve-manager-extras"), False),
    (lambda r: status_file(r, "qemu-system-x86"), False),
], ids=["debian", "etc-pve", "pve-manager", "proxmox-ve", "pve-manager-removed", "other-name", "qemu"])
def test_a_proxmox_node_is_found(tmp_path, make, pve):
    make(tmp_path)
    assert detect(tmp_path) is pve


def test_pveversion_alone_is_enough(tmp_path):
    tool = tmp_path / "usr/bin/pveversion"
    tool.parent.mkdir(parents=True)
    tool.write_text("#!/bin/sh\necho pve-manager/8.4.1\n")
    tool.chmod(0o755)
    assert detect(tmp_path)


def test_bootstrap_stops_on_a_proxmox_node_before_installing_anything(tmp_path):
    (tmp_path / "etc/pve").mkdir(parents=True)
    got = subprocess.run([str(ROOT / "scripts/bootstrap"), "--demo"], env={"PATH": "/usr/bin:/bin", "VMBENCH_PVE_ROOT": str(tmp_path)},
                         capture_output=True, text=True, timeout=30)
    assert got.returncode == 1 and got.stdout == ""
    assert got.stderr.startswith("bootstrap: error: this machine is a Proxmox VE node"), got.stderr
    assert "pipx install vmbench" in got.stderr and "docs/proxmox.md" in got.stderr and "docs/install.md" in got.stderr
    assert "installing" not in got.stderr and "system packages" not in got.stderr
