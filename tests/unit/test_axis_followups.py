"""One row per axis, one place per fact, in the fakes and the report: the fake guest reports
every axis from the table, the fake Proxmox node's QEMU takes detect_zeroes, discard and the
cache flags from the shared definitions, the cells table and the comparison of runs take
their columns and old rows from the axis table, and the report's cache facts and repeat
counts use the Cache enum and MeasurementKey."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from types import SimpleNamespace

import pytest

from tests.fakes import FakeDriver, FakeGuest, FakeGuestTransport, FakePveNode, _cache_flags
from tests.unit.test_axis_table import DEFAULT_SETTINGS, QueuesVm, parse, queues_axis  # noqa: F401 (a fixture)
from tests.records import as_cells, as_environment, as_measurement, as_measurements
from vmbench.drivers.base import VmRequest, VmResources
from vmbench.drivers.qemu_cmdline import disk_readings, parse_cmdline
from vmbench.report.across_runs import compare_runs
from vmbench.report.facts import RepeatPolicy, admissibility
from vmbench.report.rows import cache_notes
from vmbench.report.tables import cells_table
from vmbench.results.db import RunRow
from vmbench.run.evidence import effective_settings, guest_view, problems
from vmbench.scenario.axes import settings_of
from vmbench.scenario.model import VmConfig
from vmbench.settings import Cache, DetectZeroes, Discard

SERIAL = "VMB0a1b2c3dS001"


# ---- tests/fakes.py: FakeGuest.applied from the axis table ------------------------------------


def applied(vm: VmConfig, **changes):
    driver = FakeDriver(applied_changes=changes)
    res = VmResources(name="vmbench-r1-1", scratch_path="/pool/s.raw", scratch_serial=SERIAL, host_target="/pool/s.raw")
    transport = FakeGuestTransport("guest", vm, SERIAL, scratch_size=256 << 20)
    return FakeGuest(driver, VmRequest(1, vm, 256 << 20, ("c",)), res, transport).applied()


def test_fake_guest_reports_what_was_asked_as_before():
    a = applied(VmConfig())
    assert (a.config_source, a.config_bus, a.config_cache, a.config_aio, a.config_format) == \
        ("the fake configuration", "virtio-blk", "none", "threads", "raw")
    assert (a.qemu_cache, a.qemu_format, a.qemu_aio, a.qemu_iothread) == ("none", "raw", "threads", False)
    assert (a.controller, a.cpu_model, a.accelerator, a.volume) == (None, "kvm64", "tcg", "/pool/s.raw")
    assert a.native_config == "<vm name='vmbench-r1-1'/>" and a.qemu_cmdline == ("qemu-system-x86_64", "-name", "vmbench-r1-1")
    assert a.details == {"fake": True}  # detect_zeroes and discard left to the hypervisor: not reported
    assert problems(VmConfig(), effective_settings(a, {}), "tcg") == [
        "bus (the guest) could not be verified", "guest write cache (the guest) could not be verified"]


def test_fake_guest_reports_the_axes_a_cell_gives_and_applied_changes_still_simulate_a_miss():
    vm = replace(VmConfig(), detect_zeroes=DetectZeroes.UNMAP, discard=Discard.UNMAP)
    a = applied(vm)
    zeroes = {"config_detect_zeroes": "unmap", "qemu_detect_zeroes": "unmap", "config_discard": "unmap", "qemu_discard": "unmap"}
    assert a.details == {"fake": True} and {k: a.readings[k] for k in zeroes} == zeroes
    guest = {"guest_bus": "virtio-blk", "guest_write_cache": "write back"}
    assert problems(vm, effective_settings(a, guest), "tcg") == []
    # a setting that did not take: any axis's reading, the oldest and a newer one alike
    missed = applied(vm, qemu_cache="writeback", qemu_detect_zeroes="on")
    assert missed.qemu_cache == "writeback" and missed.readings["qemu_detect_zeroes"] == "on"
    assert problems(vm, effective_settings(missed, guest), "tcg") == [
        "cache: asked none, QEMU's block layer reports writeback",
        "detect_zeroes: asked unmap, the QEMU command line reports on"]
    assert applied(vm, details={"x": 1}).details == {"x": 1} and applied(vm, details={"x": 1}).readings == a.readings


def test_fake_guest_reports_a_new_axis_from_its_row(queues_axis):
    vm = QueuesVm(queues=4)
    a = applied(vm)
    assert a.readings["qemu_queues"] == 4
    assert not [p for p in problems(vm, effective_settings(a, {}), "tcg") if "queues" in p]
    assert "qemu_queues" not in applied(QueuesVm()).readings  # left to the hypervisor


# ---- tests/fakes.py: FakePveNode's QEMU ------------------------------------------------------


class _State:
    """Just enough of tests.fakepve's state for FakePveNode.qemu_argv and its perl QMP client."""

    def __init__(self, vm) -> None:
        self.vms = {vm.vmid: vm}

    def drives(self, config: dict) -> list[tuple[str, dict]]:
        out = []
        for key, value in sorted(config.items()):
            if key.rstrip("0123456789") in ("virtio", "scsi", "sata"):
                file, *opts = str(value).split(",")
                out.append((key, {"file": file, **dict(o.split("=", 1) for o in opts)}))
        return out

    @staticmethod
    def is_disk(drive: dict) -> bool:
        return True

    @staticmethod
    def resolve(volid: str):
        return None, SimpleNamespace(path="/dev/zvol/rpool/data/" + volid.split(":")[1], fmt="raw")

    @staticmethod
    def path_text(storage, vol) -> str:
        return str(vol.path)


def node(version: str, disk: str):
    vm = SimpleNamespace(vmid=100, config={"name": "t", "scsihw": "virtio-scsi-single", "scsi1": f"local-zfs:vm-100-disk-1,{disk}"},
                         run_config=None, running=True, pid=1, started=1.0)
    pve = SimpleNamespace(version=version, node="pve1", state=_State(vm), dispatcher=SimpleNamespace(lock=threading.Lock()))
    return FakePveNode(pve), vm


@pytest.mark.parametrize("version", ["8.4", "9.1"])
@pytest.mark.parametrize("disk, zeroes, discard", [
    (f"serial={SERIAL}", "on", "ignore"),  # PVE's defaults
    (f"serial={SERIAL},detect_zeroes=0", "off", "ignore"),
    (f"serial={SERIAL},discard=on", "unmap", "unmap"),  # detect_zeroes on becomes unmap with discard=on
    (f"serial={SERIAL},discard=on,detect_zeroes=0", "off", "unmap"),
    (f"serial={SERIAL},discard=ignore,detect_zeroes=1", "on", "ignore"),
])
def test_fake_pve_qemu_applies_detect_zeroes_and_discard_as_qemu_server_does(version, disk, zeroes, discard):
    n, vm = node(version, disk)
    got = disk_readings(parse_cmdline(n.qemu_argv(vm)), SERIAL, "scsi1")
    assert (got["qemu_detect_zeroes"], got["qemu_discard"]) == (zeroes, discard)
    block = json.loads(n._cmd_perl(["perl", "-e", "...", "100"], None))["block"]
    assert block[0]["inserted"]["detect_zeroes"] == zeroes


@pytest.mark.parametrize("version", ["8.4", "9.1"])
@pytest.mark.parametrize("cache", [c.value for c in Cache])
def test_fake_pve_cache_flags_come_from_the_cache_enum(version, cache):
    n, vm = node(version, f"serial={SERIAL},cache={cache}")
    assert disk_readings(parse_cmdline(n.qemu_argv(vm)), SERIAL, "scsi1")["qemu_cache"] == cache
    mode = Cache(cache)
    assert _cache_flags(cache) == {"writeback": mode.writeback, "direct": mode.direct, "no-flush": mode.no_flush}
    inserted = json.loads(n._cmd_perl(["perl", "-e", "...", "100"], None))["block"][0]["inserted"]
    assert inserted["cache"] == _cache_flags(cache)
    assert _cache_flags(None) == {"writeback": True, "direct": True, "no-flush": False}  # PVE's default: none


# ---- the report: cells table, comparison of runs, cache facts, repeats -----------------------


def cell(name: str, settings: dict, **kw) -> dict:
    return {"name": name, "settings": settings, "changed": [], "stacks": [], "valid": True, "problems": [], **kw}


def test_cells_table_columns_come_from_the_axis_table():
    t = cells_table(as_cells([cell("a", DEFAULT_SETTINGS), cell("b", {**DEFAULT_SETTINGS, "cache": "writeback"})]))
    assert [c.key for c in t.columns] == ["cell", *DEFAULT_SETTINGS, "changed", "stacks", "valid", "problems"]
    assert [c.header for c in t.columns][1:9] == ["bus", "cache", "iothread", "aio", "cpu", "format", "vcpus", "memory"]
    # a setting left to the hypervisor: a column once some cell gives it; the others read as its default
    t = cells_table(as_cells([cell("a", DEFAULT_SETTINGS), cell("b", {**DEFAULT_SETTINGS, "detect_zeroes": "unmap", "discard": "unmap"})]))
    assert [c.key for c in t.columns][9:11] == ["detect_zeroes", "discard"]
    assert [(r["detect_zeroes"], r["discard"]) for r in t.records] == [("hypervisor default", "hypervisor default"),
                                                                       ("unmap", "unmap")]
    # the host storage's settings are not VM columns
    assert "compression" not in [c.key for c in cells_table(as_cells([cell("a", {**DEFAULT_SETTINGS, "compression": "lz4"})])).columns]


def test_cells_table_shows_a_new_axis(queues_axis):
    s = parse("vm:\n  queues: 4\nvary:\n  queues: [2, 8]\n")
    t = cells_table(as_cells([cell(c.name, settings_of(c.vm)) for c in s.cells] + [cell("old", DEFAULT_SETTINGS)]))
    assert [r["queues"] for r in t.records] == [4, 2, 8, "hypervisor default"]


ENV = {"hostname": "kvm1", "host_kernel": "6.1", "host_cpu": "x", "qemu_version": "7.2", "host_fio": "fio-3.33"}
PARAMS = {"rw": "randwrite", "bs": 4096, "size": 64 << 20, "direct": True, "runtime": 30.0, "ramp": 5.0}


def stored_run(i: int, settings: dict) -> tuple:
    rows = [{"side": side, "cell_id": None if side == "host" else 1, "stack": None, "layer": layer, "depth": 0, "job": "j",
             "iops": 1000.0, "bw_bytes": 1000 * 4096, "clat_bins": {"100000": 1}, "job_hash": "h", "job_params": PARAMS,
             "sync": False, "repeat": r, "accelerator": "host" if side == "host" else "kvm", "settings": settings}
            for side, layer in (("host", "host"), ("guest", "raw")) for r in (1, 2, 3)]
    run = RunRow(id=i, tag=f"r{i}", scenario_name="s", scenario_path="s.yaml", status="ok", started_at="", finished_at=None,
                 error=None, environment=ENV, plan_json={"repeats": 3})
    return run, as_measurements(rows), as_cells([{"id": 1, "name": "base", "valid": True}])


def note(a: dict, b: dict) -> str:
    (table,), _ = compare_runs([stored_run(1, a), stored_run(2, b)], 0)
    return next(r["note"] for r in table.records if r["side"] == "guest")


def test_comparison_reads_old_rows_through_the_axis_table():
    old = dict(DEFAULT_SETTINGS)  # stored before detect_zeroes existed; a new run leaving it to the hypervisor stores the same
    assert note(old, dict(old)) == ""
    assert note(old, {**old, "detect_zeroes": "on"}) == "VM settings differ: detect_zeroes on (B) vs hypervisor default (A)"
    assert note({**old, "discard": "unmap"}, old) == "VM settings differ: discard hypervisor default (B) vs unmap (A)"
    assert note(old, {**old, "cache": "writeback"}) == "VM settings differ: cache writeback (B) vs none (A)"
    assert note({"cache": "none", "x": 1}, {"cache": "none"}) == "VM settings differ: x (not stored) (B) vs 1 (A)"


@pytest.mark.parametrize("cache, noted", [("none", False), ("directsync", False), ("writeback", True),
                                          ("writethrough", True), ("unsafe", True), (None, False), ("bogus", False)])
def test_cache_notes_follow_the_cache_enum(cache, noted):
    row = {"job_params": {"rw": "randread", "size": 1 << 20}, "settings": {} if cache is None else {"cache": cache}}
    assert bool(cache_notes(as_measurement(row), 1 << 30)) is noted
    if noted:
        assert cache_notes(as_measurement(row), 1 << 30) == [f"reads may come from the host page cache (cache={cache})"]


def test_admissibility_counts_repeats_per_measurement_group():
    def m(side, cell, layer, repeat, stack=None):
        return {"side": side, "cell": cell, "stack": stack, "layer": layer, "job": "j", "repeat": repeat,
                "job_params": PARAMS, "sync": False}

    rows = [m("host", None, "host", r) for r in (1, 2, 3)] + [m("guest", "a", "raw", r) for r in (1, 2)]
    rows += [m("guest", "a", "xfs", 1, stack="s")]
    facts, _ = admissibility(as_measurements(rows), as_cells([cell("a", DEFAULT_SETTINGS)]), as_environment({"host_memory_mib": 4096}), RepeatPolicy(1, 3))
    assert facts["repeats"].startswith("1..3 per group")
