"""The guest-agent transport against a fake qemu-ga."""

import pytest

from tests.fakes import FakeAgent
from vmbench.errors import CommandError, CommandTimeout, GuestError
from vmbench.transport.agent import READ_CHUNK, GuestAgentTransport


def transport(agent, **kw):
    t = GuestAgentTransport("guest", agent, sleep=lambda s: None, **kw)
    return t


def test_exec_argv_and_output():
    agent = FakeAgent({"fio": lambda argv, stdin: (0, b"fio-3.33\n", b"")}, polls_before_exit=3)
    waits = []
    out = transport(agent).run(["fio", "--version"], on_wait=waits.append)
    assert out.stdout == "fio-3.33\n" and out.returncode == 0
    exec_call = agent.calls[0]
    assert exec_call == {"execute": "guest-exec", "arguments": {"path": "fio", "arg": ["--version"], "capture-output": True}}
    assert len(waits) == 2


def test_stdin_goes_as_input_data_not_argv():
    seen = {}

    def cryptsetup(argv, stdin):
        seen["argv"], seen["stdin"] = argv, stdin
        return 0, b"", b""

    agent = FakeAgent({"cryptsetup": cryptsetup})
    transport(agent).run(["cryptsetup", "open", "--key-file", "-", "/dev/vdb", "x"], input=b"\x00secret\xff")
    assert seen["stdin"] == b"\x00secret\xff"
    assert all(b"secret" not in a.encode() for a in seen["argv"])


def test_failure_raises_with_stderr():
    agent = FakeAgent({"false": lambda a, s: (2, b"", b"it broke\n")})
    with pytest.raises(CommandError) as exc:
        transport(agent).run(["false"])
    assert exc.value.returncode == 2 and "it broke" in exc.value.message
    assert transport(FakeAgent({"false": lambda a, s: (2, b"", b"")})).run(["false"], check=False).returncode == 2


def test_truncated_output_refused():
    agent = FakeAgent({"cat": lambda a, s: (0, b"x" * 10, b"")}, truncate=True)
    with pytest.raises(GuestError, match="exceeded the guest agent's limit"):
        transport(agent).run(["cat", "/big"])


def test_timeout_kills_the_guest_process():
    clock = iter(range(0, 1000, 10))
    agent = FakeAgent({"sleep": lambda a, s: (0, b"", b""), "/bin/kill": lambda a, s: (0, b"", b"")}, polls_before_exit=1000)
    t = GuestAgentTransport("guest", agent, sleep=lambda s: None, clock=lambda: next(clock))
    with pytest.raises(CommandTimeout):
        t.run(["sleep", "100"], timeout=25)
    kill = [c for c in agent.calls if c["execute"] == "guest-exec" and c["arguments"]["path"] == "/bin/kill"]
    assert kill and kill[0]["arguments"]["arg"][0] == "-KILL"


def test_an_error_from_the_waiting_callback_kills_the_guest_process():
    agent = FakeAgent({"fio": lambda a, s: (0, b"", b""), "/bin/kill": lambda a, s: (0, b"", b"")}, polls_before_exit=1000)

    def watch(elapsed):
        raise GuestError("the storage under the disk degraded")

    with pytest.raises(GuestError, match="degraded"):
        transport(agent).run(["fio", "job.fio"], on_wait=watch)
    kill = [c for c in agent.calls if c["execute"] == "guest-exec" and c["arguments"]["path"] == "/bin/kill"]
    assert kill and kill[0]["arguments"]["arg"][0] == "-KILL"


def test_read_file_in_chunks_and_write_file():
    big = bytes(range(256)) * (READ_CHUNK // 256 * 2 + 7)
    agent = FakeAgent({"install": lambda a, s: (0, b"", b"")}, files={"/run/vmbench/out.json": big})
    t = transport(agent)
    assert t.read_file("/run/vmbench/out.json") == big
    reads = [c for c in agent.calls if c["execute"] == "guest-file-read"]
    assert len(reads) == 3
    assert agent.calls[-1]["execute"] == "guest-file-close"
    t.write_file("/run/vmbench/job.fio", b"[x]\n", 0o644)
    assert agent.files["/run/vmbench/job.fio"] == b"[x]\n"
    assert agent.calls[-5]["arguments"]["arg"] == ["-m", "644", "/dev/null", "/run/vmbench/job.fio"]
    t.write_file("/proc/sys/vm/drop_caches", b"3\n", mode=None)
    assert not any(c.get("arguments", {}).get("arg", [None])[-1] == "/proc/sys/vm/drop_caches" for c in agent.calls if c["execute"] == "guest-exec")


def test_commands_from_many_threads_reach_the_agent_one_at_a_time():
    """libvirt lets one agent command through at a time and fails a caller that waited 30 s;
    the transport queues its own threads instead."""
    import threading
    import time as _time

    inside, most = [0], [0]
    lock = threading.Lock()

    def channel(command, timeout):
        with lock:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        _time.sleep(0.002)
        with lock:
            inside[0] -= 1
        return {"pid": 1} if command["execute"] == "guest-exec" else {"exited": True, "exitcode": 0}

    t = GuestAgentTransport("guest", channel, sleep=lambda s: None)
    workers = [threading.Thread(target=lambda: [t.run(["true"]) for _ in range(5)]) for _ in range(8)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(30)
    assert most[0] == 1 and not any(w.is_alive() for w in workers)
