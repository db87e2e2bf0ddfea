"""How long the HTML report takes for a 100-cell run, and how big it is.

The run is built from the committed fixture tests/data/results-v1.db (a real run: host and
guest fio on this machine).  Its measurement rows are replicated, unchanged, into a new run
of 100 cells x its jobs, every fifth cell also with a stack of three layers
(partition -> lvm -> ext4) whose rows are copies of the fixture's raw and ext4 rows: every
number is a real fio figure from the fixture, only the labels are new.

    .venv/bin/python bench/render_html.py [--cells 100] [--repeat 3] [--fresh 5] [--keep report.html]

The fresh-process figures are the median of ``--fresh`` processes (wall clock, and the CPU
time the process used: on a busy machine the wall clock waits for a core, the CPU time not):
the page alone, ``vmbench report --format html`` and the text ``vmbench report``, both with the
advice section.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIXTURE = ROOT / "tests" / "data" / "results-v1.db"
STACK = {"name": "gpt-lvm-ext4", "layers": ["partition", "lvm", "ext4"], "luks": None}
LAYERS = ["partition", "partition+lvm", "partition+lvm+ext4"]


def _copy_row(db, table: str, row_id: int, **changes) -> int:
    cols = [r[1] for r in db.conn.execute(f"PRAGMA table_info({table})") if r[1] != "id"]
    values = db.conn.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE id = ?", (row_id,)).fetchone()
    row = dict(zip(cols, values), **changes)
    with db.conn:
        cur = db.conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})", list(row.values()))
    return int(cur.lastrowid)


def build_run(db, n_cells: int = 100, stack_every: int = 5) -> int:
    """A new run in ``db`` with ``n_cells`` cells made of the fixture run's rows."""
    from vmbench.results.records import CellRecord, Settings  # after ROOT is on the path
    from vmbench.results.runrow import RunRow
    src = db.resolve_run(1)
    text = db.conn.execute("SELECT scenario_text FROM runs WHERE id = ?", (src.id,)).fetchone()[0]
    cells = sorted(db.rows("cells", src.id), key=lambda c: c["seq"])
    meas = db.conn.execute("SELECT id, side, cell_id, stack, layer, job FROM measurements WHERE run_id = ? ORDER BY id", (src.id,)).fetchall()
    boots = {b["id"]: b for b in db.rows("boots", src.id)}
    plan = json.loads(json.dumps(src.plan_json))
    plan["scenario"] = f"bench-{n_cells}-cells"
    plan["stacks"] = [STACK]
    plan["cells"], plan["boots"] = [], []
    run_id = db.start_run(RunRow.starting(tag=f"bench{n_cells}", scenario_name=plan["scenario"], scenario_path="bench/render_html.py",
                                          scenario_text=text, plan=plan, version="bench"))
    for m in meas:
        if m["side"] == "host":
            _copy_row(db, "measurements", m["id"], run_id=run_id)
    for i in range(n_cells):
        base = cells[i % len(cells)]
        other = cells[(i + 1) % len(cells)]
        stacks = [STACK["name"]] if i % stack_every == 0 else []
        name = "baseline" if i == 0 else f"c{i:03d} cache={base['settings']['cache']}"
        boot_id = _copy_row(db, "boots", base["boot_id"], run_id=run_id, seq=i + 1,
                            domain_name=f"vmbench-bench{n_cells}-{i + 1}")
        cell_id = db.add_cell(CellRecord(name, run_id=run_id, boot_id=boot_id, seq=i + 1, settings=Settings.of(base["settings"]),
                                         changed=() if i == 0 else ("cache",), stacks=tuple(stacks), valid=True))
        plan["cells"].append({"name": name, "settings": base["settings"], "changed": [] if i == 0 else ["cache"], "stacks": stacks})
        plan["boots"].append({"seq": i + 1, "cells": [name], "settings": boots[base["boot_id"]]["settings"]})
        for m in meas:
            if m["side"] != "guest" or m["cell_id"] != base["id"] or m["layer"] != "raw":
                continue
            _copy_row(db, "measurements", m["id"], run_id=run_id, cell_id=cell_id, boot_id=boot_id)
            if not stacks:
                continue
            # partition <- the other cell's raw row, +lvm <- the other cell's ext4 row, +ext4 <- this cell's ext4 row
            sources = [(other["id"], "raw"), (other["id"], "ext4"), (base["id"], "ext4")]
            for depth, (layer, (src_cell, src_layer)) in enumerate(zip(LAYERS, sources), start=1):
                src_id = next(x["id"] for x in meas if x["cell_id"] == src_cell and x["layer"] == src_layer and x["job"] == m["job"])
                _copy_row(db, "measurements", src_id, run_id=run_id, cell_id=cell_id, boot_id=boot_id,
                          stack=STACK["name"], layer=layer, depth=depth)
    with db.conn:
        db.conn.execute("UPDATE runs SET plan_json = ? WHERE id = ?", (json.dumps(plan, sort_keys=True), run_id))
    db.set_environment(run_id, src.environment)
    db.finish_run(run_id, "ok")
    return run_id


def fresh(argv: list[str], n: int) -> str:
    """``argv`` run ``n`` times as a new process: the median wall clock and CPU time (user +
    system), and the range of the wall clock."""
    wall, cpu = [], []
    for _ in range(max(n, 1)):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, check=True, cwd=ROOT, stdout=subprocess.DEVNULL, env=dict(os.environ, PYTHONPATH=str(ROOT)))
        wall.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    return (f"{statistics.median(wall):.2f} s (median of {len(wall)}: {min(wall):.2f} to {max(wall):.2f} s), "
            f"CPU {statistics.median(cpu):.2f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cells", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3, help="renders after the first, in the same process")
    ap.add_argument("--fresh", type=int, default=5, help="fresh processes timed (the median is printed)")
    ap.add_argument("--keep", help="also write the page here")
    args = ap.parse_args()

    t0 = time.perf_counter()
    from vmbench.report.figures import MAX_WORKERS, usable_cores
    from vmbench.report.html import render_page  # Jinja2 comes with it; matplotlib with the first drawing
    from vmbench.report.build import build_report
    from vmbench.report.load import load_run
    from vmbench.results.db import ResultsDB
    t_import = time.perf_counter() - t0

    with tempfile.TemporaryDirectory(prefix="vmbench-bench-") as tmp:
        path = Path(tmp) / "results.db"
        shutil.copy(FIXTURE, path)
        db = ResultsDB(path)  # migrates v1 -> v2
        db.conn.execute("PRAGMA synchronous = OFF")  # a scratch copy: no need to wait for the disk on each row
        run_id = build_run(db, args.cells)
        n_meas = db.conn.execute("SELECT COUNT(*) FROM measurements WHERE run_id = ?", (run_id,)).fetchone()[0]

        def render() -> tuple[str, float, float]:
            """The page, as `vmbench report` makes it: the run loaded once, its tables, the page;
            with the seconds spent loading and making the tables."""
            t0 = time.perf_counter()
            data = load_run(db, run_id)
            t1 = time.perf_counter()
            header, tables = build_report(data)
            t2 = time.perf_counter()
            return render_page(data, header, tables), t1 - t0, t2 - t1

        t0 = time.perf_counter()
        page, t_load, t_tables = render()
        first = time.perf_counter() - t0
        again = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            render()
            again.append(time.perf_counter() - t0)
        if args.keep:
            Path(args.keep).write_text(page, encoding="utf-8")
        db.close()
        # a fresh process that imports, opens the database, renders and writes the page (the
        # report's tables and plots, drawn in the process); and the whole command, `vmbench
        # report RUN --format html -o FILE`, whose page also has the advice section and whose
        # figures are drawn by worker processes where there are cores for them
        child = ("import sys; from vmbench.results.db import ResultsDB; "
                 "from vmbench.report.html import write_html; from vmbench.report.load import load_run; "
                 "write_html(load_run(ResultsDB(sys.argv[1], create=False), int(sys.argv[2])), sys.argv[3])")
        out = str(Path(tmp) / "report.html")
        cold = fresh([sys.executable, "-c", child, str(path), str(run_id), out], args.fresh)
        command = fresh([sys.executable, "-m", "vmbench", "report", str(run_id), "--db", str(path), "--format", "html", "-o", out],
                        args.fresh)
        text = fresh([sys.executable, "-m", "vmbench", "report", str(run_id), "--db", str(path)], args.fresh)

    print(f"run: {args.cells} cells, {n_meas} measurement rows (every figure copied from {FIXTURE.relative_to(ROOT)})")
    print(f"import vmbench.report.html (Jinja2, no matplotlib): {t_import:.2f} s")
    print(f"load, tables and page, first time (matplotlib imported): {first:.2f} s")
    if again:
        print(f"load, tables and page, next {len(again)} (median): {statistics.median(again):.2f} s")
    print(f"  of which load_run (the database):     {t_load:.2f} s")
    print(f"  of which build_report (the tables):   {t_tables:.2f} s")
    print(f"fresh process (python start, imports, render, write; figures drawn in the process): {cold}")
    workers = min(usable_cores(), MAX_WORKERS)
    print(f"vmbench report --format html (the page with the advice section; figures drawn by "
          f"{workers if workers > 1 else 'no'} worker processes): {command}")
    print(f"vmbench report (the text report with the advice section): {text}")
    print(f"page: {len(page.encode()) / 1024:.0f} KiB, {page.count('<svg')} plots, {page.count('<table')} tables")
    return 0


if __name__ == "__main__":
    sys.exit(main())
