"""A scratch disk on a block device, end to end: the quick scenario's jobs on a real libvirt VM
whose scratch disk is a loop device (``<disk type='block'>``, as for a ZFS zvol), fio on the
host on that device and in the guest on the disk it sees, the settings verified in effect,
and nothing left behind (domain, volumes, loop devices)."""

from __future__ import annotations

import shutil
import subprocess
import time
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.integration.test_end_to_end import QUICK as E2E_QUICK
from tests.integration.conftest import URI, run_tag_resources
from vmbench.storage.leftover import Leftover
from vmbench.drivers.libvirt.driver import LibvirtDriver
from vmbench.errors import HypervisorError
from vmbench.paths import HostPaths, StatePaths
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import Hypervisor
from vmbench.settings import ImageFormat
from vmbench.storage import VOLUME_RE, Volume
from vmbench.transport.local import LocalTransport

# the quick scenario (scenarios/quick.yaml) with short jobs
QUICK = E2E_QUICK.replace("name: it-quick", "name: it-block-scratch")


def _losetup(*args: str) -> str:
    return subprocess.run(["losetup", *args], capture_output=True, text=True, check=True, timeout=60).stdout


def _backing_devices(path: Path) -> list[str]:
    """The loop devices backed by ``path`` (``losetup -j``)."""
    out = subprocess.run(["losetup", "-n", "-O", "NAME", "-j", str(path)], capture_output=True, text=True, timeout=60)
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


class LoopStorage:
    """HostStorage: each volume a sparse file in ``root`` attached to a loop device; QEMU and
    host fio get the device (``kind="block"``), as they would a zvol."""

    label = "loop devices (test)"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.devices: dict[str, str] = {}  # volume name -> /dev/loopN
        self.attached: list[str] = []  # every device ever attached, for the test's checks
        self.created: list[str] = []
        self.deleted: list[str] = []

    def prepare(self, progress) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        progress.step(f"{self.label} in {self.root}")

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.root).free

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None, zfs=None) -> Volume:
        assert VOLUME_RE.match(name), name
        assert backing is None and fmt is ImageFormat.RAW, "only raw scratch and reference volumes on loop devices"
        if name in self.devices:
            raise HypervisorError(f"creating volume {name}: it already exists")
        path = self.root / name
        with open(path, "xb") as f:
            f.truncate(size)  # sparse
        try:
            dev = _losetup("--find", "--show", str(path)).strip()
        except subprocess.CalledProcessError as exc:
            path.unlink()
            raise HypervisorError(f"losetup {path}: {exc.stderr.strip()}") from None
        self.devices[name] = dev
        self.attached.append(dev)
        self.created.append(name)
        return Volume(name=name, path=dev, format=fmt, kind="block")

    def delete_volume(self, name: str) -> None:
        """Detach every loop device on the volume's file, then remove it; gone already is fine."""
        self.deleted.append(name)
        self.devices.pop(name, None)
        path = self.root / name
        for dev in _backing_devices(path):
            for attempt in range(10):  # the device may be busy a moment after QEMU closed it
                try:
                    _losetup("-d", dev)
                    break
                except subprocess.CalledProcessError as exc:
                    if attempt == 9:
                        raise HypervisorError(f"losetup -d {dev}: {exc.stderr.strip()}") from None
                    time.sleep(0.5)
        path.unlink(missing_ok=True)

    def delete_all(self) -> None:
        """Whatever is still there (the test's finally)."""
        if self.root.is_dir():
            for p in self.root.iterdir():
                self.delete_volume(p.name)

    def leftovers(self) -> list[Leftover]:
        return []

    def delete_path(self, path: str) -> None:
        pass

    def facts(self) -> dict:
        return {"storage_type": "loop (test)", "loop_root": str(self.root)}


def test_quick_scenario_on_a_loop_device_scratch(machine, tmp_path):
    scenario = parse_scenario(QUICK, str(tmp_path / "quick.yaml"), base_dir=tmp_path)
    db = ResultsDB(tmp_path / "r.db")
    state = StatePaths.default()
    storage = LoopStorage(tmp_path / "loops")
    driver = LibvirtDriver(Hypervisor(uri=URI), scenario.storage, host=LocalTransport(), state=state,
                           paths=HostPaths.for_host(None, state), scratch_storage=storage)
    started = time.monotonic()
    try:
        outcome = Runner(scenario, db, RecordingProgress(), driver=driver).run()
    finally:
        storage.delete_all()
        driver.close()
    seconds = time.monotonic() - started
    print(f"run took {seconds:.0f}s")

    assert outcome.status == "ok", outcome.error
    assert outcome.invalid_cells == []
    # one scratch volume, no host reference (it is raw: host fio ran on the scratch device itself)
    assert [VOLUME_RE.match(n).group(2) for n in storage.created] == ["scratch"]
    (dev,) = storage.attached
    assert dev.startswith("/dev/loop")

    # the VM got the loop device as a block disk, and libvirt kept it so
    (boot,) = db.rows("boots", outcome.run_id)
    for xml in (boot["domain_xml"], boot["live_xml"]):
        assert "<disk type='block'" in xml or '<disk type="block"' in xml
        assert f"<source dev='{dev}'" in xml or f'<source dev="{dev}"' in xml
    live = ET.fromstring(boot["live_xml"])
    serial = f"VMB{outcome.tag[1:]}S001"
    (scratch,) = [d for d in live.findall("./devices/disk") if d.findtext("serial") == serial]
    assert scratch.get("type") == "block" and scratch.find("source").get("dev") == dev
    root = next(d for d in live.findall("./devices/disk") if d.findtext("serial") != serial)
    assert root.get("type") == "file" and root.find("source").get("file").endswith("-root.qcow2")  # the dir pool

    # QEMU opened the device (host_device) with the settings asked for
    applied = boot["guest"]["applied"]
    assert applied["volume"] == dev
    (block,) = [b for b in boot["guest"]["query_block"] if (b.get("inserted") or {}).get("file") == dev]
    assert block["inserted"]["image"]["filename"] == dev and block["inserted"]["drv"] == "raw"
    eff = boot["guest"]["effective"]
    assert (eff["qemu_cache"], eff["qemu_aio"], eff["qemu_format"], eff["guest_bus"]) == ("none", "native", "raw", "virtio-blk")
    blockdevs = [a for a in boot["qemu_cmdline"] if f'"filename":"{dev}"' in a]
    assert blockdevs and '"driver":"host_device"' in blockdevs[0], boot["qemu_cmdline"]

    # the cell's evidence checks passed
    (cell,) = db.rows("cells", outcome.run_id)
    assert cell["valid"], cell["problems"]
    assert cell["problems"] == []

    # fio on the host on the loop device, in the guest on the disk it sees
    rows = db.rows("measurements", outcome.run_id)
    assert sorted((m["side"], m["job"]) for m in rows) == [
        ("guest", "1m-read"), ("guest", "4k-randwrite"), ("host", "1m-read"), ("host", "4k-randwrite")]
    for m in rows:
        assert m["iops"] > 0 and m["bw_bytes"] > 0, (m["side"], m["job"])
    assert {m["target"] for m in rows if m["side"] == "host"} == {dev}
    assert all(m["target"].startswith("/dev/") and m["target"] != dev for m in rows if m["side"] == "guest")

    # nothing left: the domain, the root volume, the loop devices and their files
    assert run_tag_resources(machine, outcome.tag) == []
    assert storage.devices == {} and storage.deleted.count(storage.created[0]) >= 1
    attached = _losetup("-a")
    assert str(storage.root) not in attached, attached
    assert list(storage.root.iterdir()) == []
    assert seconds < 600
