"""Per-disk I/O limits (iops, iops_rd, mbps_wr, their bursts and burst_length): read from a
scenario and refused as qemu-server and QEMU refuse them, stored only when set, written as
libvirt's <iotune> and Proxmox's disk options, read back from the configuration and from QEMU
(query-block for libvirt; PVE 8's ``throttling.*`` and PVE 9's throttle-group on the command
line), and flagged when a limit asked for is not in effect."""

from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest

from vmbench.drivers.libvirt.evidence import applied_from_readings
from vmbench.drivers.libvirt.xml import iotune_element
from vmbench.drivers.proxmox.config import disk_option, limit_options, pve_throttle
from vmbench.drivers.proxmox.evidence import applied_from_pve
from vmbench.drivers.qemu_cmdline import NO_LIMIT, disk_readings, parse_cmdline, qmp_limits, throttle_readings
from vmbench.errors import ScenarioError
from vmbench.run.evidence import effective_settings, problems
from vmbench.scenario import parse_scenario
from vmbench.scenario.axes import AXIS_BY_NAME, setting_columns, settings_of, stored_setting, vm_key
from vmbench.scenario.model import LIMIT_NAMES, IoLimits, VmConfig
from vmbench.scenario.vm import limit_problems

BASE = "name: t\njobs:\n  - name: j1\n    rw: randwrite\n    bs: 4k\n"
LIMITS = IoLimits(iops_rd=500, iops_rd_max=1000, mbps=12.5, mbps_max=20, iops_wr=300, burst_length=5)
VM = VmConfig(limits=LIMITS)


def parse(text: str):
    return parse_scenario(BASE + textwrap.dedent(text), "t.yaml")


def refusal(text: str) -> ScenarioError:
    with pytest.raises(ScenarioError) as exc:
        parse(text)
    return exc.value


# ---- the scenario -------------------------------------------------------------------------


def test_limits_are_read_stored_when_set_and_named_in_cells():
    s = parse("""
        vm: {iops_rd: 500, iops_rd_max: 1000, burst_length: 5, mbps: 12.5, mbps_max: 20.0}
        vary: {iops_wr: [100, 200]}
        """)
    base = s.baseline
    assert base.limits == IoLimits(iops_rd=500, iops_rd_max=1000, mbps=12.5, mbps_max=20, burst_length=5)
    assert type(base.limits.mbps_max) is int  # a whole number of MiB/s is stored as one
    settings = settings_of(base)
    assert list(settings)[8:] == ["iops_rd", "mbps", "iops_rd_max", "mbps_max", "burst_length"]  # table order, after the rest
    assert [c.name for c in s.cells] == ["baseline", "iops_wr=100", "iops_wr=200"]
    assert [c.changed for c in s.cells] == [(), ("iops_wr",), ("iops_wr",)]
    assert settings_of(s.cells[1].vm)["iops_wr"] == 100 and "iops_wr" not in settings
    # none given: nothing stored, so runs stored before the limits existed keep their keys
    assert not set(LIMIT_NAMES) & set(settings_of(VmConfig()))
    assert "iops" not in vm_key(VmConfig())
    # report columns only where some row has a limit; old rows read "none"
    assert "iops_wr" in setting_columns([settings_of(c.vm) for c in s.cells])
    assert "iops_wr" not in setting_columns([settings_of(VmConfig())])
    assert stored_setting(settings_of(VmConfig()), "iops_wr") == "none"


def test_every_limit_is_a_row_with_its_own_readings():
    for name in LIMIT_NAMES:
        axis = AXIS_BY_NAME[name]
        assert axis.settings_key == name and axis.describe
        assert axis.verify == ((f"config_{name}", "{config}", False), (f"qemu_{name}", "QEMU's throttling", True))


@pytest.mark.parametrize("text, message", [
    ("vm: {iops: 0}", "vm.iops: 0 is below the minimum 1"),
    ("vm: {iops_rd: 1.5}", "vm.iops_rd: 1.5 is not a whole number"),
    ("vm: {mbps: 0}", "vm.mbps: 0 is not above 0"),
    ("vm: {mbps_wr: -2}", "vm.mbps_wr: -2 is not above 0"),
    ("vm: {mbps: 1.2345}", "vm.mbps: 1.2345 has more than 3 decimals"),
    ("vm: {mbps: fast}", "vm.mbps: 'fast' is not a number"),
    ("vm: {mbps: true}", "vm.mbps: True is not a number"),
    ("vm: {mbps: 1000000000}", "vm.mbps: 1000000000 is above the maximum 100000000"),
    ("vm: {burst_length: 0}", "vm.burst_length: 0 is below the minimum 1"),
])
def test_bad_values_are_refused(text, message):
    assert message in refusal(text).message


@pytest.mark.parametrize("text, message, hint", [
    ("vm: {mbps: 100, mbps_rd: 50}", "vm: mbps cannot be given with mbps_rd: mbps limits reads and writes together "
     "(qemu-server refuses the disk: unable to parse drive options; libvirt and QEMU refuse it too)",
     "use mbps alone, or mbps_rd and/or mbps_wr"),
    ("vm: {iops: 100, iops_wr: 50}", "vm: iops cannot be given with iops_wr", "use iops alone, or iops_rd and/or iops_wr"),
    ("vm: {iops: 100, iops_rd: 50, iops_wr: 50}", "vm: iops cannot be given with iops_rd or iops_wr", None),
    ("vm: {iops_max: 100}", "vm: iops_max is a burst above iops, so it needs iops", "add iops below 100, or remove iops_max"),
    ("vm: {mbps_wr_max: 2.5}", "vm: mbps_wr_max is a burst above mbps_wr, so it needs mbps_wr", None),
    ("vm: {iops_rd: 500, iops_rd_max: 500}", "vm: iops_rd_max (500) must be above iops_rd (500)", "raise iops_rd_max above 500, or remove it"),
    ("vm: {mbps: 20, mbps_max: 10.5}", "vm: mbps_max (10.5) must be above mbps (20)", None),
    ("vm: {burst_length: 3}", "vm: burst_length is how long a burst lasts, but no burst is given", None),
    ("vm: {iops: 10, burst_length: 3}", "vm: burst_length is how long a burst lasts, but no burst is given", None),
    ("vm: {mbps: 1, mbps_max: 100000000, burst_length: 86400}",
     "vm: burst_length 86400 is too long for mbps_max 100000000: QEMU refuses a burst of more than 1e+15 bytes", None),
])
def test_combinations_qemu_server_and_qemu_refuse_are_refused_before_anything_is_made(text, message, hint):
    err = refusal(text)
    assert err.message.startswith("t.yaml:6: " + message), err.message
    if hint is not None:
        assert err.hint == hint


def test_a_cell_that_breaks_a_rule_is_refused_by_name():
    err = refusal("vm: {iops: 100}\ncells:\n  - {name: split, iops_rd: 50}\n")
    assert "cell 'split': iops cannot be given with iops_rd" in err.message
    err = refusal("vary: {iops_max: [200]}\n")
    assert "iops_max is a burst above iops, so it needs iops" in err.message


def test_limit_problems_accepts_what_qemu_server_accepts():
    assert limit_problems(LIMITS) == []
    assert limit_problems(IoLimits(iops_rd=1, iops_wr=2, mbps_rd=0.5, mbps_wr=0.75, iops_wr_max=3, mbps_rd_max=0.501)) == []
    assert limit_problems(IoLimits()) == []


# ---- libvirt: <iotune> --------------------------------------------------------------------


def test_libvirt_iotune_is_exact():
    el = iotune_element(LIMITS)
    ET.indent(el, space="  ")
    assert ET.tostring(el, encoding="unicode") == textwrap.dedent("""\
        <iotune>
          <total_bytes_sec>13107200</total_bytes_sec>
          <read_iops_sec>500</read_iops_sec>
          <write_iops_sec>300</write_iops_sec>
          <total_bytes_sec_max>20971520</total_bytes_sec_max>
          <read_iops_sec_max>1000</read_iops_sec_max>
          <total_bytes_sec_max_length>5</total_bytes_sec_max_length>
          <read_iops_sec_max_length>5</read_iops_sec_max_length>
        </iotune>""")
    assert iotune_element(IoLimits()) is None
    # MiB/s as truncated bytes, as qemu-server: 0.001 MiB/s is 1048 bytes
    el = iotune_element(IoLimits(mbps_wr=0.001))
    assert [(c.tag, c.text) for c in el] == [("write_bytes_sec", "1048")]


def test_libvirt_scratch_disk_carries_iotune_after_its_target():
    from tests.unit.test_xml import spec
    from vmbench.drivers.libvirt.xml import disk_elements
    from vmbench.settings import Bus

    for bus in (Bus.VIRTIO_BLK, Bus.VIRTIO_SCSI, Bus.SATA):
        scratch = disk_elements(spec(bus=bus, limits=IoLimits(iops=100)))[1]
        tags = [c.tag for c in scratch]
        assert tags[tags.index("target") + 1] == "iotune", tags
        assert [(c.tag, c.text) for c in scratch.find("iotune")] == [("total_iops_sec", "100")]
    root, scratch = disk_elements(spec())[:2]
    assert scratch.find("iotune") is None and root.find("iotune") is None


SERIAL = "VMB1"
PATH = "/pool/scratch.raw"


def live_xml(iotune: str) -> str:
    return (f'<domain><devices><disk type="file" device="disk"><driver name="qemu" type="raw" cache="none" io="native"/>'
            f'<source file="{PATH}"/><target dev="vdb" bus="virtio"/>{iotune}<serial>{SERIAL}</serial></disk></devices></domain>')


QUERY_BLOCK = [{"device": "", "qdev": "/machine/peripheral/virtio-disk1/virtio-backend", "inserted": {
    "file": PATH, "drv": "raw", "cache": {"writeback": True, "direct": True, "no-flush": False},
    "bps": 13107200, "bps_rd": 0, "bps_wr": 0, "iops": 0, "iops_rd": 500, "iops_wr": 300,
    "bps_max": 20971520, "bps_max_length": 5, "iops_rd_max": 1000, "iops_rd_max_length": 5, "group": "drive-virtio-disk1"}}]
WANT = {"iops": NO_LIMIT, "iops_rd": 500, "iops_wr": 300, "mbps": 12.5, "mbps_rd": NO_LIMIT, "mbps_wr": NO_LIMIT,
        "iops_max": NO_LIMIT, "iops_rd_max": 1000, "iops_wr_max": NO_LIMIT, "mbps_max": 20, "mbps_rd_max": NO_LIMIT,
        "mbps_wr_max": NO_LIMIT, "burst_length": 5}


def readings(eff: dict, prefix: str) -> dict:
    return {n: eff.get(prefix + n) for n in LIMIT_NAMES}


def limit_issues(vm: VmConfig, eff: dict) -> list[str]:
    """The problems() lines about I/O limits."""
    return [p for p in problems(vm, eff, "kvm") if p.split(":")[0].split(" (")[0] in LIMIT_NAMES]


def test_libvirt_readback_from_the_live_xml_and_query_block():
    iotune = ET.tostring(iotune_element(LIMITS), encoding="unicode")
    applied = applied_from_readings({"live_xml": live_xml(iotune), "query_block": QUERY_BLOCK}, PATH, SERIAL)
    eff = effective_settings(applied, {})
    assert readings(eff, "config_") == WANT and readings(eff, "qemu_") == WANT
    assert limit_issues(VM, eff) == []


def test_libvirt_readback_without_limits_reads_none_and_flags_a_limit_that_did_not_take():
    block = [{**QUERY_BLOCK[0], "inserted": {"file": PATH, "drv": "raw", "cache": {"writeback": True, "direct": True},
                                             "bps": 0, "bps_rd": 0, "bps_wr": 0, "iops": 0, "iops_rd": 0, "iops_wr": 0}}]
    iotune = ET.tostring(iotune_element(LIMITS), encoding="unicode")
    applied = applied_from_readings({"live_xml": live_xml(iotune), "query_block": block}, PATH, SERIAL)
    eff = effective_settings(applied, {})
    assert set(readings(eff, "qemu_").values()) == {NO_LIMIT}
    found = [p for p in limit_issues(VM, eff) if "QEMU's throttling" in p]
    assert found == ["iops_rd: asked 500, QEMU's throttling reports none", "iops_wr: asked 300, QEMU's throttling reports none",
                     "mbps: asked 12.5, QEMU's throttling reports none", "iops_rd_max: asked 1000, QEMU's throttling reports none",
                     "mbps_max: asked 20, QEMU's throttling reports none", "burst_length: asked 5, QEMU's throttling reports none"]
    # no <iotune> in the live XML: the configuration reads none too
    applied = applied_from_readings({"live_xml": live_xml(""), "query_block": QUERY_BLOCK}, PATH, SERIAL)
    eff = effective_settings(applied, {})
    assert set(readings(eff, "config_").values()) == {NO_LIMIT}
    assert "iops_rd: asked 500, the live domain XML reports none" in problems(VM, eff, "kvm")


def test_a_limit_qemu_cannot_be_asked_about_is_unverified():
    applied = applied_from_readings({"live_xml": live_xml(""), "query_block": []}, PATH, SERIAL)
    got = problems(VmConfig(limits=IoLimits(iops_wr=10)), effective_settings(applied, {}), "kvm")
    assert "iops_wr (QEMU's throttling) could not be verified" in got
    assert limit_issues(VmConfig(), effective_settings(applied, {})) == []  # none asked


def test_qmp_and_throttle_readings():
    assert qmp_limits(QUERY_BLOCK[0]["inserted"]) == {
        "bps-total": 13107200, "bps-read": 0, "bps-write": 0, "iops-total": 0, "iops-read": 500, "iops-write": 300,
        "iops-read-max": 1000, "iops-read-max-length": 5, "bps-total-max": 20971520, "bps-total-max-length": 5}
    # a burst without a length has QEMU's default 1; different lengths read as mixed
    assert throttle_readings("q_", {"iops-total": 5, "iops-total-max": 9})["q_burst_length"] == 1
    mixed = throttle_readings("q_", {"iops-read": 5, "iops-read-max": 9, "iops-read-max-length": 2,
                                     "bps-write": MiB, "bps-write-max": 2 * MiB})
    assert mixed["q_burst_length"] == "mixed (iops_rd_max 2, mbps_wr_max 1)"
    assert (mixed["q_mbps_wr"], mixed["q_mbps_wr_max"]) == (1, 2)
    assert throttle_readings("q_", {"bps-read": 12897484})["q_mbps_rd"] == 12.3  # int(12.3 MiB) back to 12.3


MiB = 1 << 20


# ---- Proxmox: the disk option string and its readback --------------------------------------


def test_proxmox_disk_option_strings_are_exact():
    vm = VmConfig(limits=LIMITS)
    assert limit_options(vm) == ["iops_rd=500", "iops_wr=300", "mbps=12.5", "iops_rd_max=1000", "mbps_max=20",
                                 "iops_rd_max_length=5", "bps_max_length=5"]
    assert disk_option(vm, "local-zfs", "zfspool", 8 << 30, "VMB1") == (
        "local-zfs:8,cache=none,aio=threads,serial=VMB1,iops_rd=500,iops_wr=300,mbps=12.5,iops_rd_max=1000,mbps_max=20,"
        "iops_rd_max_length=5,bps_max_length=5")
    assert limit_options(VmConfig(limits=IoLimits(mbps_rd=0.5, mbps_rd_max=1, mbps_wr=2, mbps_wr_max=3.25))) == [
        "mbps_rd=0.5", "mbps_wr=2", "mbps_rd_max=1", "mbps_wr_max=3.25"]  # no length without burst_length
    assert limit_options(VmConfig(limits=IoLimits(iops=1, iops_max=2, burst_length=7))) == [
        "iops=1", "iops_max=2", "iops_max_length=7"]
    assert limit_options(VmConfig()) == [] and disk_option(VmConfig(), "local", "dir", 1 << 30, "S") == \
        "local:1,cache=none,aio=threads,serial=S,format=raw"


def test_pve_config_is_read_as_qemu_server_reads_it():
    assert pve_throttle({"iops_rd": "500", "mbps": "12.5", "mbps_max": "20", "bps_max_length": "5"}) == {
        "bps-total": 13107200, "bps-total-max": 20971520, "bps-total-max-length": 5, "iops-read": 500}
    # bps (bytes) limits nothing: parse_drive makes it mbps "0.000"; the legacy *_length aliases are read
    assert pve_throttle({"bps_wr": "1000000", "iops_wr": "5", "iops_wr_max": "9", "iops_wr_length": "3"}) == {
        "iops-write": 5, "iops-write-max": 9, "iops-write-max-length": 3}


DRIVE_8 = ("file=/dev/zvol/rpool/data/vm-100-disk-1,if=none,id=drive-virtio1,cache=none,aio=native,"
           "throttling.bps-total=13107200,throttling.bps-total-max=20971520,throttling.bps-total-max-length=5,"
           "throttling.iops-read=500,throttling.iops-read-max=1000,throttling.iops-read-max-length=5,"
           "throttling.iops-write=300,format=raw,detect-zeroes=on")
GROUP_9 = ('{"id":"throttle-drive-virtio1","limits":{"bps-total":13107200,"bps-total-max":20971520,'
           '"bps-total-max-length":5,"iops-read":500,"iops-read-max":1000,"iops-read-max-length":5,"iops-write":300},'
           '"qom-type":"throttle-group"}')
BLOCKDEV_9 = json.dumps({"driver": "throttle", "node-name": "drive-virtio1", "throttle-group": "throttle-drive-virtio1",
                         "file": {"driver": "raw", "node-name": "f1", "file": {
                             "driver": "host_device", "filename": "/dev/zvol/rpool/data/vm-100-disk-1", "node-name": "e1",
                             "aio": "native", "cache": {"direct": True, "no-flush": False}}}}, separators=(",", ":"))
CMDLINES = {
    "8.4": ["/usr/bin/kvm", "-drive", DRIVE_8, "-device", f"virtio-blk-pci,drive=drive-virtio1,id=virtio1,serial={SERIAL}"],
    "9.1": ["/usr/bin/kvm", "-object", '{"id":"throttle-drive-virtio0","limits":{},"qom-type":"throttle-group"}',
            "-object", GROUP_9, "-blockdev", BLOCKDEV_9,
            "-device", f"virtio-blk-pci,drive=drive-virtio1,id=virtio1,serial={SERIAL},write-cache=on"],
}
PVE_CONFIG = {"virtio1": "local-zfs:vm-100-disk-1,cache=none,aio=native,serial=VMB1,iops_rd=500,iops_wr=300,mbps=12.5,"
                         "iops_rd_max=1000,mbps_max=20,iops_rd_max_length=5,bps_max_length=5,size=8G"}


@pytest.mark.parametrize("version", ["8.4", "9.1"])
def test_proxmox_readback_from_the_config_and_the_command_line(version):
    applied = applied_from_pve(PVE_CONFIG, "virtio1", CMDLINES[version], SERIAL, "/dev/zvol/rpool/data/vm-100-disk-1")
    eff = effective_settings(applied, {})
    assert readings(eff, "config_") == WANT and readings(eff, "qemu_") == WANT
    assert limit_issues(VM, eff) == []


def test_proxmox_throttle_group_in_key_value_form_and_missing_limits():
    args = ["/usr/bin/kvm", "-object", "throttle-group,id=tg1,x-iops-total=100,limits.bps-write=1048576",
            "-blockdev", BLOCKDEV_9.replace("throttle-drive-virtio1", "tg1"),
            "-device", f"virtio-blk-pci,drive=drive-virtio1,serial={SERIAL}"]
    got = disk_readings(parse_cmdline(args), SERIAL)
    assert (got["qemu_iops"], got["qemu_mbps_wr"], got["qemu_iops_rd"], got["qemu_burst_length"]) == (100, 1, NO_LIMIT, NO_LIMIT)
    # a throttle node whose group is not on the command line: nothing to read (not "none")
    got = disk_readings(parse_cmdline(args[:1] + args[3:]), SERIAL)
    assert "qemu_iops" not in got
    # a -drive without throttling and a chain without a throttle node: no limit in effect
    plain = DRIVE_8.split(",throttling")[0] + ",format=raw"
    got = disk_readings(parse_cmdline(["/usr/bin/kvm", "-drive", plain, "-device", f"virtio-blk-pci,drive=drive-virtio1,serial={SERIAL}"]), SERIAL)
    assert {got[f"qemu_{n}"] for n in LIMIT_NAMES} == {NO_LIMIT}


def test_proxmox_limit_that_did_not_take_is_flagged():
    config = {"virtio1": "local-zfs:vm-100-disk-1,cache=none,serial=VMB1,iops_rd=500,size=8G"}
    applied = applied_from_pve(config, "virtio1", CMDLINES["8.4"], SERIAL, "")
    eff = effective_settings(applied, {})
    vm = VmConfig(limits=replace(IoLimits(), iops_rd=400, mbps_rd=10))
    got = limit_issues(vm, eff)
    assert got == ["iops_rd: asked 400, the Proxmox VM config reports 500", "iops_rd: asked 400, QEMU's throttling reports 500",
                   "mbps_rd: asked 10, the Proxmox VM config reports none", "mbps_rd: asked 10, QEMU's throttling reports none"]
