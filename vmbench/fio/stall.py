"""Whether fio is still making progress, from its own status dumps read back while it runs.

fio runs with ``--status-interval`` (:data:`STATUS_INTERVAL_S`): every few seconds it appends
its whole status (the json+ of the run so far) to its output file, flushed, and at the end
the final one (:func:`vmbench.fio.result.last_json` reads that one).  While it runs, the output
file's tail is read back every :data:`STATUS_INTERVAL_S` seconds (on every side: this
machine, a host over SSH, a guest through its agent; the same code for each) and the bytes its
jobs moved are added up (:func:`moved`).  When they have not changed for
:data:`STALL_AFTER_S` seconds, fio is stalled: its I/O is blocked (a full pool, an OSD down, a
disk that stopped answering), and the run says so while it waits (:class:`StallWatch`).

The ramp's bytes reset when the measured part starts: a change all the same.  A fio that
writes no status at all (its status thread waits for a job stuck from the start, on a pool
already full) is stalled once its first status is overdue by the same time.  A run whose fio
waits on a gate before its I/O (:mod:`vmbench.fio.gate`) or lays out files first counts a
stall only once its first bytes moved.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..transport.base import Transport

#: fio's --status-interval, and how often the output is read back
STATUS_INTERVAL_S = 5
#: no progress for this long is a stall
STALL_AFTER_S = 10.0
#: the tail of the output file read back: enough for a json+ status dump of one job, and, when
#: that holds no whole dump, of a few jobs (its latency bins make most of a dump)
TAIL_BYTES = 64 << 10
LONG_TAIL_BYTES = 512 << 10

_DUMP = re.compile(r'\{\s*"fio version"')
_IO_BYTES = re.compile(r'"io_bytes"\s*:\s*(\d+)')


def moved(text: str) -> int | None:
    """The bytes fio's last complete status dump in ``text`` says its jobs moved (every job,
    every direction); None when ``text`` holds no complete dump.  A dump is complete when
    another starts after it or when it ends the text with its closing brace."""
    starts = [m.start() for m in _DUMP.finditer(text)]
    if not starts:
        return None
    ends = starts[1:] + [len(text)]
    for start, end in reversed(list(zip(starts, ends))):
        dump = text[start:end]
        if end != len(text) or dump.rstrip().endswith("}"):
            values = _IO_BYTES.findall(dump)
            return sum(int(v) for v in values) if values else None
    return None


class StallWatch:
    """:meth:`check` from fio's wait loop: reads the output (``read(n)``: its last n bytes) at
    most every ``every`` seconds; returns how long fio has made no progress once that is
    ``after`` seconds or more (None otherwise).  ``first_io``: a stall counts only after the
    first bytes moved (fio waits on a gate, or lays out files, first)."""

    def __init__(self, read: Callable[[int], bytes], *, every: float = STATUS_INTERVAL_S, after: float = STALL_AFTER_S,
                 first_io: bool = False, clock: Callable[[], float] = time.monotonic) -> None:
        self.read = read
        self.every = every
        self.after = after
        self.first_io = first_io
        self.clock = clock
        self.read_at = clock()
        self.last: int | None = None
        #: when the bytes last changed; at first, when fio's first status is due (a fio that
        #: stalls before it, e.g. on a pool already full, writes none: its status thread waits
        #: on the stuck job)
        self.since: float = self.read_at + every
        self.failing: float | None = None  # since when reading the output fails (the side does not answer)
        self.failure = ""

    def check(self) -> float | None:
        now = self.clock()
        if now - self.read_at >= self.every:
            self.read_at = now
            self._update(now)
        stalled = self.quiet()
        return stalled if stalled is not None and stalled >= self.after else None

    def quiet(self) -> float | None:
        """Seconds since fio's bytes last changed, as read so far (None: no status read yet)."""
        if self.first_io and not self.last:
            return None
        return max(0.0, self.clock() - self.since)

    def unanswered(self) -> str:
        """Why the output could not be read for a while ("" when it could): the side fio runs
        on does not answer (a host unreachable, a guest's agent stuck)."""
        if self.failing is None:
            return ""
        return f"fio's status not read for {self.clock() - self.failing:.0f}s: {self.failure}"

    def _update(self, now: float) -> None:
        try:
            data = self.read(TAIL_BYTES)
            total = moved(data.decode("utf-8", errors="replace"))
            if total is None and len(data) >= TAIL_BYTES:  # a dump longer than the tail
                total = moved(self.read(LONG_TAIL_BYTES).decode("utf-8", errors="replace"))
        except Exception as exc:  # the output is not there yet, or the side did not answer: no news
            if self.last is not None:  # it was there before
                self.failing = self.failing if self.failing is not None else now
                self.failure = " ".join(str(exc).split())[:160] or type(exc).__name__
            return
        self.failing = None
        if total is not None and total != self.last:
            self.last, self.since = total, now


def read_tail(transport: "Transport", path: str, size: int) -> bytes:
    """The last ``size`` bytes of a file on ``transport``'s side: only those where the side
    can seek (this machine, a guest's agent), else the whole file's end."""
    tail = getattr(transport, "read_tail", None)
    if callable(tail):
        return bytes(tail(path, size))
    return transport.read_file(path)[-size:]
