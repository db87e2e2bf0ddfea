#!/usr/bin/env python3
"""Start skew of a load step: how far apart fio starts in N VMs started together.

Runs a real scaling step (``vmbench run``) of N clones (default 8) of a small VM on this
machine's libvirt, with a short fixed-rate 4k read in every VM, repeated R times (default 3),
then reads back, per round, the start skew vmbench measured from fio's epoch-stamped logs and
each guest's clock offset, the offsets' uncertainty, and whether every VM's measured window
was fully loaded by the others.  Goal: skew under 1 s at 8 VMs.

    .venv/bin/python bench/start_skew.py [--vms 8] [--repeats 3] [--keep DIR]

Needs what ``make demo`` sets up (root, libvirtd, the debian12 image).  Every figure printed
comes from the run it makes.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SCENARIO = """
name: bench-start-skew
storage: {{scratch_size: 256M}}
vm: {{vcpus: 1, memory: 384M, bus: virtio-blk, cache: none, aio: native}}
repeats: {repeats}
host_baseline: false
jobs:
  - {{name: 4k-read, rw: randread, bs: 4k, iodepth: 1, rate_iops: 50, size: 32M, runtime: 3s, ramp: 2s}}
load: {{vms: [{vms}], boot_parallel: {parallel}}}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vms", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--boot-parallel", type=int, default=4)
    ap.add_argument("--keep", help="keep the scenario and results database in this directory")
    args = ap.parse_args()
    from vmbench.results.db import ResultsDB

    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="vmbench-skew-"))
    work.mkdir(parents=True, exist_ok=True)
    scenario = work / "skew.yaml"
    scenario.write_text(SCENARIO.format(vms=args.vms, repeats=args.repeats, parallel=args.boot_parallel))
    db_path = work / "skew.db"
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db_path)], cwd=ROOT,
                         capture_output=True, text=True)
    took = time.monotonic() - started
    if run.returncode != 0:
        print(run.stderr[-3000:], file=sys.stderr)
        return run.returncode
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    rows = [m for m in db.rows("measurements", r.id) if m["side"] == "guest"]
    accel = sorted({m["accelerator"] for m in rows})
    print(f"run {r.id} ({r.tag}): {args.vms} VMs at once, {args.repeats} round(s), accelerator {', '.join(accel)}, "
          f"whole run {took:.0f} s")
    by_round: dict[int, list[dict]] = {}
    for m in rows:
        by_round.setdefault(m["repeat"], []).append(m)
    skews = []
    print(f"{'round':>5}  {'skew ms':>8}  {'over VMs':>8}  {'max |offset| ms':>15}  {'max uncertainty ms':>18}  "
          f"{'max |drift| ms':>14}  loaded  excluded")
    for rep, ms in sorted(by_round.items()):
        loads = [m["load"] for m in ms]
        skew = loads[0]["start_skew_ms"]
        over = loads[0].get("skew_of_vms") or list(range(len(ms)))
        if skew is not None:
            skews.append(skew)
        off = max(abs(x["clock_offset_ms"] or 0) for x in loads)
        unc = max(x["clock_uncertainty_ms"] or 0 for x in loads)
        drift = max(abs(x.get("clock_drift_ms") or 0) for x in loads)
        loaded = sum(bool(x["loaded"]) for x in loads)
        excluded = sum(bool(x["excluded"]) for x in loads)
        shown = "-" if skew is None else f"{skew:.1f}"
        print(f"{rep:>5}  {shown:>8}  {len(over):>8}  {off:>15.1f}  {unc:>18.1f}  {drift:>14.1f}  {loaded}/{len(ms):<4}  {excluded}")
        for x in loads:
            if x["excluded"]:
                print(f"       excluded: {x['excluded']}")
    if not skews:
        print("no round could be placed on one clock")
        return 1
    boots = db.rows("boots", r.id)
    print(f"start skew: median {statistics.median(skews):.0f} ms, max {max(skews):.0f} ms (goal: under 1000 ms); "
          f"boots: {len(boots)}, boot to agent {min(b['boot_seconds'] for b in boots):.0f}-{max(b['boot_seconds'] for b in boots):.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
