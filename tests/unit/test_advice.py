"""vmbench advise (issue 18) on stored runs built through the ResultsDB API: one-factor (with
the fastest setting unsafe), factorial, journey, LUKS layers with a crypto ceiling and
dm-crypt flags, ZFS volblocksize with write amplification; the ranking, the risks, what is
not supported or not tried, "is my number good?", and the report's advice section."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from tests.records import as_boot, as_cell, as_crypto, as_series, store
from vmbench.advice.model import Goal, GoalMetric, Risk
from vmbench.advice.rank import advise, default_goals
from vmbench.advice.risks import change_risks, setting_risks, stack_flags
from vmbench.advice.model import Change
from vmbench.report.build import build_report
from vmbench.report.html import render_page
from vmbench.report.load import RunData, load_run
from vmbench.report.render import Format, render
from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.key import MeasurementKey
from vmbench.results.runrow import RunRow

ENV = {"hostname": "kvm1", "host_kernel": "6.1", "host_cpu": "EPYC", "qemu_version": "7.2", "host_fio": "fio-3.33",
       "accelerator": "kvm", "host_memory_mib": 65536}
WRITE = {"name": "4k-randwrite", "rw": "randwrite", "bs": 4096, "iodepth": 4, "size": 64 << 20, "direct": True,
         "runtime": 30.0, "ramp": 2.0, "numjobs": 1, "jobfile": None}
READ = dict(WRITE, name="4k-randread", rw="randread")
BASE = {"bus": "virtio-blk", "cache": "none", "iothread": False, "aio": "threads", "cpu": "kvm64", "format": "raw",
        "vcpus": 2, "memory_mib": 1024}


@dataclass
class Cell:
    name: str
    settings: dict
    stacks: list = field(default_factory=list)
    host_cell: str | None = None


class RunBuilder:
    """A stored run: cells, then per (cell, job, layer) the IOPS of each repeat; the host's."""

    def __init__(self, db: ResultsDB, *, mode: str = "one-factor", jobs=(WRITE,), stacks=(), targets=(), extra: dict | None = None,
                 env: dict | None = None, scenario_text: str = "name: t\n", host_only: bool = False) -> None:
        self.db, self.mode, self.jobs, self.stacks, self.targets = db, mode, list(jobs), list(stacks), list(targets)
        self.extra, self.env, self.text, self.host_only = dict(extra or {}), dict(env or ENV), scenario_text, host_only
        self.cells: list[Cell] = []
        self.rows: list[tuple] = []
        self.crypto: list[dict] = []

    def cell(self, name: str, stacks=(), host_cell=None, **settings) -> "RunBuilder":
        self.cells.append(Cell(name, dict(BASE, **settings) if not self.host_only else dict(settings), list(stacks), host_cell))
        return self

    def guest(self, cell: str, job: dict, iops, layer: str = "raw", stack: str | None = None, depth: int = 0, **telemetry):
        self.rows.append(("guest", cell, job, list(iops), layer, stack, depth, telemetry))
        return self

    def host(self, job: dict, iops, cell: str | None = None, **telemetry):
        self.rows.append(("host", cell, job, list(iops), "host", None, 0, telemetry))
        return self

    def save(self) -> RunData:
        db = self.db
        plan = {"mode": self.mode, "host_only": self.host_only, "repeats": 3, "storage": self.extra.pop("storage", "dir pool default"),
                "jobs": [{"name": j["name"], "metric": j.get("metric", "iops")} for j in self.jobs],
                "cells": [{"name": c.name, "settings": c.settings, "host_cell": c.host_cell, "stacks": c.stacks} for c in self.cells],
                "stacks": self.stacks, "targets": self.targets, **self.extra}
        rid = db.start_run(RunRow.starting(tag=f"t{len(db.runs()) + 1}", scenario_name="t", scenario_path="t.yaml", scenario_text=self.text,
                                           plan=plan, version="test"))
        db.set_environment(rid, Environment(self.env))
        ids = {}
        for seq, c in enumerate(self.cells, 1):
            boot = None if self.host_only else db.add_boot(as_boot(run_id=rid, seq=seq, vm_key=c.name, settings_json=c.settings,
                                                           domain_name=f"d{seq}", accelerator=self.env["accelerator"]))
            changed = [k for k in c.settings if self.cells[0].settings.get(k) != c.settings.get(k)]
            ids[c.name] = (db.add_cell(as_cell(run_id=rid, boot_id=boot, seq=seq, name=c.name, settings_json=c.settings, changed_json=changed,
                                       stacks_json=c.stacks, valid=True)), boot)
        for side, cell, job, iops, layer, stack, depth, telemetry in self.rows:
            for r, v in enumerate(iops, 1):
                lat = int(4e9 / v)  # iodepth 4: the latency follows the IOPS
                settings = next((c.settings for c in self.cells if c.name == cell), {})
                cell_id, boot = ids.get(cell, (None, None)) if cell else (None, None)
                boot = boot if side == "guest" else None
                mid = store(
                    db, rid, MeasurementKey(side, cell, stack, layer, job["name"], r), cell_id=cell_id, boot_id=boot, depth=depth,
                    job_params_json=job, job_hash="h-" + job["name"], sync=False, target="/dev/vdb", argv_json=["fio"],
                    settings_json=settings if side == "guest" or self.host_only else {},
                    accelerator=self.env["accelerator"] if side == "guest" else "host", started_at="2026-01-01T00:00:00",
                    iops=v, bw_bytes=v * 4096, p99_ns=lat, clat_bins_json={str(lat): 100}, fio_json="{}")
                if telemetry.get("pool_write"):
                    db.add_telemetry(as_series(run_id=rid, measurement_id=mid, source="zpool",
                                     series={"read_mb_s": [0.0], "write_mb_s": [telemetry["pool_write"] * v * 4096 / 1e6]}))
        for c in self.crypto:
            db.add_crypto(as_crypto(run_id=rid, **c))
        db.finish_run(rid, "ok")
        return load_run(db, rid)


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def one_factor(db: ResultsDB) -> RunData:
    """iothread +20%, cache=unsafe +60% (the fastest), aio io_uring within noise, cache=writeback 2 repeats."""
    b = RunBuilder(db).cell("baseline").cell("iothread=on", iothread=True).cell("cache=unsafe", cache="unsafe") \
        .cell("aio=io_uring", aio="io_uring").cell("cache=writeback", cache="writeback")
    b.host(WRITE, [10000, 10100, 9900])
    b.guest("baseline", WRITE, [1000, 1010, 990]).guest("iothread=on", WRITE, [1200, 1210, 1190])
    b.guest("cache=unsafe", WRITE, [1600, 1610, 1590]).guest("aio=io_uring", WRITE, [1005, 985, 1015])
    b.guest("cache=writeback", WRITE, [1500, 1510])
    return b.save()


def test_the_unsafe_fastest_setting_is_not_the_top_recommendation(db):
    data = one_factor(db)
    a = advise(data)
    assert a.goals == (Goal("4k-randwrite", GoalMetric.IOPS, "the job's metric"),)
    top = a.top()
    assert top is not None and top.cell == "iothread=on" and top.reference == "baseline"
    assert [str(c) for c in top.changes] == ["iothread: off -> on"]
    assert top.delta.verdict == "faster" and top.delta.value == pytest.approx(0.2, abs=1e-9)
    assert top.delta.low is not None and top.delta.low > 0 and top.repeats == 3 and top.allowed and top.risks == ()
    # the unsafe cache is faster, ranked after the allowed improvement, labelled with its risk
    assert [r.cell for r in a.recommendations] == ["iothread=on", "cache=unsafe"]
    unsafe = a.recommendations[1]
    assert unsafe.risks == (Risk.CACHE_UNSAFE,) and not unsafe.allowed and unsafe.improves
    # within noise and not judged (2 repeats) are said, not recommended
    why = {r.cell: (r.delta.verdict, r.delta.why) for r in a.unsupported}
    assert why["aio=io_uring"][0] == "within noise"
    assert why["cache=writeback"] == (None, "fewer than 3 repeats")
    # the best cell against the host: 1,600 of 10,000 IOPS
    assert any(s.startswith("best cell cache=unsafe (carries cache-unsafe): 1,600 IOPS = 16%") for s in a.standing)
    # not tried: aio io_uring was tried; virtio-scsi with iothread was not
    assert not any("aio io_uring" in s for s in a.not_tried)
    assert any("bus virtio-scsi with iothread" in s for s in a.not_tried)
    assert "guests ran under kvm" in a.notes


def test_allowing_the_risk_by_name_makes_it_the_recommendation(db):
    data = one_factor(db)
    a = advise(data, allow=frozenset({Risk.CACHE_UNSAFE}))
    assert a.top() is not None and a.top().cell == "cache=unsafe"
    # allowing another risk does not
    assert advise(data, allow=frozenset({Risk.CACHE_WRITEBACK})).top().cell == "iothread=on"
    # the scenario's advise: allow (stored in the plan) counts too
    b = RunBuilder(db, extra={"advise": {"goals": ["4k-randwrite:iops"], "allow": ["cache-unsafe", "nonsense"]}})
    b.cell("baseline").cell("cache=unsafe", cache="unsafe").host(WRITE, [5000, 5000, 5000])
    b.guest("baseline", WRITE, [1000, 1010, 990]).guest("cache=unsafe", WRITE, [1600, 1610, 1590])
    a2 = advise(b.save())
    assert a2.top().cell == "cache=unsafe" and a2.goals[0].source == "the scenario's advise: goals"
    assert any("advise.allow" in n and "nonsense" in n for n in a2.notes)


def test_a_latency_goal_ranks_by_lower_p99(db):
    a = advise(one_factor(db), [Goal.parse("4k-randwrite:p99")])
    top = a.top()
    assert top is not None and top.cell == "iothread=on" and top.unit == "ms (p99)"
    assert top.delta.verdict == "lower p99, better" and top.value < top.reference_value


def test_goals_from_targets_and_the_snippets_of_the_top(db):
    b = RunBuilder(db, targets=[{"job": "4k-randwrite", "min_iops": 1500, "min_mb_s": None, "max_p99_ms": 3.0}])
    b.cell("baseline").cell("iothread=on", iothread=True).host(WRITE, [5000, 5000, 5000])
    b.guest("baseline", WRITE, [1000, 1010, 990]).guest("iothread=on", WRITE, [1200, 1210, 1190])
    data = b.save()
    assert [(str(g), g.source) for g in default_goals(data)] == [
        ("4k-randwrite:iops", "target 1 (min_iops 1500 on 4k-randwrite)"), ("4k-randwrite:p99", "target 1 (max_p99_ms 3 on 4k-randwrite)")]
    a = advise(data, vm="101")
    assert a.top().changes == (Change("iothread", False, True),)
    kinds = {s.kind for s in a.apply}
    assert a.apply and "proxmox" in kinds and any("101" in s.text for s in a.apply if s.kind == "proxmox")


def test_factorial_cells_name_every_changed_setting(db):
    b = RunBuilder(db, mode="factorial").cell("baseline").cell("iothread=on,aio=io_uring", iothread=True, aio="io_uring")
    b.cell("aio=io_uring", aio="io_uring").host(WRITE, [5000, 5000, 5000])
    b.guest("baseline", WRITE, [1000, 1010, 990]).guest("iothread=on,aio=io_uring", WRITE, [1400, 1410, 1390])
    b.guest("aio=io_uring", WRITE, [1100, 1110, 1090])
    a = advise(b.save())
    assert [r.label for r in a.recommendations] == ["iothread: off -> on, aio: threads -> io_uring", "aio: threads -> io_uring"]


def test_journey_steps_are_judged_against_the_step_before(db):
    b = RunBuilder(db, mode="journey").cell("start").cell("iothread", iothread=True).cell("io_uring", iothread=True, aio="io_uring")
    b.cell("unsafe", iothread=True, aio="io_uring", cache="unsafe").host(WRITE, [5000, 5000, 5000])
    b.guest("start", WRITE, [1000, 1010, 990]).guest("iothread", WRITE, [1300, 1310, 1290])
    b.guest("io_uring", WRITE, [1310, 1290, 1300]).guest("unsafe", WRITE, [2000, 2010, 1990])
    a = advise(b.save())
    assert [(r.cell, r.reference) for r in a.recommendations] == [("iothread", "start"), ("unsafe", "io_uring")]
    assert a.top().cell == "iothread" and a.recommendations[1].risks == (Risk.CACHE_UNSAFE,)
    assert [(r.cell, r.reference, r.delta.verdict) for r in a.unsupported] == [("io_uring", "iothread", "within noise")]


LUKS_STACKS = [{"name": "luks", "layers": ["luks2"], "luks": {"cipher": "aes-xts-plain64", "key_bits": 512}},
               {"name": "luks-fast", "layers": ["luks2"], "luks": {"cipher": "aes-xts-plain64", "key_bits": 512}}]
LUKS_TEXT = """name: t
stacks:
  - {name: luks, layers: [{luks: {cipher: aes-xts-plain64, key_size: 512}}]}
  - {name: luks-fast, layers: [{luks: {cipher: aes-xts-plain64, key_size: 512, perf_flags: [no_read_workqueue, no_write_workqueue]}}]}
"""


def luks_run(db: ResultsDB) -> RunData:
    b = RunBuilder(db, stacks=LUKS_STACKS, scenario_text=LUKS_TEXT)
    b.cell("baseline", stacks=["luks", "luks-fast"]).cell("cpu=kvm64+aes", stacks=["luks", "luks-fast"], cpu="kvm64+aes")
    b.host(WRITE, [5000, 5000, 5000])
    for cell, raw, luks, fast in (("baseline", 2000, 400, 600), ("cpu=kvm64+aes", 2000, 1200, 1300)):
        b.guest(cell, WRITE, [raw, raw + 10, raw - 10])
        b.guest(cell, WRITE, [luks, luks + 5, luks - 5], layer="luks2", stack="luks", depth=1)
        b.guest(cell, WRITE, [fast, fast + 5, fast - 5], layer="luks2", stack="luks-fast", depth=1)
    b.crypto = [dict(side="guest", cpu="kvm64", aes_flag=False, cipher="aes-xts-plain64", key_bits=512, encrypt_mib_s=150.0, decrypt_mib_s=160.0),
                dict(side="guest", cpu="kvm64+aes", aes_flag=True, cipher="aes-xts-plain64", key_bits=512, encrypt_mib_s=2000.0, decrypt_mib_s=2100.0)]
    return b.save()


def test_luks_layers_the_aes_cpu_the_crypto_ceiling_and_the_workqueue_risk(db):
    data = luks_run(db)
    assert stack_flags(data.plan.stacks, data.scenario_text) == {"luks-fast": ("no_read_workqueue", "no_write_workqueue")}
    a = advise(data)
    top = a.top()
    # the CPU with AES-NI triples the LUKS layer: the top, with the crypto ceiling as its evidence
    assert top.cell == "cpu=kvm64+aes (luks: luks2)" and top.reference == "baseline (luks: luks2)"
    assert [str(c) for c in top.changes] == ["cpu: kvm64 -> kvm64+aes"]
    assert any(e.startswith("crypto ceiling (aes-xts-plain64 512 bits, one CPU): kvm64 150/160 MiB/s encrypt/decrypt, no aes flag "
                            "-> kvm64+aes 2,000/2,100 MiB/s") for e in top.evidence)
    # the stack with dm-crypt workqueue flags is faster but risky: labelled, never first
    fast = [r for r in a.recommendations if any(c.axis == "stack" for c in r.changes)]
    assert fast and all(r.risks == (Risk.CRYPT_NO_WORKQUEUE,) and not r.allowed for r in fast)
    assert a.recommendations.index(fast[0]) > a.recommendations.index(top)
    # the layer's cost against the raw disk is said (worse: not supported)
    assert any(r.changes == (Change("layer", "raw", "luks2"),) and r.delta.verdict == "slower" for r in a.unsupported)
    # is my number good: the LUKS layer against the crypto ceiling
    assert any("= 2% of the crypto ceiling" in s and "no aes flag" in s for s in a.standing)  # 400 IOPS x 4 KiB = 1.6 MiB/s of 150
    assert not any("AES-NI" in s for s in a.not_tried)  # an AES CPU was measured
    allowed = advise(data, allow=frozenset({Risk.CRYPT_NO_WORKQUEUE}))
    assert all(r.allowed for r in allowed.recommendations)  # ranked by effect alone: the AES CPU (+200%) stays first
    assert allowed.top().cell == top.cell


def test_zfs_volblocksize_cites_the_write_amplification(db):
    b = RunBuilder(db, extra={"storage": "zvols under tank/vmbench, scratch 1G"}, env=dict(ENV, storage_type="zfs"))
    b.cell("baseline", host_cell="baseline", volblocksize="16k").cell("volblocksize=4k", host_cell="volblocksize=4k", volblocksize="4k")
    b.host(WRITE, [5000, 5000, 5000], cell="baseline", pool_write=4.0).host(WRITE, [9000, 9000, 9000], cell="volblocksize=4k", pool_write=1.0)
    b.guest("baseline", WRITE, [1000, 1010, 990], pool_write=4.0).guest("volblocksize=4k", WRITE, [1800, 1810, 1790], pool_write=1.0)
    a = advise(b.save(), [Goal.parse("4k-randwrite:mbps")])
    top = a.top()
    assert top.cell == "volblocksize=4k" and top.unit == "MB/s"
    assert "pool write amplification 4.00x -> 1.00x (pool MB/s written / fio's MB/s): the volblocksize change" in top.evidence
    assert any(s.startswith("best cell volblocksize=4k: 7.4 MB/s = 20%") for s in a.standing)  # 1,800 of the 9,000 of its own storage
    assert any("compression lz4" in s for s in a.not_tried) and not any("volblocksize" in s for s in a.not_tried)


def test_risks_of_stored_settings():
    assert setting_risks({"cache": "unsafe", "sync": "disabled"}) == (Risk.CACHE_UNSAFE, Risk.ZFS_SYNC_DISABLED)
    assert setting_risks({"cache": "writeback"}) == (Risk.CACHE_WRITEBACK,)
    assert setting_risks({"cache": "none", "sync": "standard"}) == ()
    # a change carries the risk of the value it sets, not of one it keeps or leaves
    assert change_risks([Change("cache", "writeback", "none")]) == ()
    assert change_risks([Change("sync", "standard", "disabled")]) == (Risk.ZFS_SYNC_DISABLED,)
    assert change_risks([Change("stack", "a", "b")], {"b": ("no_write_workqueue",)}) == (Risk.CRYPT_NO_WORKQUEUE,)


def test_every_report_has_the_advice_section(db):
    from vmbench.advice.table import report_with_advice

    data = one_factor(db)
    assert not [t for t in build_report(data)[1] if t.name.startswith("advice")]  # the measurement tables alone
    header, tables = report_with_advice(data)
    assert [t.name for t in tables][-2:] == ["advice", "advice-next"]
    advice = tables[-2]
    first = advice.records[0]
    assert first["status"] == "recommended" and first["change"] == "iothread: off -> on"
    assert first["figures"] == "1,000 -> 1,200 IOPS" and first["delta_text"].startswith("+20.0% [")
    assert advice.facts["accelerator"] == "kvm"
    text = render(tables, Format.TABLE, header, wide=True)
    assert "Advice for run" in text and "improves, but risky: not allowed (--allow cache-unsafe)" in text
    assert "cache-unsafe: cache=unsafe ignores the guest's flushes" in text
    doc = json.loads(render(tables, Format.JSON, header))
    assert [t["name"] for t in doc["tables"]][-2:] == ["advice", "advice-next"]
    page = render_page(data, header, tables)  # as `vmbench report --format html` writes it
    assert "Advice for run" in page and "is my number good?" in page
