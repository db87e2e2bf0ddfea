"""The runner's CPU-per-I/O glue (vmbench.run.cpucost): the idle VM measured once per boot,
snapshots around a run through the host transport, the guest's busy CPU beside them, and
never a failed run when the host cannot be sampled."""

from tests.fakes import ScriptedTransport
from tests.unit.test_qemu_cpu import TCG_0, TCG_1, TCG_2
from vmbench.run.cpucost import CpuCost, guest_busy_seconds
from vmbench.telemetry import qemu_cpu


class Snapshots(ScriptedTransport):
    """A host answering the snapshot command with real snapshots, one after the other."""

    def __init__(self, texts):
        super().__init__()
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


def test_a_host_that_cannot_be_sampled_gives_no_row_and_no_error():
    host = ScriptedTransport(fail=[("sh",)])
    cost = CpuCost(host, 1234, guest(), sleep=lambda s: None)
    assert cost.measure_idle() is None and cost.begin() is None and cost.end(None, ios=10) is None


def test_guest_busy_seconds():
    assert guest_busy_seconds("cpu  100 5 50 900 7 3 2 1 0 0\ncpu0 1 2 3\n") == (100 + 5 + 50 + 3 + 2 + 1) / 100
    assert guest_busy_seconds("intr 1\n") is None
