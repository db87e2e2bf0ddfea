"""fio's own example job files (Debian's fio-examples package) through vmbench's reading and
`vmbench plan`: the plain disk jobs are accepted, every other one is refused for the reason
named here; and fio itself (``--showcmd``, ``--parse-only``) agrees with vmbench's reading of
each file and parses each copy vmbench would run."""

from __future__ import annotations

import collections
import os
import re
import subprocess
from pathlib import Path

import pytest

from vmbench.errors import ScenarioError
from vmbench.fio import jobfile
from vmbench.fio.engines import Reason
from vmbench.run.plan import make_plan
from vmbench.scenario import parse_scenario

EXAMPLES = Path("/usr/share/doc/fio/examples")
OK = "accepted"
NET, HW, NONE, FILES = Reason.NETWORK, Reason.HARDWARE, Reason.NO_DISK_IO, Reason.FILE_OPERATIONS

# every example of fio 3.33 (Debian 12): accepted, or the reason vmbench refuses it
EXPECTED: dict[str, str | Reason] = {
    # plain disk jobs: libaio, io_uring, psync, sync, mmap; verify; steady state; rate limits;
    # zones within a file; several sections (stonewall, wait_for)
    "1mbs_clients.fio": OK, "aio-read.fio": OK, "backwards-read.fio": OK, "basic-verify.fio": OK, "butterfly.fio": OK,
    "cmdprio-bssplit.fio": OK, "cmdprio-percentage.fio": OK, "dedupe-global.fio": OK, "disk-zone-profile.fio": OK,
    "enospc-pressure.fio": OK, "exitwhat.fio": OK, "fio-rand-RW.fio": OK, "fio-rand-read.fio": OK,
    "fio-rand-write.fio": OK, "fio-seq-RW.fio": OK, "fio-seq-read.fio": OK, "fio-seq-write.fio": OK,
    "fixed-rate-submission.fio": OK, "flow.fio": OK, "fsx.fio": OK, "iometer-file-access-server.fio": OK,
    "jesd219.fio": OK, "latency-profile.fio": OK, "poisson-rate-submission.fio": OK, "rand-zones.fio": OK,
    "ssd-steadystate.fio": OK, "ssd-test.fio": OK, "steadystate.fio": OK, "surface-scan.fio": OK,
    "tiobench-example.fio": OK, "waitfor.fio": OK,
    "xnvme-compare.fio": OK,  # with env: for its ${FIO_RW}, ${FIO_IODEPTH}, ${FIO_BS} (ENV below)
    # engines built into fio that need a server or a network
    "dfs.fio": NET, "gfapi.fio": NET, "gpudirect-rdmaio-client.fio": NET, "gpudirect-rdmaio-server.fio": NET,
    "http-s3-crypto.fio": NET, "http-s3-storage-class.fio": NET, "http-s3.fio": NET, "http-swift.fio": NET,
    "http-webdav.fio": NET, "ime.fio": NET, "libhdfs.fio": NET, "libiscsi.fio": NET, "librpma_apm-client.fio": NET,
    "librpma_apm-server.fio": NET, "librpma_gpspm-client.fio": NET, "librpma_gpspm-server.fio": NET, "nbd.fio": NET,
    "netio.fio": NET, "netio_multicast.fio": NET, "nfs.fio": NET, "rados.fio": NET, "rbd.fio": NET,
    "rdmaio-client.fio": NET, "rdmaio-server.fio": NET,
    # special hardware: persistent memory, SCSI generic, MTD, zoned disks, NVMe char devices, GPUs
    "dev-dax.fio": HW, "libcufile-cufile.fio": HW, "libcufile-posix.fio": HW, "libpmem.fio": HW,
    "libzbc-rand-write.fio": HW, "libzbc-seq-read.fio": HW, "mtd.fio": HW, "pmemblk.fio": HW, "sg_verify-fail.fio": HW,
    "sg_verify.fio": HW, "sg_write_same_ndob.fio": HW, "uring-cmd-ng.fio": HW, "uring-cmd-zoned.fio": HW,
    "xnvme-zoned.fio": HW, "zbd-rand-write.fio": HW, "zbd-seq-read.fio": HW,  # the last three: zonemode=zbd
    # no disk I/O at all
    "cpuio.fio": NONE, "null.fio": NONE, "zipf.fio": NONE,
    # file operations (create, stat, delete, truncate, fallocate, defragment), not I/O on a disk
    "e4defrag.fio": FILES, "e4defrag2.fio": FILES, "falloc.fio": FILES, "filecreate-ioengine.fio": FILES,
    "filedelete-ioengine.fio": FILES, "filestat-ioengine.fio": FILES, "ftruncate.fio": FILES,
    # the rest, one each
    "cpp_null.fio": Reason.LOADS_CODE,  # built from fio's engines/null.c as a shared library
    "exec.fio": Reason.COMMAND,  # the exec engine runs turbostat and sleep
    "numa.fio": Reason.MACHINE,  # numa_cpu_nodes / numa_mem_policy
    "cross-stripe-verify.fio": Reason.OFFSET,  # 30 jobs 124g apart
}
ENV = {"xnvme-compare.fio": {"FIO_RW": "randread", "FIO_IODEPTH": "4", "FIO_BS": "4k"}}
COUNTS = {OK: 32, NET: 24, HW: 16, FILES: 7, NONE: 3, Reason.LOADS_CODE: 1, Reason.COMMAND: 1, Reason.MACHINE: 1,
          Reason.OFFSET: 1}


def _examples() -> list[Path]:
    if not EXAMPLES.is_dir():
        pytest.fail(f"{EXAMPLES} is missing: install Debian's fio-examples package (scripts/bootstrap does)")
    return sorted(EXAMPLES.glob("*.fio"))


def plan_example(path: Path, tmp_path: Path, env: dict[str, str] | None = None) -> ScenarioError | None:
    """`vmbench plan` of a scenario that runs ``path`` as a user would: scaled to 64M and 1 s."""
    env_yaml = "" if not env else ", env: {" + ", ".join(f"{k}: '{v}'" for k, v in env.items()) + "}"
    body = f"name: ex\njobs:\n  - {{file: {path}, size: 64M, runtime: 1s{env_yaml}}}\n"
    try:
        make_plan(parse_scenario(body, str(tmp_path / "s.yaml"), base_dir=tmp_path))
    except ScenarioError as err:
        return err
    return None


def _reason_of(err: ScenarioError) -> list[Reason]:
    return [r for r in Reason if r.value in err.message]


def test_every_example_is_classified_and_the_counts_hold(tmp_path):
    names = [p.name for p in _examples()]
    assert sorted(names) == sorted(EXPECTED), "examples not in the table: " + ", ".join(sorted(set(names) ^ set(EXPECTED)))
    got: collections.Counter = collections.Counter()
    for path in _examples():
        err = plan_example(path, tmp_path, ENV.get(path.name))
        got[OK if err is None else (_reason_of(err) or ["?"])[0]] += 1
    print("\nfio examples through vmbench plan:", ", ".join(f"{k if k == OK else k.name}: {n}" for k, n in got.items()))
    assert dict(got) == COUNTS and sum(COUNTS.values()) == len(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_is_accepted_or_refused_for_its_reason(name, tmp_path):
    path = EXAMPLES / name
    if not path.exists():
        pytest.fail(f"{path} is missing: install Debian's fio-examples package (scripts/bootstrap does)")
    err = plan_example(path, tmp_path, ENV.get(name))
    expected = EXPECTED[name]
    if expected == OK:
        assert err is None, f"{name} refused: {err and err.message}"
        return
    assert err is not None, f"{name} accepted; expected: {expected}"
    assert _reason_of(err) == [expected], f"{name}: {err.message}"
    assert f"{path}:" in err.message  # the job file's line
    assert "second target" not in err.message


def test_an_unset_variable_is_refused_at_plan_naming_it_and_its_line(tmp_path):
    err = plan_example(EXAMPLES / "xnvme-compare.fio", tmp_path)
    assert err is not None and _reason_of(err) == [Reason.UNSET_VARIABLE]
    assert f"{EXAMPLES}/xnvme-compare.fio:70: ${{FIO_RW}} is not set" in err.message
    assert err.hint == "give it a value in the scenario's jobs entry: env: {FIO_RW: ...}"


def test_an_offset_past_the_scratch_disk_names_the_line_and_a_hint_that_works(tmp_path):
    err = plan_example(EXAMPLES / "cross-stripe-verify.fio", tmp_path)
    assert err is not None
    assert f"{EXAMPLES}/cross-stripe-verify.fio:19: a job starts 3.5T into its target" in err.message  # offset_increment=124g
    need = err.hint.split("at least ", 1)[1].split(",", 1)[0]
    body = (f"name: ex\nstorage: {{scratch_size: {need}}}\n"
            f"jobs:\n  - {{file: {EXAMPLES}/cross-stripe-verify.fio, size: 64M, runtime: 1s}}\n")
    make_plan(parse_scenario(body, str(tmp_path / "s.yaml"), base_dir=tmp_path))  # the hint works


# ---- fio itself agrees ---------------------------------------------------------------------------


def _fio(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["fio", *args], capture_output=True, text=True, timeout=60, cwd=cwd,
                          env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), **(env or {})})


def _words(line: str) -> collections.Counter:
    """fio's ``--showcmd`` line as a multiset of its ``--option[=value]`` words (fio quotes no
    value but a description's, so both sides are split the same way)."""
    return collections.Counter(re.split(r" +(?=--)", line.strip()))


def vmbench_reading(parsed: jobfile.ParsedJobFile) -> collections.Counter:
    """vmbench's reading of a job file written as fio's ``--showcmd`` writes it."""
    words = []
    for sec in parsed.sections:
        if not sec.is_global:
            words.append(f"--name={sec.name}")
        for o in sec.options:
            quote = '"' if o.name == "description" else ""
            words.append(f"--{o.name}" if o.value is None else f"--{o.name}={quote}{o.value}{quote}")
    return _words(" ".join(words))


def fio_engines() -> set[str]:
    return set(_fio("--enghelp").stdout.split()[3:])  # "Available IO engines: ..."


def test_vmbench_reads_every_example_as_fio_does():
    """fio --showcmd prints each file's options as fio read them (comments cut, aliases
    resolved, ${NAME} replaced); fio stops at the first file it cannot read, so the files
    compared are those whose engines this fio has (one fio call: it takes 0.2 s to start)."""
    engines = fio_engines()
    paths, env = [], dict(ENV["xnvme-compare.fio"])
    for path in _examples():
        # a value for every ${NAME}: unset, fio reads it as empty where vmbench refuses
        env = {n: f"v-{n}" for n in re.findall(r"\$\{(\w+)\}", path.read_text())} | env
        parsed = jobfile.parse(path.read_bytes(), str(path), env=env)
        if all(o.value in engines for s in parsed.sections for o in s.options if o.name == "ioengine"):
            paths.append(path)
    lines: list[str] = []
    todo = list(paths)
    while todo:
        out = _fio("--showcmd", *map(str, todo), env=env)
        done = [line for line in out.stdout.splitlines() if line.startswith("fio ")]  # not fio's help on a bad value
        if out.returncode == 0 and not out.stderr.strip():
            lines += done
            break
        # fio stopped at the file of the last line it printed: one it cannot read by itself?
        bad = todo[len(done) - 1]
        alone = _fio("--showcmd", str(bad), env=env)
        assert alone.returncode or alone.stderr.strip(), f"fio reads {bad.name} alone but not after the others"
        lines += done[:-1]
        paths.remove(bad)
        todo = todo[len(done):]
    assert len(lines) == len(paths) and all(line.startswith("fio ") for line in lines)
    for path, line in zip(paths, lines):
        assert vmbench_reading(jobfile.parse(path.read_bytes(), str(path), env=env)) == _words(line[4:]), path.name
    # every accepted example is among them (the others use engines this fio was built without)
    assert {n for n, e in EXPECTED.items() if e == OK} <= {p.name for p in paths}
    print(f"\nfio and vmbench read {len(paths)} of {len(EXPECTED)} examples alike (fio read no more)")
    assert len(paths) >= 60


def test_fio_parses_every_copy_vmbench_would_run(tmp_path):
    copies: list[tuple[str, Path]] = []
    for path in _examples():
        if EXPECTED[path.name] != OK:
            continue
        body = f"name: ex\nstacks: [{{name: fs, layers: [ext4]}}]\njobs:\n  - {{file: {path}, size: 64M, runtime: 1s}}\n"
        if path.name in ENV:
            body = body.rstrip("}\n") + ", env: {" + ", ".join(f"{k}: '{v}'" for k, v in ENV[path.name].items()) + "}}\n"
        job = parse_scenario(body, str(tmp_path / "s.yaml"), base_dir=tmp_path).jobs[0]
        assert job.jobfile is not None
        for target in ("/dev/vdb", "/mnt/vmbench/vmbench-fio.dat"):
            text, _ = jobfile.rewrite(job.jobfile.text, target, str(tmp_path), "ab12")
            copy = tmp_path / f"copy-{len(copies)}.fio"
            copy.write_text(text)
            copies.append((f"{path.name} on {target}", copy))
            assert f"filename={target}" in text and "${" not in text
    assert len(copies) == 2 * COUNTS[OK]
    out = _fio("--parse-only", *(str(c) for _, c in copies))
    if out.returncode or out.stderr.strip():  # which one: fio stops at the first it cannot read
        for what, copy in copies:
            one = _fio("--parse-only", str(copy))
            assert one.returncode == 0 and not one.stderr.strip(), f"{what}: {one.stderr}"


FILE_EXAMPLES = ("filecreate-ioengine.fio", "filedelete-ioengine.fio", "filestat-ioengine.fio")


def test_the_file_engine_examples_run_on_filesystem_layers_only_and_fio_parses_their_copies(tmp_path):
    """Refused above for want of a filesystem layer; with one they run there, in a directory."""
    for name in FILE_EXAMPLES:
        body = (f"name: ex\nstacks: [{{name: lvm-fs, layers: [lvm, ext4]}}]\n"
                f"jobs:\n  - {{file: {EXAMPLES / name}, size: 64M, runtime: 1s}}\n")
        plan = make_plan(parse_scenario(body, str(tmp_path / "s.yaml"), base_dir=tmp_path))
        assert {(st.side, st.layer) for st in plan.steps()} == {("guest", "lvm+ext4"), ("host", "host+ext4")}, name
        job = plan.scenario.jobs[0]
        assert job.file_job and job.jobfile is not None
        text, _ = jobfile.rewrite(job.jobfile.text, "/mnt/vmbench/vmbench-files", str(tmp_path), "ab12")
        assert "directory=/mnt/vmbench/vmbench-files" in text and "filename=" not in text
        copy = tmp_path / f"copy-{name}"
        copy.write_text(text)
        out = _fio("--parse-only", str(copy))
        assert out.returncode == 0 and not out.stderr.strip(), f"{name}: {out.stderr}"
