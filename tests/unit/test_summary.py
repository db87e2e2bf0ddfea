"""Issue 26: every report opens with the answer, read off its own tables.

For each kind of stored run the unit tests make (one VM, stacks, journey, LUKS, ZFS host only,
scaling, noisy neighbours, CPU per I/O, a tune) the summary has one to six sentences, and every
figure in it (a number with its unit or sign) is printed in the tables below it: the summary
never computes a figure of its own."""

from __future__ import annotations

import re

import pytest

from tests.unit.test_advice import READ, WRITE, RunBuilder, luks_run, one_factor
from tests.unit.test_cpu_report import BASE as CPU_BASE, IOTHREAD as CPU_IOTHREAD, new_run as cpu_run
from tests.unit.test_load_report import neighbours, scaling  # noqa: F401  (fixtures)
from vmbench.advice.table import report_with_advice
from vmbench.report.load import load_run
from vmbench.report.render import WIDTH, Format, render
from vmbench.report.summary import MAX_LINES, summary_lines
from vmbench.results.db import ResultsDB

#: a figure as the tables print it: 9.37x, +74.7%, [+16.0, +24.0], 1,234, 0.123
FIGURE = re.compile(r"[+-]?\d+(?:,\d{3})*(?:\.\d+)?(?:x|%)?")


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def check(header, tables) -> list[str]:
    lines = summary_lines(header, tables)
    assert 1 <= len(lines) <= MAX_LINES, lines
    body = render(tables, Format.TABLE, header)  # the report without its summary
    for line in lines:
        for fig in FIGURE.findall(line.replace("repeats: 3", "")):
            assert fig in body, (fig, line)
    text = render(tables, Format.TABLE, header, lines)
    assert text.startswith("Summary\n=======\n") and all(len(l) <= WIDTH for l in text.splitlines())
    assert render(tables, Format.JSON, header, lines).startswith('{\n  "summary": [')
    return lines


def test_one_vm_one_factor(db):
    lines = check(*report_with_advice(one_factor(db)))
    assert lines[0].startswith("How much slower the guest is, gap (host/guest) on the raw disk of cell baseline: "
                               "4k-randwrite 10.00x [9.80, 10.20] (the guest slower)")
    # the biggest change (cache=unsafe, +60%) risks data: what to change next is the safe one, with its command
    assert lines[1] == ("What to change next: iothread: off -> on (4k-randwrite IOPS +20.0% [+17.8, +22.2] faster); "
                        "apply: `virsh edit NAME` and the 2 more under \"apply (libvirt)\" below.")


def test_journey(db):
    b = RunBuilder(db, mode="journey").cell("start").cell("iothread", iothread=True)
    b.host(WRITE, [5000, 5000, 5000]).guest("start", WRITE, [1000, 1010, 990]).guest("iothread", WRITE, [1300, 1310, 1290])
    lines = check(*report_with_advice(b.save()))
    assert lines[1].startswith("What to change next: iothread: off -> on (4k-randwrite IOPS +30.0% [")


def test_stacks_luks_the_costliest_layer(db):
    lines = check(*report_with_advice(luks_run(db)))
    assert any(l.startswith("Costliest layer: ") and "luks2" in l for l in lines), lines


def test_one_repeat_says_what_gives_verdicts(db):
    b = RunBuilder(db, jobs=(READ,)).cell("baseline").cell("iothread=on", iothread=True)
    b.host(READ, [5000]).guest("baseline", READ, [1000]).guest("iothread=on", READ, [1100])
    lines = check(*report_with_advice(b.save()))
    assert lines[1] == "What to change next: not judged yet (fewer than 3 repeats): add `repeats: 3` to the scenario and run it again."
    assert not any("(no verdict" in l for l in lines)  # said once, not after every figure


def test_zfs_host_only(db):
    b = RunBuilder(db, host_only=True, extra={"storage": "zvols under tank/vmbench"}, env={"hostname": "h", "accelerator": "none"})
    b.cell("volblocksize=16k", volblocksize="16k").cell("volblocksize=4k", volblocksize="4k")
    b.host(WRITE, [1000, 1010, 990], cell="volblocksize=16k").host(WRITE, [1500, 1510, 1490], cell="volblocksize=4k")
    lines = check(*report_with_advice(b.save()))
    assert lines[0].startswith("4k-randwrite: fastest storage variant volblocksize=4k: 1,500 IOPS, +50.0% [")


def test_cpu_per_io(db):
    rid = cpu_run(db, {"baseline": CPU_BASE, "iothread=on": CPU_IOTHREAD})
    check(*report_with_advice(load_run(db, rid)))


def test_scaling(scaling):
    db, rid = scaling if isinstance(scaling, tuple) else (scaling, "latest")
    lines = check(*report_with_advice(load_run(db, rid)))
    assert any("knee" in l for l in lines), lines


def test_neighbours(neighbours):
    db, rid = neighbours if isinstance(neighbours, tuple) else (neighbours, "latest")
    lines = check(*report_with_advice(load_run(db, rid)))
    assert any("vs alone" in l for l in lines), lines
