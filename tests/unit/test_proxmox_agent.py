"""The guest transport over PVE's agent endpoints, against a fake API object that behaves
like qemu-server + QGA: exec-status forgets a pid once it said it exited, output comes back
as decoded bytes (JSON code points 0..255), input-data must be text."""

from __future__ import annotations

import base64
import shlex

import pytest

from vmbench.drivers.proxmox.errors import PveApiError, PveParameterError, PvePermissionError
from vmbench.errors import CommandError, CommandTimeout, GuestError
from vmbench.drivers.proxmox.agent import B64_INPUT_RAW_MAX, FILE_WRITE_RAW_MAX, PveAgentTransport

BASE = "/nodes/pve1/qemu/100/agent"


class FakeAgentApi:
    """agent/exec, exec-status, file-read, file-write as PVE serves them."""

    def __init__(self, polls: int = 1, new_file_read: bool = True) -> None:
        self.calls: list[tuple[str, str, dict]] = []
        self.procs: dict[int, dict] = {}
        self.files: dict[str, bytes] = {}
        self.polls = polls
        self.new_file_read = new_file_read
        self.next = 500
        self.forever: set[str] = set()  # programs that never exit
        self.killed: list[str] = []
        self.fail: Exception | None = None
        self.no_groups = False  # kill -- -PGID fails (not a group leader): the pid alone is killed

    def get(self, path, params=None):
        return self._call("GET", path, dict(params or {}))

    def post(self, path, params=None):
        return self._call("POST", path, dict(params or {}))

    def _call(self, method, path, p):
        self.calls.append((method, path, p))
        if self.fail is not None:
            raise self.fail
        assert path.startswith(BASE + "/")
        cmd = path[len(BASE) + 1:]
        if cmd == "exec":
            assert isinstance(p["command"], list)
            data = p.get("input-data")
            assert data is None or (isinstance(data, str) and len(data) <= 65536 and data.isascii())
            self.next += 1
            self.procs[self.next] = {"argv": p["command"], "stdin": data, "polls": self.polls}
            return {"pid": self.next}
        if cmd == "exec-status":
            pid = int(p["pid"])
            if pid not in self.procs:
                raise PveApiError("Agent error: Invalid parameter 'pid'", status=500, reason="Agent error: Invalid parameter 'pid'")
            proc = self.procs[pid]
            argv = proc["argv"]
            inner = argv[2:] if argv[:2] == ["setsid", "-w"] else argv
            prog = inner[4] if inner[:3] == ["sh", "-c", 'exec "$@" >/dev/null 2>&1'] else (inner or [""])[0]
            if prog in self.forever and str(pid) not in self.killed:
                return {"exited": 0}
            if proc["polls"] > 0:
                proc["polls"] -= 1
                return {"exited": 0}
            del self.procs[pid]
            code, out, err = self.execute(inner, proc["stdin"])
            reply = {"exited": 1, "exitcode": code}
            if out:
                reply["out-data"] = out.decode("latin-1")  # Perl bytes as JSON code points
            if err:
                reply["err-data"] = err.decode("latin-1")
            return reply
        if cmd == "file-read":
            if "offset" in p and not self.new_file_read:
                raise PveParameterError("offset: property is not defined in schema", status=400, errors={"offset": "..."})
            data = self.files[p["file"]]
            if "offset" in p:
                off, count = int(p["offset"]), int(p["count"])
                part = data[off:off + count]
                assert p["decode"] == 0 or p["decode"] is False
                return {"content": base64.b64encode(part).decode(), **({"truncated": 1} if off + count < len(data) else {})}
            cap = 16 << 20
            return {"content": data[:cap].decode("latin-1"), **({"truncated": 1} if len(data) > cap else {})}
        if cmd == "file-write":
            assert len(p["content"]) <= 61440 and p["encode"] is False
            self.files[p["file"]] = base64.b64decode(p["content"])
            return None
        raise AssertionError(cmd)

    def execute(self, argv, stdin):
        data = stdin.encode() if stdin is not None else None
        if argv[:3] == ["sh", "-c", 'base64 -d | "$@"']:
            argv, data = argv[4:], base64.b64decode(data)
        if argv[0] == "kill":
            target = argv[-1].lstrip("-")
            if argv[-1].startswith("-") and self.no_groups:
                return 1, b"", b"kill: (-1) - No such process"
            self.killed.append(target)
            return 0, b"", b""
        if argv[:2] == ["sh", "-c"] and argv[2].startswith("base64 -d >"):
            chunk = base64.b64decode(data)
            self.files[argv[4]] = (self.files.get(argv[4], b"") if ">>" in argv[2] else b"") + chunk
            return 0, b"", b""
        if argv[0] == "echo":
            return 0, (" ".join(argv[1:]) + "\n").encode(), b""
        if argv[0] == "cat":
            return 0, data or b"", b""
        if argv[0] == "env":
            return 0, "\n".join(a for a in argv[1:] if "=" in a).encode(), b""
        if argv[0] == "false":
            return 1, b"", "\n".join(f"err {i}" for i in range(40)).encode()
        if argv[0] == "utf8":
            return 0, "héllo ✓".encode(), b""
        if argv[0] == "dd":
            opts = dict(a.split("=", 1) for a in argv[1:])
            data = self.files[opts["if"]]
            off, count = int(opts["skip"]), int(opts["count"])
            return 0, data[off:off + count], b""
        if argv[0] == "install":
            self.files.setdefault(argv[-1], b"")
            return 0, b"", b""
        return 127, b"", b"not found"


def transport(api: FakeAgentApi) -> PveAgentTransport:
    t = PveAgentTransport("vmbench-r0a1b2c3d-1", api, "pve1", 100)
    now = [0.0]
    t.clock = lambda: now[0]
    t.sleep = lambda s: now.__setitem__(0, now[0] + s)
    return t


def execs(api):
    return [c[2]["command"] for c in api.calls if c[1].endswith("/exec")]


def test_run_wraps_in_its_own_session_and_reads_the_status_once():
    api = FakeAgentApi(polls=3)
    done = transport(api).run(["echo", "hello", "world"])
    assert done.stdout == "hello world\n" and done.returncode == 0 and done.argv == ("echo", "hello", "world")
    assert execs(api) == [["setsid", "-w", "echo", "hello", "world"]]
    statuses = [c for c in api.calls if c[1].endswith("/exec-status")]
    assert len(statuses) == 4 and not api.procs  # three running answers, then the exited one, never asked again


def test_output_bytes_survive_pves_decoding():
    assert transport(FakeAgentApi()).run(["utf8"]).stdout == "héllo ✓"


def test_failure_and_check_false():
    api = FakeAgentApi()
    with pytest.raises(CommandError) as exc:
        transport(api).run(["false"])
    assert exc.value.returncode == 1 and "err 39" in str(exc.value) and "err 5\n" not in str(exc.value)  # a tail
    assert transport(api).run(["false"], check=False).returncode == 1


def test_stdin_as_text_or_base64_never_mangled():
    api = FakeAgentApi()
    t = transport(api)
    assert t.run(["cat"], input=b"plain text\n").stdout == "plain text\n"
    assert api.calls[0][2]["input-data"] == "plain text\n"
    key = bytes(range(256)) * 2  # a binary LUKS key: PVE would decode it as UTF-8 and break it
    out = t.run(["cat"], input=key)
    assert out.stdout.encode("utf-8", errors="surrogateescape") != b"" and api.procs == {}
    cmd = execs(api)[-1]
    assert cmd[:6] == ["setsid", "-w", "sh", "-c", 'base64 -d | "$@"', "sh"] and cmd[6:] == ["cat"]
    sent = [c[2]["input-data"] for c in api.calls if c[1].endswith("/exec")][-1]
    assert base64.b64decode(sent) == key
    with pytest.raises(GuestError, match="binary data; the Proxmox agent API takes at most"):
        t.run(["cat"], input=b"\x00" * (B64_INPUT_RAW_MAX + 1))


def test_env_goes_through_env_with_a_path():
    api = FakeAgentApi()
    out = transport(api).run(["env"], env={"LC_ALL": "C"})
    assert execs(api)[0] == ["setsid", "-w", "env", "LC_ALL=C", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "env"]
    assert "LC_ALL=C" in out.stdout


def test_timeout_kills_the_process_group_and_collects_it():
    api = FakeAgentApi()
    api.forever.add("fio")
    with pytest.raises(CommandTimeout, match=r"command timed out after 5s: fio --name=x"):
        transport(api).run(["fio", "--name=x"], timeout=5)
    assert execs(api)[1] == ["kill", "-KILL", "--", "-501"]  # its process group (setsid made it one)
    assert api.killed == ["501"] and not api.procs  # the killed command was collected once, then forgotten
    api = FakeAgentApi()
    api.forever.add("fio")
    api.no_groups = True
    with pytest.raises(CommandTimeout):
        transport(api).run(["fio"], timeout=5)
    assert execs(api)[1:] == [["kill", "-KILL", "--", "-501"], ["kill", "-KILL", "501"]] and api.killed == ["501"]


def test_ctrl_c_while_waiting_kills_the_command():
    api = FakeAgentApi()
    api.forever.add("fio")
    t = transport(api)

    def interrupt(elapsed):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        t.run(["fio"], on_wait=interrupt)
    assert api.killed == ["501"]


def test_spawn_and_kill():
    api = FakeAgentApi()
    api.forever.add("sampler")
    t = transport(api)
    pid = t.spawn(["sampler", "--out", "/run/x"])
    assert execs(api) == [["setsid", "-w", "sh", "-c", 'exec "$@" >/dev/null 2>&1', "sh", "sampler", "--out", "/run/x"]]
    assert len(api.calls) == 1  # returns without polling
    t.kill(pid)
    assert api.killed == [str(pid)] and not api.procs


def test_agent_errors_become_guest_errors_and_permissions_stay_loud():
    api = FakeAgentApi()
    api.fail = PveApiError("x", status=500, reason="QEMU guest agent is not running")
    with pytest.raises(GuestError, match="guest agent exec: QEMU guest agent is not running"):
        transport(api).run(["true"])
    api.fail = PvePermissionError("lacks VM.GuestAgent.Unrestricted", status=403, privilege="VM.GuestAgent.Unrestricted")
    with pytest.raises(PvePermissionError):
        transport(api).run(["true"])


def test_read_file_whole_and_past_16_mib():
    api = FakeAgentApi()
    api.files["/run/x.json"] = "{\"é\": 1}".encode()
    assert transport(api).read_file("/run/x.json") == "{\"é\": 1}".encode()
    big = bytes(range(256)) * ((17 << 20) // 256)
    api.files["/run/big"] = big
    assert transport(api).read_file("/run/big") == big
    assert [c[2].get("offset") for c in api.calls if c[1].endswith("file-read")][-1] == 16 << 20
    old = FakeAgentApi(new_file_read=False)  # qemu-server < 9.1.5: no offset/count, dd instead
    old.files["/run/big"] = big
    assert transport(old).read_file("/run/big") == big
    assert any(c[2] == "dd" for c in execs(old))
    api.fail = PveApiError("x", status=500, reason="Agent error: failed to open file '/nope': No such file or directory")
    with pytest.raises(GuestError, match="No such file"):
        transport(api).read_file("/nope")


def test_write_file_small_by_file_write_large_by_exec_appends():
    api = FakeAgentApi()
    t = transport(api)
    t.write_file("/run/vmbench/job.fio", b"[job]\nrw=randwrite\n", 0o644)
    assert execs(api)[0] == ["setsid", "-w", "install", "-m", "644", "/dev/null", "/run/vmbench/job.fio"]
    writes = [c for c in api.calls if c[1].endswith("file-write")]
    assert writes[0][2] == {"file": "/run/vmbench/job.fio", "content": base64.b64encode(b"[job]\nrw=randwrite\n").decode(),
                            "encode": False}
    assert api.files["/run/vmbench/job.fio"] == b"[job]\nrw=randwrite\n"
    big = bytes(range(256)) * 1000  # 256 000 bytes: more than file-write takes
    assert len(big) > FILE_WRITE_RAW_MAX
    t.write_file("/run/big", big)
    assert api.files["/run/big"] == big
    appends = [c for c in execs(api) if c[:4] == ["setsid", "-w", "sh", "-c"] and "base64 -d >" in c[4]]
    assert [shlex.split(c[4])[2] for c in appends] == [">"] + [">>"] * (len(appends) - 1) and len(appends) == 6
    api.calls.clear()
    t.write_file("/proc/sys/vm/drop_caches", b"3\n", mode=None)
    assert [c[1].rsplit("/", 1)[1] for c in api.calls] == ["file-write"]  # no install for /proc
