"""A small file per run listing what it created, so a hard-killed run can be cleaned up
and a live run is never cleaned up under its feet."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Ledger:
    path: Path
    tag: str

    @classmethod
    def create(cls, runs_dir: Path, tag: str, **info: object) -> "Ledger":
        runs_dir.mkdir(parents=True, exist_ok=True)
        ledger = cls(runs_dir / f"{tag}.json", tag)
        ledger._write({"tag": tag, "pid": os.getpid(), "pid_start": process_start(os.getpid()),
                       "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "resources": [], **info})
        return ledger

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return {"tag": self.tag, "resources": []}

    def _write(self, data: dict) -> None:
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.path)

    def add(self, kind: str, name: str) -> None:
        data = self._read()
        data["resources"].append({"kind": kind, "name": name})
        self._write(data)

    def remove(self) -> None:
        try:
            self.path.unlink()
        except OSError:
            pass


def _live_ledgers(runs_dir: Path) -> list[dict]:
    """The ledgers whose vmbench process (not this one) is still alive."""
    out = []
    for f in runs_dir.glob("*.json") if runs_dir.is_dir() else []:
        try:
            data = json.loads(f.read_text())
            pid = int(data["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(pid, data.get("pid_start")) and pid != os.getpid():
            out.append({**data, "tag": data.get("tag", f.stem), "pid": pid})
    return out


def live_runs(runs_dir: Path) -> dict[str, int]:
    """Run tags whose vmbench process is still alive -> pid."""
    return {d["tag"]: d["pid"] for d in _live_ledgers(runs_dir)}


def process_start(pid: int) -> int | None:
    """When the process started (clock ticks since boot, /proc/PID/stat's 22nd field): with
    its pid, what tells it from a later process given the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _alive(pid: int, started: object = None) -> bool:
    """Whether the run's process lives: the same pid started at the same tick (a program that
    runs vmbench as a library is alive too); a ledger written before that was recorded, a
    process whose command line names vmbench."""
    if isinstance(started, int):
        return process_start(pid) == started
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"vmbench" in cmdline
