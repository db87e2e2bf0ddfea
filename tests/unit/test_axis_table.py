"""The VM axis table: every row reads, compares, names, combines and stores its setting, and
settings_of(vm) (stored with every result row) keeps its keys, order and values."""

import dataclasses
import enum
import sys
import textwrap

import pytest

from vmbench.drivers.base import Applied
from vmbench.errors import ScenarioError
from vmbench.run import evidence
from vmbench.scenario import axes as axes_module
from vmbench.scenario import parse_scenario
from vmbench.scenario.axes import (AXES, AXIS_BY_NAME, HYPERVISOR_DEFAULT, STORAGE_AXES, VM_AXES, _field_axis, changed_axes,
                                   setting_columns, settings_of, stored_setting, vm_key)
from vmbench.scenario.model import LIMIT_NAMES, CpuConfig, IoLimits, VmConfig
from vmbench.scenario.reader import Context, LineDict, Section, as_int
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat

BASE = "name: t\njobs:\n  - name: j1\n    rw: randwrite\n    bs: 4k\n"

# axis: (YAML value, setting(), value(), label())
ROUND_TRIPS = {
    "bus": ("virtio-scsi", "virtio-scsi", Bus.VIRTIO_SCSI, "virtio-scsi"),
    "cache": ("writeback", "writeback", Cache.WRITEBACK, "writeback"),
    "iothread": (True, True, True, "on"),
    "aio": ("io_uring", "io_uring", Aio.IO_URING, "io_uring"),
    "cpu": ({"model": "Westmere", "features": {"avx2": "off"}}, "Westmere-avx2",
            (CpuMode.MODEL, "Westmere", (("avx2", Feature.OFF),)), "Westmere-avx2"),
    "aes": (True, "on", Feature.ON, "on"),
    "format": ("qcow2", "qcow2", ImageFormat.QCOW2, "qcow2"),
    "vcpus": (4, 4, 4, "4"),
    "memory": ("2G", 2048, 2048, "2048M"),
    "detect_zeroes": ("on", "on", DetectZeroes.ON, "on"),
    "discard": ("unmap", "unmap", Discard.UNMAP, "unmap"),
    "iops": (500, 500, 500, "500"),
    "iops_rd": (400, 400, 400, "400"),
    "iops_wr": (300, 300, 300, "300"),
    "mbps": (12.5, 12.5, 12.5, "12.5"),
    "mbps_rd": (100.0, 100, 100, "100"),  # a whole number of MiB/s is stored as an int
    "mbps_wr": (0.25, 0.25, 0.25, "0.25"),
    "iops_max": (1000, 1000, 1000, "1000"),
    "iops_rd_max": (800, 800, 800, "800"),
    "iops_wr_max": (600, 600, 600, "600"),
    "mbps_max": (25, 25, 25, "25"),
    "mbps_rd_max": (200, 200, 200, "200"),
    "mbps_wr_max": (1.5, 1.5, 1.5, "1.5"),
    "burst_length": (5, 5, 5, "5"),
    "volblocksize": ("64k", "64k", 65536, "64k"),
    "recordsize": ("1M", "1m", 1 << 20, "1m"),
    "compression": ("lz4", "lz4", "lz4", "lz4"),
    "sync": ("always", "always", "always", "always"),
    "primarycache": ("metadata", "metadata", "metadata", "metadata"),
    "secondarycache": ("none", "none", "none", "none"),
    "logbias": ("throughput", "throughput", "throughput", "throughput"),
    "atime": (False, "off", "off", "off"),
    "dedup": ("verify", "verify", "verify", "verify"),
    "checksum": ("sha256", "sha256", "sha256", "sha256"),
    "krbd": (True, True, True, "on"),
}

DEFAULT_SETTINGS = {
    "bus": "virtio-blk",
    "cache": "none",
    "iothread": False,
    "aio": "threads",
    "cpu": "kvm64",
    "format": "raw",
    "vcpus": 2,
    "memory_mib": 1024,
}


def read(name: str, raw, base: VmConfig = VmConfig()) -> VmConfig:
    data = LineDict({name: raw})
    data.line, data.key_lines = 1, {name: 1}
    return AXIS_BY_NAME[name].parse(Section(Context("t.yaml"), data, "vm", 1), name, base)


def parse(text: str):
    return parse_scenario(BASE + textwrap.dedent(text), "t.yaml")


def test_table_is_consistent():
    assert VM_AXES == ("bus", "cache", "iothread", "aio", "cpu", "aes", "format", "vcpus", "memory", "detect_zeroes",
                       "discard", *LIMIT_NAMES, "volblocksize",
                       "recordsize", "compression", "sync", "primarycache", "secondarycache", "logbias", "atime", "dedup",
                       "checksum", "krbd")
    assert tuple(AXIS_BY_NAME) == VM_AXES and list(AXIS_BY_NAME.values()) == list(AXES)
    keys = [a.settings_key for a in AXES if a.settings_key is not None]
    assert len(keys) == len(set(keys))
    assert AXIS_BY_NAME["aes"].settings_key is None and AXIS_BY_NAME["memory"].settings_key == "memory_mib"
    assert all(a.describe.strip() and "\n" not in a.describe for a in AXES)
    assert VM_AXES.index("cpu") < VM_AXES.index("aes")  # cpu replaces the whole CPU; aes then sets its flag


def test_every_axis_has_a_round_trip_case():
    assert set(ROUND_TRIPS) == set(VM_AXES)


@pytest.mark.parametrize("name", VM_AXES)
def test_axis_round_trip(name):
    axis = AXIS_BY_NAME[name]
    raw, setting, value, label = ROUND_TRIPS[name]
    default = VmConfig()
    vm = read(name, raw)
    assert axis.setting(vm) == setting and type(axis.setting(vm)) is type(setting)
    assert axis.value(vm) == value and axis.value(vm) != axis.value(default)
    assert axis.label(vm, raw) == label
    assert changed_axes(vm, default) == (name,)  # parsing touched this axis only
    if axis.settings_key is not None:
        assert settings_of(vm)[axis.settings_key] == setting
    # merge copies exactly this axis, both ways
    merged = axis.merge(default, vm)
    assert axis.value(merged) == value and changed_axes(merged, default) == (name,)
    assert axis.merge(vm, default) == default
    other = dataclasses.replace(default, vcpus=8) if name != "vcpus" else dataclasses.replace(default, bus=Bus.SATA)
    assert changed_axes(axis.merge(other, vm), other) == (name,)


def test_labels_name_the_value_as_written():
    assert AXIS_BY_NAME["cache"].label(read("cache", "WriteBack"), "WriteBack") == "WriteBack"
    assert AXIS_BY_NAME["iothread"].label(read("iothread", False), False) == "off"
    assert AXIS_BY_NAME["memory"].label(read("memory", 1536), 1536) == "1536M"
    assert AXIS_BY_NAME["cpu"].label(read("cpu", "host"), "host") == "host-passthrough"


def test_aes_merges_into_the_cpu_and_cpu_keeps_other_axes():
    vm = AXIS_BY_NAME["aes"].merge(read("cpu", "qemu64"), read("aes", "off"))
    assert vm.cpu == CpuConfig(model="qemu64", aes=Feature.OFF)
    assert settings_of(vm)["cpu"] == "qemu64-aes"
    assert changed_axes(vm, VmConfig()) == ("cpu", "aes")


def test_default_settings_keys_order_and_values():
    s = settings_of(VmConfig())
    assert s == DEFAULT_SETTINGS
    assert list(s) == list(DEFAULT_SETTINGS)
    assert all(type(v) in (str, bool, int) for v in s.values())  # plain values, never enums
    assert vm_key(VmConfig()) == "bus=virtio-blk;cache=none;iothread=False;aio=threads;cpu=kvm64;format=raw;vcpus=2;memory_mib=1024"


def test_changed_settings_keys_order_and_values():
    vm = VmConfig(vcpus=4, memory_mib=2048, bus=Bus.VIRTIO_SCSI, cache=Cache.WRITEBACK, iothread=True, aio=Aio.IO_URING,
                  cpu=CpuConfig(mode=CpuMode.HOST_PASSTHROUGH, model=None, aes=Feature.ON, features=(("avx2", Feature.OFF),)),
                  format=ImageFormat.QCOW2)
    s = settings_of(vm)
    assert s == {
        "bus": "virtio-scsi",
        "cache": "writeback",
        "iothread": True,
        "aio": "io_uring",
        "cpu": "host-passthrough+aes-avx2",
        "format": "qcow2",
        "vcpus": 4,
        "memory_mib": 2048,
    }
    assert list(s) == list(DEFAULT_SETTINGS)
    assert all(type(v) in (str, bool, int) for v in s.values())


def _another(value, field: str = ""):
    """A value of the same kind as ``value`` but different (a setting left to the hypervisor:
    one of its values)."""
    if value is None:
        return {"detect_zeroes": DetectZeroes.OFF, "discard": Discard.IGNORE, "krbd": True}[field]
    if isinstance(value, IoLimits):
        return dataclasses.replace(value, iops=100)
    if isinstance(value, enum.Enum):
        return next(m for m in type(value) if m is not value)
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, CpuConfig):
        return dataclasses.replace(value, model="qemu64")
    raise AssertionError(f"teach _another a value of type {type(value).__name__}")


@pytest.mark.parametrize("field", [f.name for f in dataclasses.fields(VmConfig) if f.name != "zfs"])
def test_each_vm_field_is_exactly_one_axis(field):
    default = VmConfig()
    vm = dataclasses.replace(default, **{field: _another(getattr(default, field), field)})
    changed = [a.name for a in AXES if a.value(vm) != a.value(default)]
    assert len(changed) == 1, f"VmConfig.{field} is seen by axes {changed}; add exactly one row to AXES"
    stored = [k for k, v in settings_of(vm).items() if v != settings_of(default).get(k)]
    assert len(stored) == 1, f"VmConfig.{field} changes settings() keys {stored}"
    assert vm_key(vm) != vm_key(default)


def test_each_zfs_setting_is_exactly_one_axis():
    default = VmConfig()
    for name in STORAGE_AXES:
        vm = read(name, ROUND_TRIPS[name][0])
        assert [a.name for a in AXES if a.value(vm) != a.value(default)] == [name]
        assert [k for k in settings_of(vm) if k not in settings_of(default)] == [name]
        assert vm_key(vm) != vm_key(default) and vm.storage_key() != default.storage_key()


# the storage each ZFS axis applies to
ZVOL_STORAGE = "storage: {type: zfs, dataset: tank/vmbench}\n"
DATASET_STORAGE = "storage: {type: zfs-dataset, dataset: tank/vmbench}\n"


#: krbd applies to a Proxmox rbd storage only
PVE_RBD = ("hypervisor: {driver: proxmox, host: 127.0.0.1, node: pve, template: 9000, storage: ceph-vm, "
           "token: {id: 'root@pam!vmbench', secret_file: /t}}\nstorage: {type: rbd}\n")


def _storage_for(name: str) -> str:
    if name == "krbd":
        return PVE_RBD
    if name in ("recordsize", "atime"):
        return DATASET_STORAGE
    return ZVOL_STORAGE if name in STORAGE_AXES else ""


#: the I/O limits one VM can have at once (a total excludes its read and write rates)
ONE_VM_LIMITS = ("iops_rd", "iops_wr", "mbps", "iops_rd_max", "iops_wr_max", "mbps_max", "burst_length")


def _vm_for(name: str) -> str:
    """What a vary: of ``name`` needs in vm: (a burst its rate, burst_length a burst)."""
    if name == "burst_length":
        return "vm: {iops: 100, iops_max: 200}\n"
    if name in LIMIT_NAMES and name.endswith("_max"):
        return f"vm: {{{name[:-4]}: 1}}\n"
    return ""


def test_every_axis_is_a_vm_key_and_a_vary_axis():
    vm_only = [n for n in ROUND_TRIPS if n not in STORAGE_AXES and (n not in LIMIT_NAMES or n in ONE_VM_LIMITS)
               and n != "krbd"]  # krbd: a Proxmox rbd storage's (below, with _storage_for)
    text = "vm:\n" + "".join(f"  {n}: {ROUND_TRIPS[n][0]!r}\n" for n in vm_only if n not in ("cpu", "format"))
    vm = parse(text + "  cpu: {model: Westmere, features: {avx2: 'off'}}\n  format: qcow2\n").baseline
    for name in vm_only:
        assert AXIS_BY_NAME[name].value(vm) == ROUND_TRIPS[name][2]
    for name, (raw, _s, _v, label) in ROUND_TRIPS.items():
        if name == "cpu":
            continue
        s = parse(_storage_for(name) + _vm_for(name) + f"vary:\n  {name}: [{raw!r}]\n")
        assert [(c.name, c.changed) for c in s.cells] == [("baseline", ()), (f"{name}={label}", (name,))]


@pytest.mark.parametrize("order", ["cpu first", "aes first"])
def test_aes_is_applied_after_the_cpu_whatever_the_key_order(order):
    keys = ["cpu: {model: qemu64, aes: on}", "aes: off"]
    if order == "aes first":
        keys.reverse()
    assert parse("vm:\n" + "".join(f"  {k}\n" for k in keys)).baseline.cpu.label == "qemu64-aes"
    vary = ["cpu: [kvm64, Westmere]", "aes: [on]"]
    if order == "aes first":
        vary.reverse()
    s = parse("mode: factorial\nvary:\n" + "".join(f"  {v}\n" for v in vary))
    assert sorted(c.vm.cpu.label for c in s.cells) == ["Westmere+aes", "kvm64", "kvm64+aes"]
    assert all(c.changed == () or "aes" in c.changed for c in s.cells)


def test_cells_and_journey_record_changed_axes_in_table_order():
    s = parse("cells:\n  - {name: a, memory: 2G, bus: sata, aes: on}\n")
    assert s.cells[0].changed == ("bus", "aes", "memory")
    j = parse("journey:\n  - {name: a}\n  - {name: b, vcpus: 4, cache: unsafe}\n")
    assert [c.changed for c in j.cells] == [(), ("cache", "vcpus")]


def test_empty_vary_axis_hints_at_its_values():
    with pytest.raises(ScenarioError) as exc:
        parse("vary:\n  cache: []\n")
    assert "vary.cache: needs at least one value" in exc.value.message
    assert exc.value.hint == f"cache is {AXIS_BY_NAME['cache'].describe}"
    assert "writeback" in exc.value.hint


# ---- a NEW axis: one row in the table and its VmConfig field, nothing else -------------------


@dataclasses.dataclass(frozen=True)
class QueuesVm(VmConfig):
    """VmConfig with the new axis's field (a test cannot add a field to VmConfig itself)."""

    queues: int | None = None  # virtio queues; None: the hypervisor's default


QUEUES = _field_axis("queues", as_int(1, 16), "a whole number from 1 to 16",
                     verify=(("qemu_queues", "the QEMU command line", True),), unset=HYPERVISOR_DEFAULT)


@pytest.fixture
def queues_axis(monkeypatch):
    """Register QUEUES as if its row had been added to AXES (after discard) and its field to
    VmConfig: every vmbench module that holds the table, its views or VmConfig sees the new ones."""
    at = VM_AXES.index("discard") + 1
    new = axes_module.views(AXES[:at] + (QUEUES,) + AXES[at:])
    views: dict[int, object] = {id(getattr(axes_module, name)): getattr(new, name) for name in axes_module.Views._fields}
    views[id(VmConfig)] = QueuesVm
    for name, module in list(sys.modules.items()):
        if name == "vmbench" or name.startswith("vmbench."):
            for attr, value in list(vars(module).items()):
                if id(value) in views:
                    monkeypatch.setattr(module, attr, views[id(value)])
    return QUEUES


def test_a_new_axis_is_read_named_stored_shown_and_verified_from_its_row(queues_axis):
    # read under vm: and vary:, named in cell names, recorded as changed
    s = parse("vm:\n  queues: 4\nvary:\n  queues: [2, 8]\n")
    assert [c.name for c in s.cells] == ["baseline", "queues=2", "queues=8"]
    assert [c.changed for c in s.cells] == [(), ("queues",), ("queues",)]
    assert "queues is a whole number from 1 to 16" in str(pytest.raises(ScenarioError, parse, "vary:\n  queues: []\n").value.hint)
    # stored with each row when given; left to the hypervisor it is not stored, so old runs keep their keys
    assert settings_of(s.baseline) == {**DEFAULT_SETTINGS, "queues": 4}
    assert settings_of(QueuesVm()) == DEFAULT_SETTINGS
    assert vm_key(QueuesVm()) == "bus=virtio-blk;cache=none;iothread=False;aio=threads;cpu=kvm64;format=raw;vcpus=2;memory_mib=1024"
    # report columns and old rows without it
    assert setting_columns([settings_of(c.vm) for c in s.cells]) == (*DEFAULT_SETTINGS, "queues")
    assert setting_columns([DEFAULT_SETTINGS]) == tuple(DEFAULT_SETTINGS)
    assert stored_setting(DEFAULT_SETTINGS, "queues") == "hypervisor default" and stored_setting({"queues": 2}, "queues") == 2
    # the run's checks that it took effect: from its verify entries; the reading travels in readings
    assert [(c.what, c.key, c.required) for c in evidence._checks() if c.what == "queues"] == [("queues", "qemu_queues", True)]
    eff = evidence.effective_settings(Applied(readings={"qemu_queues": 2}, details={"opaque": 1}), {})
    assert eff["qemu_queues"] == 2 and "opaque" not in eff
    assert [p for p in evidence.problems(s.baseline, eff, "kvm") if "queues" in p] == [
        "queues: asked 4, the QEMU command line reports 2"]
    assert "queues (the QEMU command line) could not be verified" in evidence.problems(s.baseline, {}, "kvm")
    assert not [p for p in evidence.problems(QueuesVm(), {}, "kvm") if "queues" in p]  # left to the hypervisor


def test_report_columns_and_old_rows():
    assert setting_columns([DEFAULT_SETTINGS]) == tuple(DEFAULT_SETTINGS)  # detect_zeroes, discard: shown once given
    assert setting_columns([DEFAULT_SETTINGS, {**DEFAULT_SETTINGS, "discard": "unmap"}]) == (*DEFAULT_SETTINGS, "discard")
    assert "compression" not in setting_columns([{"compression": "lz4"}])  # the host storage's, not the VM's
    # a row stored before detect_zeroes existed reads as one that left it to the hypervisor
    assert stored_setting(DEFAULT_SETTINGS, "detect_zeroes") == "hypervisor default"
    assert stored_setting({}, "cache") == "not recorded" and stored_setting({}, "no-such-key") is None
