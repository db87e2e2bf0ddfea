"""Issue 41: "what to change next".  A run that tried no change names the shipped scenario that
measures what it did not try; that scenario exists and varies those settings; a change whose
figure a note flags (a cache served it, a CPU was the limit) is never the recommendation nor
the summary's headline."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.test_advice import READ, WRITE, RunBuilder
from vmbench.advice.model import Risk
from vmbench.advice.rank import advise
from vmbench.advice.table import change_next, report_with_advice
from vmbench.advice.untried import NEXT_RUNS, Candidate, next_run
from vmbench.report.summary import summary_lines
from vmbench.results.db import ResultsDB
from vmbench.scenario import load_scenario
from vmbench.scenario.axes import settings_of, storage_settings_of

ROOT = Path(__file__).resolve().parents[2]
STORAGE_KINDS = {"dir": "", "zfs": "zvol", "zfs-dataset": "dataset", "rbd": "rbd"}


def varied(path: Path) -> tuple[str, str, set[str]]:
    """(driver, storage kind, the stored settings its cells or its tune vary) of a shipped scenario."""
    s = load_scenario(path)
    driver = "none" if s.host_only else s.hypervisor.driver.value
    if s.tune is not None:
        return driver, STORAGE_KINDS[s.storage.type.value], {axis for axis, _ in s.tune.axes}
    settings = [{**settings_of(c.vm), **storage_settings_of(c.vm)} for c in s.cells]
    keys = {k for st in settings for k in st}
    return driver, STORAGE_KINDS[s.storage.type.value], {k for k in keys if len({repr(st.get(k)) for st in settings}) > 1}


@pytest.mark.parametrize("entry", NEXT_RUNS, ids=lambda n: n.path)
def test_every_suggested_scenario_is_shipped_and_varies_what_it_is_suggested_for(entry):
    driver, storage, axes = varied(ROOT / entry.path)
    assert entry.axes <= axes, (entry.path, axes)
    assert driver in entry.drivers and entry.fits(driver, storage), (driver, storage)
    assert entry.command.startswith("vmbench tune " if entry.tune else "vmbench run ")


def test_the_scenario_measuring_most_of_what_was_not_tried_is_chosen():
    aio, iothread = Candidate({"aio": "io_uring"}, ""), Candidate({"iothread": True}, "")
    scsi = Candidate({"bus": "virtio-scsi", "iothread": True}, "")
    assert next_run([aio, iothread, scsi], "libvirt").path == "scenarios/tune.yaml"
    assert next_run([iothread], "libvirt").path == "scenarios/tune.yaml"  # the first of those measuring as much
    assert next_run([aio], "proxmox").path == "scenarios/proxmox.yaml"
    assert next_run([Candidate({"volblocksize": "*"}, "")], "none", "zvol").path == "scenarios/zfs-volblocksize.yaml"
    assert next_run([Candidate({"compression": "lz4"}, "")], "libvirt", "dataset").path == "scenarios/zfs-compression.yaml"
    assert next_run([Candidate({"volblocksize": "*"}, "")], "libvirt", "") is None


@pytest.fixture
def db(tmp_path):
    d = ResultsDB(tmp_path / "r.db")
    yield d
    d.close()


def test_a_run_that_tried_no_change_names_the_scenario_to_run_next(db):
    b = RunBuilder(db, jobs=(WRITE,)).cell("baseline")
    b.host(WRITE, [5000, 5010, 4990]).guest("baseline", WRITE, [1000, 1010, 990])
    lines = summary_lines(*report_with_advice(b.save()))
    assert lines[0] == ("How much slower the guest is, gap (host/guest) on the raw disk: 4k-randwrite 5.00x [4.94, 5.06] "
                        "(the guest slower).")
    assert lines[1] == ("What to change next: this run tried no setting change; run `vmbench tune scenarios/tune.yaml` "
                        "next: it tries bus, cache, iothread and aio one change at a time (4K random reads) and keeps each "
                        "that helps.")


def test_a_change_served_from_cache_is_never_the_recommendation_nor_the_headline(db):
    """cache=writeback beats the host on reads (the host page cache): the biggest and a significant
    improvement, yet flagged; iothread, smaller and clean, is what to change next."""
    b = RunBuilder(db, jobs=(READ,)).cell("baseline").cell("cache=writeback", cache="writeback").cell("iothread=on", iothread=True)
    b.host(READ, [5000, 5010, 4990]).guest("baseline", READ, [1000, 1010, 990])
    b.guest("cache=writeback", READ, [9000, 9010, 8990]).guest("iothread=on", READ, [1300, 1310, 1290])
    data = b.save()
    a = advise(data, allow=frozenset(Risk))
    wb = next(r for r in a.recommendations if r.cell == "cache=writeback")
    assert wb.improves and wb.suspect and "cached?" in wb.suspect  # even with every risk allowed
    assert a.top().cell == "iothread=on"
    lines = summary_lines(*report_with_advice(data))
    assert lines[1].startswith("What to change next: iothread: off -> on (4k-randread IOPS +30.0% [")
    assert not any("writeback" in line for line in lines[:2])


def test_with_only_flagged_improvements_the_advice_says_so_in_one_positive_sentence(db):
    b = RunBuilder(db, jobs=(READ,)).cell("baseline").cell("cache=writeback", cache="writeback")
    b.host(READ, [5000, 5010, 4990]).guest("baseline", READ, [1000, 1010, 990]).guest("cache=writeback", READ, [9000, 9010, 8990])
    text = change_next(advise(b.save()))
    assert text.startswith("keep the baseline's settings: no change measured was a clear improvement without a flag or a risk "
                           "(cache: none -> writeback improved 4k-randread +800.0% [")
    assert "but flagged: beats host: cached?" in text and "no change improved" not in text
