"""`vmbench cleanup` removes what vmbench tagged and nothing else."""

from __future__ import annotations

import libvirt

from tests.integration.conftest import URI, flat, vmbench
from vmbench.drivers.base import VmRequest
from vmbench.drivers import make_driver
from vmbench.drivers.libvirt.xml import domain_xml, volume_xml
from vmbench.images import current_image
from vmbench.scenario.model import Hypervisor, VmConfig
from vmbench.settings import Accel, CpuMode
from vmbench.progress import NullProgress

FOREIGN_XML = """<domain type='qemu'><name>{name}</name><memory unit='MiB'>64</memory><vcpu>1</vcpu>
<os><type arch='x86_64' machine='pc'>hvm</type></os></domain>"""


def _created(tag: str):
    """A libvirt driver and one VM of run ``tag`` created through it (never started): (driver, request, resources)."""
    driver = make_driver(Hypervisor(uri=URI))
    driver.prepare(image=current_image("debian12"), accel=Accel.AUTO, cpu_models=set(),
                   cpu_modes={CpuMode.MODEL}, progress=NullProgress())
    req = VmRequest(seq=1, vm=VmConfig(), scratch_size=64 << 20, cells=("x",))
    res = driver.new_resources(tag, req)
    driver.create_vm(tag, req, res)
    return driver, req, res


def test_cleanup_lists_then_removes_only_tagged_things(machine):
    tag = "r0c1ea0ff"
    driver, req, res = _created(tag)
    driver.conn.defineXML(domain_xml(driver.domain_spec(tag, req, res)))  # defined, never started: a hard-killed run
    pool = driver.conn.storagePoolLookupByName("vmbench")
    foreign_vol = pool.createXML(volume_xml("user-disk.raw", 1 << 20, "raw"), 0)
    lookalike = driver.conn.defineXML(FOREIGN_XML.format(name="vmbench-r0c1ea0ff-9"))  # our name pattern, no metadata
    user_vm = driver.conn.defineXML(FOREIGN_XML.format(name="user-vm"))
    try:
        dry = vmbench("cleanup", "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert "vmbench-r0c1ea0ff-1" in dry.stdout and "vmbench-r0c1ea0ff-1-scratch.raw" in dry.stdout
        assert "nothing removed" in flat(dry.stdout)
        assert "user-vm" not in dry.stdout and "user-disk" not in dry.stdout and "vmbench-r0c1ea0ff-9" not in dry.stdout
        assert driver.conn.lookupByName("vmbench-r0c1ea0ff-1")  # still there after --dry-run

        done = vmbench("cleanup")
        assert done.returncode == 0, done.stderr
        assert [l for l in driver.leftovers() if l.run_tag == tag] == []
        for name in ("user-vm", "vmbench-r0c1ea0ff-9"):
            assert driver.conn.lookupByName(name)
        pool.refresh(0)
        assert pool.storageVolLookupByName("user-disk.raw")
    finally:
        for dom in (lookalike, user_vm):
            try:
                dom.undefine()
            except libvirt.libvirtError:
                pass
        foreign_vol.delete(0)
        driver.remove_vm(res)


def test_a_domain_removed_between_listing_and_removal_counts_as_removed(machine):
    """``vmbench cleanup`` lists, then removes: a domain its own run removed in between (a
    transient probe, a run ending) is gone, not an error."""
    tag = "r0dd0dd0d"
    driver, req, res = _created(tag)
    try:
        driver.conn.defineXML(domain_xml(driver.domain_spec(tag, req, res)))
        (item,) = [l for l in driver.leftovers() if l.run_tag == tag and l.kind == "domain"]
        dom = driver.conn.lookupByName(item.name)
        driver.conn.lookupByName(item.name).undefine()  # its run removed it, after the listing
        original = driver.conn.lookupByName
        driver.conn.lookupByName = lambda name: dom if name == item.name else original(name)  # looked up before
        try:
            driver.remove_leftover(item)
        finally:
            del driver.conn.lookupByName
    finally:
        driver.remove_vm(res)
    assert [l for l in driver.leftovers() if l.run_tag == tag and l.kind == "domain"] == []
