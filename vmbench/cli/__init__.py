"""The ``vmbench`` command and its subcommands: the only code that prints.

``main.py`` parses the command line (with ``parsers.py``) and maps typed errors to a message,
a hint and an exit code; each subcommand runs in its own module (``plan.py``, ``run.py``,
``report.py``, ``compare.py``, ``hosts.py``, ``doctor.py``, ``cleanup.py`` ...), imported only
when that command runs.  Everything below this package returns values; only here are they
printed.
"""

from .main import main

__all__ = ["main"]
