"""The offline HTML report: rendered from the committed v1 fixture (a real run), checked for
every table, a plot per kind that has data, no network reference, escaping and markup."""

from __future__ import annotations

import html
import json
import re
import shutil
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tests.records import as_crypto
from vmbench.report import html as report_html
from vmbench.report import plots
from vmbench.report.ticks import drawn_ticks_only
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.report.html import render_html, write_html
from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.runrow import RunRow

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "results-v1.db"
EVIL = "<script>alert(1)</script>"
VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@pytest.fixture
def db(tmp_path):
    shutil.copy(FIXTURE, tmp_path / "r.db")
    d = ResultsDB(tmp_path / "r.db")  # migrates v1 -> v2
    yield d
    d.close()


def _copy(db, table: str, row_id: int, **changes) -> int:
    cols = [r[1] for r in db.conn.execute(f"PRAGMA table_info({table})") if r[1] != "id"]
    row = dict(zip(cols, db.conn.execute(f"SELECT {', '.join(cols)} FROM {table} WHERE id = ?", (row_id,)).fetchone()), **changes)
    with db.conn:
        return int(db.conn.execute(f"INSERT INTO {table} ({', '.join(row)}) VALUES ({', '.join('?' for _ in row)})",
                                   list(row.values())).lastrowid)


def copy_run(db, scenario_name: str, cell_name=lambda name: name, luks: bool = False, plan_extra: dict | None = None) -> int:
    """A new run made of run 1's stored rows (the fixture's fio figures, unchanged); with
    ``luks`` its stack is called a LUKS stack and its layer luks2."""
    src = db.resolve_run(1)
    plan = json.loads(json.dumps(src.plan_json))
    plan.update(plan_extra or {})
    if luks:
        plan["stacks"] = [{"name": "luks", "layers": ["luks"], "luks": {"cipher": "aes-xts-plain64", "key_bits": 512}}]
    names = {}
    for c in plan["cells"]:
        names[c["name"]] = cell_name(c["name"])
        c["name"] = names[c["name"]]
        c["stacks"] = ["luks"] if luks else c["stacks"]
    text = db.conn.execute("SELECT scenario_text FROM runs WHERE id = 1").fetchone()[0]
    rid = db.start_run(RunRow.starting(tag=f"t{len(db.runs()) + 1}", scenario_name=scenario_name, scenario_path="/tmp/x.yaml",
                                       scenario_text=text, plan=plan, version="test"))
    db.set_environment(rid, Environment(src.environment))
    cell_ids = {}
    for c in db.rows("cells", 1):
        boot = _copy(db, "boots", c["boot_id"], run_id=rid)
        cell_ids[c["id"]] = _copy(db, "cells", c["id"], run_id=rid, boot_id=boot, name=names[c["name"]],
                                  stacks_json=json.dumps(["luks"] if luks else c["stacks"]))
    for m in db.rows("measurements", 1):
        changes = {"run_id": rid, "cell_id": cell_ids.get(m["cell_id"])}
        if luks and m["stack"]:
            changes.update(stack="luks", layer="luks2")
        _copy(db, "measurements", m["id"], **changes)
    db.finish_run(rid, "ok")
    return rid


def section(page: str, anchor: str) -> str:
    m = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert m, anchor
    return m.group(1)


class Balance(HTMLParser):
    """Every element closed, in order (void elements and <x/> excepted)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.errors: list[str] = []
        self.ids: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]
        self.tags.add(tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.ids += [v for k, v in attrs if k == "id"]
        self.tags.add(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.stack[-1:]}")
        else:
            self.stack.pop()


def test_every_table_every_plot_kind_and_the_environment(db):
    page = render_html(load_run(db, "latest"))
    header, tables = build_report(load_run(db, "latest"))
    assert page.startswith("<!DOCTYPE html>")
    for t in (t for t in tables if t.records):  # a table with no rows is left out
        assert f"<caption>{html.escape(t.title)}</caption>" in page
        for note in t.notes:
            assert html.escape(note) in page
    for key, value in header.items():
        assert f"<dt>{html.escape(key)}</dt><dd>{html.escape(str(value))}</dd>" in page
    # every figure of the tables is in the page as text, e.g. the host's IOPS in the gap table
    assert "<td class=\"num\">58,756</td>" in page
    # a plot per kind that has data; the others say why there is none
    for anchor in ("plot-layers", "plot-latency", "plot-cells"):
        assert "<svg" in section(page, anchor), anchor
    # sections with nothing to show are left out (no LUKS layer, no fio logs), and so are tables with no rows
    assert 'id="plot-crypto"' not in page and "no LUKS layer" not in page and 'id="plot-timeline"' not in page
    # every plot has a <title>, an aria-label and a text alternative beside it
    svgs = re.findall(r"<svg\b[^>]*>\s*<title>[^<]+</title>", page)
    assert len(svgs) == page.count("<svg") == page.count("<figcaption>") >= 6
    assert all('role="img" aria-label="' in s for s in svgs)
    assert "IOPS per layer.</b> 4k-randwrite: host 58,756 IOPS; raw 6,270 IOPS (-89.3%)" in page
    # the environment, collapsible and pretty-printed
    env = section(page, "environment")
    assert "<details><summary>Environment (as recorded by the run)</summary><pre>{\n  &quot;accelerator&quot;: &quot;tcg&quot;" in env


def test_self_contained_no_network_reference(db, tmp_path):
    out = write_html(load_run(db, "latest"), tmp_path / "report.html")
    page = out.read_text(encoding="utf-8")
    low = page.lower()
    for bad in ("<script", "<link", "<img", "<iframe", "<object", "<embed", "src=", "@import", "url(http", "url('http", 'url("http'):
        assert bad not in low, bad
    # the only URLs are SVG namespace declarations (the environment's mirror URL is shown, not linked)
    without_ns = re.sub(r'\sxmlns(?::\w+)?="[^"]*"', "", page)
    assert not re.search(r"https?://", without_ns, re.I)
    assert re.findall(r'href="([^"]*)"', page) and all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', page))
    assert "deb.debian.org" in page  # the mirror URL is still readable, as text
    p = Balance()
    p.feed(page)
    p.close()
    assert p.errors == [] and p.stack == []
    assert len(p.ids) == len(set(p.ids))  # ids unique across the inline SVGs too


def test_everything_from_the_database_is_escaped(db):
    rid = copy_run(db, EVIL, cell_name=lambda n: f'{n} <img src=x onerror="alert(2)">&$x$')
    page = render_html(load_run(db, rid))
    assert EVIL not in page and "<script" not in page.lower()
    assert html.escape(EVIL) in page
    assert "<img" not in page
    p = Balance()
    p.feed(page)
    assert not {"script", "img"} & p.tags  # as parsed by a browser-like parser: no such element at all
    assert "&lt;img src=x onerror=&quot;alert(2)&quot;&gt;&amp;$x$" in page  # a cell name in a table
    assert "&lt;img src=x" in section(page, "plot-cells")  # and inside the SVG (tick labels), escaped by matplotlib
    assert f"<title>vmbench report: run {rid} (t2), {html.escape(EVIL)}</title>" in page


def test_luks_crypto_targets_and_fio_logs(db):
    rid = copy_run(db, "luks", luks=True, plan_extra={"targets": [{"job": "1m-read", "min_mb_s": 118}]})
    db.add_crypto(as_crypto(run_id=rid, side="guest", cpu="kvm64", aes_flag=False, cipher="aes-xts-plain64", key_bits=512,
                  encrypt_mib_s=180.5, decrypt_mib_s=190.25))
    m = db.rows("measurements", rid)
    for row in m[:3]:  # one series per measurement, as fio's logs give them (1 s bins)
        for source, unit, values in (("fio-iops", "IOPS", [row["iops"] * 0.9, row["iops"], row["iops"] * 1.1]),
                                     ("fio-clat", "ms", [0.4, 0.5, 0.45])):
            db.conn.execute("INSERT INTO telemetry (run_id, measurement_id, source, series_json) VALUES (?, ?, ?, ?)",
                            (rid, row["id"], source, json.dumps({"t_s": [1.0, 2.0, 3.0], "values": values, "unit": unit})))
    db.conn.commit()
    page = render_html(load_run(db, rid))
    crypto = section(page, "plot-crypto")
    assert crypto.count("<svg") == 2  # one per job
    assert "ceiling encrypt 189 MB/s" in crypto  # 180.5 MiB/s in MB/s
    assert "target 118 MB/s" in crypto
    timeline = section(page, "plot-timeline")
    assert timeline.count("<svg") == 2 and "no fio logs" not in timeline  # one per job
    assert "fio-iops host: 3 points over 3.00 s" in timeline and "fio-clat baseline raw: 3 points" in timeline
    assert "Targets" in page and "PASS" in page


def test_cell_bars_show_intervals_and_verdicts():
    recs = [{"cell": "baseline", "vs_baseline": None},
            {"cell": "cache=writeback", "vs_baseline": 0.25, "vs_baseline_low": 0.1, "vs_baseline_high": 0.4, "vs_baseline_verdict": "faster"},
            {"cell": "cache=unsafe", "vs_baseline": -0.05, "vs_baseline_low": -0.2, "vs_baseline_high": 0.1, "vs_baseline_verdict": "within noise"},
            {"cell": "aio=native", "vs_baseline": 0.02, "vs_baseline_why": "fewer than 3 repeats"}]
    p = plots.cell_bars("job: change", recs, "vs_baseline")
    assert "+25.0%  faster" in p.svg and "-5.0%  within noise" in p.svg and "no verdict: fewer than 3 repeats" in p.svg
    assert "cache=writeback: +25.0% [10.0%, 40.0%], faster" in p.alt
    assert p.svg.count("<title>") == 1 and not p.svg.startswith("<?xml") and "<metadata>" not in p.svg


def test_latency_curve_matches_the_tables_percentiles(db):
    from vmbench.fio.result import Histogram

    m = db.rows("measurements", 1)[0]
    h = Histogram.from_json(m["clat_bins"])
    ys = plots.percentile_curve(h.bins, [50.0, 99.0, 99.9])
    assert list(ys) == [h.percentile(50.0) / 1e6, h.percentile(99.0) / 1e6, h.percentile(99.9) / 1e6]


def test_tolerates_tables_without_facts_or_row_formats(db, monkeypatch):
    """An older table model (no facts/missing, Column without text()) still renders."""

    @dataclass
    class OldColumn:
        key: str
        header: str
        fmt: object = str

    @dataclass
    class OldTable:
        name: str
        title: str
        columns: list
        records: list
        notes: list = field(default_factory=list)

    header, tables = build_report(load_run(db, "latest"))
    old = [OldTable(t.name, t.title, [OldColumn(c.key, c.header, c.fmt) for c in t.columns], t.records, t.notes) for t in tables]
    monkeypatch.setattr(report_html, "build_report", lambda _data: (header, old))  # the run is loaded first
    page = render_html(load_run(db, "latest"))
    assert all(f"<caption>{html.escape(t.title)}</caption>" in page for t in tables if t.records)
    assert "<svg" in section(page, "plot-layers")


def test_journey_steps_and_crypto_without_a_luks_layer(db):
    rid = copy_run(db, "journey", plan_extra={"mode": "journey"})
    db.add_crypto(as_crypto(run_id=rid, side="host", cpu="host", aes_flag=True, cipher="aes-xts-plain64", key_bits=512,
                  encrypt_mib_s=1500.0, decrypt_mib_s=None, error=None))
    page = render_html(load_run(db, rid))
    assert "<caption>Tuning journey: each step&#x27;s top layer</caption>" in page
    cells = section(page, "plot-cells")
    assert cells.count("<svg") == 4 and "change per journey step" in cells  # 2 jobs x (cells, journey steps)
    crypto = section(page, "plot-crypto")
    assert crypto.count("<svg") == 1 and "Crypto ceilings (no LUKS layer measured)" in crypto
    assert "host host aes-xts-plain64/512: ceiling encrypt 1,573 MB/s." in crypto  # no decrypt figure: no bar


def test_same_run_same_page(db):
    assert render_html(load_run(db, "latest")) == render_html(load_run(db, "latest"))


def test_backticks_are_code_flags_come_in_order_and_long_text_wraps(db):
    """Issue 41: a Markdown code span in the summary, a note or a cell is <code>; the flags list
    what a reader acts on before notes on figures, and the CPU sampler's own notes last; text
    over 16 characters with a space wraps (shorter text and numbers stay on one line)."""
    from vmbench.advice.table import report_with_advice

    data = load_run(db, "latest")
    page = report_html.render_page(data, *report_with_advice(data))
    assert "<code>repeats: 3</code>" in page and "`" not in re.sub(r"(?s)<details>.*?</details>", "", page)
    assert report_html.code_spans(report_html.esc("run `a <b>` now")) == "run <code>a &lt;b&gt;</code> now"
    assert re.search(r'<td class="wrap">not judged: fewer than 3 repeats</td>', page)
    assert '<td>cache=writeback</td>' in page
    from vmbench.report.tables import Table

    header, tables = report_with_advice(data)
    cpu = Table("cpu-per-io", "CPU per I/O", [], [{"job": "4k-randwrite", "cell": "baseline", "note": "host rest not known"}])
    levels = [level for level, _ in report_html.flags(data, header, [cpu, *tables])]
    assert levels == sorted(levels, key=report_html.FLAG_ORDER.index) and levels[-1] == "measurement note"
    assert levels[0] == "note" and "note" in levels[:-1]  # the TCG note and the figures' notes before the sampler's


@pytest.mark.parametrize("text", ["1,234", "plain words here", "a&b", "<x>", 'say "hi"', "it's", "`repeats: 3`",
                                  "see https://example.invalid", "ratio 1:2", ""])
def test_a_cell_escaped_only_when_it_needs_it_reads_as_escaped(text):
    """The table cells' fast path (text left as it is) gives what escaping every cell gave."""
    needs = bool(report_html.NEEDS_ESCAPE.search(text))
    assert needs or report_html.code_spans(report_html.esc(text)) == text


def _figure(kind: str):
    import numpy as np

    fig = plots.new_figure(4.0, 3.0)
    ax = fig.subplots()
    if kind == "log":
        ax.plot([1.0, 30.0, 900.0], [0.07, 0.9, 42.0])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(plots.MS_FORMAT)
        ax.yaxis.set_minor_formatter(plots.NullFormatter())
    elif kind == "offset":  # a ScalarFormatter with an offset: its ticks are left as they are if labels would change
        ax.plot(np.linspace(100000.0, 100000.4, 5), [3.0, 1.0, 4.0, 1.0, 5.0])
    else:
        ax.bar([0, 1, 2], [12345.0, 800.0, 40000.0])
        ax.yaxis.set_major_formatter(plots.THOUSANDS_FORMAT)
        ax.minorticks_on()
    return fig


@pytest.mark.parametrize("kind", ["log", "offset", "bars"])
def test_ticks_fixed_to_those_drawn_leave_the_svg_as_it_was(kind):
    import io
    from matplotlib.ticker import FixedLocator

    import matplotlib

    def svg(fig) -> str:
        buf = io.StringIO()
        with matplotlib.rc_context({"svg.hashsalt": "t"}):
            fig.savefig(buf, format="svg", metadata={"Date": None})
        return buf.getvalue()

    with matplotlib.rc_context(plots.RC):
        before = svg(_figure(kind))
        fig = _figure(kind)
        for ax in fig.axes:
            drawn_ticks_only(ax.xaxis)
            drawn_ticks_only(ax.yaxis)
        fixed = [a for ax in fig.axes for a in (ax.xaxis, ax.yaxis)
                 if isinstance(a.get_major_locator(), FixedLocator) or isinstance(a.get_minor_locator(), FixedLocator)]
        assert fixed  # ticks beyond the limits were left out
        assert svg(fig) == before
