"""The runner's CPU-per-I/O glue (vmbench.run.cpucost): the idle VM measured once per boot,
snapshots around a run through the host transport, the guest's busy CPU beside them, perf's
cycles (probed once per boot, counted beside the run, or why not), and never a failed run
when the host cannot be sampled."""

from tests.fakes import ScriptedTransport
from tests.unit.test_perf import COUNTED, NOT_SUPPORTED
from tests.unit.test_qemu_cpu import TCG_0, TCG_1, TCG_2
from vmbench.run.cpucost import CpuCost, guest_busy_seconds
from vmbench.telemetry import perf, qemu_cpu

ROOT_PERF = "perf /usr/bin/perf\nparanoid 2\nuid 0\nqemu_uid 64055\n"  # this machine's probe


class Snapshots(ScriptedTransport):
    """A host answering the snapshot command with real snapshots, one after the other (and
    perf's probe and perf stat with ``answers``)."""

    def __init__(self, texts, answers=None):
        super().__init__(answers)
        self.texts = list(texts)

    def run(self, argv, **kw):
        done = super().run(argv, **kw)
        if argv[:3] == ["sh", "-c", qemu_cpu.SNAPSHOT_SCRIPT]:
            return type(done)(done.argv, 0, self.texts.pop(0), "")
        return done


def guest(*stats):
    g = ScriptedTransport()
    values = list(stats)

    def read_file(path):
        assert path == "/proc/stat"
        return values.pop(0).encode()
    g.read_file = read_file  # type: ignore[method-assign]
    return g


def test_idle_once_then_a_run_is_accounted_with_the_guest_cpu():
    pid = qemu_cpu.parse_snapshot(TCG_0).pid
    host = Snapshots([TCG_0, TCG_1, TCG_1, TCG_2])
    sleeps = []
    cost = CpuCost(host, pid, guest("cpu  100 0 50 900 0 0 0 0 0 0\n", "cpu  300 0 150 1000 0 0 0 0 0 0\n"), sleep=sleeps.append)
    idle = cost.measure_idle(5.0)
    assert idle is not None and sleeps == [5.0] and cost.measure_idle() is idle  # once per boot
    start = cost.begin()
    row = cost.end(start, ios=1000.0)
    assert row is not None and row["kind"] == "qemu-cpu" and row["ios"] == 1000.0
    assert row["guest"]["busy_s"] == 3.0  # (300 + 150) - (100 + 50) ticks at USER_HZ 100
    assert row["idle"] is not None and abs(row["accounted_share"] - 1) < 0.05
    assert host.commands[0] == qemu_cpu.snapshot_argv(pid)
    # no perf on this fake host: probed once, never run, and the row says why
    assert row["perf"] == {"cycles": None, "seconds": None, "idle_cycles": 0.0, "event": None, "net_cycles": None,
                           "cycles_per_io": None, "why": "perf: not installed (Debian: linux-perf)"}
    assert [c for c in host.commands if c[:1] != ["sh"] or c[2] != qemu_cpu.SNAPSHOT_SCRIPT] == [perf.perf_probe_argv(pid)]


def test_perf_not_supported_is_found_once_while_idle_and_stored():
    """This machine: perf is there and runs as root, but the VM it is has no PMU."""
    pid = qemu_cpu.parse_snapshot(TCG_0).pid
    host = Snapshots([TCG_0, TCG_1, TCG_1, TCG_2, TCG_1, TCG_2],
                     {("sh", "-c", perf.PERF_PROBE_SCRIPT): ROOT_PERF, ("perf",): NOT_SUPPORTED})
    cost = CpuCost(host, pid, guest(*["cpu  1 0 1 9 0 0 0 0\n"] * 4), sleep=lambda s: None)
    cost.measure_idle(3.0)
    rows = [cost.end(cost.begin(18.0), ios=9000.0) for _ in range(2)]
    perf_runs = [c for c in host.commands if c[0] == "perf"]
    assert perf_runs == [perf.perf_stat_argv(pid, 3.0)]  # the idle count only: found out once per boot
    assert [c for c in host.commands if c[2:3] == [perf.PERF_PROBE_SCRIPT]] == [perf.perf_probe_argv(pid)]
    for row in rows:
        assert row is not None and row["perf"]["cycles"] is None and row["perf"]["cycles_per_io"] is None
        assert row["perf"]["why"] == "perf: cycles <not supported> (no hardware counters: a virtual machine without a virtual PMU)"


def test_perf_cycles_beside_the_run_the_idle_rate_taken_off():
    pid = qemu_cpu.parse_snapshot(TCG_0).pid
    host = Snapshots([TCG_0, TCG_1, TCG_1, TCG_2], {("sh", "-c", perf.PERF_PROBE_SCRIPT): ROOT_PERF, ("perf",): COUNTED})
    cost = CpuCost(host, pid, guest("cpu  1 0 1 9 0 0 0 0\n", "cpu  2 0 1 9 0 0 0 0\n"), sleep=lambda s: None)
    cost.measure_idle(5.0)
    assert cost.idle_cycles_per_s == 3170546017 / 5.0
    row = cost.end(cost.begin(12.0), ios=6000.0)
    assert [c for c in host.commands if c[0] == "perf"] == [perf.perf_stat_argv(pid, 5.0), perf.perf_stat_argv(pid, 12.0)]
    assert row is not None and row["perf"]["cycles"] == 3170546017 and row["perf"]["seconds"] == 12.0
    assert row["perf"]["idle_cycles"] == 3170546017  # 12 s at the idle rate is more than counted: capped
    assert row["perf"]["cycles_per_io"] == 0.0 and row["perf"]["event"] == "cycles"
    assert cost._perf_run(None) == (None, "perf: the job's duration is not known")  # a job file without a runtime


def test_a_host_that_cannot_be_sampled_gives_no_row_and_no_error():
    host = ScriptedTransport(fail=[("sh",)])
    cost = CpuCost(host, 1234, guest(), sleep=lambda s: None)
    assert cost.measure_idle() is None and cost.begin() is None and cost.end(None, ios=10) is None


def test_guest_busy_seconds():
    assert guest_busy_seconds("cpu  100 5 50 900 7 3 2 1 0 0\ncpu0 1 2 3\n") == (100 + 5 + 50 + 3 + 2 + 1) / 100
    assert guest_busy_seconds("intr 1\n") is None
