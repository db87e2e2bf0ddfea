"""Many threads on one transport at once: what a many-VM run does to a host or a guest.

``hammer(transport, workdir)`` starts ``threads`` threads that each, ``rounds`` times, write a
file of their own (sizes from a few bytes to a few hundred KiB, so reads are prefetched in
several requests), read it back, ``stat`` it with a command and remove it.  It returns the
errors the threads raised; a thread still running at the deadline is a hang, reported with
every thread's stack (the transport is closed first, so the hung calls end).
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from typing import Callable

SIZES = (5, 4096, 65_536, 300_000)


def _work(transport, workdir: str, index: int, rounds: int, errors: list[str]) -> None:
    try:
        for n in range(rounds):
            path = f"{workdir}/t{index}-{n}"
            data = bytes([index]) * SIZES[(index + n) % len(SIZES)]
            transport.write_file(path, data)
            back = transport.read_file(path)
            if back != data:
                raise AssertionError(f"{path}: read back {len(back)} bytes, wrote {len(data)}")
            size = transport.run(["stat", "-c", "%s", path], timeout=120).stdout.strip()
            if size != str(len(data)):
                raise AssertionError(f"{path}: stat says {size} bytes, wrote {len(data)}")
            transport.run(["rm", "-f", path], timeout=120)
    except BaseException as exc:  # noqa: BLE001 - every error is reported to the test
        errors.append(f"thread {index}: {type(exc).__name__}: {exc}")


def _stacks(threads: list[threading.Thread]) -> str:
    frames = sys._current_frames()
    return "\n".join(f"--- {t.name}\n" + "".join(traceback.format_stack(frames[t.ident])) for t in threads if t.ident in frames)


def hammer(transport, workdir: str, *, threads: int = 16, rounds: int = 10, deadline_s: float = 240.0,
           close: Callable[[], None] | None = None) -> list[str]:
    errors: list[str] = []
    workers = [threading.Thread(target=_work, args=(transport, workdir, i, rounds, errors), name=f"stress-{i}", daemon=True)
               for i in range(threads)]
    for t in workers:
        t.start()
    end = time.monotonic() + deadline_s
    for t in workers:
        t.join(max(0.0, end - time.monotonic()))
    hung = [t for t in workers if t.is_alive()]
    if hung:
        stacks = _stacks(hung)
        if close is not None:
            close()
        return [f"{len(hung)} of {threads} threads still running after {deadline_s:g}s (a hang):\n{stacks}"]
    return errors
