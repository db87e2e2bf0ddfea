"""The telemetry sampler over SSH (the sampler beside a real run is checked in
test_shared_run.py)."""

from __future__ import annotations

import time

from tests.integration.test_ssh_transport import sshd  # noqa: F401 (fixture)


def test_sampler_over_ssh_spawns_and_kills_its_process_group(sshd, tmp_path):
    from tests.integration.test_ssh_transport import cfg_for, pids_of
    from vmbench.telemetry.sampler import Sampler
    from vmbench.transport.ssh import SshTransport

    ssh = SshTransport(cfg_for(sshd))
    try:
        s = Sampler(ssh, str(tmp_path / "target"), str(tmp_path), "5a5a", 300)
        (tmp_path / "target").write_bytes(b"x")
        s.start()
        assert s.handle is not None and ssh.running_pgids == {s.handle[1]}
        time.sleep(1.5)
        got = s.stop()
        assert {"disk", "cpu"} <= set(got) and len(got["cpu"]["t_s"]) >= 1
        assert ssh.running_pgids == set() and pids_of(str(tmp_path / "telemetry-5a5a.txt")) == []
        assert not (tmp_path / "telemetry-5a5a.txt").exists()
    finally:
        ssh.close()
