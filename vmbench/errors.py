"""Typed errors raised by the vmbench library.

The library never prints.  Every error a user can cause carries a message and, where one
helps, a hint; the CLI maps each class to an exit code.  Anything that is not a
``VmbenchError`` is a bug and is shown with its traceback.
"""

from __future__ import annotations


class VmbenchError(Exception):
    """Base class: a failure with a message meant for a hypervisor admin."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class ScenarioError(VmbenchError):
    """The scenario file is wrong: unknown key, bad value, impossible combination."""

    exit_code = 2


class UsageError(VmbenchError):
    """A command-line argument is wrong (unknown run id, bad format, ...)."""

    exit_code = 2


class PreflightError(VmbenchError):
    """The machine cannot run the scenario: libvirt unreachable, image missing, ..."""

    exit_code = 3


class CommandError(VmbenchError):
    """An external command failed.  ``argv`` is the exact command, ``stderr`` its tail."""

    exit_code = 4

    def __init__(
        self,
        message: str,
        argv: list[str] | tuple[str, ...] = (),
        returncode: int | None = None,
        stdout: str = "",
        stderr: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint)
        self.argv = list(argv)
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


class CommandTimeout(CommandError):
    """An external command (host or guest) did not finish in time and was killed."""


class HypervisorError(VmbenchError):
    """The hypervisor refused or failed an operation (define, start, volume create...)."""

    exit_code = 4


class GuestError(VmbenchError):
    """The guest did not boot, its agent did not answer, or a guest step failed."""

    exit_code = 4


class ExportError(VmbenchError):
    """Results could not be sent or written where ``vmbench export`` was told: the server
    refused or is unreachable, the credentials are wrong, the disk is full."""

    exit_code = 4


class ResultsError(VmbenchError):
    """The results database is missing, of an unknown schema version, or has no such run."""

    exit_code = 5


class Interrupted(VmbenchError):
    """The run was interrupted (Ctrl-C or SIGTERM); everything created was removed."""

    exit_code = 130
