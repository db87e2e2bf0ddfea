"""The search on its own (pure): which variations a round measures, in which order, what it
leaves out and why, the next baseline, when the tune stops, and what a round decides."""

import textwrap

from tests.unit.tune_scenarios import tune_yaml
from vmbench.advice.model import Advice, Goal, GoalMetric, Recommendation, Risk
from vmbench.report.stats import Delta
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import VmConfig
from vmbench.scenario.tune import TuneBudget
from vmbench.settings import Aio, Bus, Cache
from vmbench.tune.search import Decision, Round, RoundPlan, Stop, bounds, decide, next_round

TUNE = tune_yaml("{boots: 100}")
GOAL = Goal("j1", GoalMetric.IOPS, "tune.goal")


def scenario(budget: str = "{boots: 100}", vm: str = "{cache: none, aio: threads}", allow: str = "[]"):
    text = TUNE.replace("budget: {boots: 100}", f"budget: {budget}\n  allow: {allow}").replace("vm: {cache: none, aio: threads}", f"vm: {vm}")
    return parse_scenario(textwrap.dedent(text), "t.yaml")


def cost(baseline, variations) -> float:
    """A fake estimate: 100 s a round and 50 s a variation."""
    return 100.0 + 50.0 * len(variations)


def plan(s, history=()):
    return next_round(s.tune, s.baseline, list(history), s.hypervisor, s.storage, cost)


def ran(p: RoundPlan, chosen: str | None, run: str = "r") -> Round:
    """Round ``p`` as run, keeping ``chosen``."""
    return Round(p.number, p.number, f"{run}{p.number}", "ok", p.baseline, p.variations, p.boots, p.seconds,
                 Decision(chosen, None, None, (), "test"))


def test_round_one_varies_every_value_round_robin_over_the_axes():
    s = scenario()
    p = plan(s)
    assert isinstance(p, RoundPlan) and p.number == 1 and p.baseline == s.baseline
    assert [v.name for v in p.variations] == ["bus=virtio-scsi", "cache=writeback", "iothread=on", "aio=io_uring",
                                              "bus=sata", "aio=native"]
    assert p.variations[1].vm == VmConfig(cache=Cache.WRITEBACK) and p.left_out == ()
    assert (p.boots, p.seconds) == (7, 400.0)


def test_a_value_impossible_with_the_baseline_is_left_out_and_said():
    p = plan(scenario(vm="{cache: writeback, aio: threads}"))
    assert "cache=writeback" not in [v.name for v in p.variations]  # the baseline's own value
    assert p.left_out == (("aio=native", "not possible with this baseline: aio=native needs a direct cache mode "
                                         "(none or directsync); cache=writeback goes through the host page cache, and QEMU refuses it"),)


def test_the_kept_variation_is_the_next_baseline_and_its_axis_is_not_varied_again():
    s = scenario()
    r1 = ran(plan(s), "iothread=on")
    p2 = plan(s, [r1])
    assert p2.number == 2 and p2.baseline == VmConfig(iothread=True)
    # bus=sata with an iothread is impossible; iothread is not varied again (off is round 1's baseline)
    assert [v.name for v in p2.variations] == ["bus=virtio-scsi", "cache=writeback", "aio=io_uring", "aio=native"]
    assert all(v.vm.iothread for v in p2.variations)
    assert p2.left_out == (("bus=sata", "not possible with this baseline: iothread is not possible on bus sata"),)
    r2 = ran(p2, "aio=io_uring")
    p3 = plan(s, [r1, r2])
    assert p3.baseline == VmConfig(iothread=True, aio=Aio.IO_URING)
    assert [v.name for v in p3.variations] == ["bus=virtio-scsi", "cache=writeback"]  # aio=native was measured in round 2


def test_the_tune_stops_when_a_round_improves_nothing():
    s = scenario()
    stop = plan(s, [ran(plan(s), None)])
    assert isinstance(stop, Stop) and stop.reason == "nothing round 1 tried improved j1:iops significantly"


def test_the_tune_stops_when_no_variation_is_left():
    s = parse_scenario(textwrap.dedent(TUNE.replace(
        "axes: {bus: [virtio-scsi, sata], cache: [writeback], iothread: [true], aio: [io_uring, native]}",
        "axes: {iothread: [true]}")), "t.yaml")
    stop = plan(s, [ran(plan(s), "iothread=on")])
    assert isinstance(stop, Stop) and stop.reason.startswith("no variation is left")


def test_a_boots_budget_trims_a_round_and_stops_the_tune():
    s = scenario("{boots: 4}")
    p = plan(s)
    assert [v.name for v in p.variations] == ["bus=virtio-scsi", "cache=writeback", "iothread=on"]  # every axis first
    assert p.boots == 4 and ("aio=io_uring", "over the budget") in p.left_out and ("aio=native", "over the budget") in p.left_out
    stop = plan(s, [ran(p, "iothread=on")])
    assert isinstance(stop, Stop)
    assert stop.reason == "the budget is spent: round 2 needs at least 2 boots and 2m30s (estimated); 0 of 4 boots left"
    # 3 boots left after a 7-boot round: the next round takes 2 variations
    s = scenario("{boots: 10}")
    p1 = plan(s)
    p2 = plan(s, [ran(p1, "iothread=on")])
    assert p2.boots == 3 and [v.name for v in p2.variations] == ["bus=virtio-scsi", "cache=writeback"]


def test_a_time_budget_counts_the_plans_estimates():
    s = scenario("{time: 5m}")  # 300 s: 100 + 50 per variation
    p = plan(s)
    assert len(p.variations) == 4 and p.seconds == 300.0
    stop = plan(s, [ran(p, "iothread=on")])
    assert isinstance(stop, Stop) and stop.reason.endswith("0s of 5m00s left")
    s = scenario("{boots: 100, time: 7m}")  # 420 s: round 1 takes 6 (400 s); 20 s is too little for round 2
    assert isinstance(plan(s, [ran(plan(s), "iothread=on")]), Stop)


def test_bounds_for_vmbench_plan():
    s = scenario("{boots: 11}")
    p = plan(s)
    b = bounds(s.tune, p, cost)
    assert (b.rounds, b.boots) == (3, 11)  # round 1's 7 boots, then 2 rounds of 2 at least
    assert b.seconds == 400 + 2 * 100 + 2 * 50  # 2 more baselines and at most 2 variations
    b = bounds(scenario("{time: 10m}").tune, p, cost)
    assert b.rounds == 1 + (600 - 400) // 150 and b.seconds == 600


# ---- deciding ---------------------------------------------------------------------------------


def rec(cell: str, pct: float, *, risks=(), allowed=True, improves=None) -> Recommendation:
    improves = pct > 0.05 if improves is None else improves
    verdict = "faster" if improves else "within noise"
    delta = Delta(pct, pct - 0.03 if improves else pct - 0.1, pct + 0.03, verdict, None)
    return Recommendation(GOAL, "j1", cell, "baseline", (), 1000 * (1 + pct), 1000.0, delta, 3, improves,
                          risks=tuple(risks), allowed=allowed)


def advice(recs, unsupported=()) -> Advice:
    ranked = sorted(recs, key=lambda r: (not r.allowed, -(r.delta.value or 0)))
    return Advice("r1", (GOAL,), tuple(ranked), tuple(unsupported), (), ())


def variations(*names):
    s = scenario()
    p = plan(s)
    return [v for v in p.variations if v.name in names]


def test_a_risky_faster_change_is_not_kept_unless_allowed():
    vs = variations("cache=writeback", "iothread=on")
    risky = rec("cache=writeback", 0.40, risks=[Risk.CACHE_WRITEBACK], allowed=False)
    d = decide(advice([risky, rec("iothread=on", 0.10)]), GOAL, vs)
    assert d.chosen == "iothread=on" and d.held_back == (risky,)
    assert d.why == "iothread=on: +10.0% [+7.0, +13.0] faster on j1:iops"
    allowed = rec("cache=writeback", 0.40, risks=[Risk.CACHE_WRITEBACK], allowed=True)
    assert decide(advice([allowed, rec("iothread=on", 0.10)]), GOAL, vs).chosen == "cache=writeback"


def test_nothing_kept_says_the_best_and_what_was_held_back():
    vs = variations("cache=writeback", "iothread=on")
    risky = rec("cache=writeback", 0.40, risks=[Risk.CACHE_WRITEBACK], allowed=False)
    d = decide(advice([risky], [rec("iothread=on", 0.02)]), GOAL, vs)
    assert d.chosen is None and d.top is None and d.best.cell == "iothread=on"
    assert d.why.startswith("nothing improved j1:iops significantly (best: iothread=on, +2.0% [-8.0, +5.0] within noise); "
                            "cache=writeback improved it (+40.0% [+37.0, +43.0] faster) but risks data on a crash")
    assert "allow: [cache-writeback]" in d.why


def test_a_recommendation_outside_the_round_is_not_kept():
    d = decide(advice([rec("bus=virtio-scsi", 0.5)]), GOAL, variations("iothread=on"))
    assert d.chosen is None
