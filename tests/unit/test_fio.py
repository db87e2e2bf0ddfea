"""fio jobs: exact argv, identical on both sides; json+ parsing and exact percentiles."""

import json
from dataclasses import replace

import pytest

from vmbench.errors import ScenarioError, VmbenchError
from vmbench.fio.job import (TAIL_NAME, FioJob, JobFile, Metric, check_identical, comparable_params, fio_argv, fio_env, job_hash,
                             precondition_argv)
from vmbench.fio.jobfile import digest
from vmbench.fio.profiles import PROFILES, expand
from vmbench.fio.result import FioOutputError, Histogram, parse_fio_json
from vmbench.fio.runner import job_timeout
from vmbench.scenario import parse_scenario

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
    assert set(PROFILES) == {"tuning-matrix", "boot-storm", "oltp", "metadata-churn", "small-files", "backup-stream", "cache-buster"}
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


# ---- fixed rates, metrics, tails and epoch logs ------------------------------------------------


def test_fio_argv_with_tail_and_epoch_logs_exact():
    job = replace(JOB, numjobs=2, rate_iops=500, runtime=30, ramp=5)
    argv = fio_argv(job, "/dev/vdb", "/w/o.json", log_prefix="/w/log-ab12", tail_seconds=12.5, epoch_logs=True)
    io = ["--filename=/dev/vdb", "--rw=randwrite", "--bs=4096", "--iodepth=4", "--numjobs=2", "--ioengine=libaio",
          "--direct=1", "--size=536870912"]
    logs = ["--write_iops_log=/w/log-ab12", "--write_lat_log=/w/log-ab12", "--log_avg_msec=1000", "--log_unix_epoch=1"]
    assert argv == [
        "fio", "--name=4k-randwrite", *io, "--time_based=1", "--runtime=30", "--ramp_time=5", "--group_reporting=1",
        "--randrepeat=0", "--percentile_list=50:95:99:99.9", "--rate_iops=500", *logs,
        "--name=vmbench-tail", *io, "--group_reporting=1", "--randrepeat=0", "--rate_iops=500", *logs,
        "--stonewall", "--new_group", "--time_based=1", "--runtime=12.5", "--ramp_time=0",
        "--output-format=json+", "--output=/w/o.json",
    ]
    # without a tail or epoch stamps the argv is exactly as before
    assert fio_argv(JOB, "/dev/vdb", "/o", log_prefix="/l", tail_seconds=0, epoch_logs=False) == fio_argv(JOB, "/dev/vdb", "/o", log_prefix="/l")
    assert "--log_unix_epoch=1" in fio_argv(JOB, "t", "o", log_prefix="/l", epoch_logs=True)
    assert not any("epoch" in a for a in fio_argv(JOB, "t", "o", epoch_logs=True))  # no logs, nothing to stamp


def test_tail_repeats_every_io_option_of_the_measured_job():
    job = replace(JOB, rw="randrw", rwmixread=70, sync=True, fsync=4, buffer_compress_percentage=50, refill_buffers=True,
                  rate=50 << 20, direct=False, ioengine="psync")
    argv = fio_argv(job, "/dev/vdb", "/o", log_prefix="/l", tail_seconds=10)
    at = argv.index(f"--name={TAIL_NAME}")
    measured, tail = argv[1:at], argv[at + 1:]
    skip = ("--name=", "--time_based=", "--runtime=", "--ramp_time=", "--percentile_list=")
    assert [a for a in measured if not a.startswith(skip)] == [a for a in tail if not a.startswith(skip + ("--stonewall", "--new_group", "--output"))]
    assert "--rate=52428800" in tail and "--rwmixread=70" in tail and "--fsync=4" in tail and "--direct=0" in tail


def test_tail_refused_for_job_files_and_negative():
    jf = FioJob(name="mine", jobfile=JobFile(path="my.fio", text="[x]\nrw=read\n"))
    with pytest.raises(ValueError, match="job-file job cannot have a tail"):
        fio_argv(jf, "t", "o", jobfile_path="/j.fio", tail_seconds=5)
    assert fio_argv(jf, "t", "o", jobfile_path="/j.fio", epoch_logs=True) == ["fio", "--output-format=json+", "--output=o", "/j.fio"]
    with pytest.raises(ValueError, match="negative"):
        fio_argv(JOB, "t", "o", tail_seconds=-1)
    with pytest.raises(ValueError, match="named vmbench-tail"):
        fio_argv(replace(JOB, name=TAIL_NAME), "t", "o", tail_seconds=1)


def test_host_and_guest_with_tail_and_epoch_logs_compare():
    host = fio_argv(JOB, "/pool/x.raw", "/w/a.json", log_prefix="/w/log-1111", tail_seconds=20, epoch_logs=True)
    guest = fio_argv(JOB, "/dev/vdb", "/run/vmbench/b.json", log_prefix="/run/vmbench/log-2222", tail_seconds=20, epoch_logs=True)
    check_identical(host, guest)
    assert "--runtime=20" in comparable_params(host) and not any("epoch" in a for a in comparable_params(host))
    with pytest.raises(VmbenchError, match="refusing to compare"):
        check_identical(host, fio_argv(JOB, "/dev/vdb", "/o", log_prefix="/l", tail_seconds=30, epoch_logs=True))
    with pytest.raises(VmbenchError, match="refusing to compare"):
        check_identical(host, fio_argv(JOB, "/dev/vdb", "/o", log_prefix="/l", epoch_logs=True))
    with pytest.raises(VmbenchError, match="--rate_iops=100"):
        check_identical(fio_argv(replace(JOB, rate_iops=100), "a", "b"), fio_argv(JOB, "c", "d"))


def test_rates_stored_only_when_set_and_metric_never():
    params = JOB.params()
    assert "rate_iops" not in params and "rate" not in params and "metric" not in params
    assert job_hash(JOB) == "86589e659ccbc53b"  # as stored before rates and metrics existed
    assert job_hash(replace(JOB, metric=Metric.P99)) == job_hash(JOB) and replace(JOB, metric=Metric.P50) == JOB
    fixed = replace(JOB, rate_iops=500)
    assert fixed.params()["rate_iops"] == 500 and "rate" not in fixed.params() and job_hash(fixed) != job_hash(JOB)
    assert replace(JOB, rate=1 << 20).params()["rate"] == 1 << 20
    assert fio_argv(replace(JOB, rate=1 << 20), "t", "o")[-3:] == ["--rate=1048576", "--output-format=json+", "--output=o"]


def test_describe_rates():
    assert replace(JOB, rate_iops=500).describe() == "randwrite 4k QD4 at 500 IOPS"
    assert replace(JOB, rate=50 << 20).describe() == "randwrite 4k QD4 at 50 MiB/s"
    assert replace(JOB, rate=1000).describe() == "randwrite 4k QD4 at 1000 B/s"
    assert (replace(JOB, rw="randrw", rwmixread=70, numjobs=4, rate=512 << 10).describe()
            == "randrw 4k QD4 x4 jobs 70% reads at 512 KiB/s (reads and writes each, per job)")


def test_metric_parse_judged_by_and_direction():
    assert Metric.parse("p99.9") is Metric.P999 and Metric.parse(" IOPS ") is Metric.IOPS and Metric.parse("mbps") is Metric.MBPS
    with pytest.raises(ValueError, match=r"'p90' is not one of: iops, mbps, p50, p95, p99, p99.9 \(did you mean 'p99'\?\)"):
        Metric.parse("p90")
    assert [m.higher_is_better for m in Metric] == [True, True, False, False, False, False]
    assert [m.percentile for m in Metric] == [None, None, 50.0, 95.0, 99.0, 99.9]
    assert JOB.judged_by is Metric.IOPS
    assert replace(JOB, rate_iops=100).judged_by is Metric.P99 and replace(JOB, rate=1 << 20).judged_by is Metric.P99
    assert replace(JOB, rate_iops=100, metric=Metric.P50).judged_by is Metric.P50
    assert replace(JOB, metric=Metric.MBPS).judged_by is Metric.MBPS
    jf = FioJob(name="f", jobfile=JobFile(path="f.fio", text="[x]\nrw=read\nrate_iops=100\n"))
    assert jf.fixed_rate and jf.judged_by is Metric.P99
    assert FioJob(name="f", jobfile=JobFile(path="f.fio", text="[x]\nrw=read\n")).judged_by is Metric.IOPS


def test_job_timeout_includes_the_tail():
    assert job_timeout(replace(JOB, runtime=300, ramp=0), False, 100) == job_timeout(replace(JOB, runtime=400, ramp=0), False)


# Real fio 3.33 json+ (trimmed to what vmbench reads): randrw, numjobs=2, rate_iops=5, runtime 1 s,
# then the vmbench-tail job for 1 s (its own group).
TAILED_JSON = {"fio version": "fio-3.33", "jobs": [
    {"jobname": "m", "groupid": 0, "error": 0,
     "read": {"io_bytes": 40960, "bw_bytes": 40919, "iops": 9.99001, "runtime": 1001, "total_ios": 10, "clat_ns": {"bins": {
         "3632": 1, "48384": 1, "86528": 1, "90624": 1, "105984": 1, "110080": 1, "134144": 1, "152576": 1, "160768": 1, "228352": 1}}},
     "write": {"io_bytes": 40960, "bw_bytes": 40919, "iops": 9.99001, "runtime": 1001, "total_ios": 10, "clat_ns": {"bins": {
         "5536": 1, "6048": 1, "7008": 1, "7392": 1, "8160": 1, "11072": 1, "19072": 1, "22912": 1, "26752": 1, "60160": 1}}},
     "trim": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0, "total_ios": 0}},
    {"jobname": "vmbench-tail", "groupid": 1, "error": 0,
     "read": {"io_bytes": 45056, "bw_bytes": 45010, "iops": 10.989011, "runtime": 1001, "total_ios": 11, "clat_ns": {"bins": {
         "70144": 1, "76288": 1, "82432": 1, "84480": 1, "96768": 2, "103936": 1, "111104": 1, "148480": 1, "232448": 1, "284672": 1}}},
     "write": {"io_bytes": 40960, "bw_bytes": 40919, "iops": 9.99001, "runtime": 1001, "total_ios": 10, "clat_ns": {"bins": {
         "4768": 1, "8768": 1, "8896": 1, "11328": 1, "12480": 1, "21120": 1, "21376": 1, "24192": 1, "24448": 1, "25472": 1}}},
     "trim": {"io_bytes": 0, "bw_bytes": 0, "iops": 0.0, "runtime": 0, "total_ios": 0}},
]}


def test_parse_leaves_the_tail_out_of_every_figure():
    res = parse_fio_json(json.dumps(TAILED_JSON))
    assert res.jobs == 1 and [d.name for d in res.directions] == ["read", "write"]
    assert res.iops == pytest.approx(2 * 9.99001) and res.bw_bytes == 2 * 40919 and res.io_bytes == 2 * 40960
    assert res.clat.count == 20 and max(res.clat.bins) == 228352  # the tail's slowest read (284672) is not in it
    alone = json.loads(json.dumps(TAILED_JSON))
    alone["jobs"] = alone["jobs"][:1]
    assert parse_fio_json(json.dumps(alone)) == res  # json without a tail: the same figures
    failed = json.loads(json.dumps(TAILED_JSON))
    failed["jobs"][1]["error"] = 5
    with pytest.raises(FioOutputError, match="fio job vmbench-tail failed with error 5"):
        parse_fio_json(json.dumps(failed))
    only = json.loads(json.dumps(TAILED_JSON))
    only["jobs"] = only["jobs"][1:]
    with pytest.raises(FioOutputError, match="only the vmbench-tail job"):
        parse_fio_json(json.dumps(only))


# ---- scenario jobs: rate_iops, rate, metric -----------------------------------------------------


def _jobs(entry: str):
    return parse_scenario(f"jobs:\n  - {entry}\n", "t.yaml").jobs


def _error(entry: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        _jobs(entry)
    return exc.value.message + (f" | hint: {exc.value.hint}" if exc.value.hint else "")


def test_scenario_rates_and_metric():
    (job,) = _jobs("{name: a, rw: randread, bs: 4k, rate_iops: 500}")
    assert (job.rate_iops, job.rate, job.metric, job.judged_by) == (500, None, None, Metric.P99)
    (job,) = _jobs("{name: a, rw: randread, bs: 4k, rate: 50M/s, metric: p99.9}")
    assert (job.rate_iops, job.rate, job.judged_by) == (None, 50 << 20, Metric.P999)
    assert _jobs("{name: a, rw: randread, bs: 4k, rate: 512k}")[0].rate == 512 << 10
    assert _jobs("{name: a, rw: randread, bs: 4k, metric: mbps}")[0].judged_by is Metric.MBPS
    assert {j.rate_iops for j in _jobs("{profile: tuning-matrix, rate_iops: 100}")} == {100}


def test_scenario_rate_and_metric_errors_name_the_job_and_key():
    assert _error("{name: a, rw: randread, bs: 4k, rate_iops: 0}") == (
        "t.yaml:2: jobs[0].rate_iops: job a: 0 is below the minimum 1 | hint: I/Os a second, a whole number, e.g. 500 "
        "(per job and, in mixed jobs, per direction)")
    assert "jobs[0].rate_iops: job a: 1.5 is not a whole number" in _error("{name: a, rw: randread, bs: 4k, rate_iops: 1.5}")
    assert "jobs[0].rate: job a: 'fast' is not a size" in _error("{name: a, rw: randread, bs: 4k, rate: fast}")
    assert "jobs[0].rate: job a: '0' is below the minimum" in _error("{name: a, rw: randread, bs: 4k, rate: '0'}")
    assert _error("{name: a, rw: randread, bs: 4k, rate: 50M, rate_iops: 5}") == (
        "t.yaml:2: jobs[0].rate: job a: rate_iops and rate are both set; a job runs at one fixed rate"
        " | hint: keep rate_iops (I/Os a second) or rate (bytes a second)")
    assert _error("{name: a, rw: randread, bs: 4k, metric: p90}") == (
        "t.yaml:2: jobs[0].metric: job a: 'p90' is not one of: iops, mbps, p50, p95, p99, p99.9 (did you mean 'p99'?)")
    assert "jobs[0].metric: profile oltp: 'lat' is not one of" in _error("{profile: oltp, metric: lat}")


def test_scenario_refuses_a_rate_on_a_job_file(tmp_path):
    (tmp_path / "my.fio").write_text("[x]\nrw=randread\nbs=4k\nsize=16m\n")
    body = "jobs:\n  - {file: my.fio, %s}\n"
    with pytest.raises(ScenarioError) as exc:
        parse_scenario(body % "rate_iops: 100", str(tmp_path / "s.yaml"), base_dir=tmp_path)
    assert exc.value.message.endswith("jobs[0].rate_iops: job file job my: rate_iops only applies to vmbench's own jobs")
    assert exc.value.hint == "a job file says its own rate: set rate_iops= in my.fio"
    with pytest.raises(ScenarioError, match="jobs\\[0\\].rate: job file job my"):
        parse_scenario(body % "rate: 1M", str(tmp_path / "s.yaml"), base_dir=tmp_path)
    with pytest.raises(ScenarioError, match="jobs\\[0\\].metric: job file job my: 'x' is not one of"):
        parse_scenario(body % "metric: x", str(tmp_path / "s.yaml"), base_dir=tmp_path)
    (job,) = parse_scenario(body % "metric: p95", str(tmp_path / "s.yaml"), base_dir=tmp_path).jobs
    assert job.judged_by is Metric.P95
