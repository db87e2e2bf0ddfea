#!/usr/bin/env python3
"""Boot to the guest agent: how long a vmbench guest takes from start to its agent's answer,
and where the time goes inside it (``systemd-analyze``, ``blame``, the agent's critical chain).

Boots the built ``debian12`` template under TCG (a qcow2 overlay, direct kernel boot, 1 vCPU, as a test
guest is) N times (default 3) under this machine's libvirt as ``vmbtest-boot-<hex>`` (never a
``vmbench-*`` name: vmbench's cleanup must not see it), prints each boot's time to the agent
and, for the last one, the guest's own account; the domain and its files are removed after
each boot, on errors too.

    .venv/bin/python bench/boot_to_agent.py [--boots 3] [--vcpus 1] [--memory 768]

Needs what ``make demo`` sets up (root, libvirtd, the debian12 image).  Every figure printed
is measured by the boots it makes.
"""

from __future__ import annotations

import argparse
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vmbench.drivers.libvirt.connection import agent_command, open_connection  # noqa: E402
from vmbench.errors import VmbenchError  # noqa: E402
from vmbench.images import current_image  # noqa: E402
from vmbench.transport.agent import GuestAgentTransport  # noqa: E402


def domain_xml(name: str, image, overlay: Path, vcpus: int, memory_mib: int) -> str:
    q = quoteattr
    return f"""<domain type='qemu'>
  <name>{escape(name)}</name>
  <memory unit='MiB'>{memory_mib}</memory>
  <vcpu>{vcpus}</vcpu>
  <os><type arch='x86_64' machine='pc'>hvm</type><kernel>{escape(str(image.kernel))}</kernel>
    <initrd>{escape(str(image.initrd))}</initrd><cmdline>{escape(image.cmdline)}</cmdline></os>
  <features><acpi/><apic/></features>
  <on_poweroff>destroy</on_poweroff><on_reboot>destroy</on_reboot><on_crash>destroy</on_crash>
  <devices>
    <disk type='file' device='disk'><driver name='qemu' type='qcow2' cache='writeback'/>
      <source file={q(str(overlay))}/><target dev='vda' bus='virtio'/></disk>
    <channel type='unix'><target type='virtio' name='org.qemu.guest_agent.0'/></channel>
    <memballoon model='none'/>
  </devices>
</domain>
"""


def boot_once(conn, image, vcpus: int, memory_mib: int, analyze: bool, timeout: float = 600.0) -> tuple[float, str]:
    work = Path(tempfile.mkdtemp(prefix="vmbtest-boot-"))
    work.chmod(0o755)  # QEMU runs as libvirt-qemu
    name = "vmbtest-boot-" + secrets.token_hex(4)
    dom = None
    try:
        overlay = work / "root.qcow2"
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", str(image.root), str(overlay)], check=True)
        dom = conn.defineXML(domain_xml(name, image, overlay, vcpus, memory_mib))
        agent = GuestAgentTransport(name, lambda cmd, t: agent_command(dom, cmd, t))
        started = time.monotonic()
        dom.create()
        while True:
            try:
                agent.channel({"execute": "guest-ping"}, 2)
                break
            except VmbenchError:
                if time.monotonic() - started > timeout:
                    raise SystemExit(f"{name}: no guest agent after {timeout:g}s")
                time.sleep(0.25)
        seconds = time.monotonic() - started
        account = ""
        if analyze:
            account = "\n".join(agent.run(argv, timeout=120, check=False).stdout.strip() for argv in (
                ["systemd-analyze"], ["systemd-analyze", "blame", "--no-pager"],
                ["systemd-analyze", "critical-chain", "--no-pager", "qemu-guest-agent.service"]))
        return seconds, account
    finally:
        if dom is not None:
            for step in (dom.destroy, dom.undefine):
                try:
                    step()
                except Exception:  # noqa: BLE001 - not running, or already gone
                    pass
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--boots", type=int, default=3)
    ap.add_argument("--vcpus", type=int, default=1)
    ap.add_argument("--memory", type=int, default=768, help="MiB")
    args = ap.parse_args()
    image = current_image("debian12")
    if image is None:
        raise SystemExit("the debian12 image is not built: run `make demo` (or `vmbench images build`)")
    conn = open_connection("qemu:///system")
    times = []
    account = ""
    for i in range(args.boots):
        seconds, account = boot_once(conn, image, args.vcpus, args.memory, analyze=i == args.boots - 1)
        times.append(seconds)
        print(f"boot {i + 1}: guest agent answered after {seconds:.1f} s")
    load = Path("/proc/loadavg").read_text().split()[:3]
    print(f"boot to agent, {args.boots} boots, {args.vcpus} vCPU, under TCG (domain type qemu): "
          f"min {min(times):.1f} s, median {statistics.median(times):.1f} s, max {max(times):.1f} s "
          f"(load average {' '.join(load)})")
    print(f"image {image.directory.name}\n\nthe last boot, as the guest saw it:\n{account}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
