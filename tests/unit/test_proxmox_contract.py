"""Contract tests of the Proxmox VE driver against the fake PVE node (tests/fakepve): a real
``ProxmoxDriver`` (its PveApi, proxmoxer, requests, TLS against the fake's own CA) drives one
VM through its whole life on both schema versions, and every request must be valid for that
version's official schema and every answer match its ``returns`` (``fake.problems == []``).

The recorded request sequence (method + path template, in order, task polls included) is the
contract: it is written out below, and it is the same on PVE 8.4 and 9.1.  Also checked: tasks
are waited for by the UPID they returned, booleans go as 0/1, the tags are set after the clone
(which copies the template's), the scratch disk's option string, destroy with purge and
destroy-unreferenced-disks, nothing of the run left on the node, and the token secret in no
request, log record, exception, command line or stored object.  The SSH side of the node is
``tests.fakes.FakePveNode`` (hostname, /dev/kvm, ``pveversion -v``, QEMU's /proc/<pid>/cmdline
as qemu-server 8 (-drive) or 9 (-blockdev) builds it; with OpenZFS for the zvol test).

The errors of issue 9 item 6, one test each, are in tests/unit/test_proxmox_errors.py.
"""

from __future__ import annotations

import json
import logging
import textwrap
import time
from pathlib import Path

import pytest

from tests.fakepve import FakePve, NullBackend
from tests.fakes import FakePveNode
from tests.fakezfs import FakeZfsHost
from vmbench.drivers.base import VmRequest
from vmbench.drivers.proxmox.driver import ProxmoxDriver
from vmbench.paths import HostPaths, StatePaths
from vmbench.progress import RecordingProgress
from vmbench.run.evidence import effective_settings
from vmbench.scenario import parse_scenario
from vmbench.settings import Bus

VERSIONS = ["8.4", "9.1"]
TOKEN_ID = "vmbench@pve!bench"
SECRET = "5e1f7c2a-93b4-4d0e-a8f6-c0ffee7ab1e5"  # distinctive: found wherever it leaks
ENV = "VMBENCH_CONTRACT_PVE_SECRET"
TAG = "r0a1b2c3d"
VM = """
vm:
  vcpus: 2
  memory: 1G
  bus: virtio-scsi
  cache: none
  aio: native
  iothread: true
  cpu: x86-64-v2-AES
  detect_zeroes: off
"""
JOBS = """
jobs:
  - {name: 4k-randwrite, rw: randwrite, bs: 4k}
"""
SERIAL = "VMB0a1b2c3dS001"  # scratch_serial(TAG, 1)
GUEST_FILE = "/var/lib/vmbench/bytes.bin"
AGENT_PINGS = 3  # the fake's agent answers the third ping after the start
GUEST_BYTES = b"\x00\x01\x7f\x80\xc3\xa9\xff\xfe vmbench\r\n"  # every byte must come back as it is


class Clock:
    """The driver's clock: sleeping moves it on at once (bounded waits without waiting)."""

    def __init__(self) -> None:
        self.t = 1000.0
        self.slept: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.t += seconds


def guest_exec(argv: list[str], data: bytes) -> dict:
    """The guest's programs (NullBackend exec_handler), behind PveAgentTransport's ``setsid -w``."""
    if argv[:2] == ["setsid", "-w"]:
        argv = argv[2:]
    if argv == ["cat", "/sys/block/sdb/serial", "/etc/issue.net"]:
        # UTF-8 output: PVE hands it over as code points 0..255 (one per byte)
        return {"exitcode": 0, "out": f"{SERIAL}\nDebian GNU/Linux 12 (café)\n".encode()}
    return {"exitcode": 127, "err": f"{argv[0]}: not found\n"}


def new_fake(version: str, **kw) -> FakePve:
    kw.setdefault("backend", NullBackend(exec_handler=guest_exec, exec_polls=0, files={GUEST_FILE: GUEST_BYTES}))
    kw.setdefault("task_polls", 1)  # each task answers "running" once, then "stopped"
    kw.setdefault("agent_pings", AGENT_PINGS)
    return FakePve(version=version, token=(TOKEN_ID, SECRET), **kw)


def scenario_text(fake: FakePve | None, *, port: int | None = None, storage: str = "local", tls: str | None = None,
                  template: int | str = 9000, hv_extra: str = "", sections: str = VM) -> str:
    tls = tls if tls is not None else f"{{ca_file: {fake.ca_file}}}"
    hv = textwrap.dedent(f"""
        driver: proxmox
        host: 127.0.0.1
        port: {port or fake.port}
        node: {fake.node if fake else "pve1"}
        template: {template}
        storage: {storage}
        token: {{id: "{TOKEN_ID}", secret_env: {ENV}}}
        tls: {tls}
        ssh: {{user: root}}
        timeout: 10s
        """).strip() + ("\n" + textwrap.dedent(hv_extra).strip() if hv_extra.strip() else "")
    return "name: contract\nhypervisor:\n" + textwrap.indent(hv + "\n", "  ") + sections + JOBS


def make_driver(tmp_path: Path, monkeypatch, text: str, host, secret: str = SECRET):
    """A ProxmoxDriver as the CLI makes it: from the parsed scenario, the secret from the environment."""
    monkeypatch.setenv(ENV, secret)
    s = parse_scenario(text, str(tmp_path / "contract.yaml"))
    clock = Clock()
    state = StatePaths(tmp_path / "state")
    drv = ProxmoxDriver(s.hypervisor, s.storage, host=host, state=state, paths=HostPaths.for_host(None, state),
                        clock=clock.now, sleep=clock.sleep)
    return drv, s, clock


def prepare(drv: ProxmoxDriver, s) -> object:
    """As the runner calls it."""
    cells = s.cells
    return drv.prepare(image=None, accel=s.hypervisor.accel, progress=RecordingProgress(), vms=[c.vm for c in cells],
                       cpu_models={c.vm.cpu.model for c in cells if c.vm.cpu.model},
                       cpu_modes={c.vm.cpu.mode for c in cells})


def request(s, seq: int = 1) -> VmRequest:
    cell = s.cells[0]
    return VmRequest(seq=seq, vm=cell.vm, scratch_size=s.storage.scratch_size, cells=(cell.name,))


# ---- the contract: the request sequence of one VM --------------------------------------------

TASK_STATUS = ("GET", "/nodes/{node}/tasks/{upid}/status")
TASK = [TASK_STATUS, TASK_STATUS]  # polled by its UPID until it stopped (task_polls=1: twice)
VM_CONFIG = "/nodes/{node}/qemu/{vmid}/config"
STATUS = ("GET", "/nodes/{node}/qemu/{vmid}/status/current")
PING = ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping")
STORAGE_STATUS = ("GET", "/nodes/{node}/storage/{storage}/status")

PREPARE_FIND = [
    ("GET", "/version"),
    ("GET", "/nodes"),  # hypervisor.node is in the cluster
    ("GET", "/cluster/resources"),  # the template by VMID (or unique name): a template, on that node
    ("GET", VM_CONFIG),  # the template's config: agent enabled, its disks
]


def rights(paths: int) -> list[tuple[str, str]]:
    """The token's effective privileges read on each path a run needs (vmbench.drivers.proxmox.rights)."""
    return [("GET", "/access/permissions")] * paths


#: /vms/9000 (the template), /storage/local (its disk's and the scratch storage), /vms (propagated: the
#: clones' VMIDs), /nodes/pve1 (Sys.Audit, optional; a standalone node: no quorum to read on /)
RIGHTS = rights(4)
PREPARE = PREPARE_FIND + RIGHTS + [
    STORAGE_STATUS,  # the template disk's storage can make linked clones
    STORAGE_STATUS,  # the scratch storage holds images, is active
    ("GET", "/nodes/{node}/capabilities/qemu/cpu"),  # the scenario's CPU models exist
]
CREATE = [
    ("GET", "/cluster/nextid"),
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"), *TASK,
    ("GET", VM_CONFIG),  # the clone as it came out (free disk slots, agent)
    ("POST", VM_CONFIG), *TASK,  # tags, description, protection, onboot, cores, memory, cpu, kvm, agent, scsihw
    ("POST", VM_CONFIG), *TASK,  # the scratch disk, allocated by PVE
    ("GET", VM_CONFIG),  # its volume id read back
    ("GET", "/nodes/{node}/storage/{storage}/content/{volume}"),  # and its path on the node
]
BOOT = [("POST", "/nodes/{node}/qemu/{vmid}/status/start"), *TASK, *[STATUS, PING] * AGENT_PINGS]
APPLIED = [("GET", VM_CONFIG), STATUS]  # the config as stored; the QEMU pid (cmdline read over SSH)
GUEST = [("POST", "/nodes/{node}/qemu/{vmid}/agent/exec"),
         ("GET", "/nodes/{node}/qemu/{vmid}/agent/exec-status"),  # read once: exited (QGA forgets the pid)
         ("GET", "/nodes/{node}/qemu/{vmid}/agent/file-read")]
DESCRIBE = [("GET", "/version"), ("GET", "/nodes/{node}/status"), STORAGE_STATUS]
REMOVE = [STATUS, ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"), *TASK,
          ("DELETE", "/nodes/{node}/qemu/{vmid}"), *TASK,
          ("GET", "/nodes/{node}/storage/{storage}/content")]  # no disk of the VMID left

#: the same on 8.4 and 9.1: nothing the driver does for one VM differs between the versions
#: (what differs is in the fake's answers and QEMU's command line, checked below)
SEQUENCE = {v: PREPARE + CREATE + BOOT + APPLIED + GUEST + DESCRIBE + REMOVE for v in VERSIONS}


def params_of(fake: FakePve, method: str, template: str) -> list[dict]:
    return [r.params for r in fake.requests if (r.method, r.template) == (method, template)]


def waited_tasks(fake: FakePve) -> list[str]:
    """The UPIDs polled, in order of their first poll."""
    out: list[str] = []
    for r in fake.requests:
        if (r.method, r.template) == TASK_STATUS:
            upid = r.path.removeprefix(f"/nodes/{fake.node}/tasks/").removesuffix("/status")
            if upid not in out:
                out.append(upid)
    return out


def assert_tasks_waited_by_upid(fake: FakePve, types: list[str]) -> None:
    """Every task the fake started was polled by its own UPID until it stopped with OK, in
    the order they were started, right after the request that started it."""
    upids = waited_tasks(fake)
    assert upids == list(fake.tasks), "a task was not waited for, or not by its UPID"
    assert [u.split(":")[5] for u in upids] == types
    assert all(fake.tasks[u].status == "stopped" and fake.tasks[u].exitstatus == "OK" for u in upids)
    for upid in upids:  # the poll follows the call that returned it, before anything else happens
        first = next(i for i, r in enumerate(fake.requests) if upid in r.path)
        assert (fake.requests[first - 1].method, fake.requests[first - 1].template) != TASK_STATUS
        assert fake.requests[first - 1].method in ("POST", "DELETE")


def assert_no_boolean_words(fake: FakePve) -> None:
    """Booleans go as 0/1 (PVE refuses "True"); nothing sent says true/false."""
    for r in fake.requests:
        for key, value in r.params.items():
            for v in value if isinstance(value, list) else [value]:
                assert str(v).lower() not in ("true", "false", "on", "off", "yes", "no"), (r.method, r.path, key, v)


def assert_secret_nowhere(fake: FakePve | None, caplog, *things: object, secret: str = SECRET) -> None:
    """The token secret is in no recorded request, log record, exception text, command line
    or stored object (``things``: objects and texts; their repr and str are searched)."""
    if fake is not None:
        sent = json.dumps([(r.method, r.path, r.params, r.reason) for r in fake.requests])
        assert secret not in sent
    assert secret not in caplog.text
    for rec in caplog.records:
        assert secret not in rec.getMessage() and secret not in repr(rec.args) and secret not in (rec.exc_text or "")
        assert "PVEAPIToken" not in rec.getMessage()
    for thing in things:
        for text in (repr(thing), str(thing), json.dumps(thing, default=repr) if isinstance(thing, (dict, list)) else ""):
            assert secret not in text


@pytest.fixture
def debug_logs(caplog):
    """Everything logged at DEBUG, urllib3 and proxmoxer included."""
    caplog.set_level(logging.DEBUG)
    for name in ("urllib3", "urllib3.connectionpool", "proxmoxer", "proxmoxer.core", "proxmoxer.backends.https",
                 "vmbench"):
        caplog.set_level(logging.DEBUG, logger=name)
    return caplog


@pytest.mark.parametrize("version", VERSIONS)
def test_one_vm_from_clone_to_destroy(version, tmp_path, monkeypatch, debug_logs):
    kvm = version == "9.1"  # one version with /dev/kvm on the node, one without (TCG, config kvm: 0)
    started = time.monotonic()
    with new_fake(version) as fake:
        template = fake.add_template()
        node = FakePveNode(fake, kvm=kvm)
        drv, s, clock = make_driver(tmp_path, monkeypatch, scenario_text(fake), node)

        accel = prepare(drv, s)
        assert (accel.name, accel.reason) == (("kvm", "node pve1 has /dev/kvm") if kvm else
                                              ("tcg", "node pve1 has no /dev/kvm (config kvm: 0)"))
        assert drv.template_vmid == 9000 and not [r for r in fake.requests if r.method != "GET"]

        req = request(s)
        res = drv.new_resources(TAG, req)
        assert (res.name, res.scratch_serial) == (f"vmbench-{TAG}-1", SERIAL)
        drv.create_vm(TAG, req, res)
        vmid = res.storage["pve"]["vmid"]
        assert vmid == 100 and fake.vms[vmid].config["name"] == res.name
        # a directory storage's volume id has a '/': GET .../content/{volume} routes as on PVE
        assert res.volumes == ["local:100/vm-100-disk-1.raw"]
        assert res.scratch_path == res.host_target == fake.volume_path("local:100/vm-100-disk-1.raw")
        assert res.scratch_kind == "file"
        assert "tags: vmbench;vmbench-r0a1b2c3d\n" in res.native_config

        guest = drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        applied = guest.applied()
        assert (applied.config_bus, applied.config_cache, applied.config_aio, applied.config_format) == \
            ("virtio-scsi", "none", "native", "raw")
        assert (applied.qemu_cache, applied.qemu_aio, applied.qemu_format, applied.qemu_iothread) == \
            ("none", "native", "raw", True)
        assert applied.accelerator == ("kvm" if kvm else "tcg") and applied.controller == "virtio-scsi-single"
        # detect_zeroes off as asked (detect_zeroes=0), discard left to PVE (ignore): config and QEMU agree
        readings = effective_settings(applied, {})
        assert (readings["config_detect_zeroes"], readings["qemu_detect_zeroes"]) == ("off", "off")
        assert (readings["config_discard"], readings["qemu_discard"]) == ("ignore", "ignore")
        assert applied.volume == res.scratch_path and applied.details["qemu_disk"]["file"] == res.scratch_path
        assert ("-blockdev" in applied.qemu_cmdline) == (version == "9.1")  # PVE 9 -blockdev, PVE 8 -drive
        assert ("-drive" in applied.qemu_cmdline) == (version == "8.4")
        assert applied.details["qmp"]["kvm"] == {"enabled": kvm, "present": kvm}

        done = guest.transport.run(["cat", "/sys/block/sdb/serial", "/etc/issue.net"])
        assert done.stdout == f"{SERIAL}\nDebian GNU/Linux 12 (café)\n"  # bytes as code points 0..255, back to UTF-8
        assert fake.backend.executed == [(vmid, ["setsid", "-w", "cat", "/sys/block/sdb/serial", "/etc/issue.net"], b"")]
        assert guest.transport.read_file(GUEST_FILE) == GUEST_BYTES  # file-read: raw bytes, exactly
        host = drv.describe_host()
        assert (host["hostname"], host["pve_version"], host["pve_token_id"]) == \
            ("pve1", {"8.4": "8.4.1", "9.1": "9.1.2"}[version], TOKEN_ID)
        assert host["pveversion"].startswith(f"proxmox-ve: {version}.0") and host["qemu_version"]

        drv.remove_vm(res)
        drv.close()

        # -- the contract ------------------------------------------------------------------
        assert fake.problems == []
        fake.assert_clean()
        assert fake.calls() == SEQUENCE[version]
        pings = [r for r in fake.requests if (r.method, r.template) == PING]
        assert [r.status for r in pings] == [500] * (AGENT_PINGS - 1) + [200]  # "QEMU guest agent is not running"
        assert all(r.status == 200 for r in fake.requests if (r.method, r.template) != PING)
        assert_tasks_waited_by_upid(fake, ["qmclone", "qmconfig", "qmconfig", "qmstart", "qmstop", "qmdestroy"])
        assert_no_boolean_words(fake)

        (clone,) = params_of(fake, "POST", "/nodes/{node}/qemu/{vmid}/clone")
        assert {k: clone[k] for k in ("newid", "name", "full")} == {"newid": "100", "name": f"vmbench-{TAG}-1", "full": "0"}
        assert "storage" not in clone and "format" not in clone  # not allowed for linked clones
        options, disk = params_of(fake, "POST", VM_CONFIG)
        # tags after the clone, which copied the template's ("debian12;template")
        assert template.config["tags"] == "debian12;template" and options["tags"] == f"vmbench;vmbench-{TAG}"
        assert {k: v for k, v in options.items() if k != "description"} == {
            "tags": f"vmbench;vmbench-{TAG}", "protection": "0", "onboot": "0", "cores": "2", "sockets": "1",
            "memory": "1024", "cpu": "x86-64-v2-AES", "kvm": "1" if kvm else "0", "agent": "1",
            "scsihw": "virtio-scsi-single"}
        assert f"vmbench run {TAG}, VM 1 (cells: baseline)" in options["description"]
        assert f"vmbench-run: {TAG}" in options["description"]
        assert disk == {"scsi1": f"local:1,cache=none,aio=native,iothread=1,serial={SERIAL},detect_zeroes=0,format=raw"}
        assert params_of(fake, "DELETE", "/nodes/{node}/qemu/{vmid}") == [{"purge": "1", "destroy-unreferenced-disks": "1"}]
        assert params_of(fake, "GET", "/nodes/{node}/storage/{storage}/content") == [{"vmid": "100"}]
        assert params_of(fake, "POST", "/nodes/{node}/qemu/{vmid}/agent/exec") == [
            {"command": ["setsid", "-w", "cat", "/sys/block/sdb/serial", "/etc/issue.net"]}]

        # -- nothing of the run is left ----------------------------------------------------------
        assert list(fake.vms) == [9000]
        assert [v.name for v in fake.state.volumes.values()] == ["base-9000-disk-0.qcow2"]
        assert list(fake.storages) == ["local"] and drv.vms == {}
        assert not Path(res.scratch_path).exists()

        # -- the SSH side ----------------------------------------------------------------------
        assert node.commands == [["hostname"], ["test", "-e", "/dev/kvm"],
                                 ["perl", "-MJSON", "-MPVE::QemuServer::Monitor=mon_cmd", "-e", node.commands[2][4], "100"],
                                 ["hostname"], ["pveversion", "-v"]]

        # -- the secret: nowhere ---------------------------------------------------------------
        assert_secret_nowhere(fake, debug_logs, drv, vars(drv), drv.api(), guest, guest.transport, res, vars(res),
                              applied, host, s, s.hypervisor, node.commands, drv.progress)
        assert any("PVE POST /nodes/pve1/qemu/9000/clone" in r.getMessage() for r in debug_logs.records)  # it did log
    assert clock.t - 1000.0 < 60 and time.monotonic() - started < 15


def test_a_volume_id_with_a_slash_routes_like_pve_escaped_or_not():
    """What the driver's GET .../content/{volume} relies on: PVE mounts storage content with
    fragmentDelimiter '' (volume ids may contain '/'), so the rest of the path is the volume,
    sent raw (proxmoxer) or %2F-escaped (the path is unescaped before it is split)."""
    from urllib.parse import quote

    from tests.fakepve.client import call, ok, wait

    for version in VERSIONS:
        with new_fake(version) as fake:
            fake.add_template()
            wait(fake, ok(call(fake, "POST", "/nodes/pve1/qemu/9000/clone", {"newid": 100, "full": 0})))
            volid = "local:9000/base-9000-disk-0.qcow2/100/vm-100-disk-0.qcow2"  # a linked clone's, parent included
            for path in (volid, quote(volid, safe=""), "100/vm-100-disk-0.qcow2"):
                info = ok(call(fake, "GET", f"/nodes/pve1/storage/local/content/{path}"))
                assert info["path"] == fake.volume_path(volid) and info["format"] == "qcow2"
            assert {r.template for r in fake.requests[-3:]} == {"/nodes/{node}/storage/{storage}/content/{volume}"}
            r = call(fake, "GET", "/nodes/pve1/storage/local/content/local:100/vm-100-disk-9.raw")
            assert (r.status, r.reason) == (500, "volume 'local:100/vm-100-disk-9.raw' does not exist")
            r = call(fake, "GET", "/nodes/pve1/storage/other/content/local:100/vm-100-disk-0.qcow2")
            assert r.errors == {"volume": "storage ID mismatch (local != other)\n"}
            assert fake.problems == []


# ---- volblocksize: a temporary zfspool storage entry ------------------------------------------


class ZfsPveNode(FakePveNode, FakeZfsHost):
    """A PVE node on OpenZFS: the zvols are the fake PVE's zfspool volumes (created by PVE
    with the storage entry's ``blocksize`` as volblocksize), ``zfs set`` changes them."""

    def __init__(self, pve: FakePve, **kw) -> None:
        super().__init__(pve, pool="rpool", **kw)
        self.add("rpool/data")

    def _sync_zvols(self) -> None:
        with self.pve.dispatcher.lock:
            zvols = {}
            for vol in self.pve.state.volumes.values():
                st = next((st for st in self.pve.storages.values() if st.type == "zfspool" and vol.path.parent == st.files), None)
                if st is not None:
                    block = str(st.config.get("blocksize") or "16k")
                    size = int(block[:-1]) * {"k": 1024, "m": 1 << 20}[block[-1].lower()] if block[-1].isalpha() else int(block)
                    sparse = str(st.config.get("sparse", 0)) == "1"
                    zvols[f"{st.config['pool']}/{vol.name}"] = {"volblocksize": str(size),
                                                                 "refreservation": "none" if sparse else str(vol.size)}
        for name in [n for n, d in self.datasets.items() if d["type"] == "volume" and n not in zvols]:
            del self.datasets[name]
            self.files.pop(f"/dev/zvol/{name}", None)
        for name, props in zvols.items():
            if name not in self.datasets:
                self.add(name, "volume", **props)

    def _cmd_zfs(self, argv, stdin):
        self._sync_zvols()
        if argv[1] == "set":
            name = argv[-1]
            if name not in self.datasets:
                return 1, "", f"cannot open '{name}': dataset does not exist"
            for item in argv[2:-1]:
                key, _, value = item.partition("=")
                self.datasets[name]["props"][key] = value
            return ""
        if argv[1] == "list" and "volume" in argv:  # zfs list -H -p -r -t volume -o name,vmbench:run DATASET
            cols = argv[argv.index("-o") + 1].split(",")
            parent = argv[-1]
            return "".join("\t".join(self._value(n, c) for c in cols) + "\n" for n, d in sorted(self.datasets.items())
                           if d["type"] == "volume" and n.startswith(parent + "/"))
        return super()._cmd_zfs(argv, stdin)


ZFS_SECTIONS = """
storage:
  type: zfs
  dataset: rpool/data
  volblocksize: 16k
  sparse: false
  properties: {compression: lz4}
vm:
  bus: virtio-blk
  cache: none
  aio: native
  cpu: kvm64
"""
CREATE_ZFS = [
    ("GET", "/cluster/nextid"),
    ("POST", "/nodes/{node}/qemu/{vmid}/clone"), *TASK,
    ("GET", VM_CONFIG),
    ("POST", VM_CONFIG), *TASK,
    ("POST", "/storage"),  # vmbench-<tag>-16k: pool, blocksize, nodes, content images
    ("POST", VM_CONFIG), *TASK,  # the scratch disk on that entry: a zvol with volblocksize 16k
    ("GET", VM_CONFIG),
    ("GET", "/nodes/{node}/storage/{storage}/content/{volume}"),
]
REMOVE_ZFS = [STATUS, ("POST", "/nodes/{node}/qemu/{vmid}/status/stop"), *TASK,
              ("DELETE", "/nodes/{node}/qemu/{vmid}"), *TASK,
              ("GET", "/nodes/{node}/storage/{storage}/content"),  # nothing of VMID 100 on the entry
              ("DELETE", "/storage/{storage}")]  # only now: destroy needs the entry
#: the scratch storage local-zfs, and the temporary zfspool entries (Datastore.Allocate, AllocateSpace and
#: Audit propagated on /storage): two paths more
SEQUENCE_ZFS = {v: PREPARE_FIND + rights(6) + PREPARE[len(PREPARE_FIND) + len(RIGHTS):] + CREATE_ZFS + BOOT + REMOVE_ZFS
                for v in VERSIONS}


@pytest.mark.parametrize("version", VERSIONS)
def test_volblocksize_through_a_temporary_zfspool_entry_removed_after_the_destroy(version, tmp_path, monkeypatch, debug_logs):
    with new_fake(version) as fake:
        fake.add_storage("local-zfs", "zfspool", pool="rpool/data", sparse=1, content="images,rootdir")
        fake.add_template()
        node = ZfsPveNode(fake, kvm=True)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage="local-zfs", sections=ZFS_SECTIONS), node)
        assert s.cells[0].vm.zfs.volblocksize == 16 << 10 and s.cells[0].vm.bus is Bus.VIRTIO_BLK
        prepare(drv, s)
        req = request(s)
        res = drv.new_resources(TAG, req)
        drv.create_vm(TAG, req, res)
        entry = f"vmbench-{TAG}-16k"
        assert fake.storages[entry].type == "zfspool"
        assert {k: v for k, v in fake.storages[entry].config.items() if k != "type"} == {
            "pool": "rpool/data", "blocksize": "16k", "sparse": 0, "content": "images", "nodes": "pve1"}
        assert res.volumes == [f"{entry}:vm-100-disk-0"]
        assert res.scratch_path == fake.volume_path(f"{entry}:vm-100-disk-0")
        zvol = "rpool/data/vm-100-disk-0"  # names are per storage: the root disk is on local
        readback = res.storage["volumes"][f"{entry}:vm-100-disk-0"]
        assert readback["zfs_name"] == zvol
        assert (readback["readback"]["volblocksize"], readback["readback"]["compression"],
                readback["readback"]["vmbench:run"]) == ("16384", "lz4", TAG)
        assert res.storage_problems == []
        assert res.storage["pve"]["storage"] == entry and res.storage["pve"]["storage_type"] == "zfspool"

        drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        drv.remove_vm(res)
        drv.close()

        assert fake.problems == []
        assert fake.calls() == SEQUENCE_ZFS[version]
        assert_tasks_waited_by_upid(fake, ["qmclone", "qmconfig", "qmconfig", "qmstart", "qmstop", "qmdestroy"])
        assert_no_boolean_words(fake)
        assert params_of(fake, "POST", "/storage") == [{"storage": entry, "type": "zfspool", "pool": "rpool/data",
                                                        "blocksize": "16k", "sparse": "0", "content": "images",
                                                        "nodes": "pve1"}]
        assert params_of(fake, "POST", VM_CONFIG)[1] == {
            "virtio1": f"{entry}:1,cache=none,aio=native,serial={SERIAL}"}  # no format= on a zfspool; PVE's detect_zeroes
        # the entry goes only after the VM's destroy task ended (destroy needs it to find the zvol)
        paths = [(r.method, r.path) for r in fake.requests]
        destroy = paths.index(("DELETE", "/nodes/pve1/qemu/100"))
        destroy_done = max(i for i, r in enumerate(fake.requests) if ":qmdestroy:100:" in r.path)
        assert paths.index(("DELETE", f"/storage/{entry}")) > destroy_done > destroy
        assert params_of(fake, "GET", "/nodes/{node}/storage/{storage}/content") == [{"vmid": "100"}]
        assert fake.requests[-2].path == f"/nodes/pve1/storage/{entry}/content"

        # zfs set and get over SSH, on the zvol PVE made
        assert node.ran("zfs", "set") == [["zfs", "set", "compression=lz4", f"vmbench:run={TAG}", zvol]]
        (get,) = [c for c in node.ran("zfs", "get") if c[-1] == zvol]
        assert get[:5] == ["zfs", "get", "-Hp", "-o", "property,value,source"] and "volblocksize" in get[5].split(",")
        assert node.commands.index(node.ran("zfs", "set")[0]) < node.commands.index(get)

        # nothing left: VM, volumes, the entry, the zvol
        assert list(fake.vms) == [9000] and set(fake.storages) == {"local", "local-zfs"}
        assert [v.name for v in fake.state.volumes.values()] == ["base-9000-disk-0.qcow2"]
        assert drv.leftovers() == []
        assert zvol not in node.datasets
        assert_secret_nowhere(fake, debug_logs, drv, vars(drv), res, node.commands)


# ---- I/O limits: sent as disk options, in effect in QEMU's command line on 8.4 and 9.1 -------

LIMITS_VM = VM + "  iops_rd: 500\n  iops_wr: 300\n  mbps: 12.5\n  iops_rd_max: 1000\n  mbps_max: 20\n  burst_length: 5\n"


@pytest.mark.parametrize("version", VERSIONS)
def test_io_limits_are_sent_stored_and_in_effect(version, tmp_path, monkeypatch):
    from vmbench.run.evidence import problems

    with new_fake(version) as fake:
        fake.add_template()
        node = FakePveNode(fake, kvm=True)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, sections=LIMITS_VM), node)
        prepare(drv, s)
        req = request(s)
        res = drv.new_resources(TAG, req)
        drv.create_vm(TAG, req, res)
        guest = drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        applied = guest.applied()
        _, disk = params_of(fake, "POST", VM_CONFIG)
        assert disk == {"scsi1": f"local:1,cache=none,aio=native,iothread=1,serial={SERIAL},detect_zeroes=0,iops_rd=500,"
                                 "iops_wr=300,mbps=12.5,iops_rd_max=1000,mbps_max=20,iops_rd_max_length=5,bps_max_length=5,"
                                 "format=raw"}
        eff = effective_settings(applied, {})
        want = {"iops": "none", "iops_rd": 500, "iops_wr": 300, "mbps": 12.5, "mbps_rd": "none", "mbps_wr": "none",
                "iops_max": "none", "iops_rd_max": 1000, "iops_wr_max": "none", "mbps_max": 20, "mbps_rd_max": "none",
                "mbps_wr_max": "none", "burst_length": 5}
        assert {k: eff[f"config_{k}"] for k in want} == want and {k: eff[f"qemu_{k}"] for k in want} == want
        cmdline = " ".join(applied.qemu_cmdline)
        if version == "8.4":  # on the -drive
            assert ",throttling.bps-total=13107200,throttling.bps-total-max=20971520," in cmdline
        else:  # in the throttle group the disk's throttle -blockdev names
            assert '"id":"throttle-drive-scsi1","limits":{"bps-total":13107200,' in cmdline
        assert not [p for p in problems(s.cells[0].vm, eff, "kvm") if "throttling" in p or "config" in p]
        drv.remove_vm(res)
        drv.close()
        assert fake.problems == []
