"""Reading a user's existing libvirt domain (issue 18) on the real libvirtd (qemu:///system):
a domain this test defines (never started) from XML, with a disk file it creates in a tmp
dir, is read with ``read_domain`` and ``read_current``; its XML (inactive and current) is the
same before and after, it stays shut off, and the test undefines it at the end.  Its name,
``vmbench-it-user-<hex>``, is not a vmbench run's (``vmbench-<r|p><8 hex>-``) and it has no
vmbench metadata, so ``vmbench cleanup`` would leave it alone as it leaves a user's domains.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import textwrap

import pytest

from tests.integration.conftest import ROOT, URI, flat
from vmbench.drivers import read_current
from vmbench.drivers.libvirt.current import read_domain
from vmbench.drivers.libvirt.driver import NAME_RE
from vmbench.errors import HypervisorError
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import CpuConfig, IoLimits
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, ImageFormat

libvirt = pytest.importorskip("libvirt")


def domain_xml(name: str, disk: str, data: str) -> str:
    return textwrap.dedent(f"""\
        <domain type='qemu'>
          <name>{name}</name>
          <description>a user's domain for vmbench's read-only test (never started)</description>
          <memory unit='MiB'>1536</memory>
          <vcpu placement='static'>3</vcpu>
          <iothreads>1</iothreads>
          <os><type arch='x86_64' machine='pc'>hvm</type></os>
          <cpu mode='custom' match='exact' check='none'>
            <model fallback='forbid'>kvm64</model>
            <feature policy='require' name='aes'/>
          </cpu>
          <devices>
            <disk type='file' device='disk'>
              <driver name='qemu' type='qcow2' cache='writeback' io='threads' discard='unmap'/>
              <source file='{disk}'/>
              <target dev='vda' bus='virtio'/>
            </disk>
            <disk type='file' device='disk'>
              <driver name='qemu' type='raw' cache='none' io='native' detect_zeroes='off'/>
              <source file='{data}'/>
              <target dev='sda' bus='scsi'/>
              <iotune>
                <total_iops_sec>800</total_iops_sec>
                <write_bytes_sec>52428800</write_bytes_sec>
              </iotune>
              <address type='drive' controller='0' bus='0' target='0' unit='0'/>
            </disk>
            <controller type='scsi' index='0' model='virtio-scsi'>
              <driver iothread='1'/>
            </controller>
          </devices>
        </domain>
        """)


@pytest.fixture(scope="module")
def domain(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("integration tests need root (run `make test` as root)")
    subprocess.run([str(ROOT / "scripts" / "ensure-libvirtd")], check=True)
    tmp = tmp_path_factory.mktemp("user-vm")
    os.chmod(tmp, 0o755)  # libvirt's security driver may want to read the files (not started: it does not)
    disk, data = tmp / "root.qcow2", tmp / "data.raw"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "64M"], check=True)
    data.write_bytes(b"")
    os.truncate(data, 16 << 20)
    name = f"vmbench-it-user-{secrets.token_hex(4)}"
    assert not NAME_RE.match(name)  # not a vmbench run's domain
    conn = libvirt.open(URI)
    dom = conn.defineXML(domain_xml(name, str(disk), str(data)))
    try:
        yield conn, dom, name
    finally:
        try:
            if dom.isActive():
                dom.destroy()
        finally:
            dom.undefine()
            conn.close()


def xmls(dom) -> tuple[str, str]:
    return dom.XMLDesc(libvirt.VIR_DOMAIN_XML_INACTIVE), dom.XMLDesc(0)


def test_read_domain_reads_the_default_and_a_named_disk_and_changes_nothing(domain):
    conn, dom, name = domain
    before = xmls(dom)
    cur = read_domain(URI, name)
    assert (cur.kind, cur.ident, cur.disk, cur.source) == ("libvirt", name, "vda", f"libvirt domain {name} ({URI})")
    vm = cur.vm
    assert (vm.bus, vm.cache, vm.aio, vm.iothread, vm.format, vm.discard) == (
        Bus.VIRTIO_BLK, Cache.WRITEBACK, Aio.THREADS, False, ImageFormat.QCOW2, Discard.UNMAP)
    assert (vm.vcpus, vm.memory_mib, vm.cpu) == (3, 1536, CpuConfig(CpuMode.MODEL, "kvm64", Feature.ON))
    data = read_domain(URI, name, disk="sda")
    assert (data.vm.bus, data.vm.cache, data.vm.aio, data.vm.iothread, data.vm.detect_zeroes) == (
        Bus.VIRTIO_SCSI, Cache.NONE, Aio.NATIVE, True, DetectZeroes.OFF)
    assert data.vm.limits == IoLimits(iops=800, mbps_wr=50)
    assert data.unknown == () and data.assumed == ()
    assert xmls(dom) == before
    assert not dom.isActive()


def test_read_current_through_a_libvirt_scenario(domain, tmp_path):
    conn, dom, name = domain
    before = xmls(dom)
    s = parse_scenario(f"name: t\nhypervisor:\n  driver: libvirt\n  uri: {URI}\njobs:\n  - {{name: j1, rw: randread, bs: 4k}}\n",
                       str(tmp_path / "s.yaml"))
    cur = read_current(s, name, disk="sda")
    assert cur.disk == "sda" and cur.vm.bus is Bus.VIRTIO_SCSI
    with pytest.raises(HypervisorError, match=re.escape(f"{name} ({URI}) has no disk with target vdq")):
        read_current(s, name, disk="vdq")
    with pytest.raises(HypervisorError, match=re.escape(f"libvirt domain {name}-missing at {URI}")):
        read_current(s, f"{name}-missing")
    assert xmls(dom) == before
    assert not dom.isActive()


def test_advise_reads_the_domain_through_a_stored_run_and_changes_nothing(domain, tmp_path):
    """``vmbench advise --read-vm --domain NAME`` on a real stored run (the v2 fixture, a
    libvirt run on qemu:///system): the advice says what it read from the user's domain and
    where it differs from the run's baseline; the domain is the same before and after."""
    import shutil

    from tests.integration.conftest import vmbench

    conn, dom, name = domain
    db = tmp_path / "v2.db"
    shutil.copy(ROOT / "tests" / "data" / "results-v2.db", db)
    before = xmls(dom)
    out = vmbench("advise", "latest", "--db", str(db), "--domain", name, "--read-vm", "--wide")  # lines as they are
    assert out.returncode == 0, out.stderr
    assert f"your VM: libvirt domain {name} ({URI}), disk vda (read only, not changed)" in flat(out.stdout)
    assert "bus=virtio-blk, cache=writeback" in flat(out.stdout)
    assert "your VM differs from the run's baseline in cache writeback (the run: none)" in flat(out.stdout)
    assert xmls(dom) == before and not dom.isActive()
    bad = vmbench("advise", "latest", "--db", str(db), "--domain", name + "-missing", "--read-vm")
    assert bad.returncode != 0 and "Traceback" not in bad.stderr and name + "-missing" in bad.stderr
