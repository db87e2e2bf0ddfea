"""Arming fio: every side of a load round set up and waiting, then released together.

fio runs a job's ``exec_prerun`` after the job's files are laid out and its buffers are
allocated, and before it starts its clock (backend.c, ``thread_main``: ``init_io_u``,
``setup_files``, then ``exec_prerun``, then ``set_epoch_time``; ramp and runtime count from
there).  A prerun that waits for a file therefore holds a fio that is loaded, parsed and set
up: in a starved guest that start-up takes seconds, and it now happens before the release,
not after it.  Each clone of the job (``numjobs``) runs the prerun and first leaves a marker
(``<gate>.armed.<pid>``); vmbench waits on each side until every clone's marker is there,
then releases every side at once, each with one short write of ``<gate>.go`` (created by the
write itself, ``mode=None``: through a guest agent one file-open, no process started in the
guest).  A side that
fails instead writes ``<gate>.stop``: the preruns and the wait end, and fio ends without
I/O (its rc is 0 then, so the run is failed here, not by fio).  Both loops give up after a
bounded number of polls, so nothing waits on a vmbench that died.

fio runs the prerun through ``system()`` as ``"<prerun> > <job>.prerun.txt 2>&1"``, in its
working directory; the prerun ends with a shell comment so that redirection is void and no
file lands there (the scripts print nothing).
"""

from __future__ import annotations

import logging
import math
import shlex
import threading
from dataclasses import dataclass
from typing import Callable, TypeVar

from ..errors import VmbenchError
from ..transport.base import Transport

log = logging.getLogger(__name__)
T = TypeVar("T")
#: how often the prerun looks for the release, and the wait for the markers, seconds
POLL_S = 0.05
#: the prerun of every clone: leave a marker, then wait for go (exit 0) or stop (exit 1)
PRERUN_SCRIPT = ('go=$1; stop=$2; n=$4; : > "$3.$$"; i=0; while [ ! -e "$go" ]; do '
                 'if [ -e "$stop" ] || [ "$i" -ge "$n" ]; then exit 1; fi; '
                 f'i=$((i + 1)); sleep {POLL_S:g}; done')
#: vmbench's wait on a side: every clone's marker there (exit 0), stop (3) or too long (2)
ARMED_SCRIPT = ('armed=$1; want=$2; stop=$3; n=$4; i=0; while :; do set -- "$armed".*; '
                'if [ -e "$1" ] && [ "$#" -ge "$want" ]; then exit 0; fi; '
                'if [ -e "$stop" ]; then exit 3; fi; if [ "$i" -ge "$n" ]; then exit 2; fi; '
                f'i=$((i + 1)); sleep {POLL_S:g}; done')


@dataclass(frozen=True)
class Gate:
    """One run's gate: its files' common path (``<workdir>/gate-<token>``), how many clones
    of the job arm it, and how long anything waits on it (seconds)."""

    path: str
    clones: int
    wait_s: float

    @property
    def go(self) -> str:
        return f"{self.path}.go"

    @property
    def stop_path(self) -> str:
        return f"{self.path}.stop"

    @property
    def armed(self) -> str:
        return f"{self.path}.armed"

    @property
    def polls(self) -> int:
        return max(1, math.ceil(self.wait_s / POLL_S))

    def prerun(self) -> str:
        """fio's ``--exec_prerun`` for the measured job (the trailing comment voids the
        redirection fio appends)."""
        return shlex.join(["sh", "-c", PRERUN_SCRIPT, "vmbench-gate", self.go, self.stop_path, self.armed,
                           str(self.polls)]) + " #"

    def armed_argv(self) -> list[str]:
        """Waits on the side until every clone of the job is armed."""
        return ["sh", "-c", ARMED_SCRIPT, "vmbench-armed", self.armed, str(self.clones), self.stop_path, str(self.polls)]

    def owns(self, name: str) -> bool:
        """Whether ``name`` (in the work directory) is one of this gate's files."""
        base = self.path.rsplit("/", 1)[-1]
        return name in (f"{base}.go", f"{base}.stop") or name.startswith(f"{base}.armed.")

    def run_armed(self, transport: Transport, run: Callable[[], T], before_open: Callable[[], None] | None) -> T:
        """``run`` fio (which arms this gate) while another thread waits until it is armed,
        calls ``before_open`` (e.g. a barrier shared by the round's sides) and opens it.  A
        side whose gate was never opened fails, whatever fio said: its fio did no I/O."""
        opener = _Opener(self, transport, before_open)
        thread = threading.Thread(target=opener, name=f"vmbench-gate-{transport.name}", daemon=True)
        thread.start()
        try:
            out = run()
        finally:  # fio ended: a gate not opened yet never will be (fio's own error, if any, goes first)
            opener.give_up()
            thread.join()
        if opener.error is not None:
            raise opener.error
        return out


class _Opener:
    """What the gate's thread does; ``error`` is what kept it from opening, if anything."""

    def __init__(self, gate: Gate, transport: Transport, before_open: Callable[[], None] | None) -> None:
        self.gate = gate
        self.transport = transport
        self.before_open = before_open
        self.opened = False
        self.error: BaseException | None = None
        self._lock = threading.Lock()
        self._stopped = False

    def __call__(self) -> None:
        try:
            self._wait_armed()
            if self.before_open is not None:
                self.before_open()
            with self._lock:
                if self._stopped:
                    raise VmbenchError(f"fio on {self.transport.name} ended before it was released")
                self.transport.write_file(self.gate.go, b"go\n", None)
                self.opened = True
        except BaseException as exc:  # noqa: BLE001 - handed to the run's thread
            self.error = exc
            self.give_up()

    def _wait_armed(self) -> None:
        done = self.transport.run(self.gate.armed_argv(), check=False, timeout=self.gate.wait_s + 60)
        if done.returncode == 3:
            raise VmbenchError(f"fio on {self.transport.name} ended before it was set up")
        if done.returncode != 0:
            raise VmbenchError(f"fio on {self.transport.name} was not set up (armed) within {self.gate.wait_s:g}s"
                               + (f": {done.stderr.strip()}" if done.stderr.strip() else ""),
                               hint="a starved guest may need more time: fewer VMs per host, or more memory and vCPUs")

    def give_up(self) -> None:
        """Stop the gate unless it was opened: fio's preruns and the wait end (best effort)."""
        with self._lock:
            if self.opened or self._stopped:
                return
            self._stopped = True
        try:
            self.transport.write_file(self.gate.stop_path, b"stop\n", None)
        except (VmbenchError, OSError) as exc:
            log.warning("could not stop fio's gate %s on %s: %s", self.gate.path, self.transport.name, exc)
