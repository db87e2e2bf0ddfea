"""The records of results/ write the rows they read (issue 42): a run, a boot, a cell, a crypto
row, a telemetry series and a run's environment are stored from their record's to_row() and read
back as the same record; a scenario's plan is stored as its StoredPlan writes it and reads
back as the same plan."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import replace
from pathlib import Path

import pytest

from vmbench.results.db import ResultsDB
from vmbench.results.environment import Environment
from vmbench.results.plan import StoredAdvise, read_plan
from vmbench.results.records import BootRecord, CellRecord, CryptoRecord, SeriesRecord, Settings
from vmbench.results.runrow import RunRow
from vmbench.run.plan import make_plan
from vmbench.scenario.goals import Goal, GoalMetric, Risk
from vmbench.scenario.loader import load_scenario
from vmbench.settings import Cache

SCENARIOS = sorted((Path(__file__).resolve().parents[2] / "scenarios").glob("*.yaml"))


def test_each_row_is_stored_from_its_record_and_read_back_as_it(tmp_path):
    db = ResultsDB(tmp_path / "r.db")
    rid = db.start_run(RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    boot = BootRecord(run_id=rid, seq=1, vm_key="k", settings=Settings({"cache": "none", "iothread": True}), domain_name="d",
                      accelerator="tcg", domain_xml="<domain/>", boot_seconds=21.5, started_at="2026-01-01T00:00:00+00:00")
    boot = replace(boot, id=db.add_boot(boot))
    read = replace(boot, live_xml="<domain id='1'/>", qemu_cmdline=("qemu-system-x86_64", "-m", "768"), guest={"kernel": "6.1"})
    db.update_boot(read)
    assert db.boots(rid) == [read] and db.boots(rid)[0].qemu_cmdline == read.qemu_cmdline
    assert db.rows("boots", rid)[0]["qemu_cmdline"] == ["qemu-system-x86_64", "-m", "768"]  # stored as JSON, as before

    cell = CellRecord("baseline", run_id=rid, boot_id=boot.id, seq=1, settings=boot.settings, stacks=("luks-ext4",),
                      evidence={"raw_measured_in": "baseline", "layers": []})
    cell = replace(cell, id=db.add_cell(cell))
    grown = replace(cell, evidence=dict(cell.evidence, layers=[*cell.layers, {"stack": "luks-ext4", "layer": "luks2"}]))
    db.update_cell(grown)
    stored = db.cell_by_name(rid, "baseline")
    assert stored == replace(grown, valid=1) and stored.layers == [{"stack": "luks-ext4", "layer": "luks2"}]
    assert stored.raw_measured_in == "baseline" and cell.layers == []  # the first record is unchanged

    crypto = CryptoRecord("guest", "kvm64", "aes-xts-plain64", 512, aes_flag=False, encrypt_mib_s=900.0, decrypt_mib_s=950.0,
                          run_id=rid, boot_id=boot.id, attempt=2)
    crypto = replace(crypto, id=db.add_crypto(crypto))
    assert db.crypto(rid) == [replace(crypto, aes_flag=0)]  # SQLite's 0, as the crypto table shows it

    series = SeriesRecord("fio-iops", {"t_s": [1.0], "values": [5.0], "unit": "IOPS"}, run_id=rid)
    series = replace(series, id=db.add_telemetry(series))
    assert db.series(rid) == [series]
    with pytest.raises(ValueError):
        db.add_telemetry(replace(series, source=""))


def test_the_environment_is_a_frozen_record_stored_as_it_was_read(tmp_path):
    facts = {"hostname": "h", "host_memory_mib": 2048, "arc": {"c_max_bytes": 5}, "attempts": [{"attempt": 2, "run_tag": "r2"}]}
    env = Environment(facts)
    assert env.hostname == "h" and env.arc_c_max_bytes == 5 and env.later_tags == ("r2",) and env.pve_node is None
    with pytest.raises(AttributeError):
        env.hostname = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        env["hostname"] = "other"  # type: ignore[index]
    more = env.with_facts(host_memory_mib=4096)
    assert more.host_memory_mib == 4096 and env.host_memory_mib == 2048
    assert copy.deepcopy(env) == env == pickle.loads(pickle.dumps(env)) and dict(env) == facts

    db = ResultsDB(tmp_path / "r.db")
    rid = db.start_run(RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="s.yaml", scenario_text="x", plan={}, version="0"))
    db.set_environment(rid, env)
    text = db.conn.execute("SELECT environment_json FROM runs WHERE id = ?", (rid,)).fetchone()[0]
    assert text == json.dumps(facts, sort_keys=True) and db.resolve_run(rid).environment == env


def test_a_run_is_stored_from_its_record_and_read_back_as_it(tmp_path):
    db = ResultsDB(tmp_path / "r.db")
    run = RunRow.starting(tag="r00000001", scenario_name="s", scenario_path="/s.yaml", scenario_text="vm: {}\n",
                          plan={"scenario": "s", "cells": []}, version="0.1")
    rid = db.start_run(run)
    assert db.resolve_run(rid) == replace(run, id=rid) and db.resolve_run(rid).scenario_text == "vm: {}\n"
    stored = dict(db.conn.execute("SELECT * FROM runs WHERE id = ?", (rid,)).fetchone())
    assert stored == dict(run.to_row(), id=rid, plan_json='{"cells": [], "scenario": "s"}', environment_json="{}")
    assert (stored["status"], stored["error"], stored["finished_at"], stored["attempts"]) == ("running", None, None, 1)
    db.finish_run(rid, "failed", "boom")
    ended = db.resolve_run(rid)
    assert (ended.status, ended.error) == ("failed", "boom") and ended.finished_at and ended.to_row()["plan_json"] == run.plan_json


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.stem)
def test_a_plan_is_stored_as_its_record_and_reads_back_as_it(path):
    plan = make_plan(load_scenario(path))
    record = plan.record()
    row = record.to_row()
    assert "targets" in row and "targets" not in plan.summary() and plan.summary() == record.to_row(targets=False)
    again = read_plan(json.loads(json.dumps(row)))
    assert again.to_row() == row and again.kind is record.kind and again.cells == record.cells and again.jobs == record.jobs


def test_the_stored_advise_section_reads_its_goals_and_risks_and_says_what_it_leaves_out():
    stored = {"goals": ["4k-randread:p99", "mbps", "4k-randread:p99", "j:fastest"], "allow": ["cache-unsafe", "nonsense"]}
    advise = StoredAdvise.from_row(stored)
    assert advise is not None and advise.to_row() == stored
    source = "the scenario's advise: goals"
    assert advise.goals == (Goal("4k-randread", GoalMetric.P99, source), Goal(None, GoalMetric.MBPS, source))
    assert advise.allow == {Risk.CACHE_UNSAFE}
    assert [n.split(":")[0] for n in advise.notes] == ["left out of the stored advise.goals", "left out of the stored advise.allow"]
    assert StoredAdvise.from_row(None) is None and StoredAdvise.from_row("x") is None
    plan = read_plan({"advise": stored})
    assert plan.advised and plan.advise == advise and plan.to_row()["advise"] == stored
    assert not read_plan({}).advised and read_plan({}).advise.goals == () and "advise" not in read_plan({}).to_row()


def test_settings_are_a_read_only_mapping_stored_as_they_were_read():
    stored = {"cache": "writeback", "iothread": True, "memory_mib": 1024}
    settings = Settings(stored)
    assert settings == stored and stored == settings and dict(settings) == stored and settings != {"cache": "none"}
    assert settings.cache is Cache.WRITEBACK and settings.memory_mib == 1024 and settings.value("aio") is None
    with pytest.raises(TypeError):
        settings["cache"] = "none"  # type: ignore[index]
    with pytest.raises(AttributeError):
        settings.cache = Cache.NONE  # type: ignore[misc]
    assert not hasattr(settings, "update") and not isinstance(settings, dict)
    assert copy.deepcopy(settings) == settings == pickle.loads(pickle.dumps(settings)) and Settings.of(settings) is settings
    assert stored == {"cache": "writeback", "iothread": True, "memory_mib": 1024}  # a copy: the dict it was made of is its own
    cell = CellRecord("c", settings=settings)
    assert cell.to_row()["settings_json"] == stored and CellRecord.from_row(dict(cell.to_row(), name="c")).settings == settings
