"""The offline HTML report of a real run (3 repeats, a LUKS + ext4 stack, crypto ceilings, a
target), opened in headless Chromium: every section there, every plot drawn, no console
message, no network request made by the page, and at 1400 px nothing wider than the window,
no table scrolling sideways, no plot text clipped; the same for the page of a run of 1,000
cells made from the committed fixture (no guest: bench/render_html.py's run).

Chromium is Debian's /usr/bin/chromium (``scripts/bootstrap`` installs it; tests/htmlcheck.py
runs it).  With VMBENCH_SAVE_SCREENSHOT set, the screenshot is also saved as
docs/html-report.png (``make screenshot`` makes it from the latest run's page).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
from pathlib import Path

from tests.htmlcheck import assert_fits, chromium
from tests.integration.conftest import ROOT, vmbench, write
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.results.db import ResultsDB

SCENARIO = """
name: it-html
storage: {scratch_size: 512M}
vm: {memory: 768M}
stacks:
  - {name: luks-ext4, layers: [luks, ext4]}
crypto_benchmark: [aes-xts-plain64/512]
jobs:
  - {name: 4k-randwrite, rw: randwrite, bs: 4k, iodepth: 4, size: 64M, runtime: 2s, ramp: 0s}
  - {name: 1m-read, rw: read, bs: 1M, iodepth: 4, size: 64M, runtime: 2s, ramp: 0s}
targets:
  - {job: 1m-read, stack: luks-ext4, layer: luks2+ext4, min_mb_s: 1}
repeats: 3
"""
PLOTS_WITH_DATA = ("plot-layers", "plot-latency", "plot-cells", "plot-crypto")


def page_requests(netlog: Path) -> list[str]:
    """URLs the page itself requested (Chromium's own background requests left out)."""
    data = json.loads(netlog.read_text())
    start = data["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    out = []
    for e in data["events"]:
        p = e.get("params") or {}
        if e["type"] == start and (p.get("initiator") == "null" or "file://" in str(p.get("site_for_cookies", ""))):
            out.append(p.get("url"))
    return out


def test_html_report_opens_offline_with_every_section_and_plot(machine, tmp_path):
    scenario = write(tmp_path, "html.yaml", SCENARIO)
    db_path = tmp_path / "r.db"
    run = vmbench("run", str(scenario), "--db", str(db_path))
    assert run.returncode == 0, run.stderr[-3000:]

    report = tmp_path / "report.html"
    r = vmbench("report", "latest", "--db", str(db_path), "--format", "html", "-o", str(report))
    assert r.returncode == 0, r.stderr
    db = ResultsDB(db_path, create=False)
    header, tables = build_report(load_run(db, "latest"))
    run_id = db.resolve_run("latest").id
    fio_logs = db.conn.execute("SELECT COUNT(*) FROM telemetry WHERE run_id = ? AND source LIKE 'fio-%'", (run_id,)).fetchone()[0]
    db.close()
    page = report.read_text(encoding="utf-8")
    assert "<script" not in page.lower()

    # the DOM as Chromium builds it, its console, and the page's network requests
    netlog = tmp_path / "netlog.json"
    dom_run = chromium(tmp_path, "--enable-logging=stderr", "--v=0", f"--log-net-log={netlog}", "--dump-dom", report.as_uri())
    assert dom_run.returncode == 0, dom_run.stderr[-3000:]
    dom = dom_run.stdout
    console = [line for line in dom_run.stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]
    assert console == []
    assert page_requests(netlog) == []

    # every section, every table (title as caption), the header
    ids = set(re.findall(r'<section id="([^"]+)"', dom))
    assert {"run", "flags", "tables", "plots", "environment", *PLOTS_WITH_DATA} <= ids
    for t in (t for t in tables if t.records):  # a table with no rows is left out
        assert f"id=\"table-{t.name}\"" in dom and t.title.replace(">", "&gt;") in dom
    assert {t.name for t in tables} >= {"gaps", "layers", "crypto", "targets"}
    assert header["scenario"].split(" ")[0] in dom

    # every plot drawn: an <svg> with shapes and text in the DOM, for each kind with data
    svgs = re.findall(r"<svg\b.*?</svg>", dom, re.S)
    assert len(svgs) == page.count("<svg") >= 5
    for svg in svgs:
        assert "<path" in svg and "<text" in svg and "<title>" in svg
    for anchor in PLOTS_WITH_DATA:
        body = re.search(rf'<section id="{anchor}">(.*?)</section>', dom, re.S).group(1)
        assert "<svg" in body, anchor
    if fio_logs:
        assert "<svg" in re.search(r'<section id="plot-timeline">(.*?)</section>', dom, re.S).group(1)
    else:  # a section with nothing to show is left out
        assert "plot-timeline" not in ids
    # 3 repeats: intervals and verdicts reach the table and the per-cell bars
    cells = re.search(r'<section id="plot-cells">(.*?)</section>', dom, re.S).group(1)
    assert "No intervals in this report" not in cells and re.search(r"\[[0-9.]+x, [0-9.]+x\]", cells)

    # laid out at 1400 px: nothing wider than the window, no table scrolling sideways, no plot text clipped
    assert_fits(report, tmp_path)

    # and painted: the screenshot is not blank and has the plots' colours
    shot = tmp_path / "report.png"
    shot_run = chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,6000", "--hide-scrollbars", report.as_uri())
    assert shot_run.returncode == 0 and shot.exists(), shot_run.stderr[-3000:]
    from PIL import Image  # matplotlib's own dependency

    img = Image.open(shot).convert("RGB")
    assert img.size == (1400, 6000)  # the summary, the header and the tables come first
    colours = img.getcolors(maxcolors=1 << 20) or []
    assert len(colours) > 50  # text, tables and plots, not an empty page
    near = lambda c, ref: all(abs(a - b) <= 12 for a, b in zip(c, ref))  # noqa: E731
    assert any(near(c, (0x00, 0x72, 0xB2)) for _, c in colours)  # the plots' first colour (Okabe-Ito blue) was drawn
    if os.environ.get("VMBENCH_SAVE_SCREENSHOT"):
        (ROOT / "docs").mkdir(exist_ok=True)
        shutil.copy(shot, ROOT / "docs" / "html-report.png")


def test_the_page_of_a_thousand_cells_fits_1400_px(tmp_path):
    """No guest: the run bench/render_html.py makes of the committed fixture's real fio rows
    (1,000 cells, every fifth with a three-layer stack), and the fixture itself, each page as
    `vmbench report --format html` writes it (with the advice section)."""
    spec = importlib.util.spec_from_file_location("render_html", ROOT / "bench" / "render_html.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    db_path = tmp_path / "cells.db"
    shutil.copyfile(ROOT / "tests" / "data" / "results-v1.db", db_path)
    db = ResultsDB(db_path)
    run_id = bench.build_run(db, 1000)
    db.close()
    for run, name in ((run_id, "cells"), (1, "fixture")):
        page = tmp_path / f"{name}.html"
        r = vmbench("report", str(run), "--db", str(db_path), "--format", "html", "-o", str(page))
        assert r.returncode == 0, r.stderr
        assert_fits(page, tmp_path)
