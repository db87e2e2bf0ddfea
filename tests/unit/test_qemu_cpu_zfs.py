"""The host's ZFS kernel threads in the QEMU CPU snapshot (issue 17): read from the snapshot's
"zfs" lines (each thread's /proc stat line; only kernel threads with ZFS's names), accounted
between two snapshots as the "zfs" part of the rest of the host (new threads from 0, gone ones
counted, the idle rate taken off), absent where the host has none, and the JSON row.

This machine has no ZFS: the "zfs" lines are this machine's own kernel threads' /proc stat
lines (kworker/1:11-dio/vda, flags 0x208040 = PF_KTHREAD...) under the names OpenZFS 2.2 gives
its threads on a Proxmox host; a user process with such a name (no PF_KTHREAD) is left out."""

from __future__ import annotations

import re

import pytest

from tests.unit.test_qemu_cpu import TCG_1, TCG_2, snap
from vmbench.telemetry import qemu_cpu as q
from vmbench.telemetry.zfs_threads import ZFS_COMM

KTHREAD = 2129984  # 0x208040, as kthreadd's children here


def kstat(pid: int, comm: str, stime: int, start: int, *, utime: int = 0, flags: int = KTHREAD) -> str:
    """A kernel thread's /proc/PID/stat line, as this machine prints kworker/1:11-dio/vda's."""
    return (f"zfs {pid} ({comm}) S 2 0 0 0 -1 {flags} 0 0 0 0 {utime} {stime} 0 0 20 0 1 0 {start} 0 0 "
            "18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0")


def with_zfs(text: str, *lines: str) -> str:
    assert text.endswith(".\n")
    return text[:-2] + "".join(line + "\n" for line in lines) + ".\n"


BEFORE = with_zfs(TCG_1, kstat(3001, "z_wr_iss", 100, 5000), kstat(3002, "txg_sync", 50, 5000),
                  kstat(3003, "z_rd_int_1", 20, 5000), kstat(3004, "arc_prune", 5, 5000),
                  kstat(3006, "dbu_evict", 7, 5000),
                  kstat(4100, "z_not_zfs", 0, 9000, utime=500, flags=4194560))  # a user process, not a kthread
AFTER = with_zfs(TCG_2, kstat(3001, "z_wr_iss", 160, 5000), kstat(3002, "txg_sync", 62, 5000),
                 kstat(3004, "arc_prune", 5, 5000), kstat(3005, "z_wr_iss_h", 8, 6000),
                 kstat(3006, "dbu_evict", 3, 7000),  # the pid reused by a new thread: counted from 0
                 kstat(4100, "z_not_zfs", 0, 9000, utime=900, flags=4194560))


def test_the_zfs_kernel_threads_are_read_from_the_snapshot():
    s = snap(BEFORE)
    assert s.zfs is not None and [(t.tid, t.comm, t.stime, t.starttime) for t in s.zfs] == [
        (3001, "z_wr_iss", 100, 5000), (3002, "txg_sync", 50, 5000), (3003, "z_rd_int_1", 20, 5000),
        (3004, "arc_prune", 5, 5000), (3006, "dbu_evict", 7, 5000)]
    assert snap(TCG_1).zfs is None  # no ZFS on the host: nothing, not zero
    assert snap(with_zfs(TCG_1, kstat(4100, "z_not_zfs", 0, 9000, utime=5, flags=4194560))).zfs is None


def test_their_cpu_is_the_zfs_part_of_the_host_rest():
    got = q.account(snap(BEFORE), snap(AFTER), ios=1000)
    z = got.zfs
    assert z is not None and (z.threads, z.new, z.gone) == (5, 2, 1)  # z_wr_iss_h and the reused pid new; z_rd_int_1 gone
    assert z.user_s == 0.0 and z.system_s == pytest.approx((60 + 12 + 0 + 8 + 3) / 100)
    row = got.to_json()["host"]["zfs"]
    assert row["cpu_s"] == pytest.approx(0.83) and row["net_s"] == pytest.approx(0.83)
    assert row["us_per_io"] == pytest.approx(830.0) and row["idle_s"] == 0.0
    assert q.CpuPerIo.from_json(got.to_json()) == got
    assert q.account(snap(TCG_1), snap(TCG_2), ios=1000).to_json()["host"]["zfs"] is None
    assert q.account(snap(TCG_1), snap(AFTER), ios=1000).zfs is None  # only in one snapshot: not known


def test_the_idle_zfs_rate_is_taken_off_never_below_zero():
    idle = q.idle_rate(snap(BEFORE), snap(AFTER))
    elapsed = snap(AFTER).time_s - snap(BEFORE).time_s
    assert idle.zfs_per_s == pytest.approx(0.83 / elapsed)
    assert q.IdleRate.from_json(idle.to_json()) == idle
    half = q.IdleRate(idle.elapsed_s, idle.classes, idle.host_rest_per_s, zfs_per_s=0.2 / elapsed)
    z = q.account(snap(BEFORE), snap(AFTER), ios=1000, idle=half).to_json()["host"]["zfs"]
    assert z["idle_s"] == pytest.approx(0.2) and z["us_per_io"] == pytest.approx(630.0)
    big = q.IdleRate(idle.elapsed_s, idle.classes, idle.host_rest_per_s, zfs_per_s=10.0)
    assert q.account(snap(BEFORE), snap(AFTER), ios=1000, idle=big).to_json()["host"]["zfs"]["net_s"] == 0.0


def test_the_script_and_the_names_agree():
    pattern = re.search(r"case \$c in ([^)]+)\)", q.SNAPSHOT_SCRIPT)
    assert pattern is not None
    globs = pattern.group(1).split("|")
    assert globs == ["z_*", "txg_*", "zvol*", "spa_*", "arc_*", "dbu_*", "dbuf*", "dp_*", "l2arc*", "zthr*"]
    for name in ("z_wr_iss", "z_wr_int_0", "txg_sync", "txg_quiesce", "zvol", "zvol_tq-0", "spa_async", "arc_evict",
                 "dbu_evict", "dbuf_evict_thre", "dp_sync_taskq", "l2arc_feed", "zthr_procedure"):
        assert ZFS_COMM.match(name), name
    for name in ("zfs", "kworker/0:1", "spl_system_task", "mmp", "CPU 0/KVM"):
        assert not ZFS_COMM.match(name), name
    assert "[ -d /sys/module/zfs ]" in q.SNAPSHOT_SCRIPT  # no walk over /proc on a host without ZFS
