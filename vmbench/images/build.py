"""Building a guest template image from a recipe.

The argv builders and parsers are pure, in :mod:`.commands` (unit-tested); :func:`build_image` runs them
through :func:`vmbench.command.run` in a work directory next to the final one, renames
the result into place, and on any failure or Ctrl-C unmounts what it mounted and
removes the work directory.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import stat
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from ..command import run
from ..errors import CommandError, PreflightError, VmbenchError
from ..paths import StatePaths
from ..progress import NullProgress, Progress
from .commands import (
    debootstrap_argv, mmdebstrap_argv, mount_proc_argv, mount_chroot_fs_argvs, bind_mount_argv,
    apt_get_argv, apt_install_argv, dkms_autoinstall_argv, depmod_argv, enable_units_argv,
    umount_argv, mask_units_argv, set_default_target_argv, lsinitramfs_argv, dpkg_query_argv,
    update_initramfs_argv, minimal_initrd_files, INITRAMFS_MODULES,
    mkfs_argv, qemu_img_convert_argv, render_fstab, render_hosts,
    mounts_under, missing_initrd_modules, missing_kernel_modules, parse_dpkg_query,
    kernel_version,
)
from .recipe import Recipe, compute_hash, effective_mirror, overlay_files

BUILDER_VERSION = "1"

ROOT_IMAGE = "root.qcow2"
KERNEL = "vmlinuz"
INITRD = "initrd.img"
MANIFEST = "manifest.json"

# The tool that installs the base system: mmdebstrap (apt downloads in parallel: about 3x
# faster than debootstrap on a fresh machine), else debootstrap (same package set).
BOOTSTRAPPERS = ("mmdebstrap", "debootstrap")
# tool -> Debian package that ships it
REQUIRED_TOOLS = {
    "mkfs.ext4": "e2fsprogs",
    "qemu-img": "qemu-utils",
    "chroot": "coreutils",
    "mount": "mount",
    "umount": "mount",
    "dpkg-query": "dpkg",
}
GUEST_AGENT_PORT = "org.qemu.guest_agent.0"
DEBOOTSTRAP_TIMEOUT = 3600.0
APT_TIMEOUT = 3600.0  # chroot_packages: apt-get install, DKMS builds included
APT_ENV = {"DEBIAN_FRONTEND": "noninteractive", "LC_ALL": "C", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
POLICY_RC_D = "usr/sbin/policy-rc.d"  # exit 101: no service starts in the chroot
STEP_TIMEOUT = 900.0
TICK_SECONDS = 15.0


# --- naming -------------------------------------------------------------------------


def image_hash(recipe: Recipe) -> str:
    """The hash an image built from ``recipe`` by this builder is stored under."""
    return compute_hash(recipe, BUILDER_VERSION)


def image_dirname(name: str, digest: str) -> str:
    return f"{name}-{digest[:12]}"


def debootstrap_cache(state: StatePaths) -> Path:
    return state.cache / "debootstrap"


def apt_archives(state: StatePaths) -> Path:
    """Downloaded .debs kept between builds (mmdebstrap's and the chroot's apt-get)."""
    return state.cache / "apt-archives"


def choose_bootstrapper(which: Callable[[str], str | None]) -> str | None:
    """The first of :data:`BOOTSTRAPPERS` installed here, or None."""
    return next((tool for tool in BOOTSTRAPPERS if which(tool)), None)


# --- pure argv builders -------------------------------------------------------------


def build_manifest(
    recipe: Recipe, digest: str, kernel: str, packages: dict[str, str], *, mirror: str,
    built_at: datetime, build_seconds: float, image_bytes: int,
) -> dict[str, object]:
    return {
        "name": recipe.name,
        "hash": digest,
        "builder_version": BUILDER_VERSION,
        "built_at": built_at.astimezone(timezone.utc).isoformat(timespec="seconds"),
        "build_seconds": round(build_seconds, 1),
        "suite": recipe.suite,
        "arch": recipe.arch,
        "mirror": mirror,
        "kernel_version": kernel,
        "cmdline": recipe.cmdline,
        "root_label": recipe.root_label,
        "hostname": recipe.hostname,
        "root": ROOT_IMAGE,
        "kernel": KERNEL,
        "initrd": INITRD,
        "root_virtual_bytes": recipe.size_bytes,
        "root_file_bytes": image_bytes,
        "initrd_modules": list(recipe.initrd_modules),
        "initrd_minimal": recipe.initrd_minimal,
        "masked_units": list(recipe.mask_units),
        "enabled_units": list(recipe.enable_units),
        "chroot_packages": list(recipe.chroot_packages),
        "kernel_modules": list(recipe.kernel_modules),
        "packages": packages,
    }


# --- preflight ----------------------------------------------------------------------


def check_build_prerequisites() -> None:
    """Root and the host tools a build needs, or a PreflightError saying what to do."""
    if os.geteuid() != 0:
        raise PreflightError(
            "building a guest image needs root (mmdebstrap, chroot and mount)",
            hint="run it as root, e.g. sudo .venv/bin/vmbench images build",
        )
    missing = [tool for tool in REQUIRED_TOOLS if shutil.which(tool) is None]
    pkgs = sorted({REQUIRED_TOOLS[t] for t in missing})
    if choose_bootstrapper(shutil.which) is None:
        missing.insert(0, " or ".join(BOOTSTRAPPERS))
        pkgs.insert(0, BOOTSTRAPPERS[0])
    if missing:
        hint = f"apt-get install {' '.join(pkgs)}  (or run: make bootstrap)"
        if BOOTSTRAPPERS[0] in pkgs:
            hint += f"; apt-get install {BOOTSTRAPPERS[1]} also works, more slowly"
        raise PreflightError(f"missing tool(s) to build guest images: {', '.join(missing)}", hint=hint)


# --- execution ----------------------------------------------------------------------


def build_image(
    recipe: Recipe, state: StatePaths, progress: Progress | None = None
) -> Path:
    """Build ``recipe`` into ``state.images/NAME-HASH12`` and return that directory."""
    progress = progress or NullProgress()
    check_build_prerequisites()
    digest = image_hash(recipe)
    _ensure_dir(state.root)  # libvirt-qemu must traverse it to reach the image
    images = _ensure_dir(state.images)
    final = images / image_dirname(recipe.name, digest)
    with _build_lock(images, recipe.name, progress):
        _remove_stale_work_dirs(images, recipe.name, progress)
        work = Path(tempfile.mkdtemp(prefix=f".build+{recipe.name}+", dir=images))
        try:
            out = _build_in(recipe, digest, work, state, progress)
            _install(out, final, images, recipe.name)
        finally:
            _remove_work_dir(work, progress)
    progress.step(f"image ready: {final}")
    return final


def _build_in(
    recipe: Recipe, digest: str, work: Path, state: StatePaths, progress: Progress
) -> Path:
    started = time.monotonic()
    rootdir, out = work / "rootfs", work / "out"
    out.mkdir()
    mirror = effective_mirror(recipe)
    with _phase(progress, "base system"):
        _bootstrap(choose_bootstrapper(shutil.which) or "debootstrap", recipe, rootdir, mirror, state, progress)
    if recipe.chroot_packages:
        with _phase(progress, "chroot packages"):
            _chroot_install(recipe, rootdir, state, progress)
    kernel = kernel_version(rootdir / "boot")
    progress.step(f"configuring the guest (kernel {kernel})")
    with _phase(progress, "configuration"):
        _configure(recipe, rootdir)
        _chroot_steps(recipe, rootdir, kernel, progress)
        packages = _package_versions(rootdir, recipe.manifest_packages)
        _cleanup_root(rootdir)
    with _phase(progress, "root disk"):
        _make_disk(recipe, rootdir, work / "root.raw", out / ROOT_IMAGE, progress)
    shutil.copyfile(rootdir / "boot" / f"vmlinuz-{kernel}", out / KERNEL)
    shutil.copyfile(rootdir / "boot" / f"initrd.img-{kernel}", out / INITRD)
    manifest = build_manifest(
        recipe, digest, kernel, packages, mirror=mirror, built_at=datetime.now(timezone.utc),
        build_seconds=time.monotonic() - started,
        image_bytes=(out / ROOT_IMAGE).stat().st_size,
    )
    (out / MANIFEST).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    _make_world_readable(out)
    return out


def _kept_debootstrap_log(exc: CommandError, rootdir: Path, state: StatePaths) -> str | None:
    log = rootdir / "debootstrap" / "debootstrap.log"
    if not log.is_file():
        return None
    kept = state.cache / "debootstrap-failed.log"
    shutil.copyfile(log, kept)
    return f"debootstrap's own log was kept in {kept}"


def _kept_mmdebstrap_messages(exc: CommandError, rootdir: Path, state: StatePaths) -> str | None:
    kept = state.cache / "mmdebstrap-failed.log"
    kept.write_text(exc.stderr)
    return f"the end of mmdebstrap's messages was kept in {kept}"


def _mmdebstrap_cache(state: StatePaths) -> Path:
    """apt's archives, which mmdebstrap uses as they are (with their partial/ directory)."""
    cache = _ensure_dir(apt_archives(state))
    (cache / "partial").mkdir(exist_ok=True)
    return cache


@dataclass(frozen=True)
class Bootstrapper:
    """What differs between debootstrap and mmdebstrap: the .deb cache each keeps, its argv,
    and what of a failed run is kept for the user (its hint's first words; None: nothing)."""

    cache: Callable[[StatePaths], Path]
    argv: Callable[[Recipe, Path, Path, str], list[str]]
    keep: Callable[[CommandError, Path, StatePaths], str | None]


#: each of :data:`BOOTSTRAPPERS` by name
BOOTSTRAPPER_OF = {
    "mmdebstrap": Bootstrapper(_mmdebstrap_cache, mmdebstrap_argv, _kept_mmdebstrap_messages),
    "debootstrap": Bootstrapper(lambda state: _ensure_dir(debootstrap_cache(state)), debootstrap_argv, _kept_debootstrap_log),
}


def _bootstrap(name: str, recipe: Recipe, rootdir: Path, mirror: str, state: StatePaths, progress: Progress) -> None:
    """The base system by bootstrapper ``name`` (:data:`BOOTSTRAPPER_OF`), its .debs cached."""
    tool = BOOTSTRAPPER_OF[name]
    cache = tool.cache(state)
    cached = sum(1 for _ in cache.glob("*.deb"))
    progress.step(
        f"{name} {recipe.suite} ({recipe.variant}, {len(recipe.packages)} packages) "
        f"from {mirror}; {cached} .debs in its cache"
    )
    try:
        with _ticker(progress, name):
            run(tool.argv(recipe, rootdir, cache, mirror), timeout=DEBOOTSTRAP_TIMEOUT)
    except CommandError as exc:
        kept = tool.keep(exc, rootdir, state)
        if kept is not None:
            exc.hint = f"{kept}; check the mirror ({mirror})"
        raise
    finally:
        _unmount_all_under(rootdir)


def _chroot_install(recipe: Recipe, rootdir: Path, state: StatePaths, progress: Progress) -> None:
    """apt-get install the recipe's chroot_packages (with /proc, /sys and /dev mounted and
    service starts refused), then build any DKMS module for the guest's kernel."""
    kernel = kernel_version(rootdir / "boot")
    archives = _ensure_dir(apt_archives(state))
    policy = rootdir / POLICY_RC_D
    progress.step(f"installing {len(recipe.chroot_packages)} package(s) in the chroot: {', '.join(recipe.chroot_packages)}")
    try:
        for argv in mount_chroot_fs_argvs(rootdir):
            run(argv, timeout=60)
        run(bind_mount_argv(archives, rootdir / "var/cache/apt/archives"), timeout=60)
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        with _ticker(progress, "apt-get in the chroot"):
            run(apt_get_argv(rootdir, "update"), env=APT_ENV, timeout=STEP_TIMEOUT)
            run(apt_install_argv(rootdir, recipe.chroot_packages), env=APT_ENV, timeout=APT_TIMEOUT)
            if (rootdir / "usr/sbin/dkms").exists():
                progress.status(f"building DKMS modules for kernel {kernel}")
                run(dkms_autoinstall_argv(rootdir, kernel), env=APT_ENV, timeout=APT_TIMEOUT)
    finally:
        policy.unlink(missing_ok=True)
        _unmount_all_under(rootdir)


def _configure(recipe: Recipe, rootdir: Path) -> None:
    """Files written straight into the root: identity, fstab, overlay."""
    etc = rootdir / "etc"
    (etc / "hostname").write_text(recipe.hostname + "\n")
    (etc / "hosts").write_text(render_hosts(recipe.hostname))
    (etc / "fstab").write_text(render_fstab(recipe.root_label))
    (etc / "machine-id").write_text("")  # each guest makes its own at first boot
    (rootdir / "var/lib/dbus/machine-id").unlink(missing_ok=True)
    (etc / "resolv.conf").unlink(missing_ok=True)  # the bootstrapper copied the host's
    _copy_overlay(recipe, rootdir)


def _copy_overlay(recipe: Recipe, rootdir: Path) -> None:
    if recipe.overlay is None:
        return
    for src in overlay_files(recipe.overlay):
        dest = rootdir / src.relative_to(recipe.overlay)
        _mkdirs_0755(dest.parent, rootdir)
        if dest.is_symlink() or dest.exists():
            dest.unlink()
        if src.is_symlink():
            dest.symlink_to(os.readlink(src))
        else:
            shutil.copyfile(src, dest)
            dest.chmod(0o755 if src.stat().st_mode & 0o111 else 0o644)


def _mkdirs_0755(path: Path, rootdir: Path) -> None:
    missing = []
    while not path.exists() and path != rootdir:
        missing.append(path)
        path = path.parent
    for p in reversed(missing):
        p.mkdir()
        p.chmod(0o755)


def _chroot_steps(recipe: Recipe, rootdir: Path, kernel: str, progress: Progress) -> None:
    """Unit masks, default target and the initrd check, with /proc mounted."""
    run(mount_proc_argv(rootdir), timeout=60)
    try:
        if recipe.mask_units:
            run(mask_units_argv(rootdir, recipe.mask_units), timeout=STEP_TIMEOUT)
        if recipe.enable_units:
            run(enable_units_argv(rootdir, recipe.enable_units), timeout=STEP_TIMEOUT)
        run(set_default_target_argv(rootdir), timeout=STEP_TIMEOUT)
        if recipe.initrd_minimal:
            progress.status("making the minimal initrd")
            modules_file = rootdir / INITRAMFS_MODULES
            current = modules_file.read_text() if modules_file.is_file() else ""
            for rel, text in minimal_initrd_files(recipe.initrd_modules, current).items():
                (rootdir / rel).write_text(text)
            run(update_initramfs_argv(rootdir, kernel), timeout=STEP_TIMEOUT)
        if recipe.kernel_modules:
            _check_kernel_modules(recipe, rootdir, kernel)
        _check_guest_agent_activation(recipe, rootdir)
        if recipe.initrd_modules:
            progress.status("checking the initrd's modules")
            listing = run(lsinitramfs_argv(rootdir, kernel), timeout=STEP_TIMEOUT).stdout
            builtin_file = rootdir / "usr/lib/modules" / kernel / "modules.builtin"
            builtin = builtin_file.read_text() if builtin_file.is_file() else ""
            missing = missing_initrd_modules(listing, builtin, recipe.initrd_modules)
            if missing:
                raise VmbenchError(
                    f"the initrd of kernel {kernel} lacks module(s): {', '.join(missing)}",
                    hint=("list it in the recipe's initrd_modules" if recipe.initrd_minimal
                          else "keep MODULES=most in /etc/initramfs-tools/initramfs.conf"),
                )
    finally:
        _unmount_all_under(rootdir)


def _check_kernel_modules(recipe: Recipe, rootdir: Path, kernel: str) -> None:
    run(depmod_argv(rootdir, kernel), timeout=STEP_TIMEOUT)
    moddir = rootdir / "usr/lib/modules" / kernel
    dep = (moddir / "modules.dep").read_text() if (moddir / "modules.dep").is_file() else ""
    builtin = (moddir / "modules.builtin").read_text() if (moddir / "modules.builtin").is_file() else ""
    missing = missing_kernel_modules(dep, builtin, recipe.kernel_modules)
    if missing:
        raise VmbenchError(
            f"kernel {kernel} of the guest has no module(s): {', '.join(missing)}",
            hint="a DKMS package must build them for the guest's kernel (see /var/lib/dkms/*/*/build/make.log)",
        )


def _check_guest_agent_activation(recipe: Recipe, rootdir: Path) -> None:
    """qemu-ga starts from udev when its virtio port appears; check nothing breaks that."""
    if "qemu-guest-agent.service" in recipe.mask_units:
        raise VmbenchError("the recipe masks qemu-guest-agent.service; vmbench needs it")
    rules = [*rootdir.glob("usr/lib/udev/rules.d/*.rules"), *rootdir.glob("etc/udev/rules.d/*.rules")]
    if not any(GUEST_AGENT_PORT in r.read_text(errors="replace") for r in rules if r.is_file()):
        raise VmbenchError(
            f"no udev rule in the guest starts the agent on {GUEST_AGENT_PORT}",
            hint="install qemu-guest-agent (Debian's package ships the rule)",
        )


def _package_versions(rootdir: Path, packages: Sequence[str]) -> dict[str, str]:
    if not packages:
        return {}
    done = run(dpkg_query_argv(rootdir, packages), timeout=60, check=False)
    return parse_dpkg_query(done.stdout)


def _cleanup_root(rootdir: Path) -> None:
    """Drop what only made the build work (downloaded .debs, apt's lists) and what each VM
    must make for itself (SSH host keys, if openssh-server was installed)."""
    for pattern in ("var/cache/apt/archives/*.deb", "var/cache/apt/*.bin", "var/lib/apt/lists/*_*", "etc/ssh/ssh_host_*"):
        for p in rootdir.glob(pattern):
            p.unlink()


def _make_disk(recipe: Recipe, rootdir: Path, raw: Path, qcow2: Path, progress: Progress) -> None:
    if _mounts_under(rootdir):
        raise VmbenchError(f"refusing to make a disk of {rootdir}: something is still mounted in it")
    progress.step(f"making the {recipe.size} ext4 root disk (label {recipe.root_label})")
    with open(raw, "wb") as f:
        f.truncate(recipe.size_bytes)
    with _ticker(progress, "mkfs.ext4"):
        run(mkfs_argv(recipe, rootdir, raw), timeout=STEP_TIMEOUT)
    progress.status("converting to qcow2")
    run(qemu_img_convert_argv(raw, qcow2), timeout=STEP_TIMEOUT)
    raw.unlink()


def _install(out: Path, final: Path, images: Path, name: str) -> None:
    """Rename the finished image into place (replacing an older build of the same hash)."""
    old = None
    if final.exists():
        old = Path(tempfile.mkdtemp(prefix=f".old+{name}+", dir=images))
        final.rename(old / "image")
    out.rename(final)
    if old is not None:
        shutil.rmtree(old)


def _make_world_readable(directory: Path) -> None:
    """libvirt's qemu runs as libvirt-qemu: dirs 0755, files 0644."""
    directory.chmod(0o755)
    for p in directory.iterdir():
        p.chmod(0o755 if p.is_dir() else 0o644)


def _ensure_dir(path: Path) -> Path:
    """Create ``path`` (and parents) readable and traversable by everyone."""
    path.mkdir(parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o755 != 0o755:
        path.chmod(mode | 0o755)
    return path


LOCK_WAIT_SECONDS = 1800.0


@contextlib.contextmanager
def _build_lock(images: Path, name: str, progress: Progress) -> Iterator[None]:
    """One build per recipe at a time (another process waits for it)."""
    with open(images / f".{name}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress.step(f"another build of {name} is running; waiting for it (at most {LOCK_WAIT_SECONDS // 60:.0f} minutes)")
            deadline = time.monotonic() + LOCK_WAIT_SECONDS
            while True:
                time.sleep(2)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise PreflightError(
                            f"another build of {name} has held {lock.name} for {LOCK_WAIT_SECONDS // 60:.0f} minutes",
                            "wait for it, or stop it and run `vmbench images build` again",
                        ) from None
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextlib.contextmanager
def _phase(progress: Progress, label: str) -> Iterator[None]:
    """Say how long a phase of the build took (the figures a slow first run is judged by)."""
    started = time.monotonic()
    yield
    progress.step(f"{label}: {time.monotonic() - started:.1f}s")


@contextlib.contextmanager
def _ticker(progress: Progress, label: str, every: float = TICK_SECONDS) -> Iterator[None]:
    """Report ``label: Ns elapsed`` every ``every`` seconds while the block runs."""
    stop = threading.Event()
    started = time.monotonic()

    def tick() -> None:
        while not stop.wait(every):
            progress.status(f"{label}: {time.monotonic() - started:.0f}s elapsed")

    thread = threading.Thread(target=tick, name=f"vmbench-{label}-ticker", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def _mounts_under(path: Path) -> list[str]:
    return mounts_under(path.resolve(), Path("/proc/self/mountinfo").read_text())


def _unmount_all_under(path: Path) -> None:
    """Unmount everything below ``path`` (deepest first); lazily if busy."""
    for point in _mounts_under(path):
        if run(umount_argv(point), timeout=60, check=False).returncode != 0:
            run(umount_argv(point, lazy=True), timeout=60, check=False)
    left = _mounts_under(path)
    if left:
        raise VmbenchError(
            f"could not unmount {', '.join(left)}",
            hint="unmount them by hand (umount -l) before removing the build directory",
        )


def leftover_pids(work: Path, procs: Iterable[tuple[int, str, str]], self_pid: int) -> list[int]:
    """Processes still working in ``work``: chrooted into it, or naming it in argv.

    ``procs`` holds (pid, root, cmdline) triples as read from /proc.
    """
    base = str(work).rstrip("/")
    return [
        pid
        for pid, root, cmdline in procs
        if pid != self_pid and (root == base or root.startswith(base + "/") or base in cmdline)
    ]


def _processes() -> Iterator[tuple[int, str, str]]:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                root = os.readlink(entry / "root")
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            yield int(entry.name), root, cmdline


def _kill_leftovers(work: Path) -> None:
    """SIGKILL what an interrupted build left running (the bootstrapper's children, dpkg)."""
    for _ in range(5):
        pids = leftover_pids(work.resolve(), _processes(), os.getpid())
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)


def _remove_work_dir(work: Path, progress: Progress) -> None:
    """Stop leftovers, unmount and delete a build directory (never crossing a mount)."""
    try:
        _kill_leftovers(work)
        _unmount_all_under(work)
        shutil.rmtree(work)
    except (OSError, VmbenchError) as exc:
        progress.warn(f"could not remove build directory {work}: {exc}")


def _remove_stale_work_dirs(images: Path, name: str, progress: Progress) -> None:
    """Leftovers of a build that was killed hard (we hold the recipe's lock)."""
    for stale in [*images.glob(f".build+{name}+*"), *images.glob(f".old+{name}+*")]:
        if stale.is_dir():
            progress.status(f"removing the leftover {stale}")
            _remove_work_dir(stale, progress)
