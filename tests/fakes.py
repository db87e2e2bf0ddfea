"""Test doubles: a fake guest agent, a scripted transport, and a fake hypervisor (host
transport, host storage, driver, guest) for running the runner without a machine."""

from __future__ import annotations

import base64
import contextlib
import errno
import json
import threading
import time
import posixpath
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Sequence, Union

from vmbench.command import Completed
from vmbench.drivers.base import Accelerator, Applied, Check, HostChecks, Leftover, VmRequest, VmResources
from vmbench.drivers.qemu_cmdline import to_applied
from vmbench.fio.gate import ARMED_SCRIPT, PRERUN_SCRIPT
from vmbench.errors import CommandError, GuestError, HypervisorError, PreflightError, VmbenchError
from vmbench.guest.needs import GuestNeeds
from vmbench.paths import HostPaths, StatePaths
from vmbench.scenario.model import CephConfig, VmConfig
from vmbench.progress import Progress
from vmbench.settings import Accel, Bus, Cache, CpuMode, Feature, ImageFormat
from vmbench.storage import VOLUME_RE, Volume, VolumeRole, volume_name

if TYPE_CHECKING:
    from vmbench.images import Image


class FakeAgent:
    """Answers guest-exec / guest-exec-status / guest-file-* like qemu-ga does."""

    def __init__(self, programs: Mapping[str, Callable[[list[str], bytes | None], tuple[int, bytes, bytes]]] | None = None,
                 files: dict[str, bytes] | None = None, polls_before_exit: int = 1, truncate: bool = False) -> None:
        self.programs = dict(programs or {})
        self.files = files if files is not None else {}
        self.calls: list[dict] = []
        self.polls_before_exit = polls_before_exit
        self.truncate = truncate
        self._procs: dict[int, dict] = {}
        self._handles: dict[int, dict] = {}
        self._next = 100

    def __call__(self, command: dict, timeout: float):
        self.calls.append(command)
        name, args = command["execute"], command.get("arguments", {})
        if name == "guest-exec":
            prog = self.programs.get(args["path"])
            stdin = base64.b64decode(args["input-data"]) if "input-data" in args else None
            code, out, err = prog(args.get("arg", []), stdin) if prog else (127, b"", b"not found")
            self._next += 1
            self._procs[self._next] = {"code": code, "out": out, "err": err, "polls": 0}
            return {"pid": self._next}
        if name == "guest-exec-status":
            p = self._procs[args["pid"]]
            p["polls"] += 1
            if p["polls"] < self.polls_before_exit:
                return {"exited": False}
            reply = {"exited": True, "exitcode": p["code"]}
            if p["out"]:
                reply["out-data"] = base64.b64encode(p["out"]).decode()
            if p["err"]:
                reply["err-data"] = base64.b64encode(p["err"]).decode()
            if self.truncate:
                reply["out-truncated"] = True
            return reply
        if name == "guest-file-open":
            self._next += 1
            if args["mode"] == "r" and args["path"] not in self.files:
                from vmbench.errors import GuestError

                raise GuestError(f"no such file {args['path']}")
            if args["mode"] == "w":
                self.files[args["path"]] = b""
            self._handles[self._next] = {"path": args["path"], "pos": 0}
            return self._next
        if name == "guest-file-read":
            h = self._handles[args["handle"]]
            data = self.files[h["path"]][h["pos"]: h["pos"] + args["count"]]
            h["pos"] += len(data)
            return {"count": len(data), "buf-b64": base64.b64encode(data).decode(), "eof": h["pos"] >= len(self.files[h["path"]])}
        if name == "guest-file-write":
            h = self._handles[args["handle"]]
            self.files[h["path"]] += base64.b64decode(args["buf-b64"])
            return {"count": 0}
        if name == "guest-file-close":
            self._handles.pop(args["handle"])
            return {}
        raise AssertionError(f"unexpected agent command {name}")


class ScriptedTransport:
    """Records every command; answers from a table of argv-prefix -> stdout."""

    def __init__(self, answers: Mapping[tuple[str, ...], str] | None = None, fail: Sequence[tuple[str, ...]] = ()) -> None:
        self.name = "fake"
        self.answers = dict(answers or {})
        self.fail = list(fail)
        self.commands: list[list[str]] = []
        self.inputs: list[bytes | None] = []
        self.files: dict[str, bytes] = {}

    def run(self, argv, *, input=None, timeout=None, env=None, check=True, on_wait=None) -> Completed:
        argv = list(argv)
        self.commands.append(argv)
        self.inputs.append(input)
        for prefix in self.fail:
            if tuple(argv[: len(prefix)]) == prefix:
                raise CommandError(f"command failed (exit 1): {' '.join(argv)}", argv=argv, returncode=1, stderr="failed")
        best = None
        for prefix, out in self.answers.items():
            if tuple(argv[: len(prefix)]) == prefix and (best is None or len(prefix) > len(best[0])):
                best = (prefix, out)
        return Completed(tuple(argv), 0, best[1] if best else "", "")

    def spawn(self, argv: Sequence[str]) -> object:
        """A side that cannot start background commands (as one whose ``sh`` is missing)."""
        raise CommandError(f"{argv[0]}: not scripted to run in the background", argv=list(argv), returncode=127)

    def kill(self, handle: object) -> None:  # pragma: no cover - spawn() never hands out a handle
        raise AssertionError(f"nothing was spawned: {handle!r}")

    def read_file(self, path: str) -> bytes:
        return self.files[path]

    def write_file(self, path: str, data: bytes, mode=0o600) -> None:
        self.files[path] = data


# ---- a fake hypervisor: host, storage, driver, guest ----------------------------------------
#
# Test doubles for the Protocols of vmbench/drivers/base.py and vmbench/storage/base.py, so the
# runner can be driven end to end without a machine.  The transports keep a little state (files,
# directories, partitions, device-mapper devices, mounts) so that what the runner does is
# checked, not only recorded: fio refuses an output file in a directory that was never made or
# a target that does not exist, umount refuses what is not mounted, and so on.
#
# Faults: every transport takes ``fail_on(match, nth, error)`` (a command matching ``match``
# fails the ``nth`` time it runs), and FakeDriver takes ``fail_at`` (a driver phase).
#
# fio's figures: by default every measurement reports the canned json+ output's.  A side's
# ``fio_iops`` (FakeDriver(fio_iops=...) for every guest) makes each run report the IOPS it
# returns for the run's argv (IopsScript hands out values from lists); ``fio_series`` gives a
# run time series, which ``attach_fio_series`` puts on the FioRun the measurer sees.

DATA = Path(__file__).resolve().parent / "data"
FIO_JSONPLUS = (DATA / "fio-randrw-jsonplus.json").read_bytes()  # real fio 3.33 json+ output
FIO_VERSION = "fio-3.33"
Match = Union[Sequence[str], Callable[[list[str]], bool]]


def _opt(argv: Sequence[str], name: str) -> str | None:
    """The value of ``--name=VALUE`` or ``--name VALUE`` in argv."""
    for i, arg in enumerate(argv):
        if arg.startswith(f"--{name}="):
            return arg.split("=", 1)[1]
        if arg == f"--{name}" and i + 1 < len(argv):
            return argv[i + 1]
    return None


def is_precondition(argv: Sequence[str]) -> bool:
    """A fio precondition run (vmbench.fio.job.precondition_argv)."""
    return bool(argv) and argv[0] == "fio" and (_opt(argv, "name") or "").startswith("precondition-")


def is_fio_run(argv: Sequence[str], job: str | None = None) -> bool:
    """A fio measurement run (vmbench.fio.job.fio_argv), of ``job`` when given."""
    if not argv or argv[0] != "fio" or _opt(argv, "output") is None or is_precondition(argv):
        return False
    return job is None or _opt(argv, "name") == job


def fio_run(job: str | None = None) -> Callable[[list[str]], bool]:
    """A ``fail_on`` matcher: fio measurement runs (of ``job``)."""
    return lambda argv: is_fio_run(argv, job)


#: devices every fake sample has in /proc/diskstats (host and guest)
SAMPLED_DEVICES = ("sda", "sda2", "vda", "vda1", "vdb", "vdb1", "sdb", "sdb1", "dm-0", "dm-1")


def is_sampler(argv: Sequence[str]) -> bool:
    """The telemetry sampler (vmbench.telemetry.sampler.sampler_argv)."""
    from vmbench.telemetry.sampler import SAMPLER_SCRIPT

    return len(argv) >= 7 and list(argv[:2]) == ["sh", "-c"] and argv[2] == SAMPLER_SCRIPT


def without_target_and_output(argv: Sequence[str]) -> list[str]:
    return [a for a in argv if not a.startswith(("--filename=", "--output=", "--write_iops_log=", "--write_lat_log="))]


IopsFn = Callable[[list[str]], Union[float, None]]
SeriesFn = Callable[[list[str]], Union[dict, None]]


def fio_output(iops: float | None = None) -> bytes:
    """The canned json+ output; with ``iops``, rewritten to report that total (half per
    direction, so the sum is exact) and bandwidth scaled alike."""
    if iops is None:
        return FIO_JSONPLUS
    data = json.loads(FIO_JSONPLUS)
    job = data["jobs"][0]
    total = sum(job[d]["iops"] for d in ("read", "write"))
    for d in ("read", "write"):
        job[d]["bw_bytes"] = int(job[d]["bw_bytes"] * iops / total)
        job[d]["bw"] = job[d]["bw_bytes"] // 1024
        job[d]["iops"] = iops / 2
    return json.dumps(data).encode()


class IopsScript:
    """A ``fio_iops``: each fio run reports the next value of its list, the first of ``values``
    keyed by (job, target), by job, or by None (any run); a plain list is for every run.  Once
    a list is used up, the canned output's IOPS.  ``used`` records (job, target, IOPS) per run."""

    def __init__(self, values: Mapping[object, Sequence[float]] | Sequence[float]) -> None:
        lists = dict(values) if isinstance(values, Mapping) else {None: values}
        self.values: dict[object, list[float]] = {k: list(v) for k, v in lists.items()}
        self.used: list[tuple[str | None, str | None, float | None]] = []

    def __call__(self, argv: list[str]) -> float | None:
        job, target = _opt(argv, "name"), _opt(argv, "filename")
        key = next((k for k in ((job, target), job, None) if k in self.values), None)
        queue = self.values.get(key)
        value = queue.pop(0) if queue else None
        self.used.append((job, _opt(argv, "filename"), value))
        return value


def fake_series(argv: list[str]) -> dict:
    """A ``fio_series``: fio's IOPS and completion latency, one point a second."""
    return {"fio-iops": {"t_s": [1.0, 2.0, 3.0], "values": [100.0, 110.0, 90.0], "unit": "IOPS"},
            "fio-clat": {"t_s": [1.0, 2.0, 3.0], "values": [2.0e5, 2.5e5, 1.5e5], "unit": "ns"}}


def attach_fio_series(monkeypatch) -> None:
    """Make the measurer's run_fio return runs carrying ``series`` from the fake side's
    ``fio_series`` (as vmbench.fio.runner.FioRun.series will): set as the field when FioRun
    has one, else as an attribute."""
    import dataclasses

    import vmbench.run.measure as measure
    from vmbench.fio.runner import FioRun

    real = measure.run_fio
    has_field = "series" in {f.name for f in dataclasses.fields(FioRun)}

    def run_fio(transport, request, progress=None):
        run = real(transport, request, progress)
        fn = getattr(transport, "fio_series", None)
        series = fn(list(run.argv)) if fn else None
        if series is None:
            return run
        if has_field:
            return dataclasses.replace(run, series=series)
        object.__setattr__(run, "series", series)  # a frozen dataclass without the field yet
        return run

    monkeypatch.setattr(measure, "run_fio", run_fio)


@dataclass
class Fault:
    """Fail the ``nth`` command matching ``match`` (an argv prefix, or a predicate)."""

    match: Match
    nth: int = 1
    error: BaseException | type | None = None  # None: CommandError, exit 1
    seen: int = 0
    fired: bool = False

    def matches(self, argv: list[str]) -> bool:
        if callable(self.match):
            return bool(self.match(argv))
        prefix = list(self.match)
        return argv[: len(prefix)] == prefix

    def check(self, argv: list[str], where: str) -> None:
        if not self.matches(argv):
            return
        self.seen += 1
        if self.seen == self.nth:
            self.fired = True
            raise _error(self.error, f"{where}: injected failure of {' '.join(argv)}", argv)


def _error(error: BaseException | type | None, message: str, argv: Sequence[str] = ()) -> BaseException:
    if error is None:
        return CommandError(f"command failed (exit 1): {' '.join(argv)}", argv=list(argv), returncode=1, stderr=message)
    if isinstance(error, BaseException):
        return error
    if issubclass(error, CommandError):
        return error(message, argv=list(argv), returncode=1)
    if issubclass(error, VmbenchError):
        return error(message)
    instance = error()
    assert isinstance(instance, BaseException), error
    return instance


class _FakeSide:
    """What the host and guest fakes share: recording, faults, files, fio."""

    def __init__(self, name: str, *, commands: list[list[str]] | None = None, faults: list[Fault] | None = None) -> None:
        self.name = name
        self.commands: list[list[str]] = commands if commands is not None else []  # every argv, in order
        self.inputs: list[bytes | None] = []
        self.envs: list[dict | None] = []
        self.faults: list[Fault] = faults if faults is not None else []
        self.files: dict[str, bytes] = {}
        self.dirs: set[str] = {"/", "/tmp", "/run", "/mnt", "/dev", "/proc", "/etc"}
        self.writes: list[tuple[str, bytes]] = []  # write_file calls
        self.puts: list[tuple[str, str]] = []
        self.unknown: list[list[str]] = []  # commands this fake does not know (exit 127)
        self.fio_installed = True
        self.fio_iops: IopsFn | None = None  # argv -> the IOPS a measurement reports (None: the canned)
        self.fio_series: SeriesFn | None = None  # argv -> {source: series}, see attach_fio_series
        self.spawned: list[list[str]] = []  # background commands (the telemetry sampler)
        self.killed: list[int] = []
        self.samples = 0
        self.clock_skew_ms = 0  # how far this side's clock is ahead of the machine's

    # -- Transport -------------------------------------------------------------------------

    def run(self, argv, *, input=None, timeout=None, env=None, check=True, on_wait=None) -> Completed:
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        self.inputs.append(input)
        self.envs.append(dict(env) if env else None)
        for fault in self.faults:
            fault.check(argv, self.name)
        handler = getattr(self, "_cmd_" + argv[0].replace("-", "_").replace(".", "_"), None)
        if argv[0] == "fio" and not self.fio_installed:
            handler = None
        if handler is None:
            self.unknown.append(argv)
            code, out, err = 127, "", f"{argv[0]}: command not found"
        else:
            answer = handler(argv, input)
            code, out, err = (0, answer, "") if isinstance(answer, str) else answer
        done = Completed(tuple(argv), code, out, err)
        if check and code != 0:
            raise CommandError(f"command failed (exit {code}): {' '.join(argv)}" + (f"\n{err}" if err else ""),
                               argv=argv, returncode=code, stdout=out, stderr=err)
        return done

    def spawn(self, argv) -> int:
        """Background commands: only the telemetry sampler, which writes two samples at once."""
        argv = [str(a) for a in argv]
        self.commands.append(argv)
        self.inputs.append(None)
        self.envs.append(None)
        for fault in self.faults:
            fault.check(argv, self.name)
        if not is_sampler(argv):
            raise AssertionError(f"{self.name}: unexpected background command {argv}")
        self.spawned.append(argv)
        self._sample(argv[4], 2)
        return len(self.spawned)

    def kill(self, handle: object) -> None:
        assert isinstance(handle, int), handle
        self.killed.append(handle)

    def _sample(self, path: str, count: int = 1) -> str:
        """Samples as the sampler writes them: every second, 1 MB written to each device; to
        its command's output ("-"), else appended to ``path``."""
        text = ""
        for _ in range(count):
            self.samples += 1
            n = self.samples
            text += f"\n@ {1000 + n}.00\n"
            text += "".join(f" 254 {i} {d} 10 0 {n * 8} 5 20 0 {n * 2048} 9 0 10 20 0 0 0 0 0 0\n" for i, d in enumerate(SAMPLED_DEVICES))
            text += f"cpu  {n * 30} 0 {n * 20} {n * 40} {n * 10} 0 0 0 0 0\n" + self._sample_extra(path, n) + ".\n"
        if path == "-":
            return text
        self.files[path] = self.files.get(path, b"") + text.encode()
        return ""

    def _sample_extra(self, path: str, n: int) -> str:
        """More lines for sample ``n`` of the sampler writing ``path`` (subclasses: ZFS counters)."""
        return ""

    def _cmd_sh(self, argv, stdin):
        from vmbench.telemetry.sampler import DEVICES_SCRIPT, FIRST_SAMPLE_SCRIPT, SAMPLER_SCRIPT

        if argv[2:3] == [ARMED_SCRIPT]:
            return self._wait_armed(argv[4], int(argv[5]), argv[6])
        if argv[2:3] == [DEVICES_SCRIPT]:
            return self._devices_under(argv[4])
        devices = ""
        if argv[2:3] == [FIRST_SAMPLE_SCRIPT]:  # the devices under the target, then one sample
            devices, argv = self._devices_under(argv[4]), [*argv[:2], SAMPLER_SCRIPT, *argv[3:4], *argv[5:]]
        if not is_sampler(argv):
            return 1, "", "sh: this fake runs the telemetry sampler only"
        if argv[4] != "-" and not self._parent_ok(argv[4]):
            return 1, "", f"sh: {argv[4]}: No such file or directory"
        return devices + self._sample(argv[4])

    def _devices_under(self, target: str) -> str:
        """What DEVICES_SCRIPT prints, from this fake's findmnt and lsblk."""
        def answer(argv):
            handler = getattr(self, "_cmd_" + argv[0], None)
            got = handler(argv, None) if handler is not None else (127, "", "")
            return (0, got, "") if isinstance(got, str) else got

        dev = target
        if not dev.startswith("/dev/"):
            code, out, _ = answer(["findmnt", "-n", "-o", "SOURCE", "--target", target])
            dev = out.strip().split("[")[0] if code == 0 else ""
        if not dev.startswith("/dev/"):
            return ""
        code, out, _ = answer(["lsblk", "-n", "-s", "-r", "-o", "KNAME,TYPE", dev])
        return out if code == 0 else ""

    @property
    def left_running(self) -> list[int]:
        """Background commands started and never killed."""
        return [i for i in range(1, len(self.spawned) + 1) if i not in self.killed]

    def read_file(self, path: str) -> bytes:
        if path in self.files:
            return self.files[path]
        raise self._missing(path)

    def _missing(self, path: str) -> BaseException:
        return FileNotFoundError(errno.ENOENT, "No such file or directory", path)

    def write_file(self, path: str, data: bytes, mode=0o600) -> None:
        self.writes.append((path, bytes(data)))
        self.files[path] = bytes(data)

    def put_file(self, local_path: str, remote_path: str, mode: int = 0o644, progress=None) -> None:
        data = Path(local_path).read_bytes()
        self.puts.append((local_path, remote_path))
        self.files[remote_path] = data
        if progress:
            progress(len(data), len(data))

    # -- what tests look at ----------------------------------------------------------------

    def fail_on(self, match: Match, nth: int = 1, error: BaseException | type | None = None) -> Fault:
        """The ``nth`` command matching ``match`` (an argv prefix or a predicate) raises
        ``error`` (default: CommandError, as a failed command does)."""
        fault = Fault(match, nth, error)
        self.faults.append(fault)
        return fault

    def ran(self, *prefix: str) -> list[list[str]]:
        return [c for c in self.commands if c[: len(prefix)] == list(prefix)]

    @property
    def fio_runs(self) -> list[list[str]]:
        """Every fio measurement argv (not preconditioning, not --version), in order."""
        return [c for c in self.commands if is_fio_run(c)]

    @property
    def preconditions(self) -> list[list[str]]:
        return [c for c in self.commands if is_precondition(c)]

    # -- commands both sides know ----------------------------------------------------------

    def _exists(self, path: str) -> bool:
        return path in self.files or path in self.dirs

    def _parent_ok(self, path: str) -> bool:
        return posixpath.dirname(path) in self.dirs

    def _fio_target_ok(self, target: str) -> bool:
        return self._exists(target)

    def _cmd_fio(self, argv, stdin):
        if argv[1:] == ["--version"]:
            return FIO_VERSION + "\n"
        output = _opt(argv, "output")
        if output is None:
            return 1, "", "fio: this fake needs --output"
        if not self._parent_ok(output):
            return 1, "", f"fio: {output}: No such file or directory"
        target = _opt(argv, "filename") or (self.envs[-1] or {}).get("VMBENCH_TARGET", "")
        if not self._fio_target_ok(target):
            return 1, "", f"fio: {target}: No such file or directory"
        prerun = _opt(argv, "exec_prerun")
        if prerun is not None and not self._armed(prerun, int(_opt(argv, "numjobs") or 1)):
            self.files[output] = fio_output(0.0)  # stopped before its I/O, as fio is (rc 0)
            return ""
        if is_precondition(argv):
            size = int(_opt(argv, "size") or 0)
            data = {"fio version": FIO_VERSION, "jobs": [{"jobname": _opt(argv, "name"), "error": 0,
                                                          "write": {"io_bytes": size, "bw_bytes": 100_000_000, "runtime": 100}}]}
            self.files[output] = json.dumps(data).encode()
        else:
            self.files[output] = fio_output(self.fio_iops(argv) if self.fio_iops else None)
            if "--log_unix_epoch=1" in argv:
                self._epoch_logs(argv)
        return ""

    def _armed(self, prerun: str, clones: int) -> bool:
        """fio's gate (vmbench.fio.gate) as fio runs it: every clone leaves its marker, then
        waits for go (True) or stop (False)."""
        words = shlex.split(prerun.removesuffix(" #"))
        assert words[:3] == ["sh", "-c", PRERUN_SCRIPT], words
        go, stop, armed = words[4:7]
        for clone in range(clones):
            self.files[f"{armed}.{clone + 1}"] = b""
        deadline = time.monotonic() + 30
        while go not in self.files and stop not in self.files:
            assert time.monotonic() < deadline, f"{self.name}: fio's gate {go} was never opened"
            time.sleep(0.002)
        return go in self.files

    def _wait_armed(self, armed: str, want: int, stop: str) -> tuple[int, str, str]:
        """vmbench's wait for every clone's marker: 0, or 3 when stopped."""
        deadline = time.monotonic() + 30
        while sum(1 for p in list(self.files) if p.startswith(armed + ".")) < want:
            if stop in self.files:
                return 3, "", ""
            if time.monotonic() > deadline:
                return 2, "", "timed out"
            time.sleep(0.002)
        return 0, "", ""

    def _epoch_logs(self, argv: Sequence[str]) -> None:
        """fio's per-second IOPS logs in unix epoch ms, as if the run had started now: the
        measured job's stamps (one a second after its ramp), then the tail job's."""
        prefix = _opt(argv, "write_iops_log")
        if not prefix:
            return
        start = int(time.time() * 1000) + self.clock_skew_ms
        ramp = float(_opt(argv, "ramp_time") or 0)
        runtimes = [float(a.split("=", 1)[1]) for a in argv if a.startswith("--runtime=")]
        t = start + int(ramp * 1000)
        for job, seconds in enumerate(runtimes, 1):
            stamps = [t + 1000 * (i + 1) for i in range(max(1, int(seconds)))]
            self.files[f"{prefix}_iops.{job}.log"] = "".join(f"{x}, 1000, 0, 0, 0\n" for x in stamps).encode()
            t = stamps[-1]

    def _cmd_date(self, argv, stdin):
        if argv[1:] == ["+%s.%N"]:
            return f"{time.time() + self.clock_skew_ms / 1000:.9f}\n"
        return 1, "", "date: this fake prints +%s.%N only"

    def _cmd_mkdir(self, argv, stdin):
        paths = [a for a in argv[1:] if not a.startswith("-") and not _after(argv, "-m", a)]
        for p in paths:
            p = posixpath.normpath(p)
            while p not in ("/", ""):
                self.dirs.add(p)
                p = posixpath.dirname(p)
        return ""

    def _cmd_rm(self, argv, stdin):
        paths = [posixpath.normpath(a) for a in argv[1:] if not a.startswith("-")]
        recursive = any(a in ("-rf", "-r", "-fr", "-R") for a in argv[1:])
        for p in paths:
            self.files.pop(p, None)
            if recursive:
                self.dirs = {d for d in self.dirs if d != p and not d.startswith(p + "/")}
                self.files = {f: v for f, v in self.files.items() if not f.startswith(p + "/")}
        return ""

    def _cmd_sync(self, argv, stdin):
        return ""

    def _cmd_test(self, argv, stdin):
        flag, path = argv[1], argv[2]
        ok = path in self.dirs if flag == "-d" else self._exists(path)
        return (0 if ok else 1), "", ""

    def _cmd_install(self, argv, stdin):  # the guest agent makes files with a mode first
        self.files[argv[-1]] = b""
        return ""

    def _cmd_ls(self, argv, stdin):
        d = posixpath.normpath(argv[-1])
        if d not in self.dirs:
            return 2, "", f"ls: cannot access '{d}': No such file or directory"
        names = {p[len(d) + 1:].split("/")[0] for p in list(self.files) + list(self.dirs) if p.startswith(d + "/")}
        return "".join(f"{n}\n" for n in sorted(names))

    def _cmd_cryptsetup(self, argv, stdin):
        if argv[1] == "--version":
            return "cryptsetup 2.6.1 flags: UDEV BLKID KEYRING\n"
        if argv[1] == "benchmark":
            cipher, bits = _opt(argv, "cipher") or "aes-xts-plain64", _opt(argv, "key-size") or "512"
            alg = cipher.rsplit("-", 1)[0]
            return ("# Tests are approximate using memory only (no storage IO).\n"
                    "#     Algorithm |       Key |      Encryption |      Decryption\n"
                    f"        {alg}        {bits}b      1500.0 MiB/s      1600.0 MiB/s\n")
        return 1, "", f"cryptsetup {argv[1]}: not known to this fake"


def _after(argv: Sequence[str], flag: str, value: str) -> bool:
    """Whether ``value`` is the argument of ``flag`` in argv (``-m 755``)."""
    return any(argv[i] == flag and argv[i + 1] == value for i in range(len(argv) - 1))


class FakeHost(_FakeSide):
    """The hypervisor host as a Transport: fio, work directories, the facts recorded with a
    run (``uname -r``, /proc/cpuinfo, /etc/os-release, versions) and whatever files were
    written.  Volumes of a FakeStorage built with ``host=`` appear as files here, so host fio
    on a volume that does not exist fails."""

    def __init__(self, *, kernel: str = "6.1.0-28-amd64", fio: bool = True, cpu_model: str = "Fake CPU @ 3.00GHz",
                 aes: bool = True, kvm: bool = False, free: int = 500 << 30, template_size: int = 2 << 30) -> None:
        super().__init__("host")
        self.kernel = kernel
        self.fio_installed = fio
        self.kvm = kvm
        self.free = free
        self.template_size = template_size
        self.closes = 0  # close() calls
        flags = "fpu sse sse2 ssse3 sse4_1 sse4_2 pclmulqdq" + (" aes" if aes else "")
        self.files["/proc/cpuinfo"] = "".join(
            f"processor\t: {i}\nmodel name\t: {cpu_model}\nflags\t\t: {flags}\n\n" for i in range(4)).encode()
        self.files["/etc/os-release"] = b'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n'
        if kvm:
            self.files["/dev/kvm"] = b""

    def describe(self) -> dict[str, object]:
        return {}  # as this machine: nothing about how it is reached

    def close(self) -> None:
        self.closes += 1

    def _cmd_uname(self, argv, stdin):
        return self.kernel + "\n" if argv[1:] == ["-r"] else "Linux\n"

    def _cmd_mktemp(self, argv, stdin):
        parent = argv[argv.index("-p") + 1] if "-p" in argv else "/tmp"
        template = argv[-1]
        if parent not in self.dirs:
            return 1, "", f"mktemp: failed to create directory via template '{parent}/{template}': No such file or directory"
        stem = template.rstrip("X")
        path = f"{parent.rstrip('/')}/{stem}{secrets.token_hex(4)}"
        if "-d" in argv:
            self.dirs.add(path)
        else:
            self.files[path] = b""
        return path + "\n"

    def _cmd_df(self, argv, stdin):
        return f"   Avail\n{self.free}\n"

    def _cmd_findmnt(self, argv, stdin):  # the pool is on /dev/sda2
        if "--target" in argv and self._exists(argv[argv.index("--target") + 1]):
            return "/dev/sda2\n"
        return 1, "", ""

    def _cmd_lsblk(self, argv, stdin):
        if "-s" in argv and argv[-1] == "/dev/sda2":
            return "sda2 part\nsda disk\n"
        return 32, "", f"lsblk: {argv[-1]}: not a block device"

    def _cmd_qemu_img(self, argv, stdin):
        if argv[1] == "info":
            return json.dumps({"virtual-size": self.template_size, "format": "qcow2", "filename": argv[-1]})
        return ""

    def _cmd_qemu_system_x86_64(self, argv, stdin):
        return "QEMU emulator version 7.2.11 (Debian 1:7.2+dfsg-7+deb12u12)\n"


class FakeStorage:
    """VolumeStorage: volumes in a dict.  ``free`` is what free_bytes() says; ``fail_on_create``
    (True, or a substring of a volume name such as "scratch") makes create_volume raise
    HypervisorError; every create and delete is recorded."""

    label = "fake pool"

    def __init__(self, *, free: int = 100 << 30, fail_on_create: bool | str = False, host: FakeHost | None = None,
                 root: str = "/var/lib/vmbench-fake/pool") -> None:
        self.free = free
        self.fail_on_create = fail_on_create
        self.host = host
        self.root = root
        self.volumes: dict[str, Volume] = {}
        self.sizes: dict[str, int] = {}
        self.backing: dict[str, str | None] = {}
        self.created: list[str] = []
        self.deleted: list[str] = []  # every delete_volume call, the volume there or not
        self.prepared = 0

    def prepare(self, progress: Progress) -> None:
        self.prepared += 1

    def free_bytes(self) -> int:
        return self.free

    def create_volume(self, name: str, size: int, fmt: ImageFormat, backing: str | None = None, zfs=None) -> Volume:
        if not VOLUME_RE.match(name):
            raise AssertionError(f"{name} is not a vmbench volume name")
        if self.fail_on_create is True or (isinstance(self.fail_on_create, str) and self.fail_on_create in name):
            raise HypervisorError(f"creating volume {name} in the fake pool: injected failure")
        if name in self.volumes:
            raise HypervisorError(f"creating volume {name}: it already exists")
        if backing is not None and fmt is not ImageFormat.QCOW2:
            raise AssertionError("only qcow2 volumes have a backing image")
        vol = Volume(name=name, path=f"{self.root}/{name}", format=fmt, kind="file")
        self.volumes[name] = vol
        self.sizes[name] = size
        self.backing[name] = backing
        self.created.append(name)
        if self.host is not None:
            self.host.files[vol.path] = b""
        return vol

    def delete_volume(self, name: str) -> None:
        self.deleted.append(name)
        vol = self.volumes.pop(name, None)
        if vol is not None and self.host is not None:
            self.host.files.pop(vol.path, None)

    def leftovers(self) -> list[Leftover]:
        return [Leftover("volume", v.path, _run_tag(v.name), "fake pool") for v in self.volumes.values()]

    def delete_path(self, path: str) -> None:
        """A leftover's path: the volume of that path (as :meth:`leftovers` lists them)."""
        self.delete_volume(posixpath.basename(path))

    def facts(self) -> dict:
        return {"storage_type": "fake", "pool": "fake", "pool_free_bytes": self.free}


def _run_tag(volume: str) -> str:
    m = VOLUME_RE.match(volume)
    assert m is not None, volume
    return m.group(1)


@dataclass(frozen=True)
class _DiskLayout:
    """How one bus shows the root and scratch disks in the guest."""

    root: str
    scratch: str
    root_sys: str
    scratch_sys: str
    driver: str  # of the scratch disk
    root_driver: str
    scsi_driver: str | None  # the scratch disk's SCSI host driver


def _layout(bus: Bus) -> _DiskLayout:
    pci = "/sys/devices/pci0000:00"
    if bus is Bus.VIRTIO_SCSI:
        return _DiskLayout("vda", "sda", f"{pci}/0000:00:04.0/virtio2/block/vda",
                           f"{pci}/0000:00:05.0/virtio3/host2/target2:0:0/2:0:0:0/block/sda", "sd", "virtio_blk", "virtio_scsi")
    if bus is Bus.VIRTIO_SCSI_SHARED:
        return _DiskLayout("sda", "sdb", f"{pci}/0000:00:05.0/virtio3/host2/target2:0:0/2:0:0:0/block/sda",
                           f"{pci}/0000:00:05.0/virtio3/host2/target2:0:1/2:0:1:0/block/sdb", "sd", "sd", "virtio_scsi")
    if bus is Bus.SATA:
        return _DiskLayout("vda", "sda", f"{pci}/0000:00:04.0/virtio2/block/vda",
                           f"{pci}/0000:00:1f.2/ata1/host0/target0:0:0/0:0:0:0/block/sda", "sd", "virtio_blk", "ahci")
    return _DiskLayout("vda", "vdb", f"{pci}/0000:00:04.0/virtio2/block/vda", f"{pci}/0000:00:05.0/virtio3/block/vdb",
                       "virtio_blk", "virtio_blk", None)


class FakeGuestTransport(_FakeSide):
    """A booted guest as seen through its agent: CPU and memory as the VM asked, a root disk
    (``/`` on its first partition) and the scratch disk with ``serial``, sysfs as the bus
    shows it, and the commands stacks are built and torn down with, keeping track of
    partitions, device-mapper devices and mounts.  Missing files raise GuestError, as the
    agent does."""

    def __init__(self, name: str, vm: VmConfig, serial: str, *, scratch_size: int = 1 << 30,
                 commands: list[list[str]] | None = None, faults: list[Fault] | None = None,
                 kernel: str = "6.1.0-28-amd64", aes: bool | None = None, fs_free: int | None = None) -> None:
        super().__init__(name, commands=commands, faults=faults)
        self.vm = vm
        self.serial = serial
        self.scratch_size = scratch_size
        self.fs_free = fs_free if fs_free is not None else scratch_size * 9 // 10
        self.layout = _layout(vm.bus)
        self.disk = f"/dev/{self.layout.scratch}"
        self.root_source = f"/dev/{self.layout.root}1"
        self.partitions: list[str] = []
        self.devices: set[str] = set()  # LVs and mapper devices: /dev/vmbench_vg/vmbench_lv, /dev/mapper/x
        self.dm: list[str] = []  # device-mapper names, as dmsetup ls lists them
        self.mounts: dict[str, str] = {}  # mountpoint -> device
        if aes is None:
            aes = vm.cpu.aes is Feature.ON or (vm.cpu.aes is Feature.DEFAULT and vm.cpu.model not in ("kvm64", "qemu64"))
        flags = "fpu de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 syscall nx lm"
        flags += " pni ssse3 cx16 sse4_1 sse4_2 popcnt hypervisor" + (" pclmulqdq aes" if aes else "")
        model = "QEMU Virtual CPU version 2.5+" if vm.cpu.model in ("kvm64", "qemu64") else f"{vm.cpu.label} (fake)"
        self.files["/proc/cpuinfo"] = "".join(
            f"processor\t: {i}\nvendor_id\t: GenuineIntel\nmodel name\t: {model}\nflags\t\t: {flags}\n\n"
            for i in range(vm.vcpus)).encode()
        self.files["/proc/sys/kernel/osrelease"] = (kernel + "\n").encode()
        self.files["/proc/meminfo"] = f"MemTotal:       {vm.memory_mib * 1024 - 60_000} kB\nMemFree:        500000 kB\n".encode()
        for name_, sys_ in ((self.layout.root, self.layout.root_sys), (self.layout.scratch, self.layout.scratch_sys)):
            q = f"/sys/block/{name_}/queue"
            self.files[f"{q}/write_cache"] = b"write back\n" if vm.cache.writeback else b"write through\n"
            self.files[f"{q}/scheduler"] = b"[none] mq-deadline\n"
            self.files[f"{q}/rotational"] = b"0\n" if self.layout.driver == "virtio_blk" else b"1\n"
            self.files[f"{q}/logical_block_size"] = b"512\n"
            self.files[f"{q}/nr_requests"] = b"256\n"
        for host_no, proc in (("host2", "virtio_scsi"), ("host0", "ahci")):
            self.files[f"/sys/class/scsi_host/{host_no}/proc_name"] = f"{proc}\n".encode()

    def _missing(self, path: str) -> BaseException:
        return GuestError(f"{self.name}: guest-file-open {path}: No such file or directory")

    # -- what the runner reads -----------------------------------------------------------

    def _cmd_readlink(self, argv, stdin):
        path = argv[-1].rstrip("/")
        links = {}
        for name_, sys_, drv in ((self.layout.root, self.layout.root_sys, self.layout.root_driver),
                                 (self.layout.scratch, self.layout.scratch_sys, self.layout.driver)):
            links[f"/sys/block/{name_}"] = sys_
            bus = "virtio" if drv == "virtio_blk" else "scsi"
            links[f"/sys/block/{name_}/device/driver"] = f"/sys/bus/{bus}/drivers/{drv}"
        if path in links:
            return links[path] + "\n"
        return 1, "", ""

    def _tree(self) -> dict:
        root_children: list[dict[str, Any]] = [{"name": self.layout.root + "1", "path": self.root_source, "serial": None, "type": "part",
                          "size": 2147483648 - 1048576, "mountpoints": ["/"], "pkname": self.layout.root}]
        scratch_children: list[dict[str, Any]] = [{"name": posixpath.basename(p), "path": p, "serial": None, "type": "part",
                             "size": self.scratch_size - (1 << 20),
                             "mountpoints": [m for m, d in self.mounts.items() if d == p] or [None],
                             "pkname": self.layout.scratch} for p in self.partitions]
        disks: list[dict[str, Any]] = [
            {"name": self.layout.root, "path": f"/dev/{self.layout.root}", "serial": None, "type": "disk",
             "size": 2147483648, "mountpoints": [None], "pkname": None, "children": root_children},
            {"name": self.layout.scratch, "path": self.disk, "serial": self.serial, "type": "disk",
             "size": self.scratch_size, "mountpoints": [m for m, d in self.mounts.items() if d == self.disk] or [None],
             "pkname": None, **({"children": scratch_children} if scratch_children else {})},
        ]
        return {"blockdevices": disks}

    def _cmd_lsblk(self, argv, stdin):
        if "-s" in argv:  # the device and every device under it (vmbench.telemetry.sampler)
            dev, disk = argv[-1], self.layout.scratch
            if dev == self.disk:
                return f"{disk} disk\n"
            if dev in self.partitions:
                return f"{posixpath.basename(dev)} part\n{disk} disk\n"
            if dev in self.devices:
                below = "".join(f"{posixpath.basename(p)} part\n" for p in self.partitions[:1])
                return f"dm-0 lvm\n{below}{disk} disk\n"
            return 32, "", f"lsblk: {dev}: not a block device"
        if "--json" in argv and "--list" in argv:  # the partitions of the scratch disk (StackBuilder)
            dev = argv[-1]
            if dev != self.disk:
                return 32, "", f"lsblk: {dev}: not a block device"
            rows = [{"path": self.disk, "type": "disk"}] + [{"path": p, "type": "part"} for p in self.partitions]
            return json.dumps({"blockdevices": rows})
        if "--json" in argv:
            return json.dumps(self._tree())
        if "PKNAME" in argv:  # the disk under a partition
            dev = argv[-1]
            for d in self._tree()["blockdevices"]:
                for c in d.get("children") or []:
                    if c["path"] == dev:
                        return d["name"] + "\n"
                if d["path"] == dev:
                    return "\n"
            return 32, "", f"lsblk: {dev}: not a block device"
        return 1, "", "lsblk: this fake knows --json and PKNAME only"

    def _cmd_findmnt(self, argv, stdin):
        if "--target" in argv and argv[argv.index("--target") + 1] == "/":
            return self.root_source + "\n"
        if "--target" in argv:
            path = argv[argv.index("--target") + 1]
            under = [mp for mp in self.mounts if path.startswith(mp.rstrip("/") + "/")]
            if under:
                return self.mounts[max(under, key=len)] + "\n"
        if "--mountpoint" in argv:
            mp = argv[argv.index("--mountpoint") + 1]
            return (0, mp + "\n", "") if mp in self.mounts else (1, "", "")
        return 1, "", ""

    # -- building and tearing down stacks ----------------------------------------------------

    def _block_ok(self, dev: str) -> bool:
        return dev == self.disk or dev in self.partitions or dev in self.devices

    def _fio_target_ok(self, target: str) -> bool:
        if self._block_ok(target):
            return True
        return any(target.startswith(mp.rstrip("/") + "/") for mp in self.mounts)

    def _cmd_parted(self, argv, stdin):
        disk = argv[argv.index("--align") + 2] if "--align" in argv else argv[2]
        if disk != self.disk:
            return 1, "", f"parted: {disk}: refusing, not the scratch disk"
        if "mkpart" in argv:
            sep = "p" if disk[-1].isdigit() else ""
            self.partitions = [f"{disk}{sep}1"]
        return ""

    def _cmd_udevadm(self, argv, stdin):
        return ""

    def _cmd_blockdev(self, argv, stdin):
        dev = argv[-1]
        if not self._block_ok(dev):
            return 1, "", f"blockdev: cannot open {dev}: No such file or directory"
        return str(self.scratch_size if dev == self.disk else self.scratch_size - (1 << 20)) + "\n"

    def _cmd_pvcreate(self, argv, stdin):
        return "" if self._block_ok(argv[-1]) else (5, "", f"No device found for {argv[-1]}.")

    def _cmd_vgcreate(self, argv, stdin):
        return ""

    def _cmd_lvcreate(self, argv, stdin):
        vg, lv = argv[-1], argv[argv.index("--name") + 1]
        self.dm.append(f"{vg}-{lv}")
        if "thin-pool" not in argv:
            self.devices.add(f"/dev/{vg}/{lv}")
        return ""

    def _cmd_lvremove(self, argv, stdin):
        vg = argv[-1]
        self.dm = [d for d in self.dm if not d.startswith(vg + "-")]
        self.devices = {d for d in self.devices if not d.startswith(f"/dev/{vg}/")}
        return ""

    def _cmd_vgremove(self, argv, stdin):
        return ""

    def _cmd_pvremove(self, argv, stdin):
        return ""

    def _cmd_cryptsetup(self, argv, stdin):
        if argv[1] == "luksFormat":
            if not stdin:
                return 1, "", "cryptsetup: no key on stdin"
            return "" if self._block_ok(argv[-1]) else (4, "", f"Device {argv[-1]} does not exist.")
        if argv[1] == "open":
            if not stdin:
                return 2, "", "cryptsetup: no key on stdin"
            name = argv[-1]
            self.dm.append(name)
            self.devices.add(f"/dev/mapper/{name}")
            return ""
        if argv[1] == "close":
            name = argv[-1]
            if name not in self.dm:
                return 4, "", f"Device {name} is not active."
            self.dm.remove(name)
            self.devices.discard(f"/dev/mapper/{name}")
            return ""
        return super()._cmd_cryptsetup(argv, stdin)

    def _mkfs(self, argv, stdin):
        return "" if self._block_ok(argv[-1]) else (1, "", f"{argv[0]}: {argv[-1]}: No such file or directory")

    _cmd_mkfs_ext2 = _cmd_mkfs_ext3 = _cmd_mkfs_ext4 = _cmd_mkfs_xfs = _cmd_mkfs_btrfs = _mkfs

    def _cmd_mount(self, argv, stdin):
        dev, mp = argv[-2], argv[-1]
        if mp not in self.dirs:
            return 32, "", f"mount: {mp}: mount point does not exist."
        if not self._block_ok(dev):
            return 32, "", f"mount: {dev}: special device does not exist."
        self.mounts[mp] = dev
        return ""

    def _cmd_umount(self, argv, stdin):
        mp = argv[-1]
        if mp not in self.mounts:
            return 32, "", f"umount: {mp}: not mounted."
        del self.mounts[mp]
        self.files = {f: v for f, v in self.files.items() if not f.startswith(mp + "/")}
        return ""

    def _cmd_df(self, argv, stdin):
        return f"Avail\n{self.fs_free}\n"

    def _cmd_wipefs(self, argv, stdin):
        dev = argv[-1]
        if dev == self.disk:
            self.partitions = []
        return ""

    def _cmd_dmsetup(self, argv, stdin):
        if not self.dm:
            return "No devices found\n"
        return "".join(f"{name}\t(254:{i})\n" for i, name in enumerate(self.dm))


class FakeGuest:
    """Guest: a booted FakeDriver VM."""

    def __init__(self, driver: "FakeDriver", request: VmRequest, res: VmResources, transport: FakeGuestTransport) -> None:
        self.driver = driver
        self.request = request
        self.name = res.name
        self.resources = res
        self.transport = transport
        self.boot_seconds = 0.5

    @contextlib.contextmanager
    def limits_lifted(self) -> Iterator[bool]:
        """Lifted (and recorded in ``driver.lifts``) when the VM has write or total limits."""
        lifted = self.request.vm.limits.write_rate(1 << 20) is not None
        self.driver.lifts.append((self.name, lifted))
        yield lifted

    def applied(self) -> Applied:
        """Exactly what was asked (plus FakeDriver.applied_changes), so cells are valid: every
        reading an axis's ``verify`` names (the guest's own come from FakeGuestTransport) is
        the axis's setting, so a new axis needs no edit here; a setting left to the hypervisor
        (None) is not reported.  ``applied_changes`` overrides readings by key (an axis's
        reading, or an Applied field)."""
        from vmbench.scenario import axes  # the module, so a test that adds an axis is seen

        self.driver._fault("applied")
        vm = self.request.vm
        readings: dict[str, Any] = {key: a.setting(vm) for a in axes.AXES for key, _, _ in a.verify
                                    if not key.startswith("guest_") and a.setting(vm) is not None}
        readings.update(
            config_source="the fake configuration",
            controller="virtio-scsi" if vm.bus.is_scsi else ("ahci" if vm.bus is Bus.SATA else None),
            cpu_model=vm.cpu.model if vm.cpu.mode is CpuMode.MODEL else vm.cpu.mode.value,
            cpu_flags=tuple((f, state.value) for f, state in vm.cpu.all_features()),
            accelerator=self.driver.accel.name, volume=self.resources.scratch_path,
        )
        changes = dict(self.driver.applied_changes)
        opaque = {k: changes.pop(k) for k in ("native_config", "qemu_cmdline", "details") if k in changes}
        readings.update(changes)
        return to_applied(readings, native_config=opaque.get("native_config", f"<vm name='{self.name}'/>"),
                          qemu_cmdline=opaque.get("qemu_cmdline", ("qemu-system-x86_64", "-name", self.name)),
                          details=opaque.get("details", {"fake": True}))


class FakeDriver:
    """HypervisorDriver over FakeHost and FakeStorage.

    ``fail_at`` names a phase ("prepare", "create", "reference", "boot", "applied", "remove")
    whose ``fail_nth`` occurrence raises ``fail_with`` (default: PreflightError for prepare,
    GuestError for boot, else HypervisorError).  "create" fails after the root volume exists
    (a half-made VM); "boot" after the VM is defined.  Guest-side faults go through
    :meth:`fail_guest` and count commands across every guest this driver boots."""

    name = "fake"
    needs_image = True
    ceph: "CephConfig | None" = None
    DEFAULT_ERRORS = {"prepare": PreflightError, "boot": GuestError}

    def __init__(self, *, host: FakeHost | None = None, storage: FakeStorage | None = None, paths: HostPaths | None = None,
                 accel: Accelerator = Accelerator("tcg", "fake"), fail_at: str | None = None, fail_nth: int = 1,
                 fail_with: BaseException | type | None = None, hostname: str = "fakehost",
                 applied_changes: dict | None = None, guest_kernel: str = "6.1.0-28-amd64",
                 fio_iops: IopsFn | None = None, fio_series: SeriesFn | None = None) -> None:
        self.host = host or FakeHost()
        self.paths = paths or HostPaths("/var/lib/vmbench-fake")
        self.storage = storage or FakeStorage(host=self.host, root=self.paths.pool)
        if self.storage.host is None:
            self.storage.host = self.host
        self.accel = accel
        self.fail_at = fail_at
        self.fail_nth = fail_nth
        self.fail_with = fail_with
        self.hostname = hostname
        self.applied_changes = dict(applied_changes or {})
        self.lifts: list[tuple[str, bool]] = []  # (VM, lifted) per FakeGuest.limits_lifted
        self.guest_kernel = guest_kernel
        self.fio_iops = fio_iops  # every guest's (the host's is FakeHost.fio_iops)
        self.fio_series = fio_series
        self.phases: dict[str, int] = {}  # phase -> times entered
        self.vms: dict[str, str] = {}  # name -> "defined" | "running"
        self.resources: dict[str, VmResources] = {}
        self.guest_commands: list[list[str]] = []  # every guest command, all guests, in order
        self.guest_faults: list[Fault] = []
        self.guests: list[FakeGuest] = []
        self.boots = 0  # boot() calls
        self.creates = 0  # create_vm() calls
        self.removed = 0  # remove_vm() calls that found something to remove
        self.remove_calls: list[str] = []
        self.closed = 0
        self.boot_delay = 0.0  # seconds each boot takes (to see boots overlap)
        self.booting = 0  # boots under way now
        self.max_booting = 0  # the most boots under way at once
        self._lock = threading.Lock()

    # -- faults -----------------------------------------------------------------------------

    def _fault(self, phase: str) -> None:
        with self._lock:
            self.phases[phase] = n = self.phases.get(phase, 0) + 1
        if self.fail_at == phase and n == self.fail_nth:
            raise _error(self.fail_with or self.DEFAULT_ERRORS.get(phase, HypervisorError), f"fake {phase}: injected failure")

    def fail_guest(self, match: Match, nth: int = 1, error: BaseException | type | None = None) -> Fault:
        """The ``nth`` guest command matching ``match`` (counted over every guest) raises."""
        fault = Fault(match, nth, error)
        self.guest_faults.append(fault)
        return fault

    @property
    def guest_fio_runs(self) -> list[list[str]]:
        return [c for c in self.guest_commands if is_fio_run(c)]

    # -- HypervisorDriver ---------------------------------------------------------------------

    def prepare(self, *, image: "Image | None" = None, accel: Accel, cpu_models: set[str], cpu_modes: set[CpuMode],
                progress: Progress, vms: Sequence[VmConfig] = (), guest_needs: "GuestNeeds | None" = None) -> Accelerator:
        self._fault("prepare")
        self.storage.prepare(progress)
        return self.accel

    def cached_accelerator(self) -> str | None:
        return self.accel.name

    def describe_host(self) -> dict:
        return {"driver": self.name, "hostname": self.hostname, "qemu_version": "7.2.11", "host_state_dir": self.paths.root,
                **self.storage.facts()}

    def doctor_checks(self, *, template: str, reprobe: bool, progress: Progress) -> HostChecks:
        try:
            accel = self.prepare(accel=Accel.AUTO, cpu_models=set(), cpu_modes=set(), progress=progress)
        except VmbenchError as exc:
            return HostChecks((Check("fake", "FAIL", exc.message, exc.hint or ""),), answered=False)
        return HostChecks((Check("fake", "ok", f"{self.hostname}: fake hypervisor"),
                           Check("accelerator", "ok" if accel.name == "kvm" else "warn", f"{accel.name}: {accel.reason}")),
                          answered=True)

    def new_resources(self, run_tag: str, request: VmRequest) -> VmResources:
        return VmResources(name=f"vmbench-{run_tag}-{request.seq}", scratch_path="",
                           scratch_serial=f"VMB{run_tag[1:]}S{request.seq:03d}", host_target=None)

    def create_vm(self, run_tag: str, request: VmRequest, res: VmResources) -> VmResources:
        self.creates += 1
        self.resources[res.name] = res
        fmt = request.vm.format
        root_name = volume_name(run_tag, request.seq, VolumeRole.ROOT, ImageFormat.QCOW2)
        scratch_name = volume_name(run_tag, request.seq, VolumeRole.SCRATCH, fmt)
        res.expected_volumes = [root_name, scratch_name]
        root = self.storage.create_volume(root_name, self.host.template_size, ImageFormat.QCOW2,
                                          backing=f"{self.paths.images}/template.qcow2")
        res.volumes.append(root.name)
        res.root_path = root.path
        self._fault("create")  # a half-made VM: the root disk exists, the scratch disk does not
        scratch = self.storage.create_volume(scratch_name, request.scratch_size, fmt)
        res.volumes.append(scratch.name)
        res.scratch_path = scratch.path
        if fmt is ImageFormat.RAW:
            res.host_target = scratch.path
        return res

    def create_host_reference(self, run_tag: str, request: VmRequest, res: VmResources) -> str:
        name = volume_name(run_tag, request.seq, VolumeRole.HOSTREF, ImageFormat.RAW)
        res.expected_volumes.append(name)
        self._fault("reference")
        vol = self.storage.create_volume(name, request.scratch_size, ImageFormat.RAW)
        res.volumes.append(name)
        res.host_target = vol.path
        return vol.path

    def boot(self, run_tag: str, request: VmRequest, res: VmResources, progress: Progress | None = None,
             timeout: float | None = None) -> FakeGuest:
        with self._lock:
            self.boots += 1
            self.booting += 1
            self.max_booting = max(self.max_booting, self.booting)
        try:
            if self.boot_delay:
                time.sleep(self.boot_delay)
            return self._boot(run_tag, request, res)
        finally:
            with self._lock:
                self.booting -= 1

    def _boot(self, run_tag: str, request: VmRequest, res: VmResources) -> FakeGuest:
        missing = [v for v in res.volumes if v not in self.storage.volumes]
        if missing or not res.scratch_path:
            raise AssertionError(f"booting {res.name} without its disks: {missing}")
        res.native_config = f"<vm name='{res.name}' cache='{request.vm.cache.value}'/>"
        self.vms[res.name] = "defined"
        self._fault("boot")
        self.vms[res.name] = "running"
        transport = FakeGuestTransport(f"guest {res.name}", request.vm, res.scratch_serial, scratch_size=request.scratch_size,
                                       commands=self.guest_commands, faults=self.guest_faults, kernel=self.guest_kernel)
        transport.fio_iops, transport.fio_series = self.fio_iops, self.fio_series
        guest = FakeGuest(self, request, res, transport)
        self.guests.append(guest)
        return guest

    def remove_vm(self, res: VmResources) -> None:
        self.remove_calls.append(res.name)
        self._fault("remove")
        found = self.vms.pop(res.name, None) is not None
        for name in dict.fromkeys(res.volumes + res.expected_volumes):
            found = found or name in self.storage.volumes
            self.storage.delete_volume(name)
        self.removed += found

    def check_step(self, need: int, what: str = "the step's VMs") -> None:
        self._fault("check")

    def leftovers(self) -> list[Leftover]:
        out = [Leftover("domain", name, name.split("-")[1], state) for name, state in self.vms.items()]
        return out + self.storage.leftovers()

    def remove_leftover(self, item: Leftover) -> None:
        if item.kind == "domain":
            self.vms.pop(item.name, None)
        else:  # what the storage listed: a volume, or another kind of a made-up storage backend's
            self.storage.delete_path(item.name)

    def close(self) -> None:
        self.closed += 1


def install_fake_image(state: StatePaths, name: str = "debian12") -> "Image":
    """A complete (empty-filed) built image of recipe ``name`` in ``state``, as
    vmbench.images.current_image finds it once VMBENCH_STATE_DIR points at ``state``."""
    from vmbench.images import current_image, image_hash, load_recipe
    from vmbench.images import build as _build

    recipe = load_recipe(name)
    digest = image_hash(recipe)
    d = state.images / _build.image_dirname(name, digest)
    d.mkdir(parents=True, exist_ok=True)
    for f in (_build.ROOT_IMAGE, _build.KERNEL, _build.INITRD):
        (d / f).write_bytes(b"")
    (d / _build.MANIFEST).write_text(json.dumps({"name": name, "hash": digest, "cmdline": "root=LABEL=vmbench-root"}))
    image = current_image(name, state=state)
    assert image is not None
    return image


class FakePveNode(FakeHost):
    """A Proxmox VE node's SSH side next to a ``tests.fakepve.FakePve`` (its API side): the
    hostname is the node's, ``pveversion -v`` and ``uname -r`` as that PVE version has them,
    ``/dev/kvm`` present or not, ``/proc/<pid>/cmdline`` of a running VM's QEMU built from the
    configuration the fake started it with (PVE 8: ``-drive`` + ``-device``; PVE 9: nested
    ``-blockdev`` throttle -> format -> file chains and ``write-cache=`` on the device; the I/O
    limits as ``throttling.*`` on PVE 8's ``-drive`` and PVE 9's ``-object throttle-group``), and
    PVE's perl QMP client (``perl -MPVE::QemuServer::Monitor ...``) answering query-kvm and
    query-block.  The VM of a pid is the running one with that pid (NullBackend gives every VM
    this process's pid: the one started last).  Cooperates with other FakeHost subclasses
    (e.g. ``class N(FakePveNode, FakeZfsHost)``)."""

    def __init__(self, pve, *, kvm: bool = False, hostname: str | None = None, **kw) -> None:
        from tests.fakepve.nodeinfo import KERNEL

        kw.setdefault("kernel", KERNEL.get(pve.version, "6.8.12-11-pve"))
        super().__init__(kvm=kvm, **kw)
        self.name = f"host root@{hostname or pve.node}"
        self.pve = pve
        self.hostname = hostname or pve.node
        self.dirs |= {"/var/lib/vz", "/etc/pve"}

    # -- the node's programs ---------------------------------------------------------------

    def _cmd_hostname(self, argv, stdin):
        return self.hostname + "\n"

    def _cmd_pveversion(self, argv, stdin):
        from tests.fakepve.handlers import QEMU, VERSION

        version, repoid = VERSION[self.pve.version]
        qemu = QEMU[self.pve.version][0]
        zfs = {"8.4": "2.2.7-pve2", "9.1": "2.3.4-pve1"}.get(self.pve.version, "2.2.7-pve2")
        if "-v" not in argv:
            return f"pve-manager/{version}/{repoid} (running kernel: {self.kernel})\n"
        major = self.pve.version.split(".")[0]
        return (f"proxmox-ve: {self.pve.version}.0 (running kernel: {self.kernel})\n"
                f"pve-manager: {version} (running version: {version}/{repoid})\n"
                f"proxmox-kernel-{self.kernel}: {self.kernel.rsplit('-', 1)[0]}\n"
                f"qemu-server: {major}.{self.pve.version.split('.')[1]}.1\n"
                f"pve-qemu-kvm: {qemu}-1\n"
                f"zfsutils-linux: {zfs}\n")

    def _cmd_perl(self, argv, stdin):
        """PVE's QMP client: ``perl -MJSON -MPVE::QemuServer::Monitor=mon_cmd -e CODE VMID``."""
        from tests.fakepve import qemu as pve_qemu

        try:
            vmid = int(argv[-1])
        except ValueError:
            return 255, "", "Can't open perl script: No such file or directory"
        with self.pve.dispatcher.lock:
            vm = self.pve.state.vms.get(vmid)
            if vm is None or not vm.running:
                return 255, "", f"VM {vmid} not running\n"
            drives = self._drives(vm.run_config or vm.config)
            kvm = self._kvm(vm.run_config or vm.config)
        block = [{"device": "" if self.pve.version != "8.4" else f"drive-{key}", "qdev": f"{key}",
                  "locked": False, "removable": False, "type": "unknown",
                  "inserted": {"file": path, "node-name": f"drive-{key}", "drv": "throttle" if self.pve.version != "8.4" else fmt,
                               "ro": False, "cache": _cache_flags(opts.get("cache")),
                               "detect_zeroes": pve_qemu.detect_zeroes(opts)}}
                 for key, opts, path, fmt in drives]
        return json.dumps({"block": block, "kvm": {"enabled": kvm, "present": self.kvm}}, sort_keys=True)

    def read_file(self, path: str) -> bytes:
        import re

        m = re.fullmatch(r"/proc/(\d+)/cmdline", path)
        if m is None:
            return super().read_file(path)
        pid = int(m.group(1))
        with self.pve.dispatcher.lock:
            running = [vm for vm in self.pve.state.vms.values() if vm.running and vm.pid == pid]
            if not running:
                raise self._missing(path)
            vm = max(running, key=lambda v: v.started)
            argv = self.qemu_argv(vm)
        return b"".join(a.encode() + b"\0" for a in argv)

    # -- QEMU's command line ---------------------------------------------------------------

    def _kvm(self, config: dict) -> bool:
        return str(config.get("kvm", 1)) != "0" and self.kvm

    def _drives(self, config: dict) -> list[tuple[str, dict, str, str]]:
        """(key, parsed options, volume file, format) of every disk, in key order."""
        out = []
        for key, drive in self.pve.state.drives(config):
            if not self.pve.state.is_disk(drive):
                continue
            st, vol = self.pve.state.resolve(drive["file"])
            out.append((key, drive, self.pve.state.path_text(st, vol), str(drive.get("format") or vol.fmt)))
        return out

    def _leaf(self, drive: dict, path: str) -> dict:
        """The file node of a disk as qemu-server 9 asks pve-storage for it (qemu_blockdev_options):
        an rbd storage's image (tests.fakepve.rbd.blockdev), else the file or block device."""
        from tests.fakepve import rbd as pve_rbd

        st, vol = self.pve.state.resolve(drive["file"])
        if st is not None and st.type == "rbd":
            return pve_rbd.blockdev(st.id, st.config, vol.name)
        return {"driver": "host_device" if path.startswith("/dev/") else "file", "filename": path}

    def qemu_argv(self, vm) -> list[str]:
        """The QEMU command line qemu-server builds for ``vm`` (abridged to what matters)."""
        import urllib.parse

        from tests.fakepve import qemu as pve_qemu
        from tests.fakepve.handlers import QEMU

        config = dict(vm.run_config or vm.config)
        pve9 = self.pve.version != "8.4"
        machine = QEMU[self.pve.version][1]
        cores, sockets = int(config.get("cores", 1)), int(config.get("sockets", 1))
        memory = str(config.get("memory", "512")).split(",")[0].removeprefix("current=")
        argv = ["/usr/bin/kvm", "-id", str(vm.vmid), "-name", f"{config.get('name', vm.vmid)},debug-threads=on",
                "-no-shutdown", "-chardev", f"socket,id=qmp,path=/var/run/qemu-server/{vm.vmid}.qmp,server=on,wait=off",
                "-mon", "chardev=qmp,mode=control", "-pidfile", f"/var/run/qemu-server/{vm.vmid}.pid", "-daemonize",
                "-smp", f"{cores * sockets},sockets={sockets},cores={cores},maxcpus={cores * sockets}",
                "-nodefaults", "-vnc", f"unix:/var/run/qemu-server/{vm.vmid}.vnc,password=on", "-m", memory]
        cpu = str(config.get("cpu") or "kvm64")
        model, _, rest = cpu.partition(",")
        model = model.removeprefix("cputype=")
        flags = [f for part in rest.split(",") if part.startswith("flags=") for f in part[6:].split(";") if f]
        argv += ["-cpu", ",".join([model, *([] if model == "host" else ["enforce"]), "+kvm_pv_eoi", "+kvm_pv_unhalt", *flags])]
        iothreads, devices, blocks = [], [], []
        scsihw = str(config.get("scsihw") or "lsi")
        ahci = False
        for key, opts, path, fmt in self._drives(config):
            bus, index = key.rstrip("0123456789"), int(key[len(key.rstrip("0123456789")):])
            cache = str(opts.get("cache") or "none")
            aio = str(opts.get("aio") or "io_uring")  # qemu-server's default where io_uring works
            iothread = str(opts.get("iothread", "0")) == "1"
            serial = urllib.parse.unquote(str(opts.get("serial") or ""))
            zeroes, discard = pve_qemu.detect_zeroes(opts), pve_qemu.discard(opts)
            mode = Cache.parse(cache)
            write_cache, direct, no_flush = "on" if mode.writeback else "off", mode.direct, mode.no_flush
            if pve9:
                node: dict[str, Any] = {**self._leaf(opts, path), "node-name": "e" + secrets.token_hex(10)[:19],
                                        "cache": {"direct": direct, "no-flush": no_flush}, "aio": aio, "detect-zeroes": zeroes,
                                        "discard": discard, "read-only": False}
                if node["driver"] not in ("file", "host_device", "host_cdrom"):  # only these have aio (Blockdev.pm)
                    del node["aio"]
                node = {"driver": fmt, "node-name": "f" + secrets.token_hex(10)[:19],
                        "cache": {"direct": direct, "no-flush": no_flush}, "file": node, "detect-zeroes": zeroes,
                        "discard": discard, "read-only": False}
                blocks += ["-object", pve_qemu.throttle_group(key, opts)]
                blocks += ["-blockdev", json.dumps({"driver": "throttle", "node-name": f"drive-{key}",
                                                    "throttle-group": f"throttle-drive-{key}", "file": node,
                                                    "detect-zeroes": zeroes, "discard": discard, "read-only": False},
                                                   separators=(",", ":"))]
                devtail = f",write-cache={write_cache}"
            else:
                blocks += ["-drive", f"file={path},if=none,id=drive-{key},cache={cache},aio={aio}"
                                     + (f",discard={opts['discard']}" if opts.get("discard") else "")
                                     + f"{pve_qemu.drive_throttling(opts)},format={fmt},detect-zeroes={zeroes}"]
                devtail = ""
            serial_opt = f",serial={serial}" if serial else ""
            if bus == "virtio":
                it = ""
                if iothread:
                    iothreads += ["-object", f"iothread,id=iothread-{key}"]
                    it = f",iothread=iothread-{key}"
                devices += ["-device", f"virtio-blk-pci,drive=drive-{key},id={key},bus=pci.0,addr={hex(0xa + index)}"
                                       f"{it}{serial_opt}{devtail}"]
            elif bus == "scsi":
                if scsihw == "virtio-scsi-single":
                    ctrl = f"virtioscsi{index}"
                    it = ""
                    if iothread:
                        iothreads += ["-object", f"iothread,id=iothread-{ctrl}"]
                        it = f",iothread=iothread-{ctrl}"
                    devices += ["-device", f"virtio-scsi-pci,id={ctrl},bus=pci.3,addr={hex(0x1 + index)}{it}"]
                    devices += ["-device", f"scsi-hd,bus={ctrl}.0,channel=0,scsi-id=0,lun={index},drive=drive-{key},"
                                           f"id={key},device_id=drive-{key}{serial_opt}{devtail}"]
                else:
                    if "scsihw0" not in " ".join(devices):
                        driver = "virtio-scsi-pci" if scsihw == "virtio-scsi-pci" else scsihw
                        devices += ["-device", f"{driver},id=scsihw0,bus=pci.0,addr=0x5"]
                    devices += ["-device", f"scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun={index},drive=drive-{key},"
                                           f"id={key}{serial_opt}{devtail}"]
            elif bus == "sata":
                if not ahci:
                    devices += ["-device", "ahci,id=ahci0,multifunction=on,bus=pci.0,addr=0x7"]
                    ahci = True
                devices += ["-device", f"ide-hd,bus=ahci0.{index},drive=drive-{key},id={key}{serial_opt}{devtail}"]
            else:
                devices += ["-device", f"ide-hd,bus=ide.{index // 2},unit={index % 2},drive=drive-{key},id={key}{devtail}"]
        machine_opts = f"type={machine}" + ("" if self._kvm(config) else ",accel=tcg")
        if pve9:
            machine_opts = "hpet=off," + machine_opts
        argv += iothreads + ["-machine", machine_opts]
        if str(config.get("agent", "0")).split(",")[0] in ("1", "enabled=1"):
            argv += ["-chardev", f"socket,path=/var/run/qemu-server/{vm.vmid}.qga,server=on,wait=off,id=qga0",
                     "-device", "virtio-serial,id=qga0,bus=pci.0,addr=0x8",
                     "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0"]
        return argv + blocks + devices


def _cache_flags(cache: object) -> dict:
    """QMP's ``cache`` of a block node for a PVE cache mode (default none)."""
    mode = Cache.parse(cache or "none")
    return {"writeback": mode.writeback, "direct": mode.direct, "no-flush": mode.no_flush}
