"""The ``vmbench`` command and its subcommands: the only code that prints.

``main.py`` parses the command line, maps typed errors to a message, a hint and an exit
code, and runs ``run``, ``plan``, ``report``, ``images`` ...; each larger subcommand has its
own module (``compare.py``, ``hosts.py``, ``doctor.py``, ``cleanup.py``).  Everything below
this package returns values; only here are they printed.
"""

from .main import main

__all__ = ["main"]
