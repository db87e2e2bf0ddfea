"""The subcommands' arguments, and how each runs: everything ``vmbench`` needs to parse its
command line, and nothing a command needs to run.

:mod:`.main` builds the parser from these (and its own commands: ``plan``, ``run``, ``report``,
``runs``, ``cleanup``, ``doctor``).  Each subcommand's function is a :class:`Command`: its module
in this package is imported only when it runs, so ``vmbench --help``, a mistyped option and
each command load only what that command uses.
"""

from __future__ import annotations

import argparse
import importlib
import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ..paths import default_db_path
from ..transport.sshconfig import default_known_hosts

#: where ``vmbench export`` and ``vmbench history`` read an InfluxDB password or token (never argv)
PASSWORD_ENV = "VMBENCH_INFLUX_PASSWORD"
TOKEN_ENV = "VMBENCH_INFLUX_TOKEN"
#: what ``vmbench tune --format`` takes
TUNE_FORMATS = ("table", "markdown", "csv", "json")


@dataclass(frozen=True)
class Command:
    """A subcommand's function: ``function`` of the module ``module`` of this package.

    The module is imported when the command runs, here, the command line's one import of a
    command: a command module imports what it uses at its top (the report, the run engine, the
    drivers, numpy and scipy, jinja2, paramiko, proxmoxer ...), so importing them all to parse
    the command line would make ``vmbench --help`` and ``vmbench plan`` pay for every command.
    A command module never imports :mod:`.main`, so this import hides no circle."""

    module: str
    function: str

    def __call__(self, args: argparse.Namespace) -> int:
        command = getattr(importlib.import_module(f".{self.module}", __package__), self.function)
        return int(command(args) or 0)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser (and, through ``add_subparsers``, each of its subcommands') whose
    epilog may be a function, ``epilog_of``, called when the help is printed."""

    def __init__(self, *args: Any, epilog_of: Callable[[], str] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.epilog_of = epilog_of

    def format_help(self) -> str:
        if self.epilog_of is not None:
            self.epilog, self.epilog_of = self.epilog_of(), None
        return super().format_help()


def add_images(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("images", help="guest template images (build, list, push to Proxmox VE)")
    isub = sp.add_subparsers(dest="images_command", metavar="ACTION")
    isub.required = True
    ib = isub.add_parser("build", help="build a template image if missing or its recipe changed")
    ib.add_argument("name", nargs="?", default="debian12")
    ib.add_argument("--force", action="store_true", help="rebuild even if current")
    ib.set_defaults(func=Command("images", "cmd_images_build"))
    il = isub.add_parser("list", help="list built images")
    il.set_defaults(func=Command("images", "cmd_images_list"))
    ip = isub.add_parser("push", help="make vmbench's template on a Proxmox scenario's node and storage "
                                      "(building the image if needed); kept while its recipe is unchanged")
    ip.add_argument("scenario", help="a scenario with driver: proxmox (its node, storage, template name and SSH)")
    ip.add_argument("--replace", action="store_true",
                    help="replace vmbench's template made from an older recipe (never a VM vmbench did not make)")
    ip.add_argument("--import-storage", metavar="STORAGE",
                    help="the node's storage to upload the disk into (content 'import'; default: one that takes imports)")
    ip.set_defaults(func=Command("push", "cmd_images_push"))


def add_compare(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("compare", help="compare stored runs side by side against a baseline run",
                               description="Put the same side, cell, stack, layer and job of several runs side by side, "
                                           "each with its change from the baseline run, its interval and verdict.")
    sp.add_argument("runs", nargs="+", metavar="RUN",
                    help="run id, tag, 'latest', or FILE.db:RUN; without --baseline the first is the baseline")
    sp.add_argument("--baseline", metavar="RUN", help="the run the others are compared with")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--format", default="table", help="table, markdown, csv or json")
    sp.add_argument("--wide", action="store_true", help="every column (the text table fits 120 columns by default)")
    sp.add_argument("--allow-other-host", action="store_true",
                    help="compare runs from different hosts (kernel, CPU, QEMU, fio...) instead of refusing them")
    sp.set_defaults(func=Command("compare", "cmd_compare"))
    return sp


def advise_epilog() -> str:
    """``vmbench advise --help``'s last paragraph: the goals and the risks vmbench accepts, from
    their own types.  Made only when that help is printed (:class:`Parser`): the goal types load
    the scenario package, which ``vmbench --help`` and the other commands' parsing need not."""
    from ..scenario.goals import GoalMetric, Risk

    return (f"Goals: JOB:METRIC or METRIC, METRIC one of {GoalMetric.allowed()}. Without --goal: the scenario's advise: "
            "goals, else its targets, else each job on its own metric (and cpu-per-io where QEMU's CPU was sampled). "
            f"Risks (--allow): {Risk.allowed()}; a change that carries a risk is never the recommendation unless that risk "
            "is allowed. Exit status 0 when the advice is written, even when nothing could be judged (it says why); 2 for a "
            "bad argument (--goal, --allow, --format, a run the database does not have).")


def _fill(text: str) -> str:
    """A help paragraph wrapped as argparse would, but never inside a hyphenated name (zfs-checksum-off)."""
    return textwrap.fill(text, 79, break_on_hyphens=False, break_long_words=False)


def add_advise(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("advise", help="which measured change to make for a goal, with its evidence",
                               description=_fill("Rank the changes a stored run measured by their effect on a goal (a job and a "
                                                 "metric), only where the verdict is significant, each with its evidence; say "
                                                 "what the evidence does not support, what was not tried, where the best cell "
                                                 "stands against the host, and the command or XML that applies the "
                                                 "recommendation (never applied by vmbench)."),
                               epilog_of=lambda: _fill(advise_epilog()), formatter_class=argparse.RawDescriptionHelpFormatter)
    sp.add_argument("run", nargs="?", default="latest", metavar="RUN", help="run id, tag or 'latest' (default)")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--goal", action="append", default=[], metavar="JOB:METRIC", help="a goal (repeatable)")
    sp.add_argument("--allow", action="append", default=[], metavar="RISK", help="a risk to allow by name (repeatable)")
    sp.add_argument("--format", default="table", help="table, markdown or json")
    sp.add_argument("--wide", action="store_true", help="every column (the text tables fit 120 columns by default)")
    who = sp.add_mutually_exclusive_group()
    who.add_argument("--vmid", metavar="N", help="the Proxmox VMID the apply commands name")
    who.add_argument("--domain", metavar="NAME", help="the libvirt domain the apply snippets name")
    sp.add_argument("--read-vm", action="store_true",
                    help="read the --vmid/--domain VM (read only) through the run's stored scenario, so the snippets keep "
                         "its disk's other options")
    sp.set_defaults(func=Command("advise", "cmd_advise"))
    return sp


def add_tune(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("tune", help="find better VM settings round by round: each round a one-factor run "
                                            "from the best settings so far, kept while they improve the goal significantly")
    sp.add_argument("scenario", nargs="?", help="a scenario with a tune: section (scenarios/tune.yaml)")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--resume", nargs="?", const="latest", metavar="TUNE-ID",
                    help="finish an interrupted tune (default: the latest, of SCENARIO when given): the stored rounds "
                         "are kept, an interrupted round is resumed, then the search goes on")
    sp.add_argument("--show", metavar="TUNE-ID", help="print a stored tune ('latest' for the newest); runs nothing")
    sp.add_argument("--format", default="table", help=f"{', '.join(TUNE_FORMATS)} (default table)")
    sp.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    sp.set_defaults(func=Command("tune", "cmd_tune"))
    return sp


def add_hosts(subparsers: Any) -> None:
    """Add ``hosts trust`` and ``hosts check`` to the vmbench command line."""
    sp = subparsers.add_parser("hosts", help="SSH host keys of remote hypervisor hosts")
    hsub = sp.add_subparsers(dest="hosts_command", metavar="ACTION")
    hsub.required = True
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("host", metavar="HOST", help="HOST, HOST:PORT or USER@HOST:PORT (the user is ignored)")
    common.add_argument("--port", type=int, help="SSH port (default 22, or the one in HOST)")
    common.add_argument("--known-hosts", metavar="FILE", help=f"known_hosts file (default {default_known_hosts()})")
    common.add_argument("--timeout", type=float, default=15.0, help="connect timeout in seconds (default 15)")
    t = hsub.add_parser("trust", parents=[common], help="show a host's key and record it in known_hosts")
    t.add_argument("--replace", action="store_true", help="replace a different key recorded for this host")
    t.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    t.set_defaults(func=Command("hosts", "cmd_hosts_trust"))
    c = hsub.add_parser("check", parents=[common], help="is the host's key known, unknown or changed? (exit 0, 1, 3)")
    c.set_defaults(func=Command("hosts", "cmd_hosts_check"))


def add_setup(sub: argparse._SubParsersAction) -> None:
    sp = sub.add_parser("setup", help="print the commands that set a hypervisor up for vmbench (proxmox: the API token)")
    ssub = sp.add_subparsers(dest="setup_command", metavar="HYPERVISOR")
    ssub.required = True
    pp = ssub.add_parser("proxmox", help="the pveum/pvesm commands for a Proxmox VE API token with only the rights "
                                         "vmbench needs (run them as root on a node; nothing is read from it)")
    pp.add_argument("scenario", nargs="?", help="a scenario with driver: proxmox (its token id, node, storage); "
                                                "default: docs/proxmox.md's example")
    pp.add_argument("--pve", choices=["8", "9"], help="the PVE major version (default: both; they differ in the guest "
                                                      "agent's privilege)")
    pp.add_argument("--import-storage", metavar="STORAGE", help="the storage vmbench images push uploads into "
                                                                "(default: local)")
    pp.set_defaults(func=Command("setup", "cmd_setup_proxmox"))


def add_history(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("history", allow_abbrev=False, help="a scenario's runs over time: changes, steps beyond noise and what changed on the host",
                               description="Follow one scenario across its stored runs: each figure per run with its interval, "
                                           "the change from the previous comparable run, the steps where a figure moved beyond "
                                           "noise, and what changed in the stored environment at each step.")
    sp.add_argument("scenario", help="a scenario file, or the name of a scenario stored in the database")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    sp.add_argument("--since", metavar="DATE", help="only runs started on or after this day (YYYY-MM-DD)")
    sp.add_argument("--last", metavar="N", type=int, help="only the last N runs of the scenario")
    add_destination(sp, extra_formats=("table", "json", "html (with -o FILE)"))
    sp.set_defaults(func=Command("history", "cmd_history"))
    return sp


def add_export(subparsers: Any) -> argparse.ArgumentParser:
    sp = subparsers.add_parser("export", allow_abbrev=False, help="a run's figures as InfluxDB line protocol or OpenMetrics text (file, stdout, InfluxDB)",
                               description="Export a stored run's figures (the report's medians, percentiles and gaps) to "
                                           "InfluxDB or node_exporter's textfile collector.")
    sp.add_argument("run", nargs="?", default="latest", help="run id, tag or 'latest' (default)")
    sp.add_argument("--db", default=str(default_db_path()), help=f"results database (default: {default_db_path()})")
    add_destination(sp)
    sp.set_defaults(func=Command("export", "cmd_export"))
    return sp


def add_destination(sp: argparse.ArgumentParser, extra_formats: Sequence[str] = ()) -> None:
    """The options that say what format and where to: shared with ``vmbench history``."""
    sp.add_argument("--format", default=None if extra_formats else "influx",
                    help="influx (line protocol) or openmetrics" + (", or " + ", ".join(extra_formats) if extra_formats else ""))
    sp.add_argument("-o", "--output", help="write to this file (replaced whole: written beside it, then renamed)")
    g = sp.add_argument_group("sending to InfluxDB (--format influx)")
    g.add_argument("--url", help="the InfluxDB server, e.g. https://influx.example:8086")
    g.add_argument("--database", help="InfluxDB 1.x: the database (POST /write)")
    g.add_argument("--user", help="InfluxDB 1.x: the user (its password from --password-file or $" + PASSWORD_ENV + ")")
    g.add_argument("--password-file", help="InfluxDB 1.x: a file holding the password")
    g.add_argument("--org", help="InfluxDB 2.x: the organization (POST /api/v2/write)")
    g.add_argument("--bucket", help="InfluxDB 2.x: the bucket")
    g.add_argument("--token-file", help="InfluxDB 2.x: a file holding the API token (or $" + TOKEN_ENV + ")")
    g.add_argument("--ca-file", help="CA bundle to verify the server's TLS certificate with (it is always verified)")
    g.add_argument("--timeout", type=float, default=30.0, help="seconds per request (default 30)")
    # a secret on the command line shows in ps and the shell's history: refused, its value never repeated
    g.add_argument("--token", "--password", dest="secret_on_argv", help=argparse.SUPPRESS)
