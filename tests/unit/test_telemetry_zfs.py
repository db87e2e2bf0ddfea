"""ZFS telemetry (METHOD rules 3, 6, 8): `zpool iostat -Hpv -T u` parsed as OpenZFS 2.1-2.3 print
it, the ARC counters, the scrub state and zfs_txg_timeout; the sampler's fixed script with the
pool as an argument; the summary, the flags and the report's columns and timelines."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from tests.fakes import FakeHost
from tests.unit.test_telemetry import _live_in_group
from tests.records import as_cells, as_environment, as_measurement, as_measurements, as_series
from vmbench.run import measure
from vmbench.run.measure import Measurer, Where
from vmbench.run.plan import Step
from vmbench.progress import RecordingProgress
from vmbench.report.build import build_report
from vmbench.report.load import load_run, with_telemetry
from vmbench.report.rows import (CACHE_SHARE, POOL_WRITE_SHARE, STEADY_TXGS, Figures, aggregate, telemetry_notes)
from vmbench.report.html import render_html
from vmbench.results.lines import plain_lines
from vmbench.report.render import Format, render
from vmbench.report.tables import gap_table, layer_table
from vmbench.results.db import ResultsDB
from vmbench.scenario import parse_scenario
from vmbench.telemetry.sampler import SAMPLER_SCRIPT, Sampler, parse_samples, sampler_argv, series, summary
from vmbench.telemetry.zfs import (arc_series, check_pool_name, parse_arc_line, parse_zfs_state, parse_zpool_iostat,
                                   scan_of, valid_pool_name, zpool_series)
from vmbench.transport.local import LocalTransport

# ---- zpool iostat -Hpv -T u tank 1 N, byte for byte as zpool_main.c prints it ------------------------
# print_timestamp (lib/libspl/timestamp.c): printf("%lld\n", t) before each report (-T u).
# print_vdev_stats, scripted (-H): printf("%s", name), then print_iostat_default: alloc, free
# ("\t%c\t%c" with na '0' under -p below the top level), read ops, write ops, read bytes, write
# bytes, each print_one_stat -> printf("\t%s", raw number under -p); printf("\n").  Children
# follow depth first without indentation; before the log/dedup/special class and before the
# cache devices, scripted mode prints only printf("\n").


def report(t: int, rows: list[tuple[str, int, int, int, int, int, int]], logs=(), cache=()) -> str:
    def line(r):
        name, alloc, free, rops, wops, rb, wb = r
        return name + "".join(f"\t{v}" for v in (alloc, free, rops, wops, rb, wb)) + "\n"

    text = f"{t}\n" + "".join(line(r) for r in rows)
    if logs:
        text += "\n" + "".join(line(r) for r in logs)
    if cache:
        text += "\n" + "".join(line(r) for r in cache)
    return text


def tank(t: int, rb: int, wb: int) -> str:
    """tank: mirror-0 of sda and sdb, a log device and a cache device (OpenZFS 2.2+ names)."""
    return report(t, [("tank", 5368709120, 16106127360, 10, 20, rb, wb),
                      ("mirror-0", 5368709120, 16106127360, 10, 20, rb, wb),
                      ("sda", 0, 0, 5, 10, rb // 2, wb // 2),
                      ("sdb", 0, 0, 5, 10, rb - rb // 2, wb - wb // 2)],
                  logs=[("nvme0n1", 1048576, 8588886016, 0, 3, 0, 12288)],
                  cache=[("nvme1n1", 1073741824, 98784247808, 0, 0, 0, 0)])


FIRST = tank(1718000000, 999_000_000, 999_000_000)  # the average since import: must be dropped
IOSTAT = FIRST + tank(1718000001, 1_000_000, 200_000_000) + tank(1718000002, 3_000_000, 100_000_000)


def test_the_literal_format():
    lines = IOSTAT.splitlines()
    assert lines[:3] == ["1718000000", "tank\t5368709120\t16106127360\t10\t20\t999000000\t999000000",
                         "mirror-0\t5368709120\t16106127360\t10\t20\t999000000\t999000000"]
    assert lines[3].startswith("sda\t0\t0\t5\t10\t") and lines[5] == "" and lines[7] == ""


def test_parse_drops_the_first_report_and_reads_vdevs():
    start, reports = parse_zpool_iostat(IOSTAT)
    assert start == 1718000000 and [r.t for r in reports] == [1718000001, 1718000002]
    assert [r.name for r in reports[0].rows] == ["tank", "mirror-0", "sda", "sdb", "nvme0n1", "nvme1n1"]
    s = zpool_series(start, reports, "none", 5)
    assert s["t_s"] == [1, 2]
    assert s["read_mb_s"] == [1.0, 3.0] and s["write_mb_s"] == [200.0, 100.0]  # -p: bytes/s
    assert s["read_ops"] == [10, 10] and s["write_ops"] == [20, 20]
    assert set(s["vdevs"]) == {"mirror-0", "sda", "sdb", "nvme0n1", "nvme1n1"}
    assert s["vdevs"]["sda"] == {"read_mb_s": [0.5, 1.5], "write_mb_s": [100.0, 50.0]}
    assert s["vdevs"]["nvme0n1"]["write_mb_s"] == [0.0123, 0.0123]
    assert (s["scan"], s["txg_timeout_s"]) == ("none", 5)
    assert 999.0 not in s["read_mb_s"]


def test_a_report_cut_by_the_kill_is_dropped():
    third = tank(1718000003, 5_000_000, 5_000_000)
    cut_line = IOSTAT + third[: third.index("sda\t") + 9]  # "sda\t0\t0\t5" without its newline
    assert [r.t for r in parse_zpool_iostat(cut_line)[1]] == [1718000001, 1718000002]
    cut_rows = IOSTAT + third[: third.index("sdb\t")]  # whole lines, but not every vdev yet
    assert [r.t for r in parse_zpool_iostat(cut_rows)[1]] == [1718000001, 1718000002]
    only_stamp = IOSTAT + "1718000003\n"
    assert [r.t for r in parse_zpool_iostat(only_stamp)[1]] == [1718000001, 1718000002]
    whole = IOSTAT + third
    assert [r.t for r in parse_zpool_iostat(whole)[1]][-1] == 1718000003
    # killed before the second report: nothing but the average since import, which is no interval
    assert parse_zpool_iostat(FIRST) == (1718000000, [])
    assert parse_zpool_iostat(FIRST[:20]) == (1718000000, [])
    assert parse_zpool_iostat("") == (None, [])
    assert zpool_series(None, []) == {}
    assert zpool_series(1718000000, [], "scrub", 5) == {"t_s": [], "read_mb_s": [], "write_mb_s": [], "read_ops": [],
                                                         "write_ops": [], "vdevs": {}, "scan": "scrub", "txg_timeout_s": 5}


def test_damaged_lines_and_repeated_names_of_openzfs_2_1():
    def old(t):  # 2.1: top-level vdevs without their id (no VDEV_NAME_TYPE_ID): "mirror" twice
        return report(t, [("tank", 1, 2, 4, 4, 4000000, 8000000), ("mirror", 1, 1, 2, 2, 2000000, 4000000),
                          ("sda", 0, 0, 1, 1, 1000000, 2000000), ("sdb", 0, 0, 1, 1, 1000000, 2000000),
                          ("mirror", 1, 1, 2, 2, 2000000, 4000000), ("sdc", 0, 0, 1, 1, 1000000, 2000000),
                          ("sdd", 0, 0, 1, 1, 1000000, 2000000)])
    start, reports = parse_zpool_iostat(old(100) + old(101) + old(102))
    s = zpool_series(start, reports)
    assert list(s["vdevs"]) == ["mirror", "sda", "sdb", "mirror#2", "sdc", "sdd"] and s["write_mb_s"] == [8.0, 8.0]
    damaged = old(100) + old(101).replace("sdc\t0\t0\t1", "sdc\t0\t0\tx") + old(102) + old(103)
    assert [r.t for r in parse_zpool_iostat(damaged)[1]] == [102, 103]
    noise = old(100) + old(101) + "cannot open 'tank': no such pool\n" + old(102) + old(103)  # not a row: its report goes
    assert [r.t for r in parse_zpool_iostat(noise)[1]] == [102, 103]


# ---- zpool status and zfs_txg_timeout ---------------------------------------------------------------


@pytest.mark.parametrize("line, scan", [
    ("  scan: scrub in progress since Mon Jun 10 10:00:00 2024", "scrub"),
    ("  scan: resilver in progress since Mon Jun 10 10:00:00 2024", "resilver"),
    ("  scan: resilver (mirror-0) in progress since Mon Jun 10 10:00:00 2024", "resilver"),  # sequential rebuild
    (" scrub: error scrub in progress since Mon Jun 10 10:00:00 2024", "scrub"),
    ("  \x1b[1mscan:\x1b[0m scrub in progress since Mon Jun 10 10:00:00 2024", "scrub"),  # ZFS_COLOR
    ("  scan: scrub repaired 0B in 00:00:01 with 0 errors on Sun Jun  9 00:24:02 2024", "none"),
    ("  scan: resilvered 1.2G in 00:01:00 with 0 errors on Sun Jun  9 00:24:02 2024", "none"),
    ("  scan: scrub paused since Mon Jun 10 10:00:00 2024", "none"),
    ("  scan: scrub canceled on Mon Jun 10 10:00:00 2024", "none"),
    ("  scan: none requested", "none"),
    ("action: Wait for the scrub to complete.", None),
])
def test_scan_lines(line, scan):
    assert scan_of(line) == scan


def test_zfs_state_at_start_and_end():
    start = "\n@zfs\nstatus ok\n  scan: scrub repaired 0B in 00:00:01 with 0 errors on Sun Jun  9 00:24:02 2024\ntxg_timeout 5\n.\n"
    end = "\n@zfs\nstatus ok\n  scan: scrub in progress since Mon Jun 10 10:00:00 2024\ntxg_timeout 5\n.\n"
    sample = "\n@ 100.5\n 8 0 sda 1 2 3 4 5 6 7 8 9 10 11\ncpu  1 2 3 4 5 6 7 8\n.\n"
    assert parse_zfs_state(start + sample + sample + end) == ("scrub", 5)
    assert parse_zfs_state(start + sample) == ("none", 5)
    never_scanned = "\n@zfs\nstatus ok\ntxg_timeout 10\n.\n"  # 2.2+ print no scan line for a pool never scrubbed
    assert parse_zfs_state(never_scanned) == ("none", 10)
    no_zpool = "\n@zfs\n.\n"
    assert parse_zfs_state(no_zpool) == (None, None)
    assert parse_zfs_state(end.replace("scrub in", "resilver in") + start) == ("resilver", 5)
    assert parse_zfs_state(start[:30]) == (None, None)  # cut: no "."


# ---- arcstats ---------------------------------------------------------------------------------------
# spl-kstat.c: a header line, "%-31s %-4s %s\n" (name type data), then per row "%-31s %-4d " name,
# type, and the value (uint64: "%llu").

ARC_NAMES = ["hits", "iohits", "misses", "demand_data_hits", "demand_data_misses", "size", "c", "c_min", "c_max",
             "compressed_size", "arc_meta_used", "mfu_size", "l2_hits"]


def arcstats(values: dict[str, int]) -> str:
    text = "13 1 0x01 147 39984 5069226524 3201766431512\n" + f"{'name':<31} {'type':<4} data\n"
    return text + "".join(f"{n:<31} {4:<4} {values.get(n, 7)}\n" for n in ARC_NAMES)


def test_the_scripts_arc_filter_keeps_exactly_the_fields(tmp_path):
    pattern = re.search(r"grep -E '(\^\(hits[^']*)'", SAMPLER_SCRIPT).group(1)
    f = tmp_path / "arcstats"
    f.write_text(arcstats({"hits": 1, "misses": 2, "size": 3, "c": 4, "c_min": 5, "c_max": 6}))
    got = subprocess.run(["grep", "-E", pattern, str(f)], capture_output=True, text=True, check=True).stdout
    assert [parse_arc_line(x) for x in got.splitlines()] == [("hits", 1), ("misses", 2), ("size", 3), ("c", 4),
                                                              ("c_min", 5), ("c_max", 6)]
    assert parse_arc_line("name                            type data") is None
    assert parse_arc_line("13 1 0x01 147 39984 5069226524 3201766431512") is None


def _sample(t: float, n: int, arc: dict | None) -> str:
    text = f"\n@ {t}\n 254 0 sda 10 0 {n * 8} 5 20 0 {n * 2048} 9 0 10 20 0 0 0 0 0 0\n"
    text += f"cpu  {n * 30} 0 {n * 20} {n * 40} {n * 10} 0 0 0 0 0\n"
    if arc is not None:
        text += "".join(f"{k:<31} 4    {v}\n" for k, v in arc.items())
    return text + ".\n"


def test_arc_series_deltas_and_hit_ratio():
    arcs = [{"hits": 100, "misses": 50, "size": 4 << 30, "c": 5 << 30, "c_min": 1 << 30, "c_max": 8 << 30},
            {"hits": 190, "misses": 60, "size": 4 << 30, "c": 5 << 30, "c_min": 1 << 30, "c_max": 8 << 30},
            {"hits": 190, "misses": 60, "size": 5 << 30, "c": 5 << 30, "c_min": 1 << 30, "c_max": 8 << 30}]
    text = "".join(_sample(100.0 + i, i + 1, a) for i, a in enumerate(arcs))
    samples = parse_samples(text)
    assert samples[0].arc["c_max"] == 8 << 30
    got = series(samples, ["sda"], "sda")
    arc = got["arc"]
    assert arc == {"t_s": [1.0, 2.0], "hits": [90, 0], "misses": [10, 0], "hit_ratio": [0.9, None],
                   "size_bytes": [4 << 30, 5 << 30], "c_max_bytes": 8 << 30, "c_min_bytes": 1 << 30}
    assert got["disk"]["t_s"] == arc["t_s"]
    # a sample without the counters (no arcstats), or one cut in the middle of them: no "arc"
    assert "arc" not in series(parse_samples(_sample(100.0, 1, None) + text), ["sda"])
    cut = text + _sample(103.0, 4, arcs[0])[:-40]
    assert len(parse_samples(cut)) == 3
    assert "arc" not in series(parse_samples("".join(_sample(100.0 + i, i + 1, None) for i in range(3))), ["sda"])
    assert arc_series([(1.0, arcs[0])]) == {}


# ---- summary ----------------------------------------------------------------------------------------


def test_summary_with_zfs_series():
    zpool = {"t_s": [1, 2], "read_mb_s": [1.0, 3.0], "write_mb_s": [200.0, 100.0], "read_ops": [1, 1], "write_ops": [1, 1],
             "vdevs": {}, "scan": "scrub", "txg_timeout_s": 5}
    arc = {"t_s": [1, 2], "hits": [90, 0], "misses": [10, 0], "hit_ratio": [0.9, None], "size_bytes": [4e9, 6e9],
           "c_max_bytes": 8e9, "c_min_bytes": 1e9}
    assert summary(None, None, zpool, arc) == {"pool_read_mb_s": 2.0, "pool_write_mb_s": 150.0, "scan": "scrub",
                                               "txg_timeout_s": 5, "arc_hit_ratio": 0.9, "arc_size_mb": 5000.0}
    idle_arc = dict(arc, hits=[0, 0], misses=[0, 0])
    assert summary(None, None, None, idle_arc)["arc_hit_ratio"] is None
    only_state = {"t_s": [], "read_mb_s": [], "write_mb_s": [], "vdevs": {}, "scan": "none", "txg_timeout_s": None}
    assert summary(None, None, only_state) == {"scan": "none"}
    assert summary(None, None) == {} and summary(None, None, {}, {}) == {}


# ---- the sampler: a fixed script, the pool an argument ------------------------------------------------


def test_sampler_argv_with_a_pool_and_names_refused():
    assert sampler_argv("/w/t.txt", 130.2, pool="tank") == ["sh", "-c", SAMPLER_SCRIPT, "sh", "/w/t.txt", "1", "130", "tank"]
    assert sampler_argv("/w/t.txt", 130.2) == ["sh", "-c", SAMPLER_SCRIPT, "sh", "/w/t.txt", "1", "130"]
    assert "zpool iostat -Hplv -T u \"$pool\" \"$iv\"" in SAMPLER_SCRIPT  # the command, with a count
    for good in ("tank", "rpool", "data-1", "p.0:x_y", "9pool"):
        assert valid_pool_name(good) and check_pool_name(good) == good
    for bad in ("", "-v", "tank pool", "tank;reboot", "$(reboot)", "`id`", "tank\n", "a/b", "'x'", "x" * 256, None, 5):
        assert not valid_pool_name(bad)
        if bad is not None:  # None: no pool
            with pytest.raises(ValueError):
                sampler_argv("/w/t.txt", 10, pool=bad)  # type: ignore[arg-type]
    host = FakeHost()
    host.dirs.add("/w")
    s = Sampler(host, "/dev/zvol/tank/v", "/w", "ab", 120, zfs_pool="tank;reboot")
    assert s.pool is None  # warned, sampled without ZFS
    s.start()
    s.stop()
    assert host.spawned == [sampler_argv("/w/telemetry-ab.txt", 120)] and host.left_running == []


class ZfsHost(FakeHost):
    """A fake host whose sampler writes what the real script writes on a ZFS host."""

    def __init__(self, iostat: str | None = IOSTAT, scans=("none", "scrub")) -> None:
        super().__init__()
        self.iostat, self.scans, self.sections = iostat, list(scans), 0

    def _zfs_section(self, path: str) -> None:
        scan = self.scans[min(self.sections, len(self.scans) - 1)]
        self.sections += 1
        line = {"none": "  scan: none requested", "scrub": "  scan: scrub in progress since Mon Jun 10 10:00:00 2024",
                "resilver": "  scan: resilver in progress since Mon Jun 10 10:00:00 2024"}[scan]
        self.files[path] = self.files.get(path, b"") + f"\n@zfs\nstatus ok\n{line}\ntxg_timeout 5\n.\n".encode()

    def spawn(self, argv):
        if len(argv) > 7:
            self._zfs_section(argv[4])
            if self.iostat is not None:
                self.files[argv[4] + ".zpool"] = self.iostat.encode()
            self.files[argv[4] + ".zerr"] = b""
        return super().spawn(argv)

    def _cmd_sh(self, argv, stdin):
        if len(argv) > 7 and self._parent_ok(argv[4]):
            self._zfs_section(argv[4])
        return super()._cmd_sh(argv, stdin)


def test_sampler_on_a_zfs_host_records_the_pool_and_leaves_nothing():
    host = ZfsHost()
    host.dirs.add("/w")
    host.files["/pool/v.raw"] = b""
    s = Sampler(host, "/pool/v.raw", "/w", "ab", 120, zfs_pool="tank")
    s.start()
    got = s.stop()
    assert host.spawned == [sampler_argv("/w/telemetry-ab.txt", 120, pool="tank")] and host.left_running == []
    assert ["sh", "-c", SAMPLER_SCRIPT, "sh", "/w/telemetry-ab.txt", "1", "0", "tank"] in host.commands  # the end's state
    assert set(got) == {"disk", "cpu", "zpool"}
    assert got["zpool"]["write_mb_s"] == [200.0, 100.0] and got["zpool"]["scan"] == "scrub" and got["zpool"]["txg_timeout_s"] == 5
    assert not [f for f in host.files if f.startswith("/w/telemetry-ab")]
    # zpool iostat wrote nothing (no such pool): disk and cpu still, the state alone
    host = ZfsHost(iostat=None, scans=("none",))
    host.dirs.add("/w")
    host.files["/pool/v.raw"] = b""
    s = Sampler(host, "/pool/v.raw", "/w", "cd", 120, zfs_pool="tank")
    s.start()
    got = s.stop()
    assert set(got) == {"disk", "cpu", "zpool"} and got["zpool"]["t_s"] == [] and got["zpool"]["scan"] == "none"
    assert not [f for f in host.files if f.startswith("/w/telemetry-cd")] and host.left_running == []


FAKE_ZPOOL = r"""#!/bin/sh
# a stand-in for zpool: "status POOL" and "iostat -Hpv -T u POOL IV COUNT" only
case "$1" in
status)
  [ "$2" = tank ] || { echo "cannot open '$2': no such pool" >&2; exit 1; }
  printf '  pool: tank\n state: ONLINE\n  scan: scrub in progress since Mon Jun 10 10:00:00 2024\n'
  printf '\t1.00G / 2.00G scanned, 0.5G issued\nconfig:\n\n\tNAME STATE\n\ttank ONLINE\n\nerrors: No known data errors\n';;
iostat)
  [ "$2 $3 $4 $5" = "-Hplv -T u tank" ] || { echo "unexpected: $*" >&2; exit 2; }
  i=0
  while [ "$i" -lt "$7" ]; do
    date +%s
    printf 'tank\t100\t200\t%d\t4\t%d\t2000000\nsda\t0\t0\t1\t4\t1000000\t2000000\n' "$i" "$((i * 1000000))"
    i=$((i + 1))
    [ "$i" -lt "$7" ] && sleep "$6"
  done;;
*) exit 2;;
esac
"""


@pytest.fixture
def fake_zpool(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "zpool").write_text(FAKE_ZPOOL)
    (bin_dir / "zpool").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return bin_dir


def test_the_real_script_with_a_pool_stops_by_itself_and_when_killed(tmp_path, fake_zpool):
    out = tmp_path / "t.txt"
    local = LocalTransport()
    proc = local.spawn(sampler_argv(str(out), 2, pool="tank"))
    proc.wait(timeout=30)  # stops by itself after max seconds, and stops zpool iostat
    assert proc.returncode == 0 and _live_in_group(proc.pid) == []
    samples = parse_samples(out.read_text())
    assert len(samples) >= 2
    scan, txg = parse_zfs_state(out.read_text())
    assert scan == "scrub" and txg == (int(Path("/sys/module/zfs/parameters/zfs_txg_timeout").read_text())
                                       if Path("/sys/module/zfs/parameters/zfs_txg_timeout").exists() else None)
    start, reports = parse_zpool_iostat((tmp_path / "t.txt.zpool").read_text())
    assert start is not None and reports and reports[0].rows[0].name == "tank"
    assert (tmp_path / "t.txt.zerr").read_text() == ""
    proc = local.spawn(sampler_argv(str(tmp_path / "u.txt"), 600, pool="tank"))
    time.sleep(1.5)
    local.kill(proc)
    assert _live_in_group(proc.pid) == []  # the sampler, zpool iostat and their sleeps
    assert parse_zpool_iostat((tmp_path / "u.txt.zpool").read_text())[0] is not None
    subprocess.run(sampler_argv(str(tmp_path / "v.txt"), 0, pool="nosuch"), check=True, timeout=30)  # one sample
    assert parse_zfs_state((tmp_path / "v.txt").read_text()) == (None, parse_zfs_state(out.read_text())[1])
    assert not (tmp_path / "v.txt.zpool").exists()  # no zpool iostat for a single sample


def test_the_real_script_without_zpool_still_samples(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    if shutil.which("zpool", path="/usr/bin:/bin:/usr/sbin:/sbin"):
        pytest.skip("this machine has zpool")
    proc = LocalTransport().spawn(sampler_argv(str(tmp_path / "t.txt"), 1, pool="tank"))
    proc.wait(timeout=30)
    assert proc.returncode == 0 and len(parse_samples((tmp_path / "t.txt").read_text())) >= 2
    assert parse_zfs_state((tmp_path / "t.txt").read_text())[0] is None
    assert "zpool" in (tmp_path / "t.txt.zerr").read_text()  # "zpool: not found"


def test_sampler_over_local_with_the_fake_zpool(tmp_path, fake_zpool):
    target = tmp_path / "target"
    target.write_bytes(b"x")
    s = Sampler(LocalTransport(), str(target), str(tmp_path), "5a5a", 300, zfs_pool="tank")
    s.start()
    time.sleep(2.5)
    got = s.stop()
    assert {"disk", "cpu", "zpool"} <= set(got)
    assert got["zpool"]["scan"] == "scrub" and got["zpool"]["t_s"] and got["zpool"]["write_mb_s"][0] == 2.0
    assert "sda" in got["zpool"]["vdevs"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "target"]  # every file removed


def test_where_passes_the_pool_to_run_fio(monkeypatch):
    class Stop(Exception):
        pass

    seen = {}

    def spy(transport, request, progress=None):
        seen.update(vars(request.sampling))
        raise Stop

    monkeypatch.setattr(measure, "run_fio", spy)
    s = parse_scenario("name: z\njobs:\n  - {name: j1, rw: write, bs: 1M, size: 16M, runtime: 1s, ramp: 0s}\n", "z.yaml")
    m = Measurer(s, None, 1, 1, RecordingProgress())  # type: ignore[arg-type]
    step = Step(side="host", boot=1, cell=None, stack=None, layer="host", depth=0, job="j1", repeat=1)
    with pytest.raises(Stop):
        m._run(Where(FakeHost(), "host", "/w", "/dev/zvol/tank/v", "host", zfs_pool="tank"), step)
    assert seen["zfs_pool"] == "tank"
    with pytest.raises(Stop):
        m._run(Where(FakeHost(), "host", "/w", "/dev/sdb", "host"), step)
    assert seen["zfs_pool"] is None


# ---- figures, flags, columns --------------------------------------------------------------------------


def m(side, cell, job, rw, mb_s, tel=None, runtime=60.0, repeat=1):
    row = {"side": side, "cell": cell, "stack": None, "layer": "host" if side == "host" else "raw", "job": job, "iops": mb_s,
           "bw_bytes": mb_s * 1e6, "clat_bins": {"1000": 1}, "job_hash": "h", "sync": False, "repeat": repeat, "settings": {},
           "job_params": {"rw": rw, "runtime": runtime, "ramp": 2.0, "jobfile": None}}
    if tel is not None:
        row["telemetry"] = tel
    return row


ZFS_HOST = {"read_mb_s": 500.0, "write_mb_s": 0.0, "cpu_busy": 20.0, "cpu_idle": 80.0, "pool_read_mb_s": 480.0,
            "pool_write_mb_s": 0.5, "arc_hit_ratio": 0.25, "arc_size_mb": 4000.0, "scan": "none", "txg_timeout_s": 5}


def test_figures_average_the_repeats():
    rows = [m("host", None, "w", "write", 100.0, dict(ZFS_HOST, pool_write_mb_s=40.0, arc_hit_ratio=0.5), repeat=1),
            m("host", None, "w", "write", 100.0, dict(ZFS_HOST, pool_write_mb_s=60.0, arc_hit_ratio=None, scan="scrub",
                                                      txg_timeout_s=10), repeat=2)]
    f = aggregate(as_measurements(rows))
    assert (f.pool_write_mb_s, f.pool_read_mb_s, f.arc_hit_ratio, f.arc_size_mb) == (50.0, 480.0, 0.5, 4000.0)
    assert (f.scan, f.txg_timeout_s, f.write_ampl) == ("scrub", 10, 0.5)
    assert aggregate(as_measurements([m("host", None, "r", "read", 100.0, ZFS_HOST)])).write_ampl is None  # reads: no amplification
    plain = aggregate(as_measurements([m("host", None, "r", "read", 100.0)]))
    assert plain.pool_read_mb_s is None and plain.scan is None and plain.write_ampl is None


def fig(**kw) -> Figures:
    base = dict(iops=1.0, mb_s=100.0, p50_ms=None, p95_ms=None, p99_ms=None, p999_ms=None, repeats=1, cv=None, job_hash="h")
    return Figures(**{**base, **kw})


def test_read_served_from_cache_judged_by_the_pool_on_zfs():
    read = m("host", None, "r", "read", 100.0)
    # a zvol's device "read" 100 MB/s (ARC hits included), the pool 2: cached
    f = fig(dev_read_mb_s=100.0, pool_read_mb_s=2.0, arc_hit_ratio=0.98, txg_timeout_s=5)
    assert telemetry_notes(as_measurement(read), f) == ["served from cache? (pool reads 2.00 MB/s of fio's 100.0, ARC hit 98%)"]
    # the device read nothing but the pool read it all: not from a cache
    assert telemetry_notes(as_measurement(read), fig(dev_read_mb_s=0.0, pool_read_mb_s=95.0, txg_timeout_s=5)) == []
    # no pool series: the device decides, as before; ARC named when known
    assert telemetry_notes(as_measurement(read), fig(dev_read_mb_s=1.0)) == ["served from cache? (device reads 1.00 MB/s)"]
    assert telemetry_notes(as_measurement(read), fig(dev_read_mb_s=1.0, arc_hit_ratio=0.5)) == ["served from cache? (device reads 1.00 MB/s, ARC hit 50%)"]
    assert telemetry_notes(as_measurement(read), fig(dev_read_mb_s=CACHE_SHARE * 100 + 0.1)) == []


def test_write_flag_steady_state_and_scrub():
    write = m("host", None, "w", "randwrite", 100.0, runtime=10.0)
    f = fig(pool_write_mb_s=20.0, pool_read_mb_s=0.0, txg_timeout_s=5, scan="scrub", cpu_idle=5.0)
    assert telemetry_notes(as_measurement(write), f) == [
        "pool wrote 20.0 MB/s of fio's 100.0: compressed or not yet flushed?",
        "CPU-bound? (5% idle)",
        "shorter than steady state (runtime 10 s < 3 x zfs_txg_timeout of 5 s)",
        "scrub running during the run",
    ]
    ok = fig(pool_write_mb_s=POOL_WRITE_SHARE * 100 + 1, txg_timeout_s=5, scan="none")
    assert telemetry_notes(as_measurement(m("host", None, "w", "write", 100.0, runtime=STEADY_TXGS * 5)), ok) == []
    assert telemetry_notes(as_measurement(write), fig(pool_write_mb_s=1.0, scan="resilver"))[-2:] == [
        "shorter than steady state (runtime 10 s < 3 x zfs_txg_timeout of 5 s, OpenZFS's default)",
        "resilver running during the run"]
    # not ZFS: no pool or steady-state flags; a job file: no rw, no runtime to judge
    assert telemetry_notes(as_measurement(write), fig()) == []
    jobfile = dict(write, job_params={"rw": "randread", "runtime": 10.0, "jobfile": {"path": "x.fio", "sha256": "0"}})
    assert telemetry_notes(as_measurement(jobfile), fig(pool_write_mb_s=1.0, pool_read_mb_s=0.0, txg_timeout_s=5)) == []


def test_columns_and_notes_in_the_tables():
    cells = [{"name": "baseline", "stacks": [], "settings": {}, "valid": True}]
    meas = [m("host", None, "w", "write", 100.0, dict(ZFS_HOST, pool_read_mb_s=0.0, pool_write_mb_s=130.0, arc_hit_ratio=0.9)),
            m("guest", "baseline", "w", "write", 90.0, {"read_mb_s": 0.0, "write_mb_s": 90.0, "cpu_busy": 30.0, "cpu_idle": 70.0})]
    t = gap_table(as_measurements(meas), as_cells(cells), ["w"], repeats=1)
    headers = [c.header for c in t.columns]
    assert headers[headers.index("dev MB/s r/w"):headers.index("dev MB/s r/w") + 5] == [
        "dev MB/s r/w", "CPU %", "pool MB/s r/w", "write ampl.", "ARC hit %"]
    host, guest = t.records
    assert (host["pool_write_mb_s"], host["write_ampl"], host["arc_hit_pct"]) == (130.0, 1.3, 90.0)
    assert "pool_read_mb_s" not in guest and "arc_hit_pct" not in guest
    text = render([t], Format.TABLE, wide=True)
    assert "0.00/130.0" in text and "1.30x" in text and " 90 " in text
    assert any("write ampl. = pool MB/s written" in n for n in t.notes)
    assert not host["note"]  # 130 of 100 written; 60 s >= 3 x 5 s; no scrub
    # no ZFS anywhere: none of the three columns, nor their note
    plain = gap_table(as_measurements([dict(x, telemetry={"read_mb_s": 1.0, "write_mb_s": 1.0, "cpu_busy": 1.0, "cpu_idle": 99.0}) for x in meas]),
                      as_cells(cells), ["w"], repeats=1)
    assert not {"pool MB/s r/w", "write ampl.", "ARC hit %"} & {c.header for c in plain.columns}
    assert not any("write ampl." in n for n in plain.notes) and any("dev MB/s r/w" in n for n in plain.notes)
    # a read job: pool column and ARC, no amplification
    r = gap_table(as_measurements([m("host", None, "r", "read", 100.0, ZFS_HOST)]), as_cells(cells), ["r"], repeats=1)
    assert {"pool MB/s r/w", "ARC hit %"} <= {c.header for c in r.columns} and "write ampl." not in {c.header for c in r.columns}
    stacked = [dict(cells[0], stacks=["s"])]
    lt = layer_table(as_measurements(meas + [dict(meas[1], stack="s", layer="partition", depth=1)]), as_cells(stacked), ["w"], repeats=1)
    assert lt is not None and "pool MB/s r/w" in [c.header for c in lt.columns]


# ---- stored series -> report, HTML timelines -------------------------------------------------------------

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "results-v1.db"


@pytest.fixture
def db(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "r.db")
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def test_stored_zfs_series_reach_the_report_and_the_timelines(db):
    start, reports = parse_zpool_iostat(IOSTAT)
    zpool = zpool_series(start, reports, "scrub", 5)
    arc = {"t_s": [1.0, 2.0], "hits": [90, 10], "misses": [10, 0], "hit_ratio": [0.9, 1.0], "size_bytes": [4e9, 4e9],
           "c_max_bytes": 8e9, "c_min_bytes": 1e9}
    host = [r for r in db.rows("measurements", 1) if r["side"] == "host"]
    assert host
    for row in host:
        for source, s in (("zpool", zpool), ("arc", arc)):
            db.add_telemetry(as_series(run_id=1, measurement_id=row["id"], source=source, series=s))
    measurements = with_telemetry(db.measurements(1), db.series(1))
    tel = {k: v for k, v in asdict(next(x for x in measurements if x.side == "host").telemetry).items() if v is not None}
    assert tel == {"pool_read_mb_s": 2.0, "pool_write_mb_s": 150.0, "scan": "scrub", "txg_timeout_s": 5,
                   "arc_hit_ratio": pytest.approx(100 / 110), "arc_size_mb": 4000.0,
                   "vdev_write_mb_s": {"mirror-0": 150.0, "sda": 75.0, "sdb": 75.0, "nvme0n1": 0.0123, "nvme1n1": 0.0}}
    header, tables = build_report(load_run(db, 1))
    gaps = tables[0]
    assert {"pool MB/s r/w", "ARC hit %"} <= {c.header for c in gaps.columns}
    assert all("scrub running during the run" in r["note"] for r in gaps.records if r["side"] == "host")
    page = render_html(load_run(db, 1))
    timeline = re.search(r'<section id="plot-timeline">(.*?)</section>', page, re.S).group(1)
    assert "pool-write host: 2 points" in timeline and "arc-hit host: 2 points" in timeline
    assert plain_lines("zpool", {"t_s": [], "read_mb_s": [], "write_mb_s": []})[0][1]["values"] == []
    assert plain_lines("arc", {"t_s": [1], "hit_ratio": [None]}) == [("arc-hit", {"t_s": [1], "values": [None], "unit": "%"})]
    assert json.loads(json.dumps(zpool)) == zpool  # stored as JSON as it is


def test_a_guest_gap_table_on_zfs_states_the_zfs_facts_and_json_carries_them():
    from tests.unit.test_zfs_facts import text as captured
    from vmbench.report.render import render as render_any
    cells = [{"name": "baseline", "stacks": [], "settings": {"memory_mib": 1024, "cache": "none"}, "valid": True,
              "evidence": {"storage": {"volumes": {"s.raw": {"zfs_name": "tank/parent/vol",
                                                             "readback": {"sync": "disabled", "compression": "lz4"},
                                                             "sources": {"sync": "inherited from tank/parent",
                                                                         "compression": "local"}}}}}}]
    meas = [m("host", None, "w", "write", 100.0, dict(ZFS_HOST, pool_write_mb_s=130.0, arc_hit_ratio=0.9)),
            m("guest", "baseline", "w", "write", 90.0, dict(ZFS_HOST, pool_write_mb_s=95.0, arc_hit_ratio=0.8))]
    env = {"zfs_pool": "tank", "zpool_list": captured("zpool-list-vHp.txt"), "host_memory_mib": 2048,
           "arc": {"size_bytes": 64 << 20, "c_max_bytes": 1 << 30}}
    t = gap_table(as_measurements(meas), as_cells(cells), ["w"], repeats=1, env=as_environment(env))
    assert t.facts["ZFS ARC"] == "64 MiB of max 1,024 MiB, host RAM 2,048 MiB; hit 80..90% while fio ran"
    assert t.facts["ZFS pool"].startswith("tank 0% full, 0% fragmented, ONLINE; log /var/tmp/slog.img")
    assert t.facts["ZFS volume"] == ("compression=lz4, sync=disabled (from tank/parent); "
                                     "WARNING: sync=disabled inherited from tank/parent: sync writes are acknowledged before they are safe")
    doc = json.loads(render_any([t], Format.JSON))
    assert doc["tables"][0]["facts"]["ZFS volume"] == t.facts["ZFS volume"]
    assert re.search(r"ZFS volume: +compression=lz4, sync=disabled \(from tank/parent\)", render_any([t], Format.TABLE, wide=True))
