"""vmbench as a wheel, on its own (issue 39 item 4): built from the source tree, installed into a
fresh venv outside the clone, run from a directory that is not a clone, as on a management box
after ``pipx install vmbench``.

The wheel holds the ``vmbench`` package only (no other top-level package), with the guest image
recipes as package data; the installed vmbench plans a scenario, lists the images (their recipes
found in the package: the image this machine built is current), shows ``images build --help``,
keeps results in the user's data directory (``$XDG_DATA_HOME/vmbench``, else
``~/.local/share/vmbench``), never the installation's, and ``images push`` makes vmbench's template
on a fake Proxmox VE node from the image already built here (nothing is rebuilt).  No guest boots.

The fresh venv gets vmbench from the wheel alone; its dependencies are those of the test's
``.venv`` (a ``.pth`` line: the wheel is the thing under test, not PyPI), and vmbench's import
path is checked to be the fresh venv's."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

from tests.fakepve import FakePve, NullBackend
from tests.integration.conftest import flat
from tests.sshd import TestSshd
from vmbench.images import current_image

ROOT = Path(__file__).resolve().parents[2]
SECRET = "7c1d2e3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5"
TOKEN_ID = "vmbench@pve!bench"
PUSH = """name: wheel-push
hypervisor:
  driver: proxmox
  host: 127.0.0.1
  port: {port}
  node: {node}
  template: vmbench-debian12
  storage: local
  token: {{id: "{token_id}", secret_env: VMBENCH_WHEEL_PVE_TOKEN}}
  tls: {{ca_file: {ca}}}
  ssh: {{port: {ssh_port}, user: root, key_file: {key}, known_hosts: {known_hosts}}}
  accel: tcg
jobs:
  - {{name: w, rw: randwrite, bs: 4k}}
"""


def build_wheel(tmp_path: Path) -> Path:
    """``pip wheel`` of a copy of the source tree (what a release is made from; the clone gets no
    build/ or egg-info)."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    shutil.copytree(ROOT / "vmbench", src / "vmbench", ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "dist"
    got = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(src)],
                         capture_output=True, text=True, timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    (wheel,) = dist.glob("vmbench-*.whl")
    return wheel


def fresh_venv(tmp_path: Path, wheel: Path) -> Path:
    """A venv with vmbench installed from ``wheel`` by pip (its entry point too), and the
    dependencies of the running .venv on its path after its own site-packages."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    got = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--no-deps", "--no-index", str(wheel)],
                         capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr[-3000:]
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True).stdout.strip())
    (site / "zz-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # after the venv's own: vmbench is the wheel's
    return venv


def test_the_wheel_runs_on_its_own(tmp_path):
    image = current_image("debian12")
    assert image is not None, "the debian12 image is not built: run `make test` (or `vmbench images build`)"
    started = time.monotonic()
    wheel = build_wheel(tmp_path)
    built = time.monotonic() - started
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert {n.split("/", 1)[0] for n in names} == {"vmbench", wheel.name.split("-py3")[0] + ".dist-info"}, \
        sorted({n.split("/", 1)[0] for n in names})
    assert "vmbench/images/recipes/debian12/recipe.yaml" in names
    assert "vmbench/images/recipes/debian12/files/etc/systemd/journald.conf.d/vmbench.conf" in names
    assert "vmbench/report/templates/page.html.j2" in names

    venv = fresh_venv(tmp_path, wheel)
    box = tmp_path / "box"  # a management box's working directory: no clone anywhere above it
    box.mkdir()
    home = tmp_path / "home"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "XDG_DATA_HOME", "VMBENCH_DB", "VMBENCH_RECIPES_DIR")}
    env.update(HOME=str(home), VMBENCH_WHEEL_PVE_TOKEN=SECRET)

    def vmbench(*args: str, **extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(venv / "bin" / "vmbench"), *args], cwd=box, env={**env, **extra}, capture_output=True,
                              text=True, timeout=600)

    where = subprocess.run([str(venv / "bin" / "python"), "-c", "import vmbench; print(vmbench.__file__)"], cwd=box, env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(str(venv)), where  # the wheel's vmbench, not the clone's

    shutil.copy(ROOT / "scenarios" / "quick.yaml", box / "quick.yaml")
    plan = vmbench("plan", "quick.yaml")
    assert plan.returncode == 0 and "template: debian12;" in flat(plan.stdout), plan.stdout + plan.stderr

    listed = vmbench("images", "list")
    assert listed.returncode == 0, listed.stderr
    assert any(line.split()[:3] == ["debian12", image.hash[:12], "current"] for line in listed.stdout.splitlines()), listed.stdout
    assert "not built" not in flat(listed.stdout).split("debian12-zfs")[0]
    helped = vmbench("images", "build", "--help")
    assert helped.returncode == 0 and "--force" in helped.stdout, helped.stdout

    # results: the user's data directory, never the installation's
    runs = vmbench("runs")
    assert runs.returncode == 5 and f"no results database at {home}/.local/share/vmbench/vmbench.db" in flat(runs.stderr), runs.stderr
    runs = vmbench("runs", XDG_DATA_HOME=str(tmp_path / "data"))
    assert f"no results database at {tmp_path}/data/vmbench/vmbench.db" in flat(runs.stderr), runs.stderr
    assert not list(venv.rglob("vmbench.db")) and not (Path(where).parent.parent / "results").exists()

    # images push: vmbench's template on a (fake) Proxmox node from the image built here
    node = socket.gethostname().split(".")[0]
    with TestSshd() as sshd, FakePve(version="9.1", backend=NullBackend(), node=node, token=(TOKEN_ID, SECRET), task_polls=1,
                                     local_content="images,rootdir,vztmpl,iso,backup,snippets,import") as fake:
        (box / "pve.yaml").write_text(PUSH.format(port=fake.port, node=node, token_id=TOKEN_ID, ca=fake.ca_file,
                                                  ssh_port=sshd.port, key=sshd.client_key, known_hosts=sshd.known_hosts))
        pushed_at = time.monotonic()
        pushed = vmbench("images", "push", "pve.yaml")
        push_seconds = time.monotonic() - pushed_at
        assert pushed.returncode == 0, pushed.stderr[-3000:]
        assert "template 100 (vmbench-debian12)" in flat(pushed.stdout) and "made" in pushed.stdout, pushed.stdout
        assert "building" not in pushed.stderr.lower(), pushed.stderr  # the image was there: nothing rebuilt
        tmpl = fake.vms[100].config
        assert tmpl["template"] == 1 and tmpl["tags"] == "vmbench;vmbench-template"
        assert f"vmbench-template: debian12 {image.hash} " in tmpl["description"], tmpl["description"]
        assert fake.problems == []
    print(f"wheel built in {built:.0f}s; images push {push_seconds:.0f}s; whole test {time.monotonic() - started:.0f}s")
