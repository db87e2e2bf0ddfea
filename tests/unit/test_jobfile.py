"""fio job files as users write them: parsing with line numbers, refusals, scaling, the
rewritten copy per target, and fio's own logs (real fio runs on a small temporary file)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from vmbench.errors import ScenarioError, VmbenchError
from vmbench.fio import jobfile
from vmbench.fio.job import FioJob, JobFile
from vmbench.fio.runner import FioRequest, parse_logs, run_fio
from vmbench.scenario import parse_scenario
from vmbench.transport.local import LocalTransport

MiB = 1 << 20
DEV = "/dev/vdb"
WORK = "/run/vmbench"

# ---- a corpus of job files shaped as users write them ------------------------------------------

OLTP = """\
; my OLTP job, tuned on bare metal
# run with: fio oltp.fio
[global]
ioengine=libaio
direct=1
time_based
runtime=60
ramp_time=5
group_reporting
write_lat_log=oltp
write_iops_log=oltp
log_avg_msec=1000

[randrw]
filename=/dev/sdb
rw=randrw
rwmixread=70
bs=8k
iodepth=16
numjobs=4
size=4g

[seqwrite]
stonewall
directory=/mnt/test
filename_format=seq.$jobnum
rw=write
bs=1m
size=2g
"""

OLTP_REWRITTEN = """\
; my OLTP job, tuned on bare metal
# run with: fio oltp.fio
[global]
ioengine=libaio
direct=1
time_based
runtime=60
ramp_time=5
group_reporting
write_lat_log=/run/vmbench/log-ab12-oltp
write_iops_log=/run/vmbench/log-ab12-oltp
log_avg_msec=1000

[randrw]
filename=@T@
rw=randrw
rwmixread=70
bs=8k
iodepth=16
numjobs=4
size=4g

[seqwrite]
stonewall
filename=@T@
rw=write
bs=1m
size=2g
"""

OLTP_LINES = [
    "[global] write_lat_log=oltp -> /run/vmbench/log-ab12-oltp",
    "[global] write_iops_log=oltp -> /run/vmbench/log-ab12-oltp",
    "[randrw] filename=/dev/sdb -> @T@",
    "[seqwrite] directory=/mnt/test -> filename=@T@",
    "[seqwrite] filename_format=seq.$jobnum removed",
]

# the shape vmbench documented before: the target in an environment variable
ENVVAR = """\
[global]
ioengine=libaio
direct=1
filename=${VMBENCH_TARGET}
size=32m
time_based
runtime=1
[mine]
rw=randrw
rwmixread=50
bs=8k
iodepth=2
"""

SERIES = "write_iops_log=/run/vmbench/log-ab12\nwrite_lat_log=/run/vmbench/log-ab12\nlog_unix_epoch=1\n"
SERIES_LINE = ("+ write_iops_log=/run/vmbench/log-ab12 write_lat_log=/run/vmbench/log-ab12 log_unix_epoch=1"
               "{avg} (vmbench's time series)")


def test_user_job_rewritten_for_a_block_device_and_for_a_file():
    for target in (DEV, "/mnt/vmbench/vmbench-fio.dat"):
        text, lines = jobfile.rewrite(OLTP, target, WORK, "ab12")
        assert text == OLTP_REWRITTEN.replace("@T@", target)
        assert lines == [line.replace("@T@", target) for line in OLTP_LINES]


def test_environment_variable_job_gets_the_target_and_vmbench_series():
    text, lines = jobfile.rewrite(ENVVAR, DEV, WORK, "ab12")
    assert text == ENVVAR.replace("${VMBENCH_TARGET}", DEV).replace("[mine]\n", "[mine]\n" + SERIES + "log_avg_msec=1000\n")
    assert lines == ["[global] filename=${VMBENCH_TARGET} -> /dev/vdb",
                     "[mine] " + SERIES_LINE.format(avg=" log_avg_msec=1000")]


def test_sections_without_a_target_get_one_and_their_own_log_avg_is_kept():
    text, lines = jobfile.rewrite("[a]\nrw=randread\nbs=4k\n[b]\nrw=randwrite\n; slow logs\nlog_avg_msec=250\n", DEV, WORK, "ab12")
    assert text == ("[a]\nfilename=/dev/vdb\n" + SERIES + "log_avg_msec=1000\nrw=randread\nbs=4k\n"
                    "[b]\nfilename=/dev/vdb\n" + SERIES + "rw=randwrite\n; slow logs\nlog_avg_msec=250\n")
    assert lines == ["[a] filename=/dev/vdb (added: the section names no target)", "[a] " + SERIES_LINE.format(avg=" log_avg_msec=1000"),
                     "[b] filename=/dev/vdb (added: the section names no target)", "[b] " + SERIES_LINE.format(avg="")]


def test_a_global_applies_to_the_jobs_after_it_only():
    src = "[global]\nbs=4k\n[a]\nrw=read\n[global]\nfilename=/dev/sdc\nwrite_bw_log\n[b]\nrw=write\n"
    text, lines = jobfile.rewrite(src, DEV, WORK, "ab12")
    assert text == ("[global]\nbs=4k\n[a]\nfilename=/dev/vdb\n" + SERIES + "log_avg_msec=1000\nrw=read\n"
                    "[global]\nfilename=/dev/vdb\nwrite_bw_log=/run/vmbench/log-ab12-global\n[b]\nrw=write\n")
    assert lines[2:] == ["[global] filename=/dev/sdc -> /dev/vdb", "[global] write_bw_log -> /run/vmbench/log-ab12-global"]


def test_bare_flags_comments_spaces_and_a_target_with_colons():
    src = "# comment\n[job one]\n  rw = randwrite  \ntime_based\nfilename = /dev/sdb\nwrite_hist_log=/var/tmp/h\n"
    text, lines = jobfile.rewrite(src, "/dev/disk/by-path/pci-0000:00:05.0", WORK, "ab12")
    # fio keeps the blank after '=' in the value (`rw = randwrite` drops the job): the copy has rw=randwrite
    assert text == ("# comment\n[job one]\nrw=randwrite\ntime_based\nfilename=/dev/disk/by-path/pci-0000\\:00\\:05.0\n"
                    "write_hist_log=/run/vmbench/log-ab12-h\n")
    assert lines == ["[job one] rw = randwrite -> rw=randwrite (fio would keep the blank after '=' in the value)",
                     "[job one] filename=/dev/sdb -> /dev/disk/by-path/pci-0000:00:05.0",
                     "[job one] write_hist_log=/var/tmp/h -> /run/vmbench/log-ab12-h"]


def test_parse_keeps_line_numbers_and_effective_options():
    parsed = jobfile.parse(OLTP, "oltp.fio")
    assert [(s.name, s.line) for s in parsed.sections] == [("global", 3), ("randrw", 14), ("seqwrite", 23)]
    assert parsed.sections[0].get("time_based").value is None and parsed.sections[1].get("bs").line == 18
    jobs = dict((sec.name, eff) for sec, eff in parsed.jobs())
    assert jobs["seqwrite"]["runtime"].value == "60" and jobs["randrw"]["filename"].value == "/dev/sdb"
    assert jobfile.effective_size(parsed) == (4 << 30, 21)  # the largest size; numjobs share the one target
    assert jobfile.timing(parsed) == (120.0, 10.0)  # two stonewall groups of 60 s + 5 s ramp
    assert jobfile.is_direct(parsed)
    assert not jobfile.is_direct(jobfile.parse("[a]\nrw=read\n", "a.fio"))
    assert jobfile.is_direct(jobfile.parse("[global]\nbuffered=0\n[a]\nrw=read\n", "a.fio"))
    assert jobfile.timing(jobfile.parse("[a]\nrw=read\n", "a.fio")) == (None, 0.0)
    assert jobfile.effective_size(jobfile.parse("[a]\nsize=10%\n[b]\nsize=8m\noffset=4m\n", "a.fio")) == (12 * MiB, 4)


def test_the_digest_ignores_target_and_paths_but_not_the_job():
    assert jobfile.digest(OLTP) == jobfile.digest(OLTP)
    assert jobfile.digest(OLTP) != jobfile.digest(OLTP.replace("bs=8k", "bs=16k"))


# ---- refusals, with the file's line and never its contents -------------------------------------


@pytest.mark.parametrize("body, line, words", [
    ("exec_prerun=rm -rf /", 4, "sets exec_prerun, which runs a command"),
    ("exec_postrun=/bin/true", 4, "sets exec_postrun"),
    ("ioengine=external:/tmp/x.so", 4, "ioengine names an engine vmbench does not allow"),
    ("ioengine=libaio\nioengine_lib=/tmp/x.so", 5, "sets ioengine_lib, which loads code"),
    ("filename=/dev/sdb:/dev/sdc", 4, "filename lists several files"),
    ("cgroup=bench", 4, "sets cgroup"),
    ("cgroup_weight=100", 4, "sets cgroup_weight"),
    ("trigger-file=/tmp/t", 4, "sets trigger-file"),
    ("read_iolog=/tmp/trace", 4, "sets read_iolog"),
    ("replay_redirect=/dev/sda", 4, "sets replay_redirect"),
    ("write_iolog=/tmp/io.log", 4, "sets write_iolog"),
    ("create_only=1", 4, "sets create_only"),
    ("lockfile=exclusive", 4, "sets lockfile"),
    ("unlink=1", 4, "sets unlink, which would delete the target"),
    ("bs 4k extra", 4, "expected key=value"),
    ("[broken", 4, "expected a section header"),
])
def test_refusals_name_the_line_and_quote_nothing(body, line, words):
    text = f"[global]\nsize=8m\n[w]\n{body}\n"
    with pytest.raises(jobfile.JobFileError) as err:
        jobfile.check(jobfile.parse(text, "my.fio"))
    msg = str(err.value)
    assert msg.startswith(f"my.fio:{line}: ") and words in msg
    _quotes_nothing(msg, text)


def test_sections_naming_different_targets_all_get_the_layers_target():
    # issue 15: /dev/null in one section and a device in the next, run one after the other
    text = "[a]\nfilename=/dev/null\nrw=write\n[b]\nstonewall\nfilename=/dev/sdc\n[c]\nwait_for=b\ndirectory=/mnt/x\n"
    jobfile.check(jobfile.parse(text, "x.fio"))
    out, lines = jobfile.rewrite(text, DEV, WORK, "ab12")
    assert [line for line in out.splitlines() if line.startswith(("filename", "directory"))] == [f"filename={DEV}"] * 3
    assert lines[0] == "[a] filename=/dev/null -> /dev/vdb" and "[c] directory=/mnt/x -> filename=/dev/vdb" in lines
    jobfile.check(jobfile.parse("[a]\nunlink=0\nfilename=/mnt/c\\:d\n", "x.fio"))


SECRET = "root:$6$saltsalt$hashhashhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"


@pytest.mark.parametrize("data, words", [
    (b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR secret", "is a binary file"),
    ("caf\u00e9 [x]\n".encode("latin-1"), "is not a text file (it is not UTF-8)"),
    (SECRET.encode(), ":1: expected a section header first"),
    (b"#!/bin/sh\nrm -rf /tmp/x\n[w]\n", ":2: expected a section header first"),
    (b"; only comments\n\n", "has no section header"),
    (b"", "has no section header"),
    (b"[global]\nsize=1m\n", "has only global sections"),
])
def test_files_that_are_not_job_files_are_refused_without_their_contents(data, words):
    with pytest.raises(jobfile.JobFileError) as err:
        jobfile.parse(data, "/etc/thing")
    msg = str(err.value)
    assert msg.startswith("/etc/thing") and words in msg
    _quotes_nothing(msg, data.decode("latin-1"))
    assert "secret" not in msg and "root" not in msg


def _quotes_nothing(message: str, text: str) -> None:
    for line in text.splitlines():
        assert not line.strip() or line.strip() not in message, f"the message quotes {line.strip()!r}"


# ---- the scenario's jobs entry: refusals, scaling, sizes ---------------------------------------


def _scenario(tmp_path: Path, body: str, jobtext: str, name: str = "oltp.fio"):
    (tmp_path / name).write_text(jobtext)
    return parse_scenario(body, str(tmp_path / "s.yaml"), base_dir=tmp_path)


def test_scenario_refusal_names_scenario_and_job_file_lines(tmp_path):
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, "jobs:\n  - file: oltp.fio\n", OLTP.replace("bs=1m", "exec_postrun=reboot"))
    msg = err.value.message
    assert msg.startswith(f"{tmp_path}/s.yaml:2: jobs[0].file: {tmp_path}/oltp.fio:28: sets exec_postrun")
    _quotes_nothing(msg, OLTP.replace("bs=1m", "exec_postrun=reboot"))


def test_user_job_file_loads_unchanged(tmp_path):
    job = _scenario(tmp_path, "jobs:\n  - file: oltp.fio\n", OLTP.replace("4g", "64m").replace("2g", "32m")).jobs[0]
    assert job.name == "oltp" and job.size == 64 * MiB and job.direct and job.jobfile.overrides == ()
    assert job.jobfile.runtime == 120.0 and job.jobfile.ramp == 10.0 and job.duration == 130.0
    assert job.jobfile.text == OLTP.replace("4g", "64m").replace("2g", "32m")


def test_size_and_runtime_override_every_section_that_sets_them(tmp_path):
    s = _scenario(tmp_path, "jobs:\n  - {file: oltp.fio, size: 512M, runtime: 20s}\n", OLTP)
    job = s.jobs[0]
    assert job.size == 512 * MiB and job.jobfile.runtime == 40.0
    assert job.jobfile.text == OLTP.replace("runtime=60", "runtime=20").replace("size=4g", "size=512m").replace("size=2g", "size=512m")
    assert job.jobfile.overrides == ("[randrw] size=4g -> size=512m (scenario size:)", "[seqwrite] size=2g -> size=512m (scenario size:)",
                                     "[global] runtime=60 -> runtime=20 (scenario runtime:)")
    assert jobfile.describe_rewrites(job, "block")[:3] == list(job.jobfile.overrides)
    assert "[randrw] filename=/dev/sdb -> <device>" in jobfile.describe_rewrites(job, "block")
    assert "[seqwrite] directory=/mnt/test -> filename=<file on the layer's filesystem>" in jobfile.describe_rewrites(job, "file")
    assert jobfile.describe_rewrites(FioJob(name="x"), "block") == []


def test_overrides_go_to_global_when_no_section_sets_them():
    text, lines = jobfile.scale("[global]\nbs=4k\n[a]\nrw=read\n", "a.fio", size=64 * MiB, runtime=2.5)
    assert text == "[global]\nsize=64m\nruntime=2500ms\nbs=4k\n[a]\nrw=read\n"
    assert lines == ["[global] size=64m (added: scenario size:)", "[global] runtime=2500ms (added: scenario runtime:)"]
    text, _ = jobfile.scale("; c\n[a]\nrw=read\n", "a.fio", size=64 * MiB)
    assert text == "[global]\nsize=64m\n; c\n[a]\nrw=read\n"  # a new [global] before the first job


def test_a_job_file_larger_than_the_scratch_disk_names_file_line_and_what_to_set(tmp_path):
    body = "storage: {scratch_size: 1G}\njobs:\n  - {name: small, rw: read, bs: 4k, size: 8M}\n  - file: oltp.fio\n"
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, body, OLTP)
    msg, hint = err.value.message, err.value.hint
    assert msg.startswith(f"{tmp_path}/s.yaml:4: jobs: job file {tmp_path}/oltp.fio touches 4.0G of its target ({tmp_path}/oltp.fio:21 ")
    assert "leaves 1.0G" in msg and "size: in the scenario's jobs entry" in hint and "storage.scratch_size to at least 4g" in hint
    stacks = "stacks:\n  - {name: s, layers: [ext4]}\n"
    small = OLTP.replace("4g", "200m").replace("2g", "8m")
    with pytest.raises(ScenarioError, match="touches 200.0M .* leaves 128.0M after layer metadata"):
        _scenario(tmp_path, "storage: {scratch_size: 256M}\n" + stacks + "jobs:\n  - file: oltp.fio\n", small)
    ok = _scenario(tmp_path, "storage: {scratch_size: 256M}\n" + stacks + "jobs:\n  - {file: oltp.fio, size: 64M}\n", small)
    assert ok.jobs[0].size == 64 * MiB
    with pytest.raises(ScenarioError, match=r"\(size: 1g in the jobs entry for oltp.fio, with any offset the file sets\)"):
        _scenario(tmp_path, "storage: {scratch_size: 256M}\njobs:\n  - {file: oltp.fio, size: 1G}\n", small)


def test_unknown_keys_in_a_job_file_entry_are_refused(tmp_path):
    with pytest.raises(ScenarioError, match=r"jobs\[0\].iodepth: unknown key \(vmbench reads no such key here\)") as exc:
        _scenario(tmp_path, "jobs:\n  - {file: oltp.fio, iodepth: 4}\n", OLTP)
    assert exc.value.hint == "allowed here: env, file, metric, name, runtime, size"


# ---- fio's own logs ----------------------------------------------------------------------------


def test_parse_logs_sums_iops_and_averages_latency():
    files = {
        "log-t_iops.1.log": b"1000, 100, 0, 0, 0\n1000, 50, 1, 0, 0\n2004, 110, 0, 0, 0\n2004, 40, 1, 0, 0\n",
        "log-t_iops.2.log": b"1001, 200, 0, 0, 0\n1999, 220, 0, 0, 0\n",
        "log-t_clat.1.log": b"1000, 2000000, 0, 0, 0\n1000, 4000000, 1, 0, 0\n",
        "log-t_clat.2.log": b"1001, 6000000, 0, 0, 0\ngarbage\n",
        "log-t_lat.1.log": b"1000, 99999999, 0, 0, 0\n",
        "log-t_slat.1.log": b"",
    }
    s = parse_logs(files)
    assert s["fio-iops"] == {"t_s": [1.0, 2.0], "values": [350.0, 370.0], "unit": "IOPS"}
    assert s["fio-iops-read"]["values"] == [300.0, 330.0] and s["fio-iops-write"]["values"] == [50.0, 40.0]
    assert s["fio-clat"] == {"t_s": [1.0], "values": [4.0], "unit": "ms"}
    assert set(parse_logs({"log-t_iops.1.log": b"1000, 5, 1, 0, 0\n"})) == {"fio-iops"}  # one direction: no split
    assert parse_logs({}) == {}


def test_parse_logs_per_io_lines_and_epoch_times():
    per_io = b"".join(b"%d, 1, 0, 4096, 0\n" % t for t in (5, 300, 700, 1200, 1800))
    assert parse_logs({"a_iops.1.log": per_io})["fio-iops"] == {"t_s": [1.0, 2.0], "values": [3.0, 2.0], "unit": "IOPS"}
    epoch = 1_700_000_000_000
    first = b"%d, 100, 0, 0, 0\n%d, 100, 0, 0, 0\n" % (epoch + 1000, epoch + 2000)
    later = b"%d, 300, 1, 0, 0\n" % (epoch + 4001)  # a stonewalled job that started after the first
    s = parse_logs({"x_iops.1.log": first, "x_iops.2.log": later})
    assert s["fio-iops"]["t_s"] == [1.0, 2.0, 4.0] and s["fio-iops"]["values"] == [100.0, 100.0, 300.0]


def _run_fio(cwd: Path, jobtext: str) -> None:
    (cwd / "job.fio").write_text(jobtext)
    subprocess.run(["fio", "--output-format=json", f"--output={cwd}/out.json", str(cwd / "job.fio")], check=True,
                   capture_output=True, timeout=120, cwd=cwd)


def test_logs_of_a_real_fio_run_of_a_rewritten_user_job(tmp_path):
    user = ("[global]\nioengine=psync\nsize=4m\nbs=4k\ntime_based\nruntime=2\n"
            "[w]\nfilename=/dev/disk/by-id/vmbench-no-such-disk\nrw=randwrite\nnumjobs=2\n"
            "[r]\nstonewall\ndirectory=/nonexistent/mnt\nrw=randread\n")
    text, _ = jobfile.rewrite(user, str(tmp_path / "data"), str(tmp_path), "t1")
    _run_fio(tmp_path, text)
    names = sorted(p.name for p in tmp_path.glob("log-t1*"))
    assert "log-t1_iops.1.log" in names and "log-t1_clat.3.log" in names and "log-t1_lat.2.log" in names
    s = parse_logs({n: (tmp_path / n).read_bytes() for n in names})
    assert set(s) == {"fio-iops", "fio-iops-read", "fio-iops-write", "fio-clat"}
    assert s["fio-iops"]["unit"] == "IOPS" and s["fio-clat"]["unit"] == "ms"
    for series in s.values():
        assert series["t_s"] == sorted(series["t_s"]) and len(series["t_s"]) == len(series["values"])
        assert all(v > 0 for v in series["values"])
    # the writes ran first, the stonewalled reads after them (epoch times line the jobs up)
    assert max(s["fio-iops-write"]["t_s"]) < max(s["fio-iops-read"]["t_s"])
    assert max(s["fio-clat"]["t_s"]) >= 3.0


# ---- run_fio end to end on this machine -------------------------------------------------------


def test_run_fio_runs_the_rewritten_copy_and_leaves_nothing(tmp_path):
    host, guest = tmp_path / "host", tmp_path / "guest"
    host.mkdir()
    guest.mkdir()
    user = ("; mine\n[global]\nioengine=psync\nsize=4m\nbs=4k\ntime_based\nruntime=1\nwrite_lat_log=lat\n"
            "[w]\nfilename=/dev/disk/by-id/vmbench-no-such-disk\nrw=randrw\n")
    job = FioJob(name="mine", size=4 * MiB, direct=False, jobfile=JobFile(path="mine.fio", text=user, runtime=1.0))
    one = run_fio(LocalTransport(), FioRequest(job, str(host / "data"), str(host), "host"))
    assert sorted(p.name for p in host.iterdir()) == ["data"]  # job copy, output and logs removed
    data = one.result
    assert data.iops > 0 and one.jobfile_text is not None and f"filename={host}/data" in one.jobfile_text
    import json

    fio = json.loads(one.raw_json)
    assert fio["global options"]["write_lat_log"].startswith(f"{host}/log-")
    assert fio["jobs"][0]["job options"]["filename"] == f"{host}/data"
    assert one.rewrites[1] == f"[w] filename=/dev/disk/by-id/vmbench-no-such-disk -> {host}/data"
    assert {k for k in one.series if k.startswith("fio-")} == {"fio-clat"}  # the file logs latency only, per I/O
    two = run_fio(LocalTransport(), FioRequest(job, str(guest / "data"), str(guest), "guest", must_match=one.argv))
    assert re.fullmatch(r".*/job-[0-9a-f]{8}-" + jobfile.digest(user) + r"\.fio", two.argv[-1])
    changed = FioJob(name="mine", size=4 * MiB, direct=False, jobfile=JobFile(path="mine.fio", text=user.replace("4k", "8k")))
    with pytest.raises(VmbenchError, match="host and guest fio jobs differ; refusing to compare them: jobfile="):
        run_fio(LocalTransport(), FioRequest(changed, str(guest / "data"), str(guest), "guest", must_match=one.argv))
    assert sorted(p.name for p in guest.iterdir()) == ["data"]


def test_run_fio_of_a_built_in_job_returns_fio_series(tmp_path):
    job = FioJob(name="t", rw="randrw", bs=4096, iodepth=1, numjobs=2, runtime=2, ramp=0, size=4 * MiB, direct=False, ioengine="psync")
    run = run_fio(LocalTransport(), FioRequest(job, str(tmp_path / "data"), str(tmp_path), "t"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]
    assert {k for k in run.series if k.startswith("fio-")} == {"fio-iops", "fio-iops-read", "fio-iops-write", "fio-clat"}
    assert run.series["fio-iops"]["t_s"][0] == 1.0 and run.series["fio-clat"]["unit"] == "ms"
    assert run.series["fio-iops"]["values"][0] > 0


# ---- read as fio reads it (issue 15): comments after values, include, ${NAME}, value forms ------


def _showcmd(path: Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    import os

    out = subprocess.run(["fio", "--showcmd", str(path)], capture_output=True, text=True, timeout=60, cwd=cwd,
                         env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})})
    assert out.returncode == 0 and not out.stderr.strip(), out.stderr
    return out.stdout


def test_a_comment_after_a_value_is_not_part_of_it():
    # fio's surface-scan.fio and tiobench-example.fio: a verify job is not "a second target"
    src = ("[global]\nioengine=libaio # fast\nnumjobs=4\t; 4 threads\n[write-phase]\nfilename=datafile.tmp\t; or a disk\n"
           "rw=write\n[verify-phase]\nstonewall\nfilename=datafile.tmp\nrw=read\ndo_verify=1\n[x] ; a section comment\n")
    parsed = jobfile.parse(src, "s.fio")
    jobfile.check(parsed)
    assert parsed.sections[0].get("ioengine").value == "libaio" and parsed.sections[0].get("numjobs").value == "4"
    assert parsed.sections[1].get("filename").value == "datafile.tmp" and parsed.sections[3].name == "x"
    text, lines = jobfile.rewrite(src, DEV, WORK, "ab12")
    assert "[write-phase] filename=datafile.tmp -> /dev/vdb" in lines and "ioengine=libaio # fast" in text


def test_aliases_globals_by_prefix_and_scaling_of_timeout_and_filesize():
    src = "[global-opts]\ntimeout=60\nfilesize=1g\nwait_for_previous\n[a]\nrw=read\n"
    parsed = jobfile.parse(src, "a.fio")
    assert parsed.sections[0].is_global and parsed.sections[0].get("runtime").key == "timeout"
    assert jobfile.timing(parsed) == (60.0, 0.0) and jobfile.effective_size(parsed) == (1 << 30, 3)
    text, lines = jobfile.scale(src, "a.fio", size=64 * MiB, runtime=2)
    assert "runtime=2\nfilesize=64m\nwait_for_previous" in text
    assert lines == ["[global-opts] filesize=1g -> filesize=64m (scenario size:)",
                     "[global-opts] timeout=60 -> runtime=2 (scenario runtime:)"]
    # a job that gets no runtime from the file gets the scenario's through [global]
    text, lines = jobfile.scale("[a]\nruntime=100\n[b]\nrw=trim\n", "a.fio", runtime=1)
    assert text == "[global]\nruntime=1\n[a]\nruntime=1\n[b]\nrw=trim\n"


@pytest.mark.parametrize("value, kb_base, expected", [
    ("4k", 1024, (4096, False)), ("4KiB", 1024, (4000, False)), ("4KiB", 1000, (4096, False)), ("4k", 1000, (4000, False)),
    ("10g", 1024, (10 << 30, False)), ("0x1000", 1024, (4096, False)), ("50%", 1024, (50, True)),
    ("102404k", 1024, (102404 << 10, False)), ("512", 1024, (512, False)), ("(1+1)", 1024, None), ("${X}", 1024, None),
])
def test_sizes_read_as_fio_reads_them(value, kb_base, expected):
    from vmbench.fio.jobparse import fio_size

    assert fio_size(value, kb_base) == expected


def test_times_read_as_fio_reads_them():
    from vmbench.fio.jobparse import fio_seconds

    assert [fio_seconds(v) for v in ("60", "5m", "30s", "500ms", "2h", "1d", "100us")] == pytest.approx([60, 300, 30, 0.5, 7200, 86400, 1e-4])


def test_fio_writes_the_bytes_vmbench_reads_for_kib_and_k(tmp_path):
    # fio's default kb_base=1024: k is 1024, KiB is 1000 (parse.c __get_mult_bytes)
    from vmbench.fio.jobparse import fio_size

    for size in ("2KiB", "2k"):
        src = f"[w]\nfilename={tmp_path}/d\nrw=write\nbs=500\nsize={size}\n"
        _run_fio(tmp_path, src)
        import json

        written = json.loads((tmp_path / "out.json").read_text())["jobs"][0]["write"]["io_bytes"]
        got = fio_size(size)
        assert got is not None and written == got[0] // 500 * 500


def test_include_is_read_in_as_fio_reads_it_and_the_copy_is_self_contained(tmp_path):
    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "common.fio").write_text("; shared\nbs=8k ; block size\ninclude deeper.fio\n")
    (tmp_path / "inc" / "deeper.fio").write_text("iodepth=${DEPTH}\n")
    main = tmp_path / "inc" / "main.fio"
    main.write_text("[global]\nioengine=psync\ninclude common.fio\n[a]\nrw=read\nsize=1m\n")
    parsed = jobfile.parse(main.read_bytes(), str(main), env={"DEPTH": "2"})
    assert parsed.sections[0].get("bs").value == "8k" and parsed.sections[0].get("iodepth").value == "2"
    assert parsed.where(parsed.sections[0].get("iodepth").line) == (str(tmp_path / "inc" / "deeper.fio"), 1)
    assert "include" not in "".join(line for line in parsed.text.splitlines() if not line.startswith(";"))
    jobfile.check(jobfile.parse(parsed.text, "copy"))  # vmbench's copy needs nothing beside it
    # fio reads the same options (from another directory: includes are found next to the file)
    from tests.unit.test_fio_examples import _words, vmbench_reading

    assert vmbench_reading(parsed) == _words(_showcmd(main, tmp_path, {"DEPTH": "2"})[4:])


@pytest.mark.parametrize("files, words", [
    ({"main.fio": "[a]\ninclude nothere.fio\n"}, "main.fio:2: includes"),
    ({"main.fio": "[a]\ninclude b.fio\n", "b.fio": "bs=4k\n[b]\n"}, "b.fio:2: starts a section; fio allows no new sections"),
    ({"main.fio": "[a]\ninclude b.fio\n", "b.fio": "include main.fio\n"}, "b.fio:1: includes"),
])
def test_include_errors_name_the_file_and_line(tmp_path, files, words):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(jobfile.JobFileError, match=words):
        jobfile.parse((tmp_path / "main.fio").read_bytes(), str(tmp_path / "main.fio"), env={})


def test_env_gives_values_and_an_unset_variable_is_refused_at_plan(tmp_path):
    src = "[global]\nfilename=${VMBENCH_TARGET}\nsize=16m\n[a]\nrw=${RW} ; from env\nbs=${FIO_BS}\n"
    s = _scenario(tmp_path, "jobs:\n  - {file: oltp.fio, env: {RW: randread, FIO_BS: 4k}}\n", src)
    job = s.jobs[0]
    assert "rw=randread ; from env\nbs=4k\n" in job.jobfile.text and "${VMBENCH_TARGET}" in job.jobfile.text
    assert job.jobfile.overrides == ("oltp.fio:5: rw=${RW} -> rw=randread (env: RW)", "oltp.fio:6: bs=${FIO_BS} -> bs=4k (env: FIO_BS)")
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, "jobs:\n  - {file: oltp.fio, env: {RW: randread}}\n", src)
    assert err.value.message.endswith(f"{tmp_path}/oltp.fio:6: ${{FIO_BS}} is not set: fio would read it as empty")
    assert err.value.hint == "give it a value in the scenario's jobs entry: env: {FIO_BS: ...}"
    for env, words in (("{VMBENCH_TARGET: x}", "is vmbench's own"), ("{'1X': a}", "is not a variable name"),
                       ("{X: 'a;b'}", "cannot be written into a job file"), ("[X]", "must be a mapping")):
        with pytest.raises(ScenarioError, match=words):
            _scenario(tmp_path, f"jobs:\n  - {{file: oltp.fio, env: {env}}}\n", src)


@pytest.mark.parametrize("body, reason", [
    ("ioengine=rbd", jobfile.Reason.NETWORK), ("ioengine=sg", jobfile.Reason.HARDWARE), ("ioengine=null", jobfile.Reason.NO_DISK_IO),
    ("ioengine=exec", jobfile.Reason.COMMAND), ("ioengine=ftruncate", jobfile.Reason.FILE_OPERATIONS),
    ("ioengine=my_engine", jobfile.Reason.LOADS_CODE), ("ioengine=external:/x.so", jobfile.Reason.LOADS_CODE),
    ("zonemode=zbd", jobfile.Reason.HARDWARE), ("numjobs=$ncpus", jobfile.Reason.MACHINE), ("size=$mb_memory", jobfile.Reason.MACHINE),
    ("numa_cpu_nodes=0", jobfile.Reason.MACHINE),
])
def test_each_refusal_gives_its_real_reason(body, reason):
    with pytest.raises(jobfile.JobFileError) as err:
        jobfile.check(jobfile.parse(f"[w]\nrw=read\n{body}\n", "w.fio"))
    assert err.value.reason is reason and reason.value in str(err.value) and str(err.value).startswith("w.fio:3: ")
    assert [r for r in jobfile.Reason if r.value in str(err.value)] == [reason]


def test_an_offset_past_the_scratch_disk_names_the_line_and_a_hint_that_works(tmp_path):
    src = "[global]\nsize=16m\n[a]\nrw=read\noffset=2g\n"
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, "storage: {scratch_size: 1G}\njobs:\n  - {file: oltp.fio, size: 8M}\n", src)
    assert f"{tmp_path}/oltp.fio:5: a job starts 2.0G into its target" in err.value.message
    assert "past the end of the scratch disk (1.0G)" in err.value.message
    assert err.value.hint.startswith("raise storage.scratch_size to at least 2056m")  # offset + size: 8M
    assert _scenario(tmp_path, "storage: {scratch_size: 2056M}\njobs:\n  - {file: oltp.fio, size: 8M}\n", src).jobs[0].size == 2056 * MiB
    # an offset inside the disk with a size past it: the size: the hint offers fits after the offset
    with pytest.raises(ScenarioError) as err:
        _scenario(tmp_path, "storage: {scratch_size: 1G}\njobs:\n  - file: oltp.fio\n", src.replace("2g", "512m").replace("16m", "1g"))
    assert "e.g. size: 512m" in err.value.hint


def test_a_verify_job_leaves_no_state_file_where_fio_runs(tmp_path):
    # fio saves a verify job's state in its working directory when the job ends in the write
    # phase (here: at runtime); the copy says verify_state_save=0
    user = "[v]\nrw=randwrite\nbs=4k\nverify=crc32c\nsize=64m\nruntime=1\nioengine=psync\n"
    text, lines = jobfile.rewrite(user, str(tmp_path / "data"), str(tmp_path), "t1")
    assert lines[-1] == "[v] + verify_state_save=0 (fio would leave a verify state file where it runs)"
    _run_fio(tmp_path, text)
    assert not list(tmp_path.glob("*.state"))
    assert "verify_state_save" not in jobfile.rewrite(user.replace("crc32c", "0"), DEV, WORK, "t1")[0]
