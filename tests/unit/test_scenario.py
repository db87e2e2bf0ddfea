"""Scenario validation: every mistake gets one clear message naming file, line, key and the allowed values."""

import re
import textwrap
from pathlib import Path

import pytest

from vmbench.errors import ScenarioError
from vmbench.scenario import parse_scenario
from vmbench.scenario.axes import settings_of
from vmbench.settings import Aio, Bus, Cache, CpuMode, DetectZeroes, Discard, Feature, Filesystem

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

BASE = """
name: t
jobs:
  - name: j1
    rw: randwrite
    bs: 4k
"""


def parse(text: str):
    return parse_scenario(textwrap.dedent(text), "t.yaml")


def error(text: str) -> str:
    with pytest.raises(ScenarioError) as exc:
        parse(text)
    e = exc.value
    return e.message + (f" | hint: {e.hint}" if e.hint else "")


def test_minimal_scenario_defaults():
    s = parse(BASE)
    assert s.name == "t"
    assert s.template == "debian12"
    assert s.hypervisor.uri == "qemu:///system"
    assert [c.name for c in s.cells] == ["baseline"]
    vm = s.cells[0].vm
    assert (vm.bus, vm.cache, vm.aio, vm.iothread) == (Bus.VIRTIO_BLK, Cache.NONE, Aio.THREADS, False)
    assert vm.cpu.model == "kvm64"
    job = s.jobs[0]
    assert (job.rw, job.bs, job.iodepth, job.direct) == ("randwrite", 4096, 4, True)


def test_quick_scenario_loads():
    from vmbench.scenario import load_scenario

    s = load_scenario(SCENARIOS / "quick.yaml")
    assert [j.name for j in s.jobs] == ["4k-randwrite", "1m-read"]
    assert s.jobs[1].bs == 1 << 20
    assert len(s.cells) == 1


def test_unknown_top_key_names_file_line_and_suggestion():
    msg = error(BASE + "repeat: 3\n")
    assert msg.startswith("t.yaml:7: repeat: unknown key; did you mean 'repeats'? | hint: allowed here: advise, cells,")


def test_a_misspelt_jobs_is_named_as_an_unknown_key_not_as_no_jobs():
    assert error("name: t\njob:\n  - {name: a, rw: read, bs: 4k}\n").startswith(
        "t.yaml:2: job: unknown key; did you mean 'jobs'? | hint: allowed here: advise,")
    # a misspelt required key is named as the mistake, not as a key that is missing
    assert error(BASE + "stacks: [{nmae: x, layers: [ext4]}]\n").startswith(
        "t.yaml:7: stacks[0].nmae: unknown key; did you mean 'name'?")


def test_bad_enum_value_lists_allowed_values():
    msg = error(BASE + "vm:\n  cache: writebak\n")
    assert msg == "t.yaml:8: vm.cache: 'writebak' is not one of: none, writethrough, writeback, directsync, unsafe (did you mean 'writeback'?)"


def test_unknown_vm_key():
    msg = error(BASE + "vm:\n  buss: virtio-blk\n")
    assert "t.yaml:8: vm.buss: unknown key" in msg and "did you mean 'bus'?" in msg


def test_aio_native_needs_direct_cache():
    msg = error(BASE + "vm:\n  cache: writeback\n  aio: native\n")
    assert "aio=native needs a direct cache mode" in msg
    assert "cache=writeback" in msg


def test_detect_zeroes_and_discard_left_to_the_hypervisor_unless_given():
    s = parse(BASE)
    assert (s.baseline.detect_zeroes, s.baseline.discard) == (None, None)
    assert "detect_zeroes" not in settings_of(s.baseline) and "discard" not in settings_of(s.baseline)
    vm = parse(BASE + "vm:\n  detect_zeroes: unmap\n  discard: on\n").baseline  # on/off: libvirt's and PVE's words
    assert (vm.detect_zeroes, vm.discard) == (DetectZeroes.UNMAP, Discard.UNMAP)
    assert list(settings_of(vm))[-2:] == ["detect_zeroes", "discard"] and settings_of(vm)["discard"] == "unmap"
    vm = parse(BASE + "vm:\n  detect_zeroes: off\n  discard: ignore\n").baseline  # YAML off is false
    assert (vm.detect_zeroes, vm.discard) == (DetectZeroes.OFF, Discard.IGNORE)
    assert "is not one of: ignore, unmap" in error(BASE + "vm:\n  discard: trim\n")


def test_detect_zeroes_unmap_needs_discard_unmap():
    msg = error(BASE + "vm:\n  detect_zeroes: unmap\n")
    assert "detect_zeroes unmap turns zero writes into discards, so it needs discard: unmap" in msg
    assert "the hypervisor default ignore" in msg and "hint: add discard: unmap" in msg
    s = parse(BASE + "mode: factorial\nvary:\n  detect_zeroes: [off, unmap]\n  discard: [ignore, unmap]\n")
    assert [c.name for c in s.cells] == ["baseline", "detect_zeroes=off,discard=ignore", "detect_zeroes=off,discard=unmap",
                                         "detect_zeroes=unmap,discard=unmap"]
    assert s.skipped_cells[0][0] == "detect_zeroes=unmap,discard=ignore"
    assert [c.changed for c in s.cells[1:]] == [("detect_zeroes", "discard")] * 3


def test_iothread_refused_on_sata():
    msg = error(BASE + "vm:\n  bus: sata\n  iothread: true\n")
    assert "iothread is not possible on bus sata" in msg


def test_host_passthrough_refused_with_tcg():
    msg = error(BASE + "hypervisor:\n  accel: tcg\nvm:\n  cpu: host-passthrough\n")
    assert "host-passthrough needs KVM" in msg


def test_one_factor_plan_cells():
    s = parse(BASE + "vary:\n  cache: [none, writeback, unsafe]\n  bus: [virtio-scsi]\n")
    assert [c.name for c in s.cells] == ["baseline", "cache=writeback", "cache=unsafe", "bus=virtio-scsi"]
    assert s.cells[1].vm.cache is Cache.WRITEBACK and s.cells[1].vm.bus is Bus.VIRTIO_BLK
    assert s.cells[3].vm.bus is Bus.VIRTIO_SCSI and s.cells[3].vm.cache is Cache.NONE
    assert s.cells[1].changed == ("cache",)
    assert s.plan_mode == "one-factor"


def test_one_factor_refuses_impossible_cell():
    msg = error(BASE + "vm:\n  aio: native\nvary:\n  cache: [writeback]\n")
    assert "cell 'cache=writeback'" in msg and "aio=native" in msg


def test_factorial_plan():
    s = parse(BASE + "mode: factorial\nvary:\n  bus: [virtio-blk, virtio-scsi]\n  cache: [none, writeback]\n")
    assert [c.name for c in s.cells] == [
        "baseline", "bus=virtio-blk,cache=writeback", "bus=virtio-scsi,cache=none", "bus=virtio-scsi,cache=writeback",
    ]


def test_vary_unknown_axis():
    msg = error(BASE + "vary:\n  cach: [none]\n")
    assert "vary.cach: unknown key" in msg and "did you mean 'cache'?" in msg


def test_cpu_axis_and_aes():
    s = parse(BASE + "vary:\n  cpu: [qemu64, {model: kvm64, aes: on}, max]\n  aes: [on]\n")
    labels = [c.vm.cpu.label for c in s.cells]
    assert labels == ["kvm64", "qemu64", "kvm64+aes", "max"]
    assert s.cells[3].vm.cpu.mode is CpuMode.MAX
    assert s.cells[2].vm.cpu.aes is Feature.ON


def test_explicit_cells_and_journey():
    s = parse(BASE + """
cells:
  - name: scsi-wb
    bus: virtio-scsi
    cache: writeback
  - name: blk
""")
    assert [c.name for c in s.cells] == ["scsi-wb", "blk"]
    assert s.plan_mode == "cells"
    j = parse(BASE + """
journey:
  - name: as-found
    bus: virtio-scsi
    cache: writeback
  - name: blk-none
    bus: virtio-blk
    cache: none
  - name: iothread
    iothread: true
""")
    assert [(c.name, c.vm.bus.value, c.vm.cache.value, c.vm.iothread) for c in j.cells] == [
        ("as-found", "virtio-scsi", "writeback", False),
        ("blk-none", "virtio-blk", "none", False),
        ("iothread", "virtio-blk", "none", True),
    ]
    assert j.cells[2].changed == ("iothread",)


def test_journey_step_must_change_something():
    msg = error(BASE + "journey:\n  - name: a\n  - name: b\n")
    assert "step 'b' changes nothing" in msg


def test_two_matrix_kinds_refused():
    msg = error(BASE + "vary:\n  cache: [none]\ncells:\n  - name: a\n")
    assert "use one of vary, cells or journey" in msg


def test_job_needs_rw_and_bs():
    msg = error("jobs:\n  - name: x\n    rw: read\n")
    assert "a job needs rw and bs" in msg


def test_no_jobs_refused():
    msg = error("name: x\n")
    assert "needs at least one job" in msg and "tuning-matrix" in msg


def test_profile_expansion_with_overrides_and_select():
    s = parse("jobs:\n  - profile: tuning-matrix\n    runtime: 5s\n    select: [4k-randwrite, 1m-read]\n")
    assert [(j.name, j.bs, j.sync, j.runtime) for j in s.jobs] == [("4k-randwrite", 4096, True, 5.0), ("1m-read", 1 << 20, True, 5.0)]
    full = parse("jobs:\n  - profile: tuning-matrix\n")
    assert len(full.jobs) == 12


def test_unknown_profile():
    msg = error("jobs:\n  - profile: tuning\n")
    assert "'tuning' is not one of: tuning-matrix, boot-storm" in msg


def test_cache_buster_sized_from_memory_and_must_fit():
    msg = error("vm:\n  memory: 1G\njobs:\n  - profile: cache-buster\n")
    assert "job cache-buster needs 4g" in msg and "scratch_size" in msg
    s = parse("vm:\n  memory: 512\nstorage:\n  scratch_size: 4G\njobs:\n  - profile: cache-buster\n")
    assert s.jobs[0].size == 2 << 30


def test_job_size_must_fit_scratch():
    msg = error(BASE.replace("bs: 4k", "bs: 4k\n    size: 2G"))
    assert "needs 2g but the scratch disk leaves 1g" in msg


def test_rwmixread_only_for_mixed():
    msg = error(BASE.replace("bs: 4k", "bs: 4k\n    rwmixread: 70"))
    assert "rwmixread: only applies to mixed jobs" in msg


def test_duplicate_job_names():
    msg = error(BASE + "  - name: j1\n    rw: read\n    bs: 1M\n")
    assert "the name 'j1' is used twice" in msg


def test_bad_size_and_duration():
    assert "is not a size" in error(BASE.replace("bs: 4k", "bs: four"))
    assert "is not a duration" in error(BASE.replace("bs: 4k", "bs: 4k\n    runtime: soon"))


def test_invalid_yaml_reports_line():
    msg = error("jobs: [\n")
    assert msg.startswith("t.yaml:2: not valid YAML")


def test_duplicate_yaml_key():
    msg = error(BASE + "name: again\n")
    assert "duplicate key 'name'" in msg


def test_stacks_parse_and_labels():
    s = parse(BASE + """
stacks:
  - name: lvm-ext4
    layers: [partition, lvm, {ext4: {mount_options: [noatime]}}]
  - name: luks-xfs
    layers:
      - luks: {cipher: aes-xts-plain64, key_size: 512, sector_size: 4096, perf_flags: [no_read_workqueue]}
      - xfs
  - name: thin-btrfs
    layers: [{lvm: {type: thin}}, btrfs]
""")
    assert [st.describe() for st in s.stacks] == [
        "raw -> partition -> lvm -> ext4", "raw -> luks2 -> xfs", "raw -> lvm-thin -> btrfs",
    ]
    assert s.stacks[0].filesystem.mount_options == ("noatime",)
    assert s.stacks[1].luks.sector_size == 4096
    assert s.stacks[0].filesystem.fs is Filesystem.EXT4
    # crypto ceilings: the stacks' cipher first, then the default set
    assert s.crypto_benchmark[0] == ("aes-xts-plain64", 512)


@pytest.mark.parametrize(
    "layers, expected",
    [
        ("[ext4, lvm]", "nothing can be layered on top of a filesystem (ext4)"),
        ("[lvm, partition]", "partition must be the first layer"),
        ("[lvm, lvm]", "only one lvm layer per stack"),
        ("[luks, luks]", "only one luks layer per stack"),
        ("[zfs]", "'zfs' is not a layer"),
        ("[{luks: {version: 1, sector_size: 4096}}]", "LUKS1 only has 512-byte sectors"),
        ("[{luks: {perf_flags: [fast]}}]", "'fast' is not one of: no_read_workqueue, no_write_workqueue"),
        ("[{ext4: {mkfs_options: ['-O', '/dev/vda']}}]", "options may not name devices or paths"),
        ("[{lvm: {extent_size: 3M}}]", "must be a power of two"),
        ("[]", "needs at least one layer"),
    ],
)
def test_refused_layer_orders_and_options(layers, expected):
    assert expected in error(BASE + f"stacks:\n  - name: s\n    layers: {layers}\n")


def test_stack_on_root_disk_refused():
    msg = error(BASE + "stacks:\n  - name: s\n    device: /dev/vda\n    layers: [ext4]\n")
    assert "stacks are only ever built on vmbench's scratch disk" in msg


def test_luks_4k_sectors_refuse_smaller_direct_io():
    msg = error(BASE.replace("bs: 4k", "bs: 512") + "stacks:\n  - name: s\n    layers: [{luks: {sector_size: 4096}}]\n")
    assert "LUKS sector size 4096 cannot take job j1's direct 512 I/O" in msg


def test_targets_validated():
    s = parse(BASE + "stacks:\n  - name: s\n    layers: [luks, ext4]\ntargets:\n  - job: j1\n    layer: luks2+ext4\n    min_mb_s: 118\n")
    assert s.targets[0].min_mb_s == 118 and s.targets[0].layer == "luks2+ext4"
    assert "no layer 'ext4'" in error(BASE + "stacks:\n  - name: s\n    layers: [luks, ext4]\ntargets:\n  - job: j1\n    layer: ext4\n    min_mb_s: 1\n")
    assert "no job named 'nope'" in error(BASE + "targets:\n  - job: nope\n    min_mb_s: 1\n")
    assert "needs at least one of" in error(BASE + "targets:\n  - job: j1\n")


def test_jobfile_runs_as_users_write_it(tmp_path):
    good = tmp_path / "good.fio"
    good.write_text("[global]\nioengine=libaio\ndirect=1\nfilename=${VMBENCH_TARGET}\nsize=64m\nruntime=5\ntime_based\n[w]\nrw=randwrite\nbs=4k\n")
    mine = tmp_path / "mine.fio"
    mine.write_text("[w]\nfilename=/dev/sda\nrw=write\n")
    two = tmp_path / "two.fio"
    two.write_text("[a]\nfilename=/dev/sda\n[b]\nfilename=/dev/sdb\n")
    evil = tmp_path / "evil.fio"
    evil.write_text("[w]\nfilename=${VMBENCH_TARGET}\nexec_prerun=rm -rf /\n")
    s = parse_scenario("jobs:\n  - file: good.fio\n", str(tmp_path / "s.yaml"), base_dir=tmp_path)
    assert s.jobs[0].name == "good" and s.jobs[0].jobfile.runtime == 5.0 and s.jobs[0].size == 64 << 20
    assert parse_scenario("jobs:\n  - file: mine.fio\n", "s.yaml", base_dir=tmp_path).jobs[0].name == "mine"
    # sections naming different files are all pointed at the layer's target (as fio reads them)
    assert parse_scenario("jobs:\n  - file: two.fio\n", "s.yaml", base_dir=tmp_path).jobs[0].name == "two"
    with pytest.raises(ScenarioError, match="exec_prerun"):
        parse_scenario("jobs:\n  - file: evil.fio\n", "s.yaml", base_dir=tmp_path)
    with pytest.raises(ScenarioError, match="cannot read fio job file"):
        parse_scenario("jobs:\n  - file: missing.fio\n", "s.yaml", base_dir=tmp_path)


def test_memory_units():
    assert parse(BASE + "vm:\n  memory: 2G\n").baseline.memory_mib == 2048
    assert parse(BASE + "vm:\n  memory: 1536\n").baseline.memory_mib == 1536
    assert "too little" in error(BASE + "vm:\n  memory: 128\n")


def test_missing_file():
    from vmbench.scenario import load_scenario

    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario("does/not/exist.yaml")


def test_every_shipped_scenario_validates():
    from vmbench.scenario import load_scenario

    files = sorted(SCENARIOS.glob("*.yaml"))
    assert files
    for f in files:
        load_scenario(f)


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.name)
def test_vmbench_plan_accepts_every_shipped_scenario_as_shipped(path, tmp_path, monkeypatch, capsys):
    """``vmbench plan`` on each file in scenarios/, untouched: no host is contacted, no
    secret is needed (the Proxmox token is read when the API is first used, not at plan)."""
    import socket

    from vmbench.cli.main import main

    def no_network(*args, **kwargs):
        raise AssertionError(f"vmbench plan tried to reach a host: {args}")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("VMBENCH_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("VMBENCH_PVE_TOKEN", raising=False)
    assert main(["plan", str(path)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert f"scenario: {path.stem}" in out and "estimated duration:" in out


def test_shipped_proxmox_and_remote_libvirt_scenarios():
    from vmbench.scenario import load_scenario
    from vmbench.settings import DriverName

    pve = load_scenario(SCENARIOS / "proxmox.yaml")
    assert pve.hypervisor.driver is DriverName.PROXMOX and pve.hypervisor.proxmox is not None
    cfg = pve.hypervisor.proxmox
    assert (cfg.secret_env, cfg.secret_file) == ("VMBENCH_PVE_TOKEN", None)  # never a secret in the file
    assert [c.name for c in pve.cells][:3] == ["baseline", "aio=native", "aio=threads"]
    assert pve.baseline.aio is Aio.IO_URING and pve.baseline.bus is Bus.VIRTIO_SCSI and pve.baseline.iothread
    cluster = load_scenario(SCENARIOS / "proxmox-cluster.yaml")  # three nodes, the template on shared RBD
    hv = cluster.hypervisor
    assert hv.host_labels == ("pve1", "pve2", "pve3") and [m.ssh.host for m in hv.members] == ["pve1", "pve2", "pve3"]
    assert hv.proxmox is not None and hv.proxmox.storage == "ceph-vm" and cluster.storage.type.value == "rbd"
    assert cluster.load is not None and [st.size for st in cluster.load.steps] == [3, 9]
    remote = load_scenario(SCENARIOS / "remote-libvirt.yaml")
    assert remote.hypervisor.driver is DriverName.LIBVIRT and remote.hypervisor.uri.startswith("qemu+ssh://root@")
    assert remote.hypervisor.ssh is not None and remote.hypervisor.state_dir == "/var/lib/vmbench"


def test_factorial_cpu_and_aes_keeps_both():
    s = parse(BASE + "mode: factorial\nvary:\n  aes: [on, off]\n  cpu: [kvm64, Westmere]\n")
    assert [(c.name, c.vm.cpu.label) for c in s.cells] == [
        ("baseline", "kvm64"), ("aes=on,cpu=kvm64", "kvm64+aes"), ("aes=on,cpu=Westmere", "Westmere+aes"),
        ("aes=off,cpu=kvm64", "kvm64-aes"), ("aes=off,cpu=Westmere", "Westmere-aes")]


def test_factorial_leaves_out_impossible_combinations():
    s = parse(BASE + "mode: factorial\nvary:\n  cache: [none, writeback]\n  aio: [native, threads]\n")
    assert [c.name for c in s.cells] == ["baseline", "cache=none,aio=native", "cache=writeback,aio=threads"]
    assert s.skipped_cells[0][0] == "cache=writeback,aio=native" and "aio=native needs a direct cache mode" in s.skipped_cells[0][1]


def test_non_finite_numbers_and_non_text_files_refused(tmp_path):
    assert "is not a duration" in error(BASE.replace("bs: 4k", "bs: 4k\n    runtime: .inf"))
    assert "is not a number" in error(BASE + "targets:\n  - {job: j1, min_mb_s: .nan}\n")
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"name: \xff\xfe\n")
    from vmbench.scenario import load_scenario

    with pytest.raises(ScenarioError, match="not a text file"):
        load_scenario(p)


def test_mkfs_options_may_not_name_any_path():
    assert "options may not name devices or paths" in error(BASE + "stacks:\n  - name: s\n    layers: [{btrfs: {mkfs_options: [dev/vda]}}]\n")


@pytest.mark.parametrize("line, message", [
    ("include other.fio", "j.fio:4: includes"),
    ("ioengine=external:/tmp/x.so", "ioengine names an engine vmbench does not allow"),
    ("replay_redirect=/dev/sda", "sets replay_redirect"),
    ("cgroup=bench", "sets cgroup"),
])
def test_jobfile_options_that_reach_outside_are_refused(tmp_path, line, message):
    (tmp_path / "j.fio").write_text(f"[w]\nfilename=${{VMBENCH_TARGET}}\nrw=read\n{line}\n")
    with pytest.raises(ScenarioError, match=re.escape(message)):
        parse_scenario("jobs:\n  - file: j.fio\n", "s.yaml", base_dir=tmp_path)


# ---- hypervisor (ssh, state_dir) and storage ---------------------------------------------------


def test_local_hypervisor_has_no_ssh():
    s = parse(BASE)
    assert s.hypervisor.ssh is None and not s.hypervisor.remote and s.hypervisor.host_label == "localhost"
    assert s.hypervisor.state_dir is None
    assert s.storage.type.value == "dir" and s.storage.describe() == "dir pool vmbench, scratch 1g"


def test_ssh_defaults_from_the_uri():
    s = parse(BASE + "hypervisor:\n  uri: qemu+ssh://admin@h.example:2222/system\n")
    ssh = s.hypervisor.ssh
    assert (ssh.host, ssh.user, ssh.port, ssh.key_file, ssh.known_hosts) == ("h.example", "admin", 2222, None, None)
    assert s.hypervisor.remote and s.hypervisor.host_label == "h.example" and ssh.label == "admin@h.example:2222"
    plain = parse(BASE + "hypervisor:\n  uri: qemu+ssh://pve1.example.org/system\n").hypervisor.ssh
    assert (plain.user, plain.port, plain.label) == ("root", 22, "root@pve1.example.org")


def test_ssh_section_overrides_the_uri():
    s = parse(BASE + "hypervisor:\n  uri: qemu+ssh://admin@h.example:2222/system\n  state_dir: /srv/vmbench/\n"
              "  ssh:\n    user: bench\n    port: 22\n    key_file: ~/.ssh/id_bench\n    known_hosts: /etc/vmbench/known_hosts\n")
    ssh = s.hypervisor.ssh
    assert (ssh.host, ssh.user, ssh.port) == ("h.example", "bench", 22)
    assert ssh.key_file == str(Path("~/.ssh/id_bench").expanduser()) and ssh.known_hosts == "/etc/vmbench/known_hosts"
    assert s.hypervisor.state_dir == "/srv/vmbench"


def test_ssh_password_refused():
    msg = error(BASE + "hypervisor:\n  uri: qemu+ssh://root@h.example/system\n  ssh: {password: x}\n")
    assert msg.startswith("t.yaml:9: hypervisor.ssh.password: vmbench never takes a password")


def test_ssh_needs_a_remote_uri_and_unknown_ssh_keys_refused():
    assert "ssh applies to qemu+ssh://" in error(BASE + "hypervisor:\n  ssh: {user: root}\n")
    msg = error(BASE + "hypervisor:\n  uri: qemu+ssh://root@h.example/system\n  ssh: {keyfile: /k}\n")
    assert "hypervisor.ssh.keyfile: unknown key" in msg and "did you mean 'key_file'?" in msg


@pytest.mark.parametrize("uri, expected", [
    ("qemu+tls://h.example/system", "transport 'tls' is not supported"),
    ("qemu+tcp://h.example/system", "transport 'tcp' is not supported"),
    ("xen:///system", "vmbench drives QEMU through libvirt"),
    ("qemu+ssh:///system", "names no host"),
    ("qemu+ssh://root@h.example/system?keyfile=/k", "leave URI parameters out"),
    ("qemu:///root", "the URI path is /system or /session"),
    ("/var/run/libvirt", "is not a libvirt URI"),
])
def test_refused_libvirt_uris(uri, expected):
    msg = error(BASE + f"hypervisor:\n  uri: '{uri}'\n")
    assert msg.startswith("t.yaml:8: hypervisor.uri:") and expected in msg


@pytest.mark.parametrize("state_dir", ["srv/vmbench", "/srv/../etc"])
def test_state_dir_must_be_absolute(state_dir):
    assert "is not an absolute directory path" in error(BASE + f"hypervisor:\n  state_dir: {state_dir}\n")


def test_unknown_storage_type_lists_allowed_values():
    msg = error(BASE + "storage:\n  type: lvm\n")
    assert msg == "t.yaml:8: storage.type: 'lvm' is not one of: dir, zfs, zfs-dataset, rbd"
    assert "did you mean 'pool'?" in error(BASE + "storage:\n  pools: x\n")


def test_a_value_given_twice_under_vary_is_refused_naming_the_axis_and_the_value():
    msg = error(BASE + "vary:\n  cache: [none, none]\n")
    assert "t.yaml:8: vary.cache: the value none is given twice" in msg and "give each value once" in msg
    msg = error(BASE + "vary:\n  cache:\n    - writeback\n    - unsafe\n    - writeback\n")
    assert "t.yaml:11: vary.cache: the value writeback is given twice (lines 9 and 11)" in msg
    # two spellings of one value are one value
    assert "vary.memory: 1024 is the same value as 1G" in error(BASE + "vary:\n  memory: [1G, 1024]\n")
    assert "vary.cpu: host-passthrough is the same value as host" in error(
        BASE + "hypervisor: {accel: kvm}\nvary:\n  cpu: [host, host-passthrough]\n")
    assert "vary.aes: the value on is given twice" in error(BASE + "vary:\n  aes: [on, true]\n")
    assert "vary.cpu: the value {model: Westmere, aes: on} is given twice" in error(
        BASE + "vary:\n  cpu: [{model: Westmere, aes: on}, {model: Westmere, aes: on}]\n")
    # in a factorial too
    assert "vary.bus: the value virtio-scsi is given twice" in error(
        BASE + "mode: factorial\nvary:\n  bus: [virtio-scsi, virtio-scsi]\n  cache: [writeback]\n")
    # the baseline's own value is still welcome (it is the baseline cell), and distinct values run
    s = parse(BASE + "vary:\n  cache: [none, writeback]\n  aes: [on, off]\n")
    assert [c.name for c in s.cells] == ["baseline", "cache=writeback", "aes=on", "aes=off"]


def test_two_factorial_combinations_that_make_the_same_vm_are_refused():
    msg = error(BASE + "mode: factorial\nvary:\n  cpu: [{model: kvm64, aes: on}, kvm64]\n  aes: [on, off]\n")
    assert "vary: cells 'cpu=kvm64+aes,aes=on' and 'cpu=kvm64,aes=on' are the same VM" in msg
    assert "give each setting on one axis only" in msg


def test_two_explicit_cells_with_the_same_settings_are_refused():
    msg = error(BASE + "cells:\n  - {name: a, cache: writeback, aio: threads}\n  - {name: b, aio: threads, cache: writeback}\n")
    assert "t.yaml:9: cells[1]: cell 'b' is the same VM with the same stacks as cell 'a'" in msg
    assert "the name 'a' is used twice" in error(BASE + "cells:\n  - {name: a}\n  - {name: a}\n")
    stacks = "stacks:\n  - {name: s, layers: [ext4]}\n"
    s = parse(BASE + stacks + "cells:\n  - {name: a, stacks: []}\n  - {name: b, stacks: [s]}\n")  # same VM, other stacks
    assert [c.name for c in s.cells] == ["a", "b"]
