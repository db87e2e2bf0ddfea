"""What qemu-server makes of a disk's options for QEMU (QS ``Drive.pm``
detect_zeroes_cmdline_option, ``Blockdev.pm`` add_common_options; the same in 8.3.13 and
9.x): what the fake node's QEMU command line and the libvirt backend's guest get.

- ``discard=on`` is QEMU's ``discard=unmap``; anything else (``ignore``, unset) is ``ignore``;
- ``detect_zeroes=0`` is ``detect-zeroes=off``; otherwise (``1`` or unset) ``unmap`` with
  ``discard=on``, else ``on``: PVE's default is on, and there is no way to ask for on with
  ``discard=on``.
"""

from __future__ import annotations

from typing import Mapping


def discard(opts: Mapping[str, object]) -> str:
    return "unmap" if str(opts.get("discard", "")) == "on" else "ignore"


def detect_zeroes(opts: Mapping[str, object]) -> str:
    flag = opts.get("detect_zeroes")
    if flag is not None and str(flag) == "0":
        return "off"
    return "unmap" if discard(opts) == "unmap" else "on"
