"""fio's own example job files (Debian's fio-examples) run unchanged by vmbench, all three in one
guest boot: a verify job (basic-verify: a device named /dev/XXX, no size), a file with comments
after its values, the timeout alias and four stonewalled groups (tiobench-example), and steady
state with /dev/null in one section and /dev/zero in the next (steadystate).  Each runs on the
host's scratch file and the guest's raw disk as a copy pointed at that target."""

from __future__ import annotations

import glob
from pathlib import Path

from tests.integration.conftest import FIO_EXAMPLES as RUN, ROOT, run_tag_resources, vmbench
from vmbench.results.db import ResultsDB

SECTIONS = {  # the job sections fio reports for each (group_reporting folds steadystate's clones)
    "basic-verify": ["write-and-verify"],
    "tiobench-example": ["f1"] * 4 + ["f2"] * 4 + ["f3"] * 4 + ["f4"] * 4,
    "steadystate": ["ss-write", "ss-read"],
}


def test_three_fio_examples_run_in_one_boot(machine, shared_run):
    """In the shared run (conftest.SHARED, one boot), next to the other tests' jobs."""
    db_path, run = shared_run.db_path, shared_run.run
    plan = vmbench("plan", str(shared_run.scenario))
    assert plan.returncode == 0, plan.stderr
    assert "boots: 1" in plan.stdout
    assert run.returncode == 0, run.stderr
    db = ResultsDB(db_path, create=False)
    r = db.resolve_run("latest")
    assert r.status == "ok"
    rows = [m for m in db.rows("measurements", r.id) if m["job"] in SECTIONS]
    assert sorted((m["job"], m["side"], m["layer"]) for m in rows) == sorted(
        (Path(n).stem, side, layer) for n in RUN for side, layer in (("host", "host"), ("guest", "raw")))
    assert len({m["boot_id"] for m in rows if m["side"] == "guest"}) == 1
    for m in rows:
        fio, target = m["fio"], m["target"]
        jobs = fio["jobs"]
        assert [j["jobname"] for j in jobs] == SECTIONS[m["job"]], m["job"]
        assert all(j["job options"]["filename"] == target and j["error"] == 0 for j in jobs)
        assert sum(j["read"]["io_bytes"] + j["write"]["io_bytes"] for j in jobs) > 0 and m["iops"] > 0
        if m["job"] == "tiobench-example":  # timeout=60 is runtime; the comment after numjobs=4 is no part of it
            assert fio["global options"]["runtime"] == "1" and fio["global options"]["numjobs"] == "4"
        if m["job"] == "basic-verify":  # a size added in a new [global] (the file sets none)
            assert fio["global options"]["size"] == "64m"
    # basic-verify stops in its write phase (runtime: 1s): fio would leave its verify state where it ran
    assert not list(ROOT.glob("*verify.state"))
    assert run_tag_resources(machine, r.tag) == []
    assert glob.glob(f"{machine.paths.work}/vmbench-{r.tag}-*") == []
