"""fio job files as users write them: read as fio reads them, checked, scaled, rewritten per target.

Reading (comments, ``include``, ``${NAME}``, aliases, value forms) is :mod:`vmbench.fio.jobparse`;
why an engine or option is refused is :mod:`vmbench.fio.engines`.  A user's job file runs
unchanged in shape; vmbench writes a rewritten copy for each target:

- a *file job* (:func:`is_file_job`: a file engine, or several files: nrfiles above 1) runs in a directory on the filesystem layer's mount:
  the first ``filename``/``directory``/``opendir`` option of a section becomes
  ``directory=<dir>``, the others are dropped, a job section that inherits none gets it added,
  and ``filename_format`` names the files in it;
- every other section points at the layer's target: the first ``filename``/``directory``/
  ``filename_format``/``opendir`` option of a section becomes ``filename=<target>``, the others
  are dropped, and a job section that inherits no target gets ``filename=<target>`` added.
  Sections that named different files (``/dev/null`` in one, a device in the next) all get the
  target, as one filename does.  One file (or device) for every job: ``numjobs`` clones share
  it, as fio does with filename=.
- log options (``write_{bw,lat,iops,hist}_log``) keep their kind but write to
  ``<workdir>/log-<token>-<name>``;
- a job section with no log option of its own (nor from a [global] before it) gets vmbench's
  time series: ``write_iops_log`` and ``write_lat_log`` to ``<workdir>/log-<token>``,
  ``log_unix_epoch=1`` (so stonewalled jobs line up in time) and ``log_avg_msec=1000`` unless
  the file sets log_avg_msec;
- an option written ``key = value`` becomes ``key=value`` (fio would keep the blank in the value);
- a verifying job gets ``verify_state_save=0`` (fio would leave a state file in its working directory).

Errors name the path, the line and what was expected, and never quote the file.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..units import format_size
from .engines import DISK_ENGINES, REFUSED, Reason, engine_refusal, option_refusal
from .job import LOG_AVG_MSEC
from .jobparse import (MAX_BYTES, JobFileError, Option, ParsedJobFile, Section, fio_seconds, fio_size, fio_true,
                       is_file_job, parse)

if TYPE_CHECKING:
    from .job import FioJob

__all__ = ["MAX_BYTES", "JOBFILE_IOENGINES", "REFUSED", "JobFileError", "Option", "ParsedJobFile", "Reason", "Section",
           "check", "describe_rewrites", "digest", "effective_size", "furthest_offset", "is_direct", "parse", "reaches",
           "is_file_job", "rewrite", "scale", "timing"]

JOBFILE_IOENGINES = DISK_ENGINES
TARGET_KEYS = ("filename", "directory", "filename_format", "opendir")
FILE_TARGET_KEYS = ("filename", "directory", "opendir")  # a file job's: filename_format names files in its directory
LOG_KEYS = ("write_bw_log", "write_lat_log", "write_iops_log", "write_hist_log")
SCALED = {"size": ("size", "filesize"), "runtime": ("runtime",)}  # scenario key -> the options it sets
_UNESCAPED_COLON = re.compile(r"(?<!\\):")
_SAFETY = (Reason.COMMAND, Reason.LOADS_CODE, Reason.HOST, Reason.IO_LOG, Reason.UNSAFE)


# ---- checking ----------------------------------------------------------------------------------


def check(parsed: ParsedJobFile) -> None:
    """Refuse what cannot be made safe or meaningful, each for its real reason: first an engine
    that is not a disk engine (what the file is for), then options (commands, code, host
    changes, I/O logs, special hardware, values that differ between host and guest, deleting
    the target), then variables the scenario gives no value for."""
    unset_lines = {u.line for u in parsed.unset}
    files = is_file_job(parsed)
    options = [o for sec in parsed.sections for o in sec.options if o.line not in unset_lines]
    for o in options:
        if o.name == "ioengine":
            found = engine_refusal(o.value or "")
            if found:
                reason, why = found
                what = f"ioengine {why}" if reason is Reason.LOADS_CODE else f"ioengine {o.value} {why}"
                raise parsed.error(o.line, what, f"vmbench measures the VM's disk: use one of {', '.join(DISK_ENGINES)}",
                                   reason)
    for o in options:
        found = option_refusal(o.name, o.value)
        if found:
            reason, why = found
            safety = "; vmbench cannot make that safe" if reason in _SAFETY else ""
            hint = ("write the number, or a ${NAME} with its value in the scenario's jobs entry (env:)"
                    if reason is Reason.MACHINE and "$" in (o.value or "") else "remove the option from the job file")
            raise parsed.error(o.line, f"sets {o.key}, which {why}{safety}", hint, reason)
        if o.name in ("unlink", "unlink_each_loop") and fio_true(o) and not files:
            raise parsed.error(o.line, f"sets {o.key}, which {Reason.DELETES.value} (on the host: the scratch disk's file)",
                               f"remove {o.key} from the job file", Reason.DELETES)
        if o.name == "filename" and o.value and _UNESCAPED_COLON.search(o.value):
            raise parsed.error(o.line, f"filename {Reason.SEVERAL_FILES.value} (separated by ':'); vmbench gives every job "
                               "one target", "name one device or file", Reason.SEVERAL_FILES)
    for u in parsed.unset:
        raise parsed.error(u.line, f"${{{u.name}}} {Reason.UNSET_VARIABLE.value}: fio would read it as empty",
                           f"give it a value in the scenario's jobs entry: env: {{{u.name}: ...}}", Reason.UNSET_VARIABLE)


# ---- how far, how long, how -------------------------------------------------------------------


def _kb_base(eff: dict[str, Option]) -> int:
    o = eff.get("kb_base")
    return 1000 if o is not None and (o.value or "").strip() == "1000" else 1024


def _parts(o: Option | None) -> list[str]:
    """The values of a range or list option (fio splits at ',', ':' and '-' not in front)."""
    return [p for p in re.split(r"(?<=.)[-:,]", o.value) if p] if o is not None and o.value else []


def _bytes(o: Option | None, kb: int, *, last: bool = False) -> int | None:
    """An absolute size (None: unset, a percentage or unreadable); of a range, the first value
    (or the last with ``last``: the largest of a filesize range)."""
    parts = _parts(o)
    got = fio_size(parts[-1] if last else parts[0], kb) if parts else None
    return None if got is None or got[1] else got[0]


@dataclass(frozen=True)
class Reach:
    """How far one job section goes into its target (lines are lines of the parsed text)."""

    start: int  # where its furthest clone starts: offset + (numjobs-1) x offset_increment
    start_line: int | None
    end: int | None  # start + the bytes it touches; None: up to the end of the target (or unknown)
    end_line: int | None


def reaches(parsed: ParsedJobFile) -> list[Reach]:
    out = []
    for _sec, eff in parsed.jobs():
        kb = _kb_base(eff)
        filesize = _bytes(eff.get("filesize"), kb, last=True)
        size_o = eff.get("filesize") if filesize is not None else eff.get("size")
        region = filesize if filesize is not None else _bytes(size_o, kb)
        if fio_true(eff.get("fill_device")):
            region = None
        offset, inc = _bytes(eff.get("offset"), kb) or 0, _bytes(eff.get("offset_increment"), kb) or 0
        numjobs = _bytes(eff.get("numjobs"), 1000) or 1
        start = offset + max(numjobs - 1, 0) * inc
        start_o = eff.get("offset_increment") if inc and numjobs > 1 else eff.get("offset")
        out.append(Reach(start, start_o.line if start_o is not None and start else None,
                         None if region is None else start + region,
                         size_o.line if size_o is not None and region is not None else None))
    return out


def effective_size(parsed: ParsedJobFile) -> tuple[int | None, int | None]:
    """The bytes the job touches on its target and the line (of the text) that sets them: the
    largest ``size`` (or ``filesize``) + offset of the last clone (``offset``,
    ``offset_increment``) over job sections.  Every section shares the one target, so numjobs
    do not multiply the size.  Sizes in percent (of the target) always fit and are skipped."""
    ends = [(r.end, r.end_line) for r in reaches(parsed) if r.end is not None]
    return max(ends, key=lambda e: e[0] or 0) if ends else (None, None)


def furthest_offset(parsed: ParsedJobFile) -> tuple[int, int | None]:
    """Where the furthest job (clone) starts on its target, and the line (of the text) that puts it there."""
    starts = [(r.start, r.start_line) for r in reaches(parsed)]
    return max(starts, key=lambda s: s[0]) if starts else (0, None)


def timing(parsed: ParsedJobFile) -> tuple[float | None, float]:
    """Seconds of runtime (with startdelay) and of ramp, for estimates: the longest job of each
    group (a new one at each stonewall or wait_for), summed over the groups; runtime is None
    when a job sets none."""
    groups: list[list[tuple[float | None, float]]] = []
    for _sec, eff in parsed.jobs():
        if not groups or fio_true(eff.get("stonewall")) or "wait_for" in eff:
            groups.append([])
        run = _secs_of(eff.get("runtime"))
        delay = _secs_of(eff.get("startdelay"), last=True) or 0.0
        groups[-1].append((None if run is None else run + delay, _secs_of(eff.get("ramp_time")) or 0.0))
    ramp = sum(max(r for _, r in g) for g in groups)
    runtimes = [[t for t, _ in g] for g in groups]
    if any(t is None for g in runtimes for t in g):
        return None, ramp
    return float(sum(max(t for t in g if t is not None) for g in runtimes)), ramp


def is_direct(parsed: ParsedJobFile) -> bool:
    """Whether every job does direct I/O (otherwise the page cache is dropped before each run)."""
    for _sec, eff in parsed.jobs():
        if "direct" in eff:
            direct = fio_true(eff["direct"])
        else:
            direct = "buffered" in eff and not fio_true(eff["buffered"])
        if not direct:
            return False
    return True


def _secs_of(o: Option | None, *, last: bool = False) -> float | None:
    parts = _parts(o)
    return fio_seconds(parts[-1] if last else parts[0]) if parts else None


# ---- scaling and rewriting ---------------------------------------------------------------------


def scale(text: str, path: str, *, size: int | None = None, runtime: float | None = None) -> tuple[str, list[str]]:
    """Apply the scenario's ``size:``/``runtime:`` to every section that sets the option
    (``size`` also sets ``filesize``; ``timeout`` is ``runtime``), and to the first [global]
    when a job section gets none (a new [global] at the top when the file's first section is a
    job)."""
    parsed = parse(text, path)
    edits = _Edits(parsed)
    lines: list[str] = []
    for key, value in (("size", format_size(size) if size else None), ("runtime", _fio_secs(runtime) if runtime else None)):
        if value is None:
            continue
        found = [(sec, o) for sec in parsed.sections for o in sec.options if o.name in SCALED[key]]
        for sec, o in found:
            edits.replace(o.line, f"{o.name}={value}")
            lines.append(f"[{sec.name}] {o.show()} -> {o.name}={value} (scenario {key}:)")
        if any(not any(k in eff for k in SCALED[key]) for _sec, eff in parsed.jobs()):
            edits.to_global(f"{key}={value}")
            lines.append(f"[global] {key}={value} (added: scenario {key}:)")
    return edits.render(), lines


def rewrite(text: str, target: str, workdir: str, token: str) -> tuple[str, list[str]]:
    """The job file pointed at ``target`` with its logs in ``workdir``; and one line per change."""
    parsed = parse(text, "job file")
    edits = _Edits(parsed)
    done: list[str] = []
    fio_target = target.replace(":", "\\:")
    files = is_file_job(parsed)
    keys, key = (FILE_TARGET_KEYS, "directory") if files else (TARGET_KEYS, "filename")
    ours = f"{workdir}/log-{token}"
    g_target = g_logs = g_avg = False
    effective = {sec.line: eff for sec, eff in parsed.jobs()}
    for sec in parsed.sections:
        own_target = False
        for o in sec.options:
            if o.name in keys:
                if own_target:
                    edits.replace(o.line, None)
                    done.append(f"[{sec.name}] {o.show()} removed")
                    continue
                own_target = True
                edits.replace(o.line, f"{key}={fio_target}")
                done.append(f"[{sec.name}] {o.show()} -> " + (target if o.name == key else f"{key}={target}"))
            elif o.name in LOG_KEYS:
                new = f"{ours}-{_log_name(o.value, sec.name)}"
                edits.replace(o.line, f"{o.key}={new}")
                done.append(f"[{sec.name}] {o.show()} -> {new}")
            elif o.spaced:
                edits.replace(o.line, o.show())
                done.append(f"[{sec.name}] {o.key} = {o.value} -> {o.show()} (fio would keep the blank after '=' in the value)")
        own_logs = any(o.name in LOG_KEYS for o in sec.options)
        own_avg = sec.get("log_avg_msec") is not None
        if sec.is_global:
            g_target, g_logs, g_avg = g_target or own_target, g_logs or own_logs, g_avg or own_avg
            continue
        added = []
        if not own_target and not g_target:
            added.append(f"{key}={fio_target}")
            done.append(f"[{sec.name}] {key}={target} (added: the section names no target)")
        if not own_logs and not g_logs:
            logs = [f"write_iops_log={ours}", f"write_lat_log={ours}", "log_unix_epoch=1"]
            logs += [] if own_avg or g_avg else [f"log_avg_msec={LOG_AVG_MSEC}"]
            added += logs
            done.append(f"[{sec.name}] + {' '.join(logs)} (vmbench's time series)")
        eff = effective[sec.line]
        verify = eff.get("verify")
        if verify is not None and (verify.value or "").strip() not in ("", "0", "none") and "verify_state_save" not in eff:
            added.append("verify_state_save=0")
            done.append(f"[{sec.name}] + verify_state_save=0 (fio would leave a verify state file where it runs)")
        edits.insert_after(sec.line, added)
    return edits.render(), done


def digest(text: str) -> str:
    """The rewritten job with target, work directory and token as placeholders: equal on the
    host and in the guest exactly when both run the same job (it names the job-file copy)."""
    return hashlib.sha256(rewrite(text, "@TARGET@", "@WORKDIR@", "@TOKEN@")[0].encode()).hexdigest()[:16]


PLACEHOLDERS = {"block": "<device>", "file": "<file on the layer's filesystem>", "dir": "<directory on the layer's filesystem>"}


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
