"""Read-back evidence from a real run (QEMU 7.2, libvirt 9.0, Debian 12 guest) -> effective settings."""

import copy
import json

import pytest

from vmbench.drivers.libvirt.evidence import applied_from_readings
from vmbench.run.evidence import effective_settings, guest_view, problems
from vmbench.scenario.model import CpuConfig, VmConfig
from vmbench.settings import Aio, Bus, Cache, CpuMode, Feature, ImageFormat

REQUESTED = [
    VmConfig(bus=Bus.VIRTIO_BLK, cache=Cache.NONE, aio=Aio.NATIVE, memory_mib=768, cpu=CpuConfig(model="kvm64", aes=Feature.ON)),
    VmConfig(bus=Bus.VIRTIO_SCSI, cache=Cache.WRITETHROUGH, iothread=True, memory_mib=768, cpu=CpuConfig(model="qemu64", aes=Feature.OFF)),
    VmConfig(bus=Bus.VIRTIO_SCSI_SHARED, cache=Cache.WRITEBACK, aio=Aio.IO_URING, memory_mib=768),
    VmConfig(bus=Bus.SATA, cache=Cache.DIRECTSYNC, format=ImageFormat.QCOW2, memory_mib=768),
    VmConfig(bus=Bus.VIRTIO_BLK, cache=Cache.UNSAFE, iothread=True, memory_mib=768, cpu=CpuConfig(mode=CpuMode.MAX, model=None)),
]


@pytest.fixture
def boots(data_dir):
    return json.loads((data_dir / "evidence-axes.json").read_text())


def eff(b):
    applied = applied_from_readings(b["host"], b["scratch_path"], b["serial"])
    return effective_settings(applied, guest_view(b["guest_disk"], b["guest_facts"]))


def test_effective_settings_match_each_request(boots):
    expected = [
        {"guest_bus": "virtio-blk", "qemu_cache": "none", "qemu_aio": "native", "qemu_iothread": False, "guest_write_cache": "write back", "guest_aes": True},
        {"guest_bus": "virtio-scsi", "qemu_cache": "writethrough", "qemu_aio": "threads", "qemu_iothread": True, "guest_write_cache": "write through", "guest_aes": False},
        {"guest_bus": "virtio-scsi-shared", "qemu_cache": "writeback", "qemu_aio": "io_uring", "qemu_iothread": False, "guest_write_cache": "write back"},
        {"guest_bus": "sata", "qemu_cache": "directsync", "qemu_format": "qcow2", "qemu_iothread": False, "guest_write_cache": "write through"},
        {"guest_bus": "virtio-blk", "qemu_cache": "unsafe", "qemu_iothread": True, "guest_write_cache": "write back", "guest_aes": True},
    ]
    for b, want, vm in zip(boots, expected, REQUESTED):
        e = eff(b)
        for k, v in want.items():
            assert e[k] == v, (b["settings"], k)
        assert e["accelerator"] == "tcg"
        assert problems(vm, e, "tcg") == []


def test_mismatches_are_reported(boots):
    e = eff(boots[0])
    vm = REQUESTED[0]
    from dataclasses import replace

    assert problems(replace(vm, cache=Cache.WRITEBACK), e, "tcg") == [
        "cache: asked writeback, the live domain XML reports none",
        "cache: asked writeback, QEMU's block layer reports none",
    ]
    assert problems(replace(vm, bus=Bus.VIRTIO_SCSI), e, "tcg") == [
        "bus: asked virtio-scsi, the live domain XML reports virtio-blk", "bus: asked virtio-scsi, the guest reports virtio-blk"]
    assert problems(vm, e, "kvm") == ["accelerator: asked kvm, QEMU reports tcg"]
    # the iothread silently dropped (as Proxmox does on a non-single SCSI controller)
    dropped = copy.deepcopy(boots[1])
    dropped["host"]["qom_iothread"] = {k: "" for k in dropped["host"]["qom_iothread"]}
    assert problems(REQUESTED[1], eff(dropped), "tcg") == ["iothread: asked True, QEMU's iothread links reports False"]
    # aes forced on but the guest does not see it
    noaes = copy.deepcopy(boots[0])
    noaes["guest_facts"]["aes"] = False
    assert problems(vm, eff(noaes), "tcg") == ["cpu aes: asked on, the guest has no aes flag"]


def test_missing_evidence_is_not_silently_accepted(boots):
    b = copy.deepcopy(boots[0])
    b["host"]["qemu_cmdline"] = []
    b["host"]["query_block"] = []
    assert problems(REQUESTED[0], eff(b), "tcg") == [
        "cache (QEMU's block layer) could not be verified", "aio (the QEMU command line) could not be verified"]


def test_aes_without_ssse3_under_tcg_is_refused(boots):
    b = copy.deepcopy(boots[0])
    b["guest_facts"].update(ssse3=False, pclmulqdq=True)
    assert problems(REQUESTED[0], eff(b), "tcg") == [
        "cpu kvm64+aes: the guest has aes but not ssse3; under TCG Linux's AES-NI driver faults on that combination "
        "(use a model with all three, such as Westmere)"]
    assert problems(REQUESTED[0], eff(b), "kvm")[-1] == "accelerator: asked kvm, QEMU reports tcg"


def test_failed_iothread_query_is_unverified_not_off(boots):
    b = copy.deepcopy(boots[1])
    b["host"]["qom_iothread"] = {k: "error: QEMU monitor failed" for k in b["host"]["qom_iothread"]}
    assert eff(b)["qemu_iothread"] is None
    assert problems(REQUESTED[1], eff(b), "tcg") == ["iothread (QEMU's iothread links) could not be verified"]


def test_typed_applied_values(boots):
    a = [applied_from_readings(b["host"], b["scratch_path"], b["serial"]) for b in boots]
    assert [x.config_bus for x in a] == ["virtio-blk", "virtio-scsi", "virtio-scsi-shared", "sata", "virtio-blk"]
    assert [x.controller for x in a] == ["virtio-blk-pci", "virtio-scsi", "virtio-scsi", "ahci", "virtio-blk-pci"]
    assert [x.cpu_model for x in a][:2] == ["kvm64", "qemu64"] and a[4].cpu_model == "max"
    assert ("aes", "on") in a[0].cpu_flags and ("aes", "off") in a[1].cpu_flags
    assert all(x.volume == b["scratch_path"] for x, b in zip(a, boots))
    assert all(x.accelerator == "tcg" and x.native_config.startswith("<domain") and x.qemu_cmdline for x in a)
    assert "native_config" not in a[0].typed() and a[0].typed()["qemu_cache"] == "none"


# ---- detect_zeroes and discard: the live XML and QEMU's -blockdev nodes ----------------------


def _with_zeroes(b, xml_attrs: str, fmt_node: dict) -> dict:
    """Boot ``b`` as if the scratch disk had been defined with ``xml_attrs`` on its <driver>
    and QEMU's format node had ``fmt_node`` (libvirt puts detect-zeroes and discard there)."""
    b = copy.deepcopy(b)
    b["host"]["live_xml"] = b["host"]["live_xml"].replace("cache='none' io='native'/>", f"cache='none' io='native' {xml_attrs}/>")
    argv = b["host"]["qemu_cmdline"]
    i = next(i for i, a in enumerate(argv) if a.startswith('{"node-name":"libvirt-1-format"'))
    argv[i] = json.dumps({**json.loads(argv[i]), **fmt_node}, separators=(",", ":"))
    return b


def test_detect_zeroes_and_discard_read_back(boots):
    from dataclasses import replace

    from vmbench.settings import DetectZeroes, Discard

    e = eff(boots[0])  # left to libvirt: off and ignore (the storage node's discard=unmap does not make it through
    assert (e["config_detect_zeroes"], e["qemu_detect_zeroes"], e["config_discard"], e["qemu_discard"]) == \
        ("off", "off", "ignore", "ignore")  # the format node, which has none)
    vm = replace(REQUESTED[0], detect_zeroes=DetectZeroes.UNMAP, discard=Discard.UNMAP)
    assert problems(REQUESTED[0], e, "tcg") == []  # not asked: recorded, not compared
    assert problems(vm, e, "tcg") == [
        "detect_zeroes: asked unmap, the live domain XML reports off", "detect_zeroes: asked unmap, the QEMU command line reports off",
        "discard: asked unmap, the live domain XML reports ignore", "discard: asked unmap, the QEMU command line reports ignore"]
    applied = _with_zeroes(boots[0], "discard='unmap' detect_zeroes='unmap'", {"discard": "unmap", "detect-zeroes": "unmap"})
    assert problems(vm, eff(applied), "tcg") == []
    # libvirt quietly degrades unmap to on when discard is not unmap: QEMU's node says so
    degraded = _with_zeroes(boots[0], "detect_zeroes='unmap'", {"detect-zeroes": "on"})
    assert problems(replace(vm, discard=None), eff(degraded), "tcg") == [
        "detect_zeroes: asked unmap, the QEMU command line reports on"]
    on = _with_zeroes(boots[0], "detect_zeroes='on'", {"detect-zeroes": "on"})
    assert problems(replace(REQUESTED[0], detect_zeroes=DetectZeroes.ON), eff(on), "tcg") == []
    b = copy.deepcopy(boots[0])
    b["host"]["qemu_cmdline"] = []
    assert "detect_zeroes (the QEMU command line) could not be verified" in problems(vm, eff(b), "tcg")


def test_axis_readings_without_a_field_of_their_own_travel_in_details(boots):
    applied = applied_from_readings(boots[0]["host"], boots[0]["scratch_path"], boots[0]["serial"])
    assert "qemu_detect_zeroes" not in applied.typed() or applied.typed()["qemu_detect_zeroes"] == "off"
    assert effective_settings(applied, {})["qemu_detect_zeroes"] == "off"
    assert "query_block" in applied.details and "query_block" not in effective_settings(applied, {})
