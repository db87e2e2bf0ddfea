"""perf's cycles of the QEMU process (issue 17, vmbench/telemetry/perf.py): the exact argv of the
probe and of ``perf stat``, perf's output read (counted, user space only, <not supported> as
this machine prints it, errors), whether perf may count, the idle cycles taken off, and a
count in a thread through a transport that never raises."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.fakes import ScriptedTransport
from vmbench.command import Completed
from vmbench.telemetry import perf as p

# Real outputs of `perf stat -e cycles -x , --log-fd 1 -p PID -- sleep N` (perf 6.1): a host
# with a PMU (a bare-metal Debian 12 host, QEMU/KVM guest busy) and this machine (a VM without
# a virtual PMU, QEMU/TCG guest), where perf exists and runs as root but counts nothing.
COUNTED = "3170546017,,cycles,4007348104,100.00,,\n"
USER_ONLY = "1203381,,cycles:u,1000216,100.00,,\n"
NOT_SUPPORTED = "<not supported>,,cycles,0,100.00,,\n"
GONE = "Problems finding threads of monitor\n\n Usage: perf stat [<options>] [<command>]\n"


def test_perf_stat_argv():
    assert p.perf_stat_argv(2194, 10) == ["perf", "stat", "-e", "cycles", "-x", ",", "--log-fd", "1", "-p", "2194",
                                          "--", "sleep", "10"]
    assert p.perf_stat_argv(2194, 18.0)[-1] == "18" and p.perf_stat_argv(2194, 3.5)[-1] == "3.5"
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="positive number of seconds"):
            p.perf_stat_argv(2194, bad)
    with pytest.raises(ValueError, match="not a process id"):
        p.perf_stat_argv(0, 1)
    assert p.perf_probe_argv(7) == ["sh", "-c", p.PERF_PROBE_SCRIPT, "sh", "7"]


def test_parse_perf_stat():
    assert p.parse_perf_stat(COUNTED) == 3170546017 and p.perf_stat_why(COUNTED) is None
    assert p.perf_event(COUNTED) == "cycles"
    assert p.parse_perf_stat(USER_ONLY) == 1203381 and p.perf_event(USER_ONLY) == "cycles:u"
    assert p.parse_perf_stat(NOT_SUPPORTED) is None
    assert p.perf_stat_why(NOT_SUPPORTED) == \
        "perf: cycles <not supported> (no hardware counters: a virtual machine without a virtual PMU)"
    assert p.perf_stat_why("<not counted>,,cycles,0,0.00,,\n") == "perf: cycles <not counted>"
    assert p.parse_perf_stat(GONE) is None
    assert p.perf_stat_why(GONE) == "perf: printed no cycles (Usage: perf stat [<options>] [<command>])"
    assert p.perf_stat_why("") == "perf: printed no cycles (no output)"


@pytest.mark.parametrize("probe, available, why", [
    ("perf -\nparanoid 2\nuid 0\nqemu_uid 64055\n", False, "perf: not installed"),
    ("perf /usr/bin/perf\nparanoid 2\nuid 0\nqemu_uid 64055\n", True, "root"),  # this machine
    ("perf /usr/bin/perf\nparanoid 3\nuid 1000\nqemu_uid 1000\n", False, "perf: perf_event_paranoid=3"),
    ("perf /usr/bin/perf\nparanoid 1\nuid 1000\nqemu_uid 64055\n", False, "QEMU runs as uid 64055"),
    ("perf /usr/bin/perf\nparanoid 2\nuid 1000\nqemu_uid 1000\n", True, "user-space cycles only"),
    ("perf /usr/bin/perf\nparanoid -1\nuid 1000\nqemu_uid 1000\n", True, "perf_event_paranoid=-1"),
    ("perf /usr/bin/perf\nparanoid -\nuid 1000\nqemu_uid 1000\n", False, "no /proc/sys/kernel/perf_event_paranoid"),
])
def test_perf_access(probe, available, why):
    got = p.perf_access(probe)
    assert got.available is available and why in got.why


def test_perf_probe_runs_here():
    out = subprocess.run(p.perf_probe_argv(os.getpid()), capture_output=True, text=True, check=True).stdout
    keys = [line.split(" ", 1)[0] for line in out.splitlines()]
    assert keys == ["perf", "paranoid", "uid", "qemu_uid"] and f"uid {os.getuid()}" in out


def test_the_idle_cycles_are_taken_off_never_below_zero():
    got = p.perf_result(COUNTED, 4.0, idle_per_s=100_000_000.0)
    assert (got.cycles, got.seconds, got.idle_cycles, got.event, got.why) == (3170546017, 4.0, 4e8, "cycles", None)
    row = got.to_json(1000.0)
    assert row == {"cycles": 3170546017, "seconds": 4.0, "idle_cycles": 4e8, "event": "cycles",
                   "net_cycles": 3170546017 - 4e8, "cycles_per_io": (3170546017 - 4e8) / 1000.0, "why": None}
    assert p.PerfCycles.from_json(row) == got
    assert p.perf_result(COUNTED, 4.0, idle_per_s=1e10).net_cycles == 0.0
    none = p.perf_result(NOT_SUPPORTED, 4.0, idle_per_s=1e8)
    assert none.cycles is None and none.to_json(1000.0)["cycles_per_io"] is None and "<not supported>" in (none.why or "")
    assert p.PerfCycles.missing("perf: not installed").to_json(10.0)["why"] == "perf: not installed"


class Host(ScriptedTransport):
    """A host answering perf with a fixed output, recording the timeout it was given."""

    def __init__(self, out: str = "", *, error: Exception | None = None) -> None:
        super().__init__()
        self.out, self.error, self.timeouts = out, error, []

    def run(self, argv, *, timeout=None, check=True, **kw):
        self.commands.append(list(argv))
        self.timeouts.append((timeout, check))
        if self.error is not None:
            raise self.error
        return Completed(tuple(argv), 0, self.out, "")


def test_a_count_in_a_thread_through_the_host_transport():
    host = Host(COUNTED)
    got = p.PerfRun(host, 4242, 12.0).result(idle_per_s=1e6)
    assert host.commands == [["perf", "stat", "-e", "cycles", "-x", ",", "--log-fd", "1", "-p", "4242", "--", "sleep", "12"]]
    assert host.timeouts == [(12.0 + p.GRACE_S, False)]
    assert got.cycles == 3170546017 and got.idle_cycles == 12e6 and got.why is None
    assert p.PerfRun(Host(NOT_SUPPORTED), 4242, 1.0).result().why.startswith("perf: cycles <not supported>")
    failed = p.PerfRun(Host(error=OSError("connection reset")), 4242, 1.0).result()
    assert failed.cycles is None and failed.why == "perf: failed on fake: connection reset"
    odd = p.PerfRun(Host(error=RuntimeError("boom")), 4242, 1.0).result()
    assert odd.why == "perf: failed: RuntimeError: boom"


@pytest.mark.skipif(shutil.which("perf") is None, reason="perf is not installed")
def test_perf_here_counts_or_says_why():
    """On this machine (a VM without a PMU) perf prints <not supported>; with a PMU it counts."""
    done = subprocess.run(p.perf_stat_argv(os.getpid(), 0.2), capture_output=True, text=True)
    got = p.perf_result(done.stdout + "\n" + done.stderr, 0.2)
    assert (got.cycles is not None and got.cycles > 0) or (got.why or "").startswith("perf: "), done
