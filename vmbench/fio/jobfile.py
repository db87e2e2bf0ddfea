"""fio job files as users write them: parsed with line numbers, checked, scaled, rewritten per target.

A user's job file runs unchanged in shape; vmbench writes a rewritten copy for each target:

- every section points at the layer's target: the first ``filename``/``directory``/
  ``filename_format``/``opendir`` option of a section becomes ``filename=<target>``, the others
  are dropped, and a job section that inherits no target gets ``filename=<target>`` added.
  One file (or device) for every job: ``numjobs`` clones share it, as fio does with filename=.
- log options (``write_{bw,lat,iops,hist}_log``) keep their kind but write to
  ``<workdir>/log-<token>-<name>``;
- a job section with no log option of its own (nor from a [global] before it) gets vmbench's
  time series: ``write_iops_log`` and ``write_lat_log`` to ``<workdir>/log-<token>``,
  ``log_unix_epoch=1`` (so stonewalled jobs line up in time) and ``log_avg_msec=1000`` unless
  the file sets log_avg_msec.

:func:`parse` never quotes the file: errors name the path, the line and what was expected.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterator

from ..units import format_size, parse_duration, parse_size
from .job import LOG_AVG_MSEC

if TYPE_CHECKING:
    from .job import FioJob

MAX_BYTES = 1 << 20
JOBFILE_IOENGINES = ("libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "posixaio", "mmap")
TARGET_KEYS = ("filename", "directory", "filename_format", "opendir")
LOG_KEYS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
# option -> why vmbench refuses it (a prefix ending in * covers a family)
REFUSED = {
    "exec_prerun": "runs a command",
    "exec_postrun": "runs a command",
    "ioengine_lib": "loads code from a file",
    "cgroup*": "puts fio into a control group of the host",
    "trigger*": "runs or waits for outside commands",
    "replay_*": "replays a recorded I/O log, possibly onto other devices",
    "read_iolog": "replays a recorded I/O log from a file",
    "write_iolog": "writes an I/O log to a path vmbench does not manage",
    "iolog*": "reads or writes an I/O log file",
    "merge_blktrace*": "reads blktrace files",
    "create_only": "only lays out files and measures nothing",
    "lockfile": "locks files vmbench does not manage",
    "ioscheduler": "changes the I/O scheduler of the device",
    "output": "is vmbench's to set",
    "output-format": "is vmbench's to set",
    "profile": "runs a built-in fio profile with its own devices",
}
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_UNESCAPED_COLON = re.compile(r"(?<!\\):")
_FALSE = ("0", "false", "off", "no")


class JobFileError(ValueError):
    """A job file vmbench cannot run; never quotes the file's contents."""

    def __init__(self, path: str, line: int | None, message: str, hint: str | None = None) -> None:
        self.path, self.line, self.message, self.hint = path, line, message, hint
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


@dataclass(frozen=True)
class Option:
    key: str
    value: str | None  # None for a bare flag (time_based, stonewall)
    line: int  # 1-based

    def show(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


@dataclass(frozen=True)
class Section:
    name: str
    line: int
    options: tuple[Option, ...]

    @property
    def is_global(self) -> bool:
        return self.name == "global"

    def get(self, key: str) -> Option | None:
        found = [o for o in self.options if o.key == key]
        return found[-1] if found else None


@dataclass(frozen=True)
class ParsedJobFile:
    path: str
    text: str
    sections: tuple[Section, ...]

    def jobs(self) -> Iterator[tuple[Section, dict[str, Option]]]:
        """Each job section with its effective options: the [global]s before it, then its own."""
        inherited: dict[str, Option] = {}
        for sec in self.sections:
            own = {o.key: o for o in sec.options}
            if sec.is_global:
                inherited.update(own)
            else:
                yield sec, {**inherited, **own}


# ---- parsing and checking ----------------------------------------------------------------------


def parse(data: str | bytes, path: str) -> ParsedJobFile:
    """fio's ini dialect: ``[section]``, ``key=value``, bare ``key``, ``;``/``#`` comment lines."""
    if len(data) > MAX_BYTES:
        raise JobFileError(path, None, f"is larger than {MAX_BYTES >> 10} KiB; it is not a fio job file")
    if isinstance(data, bytes):
        if b"\0" in data:
            raise JobFileError(path, None, "is a binary file, not a fio job file (expected text with section headers)")
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JobFileError(path, None, "is not a text file (it is not UTF-8); expected a fio job file") from None
    elif "\0" in data:
        raise JobFileError(path, None, "is a binary file, not a fio job file (expected text with section headers)")
    text = data.lstrip("\ufeff")
    sections: list[Section] = []
    name: str | None = None
    start = 0
    opts: list[Option] = []
    for n, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not s or s[0] in ";#":
            continue
        if s.startswith("["):
            if not (s.endswith("]") and s[1:-1].strip() and "]" not in s[1:-1] and "[" not in s[1:-1]):
                raise JobFileError(path, n, "expected a section header: a name in square brackets, alone on the line")
            if name is not None:
                sections.append(Section(name, start, tuple(opts)))
            name, start, opts = s[1:-1].strip(), n, []
            continue
        if re.match(r"include(\s|$)", s):
            raise JobFileError(path, n, "includes other files; vmbench runs one self-contained job file",
                               "copy the included options into this file")
        if name is None:
            raise JobFileError(path, n, "expected a section header first (global or a job's name, in square brackets); "
                               "this is not a fio job file")
        key, sep, value = s.partition("=")
        key = key.strip()
        if not _KEY_RE.fullmatch(key):
            raise JobFileError(path, n, "expected key=value, a bare option, a section header or a comment")
        opts.append(Option(key, value.strip() if sep else None, n))
    if name is None:
        raise JobFileError(path, None, "has no section header; expected a fio job file (a global section and job sections, each headed by its name in square brackets)")
    sections.append(Section(name, start, tuple(opts)))
    if all(sec.is_global for sec in sections):
        raise JobFileError(path, None, "has only global sections; expected at least one job section")
    return ParsedJobFile(path, text, tuple(sections))


def check(parsed: ParsedJobFile) -> None:
    """Refuse what cannot be made safe: commands, code, other devices, replays, host cgroups."""
    path = parsed.path
    first_target: Option | None = None
    for sec in parsed.sections:
        for o in sec.options:
            why = _refused(o.key)
            if why:
                raise JobFileError(path, o.line, f"sets {o.key}, which {why}; vmbench cannot make that safe",
                                   "remove the option from the job file")
            if o.key == "ioengine" and (o.value or "") not in JOBFILE_IOENGINES:
                raise JobFileError(path, o.line, "ioengine names an engine vmbench does not allow (external engines load code)",
                                   f"use one of: {', '.join(JOBFILE_IOENGINES)}")
            if o.key in ("unlink", "unlink_each_loop") and _true(o):
                raise JobFileError(path, o.line, f"sets {o.key}, which would delete the target (on the host: the scratch disk's file)",
                                   f"remove {o.key} from the job file")
            if o.key == "filename":
                if o.value and _UNESCAPED_COLON.search(o.value):
                    raise JobFileError(path, o.line, "filename lists several files (separated by ':'); vmbench gives every job one target",
                                       "name one device or file")
                if first_target is None:
                    first_target = o
                elif (o.value or "") != (first_target.value or ""):
                    raise JobFileError(path, o.line, f"filename names a second target (the first is on line {first_target.line}); "
                                       "vmbench runs the whole file on one target per layer", "use one filename for every section")


def _refused(key: str) -> str | None:
    for pattern, why in REFUSED.items():
        if key == pattern or (pattern.endswith("*") and key.startswith(pattern[:-1])):
            return why
    if "iolog" in key:
        return "reads or writes an I/O log file"
    return None


def effective_size(parsed: ParsedJobFile) -> tuple[int | None, int | None]:
    """The bytes the job touches on its target and the line that sets them: the largest
    ``size`` (+ ``offset``) over job sections.  Every section shares the one target, so
    numjobs do not multiply it.  Sizes in percent (of the target) always fit and are skipped."""
    best: tuple[int | None, int | None] = (None, None)
    for _sec, eff in parsed.jobs():
        size = _size_of(eff.get("size"))
        if size is None:
            continue
        size += _size_of(eff.get("offset")) or 0
        if best[0] is None or size > best[0]:
            best = (size, eff["size"].line)
    return best


def timing(parsed: ParsedJobFile) -> tuple[float | None, float]:
    """Seconds of runtime and of ramp, for estimates: the longest job of each stonewall group,
    summed over the groups; runtime is None when a job sets none."""
    groups: list[list[tuple[float | None, float]]] = []
    for _sec, eff in parsed.jobs():
        if not groups or "stonewall" in eff or "wait_for_previous" in eff:
            groups.append([])
        groups[-1].append((_secs_of(eff.get("runtime")), _secs_of(eff.get("ramp_time")) or 0.0))
    ramp = sum(max(r for _, r in g) for g in groups)
    runtimes = [[t for t, _ in g] for g in groups]
    if any(t is None for g in runtimes for t in g):
        return None, ramp
    return float(sum(max(t for t in g if t is not None) for g in runtimes)), ramp


def is_direct(parsed: ParsedJobFile) -> bool:
    """Whether every job does direct I/O (otherwise the page cache is dropped before each run)."""
    for _sec, eff in parsed.jobs():
        if "direct" in eff:
            direct = _true(eff["direct"])
        else:
            direct = "buffered" in eff and not _true(eff["buffered"])
        if not direct:
            return False
    return True


def _true(o: Option) -> bool:
    return o.value is None or o.value.strip().lower() not in _FALSE


def _size_of(o: Option | None) -> int | None:
    try:
        return parse_size(o.value) if o is not None and o.value else None
    except ValueError:
        return None


def _secs_of(o: Option | None) -> float | None:
    try:
        return parse_duration(o.value) if o is not None and o.value else None
    except ValueError:
        return None


# ---- scaling and rewriting ---------------------------------------------------------------------


def scale(text: str, path: str, *, size: int | None = None, runtime: float | None = None) -> tuple[str, list[str]]:
    """Apply the scenario's ``size:``/``runtime:`` to every section that sets the option, or to
    the first [global] when none does (a new [global] at the top when the file's first section
    is a job)."""
    parsed = parse(text, path)
    edits = _Edits(parsed)
    lines: list[str] = []
    for key, value in (("size", format_size(size) if size else None), ("runtime", _fio_secs(runtime) if runtime else None)):
        if value is None:
            continue
        found = [(sec, o) for sec in parsed.sections for o in sec.options if o.key == key]
        for sec, o in found:
            edits.replace(o.line, f"{key}={value}")
            lines.append(f"[{sec.name}] {o.show()} -> {key}={value} (scenario {key}:)")
        if not found:
            edits.to_global(f"{key}={value}")
            lines.append(f"[global] {key}={value} (added: scenario {key}:)")
    return edits.render(), lines


def rewrite(text: str, target: str, workdir: str, token: str) -> tuple[str, list[str]]:
    """The job file pointed at ``target`` with its logs in ``workdir``; and one line per change."""
    parsed = parse(text, "job file")
    edits = _Edits(parsed)
    done: list[str] = []
    fio_target = target.replace(":", "\\:")
    ours = f"{workdir}/log-{token}"
    g_target = g_logs = g_avg = False
    for sec in parsed.sections:
        own_target = False
        for o in sec.options:
            if o.key in TARGET_KEYS:
                if own_target:
                    edits.replace(o.line, None)
                    done.append(f"[{sec.name}] {o.show()} removed")
                    continue
                own_target = True
                edits.replace(o.line, f"filename={fio_target}")
                done.append(f"[{sec.name}] {o.show()} -> " + (target if o.key == "filename" else f"filename={target}"))
            elif o.key in LOG_KEYS:
                new = f"{ours}-{_log_name(o.value, sec.name)}"
                edits.replace(o.line, f"{o.key}={new}")
                done.append(f"[{sec.name}] {o.show()} -> {new}")
        own_logs = any(o.key in LOG_KEYS for o in sec.options)
        own_avg = sec.get("log_avg_msec") is not None
        if sec.is_global:
            g_target, g_logs, g_avg = g_target or own_target, g_logs or own_logs, g_avg or own_avg
            continue
        added = []
        if not own_target and not g_target:
            added.append(f"filename={fio_target}")
            done.append(f"[{sec.name}] filename={target} (added: the section names no target)")
        if not own_logs and not g_logs:
            logs = [f"write_iops_log={ours}", f"write_lat_log={ours}", "log_unix_epoch=1"]
            logs += [] if own_avg or g_avg else [f"log_avg_msec={LOG_AVG_MSEC}"]
            added += logs
            done.append(f"[{sec.name}] + {' '.join(logs)} (vmbench's time series)")
        edits.insert_after(sec.line, added)
    return edits.render(), done


def digest(text: str) -> str:
    """The rewritten job with target, work directory and token as placeholders: equal on the
    host and in the guest exactly when both run the same job (it names the job-file copy)."""
    return hashlib.sha256(rewrite(text, "@TARGET@", "@WORKDIR@", "@TOKEN@")[0].encode()).hexdigest()[:16]


PLACEHOLDERS = {"block": "<device>", "file": "<file on the layer's filesystem>"}


def describe_rewrites(job: "FioJob", target_kind: str) -> list[str]:
    """What vmbench changes in a job's file for a block or a file target (for ``vmbench plan``)."""
    if job.jobfile is None:
        return []
    _text, lines = rewrite(job.jobfile.text, PLACEHOLDERS[target_kind], "<workdir>", "<run>")
    return list(job.jobfile.overrides) + lines


def _log_name(value: str | None, section: str) -> str:
    base = (value or "").rstrip("/").rsplit("/", 1)[-1] or section
    return re.sub(r"[^A-Za-z0-9._-]", "_", base)


def _fio_secs(seconds: float) -> str:
    return f"{int(seconds)}" if float(seconds).is_integer() else f"{int(round(seconds * 1000))}ms"


class _Edits:
    """Line replacements and insertions on a parsed file, rendered in one pass."""

    def __init__(self, parsed: ParsedJobFile) -> None:
        self.parsed = parsed
        self.lines = parsed.text.splitlines()
        self.replaced: dict[int, str | None] = {}
        self.after: dict[int, list[str]] = {}
        self.top: list[str] = []

    def replace(self, line: int, new: str | None) -> None:
        self.replaced[line] = new

    def insert_after(self, line: int, new: list[str]) -> None:
        self.after.setdefault(line, []).extend(new)

    def to_global(self, new: str) -> None:
        first = self.parsed.sections[0]
        if first.is_global:
            self.insert_after(first.line, [new])
        else:
            self.top = (self.top or ["[global]"]) + [new]

    def render(self) -> str:
        out = list(self.top)
        for n, line in enumerate(self.lines, 1):
            new = self.replaced.get(n, line)
            if new is not None:
                out.append(new)
            out.extend(self.after.get(n, []))
        return "\n".join(out) + "\n"
