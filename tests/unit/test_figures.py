"""The page's figures drawn in worker processes are the ones drawn in this process."""

from __future__ import annotations

import os
import subprocess
import sys
from concurrent.futures.process import BrokenProcessPool

import pytest

from vmbench.report import figures
from vmbench.report.figures import IN_PROCESS, Drawing, InProcess, WorkerPool, painter

BINS = {1_000_000: 50, 2_000_000: 30, 4_000_000: 15, 9_000_000: 5}
DRAWINGS = [
    Drawing("plots", "latency", ("4k-randwrite: host vs guest raw disk", [("host", BINS), ("guest c1", {k * 2: v for k, v in BINS.items()})])),
    Drawing("plots", "cell_bars", ("4k-randwrite: gap to the host per cell",
                                   [{"cell": "c1", "gap": 1.8, "job": "4k-randwrite"}, {"cell": "c2", "gap": 0.9, "job": "4k-randwrite"}], "gap")),
    Drawing("loadplots", "per_vm_bars", ("4k-randwrite, raw: IOPS per VM", [("1 VM", [(1, 1200.0, False)]), ("2 VMs", [(1, 800.0, False), (2, 790.0, True)])])),
]


def test_workers_draw_the_same_svg_in_the_same_order():
    here = IN_PROCESS.start(DRAWINGS)()
    with painter(workers=2) as pool:
        assert isinstance(pool, WorkerPool)
        there = pool.start(DRAWINGS)()
    assert [p.title for p in there] == [d.args[0] for d in DRAWINGS]
    assert there == here


def test_one_core_draws_in_this_process(monkeypatch):
    with painter(workers=1) as one:
        assert one is IN_PROCESS
    monkeypatch.setattr(figures, "usable_cores", lambda: 1)
    with painter() as by_affinity:
        assert isinstance(by_affinity, InProcess)


def test_a_killed_worker_leaves_the_drawing_to_this_process():
    with painter(workers=2) as pool:
        assert isinstance(pool, WorkerPool)
        with pytest.raises(BrokenProcessPool):
            pool._pool.submit(os._exit, 3).result()  # the worker process ends: the pool is broken
        assert pool.start(DRAWINGS[:1])() == IN_PROCESS.start(DRAWINGS[:1])()


def test_a_name_that_is_no_plot_function_fails_loudly():
    with pytest.raises(AttributeError):
        IN_PROCESS.start([Drawing("plots", "no_such_plot", ("x",))])()


def test_the_page_command_itself_never_imports_matplotlib():
    """The report's process says what to draw; matplotlib is the workers' (a third of a second each)."""
    code = ("import sys; from vmbench.cli import report; from vmbench.report import html, sections; "
            "print('matplotlib' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
