"""Issue 4: in-guest stacks built layer by layer in one boot, measured on every layer, torn
down cleanly between stacks; crypto ceilings stored.  Issue 30: in the same boot, the
metadata-churn profile's file jobs (filecreate, filestat, filedelete) on every filesystem layer
only, and on the host on a filesystem of each type made on the run's own scratch volume."""

from __future__ import annotations

import shutil

from vmbench.guest.layers import leftovers_in_guest
from vmbench.progress import RecordingProgress
from vmbench.results.db import ResultsDB
from vmbench.run import runner as runner_module
from vmbench.run.bootgroup import BootGroupRun
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from tests.integration.conftest import run_tag_resources

STACKS = """
name: it-stacks
storage: {scratch_size: 768M}
vm: {memory: 768M, cpu: Westmere}
stacks:
  - {name: gpt-lvm-ext4, layers: [partition, lvm, ext4]}
  - {name: luks-xfs, layers: [luks, xfs]}
  - {name: ext3, layers: [ext3]}
  - {name: thin-btrfs, layers: [{lvm: {type: thin}}, btrfs]}
crypto_benchmark: [aes-xts-plain64/512]
jobs:
  - {name: 4k-randwrite, rw: randwrite, bs: 4k, size: 64M, runtime: 1s, ramp: 0s}
  - {profile: metadata-churn, nrfiles: 64, numjobs: 2}
targets:
  - {job: 4k-randwrite, stack: luks-xfs, layer: luks2+xfs, min_iops: 1}
"""


class CheckingRunner(Runner):
    """After each stack's teardown, look in the guest for anything left behind (its boot
    groups run as CheckingBootGroupRun)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.after_stack: list[tuple[str, list[str]]] = []


class CheckingBootGroupRun(BootGroupRun):
    def _measure_stack(self, base, disk, stack, steps):
        built = super()._measure_stack(base, disk, stack, steps)
        gt = base.side
        mounts = gt.run(["findmnt", "--noheadings", "--list", "--output", "TARGET"], timeout=60).stdout.split()
        self.r.after_stack.append((stack.name, leftovers_in_guest(gt, disk) + [m for m in mounts if m.startswith("/mnt")]))
        return built


def test_stacks_layer_by_layer_in_one_boot(machine, tmp_path, monkeypatch):
    monkeypatch.setattr(runner_module, "BootGroupRun", CheckingBootGroupRun)
    scenario = parse_scenario(STACKS, str(tmp_path / "s.yaml"))
    db = ResultsDB(tmp_path / "r.db")
    runner = CheckingRunner(scenario, db, RecordingProgress())
    outcome = runner.run()
    assert outcome.status == "ok"
    assert runner.boots_started == 1
    assert runner.after_stack == [("gpt-lvm-ext4", []), ("luks-xfs", []), ("ext3", []), ("thin-btrfs", [])]

    rows = db.rows("measurements", outcome.run_id)
    layers = [(m["stack"], m["layer"]) for m in rows if m["side"] == "guest" and m["job"] == "4k-randwrite"]
    assert layers == [
        (None, "raw"),
        ("gpt-lvm-ext4", "partition"), ("gpt-lvm-ext4", "partition+lvm"), ("gpt-lvm-ext4", "partition+lvm+ext4"),
        ("luks-xfs", "luks2"), ("luks-xfs", "luks2+xfs"),
        ("ext3", "ext3"),
        ("thin-btrfs", "lvm-thin"), ("thin-btrfs", "lvm-thin+btrfs"),
    ]
    by_layer = {(m["stack"], m["layer"]): m for m in rows if m["job"] == "4k-randwrite"}
    assert by_layer[("luks-xfs", "luks2")]["target"] == "/dev/mapper/vmbench_crypt"
    assert by_layer[("luks-xfs", "luks2+xfs")]["target"] == "/mnt/vmbench/vmbench-fio.dat"
    assert by_layer[("gpt-lvm-ext4", "partition+lvm")]["target"] == "/dev/vmbench_vg/vmbench_lv"
    assert all(m["iops"] > 0 for m in rows)

    built = db.rows("cells", outcome.run_id)[0]["evidence"]["layers"]
    assert [(b["stack"], b["layer"]) for b in built][:3] == [
        ("gpt-lvm-ext4", "partition"), ("gpt-lvm-ext4", "partition+lvm"), ("gpt-lvm-ext4", "partition+lvm+ext4")]
    assert all(b["seconds"] > 0 and b["commands"] for b in built)

    crypto = db.rows("crypto", outcome.run_id)
    guest = [c for c in crypto if c["side"] == "guest"]
    assert [(c["cpu"], c["cipher"], c["key_bits"], c["aes_flag"]) for c in guest] == [("Westmere", "aes-xts-plain64", 512, 1)]
    assert guest[0]["encrypt_mib_s"] > 0 and guest[0]["decrypt_mib_s"] > 0
    host = [c for c in crypto if c["side"] == "host"]
    assert len(host) == 1 and (host[0]["encrypt_mib_s"] or host[0]["error"])  # this host may lack the kernel crypto API

    from vmbench.report.build import build_report
    from vmbench.report.load import load_run

    header, tables = build_report(load_run(db, outcome.run_id))
    names = [t.name for t in tables]
    # the CPU per I/O table follows the gap table: the VM's QEMU process was sampled on the host
    assert names[:5] == ["gaps", "cpu-per-io", "layers", "crypto", "targets"]
    by_name = {t.name: t for t in tables}
    layer_rows = [r for r in by_name["layers"].records if r["stack"] == "luks-xfs" and r["job"] == "4k-randwrite"]
    assert [r["layer"] for r in layer_rows] == ["host", "raw", "+luks2", "+xfs"]
    assert by_name["targets"].records[0]["result"] == "PASS"
    assert run_tag_resources(machine, outcome.tag) == []
    _check_file_jobs(rows, by_name["layers"].records)
    assert not [line for line in open("/proc/mounts") if f"vmbench-{outcome.tag}-" in line]  # the host's filesystems unmounted


META = ("meta-create", "meta-stat", "meta-delete")
UNITS = {"meta-create": "files/s", "meta-stat": "stats/s", "meta-delete": "deletes/s"}


def _check_file_jobs(rows: list[dict], layer_records: list[dict]) -> None:
    """The file jobs ran in the mount of each filesystem layer only, fio's --directory, their
    operations counted; the host's rows on the same filesystem types (btrfs where this host
    has mkfs.btrfs, else the report says it has no like-for-like row); the report names files/s."""
    meta = [m for m in rows if m["job"] in META]
    guest = {(m["stack"], m["layer"], m["job"]) for m in meta if m["side"] == "guest"}
    fs_layers = [("gpt-lvm-ext4", "partition+lvm+ext4"), ("luks-xfs", "luks2+xfs"), ("ext3", "ext3"), ("thin-btrfs", "lvm-thin+btrfs")]
    assert guest == {(st, layer, j) for st, layer in fs_layers for j in META}
    host_fs = ["ext4", "xfs", "ext3"] + (["btrfs"] if shutil.which("mkfs.btrfs") else [])
    assert {(m["layer"], m["job"]) for m in meta if m["side"] == "host"} == {(f"host+{fs}", j) for fs in host_fs for j in META}
    for m in meta:
        assert m["target"].endswith("/vmbench-files") and f"--directory={m['target']}" in m["argv"], m
        assert m["iops"] > 0 and m["p50_ns"] and m["p99_ns"], m
        assert m["job_params"]["nrfiles"] == 64 and m["job_params"]["numjobs"] == 2
    figures = {}
    for rec in layer_records:
        if rec["job"] in META:
            figures[(rec["stack"], rec["job"], rec["layer"])] = rec
    for stack, top, fs in (("gpt-lvm-ext4", "+ext4", "ext4"), ("luks-xfs", "+xfs", "xfs"), ("ext3", "+ext3", "ext3")):
        for job in META:
            host, layer = figures[(stack, job, f"host+{fs}")], figures[(stack, job, top)]
            assert host["unit"] == layer["unit"] == UNITS[job] and layer["gap"] is not None
            print(f"{job} {fs}: guest {layer['iops']:,.0f} {UNITS[job]} (p99 {layer['p99_ms']:.3f} ms), "
                  f"host {host['iops']:,.0f} {UNITS[job]} (p99 {host['p99_ms']:.3f} ms)")
    btrfs = figures[("thin-btrfs", "meta-create", "+btrfs")]
    assert ("the host has no like-for-like row" in (btrfs.get("note") or "")) == (not shutil.which("mkfs.btrfs"))


BROKEN = """
name: it-broken-layer
storage: {scratch_size: 256M}
vm: {memory: 768M}
stacks:
  - {name: bad-ext4, layers: [partition, {ext4: {mkfs_options: ["-O", "no_such_feature"]}}]}
jobs:
  - {name: 4k-randread, rw: randread, bs: 4k, size: 32M, runtime: 1s, ramp: 0s}
"""


def test_failed_layer_is_reported_and_the_vm_removed(machine, tmp_path):
    from tests.integration.conftest import flat, vmbench, write

    scenario = write(tmp_path, "broken.yaml", BROKEN)
    run = vmbench("run", str(scenario), "--db", str(tmp_path / "r.db"))
    assert run.returncode == 4, run.stderr
    err = flat(run.stderr)
    assert "error: in cell baseline: building layer ext4 of stack bad-ext4 failed:" in err
    assert "command failed (exit 1): mkfs.ext4 -F -q" in err
    assert "Invalid filesystem option set: no_such_feature" in err  # mkfs's own error output is shown
    assert "Traceback" not in run.stderr
    db = ResultsDB(tmp_path / "r.db", create=False)
    r = db.resolve_run("latest")
    assert r.status == "failed" and "mkfs.ext4" in r.error
    # the raw disk and the partition were measured before the failure; nothing is left behind
    assert [m["layer"] for m in db.rows("measurements", r.id) if m["side"] == "guest"] == ["raw", "partition"]
    assert run_tag_resources(machine, r.tag) == []
