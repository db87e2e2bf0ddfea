"""The permission checks qemu-server makes inside its handlers, beyond a method's schema
``permissions`` (qemu-server API2/Qemu.pm ``$check_vm_modify_config_perm``,
``$check_storage_access``, ``$check_storage_access_clone``, ``$check_vm_create_serial_perm``,
update_vm's ``$check_drive_perms``; PVE::QemuServer ``check_bridge_access`` and
pve-guest-common ``check_vnet_access``, ``assert_tag_permissions``), as the request's user
(``State.user``) or a task's (``Task.user``).  root@pam passes them all."""

from __future__ import annotations

from typing import Any

from .model import DRIVE_RE, NEW_DISK_RE, State, die
from .perms import ROOT

CPU = {"cores", "cpu", "runningcpu", "cpulimit", "cpuunits", "numa", "smp", "sockets", "vcpus", "affinity"}
MEMORY = {"memory", "balloon", "shares", "allow-ksm"}
HWTYPE = {"acpi", "hotplug", "kvm", "machine", "runningmachine", "scsihw", "smbios1", "tablet", "vga", "watchdog",
          "audio0", "rng0"}
GENERAL = {"agent", "autostart", "bios", "description", "keyboard", "localtime", "migrate_downtime", "migrate_speed",
           "name", "onboot", "ostype", "protection", "reboot", "startdate", "startup", "tdf", "template"}
POWER = {"freeze"}
DISK = {"boot", "bootdisk", "vmstatestorage"}
CLOUDINIT = {"cicustom", "cipassword", "citype", "ciuser", "ciupgrade", "nameserver", "searchdomain", "sshkeys"}
SKIPPED_PREFIXES = ("unused", "serial", "usb", "hostpci", "virtiofs")


def check_modify_config(s: State, vmid: int, keys: Any) -> None:
    """$check_vm_modify_config_perm: the privilege each option needs on /vms/VMID (drives,
    serial/usb/... ports and tags are checked elsewhere); an option none covers only root
    may set ("only root can set 'args' config")."""
    if s.user == ROOT:
        return
    path = f"/vms/{vmid}"
    for key in keys:
        if DRIVE_RE.match(key) or key in ("cdrom", "tags") or key.rstrip("0123456789") in SKIPPED_PREFIXES \
                and key[len(key.rstrip("0123456789")):]:
            continue
        if key in CPU or (key.startswith("numa") and key[4:].isdigit()):
            s.check_priv(path, "VM.Config.CPU")
        elif key in MEMORY:
            s.check_priv(path, "VM.Config.Memory")
        elif key in HWTYPE:
            s.check_priv(path, "VM.Config.HWType")
        elif key in GENERAL:
            s.check_priv(path, "VM.Config.Options")
            if key == "startup":
                s.check_priv("/", "Sys.Modify")
        elif key in POWER:
            s.check_priv(path, "VM.PowerMgmt")
        elif key in DISK:
            s.check_priv(path, "VM.Config.Disk")
        elif (key.startswith("net") and key[3:].isdigit()) or key == "running-nets-host-mtu":
            s.check_priv(path, "VM.Config.Network")
        elif key in CLOUDINIT or (key.startswith("ipconfig") and key[8:].isdigit()):
            s.check_priv(path, "VM.Config.Cloudinit", "VM.Config.Network", any_of=True)
        elif key == "vmstate":
            s.check_priv(path, "VM.Config.Disk", "VM.PowerMgmt")
        else:
            raise die(f"only root can set '{key}' config")


def check_serial(s: State, vmid: int, params: dict) -> None:
    """$check_vm_create_serial_perm: a socket needs VM.Config.HWType, a real device root."""
    if s.user == ROOT:
        return
    for key, value in params.items():
        if key.startswith("serial") and key[6:].isdigit():
            if value != "socket":
                raise die(f"only root can set '{key}' config for real devices")
            s.check_priv(f"/vms/{vmid}", "VM.Config.HWType")


def check_tags(s: State, vmid: int, user: str) -> None:
    """assert_tag_permissions with the defaults (user-tag-access free, no registered tags),
    inside update_vm's task."""
    if user != ROOT:
        s.check_priv(f"/vms/{vmid}", "VM.Config.Options", user=user)


def check_storage_access(s: State, vmid: int, params: dict) -> None:
    """$check_storage_access: a new disk needs Datastore.AllocateSpace on its storage; an
    existing volume check_volume_access; an ``import-from`` source volume too."""
    if s.user == ROOT:
        return
    for key, value in params.items():
        if not DRIVE_RE.match(key):
            continue
        drive = s.parse_drive(key, str(value))
        file = str(drive.get("file") or "")
        if file in ("", "none", "cdrom", "cloudinit"):
            continue
        if file.startswith("/"):
            raise die("Only root can pass arbitrary filesystem paths.")
        m = NEW_DISK_RE.match(file)
        if m:
            if m.group(2):
                s.check_priv(f"/storage/{m.group(2)}", "Datastore.AllocateSpace")
        else:
            st, vol = s.resolve(file)
            s.check_volume_access(st, vol, vmid)
        source = drive.get("import-from")
        if source and not str(source).startswith("/"):
            st, vol = s.resolve(str(source))
            if vol.vtype == "images" and vol.vmid:
                s.check_priv(f"/vms/{vol.vmid}", "VM.Clone")
            else:
                s.check_volume_access(st, vol, vmid)


def check_drive_perm(s: State, vmid: int, user: str) -> None:
    """update_vm's $check_drive_perms, inside the task (its error is the task's)."""
    if user != ROOT:
        s.check_priv(f"/vms/{vmid}", "VM.Config.Disk", user=user)


def check_clone_storage(s: State, config: dict, storage: str | None) -> None:
    """$check_storage_access_clone: Datastore.AllocateSpace on the storage of each disk of
    the source (or on ``storage``); check_bridge_access for its NICs."""
    if s.user == ROOT:
        return
    for _key, drive in s.drives(config):
        if not s.is_disk(drive):
            continue
        sid = storage or str(drive["file"]).split(":", 1)[0]
        s.check_priv(f"/storage/{sid}", "Datastore.AllocateSpace")
    check_bridges(s, config)


def check_bridges(s: State, config: dict) -> None:
    """check_bridge_access: SDN.Use on /sdn/zones/localnetwork/BRIDGE (or its VLAN) for each NIC."""
    if s.user == ROOT:
        return
    for key, value in config.items():
        if not (key.startswith("net") and key[3:].isdigit()):
            continue
        opts = dict(part.partition("=")[::2] for part in str(value).split(","))
        bridge, tag = opts.get("bridge"), opts.get("tag")
        if not bridge:
            continue
        path = f"/sdn/zones/localnetwork/{bridge}" + (f"/{tag}" if tag else "")
        s.check_priv(path, "SDN.Use")
