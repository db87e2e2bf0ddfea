"""Stop signals during a run: they stop the run (which then cleans up); during cleanup
they only say that cleanup is under way."""

from __future__ import annotations

import contextlib
import signal
from typing import Iterator

from ..progress import Progress

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _on_stop_signals(handler) -> Iterator[None]:
    old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    try:
        yield
    finally:
        for s, previous in old.items():
            signal.signal(s, previous)


def signals_raise() -> contextlib.AbstractContextManager:
    """Ctrl-C, SIGTERM and SIGHUP stop the run.  Installed explicitly: a process started in
    the background inherits SIGINT ignored, and a run must still stop cleanly when asked."""

    def on_stop(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return _on_stop_signals(on_stop)


def signals_deferred(progress: Progress) -> contextlib.AbstractContextManager:
    def on_signal(signum: int, frame: object) -> None:
        progress.warn("cleaning up what this run created; please wait (vmbench cleanup can finish it later)")

    return _on_stop_signals(on_signal)
