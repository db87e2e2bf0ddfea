"""The tune scenario the tune tests share: one job, four axes, and a budget each test sets."""

from __future__ import annotations


def tune_yaml(budget: str = "{boots: 20}", rw: str = "randread") -> str:
    return f"""
name: t
storage: {{scratch_size: 256M}}
vm: {{cache: none, aio: threads}}
jobs:
  - {{name: j1, rw: {rw}, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}}
tune:
  goal: j1:iops
  axes: {{bus: [virtio-scsi, sata], cache: [writeback], iothread: [true], aio: [io_uring, native]}}
  budget: {budget}
"""
