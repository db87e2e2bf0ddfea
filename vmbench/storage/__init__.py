"""Host storage: where scratch disks and the host's reference target live.

One small Protocol (:class:`HostStorage`); each type (``dir`` today, ZFS next) is one
implementation picked by the scenario's ``storage.type``.  Drivers ask their storage for
volumes and never create disks any other way.
"""

from .base import HostStorage, Volume, VolumeRole, volume_name, VOLUME_RE

__all__ = ["HostStorage", "Volume", "VolumeRole", "volume_name", "VOLUME_RE"]
