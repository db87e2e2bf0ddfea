"""Where commands run: the :class:`Transport` and :class:`HostTransport` Protocols, this
machine (:mod:`.local`), a host over SSH (:mod:`.ssh`, :mod:`.hostkeys`), a guest through
the QEMU guest agent (:mod:`.agent`), and small file helpers over any of them (:mod:`.ops`)."""

from .base import HostTransport, Transport
from .local import LocalTransport

__all__ = ["HostTransport", "Transport", "LocalTransport"]
