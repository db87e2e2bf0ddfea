"""The ``vmbench`` command: its command line, and what its errors look like; the command
modules beside it are the only code that prints.

Library errors (:class:`~vmbench.errors.VmbenchError`) become a message, a hint and an
exit code; ``--debug`` shows tracebacks and debug logs.  Each subcommand runs in its own
module (``plan.py``, ``run.py``, ``report.py``, ``runs.py``, ``cleanup.py``, ``doctor.py`` and
those :mod:`.parsers` names), imported only when it runs (:class:`~.parsers.Command`).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import traceback
from typing import Sequence

from .. import __version__
from ..errors import Interrupted, VmbenchError
from ..paths import default_db_path
from .fit import error_lines
from .parsers import (Command, Parser, add_advise, add_compare, add_export, add_history, add_hosts, add_images, add_setup,
                      add_tune)

log = logging.getLogger("vmbench")


#: what `vmbench` exits with (docs/guarantees.md says the same)
EXIT_CODES = ("exit codes: 0 done; 2 a mistake in the scenario or the command line; 3 the host cannot run it (nothing "
              "was created); 4 the hypervisor, a guest or a command failed; 5 the results database; 6 the run ended but "
              "some cells (or all) were not measured: a setting did not take effect; 7 (run --quiet) the run missed a target "
              "or stepped worse than the scenario's earlier runs; 130 interrupted")


def build_parser() -> argparse.ArgumentParser:
    p = Parser(prog="vmbench", description="Why is disk I/O in my VMs slower than on the host? Layer by layer, from real fio runs.",
               epilog=EXIT_CODES)
    p.add_argument("--version", action="version", version=f"vmbench {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks and debug logs")
    p.add_argument("-v", "--verbose", action="store_true", help="log every command")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    db_help = f"results database (default: {default_db_path()})"

    sp = sub.add_parser("plan", help="show what a scenario would run; no side effects")
    sp.add_argument("scenario")
    sp.add_argument("--json", action="store_true", help="print the plan as JSON")
    sp.add_argument("--accel", choices=["kvm", "tcg"], help="estimate for this accelerator")
    sp.add_argument("--wide", action="store_true", help="every VM setting of every cell and no wrapping (the plan fits 120 "
                    "columns by default)")
    sp.set_defaults(func=Command("plan", "cmd_plan"))

    sp = sub.add_parser("run", help="run a scenario and store its results")
    sp.add_argument("scenario", nargs="?")
    sp.add_argument("--resume", metavar="RUN", help="finish a failed or interrupted run (id, tag or 'latest'): "
                    "measurements already stored are kept, the missing ones run in new VMs")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.add_argument("--report", action=argparse.BooleanOptionalAction, default=False, help="print the report at the end")
    sp.add_argument("-q", "--quiet", action="store_true", help="for a timer: only errors and a summary; exit 7 when the run "
                    "missed a target or stepped worse than the scenario's earlier runs (docs/unattended.md)")
    sp.set_defaults(func=Command("run", "cmd_run"))

    sp = sub.add_parser("report", help="print a run's gap tables")
    sp.add_argument("run", nargs="?", default="latest", help="run id, run tag or 'latest' (default)")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.add_argument("--format", default="table", help="table, markdown, csv, json or html (html needs -o)")
    sp.add_argument("-o", "--output", help="write to this file instead of standard output")
    sp.add_argument("--wide", action="store_true", help="every column of every table (the text report fits 120 columns "
                    "by default and names the columns it leaves out)")
    sp.add_argument("--section", action="append", metavar="NAME", help="only this table, whole (e.g. gaps, cpu-per-io, "
                    "layers, advice; a prefix naming one table will do); repeat for more")
    sp.set_defaults(func=Command("report", "cmd_report"))

    sp = sub.add_parser("runs", help="list stored runs")
    sp.add_argument("--db", default=str(default_db_path()), help=db_help)
    sp.set_defaults(func=Command("runs", "cmd_runs"))

    sp = sub.add_parser("cleanup", help="find and remove leftovers vmbench created (lists them first)")
    sp.add_argument("--dry-run", action="store_true", help="only list")
    sp.add_argument("--force", action="store_true", help="also remove resources of runs that are still running")
    sp.add_argument("scenario", nargs="?", help="clean up the host this scenario runs on (default: this machine)")
    sp.add_argument("--uri", default=None, help="libvirt URI on this machine (default qemu:///system)")
    sp.set_defaults(func=Command("cleanup", "cmd_cleanup"))

    sp = sub.add_parser("doctor", help="check a hypervisor host: reachable, libvirt, image, fio, KVM")
    sp.add_argument("scenario", nargs="?", help="check the host this scenario runs on (default: this machine)")
    sp.add_argument("--uri", default=None, help="libvirt URI on this machine (default qemu:///system)")
    sp.add_argument("--template", default="debian12")
    sp.add_argument("--probe", action="store_true", help="probe KVM again instead of using the cached answer")
    sp.set_defaults(func=Command("doctor", "cmd_doctor"))

    add_images(sub)
    add_compare(sub)
    add_advise(sub)
    add_tune(sub)
    add_hosts(sub)
    add_setup(sub)
    add_history(sub)
    add_export(sub)
    return p


def _setup_logging(args: argparse.Namespace) -> None:
    root = logging.getLogger("vmbench")
    root.setLevel(logging.DEBUG)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG if args.debug else logging.INFO if args.verbose else logging.CRITICAL)
    root.addHandler(handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _setup_logging(args)
    try:
        return int(args.func(args) or 0)
    except VmbenchError as exc:
        if args.debug:
            traceback.print_exc()
        print("\n".join(error_lines(exc.message, exc.hint)), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        if args.debug:
            traceback.print_exc()
        print("interrupted", file=sys.stderr)
        return Interrupted.exit_code
    except BrokenPipeError:  # `vmbench plan ... | head`: the reader is gone, as with any Unix tool
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
        return 128 + signal.SIGPIPE
    except OSError as exc:  # a file or directory vmbench needs: say which, not a traceback
        if args.debug:
            traceback.print_exc()
        where = f": {exc.filename}" if exc.filename else ""
        print(f"error: {exc.strerror or exc}{where}", file=sys.stderr)
        if isinstance(exc, PermissionError):
            print("hint: vmbench needs root for qemu:///system, its state in /var/lib/vmbench and host fio on pool files", file=sys.stderr)
        return 1

