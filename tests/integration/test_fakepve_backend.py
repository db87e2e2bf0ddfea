"""The fake PVE with its LibvirtBackend: a linked clone of the debian12 template boots as a real
TCG guest, its scratch disk carries the PVE options (virtio1, cache=none, iothread, serial) and
its guest agent answers through the fake's API; nothing is left behind."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.fakepve import FakePve, LibvirtBackend
from tests.fakepve.client import call, ok, wait

SERIAL = "VMBFAKEPVE1"


PREFIX = "vmbtest-pvebe-"  # not test_proxmox's vmbtest-pve-: both may run at once


def domains(conn, prefix: str = PREFIX) -> list[str]:
    return [d.name() for d in conn.listAllDomains(0) if d.name().startswith(prefix)]


def agent_run(fake: FakePve, vmid: int, argv: list[str], timeout: float = 60) -> dict:
    pid = ok(call(fake, "POST", f"/nodes/pve1/qemu/{vmid}/agent/exec", {"command": argv}))["pid"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = ok(call(fake, "GET", f"/nodes/pve1/qemu/{vmid}/agent/exec-status", {"pid": pid}))
        if st["exited"]:
            return st
        time.sleep(0.5)
    raise AssertionError(f"{argv} did not finish within {timeout}s")


def test_linked_clone_boots_with_the_configured_scratch_disk(machine):
    conn = machine.conn
    backend = LibvirtBackend(domain_prefix=PREFIX)
    with FakePve(version="9.1", backend=backend, task_polls=1, agent_pings=1) as fake:
        fake.add_template(cpu="x86-64-v2-AES")
        fake.add_storage("vmbench-z16k", "zfspool", pool="rpool/data", blocksize="16k", sparse=0, content="images")
        vmid = int(ok(call(fake, "GET", "/cluster/nextid")))
        wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": vmid, "name": "vmb-fake", "full": 0})))
        upid = ok(call(fake, "POST", f"/nodes/pve1/qemu/{vmid}/config",
                       {"virtio1": f"vmbench-z16k:1,cache=none,iothread=1,serial={SERIAL}", "tags": "vmbench"}))
        assert wait(fake, upid)["exitstatus"] == "OK"
        conf = ok(call(fake, "GET", f"/nodes/pve1/qemu/{vmid}/config"))
        volid = conf["virtio1"].split(",")[0]
        scratch = ok(call(fake, "GET", f"/nodes/pve1/storage/vmbench-z16k/content/{volid}"))["path"]
        root = fake.volume_path(conf["virtio0"].split(",")[0])

        booted = time.monotonic()
        assert wait(fake, ok(call(fake, "POST", f"/nodes/pve1/qemu/{vmid}/status/start")))["exitstatus"] == "OK"
        name = f"{PREFIX}{vmid}"
        assert name in domains(conn)
        cur = ok(call(fake, "GET", f"/nodes/pve1/qemu/{vmid}/status/current"))
        assert cur["status"] == "running" and cur["pid"] == int(Path(f"/run/libvirt/qemu/{name}.pid").read_text())

        live = ET.fromstring(conn.lookupByName(name).XMLDesc(0))
        assert live.get("type") == "qemu"
        disk = next(d for d in live.findall("./devices/disk") if d.findtext("serial") == SERIAL)
        assert disk.find("source").get("file") == scratch  # the file host-side fio would open
        drv = disk.find("driver")
        assert (drv.get("cache"), drv.get("io"), drv.get("iothread"), disk.find("target").get("bus")) == \
            ("none", "io_uring", "1", "virtio")
        assert live.find("./cpu/model").text == "qemu64"

        deadline = time.monotonic() + 300
        while True:
            r = call(fake, "POST", f"/nodes/pve1/qemu/{vmid}/agent/ping")
            if r.status == 200:
                break
            assert r.reason == "QEMU guest agent is not running", r
            assert time.monotonic() < deadline, "the guest agent did not answer within 300s"
            time.sleep(2)
        print(f"agent answered {time.monotonic() - booted:.0f}s after start")

        st = agent_run(fake, vmid, ["cat", "/sys/block/vdb/serial"])
        assert (st["exitcode"], st["out-data"].strip()) == (0, SERIAL)
        st = agent_run(fake, vmid, ["lsblk", "-dno", "NAME,SERIAL"])
        assert ["vdb", SERIAL] in [line.split() for line in st["out-data"].splitlines()], st
        r = call(fake, "GET", f"/nodes/pve1/qemu/{vmid}/agent/exec-status", {"pid": 999999})
        assert r.reason == f"VM {vmid} qga command 'guest-exec-status' failed - Invalid parameter 'pid'"

        wait(fake, ok(call(fake, "POST", f"/nodes/pve1/qemu/{vmid}/status/stop")))
        assert name not in domains(conn)
        assert wait(fake, ok(call(fake, "DELETE", f"/nodes/pve1/qemu/{vmid}",
                                  {"purge": 1, "destroy-unreferenced-disks": 1})))["exitstatus"] == "OK"
        assert not Path(scratch).exists() and not Path(root).exists()
        assert ok(call(fake, "DELETE", "/storage/vmbench-z16k")) is None
        fake_root = fake.root
    assert not fake_root.exists()
    assert not [d for d in domains(conn) if d == name]


def test_close_removes_a_running_domain_after_a_failure(machine):
    conn = machine.conn
    with pytest.raises(RuntimeError, match="boom"):
        with FakePve(version="8.4", backend=LibvirtBackend(domain_prefix=PREFIX), task_polls=0) as fake:
            fake.add_template()
            wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 4242, "full": 0})))
            wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/4242/status/start")))
            assert f"{PREFIX}4242" in domains(conn)
            root = fake.root
            raise RuntimeError("boom")
    assert f"{PREFIX}4242" not in domains(conn)
    assert not root.exists()
