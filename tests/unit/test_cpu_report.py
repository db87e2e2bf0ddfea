"""The CPU per I/O table and plot of issue 17 (vmbench/report/cpurows.py, cputables.py): runs built
through the ResultsDB API with qemu-cpu telemetry rows made by CpuPerIo.to_json() (from chosen
per-class figures, and from the real /proc captures of test_qemu_cpu), checked against figures
computed here: medians, fio's own CPU per I/O, the QEMU total's difference from the baseline
with its interval and verdict, the notes (TCG, idle, rate, perf), perf's cycles per I/O or why
not, the host's ZFS kernel threads where there are any, saturated cells left out,
no table for runs without qemu-cpu rows, and the HTML plot."""

from __future__ import annotations

import re
import statistics

import pytest

from tests.unit.test_html import Balance, section
from tests.unit.test_qemu_cpu import TCG_0, TCG_1, TCG_2, snap
from tests.records import as_boot, as_cell, as_measurement, as_series, store
from vmbench.report.build import build_report
from vmbench.report.cpurows import cpu_rows, difference, fio_cpu_us_per_io
from vmbench.report.cputables import cpu_table
from vmbench.report.html import render_html
from vmbench.report.load import load_run
from vmbench.report.render import Format, render
from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.telemetry import qemu_cpu as q
from vmbench.telemetry.perf import PerfCycles
from vmbench.telemetry.zfs_threads import ZfsCpu
from vmbench.telemetry.qemu_cpu import ThreadClass as C
from vmbench.results.runrow import RunRow

ENV = {"hostname": "kvm1", "host_kernel": "6.1", "host_cpu": "EPYC", "qemu_version": "7.2", "host_fio": "fio-3.33",
       "accelerator": "kvm", "host_memory_mib": 65536}
JOB = {"name": "4k-randread", "rw": "randread", "bs": 4096, "iodepth": 4, "size": 64 << 20, "direct": True, "runtime": 10.0,
       "ramp": 2.0, "numjobs": 1, "jobfile": None, "rate_iops": 1000}
FREE = {k: v for k, v in JOB.items() if k != "rate_iops"}
IOS = 12_000.0  # 1,000 IOPS x (2 s ramp + 10 s runtime)
IDLE = q.IdleRate(10.0, {c: q.ClassRate(0.002, 0.001, 5.0, 1.0) for c in C}, 0.004)


def cpu_row(*, vcpu: float, iothread: float = 0.0, main: float = 0.0, worker: float = 0.0, other: float = 0.0,
            exited: float = 0.0, rest: float = 0.0, accel: str | None = "KVM", guest_s: float | None = 0.6,
            idle: q.IdleRate | None = IDLE, switches: int = 0) -> dict:
    """A qemu-cpu row whose idle-subtracted figures are the given µs/IO: each class's time is
    its figure times IOS plus the idle share (0.03 s user, 0.01 s system over 10 s); every live
    class has ``switches`` voluntary and as many involuntary switches on top of the idle's 60."""
    elapsed = 12.0
    classes = {}
    for cls, us in ((C.VCPU, vcpu), (C.IOTHREAD, iothread), (C.MAIN, main), (C.WORKER, worker), (C.OTHER, other), (C.EXITED, exited)):
        net = us * IOS / 1e6
        if idle is None:
            classes[cls] = q.ClassCost(1, net, 0.0, None if cls is C.EXITED else switches, None if cls is C.EXITED else switches)
        else:
            classes[cls] = q.ClassCost(1, net + 0.024, 0.012, None if cls is C.EXITED else switches + 60,
                                       None if cls is C.EXITED else switches + 12, idle_user_s=0.024, idle_system_s=0.012,
                                       idle_voluntary=0.0 if cls is C.EXITED else 60.0, idle_involuntary=0.0 if cls is C.EXITED else 12.0)
    process_user = sum(c.user_s for c in classes.values())
    process_system = sum(c.system_s for c in classes.values())
    idle_rest = 0.048 if idle is not None else 0.0
    got = q.CpuPerIo(pid=4242, ios=IOS, elapsed_s=elapsed, clk_tck=100, accel=accel, classes=classes, threads=(),
                     process_user_s=process_user, process_system_s=process_system, children_s=0.0,
                     host_busy_s=process_user + process_system + rest * IOS / 1e6 + idle_rest, idle_host_rest_s=idle_rest,
                     guest_busy_s=guest_s, idle=idle)
    return got.to_json()


def fio(iops: float, usr: float, sys_: float, runtime_ms: int = 10_000) -> dict:
    return {"jobs": [{"jobname": "4k-randread", "usr_cpu": usr, "sys_cpu": sys_, "job_runtime": runtime_ms,
                      "read": {"iops": iops, "total_ios": int(iops * runtime_ms / 1000), "bw_bytes": iops * 4096},
                      "write": {"iops": 0.0, "total_ios": 0, "bw_bytes": 0}}]}


def new_run(db: ResultsDB, cells: dict[str, list[tuple[float, dict | None]]], *, job: dict = JOB, accel: str = "kvm",
            host_fio: tuple[float, float] = (5.0, 15.0)) -> int:
    """A run of ``cells`` (name -> per repeat (IOPS, qemu-cpu row or None)), one host reference."""
    names = list(cells)
    repeats = max(len(v) for v in cells.values())
    plan = {"repeats": repeats, "jobs": [dict(job)], "cells": [{"name": n, "host_cell": None} for n in names], "targets": []}
    rid = db.start_run(RunRow.starting(tag=f"t{len(db.runs()) + 1}", scenario_name="cpu", scenario_path="cpu.yaml", scenario_text="cpu: {}",
                                       plan=plan, version="test"))
    db.set_environment(rid, Environment(dict(ENV, accelerator=accel)))
    common = dict(depth=0, job_params_json=job, job_hash="h1", sync=False, target="/dev/vdb", argv_json=["fio"],
                  started_at="2026-01-01T00:00:00", clat_bins_json={"100000": 99, "2000000": 1})
    for r in range(1, 4):
        store(db, rid, MeasurementKey("host", None, None, "host", job["name"], r), cell_id=None, settings_json={},
                           accelerator="host", iops=1000.0, bw_bytes=1000.0 * 4096, fio_json=fio(1000.0, *host_fio), **common)
    for seq, name in enumerate(names, 1):
        boot = db.add_boot(as_boot(run_id=rid, seq=seq, vm_key=name, settings_json={"cache": "none"}, domain_name=f"d{seq}", accelerator=accel))
        cell = db.add_cell(as_cell(run_id=rid, boot_id=boot, seq=seq, name=name, settings_json={"cache": "none", "memory_mib": 1024},
                           changed_json=[], stacks_json=[], valid=True))
        for r, (iops, row) in enumerate(cells[name], 1):
            mid = store(db, rid, MeasurementKey("guest", name, None, "raw", job["name"], r), cell_id=cell, boot_id=boot,
                                     settings_json={"cache": "none"}, accelerator=accel, iops=iops, bw_bytes=iops * 4096,
                                     fio_json=fio(iops, 10.0, 20.0), **common)
            if row is not None:
                db.add_telemetry(as_series(run_id=rid, measurement_id=mid, source="qemu-cpu", series=row))
    db.finish_run(rid, "ok")
    return rid


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


BASE = [(1000.0, cpu_row(vcpu=v, main=m, worker=3.0, other=1.0, exited=0.5, rest=r, switches=s))
        for v, m, r, s in ((20.0, 12.0, 6.0, 2400), (22.0, 10.0, 7.0, 3600), (21.0, 11.0, 5.0, 1200))]
IOTHREAD = [(1000.0, cpu_row(vcpu=v, iothread=i, main=1.0, worker=3.0, other=1.0, rest=5.0))
            for v, i in ((20.0, 4.0), (21.0, 5.0), (19.0, 4.5))]


def table(db, rid=None):
    data = load_run(db, rid or "latest")
    return build_report(data)[1], data


def test_medians_fio_reference_and_the_delta_with_its_verdict(db):
    new_run(db, {"baseline": BASE, "iothread=on": IOTHREAD})
    tables, data = table(db)
    assert [t.name for t in tables[:2]] == ["gaps", "cpu-per-io"]  # right after the gap table
    t = tables[1]
    base, io = t.records
    assert (base["cell"], base["layer"], base["accel"], base["repeats"]) == ("baseline", "raw", "KVM", 3)
    assert base["vcpu_us"] == pytest.approx(21.0) and base["main_us"] == pytest.approx(11.0)
    assert base["iothread_us"] == pytest.approx(0.0) and base["worker_us"] == pytest.approx(3.0)
    assert base["other_us"] == pytest.approx(1.5)  # other + exited
    assert base["qemu_us"] == pytest.approx(statistics.median([20 + 12 + 4.5, 22 + 10 + 4.5, 21 + 11 + 4.5]))
    assert base["host_rest_us"] == pytest.approx(6.0)
    assert base["qemu_samples"] == pytest.approx([36.5, 36.5, 36.5])
    assert base["vcpu_samples"] == pytest.approx([20.0, 22.0, 21.0])
    # switches: 5 live classes x 2 x s per repeat, over 12,000 I/Os (the idle's taken off)
    assert base["switches_per_io"] == pytest.approx(10 * 2400 / IOS)
    assert base["guest_us"] == pytest.approx(0.6e6 / IOS)
    # fio's own CPU: (usr + sys)% of 10 s over 10,000 I/Os
    assert base["guest_fio_us"] == pytest.approx(0.30 * 10.0 * 1e6 / 10_000) == 300.0
    assert base["host_fio_us"] == pytest.approx(0.20 * 10.0 * 1e6 / 10_000) == 200.0
    assert base["accounted_share"] == 0.0  # no threads in these rows
    assert base["idle_qemu_us"] == pytest.approx(6 * 0.036 * 1e6 / IOS)
    assert base["vs_baseline"] is None and base["is_baseline"] and base["deltas"] == {}
    # iothread=on: QEMU 20+4+1+3+1 = 29, 31, 28.5 against 36.5 x 3
    assert io["qemu_us"] == pytest.approx(29.0)
    assert io["vs_baseline"] == pytest.approx(29.0 - 36.5)
    assert (io["vs_baseline_low"], io["vs_baseline_high"]) == (pytest.approx(28.5 - 36.5), pytest.approx(31.0 - 36.5))
    assert io["vs_baseline_verdict"] == "cheaper" and io["baseline"] == "baseline"
    assert io["deltas"]["iothread"]["verdict"] == "costlier" and io["deltas"]["vcpu"]["verdict"] == "within noise"
    assert io["deltas"]["main"]["verdict"] == "cheaper"
    assert "iothread: +4.5 µs/IO [+4.0, +5.0], costlier" in io["changes"]
    assert "main loop: -10.0 µs/IO [-11.0, -9.0], cheaper" in io["changes"] and "vCPU" not in io["changes"]
    text = render([t], Format.TABLE, wide=True)
    assert "-7.5 µs/IO [-8.0, -5.5], cheaper" in text
    header = text.splitlines()[2]
    for col in ("vCPU µs/IO", "iothread µs/IO", "main loop µs/IO", "workers µs/IO", "other+exited µs/IO", "QEMU total µs/IO",
                "QEMU vs baseline", "host rest µs/IO", "switches/IO", "guest µs/IO", "guest fio µs/IO", "host fio µs/IO",
                "accounted", "repeats", "by figure vs baseline"):
        assert col in header, col
    assert "cgroup µs/IO" not in header  # no row has a cgroup
    assert any(n.startswith("[low, high] = 95% bootstrap interval of the difference of medians") for n in t.notes)
    assert "I/Os = measured IOPS × (ramp + runtime): the load is the job's fixed rate (4k-randread at 1,000 IOPS), " \
           "the same in every cell." in t.notes
    assert "QEMU cycles/IO: not measured (no perf count stored in this run)." in t.notes
    assert "ZFS threads µs/IO" not in header and not any(n.startswith("ZFS threads =") for n in t.notes)  # no ZFS
    assert "Accelerator: KVM (from the vCPU threads' names)." in t.notes
    assert not any(n.startswith("Under TCG") for n in t.notes)
    idle = next(n for n in t.notes if n.startswith("The idle VM's CPU"))
    assert "measured before the jobs for 10 s" in idle and "18.0 µs/IO of the QEMU process" in idle and "4.0 µs/IO of the rest" in idle
    # RunData carries each measurement's row by key
    key = MeasurementKey("guest", "baseline", None, "raw", "4k-randread", 2)
    assert data.qemu_cpu[key]["classes"]["vcpu"]["us_per_io"] == pytest.approx(22.0)


def test_difference_is_the_bootstrap_of_medians_with_stats_rules():
    d = difference([1.0, 2.0, 3.0], [5.0, 6.0, 7.0])
    assert (d.value, d.low, d.high, d.verdict) == (-4.0, -6.0, -2.0, "cheaper")
    assert difference([5.0, 6.0, 7.0], [1.0, 2.0, 3.0]).verdict == "costlier"
    assert difference([1.0, 5.0, 3.0], [2.0, 4.0, 3.0]).verdict == "within noise"
    few = difference([1.0, 2.0], [5.0, 6.0, 7.0])
    assert (few.value, few.verdict, few.why) == (-4.5, None, "fewer than 3 repeats")
    flat = difference([2.0] * 3, [3.0] * 3)
    assert (flat.low, flat.high, flat.verdict) == (-1.0, -1.0, "cheaper")


def test_fewer_repeats_have_no_verdict_and_say_so(db):
    new_run(db, {"baseline": BASE[:2], "iothread=on": IOTHREAD[:2]})
    t = table(db)[0][1]
    io = t.records[1]
    assert io["vs_baseline_verdict"] is None and io["vs_baseline_why"] == "fewer than 3 repeats"
    assert "(no verdict: fewer than 3 repeats)" in render([t], Format.TABLE, wide=True)
    assert any("Differences carry no verdict where a side has fewer than 3 repeats" in n and "as few as 2" in n for n in t.notes)


def test_tcg_is_named_and_its_vcpu_share_explained(db):
    rows = [(1000.0, cpu_row(vcpu=900.0 + i, main=30.0, accel="TCG")) for i in range(3)]
    new_run(db, {"baseline": rows}, accel="tcg")
    t = table(db)[0][1]
    assert t.records[0]["accel"] == "TCG"
    assert "Under TCG the vCPU share is mostly instruction emulation; the split of the rest stays meaningful." in t.notes
    assert "Accelerator: TCG (from the vCPU threads' names)." in t.notes
    assert "QEMU vs baseline" not in [c.header for c in t.columns]  # one cell: nothing to compare


def test_saturated_cells_are_flagged_and_left_out(db):
    short = [(800.0, row) for _, row in IOTHREAD]
    new_run(db, {"baseline": BASE, "iothread=on": short, "aio=threads": IOTHREAD})
    t = table(db)[0][1]
    base, sat, ok = t.records
    assert sat["saturated"] == "saturated (achieved 800 of 1,000 IOPS)"
    assert sat["note"] == "saturated (achieved 800 of 1,000 IOPS): left out of the comparison"
    assert sat["vs_baseline"] is None and sat["deltas"] == {} and sat["changes"] == ""
    assert ok["vs_baseline_verdict"] == "cheaper"
    assert any(n.startswith("saturated (achieved X of Y)") for n in t.notes)
    # a saturated baseline: nothing is compared with it
    new_run(db, {"baseline": [(800.0, row) for _, row in BASE], "iothread=on": IOTHREAD})
    base, io = table(db)[0][1].records
    assert io["vs_baseline"] is None and io["note"] == "baseline saturated: not compared"


def test_a_job_without_a_fixed_rate_says_its_figures_are_not_comparable(db):
    new_run(db, {"baseline": BASE, "iothread=on": IOTHREAD}, job=FREE)
    t = table(db)[0][1]
    assert ("4k-randread is not fixed-rate: I/Os = measured IOPS × (ramp + runtime), and the figures are per I/O at whatever "
            "rate each cell reached; they are not comparable across cells unless the rate was fixed.") in t.notes
    assert not any(n.startswith("I/Os = measured IOPS") for n in t.notes)


def test_repeats_without_a_row_and_no_idle_measurement_are_stated(db):
    rows = [(1000.0, cpu_row(vcpu=20.0, idle=None)), (1000.0, None), (1000.0, cpu_row(vcpu=24.0, idle=None))]
    new_run(db, {"baseline": rows})
    t = table(db)[0][1]
    rec = t.records[0]
    assert rec["repeats"] == 2 and rec["vcpu_us"] == pytest.approx(22.0)
    assert rec["note"] == "QEMU sampled in 2 of 3 repeats"
    assert any(n.startswith("No idle measurement of the VM was stored: nothing was subtracted") for n in t.notes)


def test_real_rows_from_proc_captures(db):
    idle = q.idle_rate(snap(TCG_0), snap(TCG_1))
    got = q.account(snap(TCG_1), snap(TCG_2), ios=1000, idle=idle, guest_busy_s=0.5).to_json()
    new_run(db, {"baseline": [(1000.0, got)]}, accel="tcg")
    rec = table(db)[0][1].records[0]
    assert rec["qemu_us"] == pytest.approx(got["process"]["us_per_io"])
    assert rec["vcpu_us"] == pytest.approx(got["classes"]["vcpu"]["us_per_io"])
    assert rec["other_us"] == pytest.approx(got["classes"]["other"]["us_per_io"] + got["classes"]["exited"]["us_per_io"])
    assert rec["host_rest_us"] == pytest.approx(got["host"]["rest_us_per_io"])
    assert rec["cgroup_us"] == pytest.approx(got["cgroup"]["us_per_io"])
    assert rec["guest_us"] == pytest.approx(500.0)
    assert rec["accounted_share"] == pytest.approx(got["accounted_share"])
    assert rec["accel"] == "TCG"
    t = table(db)[0][1]
    assert "cgroup µs/IO" in [c.header for c in t.columns]
    assert any("measured before the jobs for 4 s" in n for n in t.notes)


def test_old_runs_have_no_cpu_table_and_no_plot(db):
    new_run(db, {"baseline": [(1000.0, None)] * 3, "iothread=on": [(1000.0, None)] * 3})
    tables, data = table(db)
    assert "cpu-per-io" not in [t.name for t in tables]
    assert cpu_table(list(data.measurements), data.valid_cells, data.jobs) is None
    assert cpu_rows(list(data.measurements), data.valid_cells, data.jobs) == []
    page = render_html(data)
    assert 'id="plot-cpu-per-io"' not in page and data.qemu_cpu == {}


def test_html_renders_the_stacked_plot(db):
    new_run(db, {"baseline": BASE, "iothread=on": IOTHREAD, "aio=threads": [(800.0, row) for _, row in IOTHREAD]})
    page = render_html(load_run(db, "latest"))
    parser = Balance()
    parser.feed(page)
    assert not parser.errors and parser.ids.count("plot-cpu-per-io") == 1
    assert '<a href="#plot-cpu-per-io">Plot: CPU per I/O, by where it is spent</a>' in page
    assert '<caption>CPU per I/O</caption>' in page
    cpu = section(page, "plot-cpu-per-io")
    assert cpu.count("<svg") == 1
    assert "4k-randread: host CPU per I/O (KVM, fixed 1,000 IOPS)" in cpu
    caption = re.search(r"<figcaption>(.*?)</figcaption>", cpu, re.S).group(1)
    assert "baseline: vCPU threads 21.0, iothreads 0.000, QEMU main loop 11.0" in caption
    assert "QEMU total 36.5 µs/IO (baseline)" in caption
    assert "iothread=on: " in caption and "QEMU total 29.0 µs/IO (-7.5 µs/IO, cheaper)" in caption
    assert "aio=threads: " in caption and "(saturated: not compared)" in caption


def with_perf(row: dict, perf: PerfCycles) -> dict:
    return dict(row, perf=perf.to_json(row["ios"]))


def test_perf_cycles_per_io_where_counted_and_why_not_where_not(db):
    counted = [(1000.0, with_perf(row, PerfCycles(c, 12.0, idle_cycles=12e6, event="cycles")))
               for (_, row), c in zip(BASE, (3_612_000_000, 3_012_000_000, 3_312_000_000))]
    new_run(db, {"baseline": counted})
    t = table(db)[0][1]
    assert t.records[0]["cycles_per_io"] == pytest.approx((3_312_000_000 - 12e6) / IOS) == 275_000.0
    assert "QEMU cycles/IO" in [c.header for c in t.columns] and "275,000" in render([t], Format.TABLE, wide=True)
    assert ("QEMU cycles/IO = perf stat cycles of the QEMU process over the job's ramp + runtime, the idle VM's cycles "
            "taken off, per I/O.") in t.notes
    # this machine: perf is there, the VM it is has no PMU: no column, the note says why
    why = "perf: cycles <not supported> (no hardware counters: a virtual machine without a virtual PMU)"
    new_run(db, {"baseline": [(1000.0, with_perf(row, PerfCycles(None, 12.0, why=why))) for _, row in BASE]})
    t = table(db)[0][1]
    assert t.records[0]["cycles_per_io"] is None and "QEMU cycles/IO" not in [c.header for c in t.columns]
    assert f"QEMU cycles/IO: not measured: {why}." in t.notes
    assert f"QEMU cycles/IO: not measured: {why}." in render([t], Format.TABLE, wide=True)


def test_the_zfs_threads_part_of_the_host_rest(db):
    def zfs(row: dict, us: float) -> dict:
        z = ZfsCpu(40, 2, 1, 0.0, us * IOS / 1e6 + 0.03, idle_s=0.03)
        return dict(row, host=dict(row["host"], zfs=z.to_json(IOS)))
    new_run(db, {"baseline": [(1000.0, zfs(row, us)) for (_, row), us in zip(BASE, (2.0, 3.0, 2.5))],
                 "iothread=on": [(1000.0, zfs(row, us)) for (_, row), us in zip(IOTHREAD, (4.0, 5.0, 4.5))]})
    t = table(db)[0][1]
    base, io = t.records
    assert base["zfs_us"] == pytest.approx(2.5) and io["zfs_us"] == pytest.approx(4.5)
    assert io["deltas"]["zfs"]["value"] == pytest.approx(2.0) and io["deltas"]["zfs"]["verdict"] == "costlier"
    header = render([t], Format.TABLE, wide=True).splitlines()[2]
    assert "ZFS threads µs/IO" in header and header.index("host rest µs/IO") < header.index("ZFS threads µs/IO")
    assert any(n.startswith("ZFS threads = the part of host rest spent in the host's ZFS kernel threads") for n in t.notes)
    assert "ZFS threads: +2.0 µs/IO [+1.0, +3.0], costlier" in io["changes"]


def test_fio_cpu_per_io():
    assert fio_cpu_us_per_io(fio(1000.0, 10.0, 20.0)) == pytest.approx(300.0)
    two = {"jobs": fio(1000.0, 10.0, 20.0)["jobs"] * 2 + [dict(fio(5.0, 50.0, 50.0)["jobs"][0], jobname="vmbench-tail")]}
    assert fio_cpu_us_per_io(two) == pytest.approx(300.0)  # clones summed, the load tail left out
    assert fio_cpu_us_per_io({}) is None and fio_cpu_us_per_io({"jobs": [{"jobname": "x"}]}) is None
    assert fio_cpu_us_per_io(fio(0.0, 1.0, 1.0)) is None


def test_a_host_whose_counters_lost_ticks_has_no_rest():
    """A host /proc/stat that counted less busy CPU than QEMU's own threads (a VM's counters
    lose ticks): its rest is not known, never a negative µs/IO."""
    from vmbench.report.cpurows import rest_undercounted
    from vmbench.results.cpu import QemuCpuRecord

    def undercounted(row: dict) -> bool:
        return rest_undercounted(QemuCpuRecord.from_row(row))

    short = {"host": {"rest_s": -6.8, "rest_us_per_io": -759.0}}
    assert undercounted(short) and not undercounted({"host": {"rest_s": -0.01}})
    assert not undercounted({"host": {"rest_s": 2.3}}) and not undercounted({})


def test_a_cost_with_the_idle_share_taken_off_never_prints_negative():
    """Issue 26: "other+exited -0.49 µs/IO" (a class that did almost nothing, less the idle
    VM's share) is a cost, never negative: shown as 0."""
    from vmbench.report.cpurows import repeat_figures
    from vmbench.report.load import QEMU_CPU as SOURCE

    m = {"qemu_cpu": {"kind": SOURCE, "ios": 100, "process": {"us_per_io": 6.0},
                      "classes": {"vcpu": {"us_per_io": 5.0}, "main": {"us_per_io": -0.2},
                                  "other": {"us_per_io": -0.7}, "exited": {"us_per_io": 0.21}}}}
    got = repeat_figures(as_measurement(m))
    assert (got["vcpu"], got["main"], got["other"], got["qemu"]) == (5.0, 0.0, 0.0, 6.0)


def test_the_rest_of_the_host_a_tick_under_its_idle_figure_is_0_as_the_notes_say():
    """Issue 41: `--wide` printed "host rest -1.4" µs/IO (and the HTML's CPU table) while the
    notes say every host figure is never below 0: a rest a tick under the idle VM's is 0."""
    from vmbench.report.cpurows import repeat_figures
    from vmbench.report.load import QEMU_CPU as SOURCE

    m = {"qemu_cpu": {"kind": SOURCE, "ios": 12_000, "process": {"us_per_io": 6.0},
                      "host": {"rest_s": -0.017, "rest_us_per_io": -1.4, "zfs": {"us_per_io": -0.1}},
                      "cgroup": {"us_per_io": -0.2}, "classes": {"vcpu": {"us_per_io": 5.0}}}}
    got = repeat_figures(as_measurement(m))
    assert (got["host_rest"], got["zfs"], got["cgroup"], got["qemu"]) == (0.0, 0.0, 0.0, 6.0)
