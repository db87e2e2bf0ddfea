"""Issue 41: the mistakes a newcomer makes, each with a clear error and the exit status the docs
give (docs/guarantees.md): the first line names the file, key or run in under 160 characters,
the rest below it and as a hint, every line of both within 120 columns; an unknown key is always
named, with the closest known one; a database vmbench did not make is never written to."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vmbench.cli.fit import FIRST_LINE, error_lines
from vmbench.cli.main import main
from vmbench.report.render import WIDTH
from vmbench.scenario.goals import Risk

ROOT = Path(__file__).resolve().parents[2]
JOBS = "jobs:\n  - {name: a, rw: randread, bs: 4k, size: 64M, runtime: 2s}\n"

#: (what the scenario file says, the start of the first line after "FILE:LINE: ", words the hint holds)
SCENARIO_MISTAKES = [
    ("name: t\njob:\n  - {name: a, rw: read, bs: 4k}\n", "job: unknown key; did you mean 'jobs'?", "allowed here: advise"),
    ("name: t\nvm: {cahce: none}\n" + JOBS, "vm.cahce: unknown key; did you mean 'cache'?", "allowed here: aes, aio"),
    ("name: t\nstorge: {pool: p}\n" + JOBS, "storge: unknown key; did you mean 'storage'?", "hypervisor"),
    ("name: t\nvm: {cache: writebak}\n" + JOBS, "vm.cache: 'writebak' is not one of: none", ""),
    ("name: t\njobs:\n  - {name: a, rw: reed, bs: 4k}\n", "jobs[0].rw: 'reed' is not one of", ""),
    ("name: t\njobs:\n  - {nmae: a, rw: read, bs: 4k}\n", "jobs[0].nmae: unknown key; did you mean 'name'?", "allowed here"),
    ("name: t\nrepeats: {min: 3, maxx: 5, until_cv: 5%}\n" + JOBS, "repeats.maxx: unknown key; did you mean 'max'?", "until_cv"),
    ("name: t\nvary: {cach: [writeback]}\n" + JOBS, "vary.cach: unknown key; did you mean 'cache'?", "allowed here"),
    ("name: t\nstacks: [{nmae: x, layers: [ext4]}]\n" + JOBS, "stacks[0].nmae: unknown key; did you mean 'name'?", ""),
    ("name: t\nstorage: {scratch_size: 1X}\n" + JOBS, "storage.scratch_size:", ""),
    ("name: t\nhypervisor: {driver: vmware}\n" + JOBS, "hypervisor.driver: 'vmware' is not one of", ""),
    ("name: t\nhypervisor: {node: pve1}\n" + JOBS, "hypervisor.node: applies to driver proxmox", ""),
    ("name: t\nhost_only: true\n" + JOBS, "host_only: measures host storage variants, which needs ZFS storage", "zfs"),
    ("name: t\ntargets: [{job: nope, min_mb_s: 1}]\n" + JOBS, "targets[0].job:", ""),
    ("name: t\njobs:\n  - {file: missing.fio}\n", "jobs[0].file:", ""),
    ("name: t\ntune: {goal: a:iops, axes: {buss: [sata]}}\n" + JOBS, "tune.axes.buss: unknown key; did you mean 'bus'?", ""),
    ("name: t\nvm: {iops: 100, iops_wr: 50}\n" + JOBS, "vm: iops cannot be given with iops_wr", ""),
    ("name: t\njobs: []\n", "jobs: the scenario needs at least one job", "profiles"),
    ("name: t\n  bad: [\n", "not valid YAML", ""),
]


def check_lines(err: str) -> list[str]:
    """The error's lines (the progress lines before it left out: a database migrated on the way)."""
    lines = err.rstrip("\n").split("\n")
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith("error: ")):]
    assert lines[0].startswith("error: ") and len(lines[0]) < FIRST_LINE, lines[0]
    assert all(len(line) <= WIDTH for line in lines[1:]), lines
    return lines


@pytest.mark.parametrize("text, first, hint", SCENARIO_MISTAKES, ids=[m[1][:30] for m in SCENARIO_MISTAKES])
def test_scenario_mistakes_are_named_in_a_short_first_line(tmp_path, capsys, text, first, hint):
    path = tmp_path / "t.yaml"
    path.write_text(text)
    assert main(["plan", str(path), "--accel", "tcg"]) == 2
    lines = check_lines(capsys.readouterr().err)
    assert lines[0].startswith(f"error: {path}:") and first in lines[0], lines[0]
    said = " ".join(" ".join(lines[1:]).split())
    assert hint in said


@pytest.fixture
def stored(tmp_path) -> Path:
    path = tmp_path / "r.db"
    shutil.copyfile(ROOT / "tests" / "data" / "results-v1.db", path)
    return path


def test_command_line_mistakes_exit_as_documented(tmp_path, stored, capsys):
    empty, foreign = tmp_path / "empty.db", tmp_path / "foreign.db"
    empty.write_bytes(b"")
    foreign.write_text("hello\n")
    cases = [
        (["report", "--db", str(tmp_path / "none.db")], 5, "no results database at"),
        (["report", "--db", str(stored), "42"], 5, "no run '42' in"),
        (["report", "--db", str(stored), "--format", "xml"], 2, "--format: 'xml' is not one of"),
        (["report", "--db", str(stored), "--format", "html"], 2, "--format html writes a file"),
        (["report", "--db", str(stored), "--section", "nope"], 2, "--section: section 'nope' is in no table"),
        (["advise", "--db", str(stored), "42"], 2, "no run '42' in"),
        (["advise", "--db", str(stored), "--goal", "4k:speed"], 2, "--goal 4k:speed:"),
        (["advise", "--db", str(stored), "--allow", "unsafe"], 2, "--allow: 'unsafe' is not one of"),
        (["advise", "--db", str(stored), "--format", "csv"], 2, "--format csv: advice is not a table of records"),
        (["advise", "--db", str(stored), "--read-vm"], 2, "--read-vm needs --vmid N or --domain NAME"),
        (["compare", "--db", str(stored), "1", "42"], 5, "no run '42' in"),
        (["run", "--db", str(stored), str(ROOT / "scenarios" / "tune.yaml")], 2, "is a tune (it has a tune: section)"),
        (["run", "--db", str(stored)], 2, "vmbench run needs a scenario file"),
        (["plan", str(tmp_path / "nope.yaml")], 2, "nope.yaml: no such scenario file"),
        (["runs", "--db", str(foreign)], 5, "is not a vmbench results database (SQLite cannot read it"),
        (["report", "--db", str(empty)], 5, "is not a vmbench results database (it is empty)"),
    ]
    for argv, code, first in cases:
        assert main(argv) == code, argv
        lines = check_lines(capsys.readouterr().err)
        assert first in lines[0], (argv, lines)


def test_a_database_vmbench_did_not_make_is_never_written(tmp_path, capsys):
    empty, foreign = tmp_path / "empty.db", tmp_path / "foreign.db"
    empty.write_bytes(b"")
    foreign.write_text("not a database\n")
    for argv in (["report", "latest"], ["runs"], ["advise"], ["run", str(ROOT / "scenarios" / "quick.yaml")]):
        for db in (empty, foreign):
            before = db.read_bytes()
            assert main([*argv[:1], "--db", str(db), *argv[1:]]) == 5, (argv, db)
            assert db.read_bytes() == before and not list(tmp_path.glob("*-journal")), (argv, db)
    capsys.readouterr()


def test_a_migration_says_what_it_did(stored, capsys):
    assert main(["runs", "--db", str(stored)]) == 0
    err = " ".join(capsys.readouterr().err.split())  # wrapped to the terminal's width
    assert (f"migrated {stored} from results schema version 1 to 5, adding the attempts of resumed runs, each "
            "measurement's boot, telemetry series; each measurement's VM and load step (many VMs at once); each measurement's host "
            "(runs across several hosts); the host named on every measurement") in err
    assert f"its runs are unchanged; the file as it was is kept at {stored}.v1-backup" in err
    assert main(["runs", "--db", str(stored)]) == 0 and "migrated" not in capsys.readouterr().err  # once


def test_advise_help_lists_exactly_the_risks_it_accepts(capsys):
    with pytest.raises(SystemExit):
        main(["advise", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"Risks (--allow): {', '.join(r.value for r in Risk)};" in text


def test_any_long_error_keeps_its_first_line_short_and_the_rest_below():
    argv = "fio --name=j1 --filename=/dev/vdb " + " ".join(f"--opt{i}=value{i}" for i in range(40))
    lines = error_lines(f"command failed (exit 1): {argv}\nfio: file:engines/libaio.c: something", "look at the guest")
    assert lines[0] == "error: command failed (exit 1):" and lines[-1] == "hint: look at the guest"
    assert " ".join(" ".join(lines).split()).endswith(f"{argv} fio: file:engines/libaio.c: something hint: look at the guest")
    assert all(len(line) <= WIDTH for line in lines)
    long_clause = "x" * 200
    lines = error_lines(f"t.yaml:3: vm: {long_clause} and more")
    assert len(lines[0]) < FIRST_LINE and " ".join(lines).replace(" ", "").count("x") == 200
