"""fio jobs: exact argv, identical on both sides; json+ parsing and exact percentiles."""

import json
from dataclasses import replace

import pytest

from vmbench.errors import VmbenchError
from vmbench.fio.job import FioJob, JobFile, check_identical, comparable_params, fio_argv, fio_env, job_hash, precondition_argv
from vmbench.fio.jobfile import digest
from vmbench.fio.profiles import PROFILES, expand
from vmbench.fio.result import FioOutputError, Histogram, parse_fio_json

JOB = FioJob(name="4k-randwrite", rw="randwrite", bs=4096, iodepth=4, size=512 << 20, runtime=10, ramp=2)


def test_fio_argv_exact():
    assert fio_argv(JOB, "/dev/vdb", "/run/vmbench/out.json") == [
        "fio", "--name=4k-randwrite", "--filename=/dev/vdb", "--rw=randwrite", "--bs=4096", "--iodepth=4",
        "--numjobs=1", "--ioengine=libaio", "--direct=1", "--size=536870912", "--time_based=1", "--runtime=10",
        "--ramp_time=2", "--group_reporting=1", "--randrepeat=0", "--percentile_list=50:95:99:99.9",
        "--output-format=json+", "--output=/run/vmbench/out.json",
    ]


def test_fio_argv_with_fio_logs():
    argv = fio_argv(JOB, "/dev/vdb", "/run/vmbench/out.json", log_prefix="/run/vmbench/log-ab12")
    assert argv[-5:] == ["--write_iops_log=/run/vmbench/log-ab12", "--write_lat_log=/run/vmbench/log-ab12",
                         "--log_avg_msec=1000", "--output-format=json+", "--output=/run/vmbench/out.json"]
    assert argv[:-5] == fio_argv(JOB, "/dev/vdb", "o")[:-2]


def test_optional_fio_options():
    job = replace(JOB, rw="randrw", rwmixread=70, sync=True, fsync=1, runtime=2.5)
    argv = fio_argv(job, "t", "o")
    assert "--rwmixread=70" in argv and "--sync=1" in argv and "--fsync=1" in argv and "--runtime=2.5" in argv


def test_host_and_guest_differ_only_in_target_and_output():
    host = fio_argv(JOB, "/var/lib/vmbench/pool/x.raw", "/tmp/a.json")
    guest = fio_argv(JOB, "/dev/vdb", "/run/vmbench/b.json")
    check_identical(host, guest)
    with pytest.raises(VmbenchError, match="refusing to compare"):
        check_identical(host, fio_argv(replace(JOB, iodepth=8), "/dev/vdb", "/o"))


def test_log_paths_differ_between_sides_but_nothing_else_may():
    host = fio_argv(JOB, "/pool/x.raw", "/w/a.json", log_prefix="/w/log-1111")
    guest = fio_argv(JOB, "/dev/vdb", "/run/vmbench/b.json", log_prefix="/run/vmbench/log-2222")
    check_identical(host, guest)
    assert not any("log-" in a or "log_avg_msec" in a for a in comparable_params(host))
    # fio's logs do not change the I/O: their averaging may differ, and a side stored before
    # vmbench kept logs (a resumed run) still compares
    check_identical(host, [a.replace("=1000", "=500") for a in guest])
    check_identical(host, fio_argv(JOB, "/dev/vdb", "/o"))
    with pytest.raises(VmbenchError, match="refusing to compare"):
        check_identical(host, [a.replace("--iodepth=4", "--iodepth=8") for a in guest])


def test_job_file_copies_compare_by_the_digest_of_their_rewritten_text():
    jf = FioJob(name="mine", jobfile=JobFile(path="my.fio", text="[x]\nfilename=/dev/sdb\nrw=read\n"))
    d = digest(jf.jobfile.text)
    host = fio_argv(jf, "/pool/x.raw", "/w/o.json", jobfile_path=f"/w/job-1111aaaa-{d}.fio")
    guest = fio_argv(jf, "/dev/vdb", "/run/vmbench/o.json", jobfile_path=f"/run/vmbench/job-2222bbbb-{d}.fio")
    check_identical(host, guest)
    assert comparable_params(guest) == ["--output-format=json+", f"jobfile={d}"]
    other = digest("[x]\nfilename=/dev/sdb\nrw=write\n")
    with pytest.raises(VmbenchError, match=f"refusing to compare them: jobfile=({d}|{other}) jobfile=({d}|{other})"):
        check_identical(host, fio_argv(jf, "/dev/vdb", "/o.json", jobfile_path=f"/run/vmbench/job-2222bbbb-{other}.fio"))


def test_jobfile_argv_and_env():
    jf = FioJob(name="mine", jobfile=JobFile(path="my.fio", text="[x]\nfilename=${VMBENCH_TARGET}\n"))
    assert fio_argv(jf, "/dev/vdb", "/o.json", jobfile_path="/run/vmbench/job.fio") == [
        "fio", "--output-format=json+", "--output=/o.json", "/run/vmbench/job.fio"]
    assert fio_env(jf, "/dev/vdb")["VMBENCH_TARGET"] == "/dev/vdb"
    check_identical(fio_argv(jf, "a", "b", jobfile_path="/h/j.fio"), fio_argv(jf, "c", "d", jobfile_path="/g/j.fio"))


def test_precondition_argv_exact():
    assert precondition_argv(JOB, "/dev/vdb", "/o.json") == [
        "fio", "--name=precondition-4k-randwrite", "--filename=/dev/vdb", "--rw=write", "--bs=1048576", "--iodepth=8",
        "--ioengine=libaio", "--direct=1", "--size=536870912", "--output-format=json", "--output=/o.json",
    ]


def test_job_hash_changes_with_parameters():
    assert job_hash(JOB) == job_hash(replace(JOB))
    assert job_hash(JOB) != job_hash(replace(JOB, bs=8192))


def test_describe_and_sync():
    assert JOB.describe() == "randwrite 4k QD4"
    assert not JOB.is_sync and replace(JOB, sync=True).is_sync and replace(JOB, fsync=1).is_sync


def test_profiles_expand():
    assert len(expand("tuning-matrix", {})) == 12
    assert all(j.sync and j.iodepth == 4 for j in expand("tuning-matrix", {}))
    oltp = expand("oltp", {"runtime": 3.0})[0]
    assert (oltp.rw, oltp.rwmixread, oltp.bs, oltp.fsync, oltp.runtime) == ("randrw", 70, 8192, 1, 3.0)
    assert set(PROFILES) == {"tuning-matrix", "boot-storm", "oltp", "metadata-churn", "backup-stream", "cache-buster"}
    with pytest.raises(ValueError, match="not in profile"):
        expand("tuning-matrix", {}, ("nope",))


def test_parse_real_jsonplus(data_dir):
    text = (data_dir / "fio-randrw-jsonplus.json").read_text()
    res = parse_fio_json(text)
    raw = json.loads(text)["jobs"][0]
    assert [d.name for d in res.directions] == ["read", "write"]
    assert res.iops == pytest.approx(raw["read"]["iops"] + raw["write"]["iops"])
    assert res.bw_bytes == raw["read"]["bw_bytes"] + raw["write"]["bw_bytes"]
    assert res.fio_version == "fio-3.33"
    # our percentiles from the bins are exactly fio's own, per direction
    for d in res.directions:
        fio_pct = raw[d.name]["clat_ns"]["percentile"]
        assert d.clat.percentile(50.0) == fio_pct["50.000000"]
        assert d.clat.percentile(99.0) == fio_pct["99.000000"]
        assert d.clat.percentile(99.9) == fio_pct["99.900000"]
        assert d.clat.count == raw[d.name]["clat_ns"]["N"]
    p = res.percentiles()
    assert p[50.0] <= p[95.0] <= p[99.0] <= p[99.9]


def test_warnings_before_json_are_skipped(data_dir):
    text = "fio: some warning\n" + (data_dir / "fio-randrw-jsonplus.json").read_text()
    assert parse_fio_json(text).iops > 0


def test_job_error_and_no_io_refused():
    with pytest.raises(FioOutputError, match="failed with error 5"):
        parse_fio_json(json.dumps({"jobs": [{"jobname": "x", "error": 5}]}))
    empty = {"jobs": [{"jobname": "x", "error": 0, "read": {"total_ios": 0}, "write": {"total_ios": 0}}]}
    with pytest.raises(FioOutputError, match="no I/O"):
        parse_fio_json(json.dumps(empty))
    with pytest.raises(FioOutputError, match="no JSON"):
        parse_fio_json("fio: command line error")


def test_histogram_merge_and_percentiles():
    a = Histogram({100: 50, 200: 50})
    b = Histogram({200: 50, 1000: 50})
    m = a.merge(b)
    assert m.count == 200
    assert m.percentile(25) == 100 and m.percentile(50) == 200 and m.percentile(75) == 200 and m.percentile(99) == 1000
    assert Histogram().percentile(50) is None
    assert Histogram.from_json(m.to_json()) == m
