"""Progress events from long steps (image build, boot, fio runtime).

The library reports through a :class:`Progress` object it is handed; only the CLI
decides how to show it.  ``NullProgress`` is used where nobody listens.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Progress(Protocol):
    def step(self, message: str) -> None:
        """A new step begins (shown always)."""

    def status(self, message: str) -> None:
        """Where a long step stands (the CLI may throttle these)."""

    def warn(self, message: str) -> None:
        """Something the user should know; the run goes on."""


class NullProgress:
    def step(self, message: str) -> None:
        pass

    def status(self, message: str) -> None:
        pass

    def warn(self, message: str) -> None:
        pass


class RecordingProgress:
    """Keeps every event; for tests."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def step(self, message: str) -> None:
        self.events.append(("step", message))

    def status(self, message: str) -> None:
        self.events.append(("status", message))

    def warn(self, message: str) -> None:
        self.events.append(("warn", message))


class Silence:
    """Says, while a wait goes on, that ``who`` has not answered for a while: every ``every``
    seconds without :meth:`answered` being called, one warning naming it ("host b has not
    answered for 15s; still waiting ..."), from a thread of its own, so a call that blocks on a
    host that stopped answering is said while it blocks, not only at its deadline."""

    def __init__(self, progress: Progress, who: str, doing: str, every: float = 15.0) -> None:
        self.progress = progress
        self.who = who
        self.doing = doing
        self.every = every
        self._clock = time.monotonic
        self.last = self._clock()
        self._said = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name=f"silence {who}", daemon=True)

    def __enter__(self) -> "Silence":
        self.last = self._clock()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def answered(self) -> None:
        self.last = self._clock()
        self._said = 0

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.every)):
            quiet = self._clock() - self.last
            if quiet >= self.every * (self._said + 1):
                self._said += 1
                self.progress.warn(f"{self.who} has not answered for {quiet:.0f}s; still waiting ({self.doing})")
