"""``vmbench plan`` of a tune scenario: the start, the values to try, round 1's cells, the budget
and the most rounds, boots and time the tune can take (:func:`print_tune_plan`)."""

from __future__ import annotations

import json
from typing import Any

from ..run.plan import estimate, make_plan
from ..scenario.axes import AXIS_BY_NAME, setting_text, settings_of, settings_text
from ..tune.engine import make_cost
from ..tune.search import Stop, bounds, next_round, round_scenario
from ..units import format_duration
from .fit import fitted, say


def print_tune_plan(scenario, accel: str | None, as_json: bool, wide: bool = False) -> int:
    """``vmbench plan`` of a tune scenario: the start, the candidate values, round 1's cells,
    the budget and the most rounds, boots and time the tune can take.  Reads nothing from any
    host (with tune.from the start is read when the tune starts: round 1 is shown from vm:)."""
    s, spec = scenario, scenario.tune
    used = accel or "tcg"
    cost = make_cost(s, used)
    first = next_round(spec, s.baseline, (), s.hypervisor, s.storage, cost)
    limit = bounds(spec, first, cost) if not isinstance(first, Stop) else None
    start_words = (f"read from {spec.source.describe()} when the tune starts (read only); round 1 below is from the "
                   "scenario's vm: settings" if spec.source else "the scenario's vm: settings")
    if as_json:
        doc: dict[str, Any] = {}
        if not isinstance(first, Stop):
            rs = round_scenario(s, first.baseline, first.variations)
            doc = make_plan(rs).summary()
            est = estimate(make_plan(rs), used)
            doc["estimate"] = {"accelerator": est.accelerator, "seconds": round(est.total)}
        doc["tune"] = {
            "goal": str(spec.goal), "allow": sorted(a.value for a in spec.allow), "start": settings_of(s.baseline),
            "start_source": start_words, "axes": {axis: [c.label for c in values] for axis, values in spec.axes},
            "budget": spec.budget.to_json(),
            "round1": None if isinstance(first, Stop) else {
                "cells": [v.name for v in first.variations], "left_out": [list(x) for x in first.left_out],
                "boots": first.boots, "seconds": round(first.seconds)},
            "stop": first.reason if isinstance(first, Stop) else None,
            "most": None if limit is None else {"rounds": limit.rounds, "boots": limit.boots, "seconds": round(limit.seconds)},
        }
        print(json.dumps(doc, indent=2))
        return 0
    policy = s.repeat_policy
    say(f"scenario: {s.name} ({s.path})", rest=" " * 10, wide=wide)
    if s.description:
        say(s.description, "  ", wide=wide)
    say(f"driver:   {s.hypervisor.driver} {s.hypervisor.uri}, accelerator {s.hypervisor.accel.value}"
        + (f" (this host: {accel})" if accel else " (not yet probed on this host; assuming tcg for the estimate)"), rest=" " * 10, wide=wide)
    say(f"template: {s.template}; {s.storage.describe()}; plan: tune, each round one-factor; repeats: {policy.describe()}",
        rest=" " * 10, wide=wide)
    print()
    say(f"tune:     goal {spec.goal} ({'higher' if spec.goal.metric.higher_is_better else 'lower'} is better); "
        f"allowed risks: {', '.join(sorted(a.value for a in spec.allow)) or 'none'}", rest=" " * 10, wide=wide)
    say(f"start:    {start_words}: " + settings_text(settings_of(s.baseline)), rest=" " * 10, wide=wide)
    say(f"budget:   {spec.budget.describe()}", rest=" " * 10, wide=wide)
    print()
    print(fitted([[axis, ", ".join(c.label for c in values)] for axis, values in spec.axes], ["axis", "values to try"], wide=wide))
    print()
    if isinstance(first, Stop):
        print(f"round 1 cannot run: {first.reason}")
        print("estimated duration: 0s (nothing to run)")
        return 0
    rows = [[1, "baseline", "the start above"]]
    rows += [[i + 2, v.name, f"{v.axis}={setting_text(AXIS_BY_NAME[v.axis].settings_key or v.axis, AXIS_BY_NAME[v.axis].setting(v.vm))}"]
             for i, v in enumerate(first.variations)]
    print("round 1:")
    print(fitted(rows, ["boot", "cell", "VM settings (a variation: what it changes)"], wide=wide, right=["boot"]))
    for name, why in first.left_out:
        say(f"left out of round 1: {name}: {why}", "  ", wide=wide)
    print()
    jrows = [[j.name, j.describe(), format_duration(j.duration) if j.duration else "?"] for j in s.jobs]
    print(fitted(jrows, ["job", "what", "runtime+ramp"], wide=wide))
    print()
    assert limit is not None
    say("each further round varies the values not yet measured against its new baseline (the best significant, "
        "safe or allowed improvement of the round before); the tune stops when a round improves nothing, "
        "no variation is left, or the budget cannot pay for another round", wide=wide)
    say(f"round 1: boots {first.boots}, estimated {format_duration(first.seconds)} with {used}", wide=wide)
    say(f"at most: {limit.rounds} round(s), {limit.boots} boots, {format_duration(limit.seconds)} within the budget "
        f"({spec.budget.describe()})", wide=wide)
    say(f"estimated duration: {format_duration(first.seconds)} for round 1; at most {format_duration(limit.seconds)} "
        f"for the whole tune, with {used}", wide=wide)
    return 0

