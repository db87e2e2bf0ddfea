"""Issue 2: cleanup always, including on Ctrl-C (the end-to-end run itself is in
test_shared_run.py)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from tests.integration.conftest import QUICK, ROOT, run_tag_resources, write
from vmbench.results.db import ResultsDB


def test_ctrl_c_after_the_vm_started_leaves_nothing(machine, tmp_path):
    # the interrupt comes while the VM boots: the jobs' runtime never matters (at 30 s the host's
    # two jobs alone took a minute before the boot)
    scenario = write(tmp_path, "quick.yaml", QUICK)
    db_path = tmp_path / "r.db"
    proc = subprocess.Popen([sys.executable, "-m", "vmbench", "run", str(scenario), "--db", str(db_path)],
                            cwd=ROOT, stderr=subprocess.PIPE, text=True)
    name = None
    deadline = time.monotonic() + 600
    lines = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line)
        if " booting vmbench-" in line and name is None:
            name = line.split("booting ", 1)[1].split()[0]
        if name:
            try:
                if machine.conn.lookupByName(name).isActive():
                    break
            except Exception:  # noqa: BLE001 - not defined yet
                pass
    assert name, "".join(lines)
    tag = name.split("-")[1]
    assert run_tag_resources(machine, tag), "the VM should exist before the interrupt"
    proc.send_signal(signal.SIGINT)
    _, rest = proc.communicate(timeout=300)
    assert proc.returncode == 130, "".join(lines) + rest
    assert "interrupted" in rest
    assert run_tag_resources(machine, tag) == []
    db = ResultsDB(db_path, create=False)
    assert db.resolve_run("latest").status == "interrupted"
