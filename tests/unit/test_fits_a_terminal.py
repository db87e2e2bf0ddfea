"""Issue 41: what vmbench prints fits a 120-column terminal.  Every shipped scenario's plan and
every stored run's report (text) and advice, at most 120 columns; a plan labels every column,
spells each value one way (iothread=off, never False), shows no internal key (memory_mib) and
says sync only of jobs that write; ``--wide`` prints every setting of every cell."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from vmbench.cli.main import main
from vmbench.report.render import WIDTH

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "scenarios").glob("*.yaml"))
STORED = sorted((ROOT / "tests" / "data").glob("*.db"))


def too_wide(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > WIDTH]


def unlabelled_columns(text: str) -> list[str]:
    """The header lines of simple tables with a column that has no header (dashes under blanks)."""
    lines = text.splitlines()
    out = []
    for above, rule in zip(lines, lines[1:]):
        if not re.fullmatch(r"-+( +-+)*", rule):
            continue
        for m in re.finditer(r"-+", rule):
            if not above[m.start():m.end()].strip():
                out.append(above)
    return out


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
def test_every_shipped_scenario_plans_within_120_columns(path, capsys):
    assert main(["plan", str(path), "--accel", "tcg"]) == 0
    out = capsys.readouterr().out
    assert too_wide(out) == []
    assert unlabelled_columns(out) == []
    assert not re.search(r"=(True|False)\b", out) and "memory_mib" not in out
    for line in out.splitlines():  # a read job never says sync
        if re.match(r"\S+ +(read|randread) ", line):
            assert " sync" not in line, line


def test_plan_wide_shows_every_setting_of_every_cell(capsys):
    assert main(["plan", str(ROOT / "scenarios" / "bus-and-iothread.yaml"), "--accel", "tcg", "--wide"]) == 0
    wide = capsys.readouterr().out
    assert "bus=virtio-scsi, cache=none, iothread=on, aio=native, cpu=kvm64, format=raw, vcpus=2, memory=1G" in wide
    assert main(["plan", str(ROOT / "scenarios" / "bus-and-iothread.yaml"), "--accel", "tcg"]) == 0
    narrow = capsys.readouterr().out
    assert "VM settings of cell virtio-blk (the others: their changes from it): bus=virtio-blk, cache=none, iothread=off" in narrow
    assert re.search(r"virtio-scsi\+iothread +bus=virtio-scsi, iothread=on +raw", narrow)


@pytest.mark.parametrize("path", STORED, ids=lambda p: p.name)
def test_every_stored_run_reports_and_advises_within_120_columns(path, tmp_path, capsys):
    db = tmp_path / path.name
    shutil.copyfile(path, db)
    assert main(["report", "--db", str(db)]) == 0
    report = capsys.readouterr().out
    assert report.startswith("Summary\n=======\nHow much slower the guest is") and too_wide(report) == []
    assert "What to change next: " in report.split("\n\n")[0]
    assert main(["advise", "--db", str(db)]) == 0
    assert too_wide(capsys.readouterr().out) == []


def test_a_table_cell_wraps_between_settings_never_inside_a_host_key():
    from vmbench.cli.fit import fitted

    fp = "SHA256:TsW0RB7jybitVTL9iu9jU49+ex6y5fpLC9UQkNiGpNU"  # base64 holds pluses
    table = fitted([["ssh", "ok", f"root@127.0.0.1:2222: connected, host key ssh-ed25519 {fp} " + "x" * 80],
                    ["cell", "ok", "+".join(f"setting{i}=value{i}" for i in range(12))]], ["check", "status", "detail"])
    assert fp in table.split()
    assert all(len(line) <= WIDTH for line in table.splitlines())
    assert any(re.fullmatch(r"(setting\d+=value\d+\+)+", w) for w in table.split())  # a cell's name breaks after a plus
