"""Pure parts of the SSH transport: host key names, fingerprints, known_hosts edits, the
remote command line built from an argv, and ``vmbench hosts`` target parsing."""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
from pathlib import Path

import paramiko
import pytest

from vmbench.errors import PreflightError, UsageError
from vmbench.cli.hosts import parse_target
from vmbench.transport import hostkeys
from vmbench.transport.ssh import HostConnectionError, remote_command

WRAPPER = 'echo "vmbench-pgid $$" >&2; exec "$@"'


def make_key(tmp_path: Path, name: str, kind: str = "ed25519") -> tuple[paramiko.PKey, Path]:
    path = tmp_path / name
    subprocess.run(["ssh-keygen", "-q", "-t", kind, "-N", "", "-f", str(path)], check=True, capture_output=True)
    kind_name, data = Path(f"{path}.pub").read_text().split()[:2]
    return paramiko.PKey.from_type_string(kind_name, base64.b64decode(data)), path


def test_known_hosts_name():
    assert hostkeys.known_hosts_name("example.org", 22) == "example.org"
    assert hostkeys.known_hosts_name("example.org", 2222) == "[example.org]:2222"
    assert hostkeys.known_hosts_name("10.0.0.1", 2200) == "[10.0.0.1]:2200"


@pytest.mark.parametrize("kind,name", [("ed25519", "ssh-ed25519"), ("ecdsa", "ecdsa-sha2-nistp256"), ("rsa", "ssh-rsa")])
def test_fingerprint_matches_ssh_keygen(tmp_path, kind, name):
    key, path = make_key(tmp_path, f"k_{kind}", kind)
    out = subprocess.run(["ssh-keygen", "-lf", f"{path}.pub"], check=True, capture_output=True, text=True).stdout
    expected = out.split()[1]
    assert expected.startswith("SHA256:")
    assert hostkeys.fingerprint(key) == f"{name} {expected}"
    assert "=" not in hostkeys.fingerprint(key)


def test_default_known_hosts():
    assert hostkeys.default_known_hosts() == os.path.expanduser("~/.ssh/known_hosts")


def test_trust_and_check(tmp_path):
    key, _ = make_key(tmp_path, "a")
    other, _ = make_key(tmp_path, "b")
    known = tmp_path / "new-dir" / "known_hosts"
    assert hostkeys.check("h.example", 2222, key, str(known)) == "unknown"
    assert hostkeys.trust("h.example", 2222, key, str(known)) == "added"
    assert known.stat().st_mode & 0o777 == 0o600 and known.parent.stat().st_mode & 0o777 == 0o700
    assert known.read_text() == f"[h.example]:2222 ssh-ed25519 {key.get_base64()}\n"
    assert hostkeys.check("h.example", 2222, key, str(known)) == "known"
    assert hostkeys.check("h.example", 22, key, str(known)) == "unknown"  # another port, another entry
    assert hostkeys.trust("h.example", 2222, key, str(known)) == "already known"
    assert known.read_text().count("h.example") == 1
    assert hostkeys.check("h.example", 2222, other, str(known)) == "changed"
    with pytest.raises(PreflightError) as exc:
        hostkeys.trust("h.example", 2222, other, str(known))
    assert hostkeys.fingerprint(other) in exc.value.message and "--replace" in exc.value.hint
    assert hostkeys.check("h.example", 2222, key, str(known)) == "known"  # unchanged


def test_replace_drops_only_that_name(tmp_path):
    key, _ = make_key(tmp_path, "a")
    new, _ = make_key(tmp_path, "b")
    unrelated, _ = make_key(tmp_path, "c")
    known = tmp_path / "known_hosts"
    hashed = paramiko.HostKeys.hash_host("[h]:2222")
    known.write_text(
        "# my comment\n"
        f"other.example ssh-ed25519 {unrelated.get_base64()}\n"
        f"[h]:2222,alias.example ssh-ed25519 {key.get_base64()}\n"
        f"{hashed} ssh-ed25519 {key.get_base64()}\n"
        f"h ssh-ed25519 {key.get_base64()}"  # port 22: not the same name; no final newline
    )
    known.chmod(0o644)
    assert hostkeys.trust("h", 2222, new, str(known), replace=True) == "replaced"
    lines = known.read_text().splitlines()
    assert lines == [
        "# my comment",
        f"other.example ssh-ed25519 {unrelated.get_base64()}",
        f"alias.example ssh-ed25519 {key.get_base64()}",
        f"h ssh-ed25519 {key.get_base64()}",
        f"[h]:2222 ssh-ed25519 {new.get_base64()}",
    ]
    assert known.stat().st_mode & 0o777 == 0o644
    assert hostkeys.check("h", 2222, new, str(known)) == "known"
    assert hostkeys.check("h", 22, key, str(known)) == "known"
    assert hostkeys.check("alias.example", 22, key, str(known)) == "known"


def test_hashed_entries_are_checked(tmp_path):
    key, _ = make_key(tmp_path, "a")
    known = tmp_path / "known_hosts"
    known.write_text(f"{paramiko.HostKeys.hash_host('[h]:2222')} ssh-ed25519 {key.get_base64()}\n")
    assert hostkeys.check("h", 2222, key, str(known)) == "known"


def test_remote_command_is_shlex_join_of_the_list():
    argv = ["fio", "--name=a b", "it's", 'say "hi"', "$HOME", "a;rm -rf /", "`x`", "*", ""]
    env = {"LANG": "C", "SECRET_FREE": "x y;$z"}
    cmd = remote_command(argv, env)
    expected = ["setsid", "-w", "sh", "-c", WRAPPER, "sh", "env", "LANG=C", "SECRET_FREE=x y;$z", *argv]
    assert cmd == shlex.join(expected)
    assert shlex.split(cmd) == expected
    assert remote_command(["true"]) == shlex.join(["setsid", "-w", "sh", "-c", WRAPPER, "sh", "true"])
    assert remote_command([Path("/usr/bin/true")]) == remote_command(["/usr/bin/true"])


def test_remote_command_keeps_argv_through_a_shell():
    """What the remote login shell does with the string: argv arrives unchanged."""
    argv = ["printf", "[%s]\\n", "a b", "it's", "$HOME", "a;b", "`x`", "*", ""]
    done = subprocess.run(["sh", "-c", remote_command(argv, {"V": "$1 ;"})], capture_output=True, text=True, check=True)
    assert done.stdout == "[a b]\n[it's]\n[$HOME]\n[a;b]\n[`x`]\n[*]\n[]\n"
    first, _, rest = done.stderr.partition("\n")
    assert first.startswith("vmbench-pgid ") and first.split()[1].isdigit() and rest == ""


def test_parse_target():
    assert parse_target("h", None) == ("h", 22)
    assert parse_target("h:2222", None) == ("h", 2222)
    assert parse_target("root@h:2222", None) == ("h", 2222)
    assert parse_target("root@h", 2200) == ("h", 2200)
    assert parse_target("[::1]:2222", None) == ("::1", 2222)
    assert parse_target("::1", None) == ("::1", 22)
    with pytest.raises(UsageError):
        parse_target("h:x", None)
    with pytest.raises(UsageError):
        parse_target("h:22", 2222)


def test_host_connection_error():
    exc = HostConnectionError("lost", hint="resume")
    assert exc.exit_code == 4 and exc.hint == "resume"
