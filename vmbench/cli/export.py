"""``vmbench export RUN|latest``: a run's figures as InfluxDB line protocol or OpenMetrics text,
to standard output, a file (replaced whole, or not at all) or an InfluxDB server.

    vmbench export latest --format openmetrics -o /var/lib/node_exporter/textfile/vmbench.prom
    vmbench export latest --url https://influx:8086 --database vmbench --user bench --password-file /etc/vmbench/influx.pw
    VMBENCH_INFLUX_TOKEN=... vmbench export latest --url https://influx:8086 --org ops --bucket vmbench

A password or token is read from a file or the environment (``VMBENCH_INFLUX_PASSWORD``,
``VMBENCH_INFLUX_TOKEN``), never from the command line, and never printed.  TLS is always
verified (``--ca-file`` for a private CA).  Each run is one write request, retried once when
the server cannot be reached or answers with a server error.  ``vmbench history`` sends a
whole series the same way (:func:`add_destination` and :func:`deliver`).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence
from urllib.parse import urlsplit

import requests

from ..errors import ExportError, UsageError
from ..report.export import influx_lines, openmetrics_text, run_points
from ..report.load import load_run
from ..results.db import ResultsDB
from .parsers import PASSWORD_ENV, TOKEN_ENV

FORMATS = ("influx", "openmetrics")


@dataclass(frozen=True)
class Influx:
    """Where and how to write: the write URL, its query, the Authorization and verification."""

    url: str
    params: dict[str, str]
    auth: tuple[str, str] | None
    token: str | None
    verify: bool | str
    timeout: float

    @property
    def where(self) -> str:
        s = urlsplit(self.url)
        return f"{s.scheme}://{s.netloc}{s.path}"


def _secret(path: str | None, env: str, what: str, option: str) -> str | None:
    if path:
        try:
            text = Path(path).read_text().strip()
        except OSError as exc:
            raise UsageError(f"{option} {path}: {exc.strerror or exc}", f"name a readable file holding the {what}") from None
        if not text:
            raise UsageError(f"{option} {path} is empty", f"put the {what} in it")
        return text
    return os.environ.get(env) or None


def refuse_secret_on_argv(args: argparse.Namespace) -> None:
    if getattr(args, "secret_on_argv", None) is not None:
        raise UsageError("a password or token is never taken from the command line (ps and the shell's history show it)",
                         f"--password-file FILE or ${PASSWORD_ENV} (InfluxDB 1.x); --token-file FILE or ${TOKEN_ENV} (2.x)")


def influx_target(args: argparse.Namespace) -> Influx | None:
    """The InfluxDB write ``--url`` and its options name (None: no URL), checked before anything is sent."""
    refuse_secret_on_argv(args)
    if not args.url:
        for opt in ("database", "org", "bucket", "user", "password_file", "token_file", "ca_file"):
            if getattr(args, opt, None):
                raise UsageError(f"--{opt.replace('_', '-')} needs --url (the InfluxDB server)")
        return None
    if args.format != "influx":
        raise UsageError(f"--url sends InfluxDB line protocol, not {args.format}",
                         "OpenMetrics is for node_exporter's textfile collector: write it with -o FILE.prom")
    if args.output:
        raise UsageError("give --url or -o, not both")
    s = urlsplit(args.url)
    if s.scheme not in ("http", "https") or not s.hostname:
        raise UsageError(f"--url {args.url}: not an http:// or https:// URL", "e.g. https://influx.example:8086")
    base = args.url.rstrip("/")
    for suffix in ("/api/v2/write", "/write"):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    verify: bool | str = True
    if args.ca_file:
        if not Path(args.ca_file).is_file():
            raise UsageError(f"--ca-file {args.ca_file}: no such file")
        verify = args.ca_file
    if args.bucket or args.org:
        if args.database or args.user or args.password_file:
            raise UsageError("--org/--bucket (InfluxDB 2.x) and --database/--user/--password-file (1.x) do not mix")
        if not (args.bucket and args.org):
            raise UsageError("InfluxDB 2.x needs both --org and --bucket")
        token = _secret(args.token_file, TOKEN_ENV, "API token", "--token-file")
        if token is None:
            raise UsageError("InfluxDB 2.x needs an API token", f"--token-file FILE, or ${TOKEN_ENV} in the environment")
        return Influx(base + "/api/v2/write", {"org": args.org, "bucket": args.bucket, "precision": "s"}, None, token, verify,
                      args.timeout)
    if not args.database:
        raise UsageError("--url needs --database (InfluxDB 1.x) or --org and --bucket (InfluxDB 2.x)")
    if args.token_file:
        raise UsageError("--token-file is for InfluxDB 2.x (--org, --bucket); 1.x takes --user and --password-file")
    password = _secret(args.password_file, PASSWORD_ENV, "password", "--password-file")
    if password is not None and not args.user:
        raise UsageError("a password without --user", "name the InfluxDB user with --user")
    auth = (args.user, password or "") if args.user else None
    return Influx(base + "/write", {"db": args.database, "precision": "s"}, auth, None, verify, args.timeout)


def post(target: Influx, body: str) -> None:
    """One write request, retried once when the server cannot be reached or answers 5xx; any
    other answer but 204 is an :class:`ExportError` naming the server and what it said."""
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if target.token:
        headers["Authorization"] = f"Token {target.token}"
    last = ""
    for attempt in (1, 2):
        try:
            r = requests.post(target.url, params=target.params, data=body.encode(), headers=headers, auth=target.auth,
                              verify=target.verify, timeout=target.timeout)
        except requests.exceptions.SSLError as exc:
            raise ExportError(f"InfluxDB at {target.where}: TLS verification failed: {_reason(exc)}",
                              "its certificate must be valid for this name and signed by a CA this machine trusts (or --ca-file)") from None
        except requests.exceptions.RequestException as exc:
            last = f"cannot reach InfluxDB at {target.where}: {_reason(exc)}"
            continue
        if r.status_code in (200, 204):
            return
        said = (r.text or "").strip().replace("\n", " ")[:300]
        if r.status_code in (401, 403):
            raise ExportError(f"InfluxDB at {target.where} refused the credentials (HTTP {r.status_code}: {said})",
                              "check --user and the password (1.x) or the token (2.x); they are read from a file or the environment")
        if r.status_code < 500:
            raise ExportError(f"InfluxDB at {target.where} refused the write (HTTP {r.status_code}: {said})",
                              "check --database, or --org and --bucket")
        last = f"InfluxDB at {target.where} failed the write (HTTP {r.status_code}: {said})"
    raise ExportError(last + " (tried twice)", "is the server up, and is the URL's port right?")


def _reason(exc: Exception) -> str:
    """The innermost reason of a requests error, without the URL it repeats."""
    text = str(exc)
    for marker in ("Connection refused", "Name or service not known", "timed out", "certificate verify failed",
                   "Connection reset", "No route to host"):
        if marker in text:
            return marker.lower() if marker != "certificate verify failed" else text[text.find(marker):][:200]
    return type(exc).__name__


def write_atomic(path: str, text: str) -> None:
    """``text`` to ``path``, whole or not at all: written to a temporary file beside it,
    flushed to disk, then renamed over it (a reader sees the old file or the new one)."""
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise UsageError(f"-o {path}: no directory {folder}")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ExportError(f"could not write {path}: {exc.strerror or exc}; it was left as it was",
                          "free some space" if getattr(exc, "errno", None) == 28 else None) from None


def deliver(args: argparse.Namespace, per_run: Sequence[tuple[str, str]], whole: str, target: Influx | None) -> str:
    """Send each run's lines (label, text) to ``target`` (one request each), or write ``whole``
    to ``-o`` or standard output; what was done, in words."""
    if target is not None:
        for i, (label, body) in enumerate(per_run):
            try:
                post(target, body)
            except ExportError as exc:
                if i:
                    exc.message += f" ({i} run(s) before {label} were written)"
                    exc.args = (exc.message,)
                raise
        points = sum(body.count("\n") for _, body in per_run)
        return f"wrote {points} point(s) of {len(per_run)} run(s) to {target.where}"
    if args.output:
        write_atomic(args.output, whole)
        return f"wrote {args.output}"
    sys.stdout.write(whole)
    return ""


def cmd_export(args: argparse.Namespace) -> int:
    if args.format not in FORMATS:
        raise UsageError(f"--format {args.format}: choose influx or openmetrics")
    target = influx_target(args)
    db = ResultsDB(args.db, create=False)
    try:
        data = load_run(db, args.run)
    finally:
        db.close()
    points = run_points(data.run, data.measured, list(data.cells))
    text = influx_lines(points) if args.format == "influx" else openmetrics_text(points, [data.run])
    said = deliver(args, [(f"run {data.run.id}", text)], text, target)
    if said:
        print(said, file=sys.stderr)
    return 0
