"""The commands of an image build and the parsers of what they print: pure functions.

:mod:`.build` runs these argv lists (through :func:`vmbench.command.run`) in its work
directory; the unit tests assert them exactly.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Sequence

from ..errors import VmbenchError
from .recipe import Recipe


def debootstrap_argv(recipe: Recipe, rootdir: Path, cache_dir: Path, mirror: str) -> list[str]:
    """One debootstrap run installing the base system, the packages and the kernel."""
    return [
        "debootstrap",
        f"--variant={recipe.variant}",
        f"--arch={recipe.arch}",
        f"--components={','.join(recipe.components)}",
        f"--include={','.join(recipe.packages)}",
        f"--cache-dir={cache_dir}",
        recipe.suite,
        str(rootdir),
        mirror,
    ]


MERGED_USR_HOOKS = "/usr/share/mmdebstrap/hooks/merged-usr"


# The kernel's postinst makes its initrd, then the packages installed after it (udev, lvm2,
# kmod, ...) trigger initramfs-tools to make it again: two runs of update-initramfs (about
# 25 s each on two cores).  update-initramfs is diverted to /bin/true while packages install
# and run once at the end, as the kernel's hook would (`-c -k VERSION`): the same initrd as
# the trigger's last run, made once.  The diversion is removed: nothing of it is left.
_UPDATE_INITRAMFS = "/usr/sbin/update-initramfs"
_HOLD_INITRAMFS = (
    f'chroot "$1" dpkg-divert --quiet --local --rename --add {_UPDATE_INITRAMFS}'
    f' && ln -s /bin/true "$1{_UPDATE_INITRAMFS}"'
)
_MAKE_INITRAMFS = (
    f'rm "$1{_UPDATE_INITRAMFS}"'
    f' && chroot "$1" dpkg-divert --quiet --local --rename --remove {_UPDATE_INITRAMFS}'
    ' && for k in "$1"/boot/vmlinuz-*; do [ -e "$k" ] || continue;'
    f' chroot "$1" {_UPDATE_INITRAMFS} -c -k "${{k##*/vmlinuz-}}" || exit 1; done'
)


def mmdebstrap_argv(recipe: Recipe, rootdir: Path, cache_dir: Path, mirror: str) -> list[str]:
    """One mmdebstrap run: the package set debootstrap's ``--variant`` and ``--include``
    give (Essential, priority required, apt, the packages and their dependencies, no
    recommends), downloaded in parallel by apt.  ``cache_dir`` is bind-mounted over the
    chroot's apt archive for the run (``essential/unlink`` skipped so the essential .debs
    stay in it), so a rebuild downloads only what changed."""
    archives = '"$1/var/cache/apt/archives"'
    return [
        "mmdebstrap",
        f"--variant={recipe.variant}",
        f"--architectures={recipe.arch}",
        f"--components={','.join(recipe.components)}",
        f"--include={','.join(recipe.packages)}",
        "--skip=essential/unlink",
        # /usr merged with symlinks and usr-is-merged installed, as debootstrap does (not
        # the usrmerge package, which pulls in perl)
        f"--hook-dir={MERGED_USR_HOOKS}",
        # no fsync per file: the tree becomes a disk image, the build is redone if cut short
        "--dpkgopt=force-unsafe-io",
        f"--setup-hook=mkdir -p {archives} && mount --bind {shlex.quote(str(cache_dir))} {archives}",
        f"--essential-hook={_HOLD_INITRAMFS}",
        f"--customize-hook={_MAKE_INITRAMFS}",
        f"--customize-hook=umount {archives}",
        recipe.suite,
        str(rootdir),
        mirror,
    ]


def chroot_argv(rootdir: Path, *command: str) -> list[str]:
    return ["chroot", str(rootdir), *command]


def mount_proc_argv(rootdir: Path) -> list[str]:
    return ["mount", "-t", "proc", "proc", str(rootdir / "proc")]


def mount_chroot_fs_argvs(rootdir: Path) -> list[list[str]]:
    """/proc, /sys and the host's /dev in the chroot (for package scripts, DKMS builds)."""
    return [
        mount_proc_argv(rootdir),
        ["mount", "-t", "sysfs", "sysfs", str(rootdir / "sys")],
        ["mount", "--bind", "/dev", str(rootdir / "dev")],
    ]


def bind_mount_argv(source: Path, target: Path) -> list[str]:
    return ["mount", "--bind", str(source), str(target)]


def apt_get_argv(rootdir: Path, *args: str) -> list[str]:
    return chroot_argv(rootdir, "apt-get", "-q", "-y", "-o", "Dpkg::Options::=--force-confold", *args)


def apt_install_argv(rootdir: Path, packages: Sequence[str]) -> list[str]:
    return apt_get_argv(rootdir, "install", "--no-install-recommends", *packages)


def dkms_autoinstall_argv(rootdir: Path, kernel_version: str) -> list[str]:
    """Build every DKMS module for the guest's kernel (not the build host's `uname -r`)."""
    return chroot_argv(rootdir, "dkms", "autoinstall", "-k", kernel_version)


def depmod_argv(rootdir: Path, kernel_version: str) -> list[str]:
    return chroot_argv(rootdir, "depmod", kernel_version)


def enable_units_argv(rootdir: Path, units: Sequence[str]) -> list[str]:
    return chroot_argv(rootdir, "systemctl", "enable", *units)


def umount_argv(target: Path | str, *, lazy: bool = False) -> list[str]:
    return ["umount", *(["--lazy"] if lazy else []), str(target)]


def mask_units_argv(rootdir: Path, units: Sequence[str]) -> list[str]:
    return chroot_argv(rootdir, "systemctl", "mask", *units)


def set_default_target_argv(rootdir: Path, target: str = "multi-user.target") -> list[str]:
    return chroot_argv(rootdir, "systemctl", "set-default", target)


#: initramfs-tools' configuration of a minimal initrd (recipe ``initrd_minimal``)
MINIMAL_INITRD_CONF = "etc/initramfs-tools/conf.d/vmbench-minimal.conf"
INITRAMFS_MODULES = "etc/initramfs-tools/modules"


def minimal_initrd_files(modules: Sequence[str], current_modules: str) -> dict[str, str]:
    """The files (relative to the root) that make initramfs-tools build an initrd with only
    ``modules`` and their dependencies; ``current_modules``: the modules file as it is."""
    listed = {line.split()[0] for line in current_modules.splitlines() if line.strip() and not line.lstrip().startswith("#")}
    extra = [m for m in modules if m not in listed]
    text = current_modules + ("" if not current_modules or current_modules.endswith("\n") else "\n")
    return {MINIMAL_INITRD_CONF: "MODULES=list\n", INITRAMFS_MODULES: text + "".join(f"{m}\n" for m in extra)}


def update_initramfs_argv(rootdir: Path, kernel_version: str) -> list[str]:
    return chroot_argv(rootdir, "update-initramfs", "-u", "-k", kernel_version)


def lsinitramfs_argv(rootdir: Path, kernel_version: str) -> list[str]:
    return chroot_argv(rootdir, "lsinitramfs", f"/boot/initrd.img-{kernel_version}")


def dpkg_query_argv(rootdir: Path, packages: Sequence[str]) -> list[str]:
    return [
        "dpkg-query",
        f"--admindir={rootdir / 'var/lib/dpkg'}",
        "--show",
        "--showformat=${Package}\\t${Version}\\t${db:Status-Abbrev}\\n",
        *packages,
    ]


def mkfs_argv(recipe: Recipe, rootdir: Path, raw: Path) -> list[str]:
    """ext4 filled from ``rootdir`` (no mount), inode tables zeroed now, not at boot."""
    return [
        "mkfs.ext4",
        "-q",
        "-F",
        "-L",
        recipe.root_label,
        "-d",
        str(rootdir),
        "-E",
        "lazy_itable_init=0,lazy_journal_init=0",
        str(raw),
        f"{recipe.size_bytes // 1024}k",
    ]


def qemu_img_convert_argv(raw: Path, qcow2: Path) -> list[str]:
    return ["qemu-img", "convert", "-f", "raw", "-O", "qcow2", str(raw), str(qcow2)]


# --- pure helpers -------------------------------------------------------------------


def render_fstab(root_label: str) -> str:
    return (
        "# <file system>  <mount point>  <type>  <options>  <dump>  <pass>\n"
        f"LABEL={root_label}  /  ext4  defaults,noatime,errors=remount-ro  0  1\n"
    )


def render_hosts(hostname: str) -> str:
    return (
        f"127.0.0.1\tlocalhost\n127.0.1.1\t{hostname}\n"
        "::1\tlocalhost ip6-localhost ip6-loopback\n"
    )


def parse_mountinfo(text: str) -> list[str]:
    """Mount points listed in a /proc/self/mountinfo text (octal escapes decoded)."""
    points = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) > 4:
            points.append(_unescape_mount(fields[4]))
    return points


def mounts_under(path: Path, mountinfo: str) -> list[str]:
    """Mount points at or below ``path``, deepest first (the order to unmount them)."""
    base = str(path).rstrip("/")
    hits = {p for p in parse_mountinfo(mountinfo) if p == base or p.startswith(base + "/")}
    return sorted(hits, key=lambda p: (p.count("/"), p), reverse=True)


def _unescape_mount(field: str) -> str:
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and code.isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def module_name(path: str) -> str:
    """``.../virtio-blk.ko.xz`` -> ``virtio_blk``."""
    name = path.rsplit("/", 1)[-1]
    for ext in (".xz", ".zst", ".gz"):
        name = name.removesuffix(ext)
    return name.removesuffix(".ko").replace("-", "_")


def missing_initrd_modules(listing: str, builtin: str, required: Sequence[str]) -> list[str]:
    """Required modules neither in the initrd listing nor built into the kernel."""
    present = {module_name(line.strip()) for line in listing.splitlines() if ".ko" in line}
    present |= {module_name(line.strip()) for line in builtin.splitlines() if line.strip()}
    return [m for m in required if m.replace("-", "_") not in present]


def missing_kernel_modules(modules_dep: str, builtin: str, required: Sequence[str]) -> list[str]:
    """Required modules neither in a kernel's modules.dep nor built into it."""
    listing = "\n".join(line.split(":", 1)[0] for line in modules_dep.splitlines())
    return missing_initrd_modules(listing, builtin, required)


def parse_dpkg_query(stdout: str) -> dict[str, str]:
    """``pkg<TAB>version<TAB>status`` lines -> {pkg: version} for installed packages."""
    versions = {}
    for line in stdout.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[2].startswith("ii") and parts[1]:
            versions[parts[0]] = parts[1]
    return versions


def kernel_version(bootdir: Path) -> str:
    """The one kernel version with both a vmlinuz and an initrd in ``bootdir``."""
    versions = sorted(
        p.name.removeprefix("vmlinuz-")
        for p in bootdir.glob("vmlinuz-*")
        if (bootdir / f"initrd.img-{p.name.removeprefix('vmlinuz-')}").is_file()
    )
    if not versions:
        raise VmbenchError(
            f"no kernel with an initrd in {bootdir}",
            hint="the recipe must install a kernel package (linux-image-amd64)",
        )
    return versions[-1]
