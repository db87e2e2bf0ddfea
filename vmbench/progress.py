"""Progress events from long steps (image build, boot, fio runtime).

The library reports through a :class:`Progress` object it is handed; only the CLI
decides how to show it.  ``NullProgress`` is used where nobody listens.
"""

from __future__ import annotations

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
