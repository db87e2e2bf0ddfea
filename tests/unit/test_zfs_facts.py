"""The ZFS facts under a table (report/zfsfacts.py) and the parsers they stand on, over
output captured from the OpenZFS 2.1 storage guest the integration tests boot
(tests/data/zfs: a pool on one disk with a file log vdev and a file cache vdev, a zvol
under a parent dataset with sync=disabled and compression=lz4; a 64k O_DIRECT dd under
sync=always for the iostat series)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.records import as_cells, as_environment, as_measurements, as_params, as_telemetry
from vmbench.report.zfsfacts import (compression_fact, data_of, effective_properties, log_fact, write_share, pool_fact,
                                     volume_fact, zfs_facts)
from vmbench.storage.zfs import EFFECTIVE, parse_get
from vmbench.telemetry.zfs import (parse_volume, parse_zpool_iostat, parse_zpool_list, status_health, summary,
                                   volume_argv, zpool_series)

DATA = Path(__file__).resolve().parents[1] / "data" / "zfs"


def text(name: str) -> str:
    return (DATA / name).read_text()


# ---- parsers ----------------------------------------------------------------------------------


def test_zpool_list_gives_capacity_fragmentation_health_and_the_vdev_classes():
    pool = parse_zpool_list(text("zpool-list-vHp.txt"))
    assert pool is not None
    assert (pool.name, pool.size_bytes, pool.alloc_bytes, pool.capacity_pct, pool.fragmentation_pct, pool.health) == (
        "tank", 5905580032, 909312, 0, 0, "ONLINE")
    assert pool.classes == (("virtio-ZFSPOOL", "data"), ("/var/tmp/slog.img", "log"), ("/var/tmp/l2arc.img", "cache"))
    assert parse_zpool_list(text("zpool-list-degraded.txt")).health == "DEGRADED"
    assert parse_zpool_list("") is None and parse_zpool_list("garbage\n") is None


def test_zpool_status_health():
    assert status_health(text("zpool-status-P.txt")) == "ONLINE"
    assert status_health(text("zpool-status-degraded.txt")) == "DEGRADED"
    assert status_health(text("zpool-status-scrub.txt")) == "ONLINE"
    assert status_health("") is None


def test_the_volume_read_after_the_run():
    assert volume_argv("/dev/zvol/tank/vmbench/vmbench-r1a2b3c4-1-hostref") == [
        "zfs", "get", "-Hp", "-o", "property,value", "compression,compressratio,logicalused,used",
        "tank/vmbench/vmbench-r1a2b3c4-1-hostref"]
    assert volume_argv("/tank/vmbench/vmbench-r1a2b3c4-1-hostref/x.raw")[-1] == "/tank/vmbench/vmbench-r1a2b3c4-1-hostref/x.raw"
    assert volume_argv("/dev/vdb") is None and volume_argv("/dev/zvol/") is None and volume_argv("rbd:p/i") is None
    assert parse_volume(text("zfs-get-vol-after.txt")) == {"compression": "lz4", "compressratio": 1.0,
                                                           "logicalused_bytes": 39456768, "used_bytes": 70254592}
    assert parse_volume("compressratio\tbad\nused\t-\n") == {}


def test_effective_properties_read_back_with_their_source():
    got = parse_get(text("zfs-get-vol.txt"))
    assert {p: got[p]["source"] for p in ("compression", "sync", "checksum")} == {
        "compression": "inherited from tank/parent", "sync": "inherited from tank/parent", "checksum": "default"}
    assert set(EFFECTIVE) - {"copies"} <= set(got)


# ---- the facts ---------------------------------------------------------------------------------


def _iostat_summary() -> dict:
    start, reports = parse_zpool_iostat(text("zpool-iostat-Hpv.txt"))
    return summary(zpool_series(start, reports), None)


def test_the_swrite_share_of_a_sync_write_from_the_per_vdev_series():
    tel = _iostat_summary()
    pool = parse_zpool_list(text("zpool-list-vHp.txt"))
    assert write_share(as_telemetry(tel), pool.vdevs("log")) == pytest.approx(4.10582 / 4.19622)
    m = {"job": "64k-sync", "sync": True, "job_params": {"rw": "write"}, "telemetry": tel}
    assert log_fact(as_measurements([m]), pool) == "SLOG: took 98% of writes (64k-sync)"
    filling = dict(m, telemetry=dict(tel, vdev_write_mb_s={**tel["vdev_write_mb_s"], "/var/tmp/l2arc.img": 1.25}))
    assert log_fact(as_measurements([filling]), pool) == "SLOG: took 98% of writes (64k-sync); L2ARC written 1.2 MB/s at most"
    idle = dict(m, telemetry=dict(tel, vdev_write_mb_s={"virtio-ZFSPOOL": 4.2, "/var/tmp/slog.img": 0.0}))
    assert log_fact(as_measurements([idle]), pool).startswith("SLOG: idle (64k-sync)")
    special = parse_zpool_list(text("zpool-list-vHp.txt").replace("logs ", "special ", 1))
    assert special.vdevs("special") == ["/var/tmp/slog.img"]
    assert log_fact(as_measurements([dict(m, sync=False)]), special) == "special vdevs took 98% of writes at most"
    bare = parse_zpool_list(text("zpool-list-vHp.txt").split("logs")[0])
    assert log_fact(as_measurements([m]), bare) == "no log device"
    assert log_fact(as_measurements([dict(m, sync=False)]), bare) == ""


def _cell(sources: dict[str, str], values: dict[str, str]) -> dict:
    return {"name": "c", "evidence": {"storage": {"volumes": {"v.raw": {
        "zfs_name": "tank/parent/vol", "readback": values, "sources": sources}}}}}


def test_an_inherited_sync_disabled_is_stated_and_flagged():
    got = parse_get(text("zfs-get-vol.txt"))
    cell = _cell({k: v["source"] for k, v in got.items()}, {k: v["value"] for k, v in got.items()})
    vols = effective_properties(as_cells([cell]))
    missing: list[str] = []
    fact = volume_fact(vols, missing)
    assert fact.startswith("compression=lz4 (from tank/parent), sync=disabled (from tank/parent), checksum=on, dedup=off")
    assert "WARNING: sync=disabled inherited from tank/parent: sync writes are acknowledged before they are safe" in fact
    assert not missing
    risky = _cell({"checksum": "local", "dedup": "inherited from tank"}, {"checksum": "off", "dedup": "on"})
    fact = volume_fact(effective_properties(as_cells([risky])), [])
    assert "WARNING: checksum=off set: data is not checksummed" in fact
    assert "WARNING: dedup=on inherited from tank" in fact
    volume_fact({}, missing)
    assert missing == ["the scratch volume's effective properties (not read back)"]


def test_pool_state_flags_a_full_or_degraded_pool():
    pool = parse_zpool_list(text("zpool-list-vHp.txt"))
    assert pool_fact(pool, as_environment({}), []) == "tank 0% full, 0% fragmented, ONLINE; log /var/tmp/slog.img; cache /var/tmp/l2arc.img"
    degraded = pool_fact(parse_zpool_list(text("zpool-list-degraded.txt")), as_environment({}), [])
    assert degraded.endswith("WARNING: pool DEGRADED, not ONLINE")
    full = parse_zpool_list(text("zpool-list-vHp.txt").replace("\t0\t0\t1.00\tONLINE", "\t31\t85\t1.00\tONLINE", 1))
    assert "tank 85% full, 31% fragmented" in pool_fact(full, as_environment({}), [])
    assert "WARNING: over 80% full" in pool_fact(full, as_environment({}), [])
    missing: list[str] = []
    assert pool_fact(None, as_environment({}), missing) == "" and missing


def test_compressible_writes_are_flagged_with_the_volume_compressratio():
    def m(job, ratio, **params):
        return {"job": job, "job_params": {"rw": "write", **params},
                "telemetry": {"compression": "lz4", "compressratio": ratio, "logicalused_bytes": 200 << 20, "used_bytes": 100 << 20}}
    fact = compression_fact(as_measurements([m("rand", 1.0, refill_buffers=True), m("comp", 2.0, buffer_compress_percentage=90)]), {})
    assert fact == ("rand incompressible (refilled), then 1.00x (200 MiB logical, 100 MiB used); "
                    "comp 90% compressible, then 2.00x (200 MiB logical, 100 MiB used); "
                    "WARNING: compressible data: the pool wrote less than fio (comp)")
    # random 4k writes into 16k blocks, as measured on the OpenZFS guest: 2.32x from the blocks' zeros, not flagged
    partial = compression_fact(as_measurements([m("4k", 2.32, refill_buffers=True)]), {})
    assert partial == "4k incompressible (refilled), then 2.32x (200 MiB logical, 100 MiB used), not from fio's data"
    off = m("comp", 1.0)
    off["telemetry"]["compression"] = "off"
    assert compression_fact(as_measurements([off]), {}) == ""
    assert data_of(as_params({})) == "incompressible (fio's default)" and data_of(as_params({"jobfile": {"path": "x"}})) == "as its job file says"


def test_the_arc_fact_flags_reads_that_fit_unless_the_volume_caches_metadata_only():
    env = {"zfs_pool": "tank", "arc": {"c_max_bytes": 740 << 20, "size_bytes": 100 << 20}, "host_memory_mib": 1536,
           "zpool_list": text("zpool-list-vHp.txt")}
    reads = [{"job": "r", "job_params": {"rw": "read", "size": 8 << 20}, "telemetry": {"arc_hit_ratio": 0.99}},
             {"job": "w", "job_params": {"rw": "write", "size": 8 << 20}, "telemetry": {"arc_hit_ratio": 0.5}}]
    facts, missing = zfs_facts(as_measurements(reads), as_cells([]), as_environment(env))
    assert facts["ZFS ARC"] == ("100 MiB of max 740 MiB, host RAM 1,536 MiB; hit 50..99% while fio ran; "
                                "WARNING: reads of r fit in the ARC: may be served from memory")
    meta = _cell({"primarycache": "local"}, {"primarycache": "metadata"})
    facts, _ = zfs_facts(as_measurements(reads), as_cells([meta]), as_environment(env))
    assert "WARNING" not in facts["ZFS ARC"]
    assert "the scratch volume's effective properties (not read back)" in missing
    assert zfs_facts(as_measurements(reads), as_cells([]), as_environment({})) == ({}, [])


def test_the_advice_labels_checksum_off_dedup_and_an_inherited_sync_disabled():
    from vmbench.advice.risks import setting_risks, value_risks, volume_risk_notes
    from vmbench.scenario.goals import Risk
    assert value_risks("checksum", "off") == (Risk.ZFS_CHECKSUM_OFF,) and value_risks("checksum", "on") == ()
    assert value_risks("dedup", "sha256,verify") == (Risk.ZFS_DEDUP,) and value_risks("dedup", "off") == ()
    assert value_risks("sync", "disabled") == (Risk.ZFS_SYNC_DISABLED,) and value_risks("sync", "standard") == ()
    assert setting_risks({"compression": "lz4", "dedup": "on", "checksum": "off"}) == (Risk.ZFS_CHECKSUM_OFF, Risk.ZFS_DEDUP)
    got = parse_get(text("zfs-get-vol.txt"))
    cell = _cell({k: v["source"] for k, v in got.items()}, {k: v["value"] for k, v in got.items()})
    (note,) = volume_risk_notes(as_cells([cell, cell]))
    assert note.startswith("zfs-sync-disabled: the volumes had sync=disabled inherited from tank/parent; sync=disabled makes ZFS")
    assert volume_risk_notes(as_cells([])) == []


def test_the_pool_waits_of_zpool_iostat_l_and_which_dominates():
    from vmbench.report.zfsfacts import waits_fact
    start, reports = parse_zpool_iostat(text("zpool-iostat-Hplv.txt"))
    assert len(reports) == 5 and reports[0].rows[0].waits == (None, 702691, None, 586183, None, 18870, None, 90624)
    assert [r.name for r in reports[0].rows] == ["tank", "virtio-ZFSPOOL", "/var/tmp/slog.img", "/var/tmp/l2arc.img"]
    series = zpool_series(start, reports)
    assert series["wait_ms"]["total_write"] == [0.7027, 1.2598, 1.7669, 1.3763, 4.6948]
    assert series["write_mb_s"] == [0.9957, 7.0872, 5.0553, 5.5025, 2.2723]
    tel = summary(series, None)
    assert tel["pool_wait_ms"]["disk_write"] == pytest.approx((0.5862 + 1.2445 + 1.7459 + 1.3173 + 4.6948) / 5)
    assert "total_read" not in tel["pool_wait_ms"]  # no reads: "-" in every interval
    m = {"job": "64k-sync", "job_params": {"rw": "write"}, "telemetry": tel}
    assert waits_fact(as_measurements([m])) == "64k-sync write 1.96 ms (disk 1.92, syncq 0.02, asyncq 0.09): disk dominates"
    assert waits_fact(as_measurements([dict(m, telemetry=summary(zpool_series(*parse_zpool_iostat(text("zpool-iostat-Hpv.txt"))), None))])) == ""


def test_device_busy_and_time_per_io_from_diskstats():
    """/proc/diskstats as the sampler recorded it on a real machine (tests/data/telemetry-sample.txt):
    vda between the first two samples (1.00 s): 5671 writes taking 7376 ms, busy 984 ms."""
    from vmbench.report.zfsfacts import waits_fact
    from vmbench.telemetry.sampler import parse_samples, series, summary as sampled
    samples = parse_samples((DATA.parent / "telemetry-sample.txt").read_text())
    got = series(samples[:2], ["vda"], "vda")["disk"]["devices"]["vda"]
    assert got["util_pct"] == [98.4] and got["await_ms"] == [round(7376 / 5671, 4)]
    idle = series([samples[0], samples[0].__class__(samples[0].t + 1, samples[0].disks, samples[0].cpu, {}, samples[0].busy)],
                  ["vda"], "vda")["disk"]["devices"]["vda"]
    assert idle["util_pct"] == [0.0] and idle["await_ms"] == [None]
    s = series(samples[:2], ["vda"], "vda")
    tel = sampled(s["disk"], s["cpu"], host_disk=s["disk"])
    assert (tel["dev_util_pct"], tel["host_dev_util_pct"]) == (98.4, 98.4) and tel["dev_await_ms"] == pytest.approx(1.3007)
    m = {"job": "w", "side": "guest", "job_params": {"rw": "write"},
         "telemetry": dict(tel, pool_wait_ms={"total_write": 2.0, "disk_write": 1.5})}
    assert waits_fact(as_measurements([m])) == ("w write 2.00 ms (disk 1.50): disk dominates, guest device 98% busy at 1.30 ms/IO, "
                               "host under guest device 98% busy at 1.30 ms/IO")
