"""The Proxmox driver on an rbd storage (issue 27): contract tests against the fake PVE node on 8.4
and 9.1 (its rbd storage on a pool without a cluster, tests.fakepve.rbd.MemoryImages), the node's
Ceph side a fake that answers vmbench's ``ceph``/``rbd`` commands; the client vmbench derives
from the storage's configuration as pve-storage's CephConfig.pm does; the krbd axis (a temporary
rbd entry with ``krbd 1``, refused at preflight where the node cannot map RBD images); and the
scenario's refusals.  The same run on a real cluster is in tests/integration/test_ceph.py."""

from __future__ import annotations

import json

import pytest

from tests.fakepve import rbd as pve_rbd
from tests.fakes import FakePveNode
from tests.unit.test_proxmox_contract import (CREATE, PREPARE, PREPARE_FIND, REMOVE, SERIAL, STATUS, STORAGE_STATUS, TAG, TASK, VERSIONS, rights,
                                              VM_CONFIG, assert_no_boolean_words, assert_tasks_waited_by_upid,
                                              make_driver, new_fake, params_of, prepare, request, scenario_text)
from vmbench.drivers.proxmox.rbd import client_of, config_problem, entry_params, host_target, monitors
from vmbench.drivers.qemu_cmdline import NOT_APPLICABLE
from vmbench.errors import PreflightError, ScenarioError
from vmbench.fio.rbd import parse_target
from vmbench.progress import RecordingProgress
from vmbench.run.evidence import effective_settings, problems
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import CephConfig
from vmbench.settings import Cache

SID = "ceph-vm"
MON = "127.0.0.1:6789"
KEY = "AQBvbWJlbmNoLXRlc3Qta2V5LW5vdC1yZWFsPT0AAA=="
KEYRING = f"/etc/pve/priv/ceph/{SID}.keyring"
CONF = f"/etc/pve/priv/ceph/{SID}.conf"
RBD_VM = """
storage: {type: rbd, scratch_size: 1G}
vm:
  vcpus: 2
  memory: 1G
  bus: virtio-scsi
  cache: none
  iothread: true
  cpu: x86-64-v2-AES
"""
LIMITS = ["--rados-osd-op-timeout", "30", "--rados-mon-op-timeout", "30"]
CLIENT = ["--conf", CONF, "--id", "vmbench", "--keyring", KEYRING, "--mon_host", MON, *LIMITS]
MODPROBE_FAIL = "modprobe: FATAL: Module rbd not found in directory /lib/modules/6.8.12-11-pve"


class CephPveNode(FakePveNode):
    """A PVE node whose rbd storage's cluster answers vmbench's Ceph commands (healthy, pool
    ``vmbench``); ``krbd``: whether its kernel can map RBD images."""

    def __init__(self, pve, *, krbd: bool = False, **kw) -> None:
        super().__init__(pve, **kw)
        self.files[KEYRING] = f"[client.vmbench]\n\tkey = {KEY}\n".encode()
        self.files[CONF] = f"[global]\n\tkeyring = {KEYRING}\n".encode()
        self.krbd = krbd
        if krbd:
            self.dirs.add("/sys/bus/rbd")

    @staticmethod
    def _words(argv) -> list[str]:
        return argv[argv.index("--rados-mon-op-timeout") + 2:]

    def _cmd_ceph(self, argv, stdin):
        words = self._words(argv)
        if words[:1] == ["health"]:
            return json.dumps({"status": "HEALTH_OK", "checks": {}})
        if words[:2] == ["osd", "dump"]:
            return json.dumps({"pools": [{"pool_name": "vmbench", "size": 3, "min_size": 2, "pg_num": 128,
                                          "application_metadata": {"rbd": {}}}],
                               "osds": [{"osd": i, "up": 1, "in": 1} for i in range(3)]})
        if words[:1] == ["versions"]:
            return json.dumps({"overall": {"ceph version 18.2.4 (abc) reef (stable)": 7}})
        return 22, "", "no valid command found"

    def _cmd_rbd(self, argv, stdin):
        words = self._words(argv)
        if words[0] in ("create", "rm"):
            return ""
        if words[0] == "ls":  # the pool's images: PVE's (vm-N-disk-M), none of them vmbench's
            return json.dumps(sorted(self.pve.state.rbd_images[SID].images))
        return 22, "", f"rbd: {words[0]}: not in this fake"

    def _cmd_rados(self, argv, stdin):  # rados ... -p vmbench -N vmbench-bench ls: no bench objects left
        return ""

    def _cmd_ceph_conf(self, argv, stdin):
        return 1, "", ""

    def _cmd_modprobe(self, argv, stdin):
        return (0, "", "") if self.krbd else (1, "", MODPROBE_FAIL + "\n")

    def _cmd_cp(self, argv, stdin):
        self.files[argv[2]] = self.files[argv[1]]
        return ""


class rbd_fake:
    """The fake node with the template on local and the rbd storage ceph-vm (an external cluster)."""

    def __init__(self, version: str, **kw) -> None:
        self.fake = new_fake(version, **kw)

    def __enter__(self):
        fake = self.fake.start()
        fake.add_template()
        fake.add_storage(SID, "rbd", pool="vmbench", monhost=MON, username="vmbench", content="images")
        return fake

    def __exit__(self, *exc) -> None:
        self.fake.close()


def images(fake) -> dict:
    return fake.state.rbd_images[SID].images


# ---- what vmbench derives from the storage's configuration (CephConfig.pm) --------------------


def test_the_client_is_what_pve_storage_gives_qemu():
    external = client_of(SID, {"pool": "vmbench", "monhost": "10.0.0.1 10.0.0.2:6789;fd00::3", "username": "vmbench"}, True)
    assert external == CephConfig(pool="vmbench", conf=CONF, user="vmbench", keyring=KEYRING,
                                  mon_host="10.0.0.1,10.0.0.2:6789,[fd00::3]")
    hyper = client_of("ceph-hc", {"pool": "vm-pool"}, False)  # pveceph's own cluster: its conf names the admin keyring
    assert hyper == CephConfig(pool="vm-pool", conf="/etc/pve/ceph.conf", user="admin", keyring=None, mon_host=None)
    assert client_of("x", {}, True).pool == "rbd" and monitors("[fd00::1]:3300") == "[fd00::1]:3300"
    target = parse_target(host_target(external, f"{SID}:vm-100-disk-0", Cache.WRITEBACK))
    assert (target.spec, target.user, target.conf, target.keyring, target.mon_host, target.cache) == (
        "vmbench/vm-100-disk-0", "vmbench", CONF, KEYRING, "10.0.0.1,10.0.0.2:6789,[fd00::3]", True)
    assert target.env_prefix() == ["env", f"CEPH_CONF={CONF}", f"CEPH_ARGS=--keyring={KEYRING} "
                                   "--mon_host=10.0.0.1,10.0.0.2:6789,[fd00::3] --rbd_cache=true"]
    assert config_problem(SID, {"namespace": "ns1"})[0].startswith("Proxmox storage ceph-vm keeps its images in the RBD namespace ns1")
    assert entry_params("vmbench-r0a1b2c3d-krbd", {"pool": "vmbench", "monhost": MON, "username": "vmbench", "krbd": 0},
                        True, "pve1") == {"storage": "vmbench-r0a1b2c3d-krbd", "type": "rbd", "pool": "vmbench", "monhost": MON,
                                          "username": "vmbench", "krbd": True, "content": "images", "nodes": "pve1"}


def test_the_fakes_rbd_path_and_blockdev_follow_rbdplugin():
    scfg = {"pool": "vmbench", "monhost": "127.0.0.1:6789;10.0.0.2", "username": "vmbench"}
    assert pve_rbd.volume_path(SID, scfg, "vm-100-disk-0") == (
        f"rbd:vmbench/vm-100-disk-0:conf={CONF}:mon_host=127.0.0.1\\:6789;10.0.0.2:auth_supported=cephx:id=vmbench:keyring={KEYRING}")
    assert pve_rbd.blockdev(SID, scfg, "vm-100-disk-0") == {
        "driver": "rbd", "pool": "vmbench", "image": "vm-100-disk-0", "conf": CONF,
        "server": [{"host": "127.0.0.1", "port": "6789"}, {"host": "10.0.0.2", "port": "3300"}],
        "auth-client-required": ["cephx"], "user": "vmbench"}
    assert pve_rbd.blockdev(SID, {**scfg, "krbd": 1}, "vm-100-disk-0")["driver"] == "host_device"


# ---- the contract: one VM on librbd -----------------------------------------------------------

#: the rights on the rbd storage's path too; its config, read once
PREPARE_RBD = PREPARE_FIND + rights(5) + PREPARE[-3:-2] + [("GET", "/storage/{storage}")] + PREPARE[-2:]


@pytest.mark.parametrize("version", VERSIONS)
def test_one_vm_on_an_rbd_storage(version, tmp_path, monkeypatch, caplog):
    with rbd_fake(version) as fake:
        node = CephPveNode(fake, kvm=True)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage=SID, sections=RBD_VM), node)
        prepare(drv, s)
        assert drv.ceph == CephConfig(pool="vmbench", conf=CONF, user="vmbench", keyring=KEYRING, mon_host=MON)
        # preflight as on libvirt: health, the pool, a probe image created and removed as the storage's user
        assert [c[len(CLIENT) + 1:len(CLIENT) + 3] for c in node.commands if c[0] in ("ceph", "rbd")] == [
            ["health", "--format"], ["osd", "dump"], ["create", "--size"], ["rm", "--no-progress"]]
        assert not [r for r in fake.requests if r.method != "GET"]
        req = request(s)
        res = drv.new_resources(TAG, req)
        drv.create_vm(TAG, req, res)
        image = "vm-100-disk-0"
        assert res.volumes == [f"{SID}:{image}"] and images(fake) == {image: 1 << 30}
        assert res.scratch_path == (f"rbd:vmbench/{image}:conf={CONF}:mon_host=127.0.0.1\\:6789:auth_supported=cephx"
                                    f":id=vmbench:keyring={KEYRING}") and res.scratch_kind == "rbd"
        # the host reference: fio's rbd engine on the scratch image, QEMU's client and cache (none: rbd_cache off)
        assert res.host_target == (f"rbd:vmbench/{image}:id=vmbench:conf={CONF}:keyring={KEYRING}"
                                   ":mon_host=127.0.0.1\\:6789:rbd_cache=false")
        guest = drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        applied = guest.applied()
        eff = effective_settings(applied, {"guest_bus": "virtio-scsi", "guest_write_cache": "write back", "guest_cpus": 2})
        assert (eff["config_aio"], eff["qemu_aio"], eff["qemu_krbd"], eff["qemu_cache"]) == ("threads", NOT_APPLICABLE, False, "none")
        assert problems(s.cells[0].vm, eff, "kvm") == []
        if version == "8.4":  # -drive file=rbd:... as RBDPlugin's path gives it
            assert f"file={res.scratch_path},if=none,id=drive-scsi1,cache=none," in " ".join(applied.qemu_cmdline)
        else:  # the rbd -blockdev of qemu_blockdev_options, no aio on it
            leaf = applied.details["qemu_disk"]
            assert leaf["protocol"] == "rbd" and '"driver":"rbd","pool":"vmbench","image":"vm-100-disk-0","conf":' \
                in " ".join(applied.qemu_cmdline)
        facts = drv.describe_host()
        assert (facts["storage_type"], facts["ceph_pool"], facts["ceph_user"], facts["pve_krbd"], facts["ceph_health"]) == \
            ("rbd", "vmbench", "vmbench", False, "HEALTH_OK")
        drv.remove_vm(res)
        drv.close()

        assert fake.problems == []
        describe = [("GET", "/version"), ("GET", "/nodes/{node}/status"), STORAGE_STATUS]
        boot = [("POST", "/nodes/{node}/qemu/{vmid}/status/start"), *TASK, *[STATUS, ("POST", "/nodes/{node}/qemu/{vmid}/agent/ping")] * 3]
        assert fake.calls() == PREPARE_RBD + CREATE + boot + [("GET", VM_CONFIG), STATUS] + describe + REMOVE
        assert_tasks_waited_by_upid(fake, ["qmclone", "qmconfig", "qmconfig", "qmstart", "qmstop", "qmdestroy"])
        assert_no_boolean_words(fake)
        assert params_of(fake, "POST", VM_CONFIG)[1] == {
            "scsi1": f"{SID}:1,cache=none,aio=threads,iothread=1,serial={SERIAL}"}  # raw: no format= on rbd
        assert images(fake) == {} and list(fake.vms) == [9000] and drv.leftovers() == []
        # the cephx key: read on the node for nothing but the check that it is there; in no argv, log or fact
        assert not [c for c in node.commands if any(KEY in a for a in c)]
        assert KEY not in caplog.text and KEY not in json.dumps(facts, default=str) and KEY not in repr(vars(drv))


def test_an_rbd_storage_without_storage_type_rbd_is_named(tmp_path, monkeypatch):
    """As before issue 27 the guests run on it, but the run says what it leaves out."""
    with rbd_fake("9.1") as fake:
        node = CephPveNode(fake, kvm=True)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage=SID), node)
        progress = RecordingProgress()
        drv.prepare(image=None, accel=s.hypervisor.accel, progress=progress, vms=[c.vm for c in s.cells], cpu_models=set(),
                    cpu_modes=set())
        assert drv.ceph is None and not node.ran("ceph")
        assert any(f"Proxmox storage {SID} is an rbd storage, but the scenario does not say storage.type: rbd" in w
                   for kind, w in progress.events if kind == "warn"), progress.events
        drv.close()


# ---- the krbd axis ----------------------------------------------------------------------------

KRBD_VM = RBD_VM + "vary: {krbd: [true]}\n"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_krbd_cell_is_refused_where_the_node_cannot_map_rbd_images(version, tmp_path, monkeypatch):
    with rbd_fake(version) as fake:
        node = CephPveNode(fake, kvm=True, krbd=False)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage=SID, sections=KRBD_VM), node)
        with pytest.raises(PreflightError) as exc:
            prepare(drv, s)
        assert exc.value.message == f"krbd: true needs node pve1 to map RBD images, but the kernel has no rbd module ({MODPROBE_FAIL})"
        assert "modprobe rbd" in exc.value.hint
        # nothing created: no request but reads, no Ceph command at all (not even the probe image)
        assert not [r for r in fake.requests if r.method != "GET"] and not [c for c in node.commands if c[0] in ("rbd", "ceph")]
        assert node.ran("modprobe") == [["modprobe", "--dry-run", "rbd"]] and set(fake.storages) == {"local", SID}
        drv.close()


def test_a_storage_with_krbd_refuses_a_run_on_such_a_node_too(tmp_path, monkeypatch):
    with rbd_fake("9.1") as fake:
        fake.storages[SID].config["krbd"] = 1
        node = CephPveNode(fake, kvm=True, krbd=False)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage=SID, sections=RBD_VM), node)
        with pytest.raises(PreflightError, match=r"^storage ceph-vm maps its images \(krbd 1\) needs node pve1 to map RBD images"):
            prepare(drv, s)
        drv.close()


CREATE_KRBD = CREATE[:8] + [("POST", "/storage")] + CREATE[8:]  # the temporary krbd entry, before the disk
#: krbd cells add a temporary storage entry: the rights propagated on /storage too
PREPARE_KRBD = PREPARE_FIND + rights(6) + PREPARE_RBD[len(PREPARE_FIND) + 5:]
REMOVE_KRBD = REMOVE + [("DELETE", "/storage/{storage}")]  # after the destroy


@pytest.mark.parametrize("version", VERSIONS)
def test_krbd_through_a_temporary_rbd_entry_removed_after_the_destroy(version, tmp_path, monkeypatch):
    with rbd_fake(version) as fake:
        node = CephPveNode(fake, kvm=True, krbd=True)
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, storage=SID, sections=KRBD_VM), node)
        prepare(drv, s)
        cell = s.cells[1]
        assert cell.name == "krbd=on" and cell.vm.krbd is True
        req = request(s)
        req = type(req)(seq=1, vm=cell.vm, scratch_size=req.scratch_size, cells=(cell.name,))
        res = drv.new_resources(TAG, req)
        drv.create_vm(TAG, req, res)
        entry = f"vmbench-{TAG}-krbd"
        assert params_of(fake, "POST", "/storage") == [{"storage": entry, "type": "rbd", "pool": "vmbench", "monhost": MON,
                                                         "username": "vmbench", "krbd": "1", "content": "images", "nodes": "pve1"}]
        assert node.ran("cp") == [["cp", KEYRING, f"/etc/pve/priv/ceph/{entry}.keyring"]]  # on the node: the key stays there
        assert res.volumes == [f"{entry}:vm-100-disk-0"] and images(fake) == {"vm-100-disk-0": 1 << 30}  # the same pool
        device = f"/dev/rbd-pve/{pve_rbd.FSID}/vmbench/vm-100-disk-0"
        assert res.scratch_path == res.host_target == device  # host fio: libaio on the mapped image
        guest = drv.boot(TAG, req, res, RecordingProgress(), s.hypervisor.boot_timeout)
        eff = effective_settings(guest.applied(), {})
        assert eff["qemu_krbd"] is True and eff["qemu_aio"] == "threads"  # a block device: the aio asked applies
        drv.remove_vm(res)
        drv.close()
        assert fake.problems == [] and set(fake.storages) == {"local", SID} and images(fake) == {}
        calls = fake.calls()
        assert calls[:len(PREPARE_KRBD) + len(CREATE_KRBD)] == PREPARE_KRBD + CREATE_KRBD
        assert calls[-len(REMOVE_KRBD):] == REMOVE_KRBD


# ---- the scenario ---------------------------------------------------------------------------

PVE = ("name: s\nhypervisor: {driver: proxmox, host: 127.0.0.1, node: pve, template: 9000, storage: ceph-vm, "
       "token: {id: 'root@pam!vmbench', secret_file: /t}}\njobs:\n  - {name: j, rw: randwrite, bs: 4k}\n")
LIBVIRT = "name: s\nstorage: {type: rbd, pool: vmbench, ceph: {user: vmbench}}\njobs:\n  - {name: j, rw: randwrite, bs: 4k}\n"


@pytest.mark.parametrize("text,message", [
    (LIBVIRT + "vary: {krbd: [true]}\n",
     "cell 'krbd=on': krbd applies to driver proxmox only (rbd storage (storage.type rbd): the scratch disk mapped by the "
     "kernel (krbd) or opened through librbd); driver libvirt has no such setting"),
    (LIBVIRT + "vm: {krbd: false}\n", "s.yaml:5: vm: krbd applies to driver proxmox only"),
    (PVE + "vm: {krbd: true}\n", "krbd applies to RBD images (a Proxmox rbd storage), but storage.type is dir"),
    (PVE + "storage: {type: rbd, ceph: {user: vmbench}}\n", "s.yaml:5: storage.ceph: with driver proxmox the Ceph pool and "
                                                            "client are the node's rbd storage's"),
    (PVE + "storage: {type: rbd}\nvm: {krbd: maybe}\n", "s.yaml:6: vm.krbd: 'maybe'"),
])
def test_the_scenario_refuses_krbd_and_ceph_keys_where_they_do_not_apply(text, message):
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(text, "s.yaml")
    assert message in exc.value.message


def test_a_proxmox_rbd_scenario_plans_rados_and_a_host_reference_per_librbd_cache():
    from vmbench.run.plan import make_plan

    s = parse_scenario(PVE + "storage: {type: rbd}\nvm: {cache: none}\nvary: {cache: [writeback], krbd: [true]}\n", "s.yaml")
    assert s.storage.ceph is None and "Proxmox rbd storage" in s.storage.describe()
    plan = make_plan(s)
    assert [j.name for j in plan.rados_jobs()] == ["j"]
    # the host: once per librbd cache setting (none: off, writeback: on) and once on the mapped image (krbd)
    assert len(plan.boots) == 3 and len(plan.host_references()) == 3


def test_the_advice_applies_krbd_to_the_storage_not_the_vm():
    from vmbench.advice.apply import snippets

    (only,) = snippets({"krbd": True})
    assert (only.kind, only.text) == ("proxmox", "pvesm set '<storage>' --krbd 1") and "not of the VM" in only.note
    both = snippets({"krbd": False, "cache": "writeback"})
    assert [s.text for s in both if s.kind == "proxmox"] == ["pvesm set '<storage>' --krbd 0",
                                                              "qm set VMID --virtio0 '<storage>:<volume>,cache=writeback'"]
    assert not [s for s in both if s.kind == "libvirt" and "krbd" in s.text]
