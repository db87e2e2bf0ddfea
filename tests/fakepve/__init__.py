"""A fake Proxmox VE node for contract tests of vmbench's Proxmox driver.

``FakePve(version="9.1")`` serves ``https://127.0.0.1:<port>/api2/json`` with its own CA
(``ca_file``) and checks every request against the official API schema of that version
(``schemas/``), the way PVE's JSONSchema.pm does, with PVE's error texts.  State (storages,
volumes as plain files, VMs, tasks) lives in :mod:`.model`; what a started VM does is a
backend's business: :class:`NullBackend` (no VM, canned agent answers) or
:class:`LibvirtBackend` (a real TCG guest built with vmbench's own domain XML).

Requests are made with API tokens (``token``: the one tests use, with every privilege unless
``missing_privileges`` takes some away; ``root_token``: root@pam's) and checked as PVE checks
a privilege-separated token against users, roles and ACLs (:mod:`.perms`; set them up through
``/access/*`` as an admin's ``pveum`` lines do, :mod:`.pveum`, or with ``grant``/``revoke``).

Anything the fake cannot check as PVE would (a named format it does not implement, an
endpoint it does not serve, a response not matching ``returns``) is recorded in
``problems`` and fails ``assert_clean()`` (called on leaving the ``with`` block).
"""

from .backends import AgentUnavailable, Backend, BackendError, DriveView, NullBackend, VmView
from .fake import FakePve
from .libvirt_backend import LibvirtBackend
from .schema import SchemaError

__all__ = ["AgentUnavailable", "Backend", "BackendError", "DriveView", "FakePve", "LibvirtBackend", "NullBackend",
           "SchemaError", "VmView"]
