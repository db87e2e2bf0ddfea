"""File jobs (issue 30, item 1): fio's file engines and many files run in each filesystem
layer's mount, never on a block layer; the plan schedules them so, the host's row is a
filesystem of the same type, fio gets ``--directory``, and the report names what the engines count."""

from __future__ import annotations

import pytest

from tests.records import as_cells, as_measurement
from vmbench.errors import ScenarioError
from vmbench.fio import jobfile
from vmbench.fio.engines import FILE_ENGINES, Reason, engine_refusal, layer_refusal
from vmbench.fio.job import FioJob, check_identical, comparable_params, fio_argv, to_precondition
from vmbench.fio.profiles import expand
from vmbench.report.filejobs import NO_HOST_ROW
from vmbench.report.render import Format, render
from vmbench.report.tables import layer_table
from vmbench.run import hostfs
from vmbench.run.plan import estimate, make_plan, runs_on
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import FilesystemLayer, LuksLayer, LvmLayer, PartitionLayer, Stack
from vmbench.settings import Filesystem

SCENARIO = """
name: fs
storage: {scratch_size: 1G}
vm: {memory: 1G}
stacks:
  - {name: lvm-ext4, layers: [partition, lvm, ext4]}
  - {name: luks-xfs, layers: [luks, xfs]}
jobs:
  - {name: 4k-randread, rw: randread, bs: 4k, size: 64M, runtime: 2s, ramp: 0s}
  - {profile: metadata-churn}
"""
BLOCK = [("raw", None, 0)]


def _stack(*layers) -> Stack:
    return Stack("s", tuple(layers))


@pytest.mark.parametrize("engine", FILE_ENGINES)
def test_every_file_engine_runs_on_filesystem_layers_and_is_refused_on_block_layers(engine):
    assert engine_refusal(engine) is None  # a job file may name it: where it runs is the layer's question
    job = FioJob(name="f", ioengine=engine, nrfiles=10, filesize=4096)
    assert job.file_job and job.file_what == f"ioengine {engine}"
    stack = _stack(PartitionLayer(), LvmLayer(), LuksLayer(), FilesystemLayer(Filesystem.XFS))
    assert [runs_on(job, stack, d) for d in range(0, 5)] == [False, False, False, False, True]
    assert runs_on(job, None, 0) is False
    for fs in Filesystem:
        assert runs_on(job, _stack(FilesystemLayer(fs)), 1)
        assert layer_refusal(f"ioengine {engine}", fs.value, True) is None
    for layer, where in (("raw", "the raw disk"), ("host", "the host's raw volume"),
                         ("partition+lvm", "layer partition+lvm (a block device)"), ("luks2", "layer luks2 (a block device)")):
        reason, message = layer_refusal(f"ioengine {engine}", layer, False)  # type: ignore[misc]
        assert reason is Reason.FILE_OPERATIONS
        assert message == (f"ioengine {engine} works on files, not on a disk: not run on {where}; "
                           "it runs in the mount of each filesystem layer (ext2/3/4, xfs, btrfs)")


def test_several_files_make_a_file_job_and_one_file_does_not():
    assert FioJob(name="n", rw="write", nrfiles=8).file_job
    assert not FioJob(name="n", rw="write", nrfiles=1).file_job and not FioJob(name="d", rw="write").file_job
    assert FioJob(name="n", rw="write", nrfiles=8).file_what == "nrfiles=8"


def test_argv_of_a_file_job_exact():
    job = expand("metadata-churn", {"nrfiles": 64, "numjobs": 2})[0]
    assert fio_argv(job, "/mnt/vmbench/vmbench-files", "/run/vmbench/o.json") == [
        "fio", "--name=meta-create", "--directory=/mnt/vmbench/vmbench-files", "--rw=read", "--bs=4096", "--iodepth=1",
        "--numjobs=2", "--ioengine=filecreate", "--direct=1", "--size=262144", "--runtime=30", "--ramp_time=0",
        "--group_reporting=1", "--randrepeat=0", "--percentile_list=50:95:99:99.9", "--nrfiles=64", "--filesize=4096",
        "--openfiles=1", "--create_on_open=1", "--output-format=json+", "--output=/run/vmbench/o.json"]
    # size-based (each file once: a time-based filecreate would reopen the files it made); the
    # directory differs between the sides like a filename does
    host = fio_argv(job, "/var/lib/vmbench/work/mnt-xfs/vmbench-files", "/w/o.json")
    check_identical(host, fio_argv(job, "/mnt/vmbench/vmbench-files", "/run/vmbench/o.json"))
    assert not any(a.startswith("--directory=") for a in comparable_params(host))
    small = expand("small-files", {})[0]
    assert fio_argv(small, "/d", "/o")[2:3] == ["--directory=/d"] and "--nrfiles=128" in fio_argv(small, "/d", "/o")


def test_file_jobs_take_no_precondition_and_block_jobs_still_do():
    meta = expand("metadata-churn", {}) + expand("small-files", {})
    assert to_precondition(meta) is None
    block = FioJob(name="r", rw="randread", size=64 << 20)
    assert to_precondition(meta + [block]) is block


def test_the_plan_runs_file_jobs_on_filesystem_layers_and_the_host_on_each_type():
    plan = make_plan(parse_scenario(SCENARIO, "fs.yaml"))
    guest = {(st.layer, st.job) for st in plan.steps() if st.side == "guest"}
    meta = ("meta-create", "meta-stat", "meta-delete")
    assert {layer for layer, job in guest if job in meta} == {"partition+lvm+ext4", "luks2+xfs"}
    assert {layer for layer, job in guest if job == "4k-randread"} == {
        "raw", "partition", "partition+lvm", "partition+lvm+ext4", "luks2", "luks2+xfs"}
    host = {(st.layer, st.job) for st in plan.steps() if st.side == "host"}
    assert host == {("host", "4k-randread")} | {(f"host+{fs}", j) for fs in ("ext4", "xfs") for j in meta}
    assert list(plan.host_filesystems()) == ["host+ext4", "host+xfs"]
    assert plan.host_measurements() == 7 and len(plan.guest_measurements()) == 6 + 2 * 3
    assert plan.file_job_layers() == [
        "file jobs (meta-create, meta-stat, meta-delete) run in the mount of filesystem layers only, never on the raw disk, "
        "a partition, LVM or LUKS, and take no precondition:",
        "  baseline: partition+lvm+ext4, luks2+xfs",
        "  host: host+ext4, host+xfs (a filesystem of each type made on the host's reference volume)"]
    summary = plan.summary()
    assert summary["host_filesystems"] == ["host+ext4", "host+xfs"]
    assert [j.get("unit") for j in summary["jobs"]] == [None, "files/s", "stats/s", "deletes/s"]
    assert estimate(plan, "tcg").total > 0


def test_a_file_job_with_no_filesystem_layer_is_refused_naming_why():
    body = SCENARIO.split("stacks:")[0] + "stacks:\n  - {name: lvm, layers: [partition, lvm]}\njobs:\n  - {profile: metadata-churn}\n"
    with pytest.raises(ScenarioError) as err:
        parse_scenario(body, "fs.yaml")
    assert "job meta-create: ioengine filecreate works on files, not on a disk: not run on the raw disk" in err.value.message
    assert "this scenario measures no filesystem layer" in err.value.message and "filesystem" in (err.value.hint or "")


def test_the_host_has_no_like_for_like_filesystem_on_a_shared_rbd_image():
    rbd = SCENARIO.replace("storage: {scratch_size: 1G}",
                           "storage: {type: rbd, pool: p, scratch_size: 1G, ceph: {conf: /etc/ceph/ceph.conf, user: admin}}")
    plan = make_plan(parse_scenario(rbd, "fs.yaml"))
    assert plan.host_filesystems() == {} and not [st for st in plan.steps() if st.side == "host" and st.job.startswith("meta")]
    assert plan.file_job_layers()[-1] == ("  host: the host has no like-for-like row (the host's target is a shared RBD image, "
                                          "not a volume of its own)")


def test_a_load_run_refuses_file_jobs():
    with pytest.raises(ScenarioError, match="file jobs .* do not run in a load run"):
        parse_scenario(SCENARIO + "load: {vms: [1, 2]}\n", "fs.yaml")


def test_a_job_file_with_a_file_engine_is_a_file_job_rewritten_to_a_directory():
    text = "[global]\nioengine=filecreate\nnrfiles=100\nfilesize=4k\nfilename_format=f.$jobnum.$filenum\n[t0]\n[t1]\ndirectory=/x\n"
    parsed = jobfile.parse(text, "fc.fio")
    jobfile.check(parsed)  # accepted: the plan puts it on filesystem layers
    assert jobfile.is_file_job(parsed)
    out, lines = jobfile.rewrite(text, "/mnt/vmbench/vmbench-files", "/run/vmbench", "ab12")
    assert "filename_format=f.$jobnum.$filenum" in out and "filename=" not in out
    assert lines[:2] == ["[t0] directory=/mnt/vmbench/vmbench-files (added: the section names no target)",
                         "[t0] + write_iops_log=/run/vmbench/log-ab12 write_lat_log=/run/vmbench/log-ab12 log_unix_epoch=1 "
                         "log_avg_msec=1000 (vmbench's time series)"]
    assert "[t1] directory=/x -> /mnt/vmbench/vmbench-files" in lines
    # unlink deletes the job's own files in vmbench's directory: allowed in a file job only
    jobfile.check(jobfile.parse(text + "unlink=1\n", "fc.fio"))
    with pytest.raises(jobfile.JobFileError, match="would delete the target"):
        jobfile.check(jobfile.parse("[w]\nrw=write\nunlink=1\n", "w.fio"))
    # one file named by directory and filename_format is one target, as before
    assert not jobfile.is_file_job(jobfile.parse("[w]\nrw=write\ndirectory=/d\nfilename_format=a\n", "w.fio"))


def _m(side, layer, job, iops, stack=None, params=None, target="/mnt/vmbench/vmbench-files", cell="baseline"):
    return as_measurement({"side": side, "cell": None if side == "host" else cell, "stack": stack, "layer": layer, "job": job,
                           "iops": iops, "bw_bytes": iops * 4096, "clat_bins": {"20000": 90, "90000": 10}, "job_hash": "m1",
                           "sync": False, "repeat": 1, "settings": {}, "target": target,
                           "job_params": params or {"ioengine": "filecreate", "nrfiles": 64}})


def test_the_report_names_files_a_second_and_the_host_row_of_the_same_filesystem():
    cells = as_cells([{"name": "baseline", "stacks": ["lvm-ext4", "btrfs"], "settings": {}, "valid": True}])
    meas = [_m("host", "host+ext4", "meta-create", 20000.0, target="/w/mnt-ext4/vmbench-files"),
            _m("guest", "partition+lvm+ext4", "meta-create", 5000.0, stack="lvm-ext4"),
            _m("guest", "btrfs", "meta-create", 4000.0, stack="btrfs")]
    t = layer_table(meas, cells, ["meta-create"])
    assert t is not None
    got = [(r["stack"], r["layer"], r["iops"], r.get("unit"), r["mb_s"], r["gap"], r.get("note", "")) for r in t.records]
    assert got == [("lvm-ext4", "host+ext4", 20000.0, "files/s", None, 1.0, ""),
                   ("lvm-ext4", "+ext4", 5000.0, "files/s", None, 4.0, ""),
                   ("btrfs", "+btrfs", 4000.0, "files/s", None, None, NO_HOST_ROW)]
    text = render([t], Format.TABLE)
    assert "IOPS or ops/s" in text and "20,000 files/s" in text and "5,000 files/s" in text
    assert "files/s, stats/s, deletes/s = fio's file engines' operations a second" in text


def test_host_filesystem_commands_and_only_the_runs_own_volume():
    xfs = FilesystemLayer(Filesystem.XFS, mount_options=("noatime",))
    assert hostfs.mount_argv("/p/vmbench-r1-1-scratch.raw", xfs, "/w/mnt-xfs", is_file=True) == [
        "mount", "-t", "xfs", "-o", "noatime,loop", "/p/vmbench-r1-1-scratch.raw", "/w/mnt-xfs"]
    assert hostfs.mount_argv("/dev/zvol/tank/vmbench-r1-1-hostref.raw", FilesystemLayer(), "/m", is_file=False) == [
        "mount", "-t", "ext4", "/dev/zvol/tank/vmbench-r1-1-hostref.raw", "/m"]
    assert hostfs.teardown_argv("/p/v", "/m") == [["umount", "/m"], ["wipefs", "--all", "--quiet", "/p/v"], ["rmdir", "/m"]]
    assert hostfs.not_ours("/p/vmbench-r1-1-scratch.raw", "r1") is None
    assert "not a volume this run created" in (hostfs.not_ours("/dev/sda", "r1") or "")
    assert "not a volume this run created" in (hostfs.not_ours("/p/vmbench-r2-1-scratch.raw", "r1") or "")
    assert "not a volume of its own" in (hostfs.not_ours("rbd:pool/img", "r1") or "")
