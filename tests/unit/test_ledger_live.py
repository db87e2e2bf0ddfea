"""A run's ledger tells a live run from a dead one by its process's pid and start time."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from vmbench.run.ledger import Ledger, live_runs, process_start


def test_a_run_in_a_process_not_named_vmbench_is_live(tmp_path):
    """A program that runs vmbench as a library (a test worker) holds its run's VMs: cleanup skips them."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        Ledger.create(tmp_path, "r0a0a0a0a")
        data = json.loads((tmp_path / "r0a0a0a0a.json").read_text())
        data.update(pid=child.pid, pid_start=process_start(child.pid))
        (tmp_path / "r0a0a0a0a.json").write_text(json.dumps(data))
        assert live_runs(tmp_path) == {"r0a0a0a0a": child.pid}
        data["pid_start"] += 1  # another process that got the same pid later
        (tmp_path / "r0a0a0a0a.json").write_text(json.dumps(data))
        assert live_runs(tmp_path) == {}
    finally:
        child.communicate(b"")
    data["pid_start"] -= 1
    (tmp_path / "r0a0a0a0a.json").write_text(json.dumps(data))
    assert live_runs(tmp_path) == {}  # it ended


def test_an_old_ledger_without_a_start_time_goes_by_the_command_line(tmp_path):
    (tmp_path / "r0b0b0b0b.json").write_text(json.dumps({"tag": "r0b0b0b0b", "pid": os.getpid(), "resources": []}))
    assert live_runs(tmp_path) == {}  # this very process is never "another live run"
    assert process_start(os.getpid()) is not None and process_start(2 ** 22 + 7) is None
