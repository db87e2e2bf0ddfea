"""How long `vmbench plan` takes for a factorial scenario of about 10,000 cells, as a whole
process (python start, imports, the scenario read and checked, the plan printed).  Goal: under 1 s.
It prints the wall clock and the CPU time (on a busy machine the wall clock waits for a core).

    .venv/bin/python bench/plan_cells.py [--repeat 3]

The scenario varies bus (4) x cache (5) x aio (3) x iothread (2) x vcpus (7) x memory (17):
9,996 cells once the combinations vmbench refuses are left out.
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = """\
name: plan-10k
storage: {scratch_size: 1G}
mode: factorial
vary:
  bus: [virtio-blk, virtio-scsi, virtio-scsi-shared, sata]
  cache: [none, writeback, writethrough, directsync, unsafe]
  aio: [threads, native, io_uring]
  iothread: [true, false]
  vcpus: [1, 2, 3, 4, 5, 6, 7]
  memory: [1G, 2G, 3G, 4G, 5G, 6G, 7G, 8G, 9G, 10G, 11G, 12G, 13G, 14G, 15G, 16G, 17G]
jobs:
  - {name: r, rw: randread, bs: 4k, size: 64M, runtime: 1s}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="vmbench-bench-") as tmp:
        path = Path(tmp) / "plan-10k.yaml"
        path.write_text(SCENARIO)
        times, cpus, cells = [], [], "?"
        for _ in range(args.repeat):
            t0, before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
            done = subprocess.run([sys.executable, "-m", "vmbench", "plan", str(path), "--accel", "tcg"], cwd=ROOT,
                                  capture_output=True, text=True, check=True)
            times.append(time.perf_counter() - t0)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
            cells = next((l.split("cells: ")[1].split(",")[0] for l in done.stdout.splitlines() if "cells: " in l), "?")
    print(f"vmbench plan of a factorial scenario with {cells} cells, a whole process, {args.repeat} runs")
    print(f"wall: median {statistics.median(times):.2f} s (min {min(times):.2f}, max {max(times):.2f}); goal under 1 s")
    print(f"CPU (user + system; what the wall is on an idle machine): median {statistics.median(cpus):.2f} s "
          f"(min {min(cpus):.2f}, max {max(cpus):.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
