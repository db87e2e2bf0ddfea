"""fio job files read as fio reads them (fio's init.c ``__parse_jobs_ini``, parse.c, options.c).

- A line whose first non-blank character is ``;`` or ``#`` is a comment; on any other line
  everything from the first ``;`` or ``#`` on is a comment too (``filename=data ; or a disk``),
  and blanks at both ends go (parse.c ``strip_blank_end``).
- ``[name]`` starts a section; a section whose name begins with ``global`` is a global one: its
  options apply to the job sections after it.
- ``include FILE`` (inside a section) reads FILE's lines into that section; FILE may hold no
  section of its own.  A relative FILE is found next to the file that includes it.
- ``${NAME}`` in an option is replaced by the environment variable NAME (options.c
  ``fio_option_dup_subs``): vmbench takes the values from the scenario's ``env:`` and refuses a
  variable it has no value for (fio would silently read it as empty).  ``VMBENCH_TARGET`` and
  ``VMBENCH_SIZE`` are vmbench's own and are left for fio.
- An option is ``key=value`` or a bare ``key``; fio splits at the first ``=`` and drops blanks
  before it, but keeps those after it as part of the value (``size = 1m`` is one byte to fio):
  vmbench reads the value without them and writes ``key=value`` in its copy.
- Aliases name the same option (``timeout`` is ``runtime``, ``wait_for_previous`` is
  ``stonewall``...): :attr:`Option.name` is the canonical one.

Sizes and times are read as fio reads them: :func:`fio_size`, :func:`fio_seconds`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Mapping

from .engines import FILE_ENGINES, Reason

MAX_BYTES = 1 << 20
MAX_INCLUDE_DEPTH = 8
VMBENCH_VARIABLES = ("VMBENCH_TARGET", "VMBENCH_SIZE")  # fio gets them from vmbench (job.fio_env)
# options.c: .alias -> .name
ALIASES = {
    "readwrite": "rw", "iodepth_batch_submit": "iodepth_batch", "iodepth_batch_complete": "iodepth_batch_complete_min",
    "io_limit": "io_size", "fill_fs": "fill_device", "fileoffset": "offset", "blocksize": "bs", "blockalign": "ba",
    "blocksize_range": "bsrange", "blocksize_unaligned": "bs_unaligned", "allrandrepeat": "randrepeat",
    "nr_files": "nrfiles", "timeout": "runtime", "iomem": "mem", "mem_align": "iomem_align",
    "data_placement": "dataplacement", "fdp_pli_select": "plid_select", "fdp_pli": "plids", "ratemin": "rate_min",
    "ratecycle": "rate_cycle", "wait_for_previous": "stonewall", "log_max_value": "log_window_value",
    "disable_bw": "disable_bw_measurement", "ss": "steadystate", "ss_dur": "steadystate_duration",
    "ss_ramp": "steadystate_ramp_time", "ss_interval": "steadystate_check_interval",
}
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_\-]*")
_VAR_RE = re.compile(r"\$\{([^}]*)\}")


class JobFileError(ValueError):
    """A job file vmbench cannot run; never quotes the file's contents."""

    def __init__(self, path: str, line: int | None, message: str, hint: str | None = None,
                 reason: Reason | None = None) -> None:
        self.path, self.line, self.message, self.hint, self.reason = path, line, message, hint, reason
        super().__init__(f"{path}:{line}: {message}" if line else f"{path}: {message}")


@dataclass(frozen=True)
class Option:
    key: str  # as written
    value: str | None  # None for a bare flag (time_based, stonewall); without comment and outer blanks
    line: int  # 1-based, in ParsedJobFile.text
    spaced: bool = False  # written with blanks after '=' (which fio would keep in the value)

    @property
    def name(self) -> str:
        """The option's canonical name (aliases resolved)."""
        return ALIASES.get(self.key, self.key)

    def show(self) -> str:
        return self.key if self.value is None else f"{self.key}={self.value}"


@dataclass(frozen=True)
class Section:
    name: str
    line: int
    options: tuple[Option, ...]

    @property
    def is_global(self) -> bool:
        return self.name.startswith("global")  # as fio: strncmp(name, "global", 6)

    def get(self, key: str) -> Option | None:
        found = [o for o in self.options if o.name == ALIASES.get(key, key)]
        return found[-1] if found else None


@dataclass(frozen=True)
class Unset:
    """A ``${NAME}`` the scenario gives no value for."""

    name: str
    line: int  # in ParsedJobFile.text


@dataclass(frozen=True)
class ParsedJobFile:
    path: str
    text: str  # includes read in, ${NAME} replaced: what fio will read
    sections: tuple[Section, ...]
    origins: tuple[tuple[str, int], ...] = ()  # per line of text: the file and line it comes from
    unset: tuple[Unset, ...] = ()
    notes: tuple[str, ...] = ()  # what reading changed: includes read in, variables replaced

    def where(self, line: int) -> tuple[str, int]:
        """The file and line that ``line`` of :attr:`text` comes from."""
        if 0 < line <= len(self.origins):
            return self.origins[line - 1]
        return self.path, line

    def error(self, line: int | None, message: str, hint: str | None = None, reason: Reason | None = None) -> JobFileError:
        if line is None:
            return JobFileError(self.path, None, message, hint, reason)
        path, n = self.where(line)
        return JobFileError(path, n, message, hint, reason)

    def jobs(self) -> Iterator[tuple[Section, dict[str, Option]]]:
        """Each job section with its effective options by canonical name: the global sections
        before it, then its own."""
        inherited: dict[str, Option] = {}
        for sec in self.sections:
            own = {o.name: o for o in sec.options}
            if sec.is_global:
                inherited.update(own)
            else:
                yield sec, {**inherited, **own}


# ---- reading -----------------------------------------------------------------------------------


def decode(data: str | bytes, path: str) -> str:
    if len(data) > MAX_BYTES:
        raise JobFileError(path, None, f"is larger than {MAX_BYTES >> 10} KiB; it is {Reason.NOT_A_JOB_FILE.value}",
                           reason=Reason.NOT_A_JOB_FILE)
    if isinstance(data, bytes):
        if b"\0" in data:
            raise JobFileError(path, None, "is a binary file, not a fio job file (expected text with section headers)",
                               reason=Reason.NOT_A_JOB_FILE)
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise JobFileError(path, None, "is not a text file (it is not UTF-8); expected a fio job file",
                               reason=Reason.NOT_A_JOB_FILE) from None
    elif "\0" in data:
        raise JobFileError(path, None, "is a binary file, not a fio job file (expected text with section headers)",
                           reason=Reason.NOT_A_JOB_FILE)
    return data.lstrip("\ufeff")


def strip(raw: str) -> str:
    """A line as fio keeps it: '' for a blank or comment line, else without the comment that
    follows it and without blanks at either end."""
    s = raw.strip()
    if not s or s[0] in ";#":
        return ""
    for mark in ";#":
        s = s.split(mark, 1)[0]
    return s.rstrip()


def _include_name(s: str) -> str | None:
    """The file an ``include`` line names (init.c: any line starting with "include", the name
    one character after it)."""
    return s[len("include") + 1:].strip() if s.startswith("include") else None


def _read_in(text: str, path: str, stack: tuple[str, ...], nested: bool) -> list[tuple[str, str, int]]:
    """The lines of ``text`` with every include read in, each with the file and line it comes from."""
    out: list[tuple[str, str, int]] = []
    in_section = nested
    for n, raw in enumerate(text.splitlines(), 1):
        s = strip(raw)
        if s.startswith("["):
            if nested:
                raise JobFileError(path, n, "starts a section; fio allows no new sections in an included file",
                                   reason=Reason.NOT_A_JOB_FILE)
            in_section = True
        name = _include_name(s) if in_section else None
        if name is None:
            out.append((raw, path, n))
            continue
        if not name:
            raise JobFileError(path, n, "include names no file", reason=Reason.NOT_A_JOB_FILE)
        target = Path(name) if Path(name).is_absolute() else Path(path).parent / name
        if str(target) in stack or len(stack) > MAX_INCLUDE_DEPTH:
            raise JobFileError(path, n, f"includes {target}, which includes this file again (or nests more than "
                               f"{MAX_INCLUDE_DEPTH} deep)", reason=Reason.NOT_A_JOB_FILE)
        try:
            data = target.read_bytes()
        except OSError as exc:
            raise JobFileError(path, n, f"includes {target}, which cannot be read: {exc.strerror}",
                               "an included file is found next to the file that includes it",
                               reason=Reason.NOT_A_JOB_FILE) from None
        out.append((f"; include {name}: read in by vmbench, its lines follow", path, n))
        out += _read_in(decode(data, str(target)), str(target), stack + (str(target),), True)
    return out


def _expand(raw: str, env: Mapping[str, str]) -> tuple[str, list[str], list[str]]:
    """``${NAME}`` replaced in the option part of a line (as fio: after its comment is cut off);
    the names replaced and the names with no value."""
    s = raw.strip()
    if not s or s[0] in ";#" or s.startswith("["):
        return raw, [], []
    cut = min([i for i in (raw.find(";"), raw.find("#")) if i >= 0], default=len(raw))
    head, tail = raw[:cut], raw[cut:]
    done: list[str] = []
    unset: list[str] = []

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name in env:
            done.append(name)
            return env[name]
        if name not in VMBENCH_VARIABLES:
            unset.append(name)
        return m.group(0)

    return _VAR_RE.sub(sub, head) + tail, done, unset


def parse(data: str | bytes, path: str, *, env: Mapping[str, str] | None = None) -> ParsedJobFile:
    """The job file at ``path`` read as fio reads it.  With ``env`` (the scenario's values),
    ``include`` lines are read in (relative to ``path``'s directory) and ``${NAME}`` replaced;
    without, the text is taken as already read (vmbench's own copy)."""
    text = decode(data, path)
    if env is None:
        lines = [(raw, path, n) for n, raw in enumerate(text.splitlines(), 1)]
    else:
        lines = _read_in(text, path, (str(Path(path)),), False)
    notes: list[str] = []
    unset: list[Unset] = []
    sections: list[Section] = []
    name: str | None = None
    start = 0
    opts: list[Option] = []
    out_lines: list[str] = []
    for n, (raw, origin, origin_line) in enumerate(lines, 1):
        if env is not None:
            expanded, done, missing = _expand(raw, env)
            if done:
                notes.append(f"{Path(origin).name}:{origin_line}: {strip(raw)} -> {strip(expanded)} "
                             f"(env: {', '.join(dict.fromkeys(done))})")
            unset += [Unset(v, n) for v in dict.fromkeys(missing)]
            raw = expanded
        out_lines.append(raw)
        s = strip(raw)
        if not s:
            continue
        if s.startswith("["):
            if not (s.endswith("]") and s[1:-1].strip() and "]" not in s[1:-1] and "[" not in s[1:-1]):
                raise JobFileError(origin, origin_line, "expected a section header: a name in square brackets, alone on the line",
                          reason=Reason.NOT_A_JOB_FILE)
            if name is not None:
                sections.append(Section(name, start, tuple(opts)))
            name, start, opts = s[1:-1].strip(), n, []
            continue
        if name is None:
            raise JobFileError(origin, origin_line, "expected a section header first (global or a job's name, in square brackets); "
                      f"this is {Reason.NOT_A_JOB_FILE.value}", reason=Reason.NOT_A_JOB_FILE)
        if _include_name(s) is not None:
            raise JobFileError(origin, origin_line, "includes another file, which vmbench reads only when it loads the job file",
                      reason=Reason.NOT_A_JOB_FILE)
        key, sep, value = s.partition("=")
        key = key.rstrip()
        if not _KEY_RE.fullmatch(key):
            raise JobFileError(origin, origin_line, "expected key=value, a bare option, a section header or a comment",
                      reason=Reason.NOT_A_JOB_FILE)
        opts.append(Option(key, value.strip() if sep else None, n, spaced=bool(sep) and value[:1].isspace()))
    if name is None:
        raise JobFileError(path, None, "has no section header; expected a fio job file (a global section and job sections, "
                           "each headed by its name in square brackets)", reason=Reason.NOT_A_JOB_FILE)
    sections.append(Section(name, start, tuple(opts)))
    if all(sec.is_global for sec in sections):
        raise JobFileError(path, None, "has only global sections; expected at least one job section",
                           reason=Reason.NOT_A_JOB_FILE)
    included = sorted({o for _, o, _ in lines if o != path})
    notes = [f"include {Path(o).name}: read in" for o in included] + notes
    return ParsedJobFile(path, "\n".join(out_lines) + "\n", tuple(sections), tuple((o, ln) for _, o, ln in lines),
                         tuple(unset), tuple(notes))


def file_job_option(parsed: ParsedJobFile) -> tuple[str, int, str] | None:
    """The first option that makes the file a file job (a file engine, or nrfiles above 1):
    its file, line and text; None when no job of the file works on files in a directory."""
    for _sec, eff in parsed.jobs():
        engine = eff.get("ioengine")
        nrfiles = eff.get("nrfiles")
        count = fio_size(nrfiles.value if nrfiles is not None else None, 1000)
        for o, hit in ((engine, engine is not None and (engine.value or "") in FILE_ENGINES),
                       (nrfiles, count is not None and count[0] > 1)):
            if hit and o is not None:
                path, line = parsed.where(o.line)
                return path, line, o.show()
    return None


def is_file_job(parsed: ParsedJobFile) -> bool:
    """Whether a job of the file works on files in a directory: a file engine (filecreate,
    filestat...) or several files (nrfiles above 1; then openfiles, filename_format,
    file_service_type, create_on_open and unlink work on them).  Such a file runs in a
    filesystem layer's mount; with one file, filename_format and directory name the one target."""
    return file_job_option(parsed) is not None


# ---- values as fio reads them (parse.c str_to_decimal, get_mult_bytes, get_mult_time) ----------


def _number(s: str) -> tuple[int, str] | None:
    """strtoll: the leading integer (base 16 when the text holds 0x) and what follows it."""
    m = re.match(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|\d+)", s) if ("0x" in s or "0X" in s) else re.match(r"\s*([+-]?)(\d+)", s)
    if not m:
        return None
    digits = m.group(2)
    n = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
    return (-n if m.group(1) == "-" else n), s[m.end():]


def _leading_number(value: str | None) -> tuple[int, str] | None:
    """The number a fio value starts with and the rest, or None where fio would not read a
    plain number (no value, arithmetic in parentheses, variables)."""
    if value is None or value.startswith("("):
        return None
    return _number(value)


def fio_size(value: str | None, kb_base: int = 1024) -> tuple[int, bool] | None:
    """Bytes (and whether it is a percentage of the target) as fio reads a size: ``4k`` and
    ``4kb`` are 4096 and ``4KiB`` 4000 with fio's default kb_base=1024 (the other way round
    with kb_base=1000), ``0x1000`` is hex, ``10%`` a share; None when fio would not read a
    number (arithmetic in parentheses, variables)."""
    got = _leading_number(value)
    if got is None or value is None:
        return None
    n, rest = got
    if "0x" in value.lower():
        return n, False
    rest = rest.lower()
    for sep in ":-,/":
        rest = rest.split(sep, 1)[0]
    if rest.startswith("%"):
        return n, True
    if rest and not rest[0].isalpha():
        return n, False
    iec = {"kib": 1, "mib": 2, "gib": 3, "tib": 4, "pib": 5}
    si = {"k": 1, "m": 2, "g": 3, "t": 4, "p": 5}
    for unit, power in iec.items():
        if rest.startswith(unit):
            return n * (1000 if kb_base == 1024 else 1024) ** power, False
    if rest[:1] in si:
        return n * kb_base ** si[rest[:1]], False
    return n, False


def fio_seconds(value: str | None, default_unit: float = 1.0) -> float | None:
    """Seconds as fio reads a time: a bare number is in ``default_unit`` seconds (1 for runtime
    and ramp_time); suffixes us, ms, s, m (minutes), h, d."""
    got = _leading_number(value)
    if got is None:
        return None
    n, rest = got
    rest = rest.lower()
    if not rest[:1].isalpha():
        return n * default_unit
    units = {"us": 1e-6, "usec": 1e-6, "ms": 1e-3, "msec": 1e-3}
    for unit, mult in units.items():
        if rest.startswith(unit):
            return n * mult
    return n * {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}.get(rest, 1e-6)


def fio_true(o: Option | None) -> bool:
    """A boolean option as fio reads it: set when bare, else when its number is not 0."""
    if o is None:
        return False
    if o.value is None or not o.value:
        return True
    got = _number(o.value)
    return got[0] != 0 if got is not None else o.value.strip().lower() not in ("false", "off", "no", "none")
