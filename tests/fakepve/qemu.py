"""What qemu-server makes of a disk's options for QEMU (QS ``Drive.pm``
detect_zeroes_cmdline_option, ``Blockdev.pm`` add_common_options; the same in 8.3.13 and
9.x): what the fake node's QEMU command line and the libvirt backend's guest get.

I/O limits (QS ``Drive.pm`` parse_drive, after the schema; ``QemuServer.pm``
print_drive_commandline_full in 8.3.13, ``Blockdev.pm`` generate_throttle_group in 9.1.3):

- :func:`drive_parses`: ``bps*`` and ``mbps*`` together, ``mbps*_max`` without its
  ``mbps*``, a ``*_max_length`` without its burst, or a total with its read or write rate make
  qemu-server's parse_drive fail, which the API reports as ``{"virtio1": "unable to parse
  drive options"}`` (400).  ``iops*_max`` without its ``iops*`` passes: qemu-server checks
  ``miops_max => miops``, keys that never exist (QEMU refuses it at start); a ``bps*``
  (bytes) becomes ``mbps*`` "0.000" (a qemu-server bug), which passes the checks and limits
  nothing;
- :func:`throttle_limits`: what QEMU gets, by QEMU's option names (``iops-total``,
  ``bps-read-max``, ``iops-write-max-length``): MiB/s as ``int($v * 1024 * 1024)`` bytes;
  PVE 8 puts them on the ``-drive`` as ``throttling.NAME=`` (:func:`drive_throttling`),
  PVE 9 in ``-object {"id":"throttle-drive-KEY","limits":{...},"qom-type":"throttle-group"}``
  (:func:`throttle_group`, canonical JSON), named by the disk's throttle ``-blockdev``.

- ``discard=on`` is QEMU's ``discard=unmap``; anything else (``ignore``, unset) is ``ignore``;
- ``detect_zeroes=0`` is ``detect-zeroes=off``; otherwise (``1`` or unset) ``unmap`` with
  ``discard=on``, else ``on``: PVE's default is on, and there is no way to ask for on with
  ``discard=on``.
"""

from __future__ import annotations

import json
from typing import Mapping


def discard(opts: Mapping[str, object]) -> str:
    return "unmap" if str(opts.get("discard", "")) == "on" else "ignore"


def detect_zeroes(opts: Mapping[str, object]) -> str:
    flag = opts.get("detect_zeroes")
    if flag is not None and str(flag) == "0":
        return "off"
    return "unmap" if discard(opts) == "unmap" else "on"


MiB = 1024 * 1024
DIRECTIONS = (("", "-total"), ("_rd", "-read"), ("_wr", "-write"))


def _opt(opts: Mapping[str, object], key: str) -> str | None:
    """A drive option as parse_drive leaves it (a string, or None when unset); ``bps*``
    becomes ``mbps*`` "0.000": parse_drive divides ``defined(...)`` (1), not the value, by 1 MiB
    (``my $bps = defined(delete $res->{$opt})``, the same in 8.3.13 and 9.1.3)."""
    if key.startswith("mbps") and not key.endswith("_max") and opts.get(key[1:]) is not None:
        return f"{1 / MiB:.3f}"
    value = opts.get(key)
    return None if value is None else str(value)


def _true(value: str | None) -> bool:
    """Perl's truth of a string: unset, "" and "0" are false ("0.000" is true)."""
    return value not in (None, "", "0")


def _num(opts: Mapping[str, object], key: str) -> float:
    value = _opt(opts, key)
    try:
        return float(value) if _true(value) else 0.0
    except ValueError:
        return 0.0


def drive_parses(opts: Mapping[str, object]) -> bool:
    """Whether qemu-server's parse_drive accepts a drive's (schema-valid) limits."""
    t = lambda key: _true(_opt(opts, key))  # noqa: E731
    if any(opts.get(f"bps{d}") is not None and opts.get(f"mbps{d}") is not None for d, _ in DIRECTIONS):
        return False  # "both bps and mbps specified"
    for d, _ in DIRECTIONS:
        if (t(f"mbps{d}_max") and not t(f"mbps{d}")) or (t(f"bps{d}_max_length") and not t(f"mbps{d}_max")) \
                or (t(f"iops{d}_max_length") and not t(f"iops{d}_max")):
            return False  # "mbps_max requires mbps"...; iops_max => iops is checked as miops_max => miops: never
    return not any(t(total) and (t(f"{total}_rd") or t(f"{total}_wr")) for total in ("mbps", "iops"))


def throttle_limits(opts: Mapping[str, object]) -> dict[str, int]:
    """The limits QEMU gets, in qemu-server's order (per direction: bps, bps-max, its length,
    iops, iops-max, its length), those that are not 0."""
    out: dict[str, int] = {}
    for d, qemu in DIRECTIONS:
        values = {f"bps{qemu}": int(_num(opts, f"mbps{d}") * MiB), f"bps{qemu}-max": int(_num(opts, f"mbps{d}_max") * MiB),
                  f"bps{qemu}-max-length": int(_num(opts, f"bps{d}_max_length")), f"iops{qemu}": int(_num(opts, f"iops{d}")),
                  f"iops{qemu}-max": int(_num(opts, f"iops{d}_max")),
                  f"iops{qemu}-max-length": int(_num(opts, f"iops{d}_max_length"))}
        out.update({k: v for k, v in values.items() if v})
    return out


def drive_throttling(opts: Mapping[str, object]) -> str:
    """PVE 8's ``-drive`` options: ``,throttling.iops-total=500,...`` ('' without limits)."""
    return "".join(f",throttling.{k}={v}" for k, v in throttle_limits(opts).items())


def throttle_group(key: str, opts: Mapping[str, object]) -> str:
    """PVE 9's ``-object`` of a disk's throttle group (one per disk, empty limits included)."""
    group = {"id": f"throttle-drive-{key}", "limits": throttle_limits(opts), "qom-type": "throttle-group"}
    return json.dumps(group, sort_keys=True, separators=(",", ":"))


#: QEMU's throttle options as libvirt's <iotune> elements
IOTUNE = {f"{unit}{qemu}{burst}": f"{side}_{'bytes' if unit == 'bps' else 'iops'}_sec{burst.replace('-', '_')}"
          for unit in ("bps", "iops") for (_, qemu), side in zip(DIRECTIONS, ("total", "read", "write"))
          for burst in ("", "-max", "-max-length")}
