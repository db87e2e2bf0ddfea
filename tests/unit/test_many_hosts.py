"""A run across several hosts (issue 28), libvirt side and the runner on fakes: the scenario's
``hypervisor.hosts`` and ``place``, the placement of each step's VMs, per-host capacity,
every VM created, booted (bounded per host) and removed on its own host's driver, each row
naming its host, a failure on one host cleaning up every host, and the per-host report."""

import functools
import textwrap

import pytest

from tests.fakes import FakeDriver
from tests.unit.test_load_runner import env  # noqa: F401  (a fixture: the state directory and a results database)
from tests.records import as_measurements
from vmbench.errors import GuestError, PreflightError, ScenarioError
from vmbench.drivers.base import Accelerator
from vmbench.progress import RecordingProgress
from vmbench.report.hostrows import f_nic, host_steps, per_host_table
from vmbench.results.plan import read_plan
from vmbench.run.capacity import HostCapacity, check_capacity
from vmbench.run.plan import make_plan, place_vms, placement_text
from vmbench.run.runner import Runner
from vmbench.scenario import parse_scenario
from vmbench.telemetry import nic

HOSTS = ("h1", "h2", "h3", "h4")

SCALING = """
name: fleet
hypervisor:
  hosts:
    - {name: h1}
    - {name: h2, uri: "qemu+ssh://root@127.0.0.2/system"}
    - {name: h3, uri: "qemu+ssh://root@127.0.0.3/system", pool: vmbench-h3}
    - {name: h4, uri: "qemu+ssh://root@127.0.0.4/system", state_dir: /srv/vmbench}
storage: {scratch_size: 256M}
vm: {memory: 512M, vcpus: 1}
jobs:
  - {name: r, rw: randread, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}
load: {vms: [4, 32], boot_parallel: 2, tail: 2}
"""

NEIGHBOURS = """
name: nn-hosts
hypervisor:
  hosts: [{uri: "qemu+ssh://root@127.0.0.2/system"}, {uri: "qemu+ssh://root@127.0.0.3/system"}]
  place: {127.0.0.2: 1, 127.0.0.3: 2}
storage: {scratch_size: 256M}
vm: {memory: 512M, vcpus: 1}
jobs:
  - {name: victim, rw: randread, bs: 4k, iodepth: 1, size: 16M, runtime: 2s, ramp: 1s, rate_iops: 100}
  - {name: heavy, rw: randwrite, bs: 4k, iodepth: 16, size: 16M, runtime: 2s, ramp: 1s}
load:
  victim: {job: victim}
  aggressors: {count: 2, job: heavy}
  phases: [{name: alone, aggressors: 0}, busy]
"""


@functools.lru_cache(maxsize=None)
def scenario(text: str):
    return parse_scenario(textwrap.dedent(text), "t.yaml")


def refused(text: str) -> str:
    with pytest.raises(ScenarioError) as e:
        parse_scenario(textwrap.dedent(text), "t.yaml")
    return e.value.message


# ---- the scenario ----------------------------------------------------------------------------


def test_hosts_each_with_their_own_uri_ssh_pool_and_directory():
    hv = scenario(SCALING).hypervisor
    assert hv.host_labels == HOSTS and hv.host_label == "h1" and hv.uri == "qemu:///system" and hv.ssh is None
    h2, h3, h4 = hv.member("h2"), hv.member("h3"), hv.member("h4")
    assert h2.ssh is not None and h2.ssh.host == "127.0.0.2" and h2.uri == "qemu+ssh://root@127.0.0.2/system"
    assert h3.pool == "vmbench-h3" and h4.state_dir == "/srv/vmbench" and h2.hosts == () and hv.place == ()
    # a host is named by its SSH host when the entry gives no name
    assert scenario(NEIGHBOURS).hypervisor.host_labels == ("127.0.0.2", "127.0.0.3")
    assert scenario(NEIGHBOURS).hypervisor.place == (("127.0.0.2", 1), ("127.0.0.3", 2))


@pytest.mark.parametrize("change, expected", [
    (("hosts:\n    - {name: h1}", "hosts:\n    - {name: h2}"), "a second host named 'h2'"),
    (("  hosts:\n", "  uri: qemu:///system\n  hosts:\n"), "hypervisor.uri: with hypervisor.hosts, each host gives its own uri"),
    (("load: {vms: [4, 32], boot_parallel: 2, tail: 2}", ""), "a run across several hosts spreads a load step's VMs over them"),
    (("  hosts:\n", "  place: {h1: 8, h9: 1}\n  hosts:\n"), "names 'h9', which is not one of the run's hosts (h1, h2, h3, h4)"),
    (("  hosts:\n", "  place: {h1: 8, h2: 8}\n  hosts:\n"), "places at most 16 VM(s), but load step 32 VMs runs 32"),
    (("  hosts:\n", "  place: {h1: x}\n  hosts:\n"), "h1: 'x' is not a number of VMs"),
    (("    - {name: h2, uri", "    - {name: h2, port: 2, uri"), "hypervisor.hosts[1].port: unknown key (vmbench reads no such key here)"),
])
def test_bad_hosts_are_refused_naming_the_key(change, expected):
    assert expected in refused(SCALING.replace(*change))


def test_place_needs_several_hosts_and_proxmox_names_nodes():
    one = "name: one\nhypervisor: {place: {a: 1}}\njobs: [{name: r, rw: read, bs: 4k, size: 16M, runtime: 1s}]\nload: {vms: [1]}\n"
    assert "places VMs on several hosts; this scenario names one" in refused(one)


# ---- placement ----------------------------------------------------------------------------------


def test_round_robin_and_explicit_placement():
    assert place_vms(5, ("a", "b")) == ("a", "b", "a", "b", "a")
    assert place_vms(3, ("a", "b"), (("a", 1), ("b", 3))) == ("a", "b", "b")
    assert place_vms(1, ("a", "b"), (("b", 0), ("a", 2))) == ("a",)
    with pytest.raises(ValueError):
        place_vms(5, ("a", "b"), (("a", 1), ("b", 3)))


def test_the_plan_places_every_step_and_says_so():
    plan = make_plan(scenario(SCALING))
    units = plan.load_units()
    assert [u.hosts for u in units][0] == HOSTS and units[1].hosts == HOSTS * 8
    summary = plan.summary()
    assert summary["hosts"] == list(HOSTS) and summary["placement"][0] == {"boot": 1, "step": 1, "hosts": list(HOSTS)}
    nn = make_plan(scenario(NEIGHBOURS)).load_units()
    assert nn[1].hosts == ("127.0.0.2", "127.0.0.3", "127.0.0.3")
    assert placement_text(nn[1]) == "127.0.0.2: VM 0; 127.0.0.3: VMs 1-2"
    assert placement_text(make_plan(scenario(SCALING)).load_units()[1]).startswith("h1: VMs 0, 4, 8, 12, ")


def test_capacity_counts_each_hosts_own_vms():
    plan = make_plan(scenario(SCALING))
    cap = HostCapacity(memory_available=8 << 30, cpus=8, storage_free=500 << 30, storage_label="dir pool vmbench")
    assert check_capacity(plan, "tcg", cap, "h1", on="h1").refusals == ()  # 8 of the 32 VMs: 8 x (512M + 384M) = 7G
    refusal = check_capacity(plan, "tcg", cap, "the fleet").refusals[0][0]
    assert "load step '32 VMs' (32 VMs) needs about" in refusal
    small = HostCapacity(memory_available=6 << 30, cpus=8, storage_free=500 << 30, storage_label="dir pool vmbench")
    assert "(32 VMs, 8 of them on h2)" in check_capacity(plan, "tcg", small, "h2", on="h2").refusals[0][0]


# ---- the runner on fakes ----------------------------------------------------------------------


def fleet(**by_host) -> dict[str, FakeDriver]:
    return {h: by_host.get(h) or FakeDriver(hostname=h) for h in HOSTS}


def runner(env, drivers, text=SCALING, resume=None) -> Runner:
    state, db = env
    return Runner(scenario(text), db, RecordingProgress(), drivers=drivers, state=state, resume=resume)


def nothing_left(drivers: dict[str, FakeDriver], r: Runner) -> None:
    for d in drivers.values():
        assert d.vms == {} and d.storage.volumes == {} and d.leftovers() == []
    assert r.created == []


def test_4_hosts_x_32_vms_each_on_its_own_host_booted_bounded_per_host(env):
    drivers = fleet()
    for d in drivers.values():
        d.boot_delay = 0.01
    drivers["h4"].fio_iops = lambda argv: 50.0  # every guest on h4 is slow
    r = runner(env, drivers)
    out = r.run()
    assert out.status == "ok"
    assert [d.boots for d in drivers.values()] == [1 + 8] * 4  # step 1: one VM per host; step 2: 8 per host
    assert all(1 <= d.max_booting <= 2 for d in drivers.values())  # boot_parallel, per host
    db = env[1]
    rows = db.rows("measurements", out.run_id)
    step2 = [m for m in rows if m["load_step"] == 2 and m["side"] == "guest"]
    assert len(step2) == 32 and {m["load"]["host"] for m in step2} == set(HOSTS)
    assert all(m["load"]["host"] == HOSTS[m["vm"] % 4] for m in rows)  # round robin, host rows placed as the VMs
    assert all(m["host"] == m["load"]["host"] for m in rows)  # every row names its host
    # each host measured its own host volumes, in its own work directory
    assert all(any("fio" in c[0] for c in d.host.commands) for d in drivers.values())
    env_row = db.resolve_run(out.run_id).environment
    assert set(env_row["hosts"]) == set(HOSTS) and env_row["hosts"]["h3"]["hostname"] == "h3"
    nothing_left(drivers, r)
    # the report: a per-host table naming the slowest host
    lp = read_plan(db.resolve_run(out.run_id).plan_json).load
    assert lp is not None
    steps = host_steps(as_measurements(rows), lp)
    guest2 = next(s for s in steps if s.hosts[0].fig.side == "guest" and s.hosts[0].fig.step == 2)
    assert [h.host for h in guest2.hosts] == list(HOSTS) and guest2.slowest == "h4"
    table = per_host_table(steps, lp, ["tcg"])
    assert any(n.startswith("Step 32 VMs, guest raw, r: h4 is the slowest host, -") for n in table.notes), table.notes


def test_a_failure_on_one_host_mid_step_removes_every_hosts_vms_and_resume_finishes(env):
    state, db = env
    drivers = fleet(h3=FakeDriver(hostname="h3", fail_at="boot", fail_nth=1 + 5))  # h3's 5th boot of step 2
    r = runner(env, drivers)
    with pytest.raises(GuestError, match="booting the VMs of .*: on host h3: fake boot: injected failure"):
        r.run()
    nothing_left(drivers, r)
    assert {k.load_step for k in db.measurement_keys(r.run_id)} == {1}  # the finished step kept
    again = fleet()
    r2 = runner(env, again, resume=db.resolve_run(r.run_id))
    assert r2.run().status == "ok" and [d.boots for d in again.values()] == [8] * 4
    nothing_left(again, r2)


def test_hosts_with_different_accelerators_are_refused_before_anything_is_created(env):
    drivers = fleet(h2=FakeDriver(hostname="h2", accel=Accelerator("kvm", "fake")))
    r = runner(env, drivers)
    with pytest.raises(PreflightError, match="host h2 runs guests with kvm .* host h1 with tcg"):
        r.run()
    assert all(d.creates == 0 for d in drivers.values())


def test_neighbours_victim_on_one_host_aggressors_on_the_other(env):
    drivers = {"127.0.0.2": FakeDriver(hostname="a"), "127.0.0.3": FakeDriver(hostname="b")}
    r = runner(env, drivers, NEIGHBOURS)
    out = r.run()
    assert out.status == "ok" and drivers["127.0.0.2"].boots == 2 and drivers["127.0.0.3"].boots == 2
    rows = [m for m in env[1].rows("measurements", out.run_id) if m["side"] == "guest"]
    assert {(m["role"], m["load"]["host"]) for m in rows} == {("victim", "127.0.0.2"), ("aggressor", "127.0.0.3")}
    nothing_left(drivers, r)


# ---- the network between hosts ------------------------------------------------------------------

NET_DEV = """Inter-|   Receive                                                |  Transmit
 face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed
    lo: {lo} 10 0 0 0 0 0 0 {lo} 10 0 0 0 0 0 0
  eth0: {rx} 100 0 0 0 0 0 0 {tx} 90 0 0 0 0 0 0
  ens4: 5000 10 0 0 0 0 0 0 7000 10 0 0 0 0 0 0
"""


def test_every_host_and_how_it_was_reached_in_the_header_and_runs():
    from vmbench.report.build import hosts_line, run_hosts

    env = {"ssh_host": "127.0.0.2", "ssh_user": "root", "ssh_port": 2222, "hosts": {
        "a": {"ssh_host": "127.0.0.2", "ssh_user": "root", "ssh_port": 2222, "ssh_host_key": "SHA256:aa"},
        "b": {"ssh_host": "127.0.0.3", "ssh_user": "root", "ssh_port": 2223, "ssh_host_key": "SHA256:bb"}}}
    assert run_hosts(env, keys=True) == [("a", "root@127.0.0.2:2222, host key SHA256:aa"), ("b", "root@127.0.0.3:2223, host key SHA256:bb")]
    assert hosts_line(env) == "a (root@127.0.0.2:2222), b (root@127.0.0.3:2223)"
    assert hosts_line({}) == "localhost" and hosts_line({"ssh_host": "pve1", "ssh_user": "root", "ssh_port": 22}) == "root@pve1:22"
    assert hosts_line({"hosts": {"h1": {}, "h2": {"ssh_host": "10.0.0.2", "ssh_user": "root", "ssh_port": 22}}}) == (
        "h1 (this machine), h2 (root@10.0.0.2:22)")


def test_the_busiest_nic_of_a_round_against_its_link():
    before = nic.parse_net_dev(NET_DEV.format(lo=1, rx=1_000_000, tx=2_000_000))
    after = nic.parse_net_dev(NET_DEV.format(lo=9 << 30, rx=501_000_000, tx=402_000_000))
    assert before == {"eth0": (1_000_000, 2_000_000), "ens4": (5000, 7000)}  # loopback left out
    rate = nic.busiest(before, after, 10.0, {"eth0": 1000, "ens4": None})
    assert rate is not None and rate.iface == "eth0" and rate.mb_s == pytest.approx(90.0) and rate.share == pytest.approx(0.72)
    assert f_nic(rate.to_json()) == "eth0 90.0 MB/s (72% of 1000 Mb/s) NEAR LINK"
    assert f_nic(nic.NicRate("ens4", 0.5, None).to_json()) == "ens4 0.5 MB/s (no link speed)"
    assert nic.busiest(before, after, 0, {}) is None and f_nic(None) == "-"
    assert f_nic(nic.NicRate("eth0", 0.0, 1000).to_json()) == "idle (no interface moved a byte)"


def test_a_round_near_its_link_is_flagged_in_the_per_host_table(env):
    drivers = fleet()
    for d in drivers.values():
        d.host.files["/proc/net/dev"] = NET_DEV.format(lo=1, rx=1000, tx=1000).encode()
        d.host.files["/sys/class/net/eth0/speed"] = b"1000\n"
    r = runner(env, drivers, SCALING.replace("vms: [4, 32]", "vms: [4]"))
    out = r.run()
    rows = env[1].rows("measurements", out.run_id)
    assert all(m["load"]["nic"]["iface"] == "eth0" and m["load"]["nic"]["speed_mbit"] == 1000 for m in rows)
    lp = read_plan(env[1].resolve_run(out.run_id).plan_json).load
    assert lp is not None
    hot = [dict(m, load=dict(m["load"], nic={"iface": "eth0", "mb_s": 120.0, "speed_mbit": 1000, "share": 0.96}))
           if m["load"]["host"] == "h2" else m for m in rows]
    table = per_host_table(host_steps(as_measurements(hot), lp), lp, ["tcg"])
    assert any(n.startswith("WARNING: a round came near its link's speed on h2 (eth0, step 4 VMs)") for n in table.notes), table.notes


def test_a_host_gone_between_steps_refuses_the_step_before_anything_of_it_exists(env):
    state, db = env
    drivers = fleet(h2=FakeDriver(hostname="h2", fail_at="check", fail_nth=2, fail_with=PreflightError))
    r = runner(env, drivers)
    with pytest.raises(PreflightError, match="checking host h2 before VM configuration 1, load step 2 .*: fake check"):
        r.run()
    assert [d.creates for d in drivers.values()] == [1, 1, 1, 1]  # step 1's VMs only
    assert {k.load_step for k in db.measurement_keys(r.run_id)} == {1}
    nothing_left(drivers, r)


def test_a_sweep_in_a_scaling_run_is_a_curve_per_step_with_the_host_beside(env):
    from vmbench.report.build import build_report
    from vmbench.report.load import load_run
    from vmbench.report.sections import plot_sections

    text = SCALING.replace("  - {name: r, rw: randread, bs: 4k, size: 16M, runtime: 2s, ramp: 1s}",
                           "  - {name: r, rw: randread, bs: 4k, size: 16M, runtime: 2s, ramp: 1s, sweep: {iodepth: [1, 4, 16]}}")
    out = runner(env, fleet(), text.replace("vms: [4, 32]", "vms: [4]")).run()
    data = load_run(env[1], out.run_id)
    tables = {t.name: t for t in build_report(data)[1]}
    recs = tables["curves"].records
    assert {(r["job"], r["side"], r["value"]) for r in recs} == {
        ("r at 4 VMs", side, qd) for side in ("guest", "host") for qd in (1, 4, 16)}
    assert all(r["gap"] is not None for r in recs if r["side"] == "guest")
    assert "plot-curves" in [s.anchor for s in plot_sections(data, list(tables.values()))]
