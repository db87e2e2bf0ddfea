from .base import Transport
from .local import LocalTransport

__all__ = ["Transport", "LocalTransport"]
