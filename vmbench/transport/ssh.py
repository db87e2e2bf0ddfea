"""A remote hypervisor host as a transport, over SSH (paramiko).

Keys only, never a password; the host key must already be in known_hosts (``vmbench hosts
trust``).  Each command runs in its own session (``setsid``) whose process-group id comes
back on stderr, so a timeout or Ctrl-C kills fio's workers on the host too.  The argv list
is sent as ``shlex.join(argv)``, the only string ever built from it.  A connection that
drops mid-command raises :class:`HostConnectionError`; the next call reconnects (with the
same host key check), so cleanup still works; a host that refuses new connections for a
while (its sshd restarting) is tried again for up to :data:`RECONNECT_SECONDS`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import socket
import threading
import time
from typing import Callable, Iterator, Mapping, Sequence

import paramiko

from ..command import Completed, format_argv, tail
from ..errors import CommandError, CommandTimeout, PreflightError, VmbenchError
from .sshconfig import SshConfig
from . import hostkeys

log = logging.getLogger(__name__)
#: how long a command's loop sleeps when nothing came: from _IDLE_FIRST, doubling to _IDLE_MAX.
#: It polls the channel instead of select()ing on it: a channel's fileno() makes paramiko
#: create a pipe (PosixPipe) that its transport thread writes to and closes without a lock,
#: and a command that timed out raced it: the transport thread hit a closed descriptor and
#: the connection died ("Socket exception: Bad file descriptor", paramiko issue 692).
_IDLE_FIRST = 0.001
_IDLE_MAX = 0.05
logging.getLogger("paramiko").addHandler(logging.NullHandler())  # the library never prints


class _RefusedChannels(logging.Filter):
    """paramiko logs a session the host refused as an ERROR; :meth:`SshTransport._session`
    waits and asks again, so the record says nothing the user must act on."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.levelno == logging.ERROR and "open FAILED" in record.getMessage())


logging.getLogger("paramiko.transport").addFilter(_RefusedChannels())

_PGID_PREFIX = b"vmbench-pgid "
_WRAPPER = 'echo "vmbench-pgid $$" >&2; exec "$@"'
_CHUNK = 32768
_RESUME_HINT = "the run keeps what it measured; `vmbench run --resume` finishes it"
_DROPPED = (socket.error, EOFError, paramiko.SSHException)
#: SFTP sessions one transport keeps open at most (threads beyond wait for a free one)
SFTP_SESSIONS = 3
#: seconds an SFTP request or a channel open may make no progress before the step fails
IO_STALL_SECONDS = 60.0
#: seconds a host that answered before is tried again while it refuses new connections (sshd restarting)
RECONNECT_SECONDS = 60.0
NOTICE_EVERY = 10.0


class HostConnectionError(VmbenchError):
    """The SSH connection to the hypervisor host dropped while a step was running
    (``reason``: why a new one could not be made, "Connection refused")."""

    exit_code = 4

    def __init__(self, message: str, hint: str | None = None, *, reason: str = "") -> None:
        super().__init__(message, hint)
        self.reason = reason or message


def remote_command(argv: Sequence[str], env: Mapping[str, str] | None = None) -> str:
    """The command line sent to the remote shell: argv in a new session that reports its
    process-group id on stderr first (``vmbench-pgid N``)."""
    envprefix = ["env", *(f"{k}={v}" for k, v in env.items())] if env else []
    return shlex.join(["setsid", "-w", "sh", "-c", _WRAPPER, "sh", *envprefix, *(os.fspath(a) for a in argv)])


class SshTransport:
    """The :class:`~vmbench.transport.base.Transport` of a host reached over SSH; connects lazily."""

    def __init__(self, cfg: SshConfig, *, connect_timeout: float = 15.0, keepalive: int = 15,
                 stall_timeout: float = IO_STALL_SECONDS, reconnect_for: float = RECONNECT_SECONDS) -> None:
        self.cfg = cfg
        self.reconnect_for = reconnect_for
        self.name = f"host {cfg.label}"
        self.where = f"{cfg.user}@{cfg.host}:{cfg.port}"
        self.connect_timeout = connect_timeout
        self.keepalive = keepalive
        self.known_hosts = os.path.expanduser(cfg.known_hosts) if cfg.known_hosts else hostkeys.default_known_hosts()
        self._ssh: paramiko.SSHClient | None = None
        #: idle SFTP sessions of the current connection; each is used by one thread at a time
        #: (paramiko's SFTPClient is not safe to share: two threads reading replies on one
        #: channel take each other's and wait forever)
        self._sftp_idle: list[paramiko.SFTPClient] = []
        self._sftp_open = 0  # SFTP sessions of the current connection, idle or in use
        self._sftp_free = threading.Condition(threading.Lock())
        self.stall_timeout = stall_timeout
        self._fingerprint: str | None = None
        self._connected_once = False
        self._gave_up = False  # reconnecting failed for reconnect_for seconds: not waited for again
        self._lock = threading.RLock()
        #: process groups of commands running now (killed on Ctrl-C)
        self.running_pgids: set[int] = set()

    # ---- connection ------------------------------------------------------------------------

    def connect(self) -> None:
        """Connect and verify the host key (also done by the first call)."""
        self._client()

    def close(self) -> None:
        with self._lock:
            with self._sftp_free:
                idle, self._sftp_idle, self._sftp_open = self._sftp_idle, [], 0
                self._sftp_free.notify_all()
            for thing in (*idle, self._ssh):
                if thing is not None:
                    with contextlib.suppress(Exception):  # closing a dead connection may raise anything
                        thing.close()
            self._ssh = None

    def reconnect(self) -> None:
        with self._lock:
            self.close()
            self._client()

    @property
    def host_key_fingerprint(self) -> str:
        """The fingerprint of the verified host key (connects if needed)."""
        self._client()
        return self._fingerprint or ""

    def describe(self) -> dict[str, object]:
        """How the host was reached, for a run's records."""
        c = self.cfg
        return {"ssh_host": c.host, "ssh_port": c.port, "ssh_user": c.user, "ssh_host_key": self.host_key_fingerprint}

    def _client(self) -> paramiko.SSHClient:
        with self._lock:
            if self._ssh is not None:
                transport = self._ssh.get_transport()
                if transport is not None and transport.is_active():
                    return self._ssh
                log.warning("%s: the SSH connection was lost; reconnecting", self.name)
                self.close()
            self._ssh = self._reconnect() if self._connected_once else self._open()
            self._connected_once = True
            return self._ssh

    def _reconnect(self) -> paramiko.SSHClient:
        """A new connection to a host that answered before: while it refuses or drops them
        (its sshd restarting), tried again with a growing pause for up to ``reconnect_for``
        seconds (once it gave up, once until it answers again: a cleanup's every step does not
        wait again).  A changed host key or a refused login is not waited out."""
        started, pause, told = time.monotonic(), 0.5, -NOTICE_EVERY
        while True:
            try:
                ssh = self._open()
            except HostConnectionError as exc:
                lasted = time.monotonic() - started
                if self._gave_up:
                    raise
                if lasted >= self.reconnect_for:
                    self._gave_up = True
                    raise HostConnectionError(f"{exc.message} (tried for {lasted:.0f}s)", exc.hint) from None
                if lasted - told >= NOTICE_EVERY:
                    told = lasted
                    log.warning("%s: SSH not answering (%s) since %.0fs; retrying until %gs", self.name, exc.reason,
                                lasted, self.reconnect_for)
                time.sleep(min(pause, self.reconnect_for - lasted))
                pause = min(pause * 2, 5.0)
                continue
            if told >= 0:
                log.warning("%s: SSH answers again after %.1fs", self.name, time.monotonic() - started)
            self._gave_up = False
            return ssh

    def _open(self) -> paramiko.SSHClient:
        cfg = self.cfg
        target = (cfg.host if cfg.port == 22 else f"{cfg.host}:{cfg.port}") + (f" --known-hosts {shlex.quote(self.known_hosts)}" if cfg.known_hosts else "")
        ssh = paramiko.SSHClient()
        if os.path.exists(self.known_hosts):
            ssh.load_host_keys(self.known_hosts)
        ssh.set_missing_host_key_policy(hostkeys.RefuseUnknown())
        if cfg.key_file and not os.path.isfile(os.path.expanduser(cfg.key_file)):
            raise PreflightError(f"SSH key file for {self.where} not found: {cfg.key_file}", hint="fix hypervisor.ssh.key_file")
        try:
            t = self.connect_timeout  # never a password: keys from key_file, ssh-agent or ~/.ssh
            key_file = os.path.expanduser(cfg.key_file) if cfg.key_file else None
            ssh.connect(cfg.host, cfg.port, cfg.user, key_filename=key_file, allow_agent=True, look_for_keys=key_file is None,
                        timeout=t, banner_timeout=t, auth_timeout=t)
        except (hostkeys.UnknownHostKey, paramiko.BadHostKeyException) as exc:
            ssh.close()
            raise hostkeys.refusal(exc, self.where, target, self.known_hosts) from None
        except paramiko.SSHException as exc:
            login = isinstance(exc, paramiko.AuthenticationException) or _handshake_done(ssh)  # no key to offer, or all refused
            ssh.close()
            if not login:
                raise self._unreachable(exc) from None
            locked = " (a key file needs a passphrase: load it into ssh-agent)" if isinstance(exc, paramiko.PasswordRequiredException) else ""
            raise PreflightError(
                f"SSH login to {self.where} failed{locked}; keys tried: {', '.join(self._keys_tried()) or 'none found'}",
                hint="vmbench logs in with keys only: set hypervisor.ssh.key_file or load a key into ssh-agent, "
                "and add its public key to the user's authorized_keys on the host",
            ) from None
        except (OSError, EOFError) as exc:
            ssh.close()
            raise self._unreachable(exc) from None
        transport = ssh.get_transport()
        assert transport is not None
        transport.set_keepalive(self.keepalive)
        self._fingerprint = hostkeys.fingerprint(transport.get_remote_server_key())
        log.debug("%s: connected, host key %s", self.name, self._fingerprint)
        return ssh

    def _unreachable(self, exc: BaseException) -> VmbenchError:
        if self._connected_once:  # reachable before: this is the connection dropping, not setup
            return HostConnectionError(f"lost the SSH connection to {self.where} and cannot reconnect: {_reason(exc)}",
                                       hint=_RESUME_HINT, reason=_reason(exc))
        return PreflightError(f"cannot reach {self.where}: {_reason(exc)}", hint="check the host, the port and that sshd runs there")

    def _keys_tried(self) -> list[str]:
        tried: list[str] = []
        if self.cfg.key_file:
            tried.append(self.cfg.key_file)
        else:
            tried += [p for n in ("rsa", "ecdsa", "ed25519") if os.path.isfile(p := os.path.expanduser(f"~/.ssh/id_{n}"))]
        if os.environ.get("SSH_AUTH_SOCK"):
            try:
                tried.append(f"{len(paramiko.Agent().get_keys())} key(s) from ssh-agent")
            except Exception:
                tried.append("ssh-agent (unreadable)")
        return tried

    def _lost(self, step: str, exc: BaseException | None = None) -> HostConnectionError:
        self.close()
        detail = f": {exc}" if exc is not None and str(exc) else ""
        return HostConnectionError(f"lost the SSH connection to {self.where} while {step}{detail}", hint=_RESUME_HINT)

    def _session(self, step: str) -> paramiko.Channel:
        """A new session channel.  A host that refuses one because the connection has as many
        as its sshd allows (``MaxSessions``, 10 by default) is asked again as the others end,
        for up to ``stall_timeout`` seconds; then the step fails naming the limit."""
        deadline = time.monotonic() + self.stall_timeout
        wait = 0.05
        reopened = False
        while True:
            transport = self._client().get_transport()
            try:
                return transport.open_session(timeout=self.connect_timeout)  # type: ignore[union-attr]
            except _DROPPED as exc:
                # refused with the connection up: a ChannelException, or (paramiko hands the
                # reason to one of the threads opening at once) "Unable to open channel."
                if transport is None or not transport.is_active():
                    if reopened or not self._connected_once:
                        raise self._lost(step, exc) from None
                    # the connection died while idle (nothing of this step was sent): a new one
                    log.warning("%s: the SSH connection was lost while idle (%s); reconnecting", self.name, exc or "closed")
                    self.close()
                    reopened = True
                    continue
                if time.monotonic() + wait > deadline:
                    raise HostConnectionError(
                        f"{self.where} refused a new SSH session for {self.stall_timeout:g}s while {step}: {exc}",
                        hint="sshd allows MaxSessions sessions per connection (10 by default): raise it in the host's "
                        "sshd_config, or run fewer VMs on this host at once") from None
                time.sleep(wait)
                wait = min(wait * 2, 1.0)

    # ---- commands --------------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, input: bytes | None = None, timeout: float | None = None, env: Mapping[str, str] | None = None,
            check: bool = True, on_wait: Callable[[float], None] | None = None) -> Completed:
        """Run argv on the host (see the module doc); errors as :func:`vmbench.command.run`'s."""
        argv = [os.fspath(a) for a in argv]
        if not argv:
            raise ValueError("run() needs a non-empty argv")
        step = f"running {_short(format_argv(argv))}"
        log.debug("%s: %s", self.name, format_argv(argv))
        chan = self._session(step)
        out, err, pgid, idle = bytearray(), bytearray(), None, _IDLE_FIRST
        pending: memoryview | None = memoryview(input or b"")  # stdin still to send; None: closed
        started = last_wait = time.monotonic()
        try:
            chan.exec_command(remote_command(argv, env))
            while True:
                if pending is not None and chan.send_ready():
                    try:
                        pending = pending[chan.send(pending[:_CHUNK].tobytes()) :] if pending else pending
                    except OSError:  # the command exited without reading all of it (a drop is found below)
                        pending = pending[:0]
                    if not len(pending):
                        if not chan.closed:
                            chan.shutdown_write()
                        pending = None
                got = self._drain(chan, out, err)
                finished = chan.closed or (chan.exit_status != -1 and chan.eof_received)
                if finished:
                    self._drain(chan, out, err)
                if pgid is None and b"\n" in err and err.startswith(_PGID_PREFIX):  # the wrapper's first line
                    first, _, rest = bytes(err).partition(b"\n")
                    pgid = int(first[len(_PGID_PREFIX):])
                    self.running_pgids.add(pgid)
                    err[:] = rest
                if finished:
                    if chan.exit_status == -1 and self._dropped(chan, grace=2.0):
                        raise self._lost(step)
                    break
                if self._dropped(chan):
                    raise self._lost(step)
                now = time.monotonic()
                elapsed = now - started
                if timeout is not None and elapsed >= timeout:
                    self._kill(pgid, step)
                    chan.close()
                    log.error("%s: command timed out after %ss: %s", self.name, timeout, format_argv(argv))
                    message = f"{self.name}: command timed out after {timeout:g}s: {format_argv(argv)}"
                    raise CommandTimeout(message, argv=argv, stdout=_decode(out), stderr=_decode(err))
                if on_wait and now - last_wait >= 1.0:
                    last_wait = now
                    on_wait(elapsed)
                idle = _IDLE_FIRST if got else min(idle * 2, _IDLE_MAX)
                if not got:
                    wait = min(idle, 0.005) if pending is not None else idle
                    if timeout is not None:
                        wait = max(0.001, min(wait, timeout - elapsed))
                    time.sleep(wait)  # never select() on a channel: see _IDLE_MAX
        except CommandTimeout:
            raise
        except BaseException as exc:  # a drop; or Ctrl-C, SIGTERM, an on_wait error: do not leave fio running
            if isinstance(exc, (HostConnectionError, EOFError, paramiko.SSHException)) or (isinstance(exc, OSError) and self._dropped(chan, 1.0)):
                lost = exc if isinstance(exc, HostConnectionError) else self._lost(step, exc)
                self._kill(pgid, step)  # reconnects once, so the orphaned command does not run on
                raise lost from None
            if chan.exit_status == -1:
                self._kill(pgid, step)
            chan.close()
            raise
        finally:
            if pgid is not None:
                self.running_pgids.discard(pgid)
        code = chan.exit_status  # -1: none came (the remote shell was killed by a signal)
        chan.close()
        done = Completed(tuple(argv), code, _decode(out), _decode(err))
        if check and code != 0:
            log.error("%s: command failed (exit %d): %s", self.name, code, format_argv(argv))
            if done.stderr.strip():
                log.error("stderr:\n%s", tail(done.stderr))
            message = f"{self.name}: command failed (exit {code}): {format_argv(argv)}" + (f"\n{tail(done.stderr)}" if done.stderr.strip() else "")
            raise CommandError(message, argv=argv, returncode=code, stdout=done.stdout, stderr=done.stderr)
        return done

    @staticmethod
    def _drain(chan: paramiko.Channel, out: bytearray, err: bytearray) -> bool:
        before = len(out) + len(err)
        while chan.recv_ready():
            out += chan.recv(_CHUNK)
        while chan.recv_stderr_ready():
            err += chan.recv_stderr(_CHUNK)
        return len(out) + len(err) > before

    @staticmethod
    def _dropped(chan: paramiko.Channel, grace: float = 0.0) -> bool:
        """Is the connection gone?  paramiko closes the channels a moment before it marks
        the transport inactive, so a channel closed without an exit status waits ``grace``."""
        deadline = time.monotonic() + grace
        while (transport := chan.get_transport()) is not None and transport.is_active():
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
        return True

    def _kill(self, pgid: int | None, step: str) -> None:
        """Kill a command's whole process group on the host, over a new channel."""
        if pgid is None:
            return
        # `env kill`: the kill program, not a shell builtin (dash's kill does not take --)
        cmd = shlex.join(["env", "kill", "-KILL", "--", f"-{pgid}"])
        try:
            chan = self._session(f"killing process group {pgid} ({step})")
            chan.exec_command(cmd)
            chan.status_event.wait(10)
            chan.close()
        except (VmbenchError, *_DROPPED) as exc:
            log.warning("%s: could not kill process group %d: %s", self.name, pgid, exc)

    def spawn(self, argv: Sequence[str]) -> tuple[paramiko.Channel, int]:
        """Start argv on the host in its own session (as :meth:`run` does) without waiting;
        returns (channel, process-group id) for :meth:`kill`."""
        argv = [os.fspath(a) for a in argv]
        if not argv:
            raise ValueError("spawn() needs a non-empty argv")
        step = f"starting {format_argv(argv)}"
        log.debug("%s: spawn %s", self.name, format_argv(argv))
        chan = self._session(step)
        err = bytearray()
        try:
            chan.exec_command(remote_command(argv))
            chan.shutdown_write()
            deadline = time.monotonic() + self.connect_timeout
            while b"\n" not in err:
                if chan.recv_stderr_ready():
                    err += chan.recv_stderr(_CHUNK)
                    continue
                if chan.closed or chan.exit_status_ready() or time.monotonic() >= deadline:
                    break
                time.sleep(0.01)
        except _DROPPED as exc:
            chan.close()
            raise self._lost(step, exc) from None
        first = bytes(err).partition(b"\n")[0]
        if not first.startswith(_PGID_PREFIX):
            chan.close()
            raise CommandError(f"{self.name}: {format_argv(argv)} did not start", argv=argv, stderr=_decode(err))
        pgid = int(first[len(_PGID_PREFIX):])
        self.running_pgids.add(pgid)
        return chan, pgid

    def kill(self, handle: object) -> None:
        """Kill the process group of what :meth:`spawn` started and close its channel."""
        match handle:
            case (paramiko.Channel() as chan, int() as pgid):
                pass
            case _:
                raise TypeError(f"not a handle from SshTransport.spawn: {handle!r}")
        try:
            self._kill(pgid, "stopping a background command")
        finally:
            self.running_pgids.discard(pgid)
            with contextlib.suppress(Exception):
                chan.close()

    def open_stream(self, argv: Sequence[str]) -> paramiko.Channel:
        """A channel running argv (no wrapper), for byte streams such as virt-ssh-helper."""
        argv = [os.fspath(a) for a in argv]
        step = f"starting {format_argv(argv)}"
        chan = self._session(step)
        try:
            chan.exec_command(shlex.join(argv))
        except _DROPPED as exc:
            raise self._lost(step, exc) from None
        return chan

    # ---- files -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _sftp_session(self, step: str) -> Iterator[paramiko.SFTPClient]:
        """An SFTP session for this thread alone, for the ``with`` block: an idle one of the
        connection, a new one, or the first one another thread gives back (at most
        :data:`SFTP_SESSIONS`).  Every request on it fails after ``stall_timeout`` seconds
        without progress.  A session whose block raised is closed, never reused."""
        ssh = self._client()
        sftp = self._checkout(ssh, step)
        ok = False
        try:
            yield sftp
            ok = True
        finally:
            self._checkin(ssh, sftp, reuse=ok)

    def _checkout(self, ssh: paramiko.SSHClient, step: str) -> paramiko.SFTPClient:
        deadline = time.monotonic() + self.stall_timeout
        with self._sftp_free:
            while not self._sftp_idle and self._sftp_open >= SFTP_SESSIONS:
                if not self._sftp_free.wait(max(0.0, deadline - time.monotonic())) and time.monotonic() >= deadline:
                    raise HostConnectionError(f"no SFTP session to {self.where} came free within {self.stall_timeout:g}s while {step}",
                                              hint=_RESUME_HINT)
            if self._sftp_idle:
                return self._sftp_idle.pop()
            self._sftp_open += 1
        try:
            chan = self._session(step)
            try:
                chan.settimeout(self.stall_timeout)  # every request on it, the version handshake first
                chan.invoke_subsystem("sftp")
                sftp = paramiko.SFTPClient(chan)
            except (OSError, *_DROPPED) as exc:
                chan.close()
                raise self._lost(step, exc) from None
        except BaseException:
            with self._sftp_free:
                self._sftp_open -= 1
                self._sftp_free.notify()
            raise
        return sftp

    def _checkin(self, ssh: paramiko.SSHClient, sftp: paramiko.SFTPClient, *, reuse: bool) -> None:
        with self._sftp_free:
            current = ssh is self._ssh
            if reuse and current:
                self._sftp_idle.append(sftp)
            elif current:
                self._sftp_open -= 1
            self._sftp_free.notify()
        if not (reuse and current):
            with contextlib.suppress(Exception):
                sftp.close()
    def _file_error(self, exc: BaseException, step: str, path: str) -> BaseException:
        """What to raise for a failed file operation: a lost connection, or an OSError with
        the path and the host (FileNotFoundError stays one, as with LocalTransport)."""
        ssh = self._ssh
        transport = ssh.get_transport() if ssh is not None else None
        if isinstance(exc, TimeoutError) and transport is not None and transport.is_active():  # this session stalled
            return HostConnectionError(f"{self.where} did not answer for {self.stall_timeout:g}s while {step}", hint=_RESUME_HINT)
        if not isinstance(exc, OSError) or isinstance(exc, TimeoutError) or transport is None or not transport.is_active():
            return self._lost(step, exc)
        if exc.errno is None:
            return OSError(f"{exc} on {self.where}: {path}")
        return OSError(exc.errno, f"{exc.strerror or os.strerror(exc.errno)} on {self.where}", path)

    def read_file(self, path: str) -> bytes:
        step = f"reading {path}"
        try:
            with self._sftp_session(step) as sftp, sftp.open(path, "rb") as f:
                if (size := f.stat().st_size or 0) > 0:
                    f.prefetch(size)
                return f.read()
        except (OSError, *_DROPPED) as exc:
            raise self._file_error(exc, step, path) from None

    def write_file(self, path: str, data: bytes, mode: int | None = 0o600) -> None:
        """Write a file; the mode is set before any data goes in.  ``mode=None`` keeps an
        existing file's mode (for /proc, /sys: one write of the whole data)."""
        step = f"writing {path}"
        try:
            with self._sftp_session(step) as sftp, sftp.open(path, "wb") as f:
                if mode is not None:
                    f.chmod(mode)
                    f.set_pipelined(True)
                f.write(data)
        except (OSError, *_DROPPED) as exc:
            raise self._file_error(exc, step, path) from None

    def put_file(self, local_path: str, remote_path: str, mode: int = 0o644, progress: Callable[[int, int], None] | None = None) -> None:
        """Upload to ``remote_path.part``, then rename into place (no half files);
        ``progress(bytes_done, total)`` after each chunk."""
        step = f"uploading {local_path} to {remote_path}"
        part = remote_path + ".part"
        with open(local_path, "rb") as src, self._sftp_session(step) as sftp:
            total = os.fstat(src.fileno()).st_size
            try:
                with sftp.open(part, "wb") as dst:
                    dst.chmod(mode)
                    dst.set_pipelined(True)
                    while chunk := src.read(_CHUNK):
                        dst.write(chunk)
                        if progress:
                            progress(src.tell(), total)
                if (size := sftp.stat(part).st_size) != total:
                    raise OSError(f"{part} has {size} bytes after the upload, expected {total}")
                sftp.posix_rename(part, remote_path)
            except (OSError, *_DROPPED) as exc:
                error = self._file_error(exc, step, remote_path)
                if not isinstance(error, HostConnectionError):
                    with contextlib.suppress(OSError, *_DROPPED):
                        sftp.remove(part)
                raise error from None
        if progress and total == 0:
            progress(0, 0)


def _handshake_done(ssh: paramiko.SSHClient) -> bool:
    """After the key exchange (so an SSHException is about the login, not reaching the host)?"""
    transport = ssh.get_transport()
    return transport is not None and transport.is_active() and transport.get_remote_server_key() is not None


def _short(text: str, limit: int = 100) -> str:
    """A command for a message: the start is enough to say which step it was."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(exc: BaseException) -> str:
    """The OS error behind a failed connect (paramiko wraps one per address tried)."""
    if isinstance(exc, paramiko.ssh_exception.NoValidConnectionsError):
        return "; ".join(sorted({_reason(e) for e in exc.errors.values()})) or str(exc)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


def _decode(data: bytes | bytearray) -> str:
    return bytes(data).decode("utf-8", errors="replace")
