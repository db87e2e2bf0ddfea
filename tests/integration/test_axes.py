"""Issue 3: every VM-level axis applied and verified in effect; the fewest boots (one per VM configuration)."""

from __future__ import annotations

from vmbench.drivers.libvirt.driver import LibvirtDriver
from vmbench.paths import HostPaths, StatePaths
from vmbench.scenario.backend import Storage
from vmbench.scenario.model import Hypervisor
from vmbench.transport.local import LocalTransport
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from tests.integration.conftest import URI, run_tag_resources

AXES = """
name: it-axes
storage: {scratch_size: 256M}
vm: {memory: 768M, aio: threads}
cells:
  - {name: blk-none-aes-on, bus: virtio-blk, cache: none, aio: native, cpu: {model: Westmere, aes: on}, detect_zeroes: unmap, discard: unmap}
  - {name: scsi-writethrough-aes-off, bus: virtio-scsi, cache: writethrough, iothread: true, cpu: {model: Westmere, aes: off}}
  - {name: shared-writeback, bus: virtio-scsi-shared, cache: writeback, aio: io_uring, detect_zeroes: on}
  - {name: sata-directsync, bus: sata, cache: directsync, format: qcow2}
  - {name: blk-unsafe-iothread, bus: virtio-blk, cache: unsafe, iothread: true, cpu: max, mbps_wr: 5}
jobs:
  - {name: 4k-randread, rw: randread, bs: 4k, size: 32M, runtime: 1s, ramp: 0s}
  - {name: 4k-randwrite, rw: randwrite, bs: 4k, size: 32M, runtime: 1s, ramp: 0s}
  - {file: mine.fio}
"""

JOBFILE = """\
[global]
ioengine=libaio
direct=1
filename=${VMBENCH_TARGET}
size=32m
time_based
runtime=1
[mine]
rw=randrw
rwmixread=50
bs=8k
iodepth=2
"""


class CountingDriver(LibvirtDriver):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.boot_calls = 0
        self.create_calls = 0

    def create_vm(self, *a, **kw):
        self.create_calls += 1
        return super().create_vm(*a, **kw)

    def boot(self, *a, **kw):
        self.boot_calls += 1
        return super().boot(*a, **kw)


def run(text: str, tmp_path):
    (tmp_path / "mine.fio").write_text(JOBFILE)
    scenario = parse_scenario(text, str(tmp_path / "s.yaml"), base_dir=tmp_path)
    db = ResultsDB(tmp_path / "r.db")
    state = StatePaths.default()
    driver = CountingDriver(Hypervisor(uri=URI), Storage(), host=LocalTransport(), state=state, paths=HostPaths.for_host(None, state))
    runner = Runner(scenario, db, RecordingProgress(), driver=driver)
    outcome = runner.run()
    return outcome, db, driver


def test_every_axis_value_is_applied_and_verified_each_in_one_boot(machine, tmp_path):
    """Five VM configurations, each applied and verified in effect, and three jobs (one a user's
    job file): one boot per configuration, every job in it (the planner's check, which had a run
    of two configurations and 2 boots of its own)."""
    outcome, db, driver = run(AXES, tmp_path)
    assert outcome.status == "ok" and outcome.invalid_cells == []
    cells = {c["name"]: c for c in db.rows("cells", outcome.run_id)}
    assert all(c["valid"] for c in cells.values()), {n: c["problems"] for n, c in cells.items()}
    eff = {n: c["evidence"]["effective"] for n, c in cells.items()}
    # the guest sees the bus asked for
    assert [eff[n]["guest_bus"] for n in cells] == ["virtio-blk", "virtio-scsi", "virtio-scsi-shared", "sata", "virtio-blk"]
    # QEMU's block layer reports the cache mode asked for, and the guest sees the matching write cache
    assert [eff[n]["qemu_cache"] for n in cells] == ["none", "writethrough", "writeback", "directsync", "unsafe"]
    assert [eff[n]["guest_write_cache"] for n in cells] == ["write back", "write through", "write back", "write through", "write back"]
    assert [eff[n]["qemu_aio"] for n in cells] == ["native", "threads", "io_uring", "threads", "threads"]
    assert [eff[n]["qemu_iothread"] for n in cells] == [False, True, False, False, True]
    assert eff["sata-directsync"]["qemu_format"] == "qcow2"
    # detect_zeroes and discard where asked; elsewhere left to libvirt (off, ignore), recorded
    assert [eff[n]["qemu_detect_zeroes"] for n in cells] == ["unmap", "off", "on", "off", "off"]
    assert [eff[n]["config_detect_zeroes"] for n in cells] == ["unmap", "off", "on", "off", "off"]
    assert (eff["blk-none-aes-on"]["config_discard"], eff["blk-none-aes-on"]["qemu_discard"]) == ("unmap", "unmap")
    assert all(eff[n]["qemu_discard"] == "ignore" for n in cells if n != "blk-none-aes-on")
    # aes forced on: the guest has the flag; forced off: it does not
    assert eff["blk-none-aes-on"]["guest_aes"] is True
    assert eff["scsi-writethrough-aes-off"]["guest_aes"] is False
    # every result row records every setting of its cell
    rows = db.rows("measurements", outcome.run_id)
    guest_rows = [m for m in rows if m["side"] == "guest" and m["job"] == "4k-randread"]
    assert len(guest_rows) == 5
    # (detect_zeroes and discard only where the cell gives them: left to the hypervisor they are not stored)
    names = {c["id"]: n for n, c in cells.items()}
    settings = {names[m["cell_id"]]: m["settings"] for m in guest_rows}
    given = {"blk-none-aes-on": {"detect_zeroes": "unmap", "discard": "unmap"}, "shared-writeback": {"detect_zeroes": "on"},
             "blk-unsafe-iothread": {"mbps_wr": 5}}
    # a write limit (issue 24): in QEMU's throttling, and the cell measured (preconditioned through it)
    assert eff["blk-unsafe-iothread"]["qemu_mbps_wr"] == 5
    for name, stored in settings.items():
        assert set(stored) == {"bus", "cache", "iothread", "aio", "cpu", "format", "vcpus", "memory_mib", *given.get(name, {})}
        assert {k: stored[k] for k in given.get(name, {})} == given.get(name, {})
    # one boot per VM configuration, every job in it
    assert driver.boot_calls == 5 and driver.create_calls == 5
    assert len(db.rows("boots", outcome.run_id)) == 5
    guest = [m for m in rows if m["side"] == "guest"]
    assert len(guest) == 5 * 3 and {(names[m["cell_id"]], m["job"]) for m in guest} == {
        (n, j) for n in cells for j in ("4k-randread", "4k-randwrite", "mine")}
    # the user's own job file ran unchanged on both sides, on the target vmbench gave it
    mine = [m for m in rows if m["job"] == "mine"]
    assert len([m for m in mine if m["side"] == "guest"]) == 5 and {m["side"] for m in mine} == {"host", "guest"}
    assert all(m["fio"]["jobs"][0]["job options"]["rw"] == "randrw" for m in mine)
    assert all(m["fio"]["jobs"][0]["read"]["io_bytes"] > 0 and m["fio"]["jobs"][0]["write"]["io_bytes"] > 0 for m in mine)
    targets = {names[m["cell_id"]]: m["fio"]["global options"]["filename"] for m in mine if m["side"] == "guest"}
    assert targets["blk-none-aes-on"] == "/dev/vdb" and all(f.startswith("/dev/") for f in targets.values()), targets
    assert all(m["fio"]["global options"]["filename"].endswith("-scratch.raw") for m in mine if m["side"] == "host")
    assert run_tag_resources(machine, outcome.tag) == []
