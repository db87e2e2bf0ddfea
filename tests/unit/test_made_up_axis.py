"""A made-up VM axis, added for the test only as one row of the axis table, one VmConfig
field and one row of each VM driver's codec table, flows through everything vmbench derives
from those tables with no other code change: the scenario's reading (vm:, vary: one factor at
a time and factorial, cells:, journey:, a tune's axes), the cells' names and changed
settings, the stored settings and the boots they group into, the ``vm:`` YAML written back, a
stored value read back, the run's checks that it took effect, the reference page's row, the
report's cells table, the advice's changes; and, through the codec rows, the option written
into libvirt's domain XML and a Proxmox disk, read back from each driver's configuration and
QEMU's command line, read from a user's domain or VM, and edited in the apply snippets.

What a real new axis needs besides those three rows: see the note at the end.
"""

from __future__ import annotations

import contextlib
import dataclasses
import sys
from typing import Any, Iterator

import pytest
import yaml

import vmbench.advice.apply  # noqa: F401 - every module that holds a view is loaded before the swap
import vmbench.advice.apply_xml  # noqa: F401
import vmbench.drivers.libvirt.current  # noqa: F401
import vmbench.drivers.libvirt.evidence  # noqa: F401
import vmbench.drivers.proxmox.current  # noqa: F401
import vmbench.drivers.proxmox.evidence  # noqa: F401
import vmbench.advice.measured  # noqa: F401
import vmbench.run.evidence  # noqa: F401
import vmbench.scenario.reference  # noqa: F401
import vmbench.scenario.tune  # noqa: F401
from tests.records import as_cell, as_cells
from vmbench.advice.apply import snippets
from vmbench.advice.measured import cell_changes
from vmbench.advice.model import Change, Goal, GoalMetric, Recommendation
from vmbench.advice.rank import changed_settings
from vmbench.drivers import codec
from vmbench.drivers.base import Applied
from vmbench.drivers.libvirt import codec as libvirt_codec
from vmbench.drivers.libvirt.current import parse_domain
from vmbench.drivers.libvirt.evidence import applied_from_readings
from vmbench.drivers.libvirt.xml import DomainSpec, domain_xml
from vmbench.drivers.proxmox import codec as proxmox_codec
from vmbench.drivers.proxmox.config import disk_option, vm_options
from vmbench.drivers.proxmox.current import parse_config
from vmbench.drivers.proxmox.evidence import applied_from_pve
from vmbench.errors import ScenarioError, UsageError
from vmbench.report.stats import Delta
from vmbench.report.tables import cells_table
from vmbench.run.evidence import effective_settings, problems
from vmbench.run.plan import make_plan
from vmbench.scenario import axes, parse_scenario
from vmbench.scenario.axes import (HYPERVISOR_DEFAULT, Axis, always_stored, changed_axes, is_unset, setting_columns,
                                   settings_of, storage_settings_of, stored_setting, vm_key, vm_with, vm_yaml)
from vmbench.scenario.backend import Storage
from vmbench.scenario.model import VmConfig
from vmbench.scenario.reference import VM_DRIVERS, Row, vm_rows
from vmbench.scenario.tune import start_from, vm_from_yaml
from vmbench.settings import Choice

BASE = "name: t\njobs:\n  - name: j1\n    rw: randwrite\n    bs: 4k\n"

#: what every VM stores, whatever its made-up setting (left to the hypervisor, it is not stored)
DEFAULT_SETTINGS = {"bus": "virtio-blk", "cache": "none", "iothread": False, "aio": "threads", "cpu": "kvm64",
                    "format": "raw", "vcpus": 2, "memory_mib": 1024}


# ---- the made-up axis: one row, one field, one codec row per driver ------------------------------


class MadeUp(Choice):
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


#: libvirt's spelling: an attribute of the scratch disk's <driver>, QEMU's ``made-up`` option of its node
MADE_UP_LIBVIRT = libvirt_codec.driver_attribute("made_up", "made_up", MadeUp,
                                                 qemu=libvirt_codec.qemu_option("qemu_made_up", "made-up"))
#: Proxmox's: an option of the disk (``made_up=b``), the same QEMU option
MADE_UP_PROXMOX = proxmox_codec.disk_option_codec("made_up", "made_up", MadeUp,
                                                  qemu=proxmox_codec.qemu_option("qemu_made_up", "made-up"))


@contextlib.contextmanager
def made_up_axis() -> Iterator[Axis]:
    """The table with MADE_UP after discard (as a real disk axis would be), VmConfig with its
    field and each driver's codec table with its row, in every vmbench module that holds the
    table, one of its views (axes.Views: the constants axes.views derives from a table),
    VmConfig or a codec table; all put back on exit."""
    at = axes.VM_AXES.index("discard") + 1
    new = axes.views(axes.AXES[:at] + (MADE_UP,) + axes.AXES[at:])
    swap: dict[int, object] = {id(getattr(axes, name)): getattr(new, name) for name in axes.Views._fields}
    swap[id(VmConfig)] = MadeUpVm
    swap[id(libvirt_codec.CODECS)] = libvirt_codec.CODECS + (MADE_UP_LIBVIRT,)
    swap[id(proxmox_codec.CODECS)] = proxmox_codec.CODECS + (MADE_UP_PROXMOX,)
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
        assert libvirt_codec.CODECS[-1] is MADE_UP_LIBVIRT and proxmox_codec.CODECS[-1] is MADE_UP_PROXMOX
        assert vmbench.drivers.libvirt.xml.CODECS is libvirt_codec.CODECS  # an import of the table is swapped with it
    assert {name: getattr(axes, name) for name in axes.Views._fields} == before
    assert "made_up" not in axes.AXIS_BY_NAME and axes.VmConfig is VmConfig and vmbench.scenario.loader.VmConfig is VmConfig
    assert MADE_UP_LIBVIRT not in libvirt_codec.CODECS and MADE_UP_PROXMOX not in proxmox_codec.CODECS


@pytest.mark.parametrize("driver, table", [("libvirt", lambda: libvirt_codec.CODECS), ("proxmox", lambda: proxmox_codec.CODECS)])
def test_each_driver_has_one_codec_row_per_axis_it_takes(driver, table):
    """A codec table names every axis of the VM its driver takes, once (krbd: Proxmox only; the
    host storage's ZFS settings are no driver's); with the made-up axis, its row is the one more."""
    assert sorted(c.axis for c in table()) == sorted(codec.driver_axes(driver))
    with made_up_axis():
        assert sorted(c.axis for c in table()) == sorted(codec.driver_axes(driver)) and "made_up" in codec.driver_axes(driver)


def _readings_of(axis_names) -> set[str]:
    return {key for a in axes.AXES if a.name in axis_names for key, _, _ in a.verify if not key.startswith("guest_")}


def test_each_codec_row_reads_back_what_its_axis_verifies(data_dir):
    """Every reading the axes of a driver verify comes from that driver's rows: libvirt's from
    a real run's live XML, QMP and command line; Proxmox's from a config and PVE 9's command
    line (qemu_krbd where the disk is an rbd storage's)."""
    import json

    from tests.unit.test_proxmox_cmdline import SERIAL as PVE_SERIAL, pve9

    boot = json.loads((data_dir / "evidence-axes.json").read_text())[0]
    got = applied_from_readings(boot["host"], boot["scratch_path"], boot["serial"]).readings
    assert {k for k, v in got.items() if v is not None} == _readings_of(codec.driver_axes("libvirt"))
    config = {"scsi1": f"local-zfs:vm-100-disk-1,cache=none,aio=io_uring,iothread=1,serial={PVE_SERIAL},size=4G",
              "scsihw": "virtio-scsi-single", "cpu": "x86-64-v2-AES"}
    got = applied_from_pve(config, "scsi1", pve9(), PVE_SERIAL, "/dev/rbd0").readings
    assert {k for k, v in got.items() if v is not None} == _readings_of(codec.driver_axes("proxmox"))


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
    t = cells_table(as_cells(cells + [old]))
    assert [c.key for c in t.columns][9] == "made_up"  # after the settings every VM states, in table order
    assert [(r["cell"], r["made_up"], r["changed"]) for r in t.records] == [
        ("baseline", HYPERVISOR_DEFAULT, "-"), ("made_up=a", "a", "made_up"), ("made_up=b", "b", "made_up"),
        ("cache=writeback", HYPERVISOR_DEFAULT, "cache"), ("old", HYPERVISOR_DEFAULT, "-")]
    assert setting_columns([DEFAULT_SETTINGS]) == tuple(DEFAULT_SETTINGS)  # no cell gives it: no column


def test_the_advice_changes_and_applies_it(made_up):
    by_name = {c.name: c for c in as_cells(_stored_cells())}
    both = as_cell({"name": "both", "settings": {**DEFAULT_SETTINGS, "cache": "writeback", "made_up": "b", "compression": "lz4"}})
    assert cell_changes(by_name["made_up=b"], by_name["baseline"]) == [Change("made_up", None, "b")]
    # in table order: the VM's settings (cache before made_up), then the host storage's
    assert cell_changes(both, by_name["baseline"]) == [Change("cache", "none", "writeback"), Change("made_up", None, "b"),
                                                       Change("compression", None, "lz4")]
    rec = Recommendation(goal=Goal("j1", GoalMetric.IOPS), job="j1", cell="both", reference="baseline",
                         changes=tuple(cell_changes(both, by_name["baseline"])), value=None, reference_value=None,
                         delta=Delta(None, None, None, None, "not judged"), repeats=3, improves=True)
    assert changed_settings(rec) == {"cache": "writeback", "made_up": "b", "compression": "lz4"}
    # a disk option: each driver's codec row edits it in the apply snippets
    out = snippets({"made_up": "b"})
    assert [s.kind for s in out] == ["proxmox", "libvirt", "libvirt"]
    assert out[0].text == "qm set VMID --virtio0 '<storage>:<volume>,made_up=b'"
    assert out[2].text.startswith('<disk type="file" device="disk">\n  <driver name="qemu" type="raw" made_up="b" />')


# ---- the drivers: written, read back, read from a user's VM, applied, by its codec rows ----------

SERIAL = "VMB0a1b2c3dS001"
SCRATCH = "/pool/scratch.raw"


def test_libvirt_writes_it_reads_it_back_and_reads_it_from_a_users_domain(made_up):
    vm = MadeUpVm(made_up=MadeUp.B)
    xml = domain_xml(DomainSpec("vmbench-r0a1b2c3d-1", "r0a1b2c3d", vm, "kvm", "/k", "/i", "console=ttyS0", "/pool/root.qcow2",
                                SCRATCH, SERIAL, "/log/c.log"))
    assert '<driver name="qemu" type="raw" cache="none" io="threads" made_up="b" />' in xml
    # the run's evidence: the live XML's <driver>, and the option of the disk's node on QEMU's command line
    cmdline = ["/usr/bin/qemu-system-x86_64",
               "-blockdev", f'{{"driver":"file","filename":"{SCRATCH}","node-name":"libvirt-1-storage"}}',
               "-blockdev", '{"node-name":"libvirt-1-format","driver":"raw","file":"libvirt-1-storage","made-up":"b"}',
               "-device", f"virtio-blk-pci,drive=libvirt-1-format,id=virtio-disk1,serial={SERIAL}"]
    eff = effective_settings(applied_from_readings({"live_xml": xml, "qemu_cmdline": cmdline}, SCRATCH, SERIAL), {})
    assert (eff["config_made_up"], eff["qemu_made_up"]) == ("b", "b")
    assert not [p for p in problems(vm, eff, "kvm") if "made_up" in p]
    assert [p for p in problems(MadeUpVm(made_up=MadeUp.A), eff, "kvm") if "made_up" in p] == [
        "made_up: asked a, the live domain XML reports b", "made_up: asked a, the QEMU command line reports b"]
    # a user's domain read as the axis, and the apply snippet that changes it there
    cur = parse_domain(xml, source="libvirt domain d (qemu:///system)", ident="d", disk="vdb")
    assert cur.vm == vm and cur.unknown == ()
    assert '<driver name="qemu" type="raw" cache="none" io="threads" made_up="a" />' in snippets({"made_up": "a"}, cur)[1].text
    assert snippets({"made_up": "b"}, cur) == ()  # what the domain has already


def test_proxmox_writes_it_reads_it_back_and_reads_it_from_a_users_vm(made_up):
    vm = MadeUpVm(made_up=MadeUp.B)
    assert disk_option(vm, "local", "dir", 1 << 30, SERIAL) == f"local:1,cache=none,aio=threads,serial={SERIAL},format=raw,made_up=b"
    config = {**vm_options(vm, kvm=True), "virtio1": f"local:100/vm-100-disk-1.raw,cache=none,aio=threads,serial={SERIAL},"
                                                     "made_up=b,size=1G"}
    # the run's evidence: the stored config's option, and the option of QEMU's -drive
    cmdline = ["/usr/bin/kvm", "-drive", f"file={SCRATCH},if=none,id=drive-virtio1,format=raw,cache=none,aio=threads,made-up=b",
               "-device", f"virtio-blk-pci,drive=drive-virtio1,id=virtio1,serial={SERIAL}"]
    eff = effective_settings(applied_from_pve(config, "virtio1", cmdline, SERIAL, SCRATCH), {})
    assert (eff["config_made_up"], eff["qemu_made_up"]) == ("b", "b")
    assert not [p for p in problems(vm, eff, "kvm") if "made_up" in p]
    # a user's VM read as the axis, and the qm set that changes it there, keeping the disk's other options
    cur = parse_config(config, vmid=100, node="pve1", disk="virtio1")
    assert cur.vm.made_up is MadeUp.B and cur.unknown == ()
    assert snippets({"made_up": "a"}, cur)[0].text == (
        f"qm set 100 --virtio1 local:100/vm-100-disk-1.raw,cache=none,aio=threads,serial={SERIAL},made_up=a,size=1G")
    assert "made_up" not in snippets({"made_up": "hypervisor default"}, cur)[0].text  # back to qemu-server's default


# ---- the note: what the made-up axis needed, and what a real one needs besides -------------------
#
# The made-up axis needed its row (MADE_UP), its VmConfig field (MadeUpVm) and one row in each
# VM driver's codec table (MADE_UP_LIBVIRT, MADE_UP_PROXMOX) and nothing else: every other
# module reads those tables, or the lookups vmbench.scenario.axes.views derives from the axis
# table, when it runs.  A real axis is the same: its row in AXES (scenario/axes.py), its field
# in VmConfig (scenario/model.py), its row in drivers/libvirt/codec.py and in
# drivers/proxmox/codec.py (a <driver> attribute or a disk option is one call of
# driver_attribute / disk_option_codec; anything else is the row's own hooks).  Besides those:
#   drivers/qemu_cmdline.py only where QEMU's reading needs more than an option of the disk's
#     nodes (qemu_option reads that), as detect-zeroes does across a chain;
#   tests/fakes.py: the fake Proxmox node's QEMU command line, so the contract tests see the
#     option (the fake PVE's schema is PVE's own and refuses an option PVE does not have);
#   docs/scenario-reference.md (regenerated) and tests/unit/test_axis_table.py (its cases).
