"""A made-up storage backend, added for the test only as one backend class and its
registration (and, for its volumes, one volume storage in the storage layer's registry),
works everywhere vmbench asks a storage type something, with no other code change: the
scenario's storage: section, type and checks (what a cell may not be on it, the drivers it
refuses), the plan (how many host references, ``vmbench plan``'s note), a run on the fake
driver whose volumes its volume storage names its own way, cleanup after an interrupted run,
and the report and advice of the stored run.

What a real new backend (iSCSI, NFS, LVM-thin) needs: see the note at the end.
"""

from __future__ import annotations

import textwrap
from typing import Iterator

import pytest

from tests.fakes import FakeDriver, FakeHost, FakeStorage, fio_run
from tests.unit.conftest import fresh_state
from vmbench.cli.cleanup import find_leftovers, remove_leftovers
from vmbench.cli.main import main
from vmbench.errors import CommandError, ScenarioError
from vmbench.progress import RecordingProgress
from vmbench.report.build import build_report
from vmbench.report.load import load_run
from vmbench.results.db import ResultsDB
from vmbench.run.plan import make_plan
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from vmbench.scenario.backend import Storage, StorageBackend, StorageType, backend_named, register, unregister
from vmbench.scenario.model import VmConfig
from vmbench.settings import DriverName, ImageFormat
from vmbench.storage import VOLUME_RE, VOLUME_STORAGES, Volume, make_volume_storage
from vmbench.storage.leftover import Leftover
from vmbench.units import format_size

NAME = "shelf"
SCENARIO = f"""
name: m
storage: {{type: {NAME}, pool: scratch, scratch_size: 256M}}
vm: {{cache: none}}
vary: {{cache: [writeback]}}
jobs:
  - {{name: j1, rw: randwrite, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}}
"""


# ---- the made-up backend: one class, its registration ----------------------------------------------


class ShelfBackend(StorageBackend):
    """Raw files on a shelf: a directory whose volumes are named by run, then role and number
    (``<root>/<pool>/<run>/<role>.<n>.raw``), each cache mode measured against its own host reference."""

    name = NAME
    formats = (ImageFormat.RAW,)
    volumes = NAME

    def describe(self, storage: Storage) -> str:
        return f"raw files on shelf {storage.pool}, scratch {format_size(storage.scratch_size)}"

    def driver_problem(self, driver: DriverName, *, qualified: bool = False) -> tuple[str, str] | None:
        if driver is DriverName.PROXMOX:
            return (f"{'storage.type ' if qualified else ''}{NAME} is not supported with driver proxmox",
                    "use the libvirt driver")
        return None

    def reference_key(self, vm: VmConfig) -> str:
        return f"{vm.storage_key()}|cache={vm.cache.value}"

    def reference_note(self, krbd: bool) -> str:
        return "the host is measured once per cache mode on a shelf"


class ShelfFiles(FakeStorage):
    """The shelf's volume storage: the fake pool with paths of the shelf's own naming."""

    def __init__(self, storage: Storage, host: FakeHost) -> None:
        super().__init__(host=host, root=f"/srv/shelves/{storage.pool}")

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None, zfs=None) -> Volume:
        vol = super().create_volume(name, size, fmt, backing, zfs)
        tag, seq, role = _parts(name)
        shelved = Volume(name=name, path=f"{self.root}/{tag}/{role}.{seq}.{fmt.value}", format=fmt)
        self.volumes[name] = shelved
        if self.host is not None:
            self.host.files.pop(vol.path, None)
            self.host.files[shelved.path] = b""
        return shelved

    def leftovers(self) -> list[Leftover]:
        return [Leftover("shelf file", v.path, _parts(v.name)[0], "shelf") for v in self.volumes.values()]

    def delete_path(self, path: str) -> None:
        name = next((n for n, v in self.volumes.items() if v.path == path), None)
        if name is None:
            raise AssertionError(f"{path} is not on the shelf")
        self.delete_volume(name)

    def facts(self) -> dict:
        return {"storage_type": NAME, "pool": self.root, "pool_free_bytes": self.free}


def _parts(name: str) -> tuple[str, str, str]:
    m = VOLUME_RE.match(name)
    assert m is not None, name
    return m.group(1), name.split("-")[2], m.group(2)


@pytest.fixture
def shelf(monkeypatch) -> Iterator[StorageType]:
    """The backend registered (and its volume storage) for the test, forgotten after it."""
    kind = register(ShelfBackend())
    monkeypatch.setitem(VOLUME_STORAGES, NAME, ShelfFiles)
    yield kind
    unregister(NAME)


def scenario(text: str = SCENARIO):
    return parse_scenario(textwrap.dedent(text), "m.yaml")


# ---- the scenario ------------------------------------------------------------------------------------


def test_the_scenario_names_it_and_its_checks_are_the_backends(shelf):
    s = scenario()
    assert s.storage.type is shelf and s.storage.type.backend() is backend_named(NAME)
    assert s.storage.describe() == "raw files on shelf scratch, scratch 256m" and not s.storage.zfs
    assert NAME in StorageType.allowed()
    with pytest.raises(ScenarioError, match=f"format qcow2 is not possible on storage type {NAME}"):
        scenario(SCENARIO.replace("vm: {cache: none}", "vm: {cache: none, format: qcow2}"))
    with pytest.raises(ScenarioError, match="sparse.* applies to ZFS storage .*not type shelf"):
        scenario(SCENARIO.replace("pool: scratch,", "pool: scratch, sparse: true,"))
    with pytest.raises(ScenarioError, match=f"{NAME} is not supported with driver proxmox"):
        scenario(SCENARIO.replace("name: m\n", "name: m\nhypervisor: {driver: proxmox, host: pve1, node: pve1, "
                                               "template: 9000, storage: local, token: {id: a@pve!t, secret_file: /s}}\n"))
    with pytest.raises(ScenarioError, match="needs ZFS storage"):  # a host_only scenario measures ZFS variants
        scenario(SCENARIO.replace("name: m\n", "name: m\nhost_only: true\n").replace("vm: {cache: none}\nvary: {cache: [writeback]}\n",
                                                                                     "vary: {compression: ['off']}\n"))


def test_unregistered_it_is_not_a_storage_type(shelf):
    unregister(NAME)
    with pytest.raises(ScenarioError, match=f"'{NAME}' is not one of: dir, zfs, zfs-dataset, rbd"):
        scenario()
    register(ShelfBackend())


# ---- the plan ----------------------------------------------------------------------------------------


def test_the_plan_measures_the_host_as_the_backend_keys_it(shelf, tmp_path, capsys):
    plan = make_plan(scenario())
    assert [b.cells[0].name for b, _ in plan.host_references()] == ["baseline", "cache=writeback"]
    assert len(make_plan(scenario(SCENARIO.replace(f"type: {NAME}", "type: dir"))).host_references()) == 1  # dir: one
    path = tmp_path / "m.yaml"
    path.write_text(textwrap.dedent(SCENARIO))
    assert main(["plan", str(path)]) == 0
    out = capsys.readouterr().out
    assert "raw files on shelf scratch, scratch 256m" in out and "the host is measured once per cache mode on a shelf" in out


# ---- a run on the fake driver, cleanup, the report -------------------------------------------------


@pytest.fixture
def env(tmp_path, monkeypatch, template, shelf):
    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    db = ResultsDB(db_path)
    yield state, db, db_path
    db.close()


def shelf_driver(s, **kw) -> FakeDriver:
    host = FakeHost()
    storage = make_volume_storage(s.storage, host)  # the storage layer makes what the backend names
    assert isinstance(storage, ShelfFiles)
    return FakeDriver(host=host, storage=storage, **kw)


def test_a_run_on_the_fake_driver_its_report_and_advice(env, capsys):
    state, db, db_path = env
    s = scenario()
    driver = shelf_driver(s)
    out = Runner(s, db, RecordingProgress(), driver=driver, state=state).run()
    assert out.status == "ok" and not out.invalid_cells
    created = driver.storage.created
    assert created and all(driver.storage.volumes.get(n) is None for n in created)  # every volume removed
    host_fio = [a for c in driver.host.fio_runs for a in c if a.startswith("--filename=")]
    # the host measured each boot's raw scratch file before the boot, on the shelf: one per cache mode
    assert host_fio == [f"--filename=/srv/shelves/scratch/{out.tag}/scratch.{n}.raw" for n in (1, 2)]
    data = load_run(db, out.run_id)  # the stored plan says the storage as the backend describes it
    assert data.plan.storage == "raw files on shelf scratch, scratch 256m" and data.environment["storage_type"] == NAME
    header, tables = build_report(data)
    assert "ceph" not in header and "zfs" not in header and [t.name for t in tables][:1] == ["gaps"]
    assert main(["report", "--db", str(db_path), str(out.run_id)]) == 0
    assert "Host vs guest, raw scratch disk" in capsys.readouterr().out
    assert main(["advise", "--db", str(db_path), str(out.run_id)]) == 0
    assert "baseline" in capsys.readouterr().out


def test_cleanup_after_a_failed_run_finds_the_shelf_files(env):
    state, db, _ = env
    s = scenario()
    driver = shelf_driver(s, fail_at="remove")
    driver.fail_guest(fio_run())  # fails boot 1; then the cleanup's remove fails too
    runner = Runner(s, db, RecordingProgress(), driver=driver, state=state)
    with pytest.raises(CommandError):
        runner.run()
    assert (state.runs / f"{runner.tag}.json").exists()  # for `vmbench cleanup`
    found, live = find_leftovers(driver, state)
    files = [item.name for item in found if item.kind == "shelf file"]
    assert live == {} and files and all(f.startswith(f"/srv/shelves/scratch/{runner.tag}/") for f in files)
    assert remove_leftovers(driver, found, state) == []
    assert driver.leftovers() == [] and driver.storage.volumes == {} and not (state.runs / f"{runner.tag}.json").exists()


# ---- the note: what the made-up backend needed, and what a real one needs besides -------------------
#
# The shelf needed one StorageBackend subclass and register() (vmbench/scenario/backend.py),
# and, for its volumes, a volume storage under the name its ``volumes`` gives in
# vmbench.storage.VOLUME_STORAGES; nothing else changed (tests/fakes.py's FakeDriver removes
# what its storage lists through it, as the libvirt and host-only drivers do).
# A real backend (iSCSI, NFS, LVM-thin) is the same, in these files, tests and docs aside:
#   1. vmbench/scenario/backends.py: its class (what its storage: section holds, what it refuses,
#      how the host reference reaches it, what it names for the layers above) and register();
#   2. vmbench/storage/<name>.py: its VolumeStorage (create, delete, leftovers, facts);
#   3. vmbench/storage/__init__.py: its entry in VOLUME_STORAGES;
#   and only where it needs them:
#   4. vmbench/scenario/backend.py: a Storage field and STORAGE_KEYS entry for a key of its own
#      (an LVM volume group, an NFS export), with
#   5. vmbench/scenario/reference.py: that key's row (docs/scenario-reference.md is generated);
#   6. vmbench/drivers/libvirt/xml.py + driver.py: a new kind of <disk> source (an iSCSI LUN as a
#      network disk); a file (NFS) or a block device (LVM-thin) is what libvirt takes already;
#   7. vmbench/drivers/proxmox/node.py: entries of its own (as zfspool's); none when its disks
#      are a PVE storage's (hypervisor.storage, any type PVE has).
# So: NFS (files in a mounted export, as the dir pool's) 3 files, 5 with a key for the export;
# LVM-thin (block volumes in a thin pool) 5 (1-5); iSCSI (LUNs as libvirt network disks) 7 (1-6);
# a backend that also makes Proxmox entries of its own (7) 6 to 8.
