"""The Proxmox driver's lifecycle against MiniPve (through the real PveApi and proxmoxer):
the request sequence from clone to destroy, volblocksize through temporary zfspool storages,
qcow2 with a raw host reference, every preflight refusal, VMID races, locks, leftovers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.unit.test_proxmox_minipve import TOKEN, MiniPve, PveFault
from vmbench.command import Completed
from vmbench.drivers.base import Leftover, VmRequest
from vmbench.drivers.proxmox.api import PveApi, Secret
from vmbench.drivers.proxmox.driver import ProxmoxDriver
from vmbench.errors import GuestError, HypervisorError, PreflightError
from vmbench.paths import HostPaths, StatePaths
from vmbench.progress import RecordingProgress
from vmbench.scenario.backend import Storage, StorageType
from vmbench.scenario.model import CpuConfig, Hypervisor, ProxmoxConfig, SshConfig, VmConfig, ZfsSettings
from vmbench.settings import Accel, Aio, Bus, CpuMode, DriverName, ImageFormat

TAG = "r0a1b2c3d"


class Node:
    """The PVE node over SSH: hostname, /dev/kvm, zfs, pveversion, /proc/<pid>/cmdline."""

    def __init__(self, pve: MiniPve, hostname: str = "pve1", kvm: bool = True) -> None:
        self.name = "host root@pve.test"
        self.pve = pve
        self.hostname = hostname
        self.kvm = kvm
        self.commands: list[list[str]] = []
        self.zfs: dict[str, dict[str, str]] = {}

    def run(self, argv, *, input=None, timeout=None, env=None, check=True, on_wait=None):
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        out, code = "", 0
        if argv[0] == "hostname":
            out = self.hostname + "\n"
        elif argv[:2] == ["test", "-e"]:
            code = 0 if (argv[2] != "/dev/kvm" or self.kvm) else 1
        elif argv[0] == "perl":
            return Completed(tuple(argv), 2, "", "Can't locate PVE/QemuServer/Monitor.pm in @INC")
        elif argv[0] == "pveversion":
            out = "proxmox-ve: 8.4.0 (running kernel: 6.8.12-4-pve)\npve-qemu-kvm: 9.0.2-4\n"
        elif argv[:2] == ["zfs", "set"]:
            props = self.zfs.setdefault(argv[-1], {"volblocksize": "16384"})
            props.update(a.split("=", 1) for a in argv[2:-1])
        elif argv[:2] == ["zfs", "get"]:
            if argv[-1] not in self.zfs:
                return Completed(tuple(argv), 1, "", f"cannot open '{argv[-1]}': dataset does not exist")
            props = self.zfs[argv[-1]]
            values_only = argv[argv.index("-o") + 1] == "value"
            out = "".join(f"{props.get(p, '-')}\n" if values_only else f"{p}\t{props.get(p, '-')}\tlocal\n"
                          for p in argv[-2].split(","))
        elif argv[:2] == ["zfs", "list"] and "volume" in argv:
            out = "".join(f"{n}\t{p.get('vmbench:run', '-')}\n" for n, p in self.zfs.items() if n.count("/") > 1)
        elif argv[:2] == ["zfs", "list"]:
            out = f"{argv[-1]}\tfilesystem\tyes\n"
        elif argv[:2] == ["zfs", "version"]:
            out = "zfs-2.2.7-pve1\nzfs-kmod-2.2.7-pve1\n"
        elif argv[0] == "ls":
            code = 2
        return Completed(tuple(argv), code, out, "")

    def read_file(self, path: str) -> bytes:
        m = re.fullmatch(r"/proc/(\d+)/cmdline", path)
        vmid = int(m.group(1)) - 4000
        config = self.pve.vms[vmid]["config"]
        key = next(k for k in config if re.fullmatch(r"(virtio|scsi|sata)[1-9]", k))
        volid = config[key].split(",")[0]
        serial = re.search(r"serial=([^,]+)", config[key]).group(1)
        cache = re.search(r"cache=([^,]+)", config[key]).group(1)
        aio = re.search(r"aio=([^,]+)", config[key]).group(1)
        argv = ["/usr/bin/kvm", "-id", str(vmid), "-drive", f"file={self.pve.path(volid)},if=none,id=drive-{key},cache={cache},"
                f"aio={aio},format=raw", "-device", f"virtio-blk-pci,drive=drive-{key},id={key},serial={serial}"]
        if config.get("kvm") == "0":
            argv += ["-machine", "type=pc+pve0,accel=tcg"]
        return b"\0".join(a.encode() for a in argv) + b"\0"

    def read_text(self, path):  # pragma: no cover - not used
        raise OSError(path)

    def describe(self):
        return {"ssh_host": "pve.test", "ssh_host_key": "SHA256:abc"}

    def close(self) -> None:
        pass


def make(tmp_path: Path, pve: MiniPve | None = None, storage: Storage | None = None, node: Node | None = None,
         cfg: dict | None = None) -> tuple[ProxmoxDriver, MiniPve, Node]:
    pve = pve or MiniPve()
    base = dict(host="pve.test", node="pve1", template=9000, storage="local-zfs", token_id=TOKEN[0], secret_env="VMB_T")
    pcfg = ProxmoxConfig(**{**base, **(cfg or {})})
    hv = Hypervisor(driver=DriverName.PROXMOX, uri=f"{pcfg.url}/api2/json/nodes/pve1", ssh=SshConfig(host="pve.test"), proxmox=pcfg)
    clock = [0.0]
    sleep = lambda s: clock.__setitem__(0, clock[0] + s)  # noqa: E731
    api = PveApi(pcfg, Secret(TOKEN[1]), clock=lambda: clock[0], sleep=sleep)
    api.session.mount("https://", pve)
    node = node or Node(pve)
    state = StatePaths(tmp_path)
    drv = ProxmoxDriver(hv, storage or Storage(), host=node, state=state, paths=HostPaths.for_host(None, state), api=api,
                        clock=lambda: clock[0], sleep=sleep)
    return drv, pve, node


def prepare(drv: ProxmoxDriver, accel: Accel = Accel.AUTO, vms=(), models=("kvm64",)) -> RecordingProgress:
    progress = RecordingProgress()
    drv.prepare(accel=accel, cpu_models=set(models), cpu_modes={CpuMode.MODEL}, progress=progress, vms=vms)
    return progress


def request(vm: VmConfig | None = None, seq: int = 1, size: int = 1 << 30) -> VmRequest:
    return VmRequest(seq=seq, vm=vm or VmConfig(), scratch_size=size, cells=("baseline",))


def calls(pve: MiniPve, since: int = 0) -> list[str]:
    """The request sequence without task polls."""
    return [f"{m} {p}" for m, p, _ in pve.requests[since:] if "/tasks/" not in p]


def params(pve: MiniPve, method: str, path: str) -> list[dict]:
    return [p for m, pa, p in pve.requests if m == method and pa == path]


def test_one_vm_from_clone_to_destroy(tmp_path):
    pve = MiniPve(programs={"setsid": lambda argv, stdin: (0, b"ok\n", b"")})
    drv, pve, node = make(tmp_path, pve)
    accel = drv.prepare(accel=Accel.AUTO, cpu_models={"kvm64"}, cpu_modes={CpuMode.MODEL}, progress=RecordingProgress())
    assert (accel.name, accel.reason) == ("kvm", "node pve1 has /dev/kvm")
    assert calls(pve) == ["GET /version", "GET /nodes", "GET /cluster/resources", "GET /nodes/pve1/qemu/9000/config",
                          *["GET /access/permissions"] * 4,  # the token's rights, each path a run needs
                          "GET /nodes/pve1/storage/local-zfs/status", "GET /nodes/pve1/storage/local-zfs/status",
                          "GET /nodes/pve1/capabilities/qemu/cpu"]
    start = len(pve.requests)
    vm = VmConfig(bus=Bus.VIRTIO_SCSI, iothread=True, aio=Aio.NATIVE, vcpus=2, memory_mib=1024)
    req = request(vm)
    res = drv.new_resources(TAG, req)
    assert (res.name, res.scratch_serial) == (f"vmbench-{TAG}-1", "VMB0a1b2c3dS001")
    drv.create_vm(TAG, req, res)
    assert calls(pve, start) == [
        "GET /cluster/nextid", "POST /nodes/pve1/qemu/9000/clone", "GET /nodes/pve1/qemu/100/config",
        "POST /nodes/pve1/qemu/100/config", "POST /nodes/pve1/qemu/100/config", "GET /nodes/pve1/qemu/100/config",
        "GET /nodes/pve1/storage/local-zfs/content/local-zfs:vm-100-disk-1"]
    clone = params(pve, "POST", "/nodes/pve1/qemu/9000/clone")[0]
    assert (clone["newid"], clone["name"], clone["full"]) == ("100", f"vmbench-{TAG}-1", "0") and "storage" not in clone
    options, disk = params(pve, "POST", "/nodes/pve1/qemu/100/config")
    assert options["tags"] == f"vmbench;vmbench-{TAG}"  # set after cloning: the clone copied the template's "golden"
    assert {k: options[k] for k in ("cores", "sockets", "memory", "cpu", "kvm", "agent", "scsihw", "protection", "onboot")} == {
        "cores": "2", "sockets": "1", "memory": "1024", "cpu": "kvm64", "kvm": "1", "agent": "1",
        "scsihw": "virtio-scsi-single", "protection": "0", "onboot": "0"}
    assert f"vmbench run {TAG}, VM 1 (cells: baseline)" in options["description"]
    assert disk == {"scsi1": "local-zfs:1,cache=none,aio=native,iothread=1,serial=VMB0a1b2c3dS001"}  # detect_zeroes: PVE's default (not set)
    assert res.volumes == ["local-zfs:vm-100-disk-1"]
    assert res.scratch_path == res.host_target == "/dev/zvol/rpool/data/vm-100-disk-1" and res.scratch_kind == "block"
    assert res.storage["pve"]["vmid"] == 100 and "tags: vmbench;vmbench-r0a1b2c3d" in res.native_config
    assert [l.kind for l in drv.leftovers()] == ["vm"]

    start = len(pve.requests)
    guest = drv.boot(TAG, req, res, RecordingProgress())
    assert calls(pve, start) == ["POST /nodes/pve1/qemu/100/status/start"] + [
        "GET /nodes/pve1/qemu/100/status/current", "POST /nodes/pve1/qemu/100/agent/ping"] * 3  # answers at the third
    assert guest.transport.run(["true"]).stdout == "ok\n"
    applied = guest.applied()
    assert (applied.config_bus, applied.config_cache, applied.config_aio, applied.config_format) == ("virtio-scsi", "none", "native", "raw")
    assert (applied.qemu_cache, applied.qemu_aio, applied.qemu_format, applied.accelerator) == ("none", "native", "raw", "kvm")
    assert applied.volume == res.scratch_path and applied.qemu_cmdline[0] == "/usr/bin/kvm"
    assert "Can't locate" in applied.details["qmp_error"]

    start = len(pve.requests)
    drv.remove_vm(res)
    assert calls(pve, start) == ["GET /nodes/pve1/qemu/100/status/current", "POST /nodes/pve1/qemu/100/status/stop",
                                 "DELETE /nodes/pve1/qemu/100", "GET /nodes/pve1/storage/local-zfs/content"]
    assert params(pve, "DELETE", "/nodes/pve1/qemu/100") == [{"purge": "1", "destroy-unreferenced-disks": "1"}]
    assert 100 not in pve.vms and not [v for v in pve.volumes if "vm-100" in v]
    drv.remove_vm(res)  # twice is fine
    assert drv.leftovers() == []


def test_volblocksize_through_a_temporary_zfspool_storage(tmp_path):
    storage = Storage(type=StorageType.ZFS, dataset="rpool/data", sparse=False)
    drv, pve, node = make(tmp_path, storage=storage)
    node.zfs["rpool/data"] = {}
    prepare(drv)
    zfs = ZfsSettings(volblocksize=64 << 10, properties=(("compression", "lz4"), ("sync", "always")))
    node.zfs["rpool/data/vm-100-disk-1"] = {"volblocksize": str(64 << 10)}  # as PVE creates it with blocksize=64k
    req = request(VmConfig(zfs=zfs))
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    assert params(pve, "POST", "/storage") == [{"storage": f"vmbench-{TAG}-64k", "type": "zfspool", "pool": "rpool/data",
                                                "blocksize": "64k", "sparse": "0", "content": "images", "nodes": "pve1"}]
    disk = params(pve, "POST", "/nodes/pve1/qemu/100/config")[1]
    assert disk == {"virtio1": f"vmbench-{TAG}-64k:1,cache=none,aio=threads,serial=VMB0a1b2c3dS001"}
    assert ["zfs", "set", "compression=lz4", "sync=always", f"vmbench:run={TAG}", "rpool/data/vm-100-disk-1"] in node.commands
    assert res.storage["volumes"][f"vmbench-{TAG}-64k:vm-100-disk-1"]["readback"]["volblocksize"] == str(64 << 10)
    assert res.storage_problems == [] and res.host_target == "/dev/zvol/rpool/data/vm-100-disk-1"
    # a second VM with the same volblocksize shares the entry; it goes only after both are destroyed
    req2 = request(VmConfig(zfs=zfs), seq=2)
    res2 = drv.new_resources(TAG, req2)
    node.zfs["rpool/data/vm-101-disk-1"] = {"volblocksize": str(64 << 10)}
    drv.create_vm(TAG, req2, res2)
    assert len(params(pve, "POST", "/storage")) == 1
    kinds = sorted(l.kind for l in drv.leftovers())
    assert kinds == ["storage", "vm", "vm"]
    drv.remove_vm(res)
    assert f"vmbench-{TAG}-64k" in pve.storages
    start = len(pve.requests)
    drv.remove_vm(res2)
    seq = calls(pve, start)
    assert seq.index("DELETE /nodes/pve1/qemu/101") < seq.index(f"DELETE /storage/vmbench-{TAG}-64k")
    assert f"vmbench-{TAG}-64k" not in pve.storages


def test_a_zfs_property_that_does_not_read_back_makes_the_storage_invalid(tmp_path):
    drv, pve, node = make(tmp_path, storage=Storage(type=StorageType.ZFS, dataset="rpool/data"))
    prepare(drv)
    node.zfs["rpool/data/vm-100-disk-1"] = {"volblocksize": str(8 << 10)}  # an older PVE ignoring blocksize
    req = request(VmConfig(zfs=ZfsSettings(volblocksize=16 << 10)))
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    assert res.storage_problems == ["ZFS volblocksize reads back as 8192, not 16k as asked"]


def test_qcow2_on_a_dir_storage_with_a_raw_host_reference(tmp_path):
    drv, pve, node = make(tmp_path, cfg={"storage": "local"})
    prepare(drv, vms=[VmConfig(format=ImageFormat.QCOW2)])
    req = request(VmConfig(format=ImageFormat.QCOW2), size=512 << 20)
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    assert params(pve, "POST", "/nodes/pve1/qemu/100/config")[1] == {
        "virtio1": "local:0.5,cache=none,aio=threads,serial=VMB0a1b2c3dS001,format=qcow2"}
    assert res.scratch_path == "/var/lib/vz/images/100/vm-100-disk-0.qcow2" and res.host_target is None
    assert res.scratch_kind == "file"
    path = drv.create_host_reference(TAG, req, res)
    assert params(pve, "POST", "/nodes/pve1/storage/local/content") == [
        {"vmid": "100", "filename": "vm-100-vmbench-hostref.raw", "size": str(512 << 10), "format": "raw"}]
    assert path == res.host_target == "/var/lib/vz/images/100/vm-100-vmbench-hostref.raw"
    assert res.volumes == ["local:100/vm-100-disk-0.qcow2", "local:100/vm-100-vmbench-hostref.raw"]
    drv.remove_vm(res)
    assert not [v for v in pve.volumes if v.startswith("local:")]


def test_tcg_sets_kvm_0(tmp_path):
    drv, pve, node = make(tmp_path, node=None)
    node.kvm = False
    assert drv.prepare(accel=Accel.AUTO, cpu_models=set(), cpu_modes=set(), progress=RecordingProgress()).name == "tcg"
    req = request()
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    assert params(pve, "POST", "/nodes/pve1/qemu/100/config")[0]["kvm"] == "0"
    guest = drv.boot(TAG, req, res)
    assert guest.applied().accelerator == "tcg"
    with pytest.raises(PreflightError, match="accel: kvm, but node pve1 has no /dev/kvm"):
        prepare(make(tmp_path, node=Node(MiniPve(), kvm=False))[0], accel=Accel.KVM)


@pytest.mark.parametrize("change, message", [
    (lambda pve: pve.vms[9000].update(template=0), "VM 9000 (debian12) is not a template"),
    (lambda pve: pve.vms[9000]["config"].pop("agent"), "template 9000 (debian12) has no guest agent enabled"),
    (lambda pve: pve.vms[9000]["config"].update(agent="enabled=0"), "has no guest agent enabled (agent: enabled=0)"),
    (lambda pve: pve.vms.pop(9000), "no VM 9000 on the cluster"),
    (lambda pve: pve.vms[9000].update(node="pve2"), "template 9000 (debian12) is on node pve2, not pve1"),
    (lambda pve: pve.storages["local-zfs"].update(type="lvm"), "cannot make linked clones"),
])
def test_template_refusals(tmp_path, change, message):
    drv, pve, node = make(tmp_path)
    change(pve)
    with pytest.raises(PreflightError, match=re.escape(message)):
        prepare(drv)


def test_other_preflight_refusals(tmp_path):
    with pytest.raises(PreflightError, match=re.escape("Proxmox storage isos (dir) cannot hold VM disk images (content: iso)")):
        prepare(make(tmp_path, cfg={"storage": "isos"})[0])
    with pytest.raises(PreflightError, match="Proxmox storage nope does not exist on node pve1"):
        prepare(make(tmp_path, cfg={"storage": "nope"})[0])
    with pytest.raises(PreflightError, match=re.escape("node pve9 (hypervisor.node) is not in the cluster")):
        prepare(make(tmp_path, cfg={"node": "pve9"})[0])
    pve = MiniPve()
    with pytest.raises(PreflightError, match="is the host otherbox.example.org, not node pve1"):
        prepare(make(tmp_path, pve, node=Node(pve, hostname="otherbox.example.org"))[0])
    with pytest.raises(PreflightError, match="does not know the CPU model.s. Haswell-noTSX"):
        prepare(make(tmp_path)[0], models=("Haswell-noTSX",))
    with pytest.raises(PreflightError, match="zfs-dataset is not supported with driver proxmox"):
        prepare(make(tmp_path, storage=Storage(type=StorageType.ZFS_DATASET, dataset="rpool/data"))[0])
    with pytest.raises(PreflightError, match="qcow2 is not possible on a zfspool"):
        prepare(make(tmp_path)[0], vms=[VmConfig(format=ImageFormat.QCOW2)])
    with pytest.raises(PreflightError, match="does not take the CPU flag.s. avx2"):
        prepare(make(tmp_path)[0], vms=[VmConfig(cpu=CpuConfig(features=(("avx2", __import__("vmbench.settings").settings.Feature.ON),)))])
    pve = MiniPve()
    pve.vms[9001] = dict(pve.vms[9000], config=dict(pve.vms[9000]["config"]))
    with pytest.raises(PreflightError, match=r"2 VMs are named debian12 \(VMIDs 9000, 9001\)"):
        prepare(make(tmp_path, pve, cfg={"template": "debian12"})[0])
    drv, pve, node = make(tmp_path)
    pve.faults.append(("GET", "/version", PveFault(401, "authentication failure")))
    with pytest.raises(PreflightError, match="refused the token vmbench@pve!bench"):
        prepare(drv)


def test_vmid_race_is_retried_with_the_next_free_id(tmp_path):
    drv, pve, node = make(tmp_path)
    prepare(drv)
    pve.faults.append(("POST", "/nodes/pve1/qemu/9000/clone", PveFault(500, "unable to create VM 100: config file already exists")))
    pve.faults.append(("POST", "/nodes/pve1/qemu/9000/clone", PveFault(400, "Parameter verification failed.",
                                                                        {"newid": "VM 100 already exists"})))
    req = request()
    res = drv.new_resources(TAG, req)
    real_nextid = pve.route

    def route(method, path, p):  # someone else takes 100 right after nextid said it was free
        if path == "/cluster/nextid" and 100 not in pve.vms and not getattr(route, "done", False):
            route.done = True
            return "100"
        return real_nextid(method, path, p)

    pve.route = route
    drv.create_vm(TAG, req, res)
    assert [p["newid"] for p in params(pve, "POST", "/nodes/pve1/qemu/9000/clone")] == ["100", "100", "100"]
    assert res.storage["pve"]["vmid"] == 100


def test_clone_refused_by_storage_names_the_fix(tmp_path):
    drv, pve, node = make(tmp_path)
    prepare(drv)
    pve.faults.append(("POST", "/nodes/pve1/qemu/9000/clone",
                       PveFault(500, "Linked clone feature is not supported for 'local-lvm:base-9000-disk-0'")))
    req = request()
    with pytest.raises(HypervisorError) as exc:
        drv.create_vm(TAG, req, drv.new_resources(TAG, req))
    assert "cloning template 9000 into vmbench-r0a1b2c3d-1 failed" in exc.value.message and "clone: full" in exc.value.hint


def test_agent_that_never_answers_is_bounded(tmp_path):
    drv, pve, node = make(tmp_path, MiniPve(agent_pings=10 ** 6))
    prepare(drv)
    req = request()
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    with pytest.raises(GuestError) as exc:
        drv.boot(TAG, req, res, timeout=20)
    assert exc.value.message == f"vmbench-{TAG}-1: the guest agent did not answer within 20s (QEMU guest agent is not running)"
    assert "qemu-guest-agent" in exc.value.hint


def test_task_warnings_reach_the_user(tmp_path):
    drv, pve, node = make(tmp_path)
    progress = prepare(drv)
    req = request()
    res = drv.new_resources(TAG, req)
    real = pve.task
    pve.task = lambda kind, ident, exitstatus="OK", log=None, done=None: real(
        kind, ident, *(("WARNINGS: 1", ["WARN: iothread is only valid with virtio disk or virtio-scsi-single controller, ignoring"])
                       if kind == "qmconfig" else (exitstatus, log)), done=done)
    drv.create_vm(TAG, req, res)
    warned = [m for k, m in progress.events if k == "warn"]
    assert warned and "Proxmox finished with WARNINGS: 1: WARN: iothread is only valid" in warned[0]
    assert res.storage["pve"]["task_warnings"] == drv.vms[res.name].warnings and len(warned) == 2


def test_a_vm_left_locked_is_reported_and_left_in_place(tmp_path):
    drv, pve, node = make(tmp_path)
    prepare(drv)
    req = request()
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    pve.vms[100]["lock"] = "backup"
    with pytest.raises(HypervisorError) as exc:
        drv.remove_vm(res)
    assert "VM 100 (vmbench-r0a1b2c3d-1) is still locked (backup) after 120s; left in place" in exc.value.message
    assert 100 in pve.vms
    pve.vms[100]["lock"] = None
    drv.remove_vm(res)
    assert 100 not in pve.vms


def test_disks_left_after_destroy_are_named(tmp_path):
    drv, pve, node = make(tmp_path)
    prepare(drv)
    req = request()
    res = drv.new_resources(TAG, req)
    drv.create_vm(TAG, req, res)
    real = pve.qemu

    def qemu(method, vmid, sub, p):  # a destroy that could not remove a disk
        if method == "DELETE" and sub == "":
            upid = real(method, vmid, sub, dict(p, **{"destroy-unreferenced-disks": "0"}))
            pve.tasks[upid]["done"] = lambda: pve.vms.pop(vmid)
            return upid
        return real(method, vmid, sub, p)

    pve.qemu = qemu
    with pytest.raises(HypervisorError, match=r"disks of VM 100 left on storage local-zfs: .*local-zfs:vm-100-disk-1"):
        drv.remove_vm(res)


def test_leftovers_only_tagged_vms_and_cleanup_order(tmp_path):
    drv, pve, node = make(tmp_path, storage=Storage(type=StorageType.ZFS, dataset="rpool/data"))
    prepare(drv)
    req = request(VmConfig(zfs=ZfsSettings(volblocksize=16 << 10)))
    res = drv.new_resources(TAG, req)
    node.zfs["rpool/data/vm-100-disk-1"] = {"volblocksize": str(16 << 10)}
    drv.create_vm(TAG, req, res)
    # someone's VM with a vmbench-like name but no tag, and one with the tag but another name
    pve.vms[300] = {"name": "vmbench-r11111111-1", "node": "pve1", "template": 0, "status": "running", "lock": None,
                    "config": {"name": "vmbench-r11111111-1", "tags": "prod"}}
    pve.vms[301] = {"name": "web01", "node": "pve1", "template": 0, "status": "running", "lock": None,
                    "config": {"name": "web01", "tags": "vmbench"}}
    node.zfs["rpool/data/vm-555-disk-0"] = {"vmbench:run": "r22222222"}  # its VM is gone
    found = drv.leftovers()
    assert [(l.kind, l.name, l.run_tag) for l in found] == [
        ("vm", f"vmbench-{TAG}-1", TAG), ("storage", f"vmbench-{TAG}-16k", TAG), ("zvol", "rpool/data/vm-555-disk-0", "r22222222")]
    # the storage entry first: its VM of the same run is destroyed before the entry goes
    fresh, pve, node = make(tmp_path, pve, storage=Storage(type=StorageType.ZFS, dataset="rpool/data"), node=node)
    fresh.remove_leftover(found[1])
    assert 100 not in pve.vms and f"vmbench-{TAG}-16k" not in pve.storages
    fresh.remove_leftover(found[0])  # already gone: fine
    with pytest.raises(HypervisorError, match="has no vmbench tag; left alone"):
        fresh.remove_leftover(Leftover("vm", "vmbench-r11111111-1", "r11111111"))
    assert 300 in pve.vms and 301 in pve.vms
    with pytest.raises(HypervisorError, match="not a vmbench storage entry"):
        fresh.remove_leftover(Leftover("storage", "local-zfs", TAG))
    node.commands.clear()
    fresh.remove_leftover(found[2])
    assert ["zfs", "destroy", "rpool/data/vm-555-disk-0"] in node.commands


def test_describe_host(tmp_path):
    drv, pve, node = make(tmp_path, cfg={"tls_verify": False})
    progress = prepare(drv)
    assert ("warn", "TLS certificate verification is OFF for https://pve.test:8006 (tls.verify: false)") in progress.events
    facts = drv.describe_host()
    assert facts["driver"] == "proxmox" and facts["pve_version"] == "8.4.1" and facts["pve_node_kernel"] == "6.8.12-4-pve"
    assert facts["qemu_version"] == "9.0.2-4" and facts["tls_verify_off"] is True and "OFF" in facts["pve_tls"]
    assert facts["hostname"] == "pve1" and facts["pool"] == "local-zfs" and facts["pve_storage_type"] == "zfspool"
    assert facts["ssh_host_key"] == "SHA256:abc" and "zfs_version" in facts
    assert TOKEN[1] not in repr(facts)
