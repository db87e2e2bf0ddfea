"""How vmbench reaches a host over SSH: the settings a scenario gives (``hypervisor.ssh``), in
the transport layer that uses them (:mod:`.ssh`); :mod:`vmbench.scenario.model` re-exports it."""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class SshConfig:
    """How vmbench reaches a remote host over SSH (keys only, never a password).

    ``host``/``port``/``user`` default to the libvirt URI's; ``key_file`` to ssh-agent and
    the user's default keys; ``known_hosts`` to the user's ~/.ssh/known_hosts."""

    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    known_hosts: str | None = None

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}" + (f":{self.port}" if self.port != 22 else "")


def default_known_hosts() -> str:
    """The known_hosts file host keys are checked against unless a scenario names one."""
    return os.path.expanduser("~/.ssh/known_hosts")
