"""Unit tests for vmbench.images: recipes, hashes, argv builders, the store."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from vmbench.errors import PreflightError, VmbenchError
from vmbench.images import (
    BUILDER_VERSION,
    current_image,
    ensure_image,
    image_hash,
    list_images,
    load_recipe,
    recipe_names,
)
from vmbench.images import build
from vmbench.images.recipe import RecipeError, compute_hash, effective_mirror, parse_size
from vmbench.paths import StatePaths, recipes_dir

RECIPE = """\
name: {name}
suite: bookworm
packages: [systemd-sysv, fio, linux-image-amd64]
size: 2G
hostname: vmbench-guest
root_label: vmbench-root
cmdline: >-
  root=LABEL=vmbench-root rw
  console=ttyS0 quiet
mask_units: [apt-daily.timer, fstrim.timer]
initrd_modules: [virtio_blk, ext4]
manifest_packages: [fio]
overlay: files
"""


def make_recipe(base: Path, name: str = "tiny", text: str | None = None) -> Path:
    d = base / name
    (d / "files/etc/systemd").mkdir(parents=True)
    (d / "recipe.yaml").write_text(text if text is not None else RECIPE.format(name=name))
    (d / "files/etc/systemd/a.conf").write_text("[Journal]\nStorage=volatile\n")
    return d


@pytest.fixture
def recipes(tmp_path: Path) -> Path:
    base = tmp_path / "recipes"
    make_recipe(base)
    return base


# --- recipe loading and validation --------------------------------------------------


def test_shipped_recipe_is_valid() -> None:
    r = load_recipe("debian12", recipes_dir())
    assert r.suite == "bookworm" and r.variant == "minbase"
    assert "linux-image-amd64" in r.packages and "qemu-guest-agent" in r.packages
    assert r.cmdline.startswith("root=LABEL=vmbench-root ") and "console=ttyS0" in r.cmdline
    assert r.hostname == "vmbench-guest" and r.root_label == "vmbench-root"
    assert "qemu-guest-agent.service" not in r.mask_units
    assert {"virtio_blk", "virtio_scsi", "virtio_pci", "ahci", "sd_mod", "ext4"} <= set(r.initrd_modules)
    assert r.initrd_minimal and "modprobe.blacklist=floppy" in r.cmdline
    assert r.overlay is not None and r.overlay.is_dir()


def test_load_recipe_fields(recipes: Path) -> None:
    r = load_recipe("tiny", recipes)
    assert r.name == "tiny"
    assert r.packages == ("systemd-sysv", "fio", "linux-image-amd64")
    assert r.size_bytes == 2 * 1024**3
    assert r.cmdline == "root=LABEL=vmbench-root rw console=ttyS0 quiet"
    assert r.components == ("main",) and r.arch == "amd64"
    assert r.overlay == (recipes / "tiny/files").resolve()


def test_unknown_recipe_names_the_available_ones(recipes: Path) -> None:
    make_recipe(recipes, "other")
    with pytest.raises(PreflightError) as err:
        load_recipe("nope", recipes)
    assert "nope" in err.value.message
    assert err.value.hint is not None and "other, tiny" in err.value.hint


def test_recipe_names(recipes: Path, tmp_path: Path) -> None:
    (recipes / "not-a-recipe").mkdir()
    make_recipe(recipes, "alpha")
    assert recipe_names(recipes) == ["alpha", "tiny"]
    assert recipe_names(tmp_path / "missing") == []


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda t: t + "colour: blue\n", "unknown key"),
        (lambda t: t.replace("suite: bookworm\n", ""), "missing key 'suite'"),
        (lambda t: t.replace("size: 2G", "size: 2T"), "bad image size"),
        (lambda t: t.replace("size: 2G", "size: '2'"), "bad image size"),
        (lambda t: t.replace("name: tiny", "name: other"), "differs from its directory"),
        (lambda t: t.replace("[systemd-sysv, fio, linux-image-amd64]", "[]"), "'packages' is empty"),
        (lambda t: t.replace("[systemd-sysv,", "[Bad_Pkg,"), "bad package name"),
        (lambda t: t.replace("packages: [", "packages: [3, "), "list of non-empty strings"),
        (lambda t: t.replace("hostname: vmbench-guest", "hostname: [a]"), "'hostname' must be a str"),
        (lambda t: t.replace("root=LABEL=vmbench-root rw", "rw"), "must set root="),
        (lambda t: t.replace("apt-daily.timer", "apt daily"), "bad unit name"),
        (lambda t: t.replace("root_label: vmbench-root", "root_label: a-label-far-too-long"), "root_label"),
        (lambda t: t.replace("overlay: files", "overlay: ../elsewhere"), "'overlay' must be"),
        (lambda t: t + "mirror: ftp://example/debian\n", "'mirror' must be"),
        (lambda t: t + "initrd_minimal: yes please\n", "'initrd_minimal' must be a bool"),
        (lambda t: t.replace("initrd_modules: [virtio_blk, ext4]", "initrd_modules: []") + "initrd_minimal: true\n",
         "'initrd_minimal' needs 'initrd_modules'"),
        (lambda t: t.replace("initrd_modules: [virtio_blk, ext4]", "initrd_modules: [virtio_blk, 'ext4 x']"),
         "bad module name(s) in 'initrd_modules'"),
    ],
)
def test_invalid_recipes_are_refused(tmp_path: Path, change, message: str) -> None:
    base = tmp_path / "recipes"
    make_recipe(base, text=change(RECIPE.format(name="tiny")))
    with pytest.raises(RecipeError) as err:
        load_recipe("tiny", base)
    assert message in err.value.message


def test_non_mapping_recipe(tmp_path: Path) -> None:
    make_recipe(tmp_path, text="- just\n- a list\n")
    with pytest.raises(RecipeError, match="mapping"):
        load_recipe("tiny", tmp_path)


def test_parse_size() -> None:
    assert parse_size("1536M") == 1536 * 1024**2
    assert parse_size("3G") == 3 * 1024**3
    for bad in ("0G", "1.5G", "2g", "", "G"):
        with pytest.raises(RecipeError):
            parse_size(bad)


def test_mirror_can_be_overridden_by_env(recipes: Path) -> None:
    r = load_recipe("tiny", recipes)
    assert effective_mirror(r, {}) == "http://deb.debian.org/debian"
    assert effective_mirror(r, {"VMBENCH_DEBIAN_MIRROR": "http://m/debian"}) == "http://m/debian"


# --- hash ---------------------------------------------------------------------------


def _hash(base: Path, name: str = "tiny") -> str:
    return image_hash(load_recipe(name, base))


def test_hash_is_stable_and_ignores_mtimes_and_other_files(recipes: Path) -> None:
    first = _hash(recipes)
    assert len(first) == 64 and first == _hash(recipes)
    os.utime(recipes / "tiny/files/etc/systemd/a.conf", (1, 1))
    os.utime(recipes / "tiny/recipe.yaml", (1, 1))
    (recipes / "tiny/README").write_text("not part of the overlay")
    make_recipe(recipes, "sibling")
    assert _hash(recipes) == first


def test_hash_does_not_depend_on_location(tmp_path: Path, recipes: Path) -> None:
    shutil.copytree(recipes, tmp_path / "moved")
    assert _hash(tmp_path / "moved") == _hash(recipes)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: (d / "recipe.yaml").write_text((d / "recipe.yaml").read_text() + "# comment\n"),
        lambda d: (d / "files/etc/systemd/a.conf").write_text("[Journal]\nStorage=auto\n"),
        lambda d: (d / "files/etc/new.conf").write_text(""),
        lambda d: (d / "files/etc/systemd/a.conf").rename(d / "files/etc/systemd/b.conf"),
        lambda d: (d / "files/etc/systemd/a.conf").unlink(),
        lambda d: (d / "files/etc/systemd/a.conf").chmod(0o755),
        lambda d: (d / "files/etc/link").symlink_to("systemd/a.conf"),
    ],
)
def test_hash_changes_with_recipe_or_overlay(recipes: Path, edit) -> None:
    before = _hash(recipes)
    edit(recipes / "tiny")
    assert _hash(recipes) != before


def test_hash_covers_builder_version(recipes: Path) -> None:
    r = load_recipe("tiny", recipes)
    assert compute_hash(r, BUILDER_VERSION) == image_hash(r)
    assert compute_hash(r, BUILDER_VERSION + "x") != image_hash(r)


# --- argv builders ------------------------------------------------------------------


def test_debootstrap_argv(recipes: Path) -> None:
    r = load_recipe("tiny", recipes)
    argv = build.debootstrap_argv(r, Path("/w/rootfs"), Path("/s/cache/debootstrap"), "http://m/debian")
    assert argv == [
        "debootstrap",
        "--variant=minbase",
        "--arch=amd64",
        "--components=main",
        "--include=systemd-sysv,fio,linux-image-amd64",
        "--cache-dir=/s/cache/debootstrap",
        "bookworm",
        "/w/rootfs",
        "http://m/debian",
    ]


def test_mkfs_and_convert_argv(recipes: Path) -> None:
    r = load_recipe("tiny", recipes)
    assert build.mkfs_argv(r, Path("/w/rootfs"), Path("/w/root.raw")) == [
        "mkfs.ext4", "-q", "-F", "-L", "vmbench-root", "-d", "/w/rootfs",
        "-E", "lazy_itable_init=0,lazy_journal_init=0", "/w/root.raw", "2097152k",
    ]
    assert build.qemu_img_convert_argv(Path("/w/root.raw"), Path("/w/out/root.qcow2")) == [
        "qemu-img", "convert", "-f", "raw", "-O", "qcow2", "/w/root.raw", "/w/out/root.qcow2",
    ]


def test_chroot_argvs() -> None:
    root = Path("/w/rootfs")
    assert build.mount_proc_argv(root) == ["mount", "-t", "proc", "proc", "/w/rootfs/proc"]
    assert build.umount_argv("/w/rootfs/proc") == ["umount", "/w/rootfs/proc"]
    assert build.umount_argv(root / "dev", lazy=True) == ["umount", "--lazy", "/w/rootfs/dev"]
    assert build.mask_units_argv(root, ["a.timer", "b.service"]) == [
        "chroot", "/w/rootfs", "systemctl", "mask", "a.timer", "b.service",
    ]
    assert build.set_default_target_argv(root) == [
        "chroot", "/w/rootfs", "systemctl", "set-default", "multi-user.target",
    ]
    assert build.lsinitramfs_argv(root, "6.1.0-9-amd64") == [
        "chroot", "/w/rootfs", "lsinitramfs", "/boot/initrd.img-6.1.0-9-amd64",
    ]
    assert build.update_initramfs_argv(root, "6.1.0-9-amd64") == [
        "chroot", "/w/rootfs", "update-initramfs", "-u", "-k", "6.1.0-9-amd64",
    ]
    # Debian's file names sd_mod in a comment: an example, not a module
    assert build.minimal_initrd_files(["virtio_blk", "ext4", "sd_mod"], "# sd_mod\next4") == {
        "etc/initramfs-tools/conf.d/vmbench-minimal.conf": "MODULES=list\n",
        "etc/initramfs-tools/modules": "# sd_mod\next4\nvirtio_blk\nsd_mod\n",
    }
    assert build.dpkg_query_argv(root, ["fio", "lvm2"]) == [
        "dpkg-query", "--admindir=/w/rootfs/var/lib/dpkg", "--show",
        "--showformat=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n", "fio", "lvm2",
    ]


# --- pure helpers -------------------------------------------------------------------


def test_render_fstab_and_hosts() -> None:
    fstab = build.render_fstab("vmbench-root")
    assert "LABEL=vmbench-root  /  ext4  defaults,noatime,errors=remount-ro  0  1\n" in fstab
    assert "127.0.1.1\tvmbench-guest\n" in build.render_hosts("vmbench-guest")


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 22 0:5 / /w/.build+x+1/rootfs/proc rw - proc proc rw
41 22 0:6 / /w/.build+x+1/rootfs/dev rw - devtmpfs udev rw
42 41 0:7 / /w/.build+x+1/rootfs/dev/pts rw - devpts devpts rw
43 22 0:8 / /w/.build+x+10/rootfs/proc rw - proc proc rw
44 22 0:9 / /mnt/with\\040space rw - tmpfs t rw
"""


def test_mounts_under_deepest_first() -> None:
    assert build.mounts_under(Path("/w/.build+x+1"), MOUNTINFO) == [
        "/w/.build+x+1/rootfs/dev/pts",
        "/w/.build+x+1/rootfs/proc",
        "/w/.build+x+1/rootfs/dev",
    ]
    assert build.mounts_under(Path("/mnt/with space"), MOUNTINFO) == ["/mnt/with space"]
    assert build.mounts_under(Path("/elsewhere"), MOUNTINFO) == []


def test_missing_initrd_modules() -> None:
    listing = "\n".join([
        "usr/lib/modules/6.1/kernel/drivers/block/virtio_blk.ko",
        "usr/lib/modules/6.1/kernel/drivers/scsi/sd_mod.ko.xz",
        "usr/lib/modules/6.1/kernel/fs/ext4/ext4.ko.zst",
        "usr/lib/modules/6.1/modules.dep",
    ])
    builtin = "kernel/drivers/virtio/virtio-pci.ko\n"
    required = ["virtio_pci", "virtio_blk", "virtio_scsi", "sd_mod", "ext4", "ahci"]
    assert build.missing_initrd_modules(listing, builtin, required) == ["virtio_scsi", "ahci"]


def test_parse_dpkg_query_keeps_installed_only() -> None:
    out = "fio\t3.33-3\tii \nlvm2\t\tun \nxfsprogs\t6.1.0-1\trc \n"
    assert build.parse_dpkg_query(out) == {"fio": "3.33-3"}


def test_kernel_version(tmp_path: Path) -> None:
    (tmp_path / "vmlinuz-6.1.0-9-amd64").write_text("")
    (tmp_path / "vmlinuz-6.1.0-10-amd64").write_text("")
    (tmp_path / "initrd.img-6.1.0-9-amd64").write_text("")
    assert build.kernel_version(tmp_path) == "6.1.0-9-amd64"
    with pytest.raises(VmbenchError, match="no kernel"):
        build.kernel_version(tmp_path / "empty")


def test_manifest_content(recipes: Path) -> None:
    from datetime import datetime, timezone

    r = load_recipe("tiny", recipes)
    m = build.build_manifest(
        r, "ab" * 32, "6.1.0-9-amd64", {"fio": "3.33-3"}, mirror="http://m",
        built_at=datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc), build_seconds=12.34,
        image_bytes=1000,
    )
    assert m["name"] == "tiny" and m["hash"] == "ab" * 32 and m["suite"] == "bookworm"
    assert m["built_at"] == "2025-01-02T03:04:05+00:00"
    assert m["kernel_version"] == "6.1.0-9-amd64" and m["cmdline"] == r.cmdline
    assert m["root_label"] == "vmbench-root" and m["packages"] == {"fio": "3.33-3"}
    json.dumps(m)


# --- store --------------------------------------------------------------------------


def fake_image(state: StatePaths, recipes: Path, name: str = "tiny", digest: str | None = None,
               built_at: str = "2025-01-01T00:00:00+00:00") -> Path:
    digest = digest or _hash(recipes, name)
    d = state.images / build.image_dirname(name, digest)
    d.mkdir(parents=True)
    for f in ("root.qcow2", "vmlinuz", "initrd.img"):
        (d / f).write_text("")
    manifest = {"name": name, "hash": digest, "cmdline": "root=LABEL=x", "built_at": built_at}
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_current_image_found_and_outdated(tmp_path: Path, recipes: Path) -> None:
    state = StatePaths(tmp_path / "state")
    assert current_image("tiny", state=state, recipes=recipes) is None
    d = fake_image(state, recipes)
    img = current_image("tiny", state=state, recipes=recipes)
    assert img is not None and img.directory == d and img.root == d / "root.qcow2"
    assert img.kernel == d / "vmlinuz" and img.initrd == d / "initrd.img"
    assert img.cmdline == "root=LABEL=x" and img.hash == _hash(recipes)
    (recipes / "tiny/files/etc/systemd/a.conf").write_text("changed")
    assert current_image("tiny", state=state, recipes=recipes) is None


def test_incomplete_image_is_ignored(tmp_path: Path, recipes: Path) -> None:
    state = StatePaths(tmp_path / "state")
    d = fake_image(state, recipes)
    (d / "initrd.img").unlink()
    assert current_image("tiny", state=state, recipes=recipes) is None
    assert list_images(state=state) == []


def test_list_images_skips_work_dirs_newest_first(tmp_path: Path, recipes: Path) -> None:
    state = StatePaths(tmp_path / "state")
    assert list_images(state=state) == []
    fake_image(state, recipes, digest="1" * 64, built_at="2025-01-01T00:00:00+00:00")
    fake_image(state, recipes, digest="2" * 64, built_at="2025-02-01T00:00:00+00:00")
    (state.images / ".build+tiny+abc").mkdir()
    (state.images / "junk").mkdir()
    assert [i.hash[0] for i in list_images(state=state)] == ["2", "1"]


def test_ensure_image_is_a_noop_when_current(tmp_path: Path, recipes: Path, monkeypatch) -> None:
    state = StatePaths(tmp_path / "state")
    d = fake_image(state, recipes)

    def no_build(*a, **k):
        raise AssertionError("must not build")

    monkeypatch.setattr(build, "build_image", no_build)
    assert ensure_image("tiny", state=state, recipes=recipes).directory == d


def test_ensure_image_builds_when_missing_or_forced(tmp_path: Path, recipes: Path, monkeypatch) -> None:
    state = StatePaths(tmp_path / "state")
    calls = []

    def fake_build(recipe, st, progress):
        calls.append(recipe.name)
        d = state.images / build.image_dirname(recipe.name, image_hash(recipe))
        return d if d.exists() else fake_image(st, recipes)

    monkeypatch.setattr(build, "build_image", fake_build)
    assert ensure_image("tiny", state=state, recipes=recipes).name == "tiny"
    ensure_image("tiny", state=state, recipes=recipes)
    ensure_image("tiny", state=state, recipes=recipes, force=True)
    assert calls == ["tiny", "tiny"]


def test_ensure_image_unknown_recipe(tmp_path: Path, recipes: Path) -> None:
    with pytest.raises(PreflightError, match="unknown image recipe"):
        ensure_image("nope", state=StatePaths(tmp_path), recipes=recipes)


def test_build_needs_root(tmp_path: Path, recipes: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(PreflightError, match="needs root") as err:
        build.build_image(load_recipe("tiny", recipes), StatePaths(tmp_path))
    assert err.value.hint


def test_build_names_missing_tools(tmp_path: Path, recipes: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool in ("debootstrap", "mmdebstrap") else "/bin/x")
    with pytest.raises(PreflightError, match="debootstrap") as err:
        build.build_image(load_recipe("tiny", recipes), StatePaths(tmp_path))
    assert err.value.hint is not None and "apt-get install debootstrap" in err.value.hint


def test_leftover_pids_are_the_build_s_own() -> None:
    work = Path("/s/images/.build+x+1")
    procs = [
        (10, "/", "/usr/bin/python3 vmbench images build"),
        (11, "/", "/bin/sh /usr/sbin/debootstrap bookworm /s/images/.build+x+1/rootfs http://m"),
        (12, "/s/images/.build+x+1/rootfs", "dpkg --configure -a"),
        (13, "/s/images/.build+x+10/rootfs", "dpkg --configure -a"),
        (14, "/", "sleep 100"),
    ]
    assert build.leftover_pids(work, procs, self_pid=10) == [11, 12]


# --- mmdebstrap (issue 15: a faster first build) --------------------------------------


def test_mmdebstrap_argv(recipes: Path) -> None:
    from vmbench.images.commands import MERGED_USR_HOOKS

    r = load_recipe("tiny", recipes)
    argv = build.mmdebstrap_argv(r, Path("/w/rootfs"), Path("/s/cache/apt archives"), "http://m/debian")
    assert argv[:7] == [
        "mmdebstrap",
        "--variant=minbase",
        "--architectures=amd64",
        "--components=main",
        "--include=systemd-sysv,fio,linux-image-amd64",
        "--skip=essential/unlink",
        f"--hook-dir={MERGED_USR_HOOKS}",
    ]
    assert argv[-3:] == ["bookworm", "/w/rootfs", "http://m/debian"]
    assert "--dpkgopt=force-unsafe-io" in argv
    hooks = [a for a in argv if a.startswith("--") and "-hook=" in a]
    # the cache is bound over the chroot's apt archive first and released last (path quoted)
    archives = '"$1/var/cache/apt/archives"'
    assert hooks[0] == f"--setup-hook=mkdir -p {archives} && mount --bind '/s/cache/apt archives' {archives}"
    assert hooks[-1] == '--customize-hook=umount "$1/var/cache/apt/archives"'
    # update-initramfs held while packages install, run once per kernel at the end
    hold = next(h for h in hooks if h.startswith("--essential-hook="))
    assert "dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs" in hold
    make = hooks[1:-1][-1]
    assert make.startswith("--customize-hook=") and "--remove /usr/sbin/update-initramfs" in make
    assert '/usr/sbin/update-initramfs -c -k "${k##*/vmlinuz-}"' in make


def test_bootstrapper_prefers_mmdebstrap() -> None:
    assert build.choose_bootstrapper(lambda t: "/usr/bin/" + t) == "mmdebstrap"
    assert build.choose_bootstrapper(lambda t: "/usr/sbin/debootstrap" if t == "debootstrap" else None) == "debootstrap"
    assert build.choose_bootstrapper(lambda t: None) is None


def test_build_with_either_bootstrapper_passes_preflight(monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    for absent in ("debootstrap", "mmdebstrap"):
        monkeypatch.setattr(shutil, "which", lambda tool, absent=absent: None if tool == absent else "/bin/x")
        build.check_build_prerequisites()


def test_missing_bootstrapper_hint_names_mmdebstrap_first(monkeypatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool in ("mmdebstrap", "debootstrap", "qemu-img") else "/bin/x")
    with pytest.raises(PreflightError) as err:
        build.check_build_prerequisites()
    assert err.value.message == "missing tool(s) to build guest images: mmdebstrap or debootstrap, qemu-img"
    assert err.value.hint is not None and err.value.hint.startswith("apt-get install mmdebstrap qemu-utils")
