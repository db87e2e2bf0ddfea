"""The page's figures: what to draw (:class:`Drawing`) and who draws it (a :class:`Painter`).

A drawing names one plot function of :mod:`vmbench.report.plots` or
:mod:`vmbench.report.loadplots` and its arguments (plain values: table records, histogram bins,
numbers); drawing it gives a :class:`Plot`, its SVG made by matplotlib.  The sections of a page
(:mod:`vmbench.report.sections`) say what to draw without importing matplotlib, so that the
drawing can happen elsewhere:

- :data:`IN_PROCESS` draws in this process, one figure after the other;
- :func:`painter` starts worker processes before the run is read: each imports matplotlib (about
  a third of a second) while this process reads the database and makes the tables, then they
  draw the page's figures side by side (ten figures of a large run took 0.6-0.7 s one after the
  other).  Only where the process may run on more than one core and can fork (Linux); else it
  draws in this process.

The SVG is the same either way: a plot function's output depends on its arguments only.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Literal, Protocol, Sequence

#: the modules whose functions a drawing names (each imports matplotlib)
PlotModule = Literal["plots", "loadplots"]
#: worker processes at most: a page has ten figures or so, each a tenth of a second or less
MAX_WORKERS = 4
#: how much less a worker's claim on a core weighs than the page's process: while the workers
#: import matplotlib, reading the run (which their drawings wait for) comes first
WORKER_NICENESS = 5
#: (times in s, values) of a series drawn over time; empty: none in that phase
Line = tuple[Sequence[float], Sequence["float | None"]]


@dataclass(frozen=True)
class Plot:
    title: str
    svg: str  # an <svg> element, no XML prologue
    alt: str  # the text alternative shown next to it


@dataclass(frozen=True)
class Drawing:
    """``module.function(*args)``: one figure, drawn by a :class:`Painter`."""

    module: PlotModule
    function: str
    args: tuple[Any, ...]


def draw(drawing: Drawing) -> Plot:
    """The drawing's plot, drawn in this process."""
    # the one import of the plot modules, by name: a process that only says what to draw never loads matplotlib
    module = importlib.import_module(f"{__package__}.{drawing.module}")
    plot = getattr(module, drawing.function)(*drawing.args)
    assert isinstance(plot, Plot), f"{drawing.module}.{drawing.function} gave {type(plot).__name__}, not a Plot"
    return plot


class Painter(Protocol):
    def start(self, drawings: Sequence[Drawing]) -> Callable[[], list[Plot]]:
        """Start drawing; the function returned gives each drawing's plot, in order, when they
        are drawn (the caller does other work meanwhile)."""
        ...


class InProcess:
    """Draws in this process, one figure after the other, when the plots are asked for."""

    def start(self, drawings: Sequence[Drawing]) -> Callable[[], list[Plot]]:
        return lambda: [draw(d) for d in drawings]


IN_PROCESS = InProcess()


def _load_plot_modules() -> None:
    """A worker's start: Ctrl-C left to the page's process (which stops the pool: no worker
    prints a traceback), matplotlib and the plot modules imported before the first drawing."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.nice(WORKER_NICENESS)
    for name in ("plots", "loadplots"):
        importlib.import_module(f"{__package__}.{name}")


def _ready() -> None:
    """The first task: submitting it forks the workers."""


class WorkerPool:
    """Draws in ``workers`` processes forked when it is made (they import matplotlib then)."""

    def __init__(self, workers: int) -> None:
        self._pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                         initializer=_load_plot_modules)
        self._pool.submit(_ready)  # with fork, the first task starts every worker, now

    def start(self, drawings: Sequence[Drawing]) -> Callable[[], list[Plot]]:
        try:
            futures = [self._pool.submit(draw, d) for d in drawings]
        except BrokenProcessPool:  # a worker was killed (out of memory, a signal): drawn here instead
            return IN_PROCESS.start(drawings)

        def plots() -> list[Plot]:
            try:
                return [f.result() for f in futures]
            except BrokenProcessPool:  # killed while drawing
                return IN_PROCESS.start(drawings)()
        return plots

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, which a container or taskset narrows)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


@contextmanager
def painter(workers: int | None = None) -> Iterator[Painter]:
    """A :class:`WorkerPool` of ``workers`` (default: the usable cores, at most
    :data:`MAX_WORKERS`) for the block, where there are two or more and the process can fork;
    else :data:`IN_PROCESS`."""
    count = min(usable_cores(), MAX_WORKERS) if workers is None else workers
    if count < 2 or "fork" not in multiprocessing.get_all_start_methods():
        yield IN_PROCESS
        return
    pool = WorkerPool(count)
    try:
        yield pool
    finally:
        pool.close()
