"""Test doubles: a fake guest agent, a scripted transport."""

from __future__ import annotations

import base64
from typing import Callable, Mapping, Sequence

from vmbench.command import Completed
from vmbench.errors import CommandError


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

    def read_file(self, path: str) -> bytes:
        return self.files[path]

    def write_file(self, path: str, data: bytes, mode=0o600) -> None:
        self.files[path] = data
