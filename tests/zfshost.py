"""A real OpenZFS storage host for tests, reached over SSH like a user's hypervisor.

This machine's kernel cannot load modules, so OpenZFS runs in a guest: the
``debian12-zfs`` template (built here when missing) boots under libvirt/TCG as
``vmbtest-zfshost-<8 hex>`` (never ``vmbench-*``: vmbench's cleanup must not touch it),
with a qcow2 overlay of the template as its root disk, a sparse raw disk with serial
``ZFSPOOL`` holding pool ``tank``, and QEMU user-mode networking forwarding
127.0.0.1:<free port> to the guest's sshd (``-netdev user,hostfwd=...`` passed through
``<qemu:commandline>``: libvirt 9.0 forwards ports of ``<interface type='user'>`` only
with passt, which is not installed).

The client key is made here and installed through the guest agent; the guest makes its SSH
host keys at first boot and the ed25519 one is read through the agent into ``known_hosts``,
so SSH runs with strict host key checking.  Leaving the block (exceptions included)
destroys and undefines the domain and removes the temporary directory.
"""

from __future__ import annotations

import os
import secrets
import shlex
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

import libvirt

from vmbench.drivers.libvirt.connection import agent_command, open_connection
from vmbench.errors import VmbenchError
from vmbench.images import current_image, ensure_image
from vmbench.transport.agent import GuestAgentTransport

IMAGE = "debian12-zfs"
NAME_PREFIX = "vmbtest-zfshost-"
POOL_SERIAL = "ZFSPOOL"
BOOT_TIMEOUT = 600.0  # domain start -> guest agent and sshd answer (TCG is slow)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no console log)"


def domain_xml(name: str, image, overlay: Path, pool_disk: Path, console: Path, port: int,
               memory_mib: int, vcpus: int) -> str:
    q = quoteattr
    return f"""<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>{escape(name)}</name>
  <description>OpenZFS storage host for vmbench tests (tests/zfshost.py)</description>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu placement='static'>{vcpus}</vcpu>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>{escape(str(image.kernel))}</kernel>
    <initrd>{escape(str(image.initrd))}</initrd>
    <cmdline>{escape(image.cmdline)}</cmdline>
  </os>
  <features><acpi/><apic/></features>
  <clock offset='utc'/>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='qcow2' cache='writeback' discard='unmap'/>
      <source file={q(str(overlay))}/>
      <target dev='vda' bus='virtio'/>
    </disk>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw' cache='writeback' discard='unmap'/>
      <source file={q(str(pool_disk))}/>
      <target dev='vdb' bus='virtio'/>
      <serial>{POOL_SERIAL}</serial>
    </disk>
    <serial type='file'><source path={q(str(console))}/><target port='0'/></serial>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='none'/>
  </devices>
  <qemu:commandline>
    <qemu:arg value='-netdev'/>
    <qemu:arg value='user,id=zfsnet,hostfwd=tcp:127.0.0.1:{port}-:22'/>
    <qemu:arg value='-device'/>
    <qemu:arg value='virtio-net-pci,netdev=zfsnet,bus=pci.0,addr=0x10'/>
  </qemu:commandline>
</domain>
"""


class ZfsStorageHost:
    """``with ZfsStorageHost() as zfs: zfs.ssh(["zpool", "list"])``."""

    def __init__(self, *, uri: str = "qemu:///system", memory_mib: int = 1536, vcpus: int = 2,
                 pool_disk_gib: int = 6, boot_timeout: float = BOOT_TIMEOUT) -> None:
        self.uri = uri
        self.memory_mib, self.vcpus, self.pool_disk_gib = memory_mib, vcpus, pool_disk_gib
        self.boot_timeout = boot_timeout
        self.name = NAME_PREFIX + secrets.token_hex(4)
        self.host, self.user, self.pool = "127.0.0.1", "root", "tank"
        self.port = 0
        self.dir: Path | None = None
        self.conn: libvirt.virConnect | None = None
        self.dom: libvirt.virDomain | None = None
        self.boot_seconds = 0.0  # domain start -> first successful SSH command
        self.agent: GuestAgentTransport | None = None  # the guest through its agent, once started

    # ---- public API ------------------------------------------------------------------------

    @property
    def key_file(self) -> str:
        return str(self._dir / "id_ed25519")

    @property
    def known_hosts(self) -> str:
        return str(self._dir / "known_hosts")

    def ssh_argv(self, argv: list[str], connect_timeout: int = 10) -> list[str]:
        return [
            "ssh", "-i", self.key_file, "-p", str(self.port),
            "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=yes",
            "-o", f"UserKnownHostsFile={self.known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", f"ConnectTimeout={connect_timeout}", "-o", "LogLevel=ERROR",
            f"{self.user}@{self.host}", "--", shlex.join(argv),
        ]

    def ssh(self, argv: list[str], timeout: float = 300) -> str:
        """Run ``argv`` on the host over SSH (strict host key checking); return its stdout."""
        done = subprocess.run(self.ssh_argv(argv), capture_output=True, text=True, timeout=timeout)
        if done.returncode != 0:
            raise RuntimeError(f"ssh {self.name}: {shlex.join(argv)} failed (exit {done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def scenario_ssh_yaml(self) -> str:
        return (f"ssh: {{host: {self.host}, port: {self.port}, user: {self.user}, "
                f"key_file: {self.key_file}, known_hosts: {self.known_hosts}}}")

    # ---- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> "ZfsStorageHost":
        try:
            self._start()
        except BaseException:
            self._teardown()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._teardown()

    @property
    def _dir(self) -> Path:
        if self.dir is None:
            raise RuntimeError("ZfsStorageHost is not started")
        return self.dir

    def _start(self) -> None:
        image = current_image(IMAGE)
        if image is None:  # as scripts/bootstrap does for debian12: `vmbench images build`
            image = ensure_image(IMAGE)
        self.dir = Path(tempfile.mkdtemp(prefix=self.name + "-"))
        os.chmod(self.dir, 0o711)  # libvirt-qemu reaches the disks, cannot list the key
        overlay, pool_disk, console = self.dir / "root.qcow2", self.dir / "pool.raw", self.dir / "console.log"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(image.root), str(overlay)],
                       check=True, capture_output=True, timeout=60)
        with open(pool_disk, "wb") as f:
            f.truncate(self.pool_disk_gib * 1024**3)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "vmbench-zfshost", "-f", self.key_file],
                       check=True, capture_output=True, timeout=60)
        self.port = _free_port()
        self.conn = open_connection(self.uri)
        xml = domain_xml(self.name, image, overlay, pool_disk, console, self.port, self.memory_mib, self.vcpus)
        self.dom = self.conn.defineXML(xml)
        started = time.monotonic()
        deadline = started + self.boot_timeout
        self.dom.create()
        agent = self.agent = GuestAgentTransport(self.name, lambda cmd, timeout: agent_command(self.dom, cmd, timeout))
        self._wait(deadline, "the guest agent", lambda: agent.channel({"execute": "guest-ping"}, 5) is not None)
        pub = Path(self.key_file + ".pub").read_bytes()
        agent.run(["sh", "-c", "install -d -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 600 /root/.ssh/authorized_keys"],
                  input=pub, timeout=60)
        host_key = self._wait(deadline, "the guest's SSH host key",
                              lambda: agent.run(["cat", "/etc/ssh/ssh_host_ed25519_key.pub"], timeout=30, check=False).stdout.strip())
        kind, blob = host_key.split()[:2]
        Path(self.known_hosts).write_text(f"[{self.host}]:{self.port} {kind} {blob}\n")
        last: list[str] = [""]

        def ssh_works() -> bool:
            done = subprocess.run(self.ssh_argv(["true"], connect_timeout=5), capture_output=True, text=True, timeout=60)
            last[0] = done.stderr.strip()
            return done.returncode == 0

        self._wait(deadline, "sshd (over the forwarded port)", ssh_works, detail=lambda: last[0])
        self.boot_seconds = time.monotonic() - started
        self.ssh(["modprobe", "zfs"])
        dev = f"/dev/disk/by-id/virtio-{POOL_SERIAL}"
        self.ssh(["sh", "-c", f"udevadm settle -t 60; for i in $(seq 60); do [ -e {dev} ] && exit 0; sleep 1; done; exit 1"], timeout=180)
        self.ssh(["zpool", "create", "-f", "-o", "ashift=12", self.pool, dev], timeout=300)

    def _wait(self, deadline: float, what: str, probe, detail=lambda: ""):
        """Call ``probe`` until it returns something true (errors count as not yet)."""
        error = ""
        while True:
            if self.dom is not None and not self.dom.isActive():
                raise RuntimeError(f"{self.name} stopped while waiting for {what}; console:\n{_tail(self._dir / 'console.log')}")
            try:
                result = probe()
                if result:
                    return result
            except (VmbenchError, subprocess.TimeoutExpired, OSError) as exc:
                error = str(exc)
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"{self.name}: no answer from {what} within {self.boot_timeout:.0f}s "
                    f"({detail() or error or 'no error'}); console:\n{_tail(self._dir / 'console.log')}"
                )
            time.sleep(2)

    def _teardown(self) -> None:
        dom, self.dom = self.dom, None
        if dom is not None:
            try:
                if dom.isActive():
                    dom.destroy()
            except libvirt.libvirtError:
                pass
            try:
                dom.undefine()
            except libvirt.libvirtError:
                pass
        if self.conn is not None:
            self.conn.close()
            self.conn = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
