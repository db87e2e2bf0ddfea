"""Issue 24: preconditioning writes data only where a job reads it, and its deadline (and
the plan's estimate) follow the disk's write limits, so a MB/s cap never times it out."""

from __future__ import annotations

import pytest

from vmbench.fio.job import PRECONDITION_BS, FioJob, precondition_seconds, to_precondition
from vmbench.run.plan import PRECONDITION_MB_S, estimate, make_plan, precondition_estimate, precondition_lines
from vmbench.scenario import parse_scenario
from vmbench.scenario.model import IoLimits, VmConfig

MiB = 1 << 20
READ = FioJob("r", rw="randread", size=64 * MiB)
BIG_READ = FioJob("big", rw="read", size=256 * MiB)
WRITE = FioJob("w", rw="randwrite", size=512 * MiB)


def test_only_jobs_that_read_are_preconditioned_the_biggest_of_them():
    assert to_precondition([WRITE]) is None
    assert to_precondition([READ, WRITE]) == READ  # the bigger write needs no data before it
    assert to_precondition([READ, BIG_READ, WRITE]) == BIG_READ
    assert to_precondition([FioJob("m", rw="randrw", rwmixread=70)]) is not None
    assert to_precondition([FioJob("m", rw="randrw", rwmixread=0)]) is None


@pytest.mark.parametrize("limits, rate", [
    (IoLimits(), None),
    (IoLimits(mbps_wr=1), MiB),
    (IoLimits(mbps=2.5, mbps_wr=None), 2.5 * MiB),
    (IoLimits(iops_wr=40), 40 * PRECONDITION_BS),  # QEMU counts a 1 MiB write as one operation
    (IoLimits(iops=10, mbps_wr=50), 10 * PRECONDITION_BS),
    (IoLimits(iops_rd=5, mbps_rd=1), None),  # read limits hold no write back
])
def test_the_write_rate_the_limits_allow(limits, rate):
    assert limits.write_rate(PRECONDITION_BS) == rate


def test_the_deadline_follows_the_limit():
    assert precondition_seconds(128 * MiB, None, slow=True) == pytest.approx(128 * MiB / 20e6 + 60)
    # issue 24: 128 MiB through a 1 MiB/s limit takes 128 s; the old deadline was 120 s
    assert precondition_seconds(128 * MiB, MiB, slow=True) == pytest.approx(2 * 128 + 60)
    assert precondition_seconds(128 * MiB, 1e9, slow=False) == pytest.approx(2 * 128 * MiB / 100e6 + 60)


ONE_VM = """
name: t
storage: {scratch_size: 512M}
vary: {mbps_wr: [5]}
jobs:
  - {name: rd, rw: randread, bs: 4k, size: 128M, runtime: 3s, ramp: 1s}
  - {name: wr, rw: write, bs: 1M, size: 256M, runtime: 3s, ramp: 1s}
"""

NEIGHBOURS = """
name: n
storage: {scratch_size: 384M}
jobs:
  - {name: victim, rw: randread, bs: 4k, iodepth: 1, rate_iops: 50, size: 64M, runtime: 6s, ramp: 2s}
  - {name: heavy, rw: randwrite, bs: 64k, iodepth: 16, size: 128M, runtime: 6s, ramp: 2s}
load:
  victim: {job: victim}
  aggressors: {count: 2, job: heavy}
  phases:
    - {name: alone, aggressors: 0}
    - {name: capped, aggressor_vm: {mbps_wr: 1}}
"""


PROXMOX = """
hypervisor:
  driver: proxmox
  host: pve1.example.org
  node: pve1
  template: 9000
  storage: local-zfs
  token: {id: "vmbench@pve!bench", secret_file: ~/.config/vmbench/pve1.token}
"""


def test_plan_says_a_proxmox_vm_preconditions_through_its_limits_and_how_long():
    plan = make_plan(parse_scenario(ONE_VM + PROXMOX, "t.yaml"))
    assert precondition_lines(plan) == [
        "every target: 128m written before the jobs (job rd reads)",
        "  through the limits mbps_wr=5 (proxmox keeps them on): 5 MiB/s, about 25.6s a target",
    ]
    limited = VmConfig(limits=IoLimits(mbps_wr=5))
    assert precondition_estimate(to_precondition(plan.scenario.jobs), limited, "tcg") == pytest.approx(128 / 5)
    assert precondition_estimate(None, limited, "tcg") == 0.0
    # the limited boot's precondition is in the estimate: 25.6 s against the plan's TCG rate
    unlimited = make_plan(parse_scenario(ONE_VM.replace("vary: {mbps_wr: [5]}\n", "") + PROXMOX, "t.yaml"))
    extra = estimate(plan, "tcg").guest_fio - 2 * estimate(unlimited, "tcg").guest_fio
    assert extra == pytest.approx(128 / 5 - 128 * MiB / (PRECONDITION_MB_S["tcg"] * 1e6), rel=1e-6)


def test_plan_says_libvirt_lifts_the_limits_for_the_precondition_and_does_not_wait_for_them():
    """libvirt's Guest.limits_lifted sets the limits to none live for the write (the runner's
    test below sees the lift): the plan says so, and its estimate writes at full speed."""
    plan = make_plan(parse_scenario(ONE_VM, "t.yaml"))
    assert precondition_lines(plan) == [
        "every target: 128m written before the jobs (job rd reads)",
        "  the limits mbps_wr=5 are lifted for it (libvirt sets them to no limit live, then back, and reads them back "
        "before fio): written at full speed",
    ]
    unlimited = make_plan(parse_scenario(ONE_VM.replace("vary: {mbps_wr: [5]}\n", ""), "t.yaml"))
    assert estimate(plan, "tcg").guest_fio == pytest.approx(2 * estimate(unlimited, "tcg").guest_fio)
    assert precondition_estimate(to_precondition(plan.scenario.jobs), None, "tcg") == pytest.approx(128 * MiB / (PRECONDITION_MB_S["tcg"] * 1e6))


def test_plan_of_a_neighbour_run_leaves_writing_aggressors_alone():
    plan = make_plan(parse_scenario(NEIGHBOURS, "n.yaml"))
    assert precondition_lines(plan) == [
        "victim VMs' targets: 64m written before the jobs (job victim reads)",
        "aggressor VMs' targets: not preconditioned (no job reads: heavy)",
    ]


# ---- the runner (fake hypervisor) -----------------------------------------------------------

LIMITED = """
name: l
storage: {scratch_size: 256M}
vary: {mbps_wr: [1]}
jobs:
  - {name: rd, rw: randread, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}
  - {name: wr, rw: randwrite, bs: 4k, size: 64M, runtime: 1s, ramp: 0s}
"""


def _runner(tmp_path, monkeypatch, template, text):
    from tests.fakes import FakeDriver
    from tests.unit.conftest import fresh_state
    from vmbench.progress import RecordingProgress
    from vmbench.results.db import ResultsDB
    from vmbench.run.runner import Runner

    state, db_path = fresh_state(tmp_path, monkeypatch, template)
    driver = FakeDriver()
    return driver, Runner(parse_scenario(text, "l.yaml"), ResultsDB(db_path), RecordingProgress(), driver=driver, state=state)


def test_the_limited_cell_preconditions_with_its_limits_lifted(tmp_path, monkeypatch, template):
    from tests.fakes import is_precondition

    driver, runner = _runner(tmp_path, monkeypatch, template, LIMITED)
    assert runner.run().status == "ok"
    # one lift per measured target: the baseline has no limit, the mbps_wr cell has one
    assert [lifted for _, lifted in driver.lifts] == [False, True]
    pre = [c for c in driver.guest_commands if is_precondition(c)]
    assert len(pre) == 2 and all("--size=16777216" in c for c in pre)  # the reading job's region, not the bigger write's


def test_targets_whose_jobs_only_write_are_not_preconditioned(tmp_path, monkeypatch, template):
    from tests.fakes import is_precondition

    text = LIMITED.replace("  - {name: rd, rw: randread, bs: 4k, size: 16M, runtime: 1s, ramp: 0s}\n", "")
    driver, runner = _runner(tmp_path, monkeypatch, template, text)
    assert runner.run().status == "ok"
    assert driver.lifts == [] and not any(is_precondition(c) for c in driver.guest_commands)
    assert driver.host.preconditions == []
    assert any("not preconditioned (no job here reads)" in m for _, m in runner.progress.events)
