"""RBD storage, pure parts: the scenario's ``storage: {type: rbd}``, the exact Ceph argv, the
target string host fio and QEMU share, fio's rbd engine in place of the kernel's, the network
disk and the secret in libvirt's XML, and the evidence reading aio as not applicable."""

import json
import xml.etree.ElementTree as ET
from dataclasses import replace

import pytest
from tests.records import as_measurement

from vmbench.drivers.libvirt.evidence import applied_from_readings
from vmbench.drivers.libvirt.secrets import USAGE_RE, secret_xml
from vmbench.drivers.libvirt.xml import DomainSpec, disk_elements, rbd_disk
from vmbench.drivers.qemu_cmdline import NOT_APPLICABLE
from vmbench.errors import HypervisorError, ScenarioError, VmbenchError
from vmbench.fio.job import FioJob, check_identical, fio_argv, precondition_argv
from vmbench.fio.rbd import RbdTarget, parse_target
from vmbench.scenario.loader import parse_scenario
from vmbench.scenario.model import CephConfig, VmConfig
from vmbench.scenario.backend import StorageType
from vmbench.settings import Cache
from vmbench.storage.cephcli import ceph_argv, rbd_argv
from vmbench.storage.rbd import create_argv, osd_counts, parse_health, parse_keyring, pool_facts, volume_target

CFG = CephConfig(pool="vmbench", conf="/etc/ceph/ceph.conf", user="vmbench")
NAME = "vmbench-r0000000a-1-scratch.raw"
TARGET = "rbd:vmbench/vmbench-r0000000a-1-scratch:id=vmbench:conf=/etc/ceph/ceph.conf"
SERIAL = "VMB0000000aS001"

BASE = """
name: rbd
storage: {type: rbd, pool: vmbench, ceph: {conf: /etc/ceph/ceph.conf, user: vmbench}}
jobs: [{name: j, rw: randwrite, bs: 4k, iodepth: 4, size: 64m, runtime: 5s}]
"""


def test_scenario_reads_the_pool_and_the_client():
    s = parse_scenario(BASE, "rbd.yaml")
    assert s.storage.type is StorageType.RBD and s.storage.ceph == CFG and s.storage.pool == "vmbench"
    assert s.storage.describe() == "RBD images in Ceph pool vmbench (client.vmbench), scratch 1g"
    with_keyring = BASE.replace("user: vmbench}", "user: vmbench, keyring: /etc/ceph/k}")
    assert parse_scenario(with_keyring, "rbd.yaml").storage.ceph.keyring == "/etc/ceph/k"


@pytest.mark.parametrize("storage, words", [
    ("{type: rbd, pool: vmbench}", "storage.ceph: type rbd needs ceph:"),
    ("{type: rbd, ceph: {user: client.vmbench}}", "name the user without 'client.'"),
    ("{type: rbd, ceph: {conf: etc/ceph.conf}}", "is not an absolute file path on the host"),
    ("{type: rbd, pool: 'a b', ceph: {}}", "is not a Ceph pool name"),
    ("{type: rbd, dataset: tank/x, ceph: {}}", "applies to ZFS storage (type: zfs or zfs-dataset), not type rbd"),
    ("{type: rbd, ceph: {user: x, secret: AQAbc}}", "storage.ceph.secret: unknown key"),
])
def test_scenario_refuses_bad_rbd_storage(storage, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(BASE.replace("{type: rbd, pool: vmbench, ceph: {conf: /etc/ceph/ceph.conf, user: vmbench}}", storage), "rbd.yaml")
    assert words in str(err.value)
    assert "AQAbc" not in str(err.value)  # a key given by mistake is never quoted


def test_qcow2_and_proxmox_are_refused_on_rbd():
    with pytest.raises(ScenarioError, match="format qcow2 is not possible on RBD"):
        parse_scenario(BASE + "vm: {format: qcow2}\n", "rbd.yaml")
    pve = BASE + "hypervisor: {driver: proxmox, host: 127.0.0.1, node: pve, template: 9000, storage: local-zfs, token: {id: 'root@pam!vmbench', secret_file: /t}}\n"
    # on Proxmox, type rbd names the node's rbd storage: its pool and client are PVE's, refused here
    with pytest.raises(ScenarioError, match=r"rbd.yaml:3: storage.pool: with driver proxmox the Ceph pool and client are "
                                            r"the node's rbd storage's"):
        parse_scenario(pve, "rbd.yaml")


def test_ceph_argv_and_parsing():
    limits = ["--rados-osd-op-timeout", "30", "--rados-mon-op-timeout", "30"]  # an OSD down: an error, never a hang
    assert ceph_argv(CFG, "health") == ["ceph", "--conf", "/etc/ceph/ceph.conf", "--id", "vmbench", *limits, "health", "--format", "json"]
    keyed = replace(CFG, keyring="/k")
    assert rbd_argv(keyed, "ls") == ["rbd", "--conf", "/etc/ceph/ceph.conf", "--id", "vmbench", "--keyring", "/k", *limits, "ls"]
    assert create_argv(CFG, NAME, 1 << 30)[-4:] == ["create", "--size", "1024M", "vmbench/vmbench-r0000000a-1-scratch"]
    assert create_argv(CFG, NAME, (1 << 20) + 1)[-2] == "2M"  # rounded up, never smaller than asked
    assert parse_health('{"status": "HEALTH_WARN", "checks": {"POOL_NO_REDUNDANCY": {"summary": {"message": "1 pool(s) have no replicas"}}}}') \
        == ("HEALTH_WARN", ["POOL_NO_REDUNDANCY: 1 pool(s) have no replicas"])
    dump = {"pools": [{"pool_name": "vmbench", "size": 1, "min_size": 1, "pg_num": 32, "application_metadata": {"rbd": {}}}],
            "osds": [{"osd": 0, "up": 1, "in": 1}, {"osd": 1, "up": 0, "in": 1}]}
    assert pool_facts(dump, "vmbench") == {"size": 1, "min_size": 1, "pg_num": 32, "applications": ["rbd"]}
    assert pool_facts(dump, "other") is None
    assert osd_counts(dump) == {"osds": 2, "osds_up": 1, "osds_in": 2}
    ring = "[client.admin]\n\tkey = AAAA\n[client.vmbench]\n\tkey = AQBxyz==\n\tcaps mon = \"profile rbd\"\n"
    assert parse_keyring(ring, "vmbench") == "AQBxyz==" and parse_keyring(ring, "other") is None


def test_one_target_string_names_image_user_and_conf():
    t = volume_target(CFG, NAME)
    assert str(t) == TARGET and parse_target(TARGET) == t and t.spec == "vmbench/vmbench-r0000000a-1-scratch"
    assert parse_target("/dev/zvol/tank/x") is None
    keyed = RbdTarget("p", "i", "u", "/c", "/k")
    assert parse_target(str(keyed)) == keyed and keyed.env_prefix() == ["env", "CEPH_CONF=/c", "CEPH_ARGS=--keyring=/k"]
    with pytest.raises(ValueError):
        parse_target("rbd:pool-only")


def test_host_fio_on_rbd_is_the_same_job_through_librbd():
    job = FioJob(name="j", rw="randwrite", bs="4k", iodepth=16, numjobs=1, runtime=5, ramp=1, size=64 << 20)
    host = fio_argv(job, TARGET, "/w/out.json")
    assert host[:3] == ["env", "CEPH_CONF=/etc/ceph/ceph.conf", "fio"]
    assert host[4:8] == ["--ioengine=rbd", "--pool=vmbench", "--rbdname=vmbench-r0000000a-1-scratch", "--clientname=vmbench"]
    assert not any(a.startswith(("--filename=", "--ioengine=libaio")) for a in host)
    guest = fio_argv(job, "/dev/vdb", "/w/out.json")
    check_identical(host, guest)  # the engine and the target differ, nothing else
    with pytest.raises(VmbenchError):
        check_identical(host, fio_argv(replace(job, iodepth=4), "/dev/vdb", "/w/out.json"))
    pre = precondition_argv(job, TARGET, "/w/pre.json")
    assert pre[:4] == ["env", "CEPH_CONF=/etc/ceph/ceph.conf", "fio", "--name=precondition-j"]
    assert "--ioengine=rbd" in pre and "--pool=vmbench" in pre and not any(a.startswith("--filename=") for a in pre)


def _spec(**vm) -> DomainSpec:
    return DomainSpec(name="vmbench-r0000000a-1", run_tag="r0000000a", vm=replace(VmConfig(), **vm), domain_type="qemu",
                      kernel="/k", initrd="/i", cmdline="c", root_path="/p/root.qcow2", scratch_path=TARGET,
                      scratch_serial=SERIAL, console_log="/c.log", scratch_kind="rbd", rbd=rbd_disk(TARGET, "vmbench-r0000000a-1"))


def test_rbd_scratch_is_a_network_disk_with_the_secret_by_usage():
    disk = next(e for e in disk_elements(_spec(cache=Cache.WRITEBACK)) if e.findtext("serial") == SERIAL)
    want = f"""<disk type="network" device="disk">
  <driver name="qemu" type="raw" cache="writeback" />
  <source protocol="rbd" name="vmbench/vmbench-r0000000a-1-scratch">
    <config file="/etc/ceph/ceph.conf" />
    <auth username="vmbench"><secret type="ceph" usage="vmbench-r0000000a-1" /></auth>
  </source>
  <target dev="vdb" bus="virtio" />
  <serial>{SERIAL}</serial>
</disk>"""
    assert ET.canonicalize(ET.tostring(disk, encoding="unicode"), strip_text=True) == ET.canonicalize(want, strip_text=True)


def test_secret_is_ephemeral_private_and_named_like_the_vm():
    root = ET.fromstring(secret_xml("vmbench-r0000000a-1", "r0000000a", "vmbench"))
    assert root.attrib == {"ephemeral": "yes", "private": "yes"}
    assert root.find("usage").attrib == {"type": "ceph"} and root.findtext("usage/name") == "vmbench-r0000000a-1"
    assert root.findtext("description").startswith("vmbench run r0000000a:")
    assert USAGE_RE.match("vmbench-r0000000a-1") and not USAGE_RE.match("client.admin secret")


def test_evidence_reads_aio_as_not_applicable_on_rbd():
    xml = ET.tostring(ET.Element("domain"), encoding="unicode")
    dom = ET.fromstring(xml)
    devices = ET.SubElement(dom, "devices")
    for e in disk_elements(_spec()):
        devices.append(e)
    applied = applied_from_readings({"live_xml": ET.tostring(dom, encoding="unicode")}, TARGET, SERIAL)
    assert applied.config_aio == NOT_APPLICABLE and applied.config_cache == "none" and applied.config_format == "raw"


def test_host_reference_follows_the_librbd_cache_qemu_gives_each_cell():
    from vmbench.run.plan import make_plan
    from vmbench.storage.rbd import rbd_host_target

    s = parse_scenario(BASE + "vm: {cache: none}\nvary: {cache: [directsync, writeback, unsafe]}\n", "rbd.yaml")
    plan = make_plan(s)
    refs = plan.host_references()
    assert [(b.cells[0].name, name) for b, name in refs] == [("baseline", "baseline"), ("cache=writeback", "cache=writeback")]
    assert {c.name: plan.host_cell(c) for c in plan.cells} == {
        "baseline": "baseline", "cache=directsync": "baseline", "cache=writeback": "cache=writeback", "cache=unsafe": "cache=writeback"}
    assert rbd_host_target(TARGET, Cache.NONE) == TARGET + ":rbd_cache=false"
    on = parse_target(rbd_host_target(TARGET, Cache.WRITEBACK))
    assert on.cache is True and on.env_prefix() == ["env", "CEPH_CONF=/etc/ceph/ceph.conf", "CEPH_ARGS=--rbd_cache=true"]


def test_short_ceph_version():
    from vmbench.storage.rbd import short_version

    assert short_version("ceph version 16.2.15 (618f440892089921c3e944a991122ddc44e60516) pacific (stable)") == "16.2.15 pacific"
    assert short_version("something else") == "something else"


def test_rados_ceiling_is_planned_once_for_each_read_or_write_job():
    from vmbench.run.plan import make_plan
    from vmbench.storage.radosbench import read_argv, write_argv

    s = parse_scenario(BASE.replace("jobs: [", "jobs: [{name: mix, rw: randrw, bs: 4k, size: 64m, runtime: 5s}, ")
                       + "vary: {cache: [writeback]}\nrepeats: 2\n", "rbd.yaml")
    plan = make_plan(s)
    rados = [(st.cell, st.layer, st.job, st.repeat) for st in plan.steps() if st.layer == "rados"]
    assert rados == [("baseline", "rados", "j", 1), ("baseline", "rados", "j", 2)]  # not the mixed job, not per cache setting
    assert plan.summary()["rados_measurements"] == 2
    job = s.jobs[1]
    assert write_argv(CFG, job, "vmbench-r0000000a-0badcafe") == [
        "rados", "--conf", "/etc/ceph/ceph.conf", "--id", "vmbench", "--rados-osd-op-timeout", "30", "--rados-mon-op-timeout", "30",
        "-p", "vmbench", "-N", "vmbench-bench.vmbench-r0000000a-0badcafe", "bench", "5", "write",
        "-b", "4096", "-t", "4", "--max-objects", "16384", "--no-cleanup", "--run-name", "vmbench-r0000000a-0badcafe",
        "--format", "json"]  # the job's 64 MiB in 4 KiB objects, in the bench's own namespace
    assert read_argv(CFG, job, "x", "rand")[11:] == ["-N", "vmbench-bench.x", "bench", "5", "rand", "-t", "4", "--run-name", "x",
                                                     "--format", "json"]
    assert "rados_measurements" not in make_plan(parse_scenario(BASE.replace("type: rbd, pool: vmbench, ceph: {conf: /etc/ceph/ceph.conf, user: vmbench}", "type: dir"), "d.yaml")).summary()


def test_a_rados_bench_writes_the_jobs_size_at_most_and_is_found_by_its_marker():
    from vmbench.storage.radosbench import (MAX_BENCH_BYTES, bench_bytes, bench_objects, cleanup_argvs, marker_argv,
                                            old_cleanup_argv, write_argv)

    read = FioJob(name="r", rw="read", bs=1 << 20, iodepth=4, size=256 << 20, runtime=10)
    assert bench_objects(read) == 256 and bench_bytes(read) == 257 << 20  # rados bench may start one more
    pre = write_argv(CFG, read, "vmbench-r0000000a-0badcafe", prefill=True)
    assert pre[pre.index("bench"):pre.index("bench") + 3] == ["bench", "300", "write"] and "--max-objects" in pre
    assert bench_objects(replace(read, size=64 << 30)) == MAX_BENCH_BYTES >> 20  # capped at 1 GiB
    assert bench_objects(replace(read, size=1 << 20, iodepth=8)) == 8  # one object per operation in flight at least
    lim = ["--rados-osd-op-timeout", "30", "--rados-mon-op-timeout", "30"]
    client = ["rados", "--conf", "/etc/ceph/ceph.conf", "--id", "vmbench", *lim, "-p", "vmbench"]
    assert marker_argv(CFG, "vmbench-r0000000a-0badcafe") == [*client, "-N", "vmbench-bench", "put", "vmbench-r0000000a-0badcafe", "-"]
    assert cleanup_argvs(CFG, "vmbench-r0000000a-0badcafe") == [
        ([*client, "-N", "vmbench-bench.vmbench-r0000000a-0badcafe", "cleanup", "--prefix", "benchmark_data", "--run-name",
          "vmbench-r0000000a-0badcafe"], True),
        ([*client, "-N", "vmbench-bench.vmbench-r0000000a-0badcafe", "rm", "vmbench-r0000000a-0badcafe"], False),
        ([*client, "-N", "vmbench-bench", "rm", "vmbench-r0000000a-0badcafe"], True)]  # the marker last
    assert old_cleanup_argv(CFG, "benchmark_data_pve1_4242")[-3:] == ["cleanup", "--prefix", "benchmark_data_pve1_4242"]


def test_the_pool_must_hold_what_a_run_writes_with_a_margin():
    from vmbench.run.capacity import rbd_need
    from vmbench.run.plan import make_plan
    from vmbench.storage.radosbench import PoolSpace, room_refusal

    s = parse_scenario(BASE.replace("jobs: [", "jobs: [{name: seqr, rw: read, bs: 1m, size: 512m, runtime: 5s}, "), "rbd.yaml")
    need, objects, what = rbd_need(make_plan(s))
    assert need == s.storage.scratch_size + (513 << 20) and what == "1 scratch image of 1.0G and the RADOS bench of job seqr, 513.0M"
    df = {"pools": [{"name": "vmbench", "stats": {"max_avail": 1800 << 20, "stored": 100 << 20, "objects": 30, "quota_bytes": 0,
                                                  "quota_objects": 0}}]}
    space = PoolSpace.from_df(df, "vmbench")
    assert PoolSpace.from_df(df, "other") is None
    msg, hint = room_refusal(space, "vmbench", need, objects, what)
    assert msg.startswith("Ceph pool vmbench has 1.8G free (ceph df: max_avail); this run writes up to 1.5G (1 scratch")
    assert "storage.scratch_size" in hint
    assert room_refusal(replace(space, max_avail=10 << 30), "vmbench", need, objects, what) is None
    quota = replace(space, max_avail=10 << 30, quota_bytes=1 << 30)
    assert "quota leaves 924.0M (100.0M stored of max_bytes 1.0G)" in room_refusal(quota, "vmbench", need, objects, what)[0]
    few = replace(space, max_avail=10 << 30, quota_objects=100)
    assert "quota leaves 70 objects" in room_refusal(few, "vmbench", need, objects, what)[0]


def test_rados_bench_json_after_its_hints_line():
    from vmbench.storage.radosbench import parse_bench

    text = ('hints = 1\n{"concurrent_ios":"8","total_time_run":"3.001265","total_writes_made":"15543","write_size":"4096",'
            '"bandwidth":"20.229754","average_iops":"5178","average_latency":"0.001543","max_latency":"0.005615","min_latency":"0.000710"}')
    result, data = parse_bench(text)
    assert round(result.iops) == 5179 and round(result.bw_bytes) == round(15543 / 3.001265 * 4096)
    assert result.avg_lat_s == 0.001543 and data["concurrent_ios"] == "8"
    with pytest.raises(ValueError):
        parse_bench("hints = 1\n")


#: what an earlier vmbench stored: the manager's rates sampled every 2 s (still read by the report)
OLD_SERIES = {"t_s": [0.0, 6.5, 10.5], "read_mb_s": [0.0, 8.0, 4.0], "write_mb_s": [0.0, 2.0, 0.0],
              "read_ops": [0.0, 2000.0, 1000.0], "write_ops": [0.0, 500.0, 0.0], "commit_ms": [0.0, 5.0, None],
              "apply_ms": [0.0, 3.0, None]}


def _df(rd, rd_bytes, wr, wr_bytes, pool="vmbench"):
    return {"pools": [{"name": "other", "stats": {"rd": 9, "rd_bytes": 9, "wr": 9, "wr_bytes": 9}},
                      {"name": pool, "stats": {"rd": rd, "rd_bytes": rd_bytes, "wr": wr, "wr_bytes": wr_bytes, "max_avail": 1}}]}


def test_the_pools_io_is_two_readings_of_its_counters_around_fio():
    from vmbench.telemetry.ceph import osd_latency, pool_counters, summary, window_series

    before, after = pool_counters(_df(10, 4096, 5, 2048), "vmbench"), pool_counters(_df(1010, 4096 + 8_000_000, 2505, 2048 + 20_000_000), "vmbench")
    assert before == {"rd": 10, "rd_bytes": 4096, "wr": 5, "wr_bytes": 2048} and pool_counters(_df(0, 0, 0, 0), "nope") is None
    perf = {"osdstats": {"osd_perf_infos": [{"id": 0, "perf_stats": {"commit_latency_ms": 4, "apply_latency_ms": 4}},
                                            {"id": 1, "perf_stats": {"commit_latency_ms": 6, "apply_latency_ms": 2}}]}}
    assert osd_latency(perf) == (5.0, 3.0) and osd_latency({}) == (None, None)
    series = window_series(before, after, 10.0, osd_latency(perf))
    assert (series["read_bytes"], series["write_bytes"], series["window_s"]) == (8_000_000, 20_000_000, 10.0)
    assert summary(series) == {"pool_read_mb_s": 0.8, "pool_write_mb_s": 2.0, "pool_read_ops": 100.0, "pool_write_ops": 250.0,
                               "osd_commit_ms": 5.0, "osd_apply_ms": 3.0}
    assert summary(window_series(before, after, 3.0))["pool_write_mb_s"] == 20 / 3  # a short job keeps its whole window
    # an older run's sampled rates: the means from the manager's lag on
    assert summary(OLD_SERIES) == {"pool_read_mb_s": 6.0, "pool_write_mb_s": 1.0, "pool_read_ops": 1500.0, "pool_write_ops": 250.0,
                                   "osd_commit_ms": 5.0, "osd_apply_ms": 3.0}
    assert summary({}) == {}


class _Ceph:
    """A host whose ``ceph`` commands answer from a list of JSON documents, in turn."""
    name = "host"

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def run(self, argv, **kw):
        from vmbench.command import Completed
        self.asked.append(list(argv))
        return Completed(tuple(argv), 0, json.dumps(self.answers.pop(0)), "")


def test_the_ceph_sampler_asks_three_commands_none_while_fio_runs():
    from vmbench.telemetry.ceph import LAG_S, CephPool, CephSampler

    host = _Ceph([_df(0, 0, 0, 0), _df(0, 0, 100, 409600), {"osdstats": {"osd_perf_infos": []}}])
    slept, now = [], [100.0]
    sampler = CephSampler(host, CephPool(("ceph", "--id", "vmbench"), "vmbench"), sleep=slept.append, clock=lambda: now[0])
    sampler.start()
    assert host.asked == [["ceph", "--id", "vmbench", "df", "detail", "--format", "json"]]
    now[0] = 104.0  # fio took 4 s; its ramp and runtime were 5 s: the 4 s it ran count
    got = sampler.stop(5.0)["ceph"]
    assert slept == [LAG_S] and [a[3:5] for a in host.asked[1:]] == [["df", "detail"], ["osd", "perf"]]
    assert got["window_s"] == 4.0 and got["write_ops"] == [25.0] and got["commit_ms"] == [None]
    assert sampler.stop() == {}  # once


HEALTH_OSD_DOWN = json.dumps({"status": "HEALTH_WARN", "checks": {
    "OSD_DOWN": {"severity": "HEALTH_WARN", "summary": {"message": "1 osds down", "count": 1}},
    "OSD_HOST_DOWN": {"severity": "HEALTH_WARN", "summary": {"message": "1 host (1 osds) down", "count": 1}},
    "POOL_NO_REDUNDANCY": {"severity": "HEALTH_WARN", "summary": {"message": "1 pool(s) have no replicas configured"}}}})


def test_degrading_checks_are_the_ones_that_cost_io():
    from vmbench.telemetry.ceph import degrading_checks
    assert degrading_checks(HEALTH_OSD_DOWN) == {"OSD_DOWN": "1 osds down"}
    full = {"status": "HEALTH_WARN", "checks": {"POOL_FULL": {"summary": {"message": "1 pool(s) full"},
                                                              "detail": [{"message": "pool 'vmbench' is full (running out of quota)"}]}}}
    assert degrading_checks(json.dumps(full)) == {"POOL_FULL": "1 pool(s) full (pool 'vmbench' is full (running out of quota))"}
    assert degrading_checks('{"status": "HEALTH_OK", "checks": {}}') == {} and degrading_checks("not json") == {}


class _Health:
    """A transport whose ``ceph health`` answers come from a list, in turn."""
    name = "host"

    def __init__(self, answers):
        self.answers, self.asked = list(answers), []

    def run(self, argv, **kw):
        from vmbench.command import Completed
        self.asked.append(list(argv))
        answer = self.answers.pop(0)
        return Completed(tuple(argv), 0 if answer is not None else 1, answer or "", "" if answer is not None else "timed out")


def test_the_watch_ends_a_run_when_a_degrading_check_appears_not_one_the_run_began_with():
    from vmbench.telemetry.ceph import CephPool, CephWatch
    now = [0.0]
    host = _Health([None, HEALTH_OSD_DOWN])
    watch = CephWatch(host, CephPool(("ceph", "--id", "vmbench"), "vmbench"), interval=30, stalled_interval=5,
                      clock=lambda: now[0])
    now[0] = 20.0
    watch.check()  # not yet: 30 s apart while fio makes progress
    assert host.asked == []
    watch.check(stalled=True)  # stalled: asked at once
    assert host.asked == [["ceph", "--id", "vmbench", "health", "detail", "--format", "json"]]
    assert watch.said == "Ceph did not answer ceph health on host"  # no answer: said, not an error
    now[0] = 25.0
    with pytest.raises(HypervisorError, match="Ceph reported OSD_DOWN: 1 osds down while fio ran on pool vmbench"):
        watch.check(stalled=True)
    known = CephPool(("ceph",), "p", known=frozenset({"OSD_DOWN"}))
    CephWatch(_Health([HEALTH_OSD_DOWN]), known, interval=0).check()  # the run began with it: flagged, not stopped


def test_what_the_pool_did_beside_a_write_job_is_not_taken_for_the_jobs():
    from vmbench.report.cephnotes import ceph_pool_notes
    from vmbench.report.rows import Figures, telemetry_notes

    assert ceph_pool_notes(4.0, 0.01, 1.02) == []
    assert ceph_pool_notes(4.0, 39.5, 1.46) == [
        "pool also read 39.5 MB/s during this write job: not fio's (another client of the pool, or librbd reading the "
        "image's header and object map)",
        "pool wrote 1.46 x fio's: more than fio wrote (another client of the pool, or librbd's object map), not replication "
        "(the pool's counters hold one copy)"]
    fig = Figures(iops=1000.0, mb_s=4.0, p50_ms=1.0, p95_ms=1.0, p99_ms=1.0, p999_ms=1.0, repeats=1, cv=None, job_hash="h",
                  pool_read_mb_s=39.5, pool_write_mb_s=5.8, write_ampl=1.46, osd_commit_ms=2.0)
    row = as_measurement(job_params={"rw": "randwrite"}, side="host")
    assert any(n.startswith("pool also read 39.5") for n in telemetry_notes(row, fig))  # a Ceph row's notes
    assert not any("pool also read" in n for n in telemetry_notes(as_measurement(job_params={"rw": "randread"}), fig))
    assert not any("pool also read" in n for n in telemetry_notes(row, replace(fig, osd_commit_ms=None)))  # not Ceph's
