"""The tune: and advise: sections: parsed into frozen dataclasses, every mistake refused
naming its key; a round's stored scenario reads back into exactly the round's cells."""

import textwrap

import pytest

from tests.unit.tune_scenarios import tune_yaml
from vmbench.advice.model import Goal, GoalMetric, Risk
from vmbench.errors import ScenarioError
from vmbench.run.plan import make_plan
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import CpuConfig, IoLimits, VmConfig, ZfsSettings
from vmbench.scenario.tune import (Candidate, Decided, TuneBudget, TuneFrom, TuneRound, round_text, start_from, vary,
                                   vm_from_yaml, vm_yaml)
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature

TUNE = tune_yaml("{boots: 12, time: 90m}")

TWO_JOBS = """
name: t
storage: {scratch_size: 256M}
jobs:
  - {name: j1, rw: randread, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: j2, rw: read, bs: 1M, size: 16M, runtime: 1s, ramp: 0s}
"""


def parse(text: str):
    return parse_scenario(textwrap.dedent(text), "t.yaml")


def with_tune(tune: str, extra: str = "", base: str = TWO_JOBS) -> str:
    return textwrap.dedent(base) + extra + "tune:\n" + textwrap.indent(textwrap.dedent(tune), "  ")


def test_a_tune_scenario_parses_into_its_spec():
    s = parse(TUNE)
    spec = s.tune
    assert spec.goal == Goal("j1", GoalMetric.IOPS, "tune.goal")
    assert [(axis, [c.name for c in values]) for axis, values in spec.axes] == [
        ("bus", ["bus=virtio-scsi", "bus=sata"]), ("cache", ["cache=writeback"]), ("iothread", ["iothread=on"]),
        ("aio", ["aio=io_uring", "aio=native"])]
    assert spec.budget == TuneBudget(12, 5400.0) and spec.allow == frozenset() and spec.source is None and spec.round is None
    assert s.repeats == 3  # a tune's default: verdicts need 3
    assert [c.name for c in s.cells] == ["baseline"] and s.plan_mode == "tune"
    assert s.advise is not None and s.advise.goals == (spec.goal,)  # its runs answer the tune's question
    assert "tune" not in make_plan(s).summary()  # only a round's plan carries plan["tune"]


def test_allow_from_and_a_goal_without_a_job_when_there_is_one_job():
    s = parse(TUNE.replace("goal: j1:iops", "goal: p99\n  allow: [cache-writeback]\n  from: {domain: web1, disk: vdb}"))
    assert s.tune.goal == Goal("j1", GoalMetric.P99, "tune.goal")
    assert s.tune.allow == frozenset({Risk.CACHE_WRITEBACK})
    assert s.tune.source == TuneFrom("domain", "web1", "vdb")


def test_advise_section_is_stored_in_the_plan():
    s = parse(TWO_JOBS + "vary: {cache: [writeback]}\nadvise: {goal: [j1:iops, 'j2:p99'], allow: [cache-unsafe]}\n")
    assert make_plan(s).summary()["advise"] == {"goals": ["j1:iops", "j2:p99"], "allow": ["cache-unsafe"]}
    s = parse(TWO_JOBS + "advise: {goal: mbps}\n")
    assert make_plan(s).summary()["advise"] == {"goals": ["mbps"], "allow": []}
    assert "advise" not in make_plan(parse(TWO_JOBS)).summary()


ERRORS = [
    ("vary", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n", "vary: {cache: [unsafe]}\n"),
     "t.yaml:7: vary: does not go with tune:"),
    ("cells", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n", "cells: [{name: a}]\n"),
     "cells: does not go with tune:"),
    ("journey", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n", "journey: [{name: a}]\n"),
     "journey: does not go with tune:"),
    ("load", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n", "load: {vms: [1, 2]}\n"),
     "load: does not go with tune:"),
    ("not-a-mapping", TWO_JOBS + "tune: [a]\n", "tune: is a mapping"),
    ("unknown-key", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudgets: {boots: 4}\n"),
     "tune.budgets: unknown key"),
    ("no-goal", with_tune("axes: {cache: [writeback]}\nbudget: {boots: 4}\n"), "tune.goal: is required"),
    ("bad-metric", with_tune("goal: j1:fast\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n"), "tune.goal: 'fast' is not one of"),
    ("unknown-job", with_tune("goal: jx:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n"),
     "tune.goal: no job named 'jx'; jobs: j1, j2"),
    ("goal-without-job", with_tune("goal: iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n"),
     "tune.goal: names no job, and this scenario has 2"),
    ("no-axes", with_tune("goal: j1:iops\nbudget: {boots: 4}\n"), "tune.axes: is required"),
    ("axes-list", with_tune("goal: j1:iops\naxes: [cache]\nbudget: {boots: 4}\n"), "tune.axes: is a mapping of VM axes"),
    ("unknown-axis", with_tune("goal: j1:iops\naxes: {buss: [sata]}\nbudget: {boots: 4}\n"), "tune.axes.buss: unknown key"),
    ("bad-value", with_tune("goal: j1:iops\naxes: {cache: [fast]}\nbudget: {boots: 4}\n"), "tune.axes.cache: 'fast' is not one of"),
    ("twice", with_tune("goal: j1:iops\naxes: {cache: [writeback, writeback]}\nbudget: {boots: 4}\n"),
     "tune.axes.cache: writeback is given twice"),
    ("no-values", with_tune("goal: j1:iops\naxes: {cache: []}\nbudget: {boots: 4}\n"), "tune.axes.cache: needs at least one value"),
    ("never-possible", with_tune("goal: j1:iops\naxes: {cpu: [host-passthrough]}\nbudget: {boots: 4}\n",
                                 "hypervisor: {accel: tcg}\n"), "tune.axes.cpu: cpu=host-passthrough: cpu host-passthrough needs KVM"),
    ("storage", with_tune("goal: j1:iops\naxes: {volblocksize: [64k]}\nbudget: {boots: 4}\n"),
     "tune.axes.volblocksize: volblocksize=64k: volblocksize applies to ZFS storage"),
    ("allow", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nallow: [cache-fast]\nbudget: {boots: 4}\n"),
     "tune.allow: 'cache-fast' is not one of"),
    ("no-budget", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\n"), "tune.budget: is required"),
    ("empty-budget", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {}\n"), "tune.budget: names no limit"),
    ("one-boot", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 1}\n"),
     "tune.budget.boots: 1 is below the minimum 2"),
    ("bad-time", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {time: soon}\n"),
     "tune.budget.time: 'soon' is not a duration"),
    ("budget-key", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boot: 4}\n"), "tune.budget.boot: unknown key"),
    ("from-none", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\nfrom: {disk: vdb}\n"),
     "tune.from: names one VM"),
    ("from-both", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\nfrom: {vmid: 101, domain: a}\n"),
     "tune.from: names one VM, not both"),
    ("vmid-on-libvirt", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\nfrom: {vmid: 101}\n"),
     "tune.from.vmid: is a Proxmox VM; this scenario's driver is libvirt"),
    ("repeats", with_tune("goal: j1:iops\naxes: {cache: [writeback]}\nbudget: {boots: 4}\n", "repeats: 2\n"),
     "repeats: a tune needs at least 3 repeats"),
    ("advise-goal", TWO_JOBS + "advise: {goal: j9:iops}\n", "advise.goal: no job named 'j9'"),
    ("advise-allow", TWO_JOBS + "advise: {goal: j1:iops, allow: [everything]}\n", "advise.allow: 'everything' is not one of"),
    ("advise-key", TWO_JOBS + "advise: {goals: j1:iops}\n", "advise.goals: unknown key"),
]


@pytest.mark.parametrize("text, message", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_every_mistake_names_its_key(text, message):
    with pytest.raises(ScenarioError) as exc:
        parse(text)
    assert message in exc.value.message


def test_a_vm_reads_back_from_its_yaml():
    for vm in (VmConfig(), VmConfig(bus=Bus.SATA, cache=Cache.UNSAFE, aio=Aio.IO_URING, memory_mib=2048, vcpus=4),
               VmConfig(cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None, Feature.ON, (("avx2", Feature.OFF),)),
                        limits=IoLimits(iops=100, mbps=1.5, iops_max=200, burst_length=3),
                        detect_zeroes=DetectZeroes.UNMAP, discard=Discard.UNMAP),
               VmConfig(zfs=ZfsSettings(16384, None, (("compression", "lz4"), ("sync", "disabled"))))):
        assert vm_from_yaml(vm_yaml(vm)) == vm


def test_a_rounds_stored_scenario_reads_back_into_its_cells_and_plan():
    s = parse(TUNE)
    baseline = vary(s.baseline, "iothread", True)
    rnd = TuneRound("tabc", 2, s.baseline, "the scenario's vm: settings",
                    (Candidate("bus", "virtio-scsi", "virtio-scsi"), Candidate("aio", "native", "native")),
                    (Decided(1, "r1", "iothread=on", "iothread", True),), {"source": "x"}, 3, 120.0)
    text = round_text(s.text, s.path, baseline=baseline, rnd=rnd)
    r = parse_scenario(text, "t.yaml")
    assert r.tune.round == rnd and r.baseline == baseline and r.plan_mode == "one-factor"
    assert [(c.name, c.changed) for c in r.cells] == [("baseline", ()), ("bus=virtio-scsi", ("bus",)), ("aio=native", ("aio",))]
    assert r.cells[1].vm == VmConfig(bus=Bus.VIRTIO_SCSI, iothread=True)
    plan = make_plan(r).summary()
    t = plan["tune"]
    assert (t["id"], t["round"], t["goal"], t["boots"], t["estimate_seconds"]) == ("tabc", 2, "j1:iops", 3, 120.0)
    assert t["cells"] == [{"name": "bus=virtio-scsi", "axis": "bus", "value": "virtio-scsi"},
                          {"name": "aio=native", "axis": "aio", "value": "native"}]
    assert t["baseline"]["iothread"] is True and t["start"]["iothread"] is False
    assert t["decided"] == [{"round": 1, "run": "r1", "cell": "iothread=on", "axis": "iothread", "value": True}]
    assert t["budget"] == {"boots": 12, "seconds": 5400.0} and t["current"] == {"source": "x"}
    assert plan["advise"] == {"goals": ["j1:iops"], "allow": []}
    # written again from a round's own text: the same round
    assert parse_scenario(round_text(r.text, r.path, baseline=baseline, rnd=rnd), "t.yaml").cells == r.cells


def test_a_round_cell_impossible_with_its_baseline_is_refused():
    s = parse(TUNE)
    rnd = TuneRound("tabc", 1, s.baseline, "x", (Candidate("cache", "writeback", "writeback"),))
    text = round_text(s.text, s.path, baseline=vary(s.baseline, "aio", "native"), rnd=rnd)
    with pytest.raises(ScenarioError, match=r"tune.round.cells\[0\]: cache=writeback: aio=native needs a direct cache mode"):
        parse_scenario(text, "t.yaml")


def test_the_start_from_a_read_vm_takes_its_disk_and_cpu_not_its_size():
    from vmbench.scenario.backend import Storage

    mine = VmConfig(vcpus=2, memory_mib=1024)
    read = VmConfig(vcpus=16, memory_mib=65536, bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, iothread=True,
                    cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None), zfs=ZfsSettings(16384))
    start = start_from(mine, read, Storage())  # a dir pool: the zvol's volblocksize does not apply
    assert start == VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, iothread=True, cpu=CpuConfig(CpuMode.HOST_PASSTHROUGH, None))
