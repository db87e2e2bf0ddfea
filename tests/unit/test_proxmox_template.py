"""vmbench's own Proxmox template (issue 15 part 4), against the fake PVE on both schemas:
``vmbench images push``'s request sequence (upload into a storage that takes imports,
``STORAGE:0,import-from=VOLID``, conversion to a template), reuse while the hash matches,
replacement only when asked and never of a VM vmbench did not make, a linked clone of the
pushed template, doctor's line, the fake's ``import-from`` as qemu-server checks it, the
first-boot check of a template vmbench did not make, and the pure helpers (the boot disk's
MBR and SYSLINUX config, the guest's needs, the template's description)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tests.fakepve import FakePve, NullBackend
from tests.fakepve.client import call
from tests.fakes import FakePveNode
from tests.unit.test_proxmox_contract import (ENV, SECRET, TAG, TASK, TOKEN_ID, VERSIONS, VM_CONFIG, assert_no_boolean_words,
                                              assert_tasks_waited_by_upid, make_driver, prepare, request, scenario_text)
from vmbench.guest import needs as guest_tools
from vmbench.guest.needs import GuestNeeds, Tool
from vmbench.drivers.proxmox.template import (TEMPLATE_TAG, TemplateIdentity, TemplateState, create_params, description,
                                              import_file, read_identity, template_check_line, template_state,
                                              wanted_identity)
from vmbench.errors import PreflightError
from vmbench.images import bootdisk
from vmbench.progress import RecordingProgress
from vmbench.scenario import parse_scenario
from vmbench.transport.local import LocalTransport

VIRTUAL = 3 << 30  # the pushed disk's virtual size
IDENT = TemplateIdentity("debian12", "ab" * 32, "1")
SOURCE = f"local:import/{import_file(IDENT)}"


def qcow2_header(path: Path, size: int = VIRTUAL) -> Path:
    """A file that starts like a qcow2 of ``size`` bytes (all the NullBackend reads)."""
    path.write_bytes(b"QFI\xfb" + struct.pack(">I", 3) + bytes(16) + struct.pack(">Q", size) + bytes(4096))
    return path


def new_fake(version: str, **kw) -> FakePve:
    kw.setdefault("backend", NullBackend(exec_polls=0))
    kw.setdefault("task_polls", 1)
    kw.setdefault("agent_pings", 1)
    kw.setdefault("local_content", "images,rootdir,iso,vztmpl,backup,snippets,import")
    return FakePve(version=version, token=(TOKEN_ID, SECRET), **kw)


def push(tmp_path, monkeypatch, fake, disk, ident=IDENT, template="vmbench-debian12", **kw):
    drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, template=template), LocalTransport())
    return drv, drv.push_template(ident, disk, **kw)


FIND = [("GET", "/version"), ("GET", "/cluster/resources")]
STORAGE_STATUS = ("GET", "/nodes/{node}/storage/{storage}/status")
PUSH = FIND + [
    STORAGE_STATUS,  # the template's storage holds images (and can make linked clones)
    ("GET", "/nodes/{node}/storage"),  # storages that take imports (content=import)
    *[("GET", "/access/permissions")] * 2,  # the token's rights on /vms and /storage/local (storage and import)
    ("GET", "/storage/{storage}"),  # the import storage's directory (uploaded over SSH)
    ("GET", "/nodes/{node}/storage/{storage}/content"),  # not there yet
    ("GET", "/nodes/{node}/storage/{storage}/content"),  # listed once uploaded
    ("GET", "/cluster/nextid"),
    ("POST", "/nodes/{node}/qemu"), *TASK,  # STORAGE:0,import-from=local:import/...
    ("GET", VM_CONFIG),  # the disk is on the storage, import-from not kept, agent on
    ("POST", "/nodes/{node}/qemu/{vmid}/template"), *TASK,
    ("GET", VM_CONFIG),  # template: 1
]


@pytest.mark.parametrize("version", VERSIONS)
def test_push_makes_a_template_from_an_imported_disk(version, tmp_path, monkeypatch):
    disk = qcow2_header(tmp_path / "boot-disk-1.qcow2")
    with new_fake(version) as fake:
        drv, result = push(tmp_path, monkeypatch, fake, disk)
        assert fake.calls() == PUSH
        assert (result.vmid, result.name, result.made, result.uploaded, result.replaced) == (100, "vmbench-debian12", True, True, None)
        assert_tasks_waited_by_upid(fake, ["qmcreate", "qmtemplate"])
        assert_no_boolean_words(fake)
        create = [r.params for r in fake.requests if (r.method, r.template) == ("POST", "/nodes/{node}/qemu")][0]
        assert create["virtio0"] == f"local:0,import-from={SOURCE},format=qcow2"
        assert (create["agent"], create["boot"], create["tags"]) == ("1", "order=virtio0", "vmbench;vmbench-template")
        conf = fake.vms[100].config
        assert conf["virtio0"] == f"local:100/base-100-disk-0.qcow2,size={VIRTUAL >> 30}G"  # import-from is not kept
        assert conf["template"] == 1 and conf["agent"] == "1" and conf["tags"] == f"vmbench;{TEMPLATE_TAG}"
        assert read_identity(conf) == IDENT and IDENT.marker in conf["description"]
        vol = fake.state.resolve("local:100/base-100-disk-0.qcow2")[1]
        assert (vol.size, vol.origin, vol.base) == (VIRTUAL, "import", True)
        assert not (Path(fake.storages["local"].config["path"]) / "import" / import_file(IDENT)).exists()  # upload removed

        # pushed again: current, kept, nothing made
        n = len(fake.requests)
        _, again = push(tmp_path, monkeypatch, fake, disk)
        assert (again.vmid, again.made) == (100, False)
        assert [(r.method, r.template) for r in fake.requests[n:]] == FIND + [("GET", VM_CONFIG)]

        # a run's linked clone of it: prepare finds it, clones it, doctor calls it current
        monkeypatch.setattr("vmbench.drivers.proxmox.template.wanted_identity", lambda recipe: IDENT)
        run, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake, template="vmbench-debian12"), FakePveNode(fake))
        prepare(run, s)
        assert template_check_line(run.template_config, run.template_vmid, "debian12")[:2] == \
            ("ok", f"template 100 (vmbench-debian12) is vmbench's debian12 {IDENT.hash[:12]}, current")
        res = run.new_resources(TAG, request(s))
        run.create_vm(TAG, request(s), res)
        clone = res.storage["pve"]["vmid"]
        assert fake.vms[clone].config["virtio0"].startswith("local:100/base-100-disk-0.qcow2/101/vm-101-disk-0.qcow2")
        run.remove_vm(res)
        assert sorted(fake.vms) == [100]


@pytest.mark.parametrize("version", VERSIONS)
def test_an_older_template_is_replaced_only_when_asked_and_a_foreign_vm_never(version, tmp_path, monkeypatch):
    disk = qcow2_header(tmp_path / "boot-disk-1.qcow2")
    newer = TemplateIdentity("debian12", "cd" * 32, "1")
    with new_fake(version) as fake:
        push(tmp_path, monkeypatch, fake, disk)
        with pytest.raises(PreflightError, match=r"vmbench's debian12 abababababab .*not the current debian12 cdcdcdcdcdcd") as exc:
            push(tmp_path, monkeypatch, fake, disk, newer)
        assert "--replace" in (exc.value.hint or "") and fake.vms[100].config["template"] == 1
        _, result = push(tmp_path, monkeypatch, fake, disk, newer, replace=True)
        assert (result.vmid, result.made, result.replaced) == (100, True, 100)
        assert read_identity(fake.vms[100].config) == newer
        assert ("DELETE", "/nodes/{node}/qemu/{vmid}") in fake.calls()

        fake.add_template(vmid=9000, name="my-template")
        with pytest.raises(PreflightError, match=r"VM 9000 \(my-template\) exists and is not vmbench's template"):
            push(tmp_path, monkeypatch, fake, disk, template="my-template", replace=True)
        assert 9000 in fake.vms


@pytest.mark.parametrize("version", VERSIONS)
def test_no_storage_takes_imports(version, tmp_path, monkeypatch):
    disk = qcow2_header(tmp_path / "d.qcow2")
    with new_fake(version, local_content="images,rootdir,iso") as fake:
        with pytest.raises(PreflightError, match="no storage on node pve1 takes imports") as exc:
            push(tmp_path, monkeypatch, fake, disk)
        assert "pvesm set local --content" in (exc.value.hint or "")
        assert not fake.vms


# ---- the fake's import-from, as qemu-server checks it ---------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_fake_import_from_as_qemu_server(version, tmp_path):
    with new_fake(version) as fake:
        local = Path(fake.storages["local"].config["path"])
        (local / "import").mkdir(parents=True)
        qcow2_header(local / "import" / "disk.qcow2", 1 << 30)
        (local / "template" / "iso").mkdir(parents=True)
        (local / "template" / "iso" / "x.iso").write_bytes(b"iso")
        base = {"vmid": 200, "name": "imp"}
        r = call(fake, "POST", "/nodes/pve1/qemu", {**base, "virtio0": "local:4,import-from=local:import/disk.qcow2"})
        assert r.status == 400 and r.errors == {"virtio0": "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"}
        r = call(fake, "POST", "/nodes/pve1/qemu", {**base, "virtio0": "local:0,import-from=/var/lib/vz/import/disk.qcow2"})
        assert r.status == 500 and r.reason == "Only root can pass arbitrary filesystem paths."
        r = call(fake, "POST", "/nodes/pve1/qemu", {**base, "virtio0": "local:0,import-from=local:iso/x.iso"})
        assert r.status == 400 and r.errors == {"virtio0": "local:iso/x.iso has wrong type 'iso' - needs to be 'images' or 'import'"}
        listed = call(fake, "GET", "/nodes/pve1/storage/local/content", {"content": "import"}).data
        assert [(v["volid"], v["content"], v["format"]) for v in listed] == [("local:import/disk.qcow2", "import", "qcow2")]
        assert not fake.vms
        fake.finish_tasks()
    assert fake.problems == []


# ---- the first boot of a template vmbench did not make ---------------------------------------


def checking_guest(missing: list[str], fio: str):
    def handler(argv: list[str], data: bytes) -> dict:
        if argv[:2] == ["setsid", "-w"]:
            argv = argv[2:]
        if argv[:2] == ["sh", "-c"] and "command -v" in argv[2]:
            return {"exitcode": 0, "out": "".join(f"missing {m}\n" for m in missing) + fio}
        return {"exitcode": 0}
    return handler


@pytest.mark.parametrize("version", VERSIONS)
def test_a_foreign_template_lacking_tools_fails_the_first_boot_and_the_clone_goes(version, tmp_path, monkeypatch):
    with new_fake(version, backend=NullBackend(exec_polls=0, exec_handler=checking_guest(["cryptsetup"], "fio-3.12\n"))) as fake:
        fake.add_template()
        drv, s, _ = make_driver(tmp_path, monkeypatch, scenario_text(fake), FakePveNode(fake))
        needs = GuestNeeds(guest_tools.ALWAYS + (Tool("cryptsetup", "cryptsetup-bin", "luks layers"),), (3, 13), "ioengine io_uring")
        drv.prepare(image=None, accel=s.hypervisor.accel, progress=RecordingProgress(),
                    cpu_models=set(), cpu_modes=set(), guest_needs=needs)
        res = drv.new_resources(TAG, request(s))
        drv.create_vm(TAG, request(s), res)
        with pytest.raises(PreflightError) as exc:
            drv.boot(TAG, request(s), res)
        assert "cryptsetup (package cryptsetup-bin; for luks layers)" in exc.value.message
        assert "fio 3.12 is older than 3.13, which ioengine io_uring needs" in exc.value.message
        assert "vmbench images push" in (exc.value.hint or "")
        assert sorted(fake.vms) == [9000]  # the clone was removed


# ---- pure helpers ----------------------------------------------------------------------------


def test_boot_disk_mbr_and_syslinux_config():
    lay = bootdisk.layout(8 << 20, 41 << 20, 2 << 30)
    assert (lay.boot_start, lay.boot_size, lay.root_start, lay.root_size) == (1 << 20, 80 << 20, 81 << 20, 2 << 30)
    sector = bootdisk.mbr(b"\xfa\xeb", lay)
    assert len(sector) == 512 and sector[:2] == b"\xfa\xeb" and sector[510:] == b"\x55\xaa"
    p1, p2 = sector[446:462], sector[462:478]
    assert (p1[0], p1[4], struct.unpack("<II", p1[8:16])) == (0x80, 0x0E, (2048, (80 << 20) // 512))
    assert (p2[0], p2[4], struct.unpack("<II", p2[8:16])) == (0, 0x83, ((81 << 20) // 512, (2 << 30) // 512))
    assert sector[478:510] == bytes(32)
    cfg = bootdisk.syslinux_cfg("root=LABEL=vmbench-root rw\n  console=ttyS0")
    assert cfg.endswith("  APPEND root=LABEL=vmbench-root rw console=ttyS0\n") and "LINUX /vmlinuz" in cfg
    assert bootdisk.mformat_argv(Path("/d.raw"), lay)[:3] == ["mformat", "-i", "/d.raw@@1048576"]
    assert bootdisk.syslinux_argv(Path("/d.raw"), lay) == ["syslinux", "--offset", "1048576", "--install", "/d.raw"]
    assert bootdisk.place_root_argv(Path("/r.raw"), Path("/d.raw"), lay)[4] == "seek=81"


def test_guest_needs_from_the_scenario():
    text = """
name: needs
vm: {memory: 1G}
stacks:
  - {name: crypt, layers: [partition, luks, {lvm: {type: thin}}, xfs]}
jobs:
  - {name: u, rw: randread, bs: 4k, ioengine: io_uring}
"""
    needs = guest_tools.guest_needs(parse_scenario(text, "/tmp/needs.yaml"))
    assert [t.command for t in needs.tools] == ["fio", "lsblk", "parted", "cryptsetup", "lvcreate", "thin_check", "mkfs.xfs"]
    assert needs.fio_min == (3, 13) and "job u" in needs.fio_why
    plain = guest_tools.guest_needs(parse_scenario("name: p\njobs: [{name: a, rw: read, bs: 1M}]\n", "/tmp/p.yaml"))
    assert [t.command for t in plain.tools] == ["fio", "lsblk"] and plain.fio_min == (3, 0)
    assert guest_tools.problems("fio-3.33\n", needs) == []
    assert guest_tools.problems("missing fio\n", needs) == ["fio (package fio; for every measurement)"]
    assert guest_tools.fio_version("fio-3.33") == (3, 33) and guest_tools.fio_version("fio-2.2.10") == (2, 2, 10)
    assert guest_tools.check_argv(plain)[:2] == ["sh", "-c"] and "for c in fio lsblk;" in guest_tools.check_argv(plain)[2]


def test_template_identity_in_the_config():
    text = description(IDENT, "2026-01-01T00:00:00+0000", "9.9")
    conf = {"tags": "vmbench;vmbench-template", "description": text, "template": 1}
    assert read_identity(conf) == IDENT and template_state(conf, IDENT) is TemplateState.CURRENT
    assert template_state(conf, TemplateIdentity("debian12", "cd" * 32, "1")) is TemplateState.OUTDATED
    assert template_state({**conf, "template": 0}, IDENT) is TemplateState.UNFINISHED
    assert template_state({**conf, "tags": "vmbench"}, IDENT) is TemplateState.FOREIGN  # the marker alone is not enough
    assert template_state({"tags": "vmbench-template", "template": 1}, IDENT) is TemplateState.FOREIGN
    p = create_params(123, "vmbench-debian12", IDENT, "local-zfs", "zfspool", SOURCE, "now")
    assert p["virtio0"] == f"local-zfs:0,import-from={SOURCE}" and len(p["description"]) <= 8192
    status, detail, hint = template_check_line({"name": "t", "agent": "1"}, 9000, "debian12")
    assert status == "warn" and "not vmbench's" in detail and "vmbench images push" in hint
    assert wanted_identity("debian12").layout == bootdisk.LAYOUT_VERSION
