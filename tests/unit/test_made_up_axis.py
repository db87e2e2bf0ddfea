"""A made-up VM axis, added for the test only as one row of the axis table and one VmConfig
field, flows through everything vmbench derives from the table with no other code change:
the scenario's reading (vm:, vary: one factor at a time and factorial, cells:, journey:, a
tune's axes), the cells' names and changed settings, the stored settings and the boots they
group into, the ``vm:`` YAML written back, a stored value read back, the run's checks that it
took effect, the reference page's row, the report's cells table, and the advice's changes.

What a real new axis needs besides its row and field (the drivers' builders and readers, the
advice's apply snippets, the fakes' QEMU) is per-axis code: see the note at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import sys
from typing import Any, Iterator

import pytest
import yaml

import vmbench.advice.apply  # noqa: F401 - every module that holds a view is loaded before the swap
import vmbench.advice.apply_xml  # noqa: F401
import vmbench.advice.measured  # noqa: F401
import vmbench.run.evidence  # noqa: F401
import vmbench.scenario.reference  # noqa: F401
import vmbench.scenario.tune  # noqa: F401
from vmbench.advice.apply import snippets
from vmbench.advice.measured import cell_changes
from vmbench.advice.model import Change, Goal, GoalMetric, Recommendation
from vmbench.advice.rank import changed_settings
from vmbench.drivers.base import Applied
from vmbench.errors import ScenarioError, UsageError
from vmbench.report.stats import Delta
from vmbench.report.tables import cells_table
from vmbench.run.evidence import effective_settings, problems
from vmbench.run.plan import make_plan
from vmbench.scenario import axes, parse_scenario
from vmbench.scenario.axes import (HYPERVISOR_DEFAULT, Axis, always_stored, changed_axes, is_unset, setting_columns,
                                   settings_of, storage_settings_of, stored_setting, vm_key, vm_with, vm_yaml)
from vmbench.scenario.model import Storage, VmConfig
from vmbench.scenario.reference import VM_DRIVERS, Row, vm_rows
from vmbench.scenario.tune import start_from, vm_from_yaml

BASE = "name: t\njobs:\n  - name: j1\n    rw: randwrite\n    bs: 4k\n"

#: what every VM stores, whatever its made-up setting (left to the hypervisor, it is not stored)
DEFAULT_SETTINGS = {"bus": "virtio-blk", "cache": "none", "iothread": False, "aio": "threads", "cpu": "kvm64",
                    "format": "raw", "vcpus": 2, "memory_mib": 1024}


# ---- the made-up axis: one row, one field ------------------------------------------------------


class MadeUp(enum.Enum):
    A = "a"
    B = "b"


def _made_up(value: Any) -> MadeUp:
    try:
        return MadeUp(str(value).strip().lower())
    except ValueError:
        raise ValueError(f"{value!r} is not one of: a, b") from None


@dataclasses.dataclass(frozen=True)
class MadeUpVm(VmConfig):
    """VmConfig with the made-up axis's field (a test cannot add a field to VmConfig itself)."""

    made_up: MadeUp | None = None  # None: the hypervisor's default


def _get(vm: VmConfig) -> MadeUp | None:
    return getattr(vm, "made_up", None)  # a VmConfig made before the swap (a default argument) has no field


def _put(vm: VmConfig, value: MadeUp | None) -> VmConfig:
    return dataclasses.replace(vm, made_up=value)


MADE_UP = Axis(
    name="made_up",
    settings_key="made_up",
    parse=lambda sec, key, vm: _put(vm, sec.get(key, _made_up)),
    value=_get,
    label=lambda vm, raw: _get(vm).value,
    merge=lambda vm, other: _put(vm, _get(other)),
    setting=lambda vm: None if _get(vm) is None else _get(vm).value,
    describe="one of: a, b",
    verify=(("config_made_up", "{config}", False), ("qemu_made_up", "the QEMU command line", True)),
    unset=HYPERVISOR_DEFAULT,
    yaml=lambda vm: None if _get(vm) is None else _get(vm).value,
    from_stored=lambda vm, value: _put(vm, None if value is None else _made_up(value)),
    disk=True,
    what="a made-up option of the scratch disk",
)


@contextlib.contextmanager
def made_up_axis() -> Iterator[Axis]:
    """The table with MADE_UP after discard (as a real disk axis would be) and VmConfig with its
    field, in every vmbench module that holds the table, one of its views (axes.Views: the
    constants axes.views derives from a table) or VmConfig; all put back on exit."""
    at = axes.VM_AXES.index("discard") + 1
    new = axes.views(axes.AXES[:at] + (MADE_UP,) + axes.AXES[at:])
    swap: dict[int, object] = {id(getattr(axes, name)): getattr(new, name) for name in axes.Views._fields}
    swap[id(VmConfig)] = MadeUpVm
    with pytest.MonkeyPatch.context() as mp:
        for name, module in list(sys.modules.items()):
            if name == "vmbench" or name.startswith("vmbench."):
                for attr, value in list(vars(module).items()):
                    if id(value) in swap:
                        mp.setattr(module, attr, swap[id(value)])
        yield MADE_UP


@pytest.fixture
def made_up():
    with made_up_axis() as axis:
        yield axis


def parse(text: str):
    return parse_scenario(BASE + text, "t.yaml")


def error(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as exc:
        parse(text)
    return exc.value


# ---- the fixture itself ------------------------------------------------------------------------


def test_the_views_are_those_of_the_table():
    """axes.views makes every constant the module derives from AXES (the fixture swaps them all)."""
    made = axes.views(axes.AXES)
    for name in axes.Views._fields:
        assert getattr(made, name) == getattr(axes, name), name
        assert getattr(made, name), f"{name} is empty (the fixture swaps views by identity)"


def test_the_fixture_swaps_every_view_and_puts_them_back():
    before = {name: getattr(axes, name) for name in axes.Views._fields}
    with made_up_axis():
        assert axes.AXIS_BY_NAME["made_up"] is MADE_UP and axes.AXIS_BY_SETTING["made_up"] is MADE_UP
        assert axes.VM_AXES.index("made_up") == axes.VM_AXES.index("discard") + 1
        assert "made_up" in axes.DISK_SETTING_KEYS and "made_up" in axes.VM_SETTING_KEYS
        assert "made_up" not in axes.STORAGE_AXES
        assert vmbench.advice.apply_xml.DISK_KEYS is axes.DISK_SETTING_KEYS  # an alias is swapped with its view
        assert axes.VmConfig is MadeUpVm and vmbench.scenario.loader.VmConfig is MadeUpVm
    assert {name: getattr(axes, name) for name in axes.Views._fields} == before
    assert "made_up" not in axes.AXIS_BY_NAME and axes.VmConfig is VmConfig and vmbench.scenario.loader.VmConfig is VmConfig


# ---- the scenario: read, named, changed ----------------------------------------------------------


def test_vary_one_factor_names_the_cells_after_it(made_up):
    s = parse("vary:\n  made_up: [a, b]\n")
    assert [c.name for c in s.cells] == ["baseline", "made_up=a", "made_up=b"]
    assert [c.changed for c in s.cells] == [(), ("made_up",), ("made_up",)]
    assert [c.vm.made_up for c in s.cells] == [None, MadeUp.A, MadeUp.B]


def test_vary_factorial_combines_it(made_up):
    s = parse("mode: factorial\nvary:\n  made_up: [b]\n  cache: [writeback, none]\n")
    assert [c.name for c in s.cells] == ["baseline", "made_up=b,cache=writeback", "made_up=b,cache=none"]
    assert [c.changed for c in s.cells] == [(), ("made_up", "cache"), ("made_up",)]  # in vary order, as named
    assert [settings_of(c.vm).get("made_up") for c in s.cells] == [None, "b", "b"]


def test_vm_cells_and_journey_read_it(made_up):
    s = parse("vm:\n  made_up: a\ncells:\n  - {name: one, made_up: b}\n  - {name: two, cache: writeback}\n")
    assert s.baseline.made_up is MadeUp.A
    assert [(c.name, c.vm.made_up, c.changed) for c in s.cells] == [("one", MadeUp.B, ("made_up",)),
                                                                      ("two", MadeUp.A, ("cache",))]
    s = parse("journey:\n  - {name: s1}\n  - {name: s2, made_up: b}\n  - {name: s3, made_up: a, cache: writeback}\n")
    assert [c.changed for c in s.cells] == [(), ("made_up",), ("cache", "made_up")]
    assert changed_axes(s.cells[2].vm, s.cells[0].vm) == ("cache", "made_up")


def test_its_values_are_checked_and_explained(made_up):
    e = error("vary:\n  made_up: [a, c]\n")
    assert "made_up" in e.message and "'c' is not one of: a, b" in e.message
    assert error("vary:\n  made_up: []\n").hint == "made_up is one of: a, b"
    assert "A is the same value as a" in error("vary:\n  made_up: [a, A]\n").message  # compared as read
    assert "made_up" in str(error("vm:\n  made_upp: a\n"))  # a misspelt axis: the closest one is suggested


def test_a_tune_tries_it_and_reads_it_from_a_users_vm(made_up):
    s = parse("vm: {cache: none}\ntune:\n  goal: j1:iops\n  axes: {made_up: [a, b]}\n  budget: {boots: 5}\n")
    assert [(a, [c.label for c in values]) for a, values in s.tune.axes] == [("made_up", ["a", "b"])]
    users = MadeUpVm(made_up=MadeUp.B, vcpus=8)
    assert start_from(MadeUpVm(), users, Storage()).made_up is MadeUp.B  # its disk settings, not its size
    assert start_from(MadeUpVm(), users, Storage()).vcpus == 2


# ---- stored settings, boots, the vm: YAML, stored values read back --------------------------------


def test_it_is_stored_in_table_order_and_only_when_given(made_up):
    s = parse("vm:\n  made_up: b\n  discard: unmap\n  iops: 500\n")
    assert list(settings_of(s.baseline)) == [*DEFAULT_SETTINGS, "discard", "made_up", "iops"]
    assert settings_of(s.baseline)["made_up"] == "b"
    assert settings_of(MadeUpVm()) == DEFAULT_SETTINGS  # left to the hypervisor: old runs keep their keys
    assert storage_settings_of(s.baseline) == {}  # a setting of the VM, not of the host storage
    assert vm_key(MadeUpVm(made_up=MadeUp.A)) != vm_key(MadeUpVm(made_up=MadeUp.B)) != vm_key(MadeUpVm())
    assert not always_stored(MADE_UP)


def test_boots_group_by_it(made_up):
    s = parse("stacks:\n  - {name: s, layers: [ext4]}\n"
              "cells:\n  - {name: a1, made_up: a}\n  - {name: a2, made_up: a, stacks: []}\n  - {name: b, made_up: b}\n")
    plan = make_plan(s)
    assert [[c.name for c in b.cells] for b in plan.boots] == [["a1", "a2"], ["b"]]
    summary = plan.summary()
    assert [b["settings"].get("made_up") for b in summary["boots"]] == ["a", "b"]
    assert [(c["name"], c["settings"]["made_up"], c["changed"]) for c in summary["cells"]] == [
        ("a1", "a", ["made_up"]), ("a2", "a", ["made_up"]), ("b", "b", ["made_up"])]


def test_the_vm_yaml_gives_it_back(made_up):
    s = parse("vary:\n  made_up: [b]\n")
    vm = s.cells[1].vm
    assert vm_yaml(vm) == {**vm_yaml(MadeUpVm()), "made_up": "b"}
    assert vm_from_yaml(vm_yaml(vm)) == vm  # a tune round's stored start and baseline
    again = parse(yaml.safe_dump({"vm": vm_yaml(vm)}))  # written into a scenario, read back
    assert again.baseline == vm and settings_of(again.baseline) == settings_of(vm)
    assert "made_up" not in vm_yaml(MadeUpVm())


def test_a_stored_value_reads_back(made_up):
    vm = vm_with(MadeUpVm(), {"made_up": "b"})
    assert vm.made_up is MadeUp.B
    assert vm_with(vm, {"made_up": HYPERVISOR_DEFAULT}).made_up is None  # back to the hypervisor's default
    assert vm_with(vm, {"made_up": None}).made_up is None
    assert is_unset("made_up", HYPERVISOR_DEFAULT) and is_unset("made_up", None) and not is_unset("made_up", "a")
    with pytest.raises(UsageError, match=r"setting made_up: 'c' is not one of: a, b"):
        vm_with(vm, {"made_up": "c"})
    for cell in parse("vary:\n  made_up: [a, b]\n  cache: [writeback]\n").cells:
        assert vm_with(MadeUpVm(), settings_of(cell.vm)) == cell.vm  # every stored row gives its VM back
    assert stored_setting(DEFAULT_SETTINGS, "made_up") == HYPERVISOR_DEFAULT  # a row stored before the axis existed


# ---- the run's checks, the reference page, the report, the advice ----------------------------------


def test_the_run_checks_it_took_effect_from_its_verify(made_up):
    vm = MadeUpVm(made_up=MadeUp.A)
    eff = effective_settings(Applied(readings={"qemu_made_up": "b", "config_made_up": "a"}), {})
    assert [p for p in problems(vm, eff, "kvm") if "made_up" in p] == ["made_up: asked a, the QEMU command line reports b"]
    assert "made_up (the QEMU command line) could not be verified" in problems(vm, {}, "kvm")
    assert not [p for p in problems(vm, effective_settings(Applied(readings={"qemu_made_up": "a"}), {}), "kvm") if "made_up" in p]
    assert not [p for p in problems(MadeUpVm(), {}, "kvm") if "made_up" in p]  # left to the hypervisor: recorded only


def test_the_reference_page_has_its_row(made_up):
    rows = vm_rows()
    assert rows[[r.key for r in rows].index("discard") + 1] == Row(
        "made_up", "one of: a, b", HYPERVISOR_DEFAULT, VM_DRIVERS, "a made-up option of the scratch disk")


def _stored_cells() -> list[dict]:
    s = parse("vary:\n  made_up: [a, b]\n  cache: [writeback]\n")
    return [{**c, "valid": True, "problems": []} for c in make_plan(s).summary()["cells"]]


def test_the_reports_cells_table_shows_it(made_up):
    cells = _stored_cells()
    old = {"name": "old", "settings": DEFAULT_SETTINGS, "changed": [], "stacks": [], "valid": True, "problems": []}
    t = cells_table(cells + [old])
    assert [c.key for c in t.columns][9] == "made_up"  # after the settings every VM states, in table order
    assert [(r["cell"], r["made_up"], r["changed"]) for r in t.records] == [
        ("baseline", HYPERVISOR_DEFAULT, "-"), ("made_up=a", "a", "made_up"), ("made_up=b", "b", "made_up"),
        ("cache=writeback", HYPERVISOR_DEFAULT, "cache"), ("old", HYPERVISOR_DEFAULT, "-")]
    assert setting_columns([DEFAULT_SETTINGS]) == tuple(DEFAULT_SETTINGS)  # no cell gives it: no column


def test_the_advice_changes_and_applies_it(made_up):
    by_name = {c["name"]: c for c in _stored_cells()}
    both = {"name": "both", "settings": {**DEFAULT_SETTINGS, "cache": "writeback", "made_up": "b", "compression": "lz4"}}
    assert cell_changes(by_name["made_up=b"], by_name["baseline"]) == [Change("made_up", None, "b")]
    # in table order: the VM's settings (cache before made_up), then the host storage's
    assert cell_changes(both, by_name["baseline"]) == [Change("cache", "none", "writeback"), Change("made_up", None, "b"),
                                                       Change("compression", None, "lz4")]
    rec = Recommendation(goal=Goal("j1", GoalMetric.IOPS), job="j1", cell="both", reference="baseline",
                         changes=tuple(cell_changes(both, by_name["baseline"])), value=None, reference_value=None,
                         delta=Delta(None, None, None, None, "not judged"), repeats=3, improves=True)
    assert changed_settings(rec) == {"cache": "writeback", "made_up": "b", "compression": "lz4"}
    # a disk option: the apply snippets take it and rewrite the disk (its own option is per-axis code)
    out = snippets({"made_up": "b"})
    assert [s.kind for s in out] == ["proxmox", "libvirt", "libvirt"]
    assert out[0].text.startswith("qm set VMID --virtio0 ") and out[2].text.startswith("<disk ")


# ---- the note: what the made-up axis needed, and what a real one needs besides -------------------
#
# The made-up axis needed its row (MADE_UP) and its VmConfig field (MadeUpVm) and nothing else:
# every other module reads the table, or the lookups vmbench.scenario.axes.views derives from
# it, when it runs.  A real axis is the same row in AXES (scenario/axes.py) and the same field
# in VmConfig (scenario/model.py), then its own code where a setting becomes a hypervisor's
# option or is read back from one (docs/layout.md lists the files):
#   the libvirt driver: drivers/libvirt/xml.py (the domain XML), current.py (a user's domain
#     read as axes), evidence.py (config_<axis> from the live XML; CMDLINE_READINGS);
#   the Proxmox driver: drivers/proxmox/config.py (the disk option or VM parameter),
#     current.py (a user's VM read as axes), evidence.py (config_<axis> from the VM config);
#   drivers/qemu_cmdline.py: qemu_<axis>, as QEMU runs it (both drivers' evidence);
#   advice/apply.py and apply_xml.py: the qm set and <disk> snippets that apply it;
#   tests/fakes.py: the fake Proxmox node's QEMU command line (the fake PVE's schema is PVE's
#     own and refuses an option PVE does not have: nothing to add there);
#   docs/scenario-reference.md (regenerated) and tests/unit/test_axis_table.py (its cases).
