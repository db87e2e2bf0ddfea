"""A host-only run over a fake OpenZFS host: one zvol per variant, created with every setting
stated, read back, measured, destroyed; a user's zvol untouched; a property that does not
take makes its cell invalid; cleanup finds leftovers by vmbench's property only."""

import textwrap

import pytest

from tests.fakezfs import FakeZfsHost
from vmbench.drivers.hostonly import HostOnlyDriver
from vmbench.errors import PreflightError
from vmbench.paths import HostPaths, StatePaths
from vmbench.progress import RecordingProgress
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario

SCENARIO = """
name: z
host_only: true
storage: {type: zfs, dataset: tank/vmbench, volblocksize: 16k, scratch_size: 256M, properties: {compression: lz4}}
mode: factorial
vary: {volblocksize: [8k, 64k], compression: ['off']}
jobs:
  - {name: w, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
"""


@pytest.fixture
def env(tmp_path):
    host = FakeZfsHost()
    host.add("tank/vmbench")
    host.add("tank/vmbench/uservol", "volume", volblocksize="8192", compression="zstd")
    state = StatePaths(tmp_path / "state")
    db = ResultsDB(tmp_path / "r.db")

    def run(text=SCENARIO, resume=None):
        s = parse_scenario(textwrap.dedent(text), "t.yaml")
        driver = HostOnlyDriver(s.hypervisor, s.storage, host=host, state=state, paths=HostPaths("/var/lib/vmbench"))
        return Runner(s, db, RecordingProgress(), driver=driver, state=state, resume=resume), driver

    return host, db, run


def test_each_variant_is_its_own_zvol_created_read_back_and_destroyed(env):
    host, db, run = env
    runner, driver = run()
    out = runner.run()
    assert out.status == "ok" and not out.invalid_cells
    creates = [c for c in host.commands if c[:2] == ["zfs", "create"]]
    assert creates[0] == ["zfs", "create", "-V", str(256 << 20), "-o", "volblocksize=16384", "-o", "compression=lz4",
                          "-o", f"vmbench:run={out.tag}", f"tank/vmbench/vmbench-{out.tag}-1-hostref"]
    assert [c[c.index("-o") + 1] for c in creates] == ["volblocksize=16384", "volblocksize=8192", "volblocksize=65536"]
    assert all(["zfs", "get"] == c[:2] and c[-1].startswith("tank/vmbench/vmbench-") for c in host.commands
               if c[:2] == ["zfs", "get"] and "volblocksize" in c[-2])
    fio = [c for c in host.commands if c[0] == "fio" and "--name=w" in c]
    assert [a for c in fio for a in c if a.startswith("--filename=")] == [
        f"--filename=/dev/zvol/tank/vmbench/vmbench-{out.tag}-{i}-hostref" for i in range(1, 4)]
    # only the user's zvol is left, with its properties
    assert sorted(host.datasets) == ["tank", "tank/vmbench", "tank/vmbench/uservol"]
    assert host.datasets["tank/vmbench/uservol"]["props"] == {"volblocksize": "8192", "compression": "zstd"}
    header, tables = build_report(load_run(db, out.run_id))
    assert header["accelerator"].startswith("none") and "OpenZFS zfs-2.1.11-1" in header["zfs"]
    table = tables[0]
    assert table.name == "host-only"
    assert [r["storage"] for r in table.records] == [
        "volblocksize=16k, compression=lz4", "volblocksize=8k, compression=off", "volblocksize=64k, compression=off"]
    cells = db.rows("cells", out.run_id)
    readback = cells[1]["evidence"]["storage"]["volumes"]
    assert list(readback.values())[0]["readback"]["volblocksize"] == "8192"
    env_row = db.resolve_run(out.run_id).environment
    assert env_row["zfs_txg_timeout_s"] == 5 and env_row["vdev_ashift"] == [12] and env_row["zfs_scan"] is None


def test_a_property_that_does_not_take_makes_the_cell_invalid(env):
    host, db, run = env
    host.ignore = {"compression"}
    runner, _ = run()
    out = runner.run()
    assert out.status == "ok" and len(out.invalid_cells) == 3
    cells = db.rows("cells", out.run_id)
    assert cells[0]["problems"] == ["ZFS compression reads back as on, not lz4 as asked"]
    assert not [c for c in host.commands if c[0] == "fio" and "--name=w" in c]  # nothing measured
    assert sorted(host.datasets) == ["tank", "tank/vmbench", "tank/vmbench/uservol"]


def test_missing_dataset_is_refused_before_anything_is_created(env):
    host, db, run = env
    runner, _ = run(SCENARIO.replace("tank/vmbench,", "tank/nope,"))
    with pytest.raises(PreflightError, match="ZFS dataset tank/nope does not exist on host"):
        runner.run()
    assert not [c for c in host.commands if c[:2] == ["zfs", "create"]]


def test_cleanup_finds_leftovers_by_property_only(env):
    host, db, run = env
    host.add("tank/vmbench/vmbench-r0000000a-1-hostref", "volume", **{"vmbench:run": "r0000000a"})
    host.add("tank/vmbench/vmbench-r0000000b-1-hostref", "volume")  # our name, no property: not ours
    _, driver = run()
    found = driver.leftovers()
    assert [(l.kind, l.name) for l in found] == [("zvol", "tank/vmbench/vmbench-r0000000a-1-hostref")]
    driver.remove_leftover(found[0])
    assert "tank/vmbench/vmbench-r0000000a-1-hostref" not in host.datasets
    assert "tank/vmbench/vmbench-r0000000b-1-hostref" in host.datasets


def test_a_failed_host_only_run_resumes_with_only_the_missing_variants(env):
    host, db, run = env
    host.fail_on(lambda argv: argv[0] == "fio" and "--name=w" in argv, nth=2)  # the second variant's job
    runner, _ = run()
    with pytest.raises(Exception):
        runner.run()
    first = runner.outcome
    assert first.status == "failed" and sorted(host.datasets) == ["tank", "tank/vmbench", "tank/vmbench/uservol"]
    assert len(db.rows("measurements", first.run_id)) == 1
    resumed, _ = run(resume=db.resolve_run(first.run_id))
    out = resumed.run()
    assert out.status == "ok" and out.run_id == first.run_id and out.skipped_steps == 1
    rows = db.rows("measurements", first.run_id)
    assert sorted(c["name"] for c in db.rows("cells", first.run_id)) == sorted(
        ["baseline", "volblocksize=8k,compression=off", "volblocksize=64k,compression=off"])
    assert len(rows) == 3 and len({m["cell_id"] for m in rows}) == 3
    assert sorted(host.datasets) == ["tank", "tank/vmbench", "tank/vmbench/uservol"]
