"""``vmbench hosts trust|check``: record or check a remote host's SSH host key.

vmbench refuses hosts whose key is not in known_hosts; this is how an admin adds one after
comparing the fingerprint with the host's own (``ssh-keygen -lf /etc/ssh/ssh_host_*.pub``).
"""

from __future__ import annotations

import argparse
import sys
from ..errors import UsageError
from ..transport import hostkeys
from ..transport.sshconfig import default_known_hosts


def parse_target(text: str, port: int | None) -> tuple[str, int]:
    """``host``, ``host:port``, ``user@host:port`` or ``[v6addr]:port`` -> (host, port); the user is ignored."""
    target = text.rpartition("@")[2]
    found: int | None = None
    if target.startswith("["):
        host, _, rest = target[1:].partition("]")
        if rest.startswith(":"):
            found = _port(rest[1:], text)
    elif target.count(":") == 1:
        host, _, p = target.partition(":")
        found = _port(p, text)
    else:
        host = target
    if not host:
        raise UsageError(f"no host name in {text!r}", hint="give HOST, HOST:PORT or USER@HOST:PORT")
    if port is not None and found is not None and port != found:
        raise UsageError(f"{text!r} says port {found} but --port says {port}")
    return host, port if port is not None else found if found is not None else 22


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise UsageError(f"bad port in {whole!r}: {text!r}")
    return int(text)


def cmd_hosts_trust(args: argparse.Namespace) -> int:
    host, port = parse_target(args.host, args.port)
    path = args.known_hosts or default_known_hosts()
    key = hostkeys.scan(host, port, timeout=args.timeout)
    fp = hostkeys.fingerprint(key)
    status = hostkeys.check(host, port, key, path)
    print(f"{hostkeys.known_hosts_name(host, port)} presents {fp}")
    if status == "known":
        print(f"already trusted in {path}")
        return 0
    if status == "changed" and not args.replace:
        print(f"error: {path} has a DIFFERENT key for this host; vmbench refuses it", file=sys.stderr)
        print("hint: if the host was reinstalled and you checked the new key, run again with --replace", file=sys.stderr)
        return 3
    if not args.yes:
        if not sys.stdin.isatty():
            print("error: not confirmed: compare the fingerprint with the host's, then run again with --yes", file=sys.stderr)
            return 2
        answer = input(f"{'replace the recorded key with' if status == 'changed' else 'trust'} this key in {path}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("not recorded")
            return 2
    result = hostkeys.trust(host, port, key, path, replace=args.replace)
    print(f"{result}: {fp} in {path}")
    return 0


def cmd_hosts_check(args: argparse.Namespace) -> int:
    host, port = parse_target(args.host, args.port)
    path = args.known_hosts or default_known_hosts()
    key = hostkeys.scan(host, port, timeout=args.timeout)
    status = hostkeys.check(host, port, key, path)
    print(f"{hostkeys.known_hosts_name(host, port)} presents {hostkeys.fingerprint(key)}: {status} in {path}")
    return {"known": 0, "unknown": 1, "changed": 3}[status]


