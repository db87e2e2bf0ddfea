"""`vmbench plan ... | head`: output to a closed pipe ends quietly, as any Unix tool's does
(exit 128 + SIGPIPE, no "error:" line)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from tests.integration.conftest import ROOT


def test_output_to_a_closed_pipe_ends_quietly():
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before vmbench writes its first line
    try:
        done = subprocess.run([sys.executable, "-m", "vmbench", "plan", "scenarios/quick.yaml"], cwd=ROOT, stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write_end)
    assert done.returncode == 128 + signal.SIGPIPE
    assert done.stderr == ""
