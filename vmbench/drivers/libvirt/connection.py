"""Opening libvirt and turning its errors into vmbench errors."""

from __future__ import annotations

import contextlib
import json
import logging
from typing import Any, Iterator

from ...errors import GuestError, HypervisorError, PreflightError

log = logging.getLogger(__name__)

try:  # the `libvirt` extra (libvirt-python): a Proxmox-only install has no libvirt
    import libvirt
    import libvirt_qemu
except ImportError:  # pragma: no cover - exercised only on broken installs
    libvirt = None
    libvirt_qemu = None


def quiet_errors(_ctx: Any, _err: Any) -> None:
    """libvirt prints every error to stderr by default; we report them ourselves."""


def require_binding(uri: str) -> None:
    """A libvirt scenario needs libvirt-python (the ``libvirt`` extra): say so before anything."""
    if libvirt is None:
        raise PreflightError(f"the libvirt Python binding is not installed, and {uri} is a libvirt URI",
                             "install vmbench with its libvirt extra: pip install 'vmbench[libvirt]' (it compiles against "
                             "libvirt-dev; on Debian, python3-libvirt is the same binding), or run `make demo`")


def open_connection(uri: str, *, shown_as: str | None = None, host: str = "localhost") -> "libvirt.virConnect":
    """Open ``uri`` (``shown_as`` is the URI the user wrote, for messages)."""
    require_binding(shown_as or uri)
    libvirt.registerErrorHandler(quiet_errors, None)
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        where = "on that host" if host != "localhost" else "here"
        raise PreflightError(
            f"cannot reach libvirt at {shown_as or uri}: {exc.get_error_message()}",
            f"start the daemons {where} (scripts/ensure-libvirtd, or systemctl start libvirtd) and check the URI",
        ) from None


@contextlib.contextmanager
def hypervisor_errors(what: str) -> Iterator[None]:
    try:
        yield
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"{what}: {exc.get_error_message()}") from None


def agent_command(dom: "libvirt.virDomain", command: dict, timeout: float) -> Any:
    """Send one guest-agent command through libvirt; return the reply's ``return``."""
    try:
        reply = libvirt_qemu.qemuAgentCommand(dom, json.dumps(command), max(1, int(timeout)), 0)
    except libvirt.libvirtError as exc:
        raise GuestError(f"guest agent of {dom.name()}: {command.get('execute')}: {exc.get_error_message()}") from None
    if reply is None:
        raise GuestError(f"guest agent of {dom.name()}: {command.get('execute')}: no reply")
    data = json.loads(reply)
    if "error" in data:
        raise GuestError(f"guest agent of {dom.name()}: {command.get('execute')}: {data['error'].get('desc')}")
    return data.get("return")


def monitor_command(dom: "libvirt.virDomain", command: dict) -> Any:
    """One QMP command to the VM's QEMU (read-only queries only)."""
    try:
        reply = libvirt_qemu.qemuMonitorCommand(dom, json.dumps(command), 0)
    except libvirt.libvirtError as exc:
        raise HypervisorError(f"QEMU monitor of {dom.name()}: {command.get('execute')}: {exc.get_error_message()}") from None
    data = json.loads(reply)
    if "error" in data:
        raise HypervisorError(f"QEMU monitor of {dom.name()}: {command.get('execute')}: {data['error'].get('desc')}")
    return data.get("return")
