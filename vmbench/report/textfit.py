"""Fitting a table into a terminal's width: which columns to keep, which to wrap and to what
width; and laying it out as tabulate's "simple" format.  No import beyond the standard
library, so the command's plans and checks (``vmbench plan``, ``vmbench doctor``) fit and lay
out their tables as the report does without loading the report.
:mod:`vmbench.report.render` fits the report's tables with it."""

from __future__ import annotations

import math
import re
import textwrap
from dataclasses import dataclass
from typing import Callable, Protocol, Sequence

#: the width the text report, plans and checks fit (a 120-column terminal) unless asked for ``wide``
WIDTH = 120
#: tabulate's room beside a header (its ``MIN_PADDING``)
HEADER_PAD = 2
#: a wrapped text column keeps at least this many characters a line
MIN_WRAP = 16


class FitColumn(Protocol):
    """What fitting reads of a column (:class:`vmbench.report.tables.Column` is one)."""

    @property
    def header(self) -> str: ...

    @property
    def detail(self) -> bool: ...

    @property
    def keep(self) -> bool: ...


@dataclass(frozen=True)
class Fit:
    """How a table is printed in a terminal: the columns kept (indexes), the width each text
    column is wrapped to (None: as is) and the headers of the columns left out."""
    kept: tuple[int, ...]
    wrap: tuple[int | None, ...]
    hidden: tuple[str, ...]


def fit_columns(columns: Sequence[FitColumn], cells: Sequence[Sequence[str]], width: int,
                floors: Sequence[int] = ()) -> Fit:
    """Fit a table into ``width`` columns: leave out its detail columns from the right, then
    wrap its longest text columns (to no less than :data:`MIN_WRAP`, nor than a column's
    ``floors``: its longest word, where words are never cut), then leave out more columns
    from the right (never the first two, never one to keep) until it fits."""
    widths = [max([len(c.header) + HEADER_PAD] + [len(row[i]) for row in cells]) for i, c in enumerate(columns)]
    kept = list(range(len(widths)))

    def total(w: Sequence[int]) -> int:
        return sum(w[i] for i in kept) + 2 * (len(kept) - 1)

    for i in reversed(range(len(widths))):
        if total(widths) > width and columns[i].detail:
            kept.remove(i)
    wrapped = list(widths)
    floor = [max(MIN_WRAP, len(c.header) + HEADER_PAD, floors[i] if i < len(floors) else 0) for i, c in enumerate(columns)]
    while total(wrapped) > width:
        shrinkable = [k for k in kept if wrapped[k] > floor[k]]
        if not shrinkable:
            break
        i = max(shrinkable, key=lambda k: wrapped[k])
        wrapped[i] = max(floor[i], wrapped[i] - (total(wrapped) - width))
    for i in reversed(kept[2:]):
        if total(wrapped) > width and not columns[i].keep:
            kept.remove(i)
    wrap = tuple(wrapped[i] if wrapped[i] < widths[i] else None for i in kept)
    return Fit(tuple(kept), wrap, tuple(columns[i].header for i in range(len(widths)) if i not in kept))


#: what :func:`text_table` leaves to tabulate itself: control characters (tabs, colour codes,
#: tabulate's separating line, line breaks other than ``\n``), whose widths and wrapping it
#: treats apart
_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def text_table(rows: Sequence[Sequence[str]], headers: Sequence[str], maxcolwidths: Sequence[int | None]) -> str | None:
    """``tabulate(rows, headers, tablefmt="simple", disable_numparse=True, maxcolwidths=...)``
    byte for byte, for text cells: each cell of a column with a width wrapped as tabulate wraps
    it (a "False" there read as a bool, as tabulate does: "True"), cells stripped, every column
    left-aligned and as wide as its longest line or its header and two.  Written here because
    tabulate guesses every cell's type and wraps every cell that fits, 0.8 s of the text report
    of 1,000 cells.  None for what tabulate treats apart (no rows, control characters): the
    caller asks tabulate.  Unlike tabulate, a number with thousands separators in a wrapped
    column is text (tabulate's int("43,341") raised: the text report of a run whose layer table
    holds a file job's ops/s stopped with a traceback)."""
    if not rows or any(_CONTROL.search(cell) for row in rows for cell in row) or any(_CONTROL.search(h) for h in headers):
        return None
    wrappers = [None if w is None else _TabulateWrap(width=w, break_long_words=True, break_on_hyphens=True) for w in maxcolwidths]
    if any(wrappers):
        rows = _wrapped_rows(rows, wrappers)
    multiline = any("\n" in cell for row in rows for cell in row) or any("\n" in h for h in headers)
    stripped = [[cell.strip() for cell in row] for row in rows]
    if multiline:  # tabulate gives a row of blank cells no line when any cell holds several
        stripped = [row for row in stripped if any(row)]
    return simple_table(stripped, headers)


def simple_table(rows: Sequence[Sequence[str]], headers: Sequence[str], right: Sequence[bool] = ()) -> str:
    """tabulate's "simple" layout of cells as they are, each line of a cell on a line of its own:
    the headers, a rule of dashes, the rows; two spaces between columns, each as wide as its
    longest line or its header and two; the columns flagged in ``right`` (numbers) right-aligned,
    their headers too, the others left-aligned; trailing spaces dropped.  Neither reads, wraps
    nor strips a cell (:func:`text_table` does, as tabulate; :func:`vmbench.cli.fit.fitted`
    wraps its own).  Written here because tabulate guesses every cell's type even when told
    not to read numbers (a third of ``vmbench plan``'s time on 10,000 cells)."""
    lines = [[cell.split("\n") for cell in row] for row in rows]
    head = [h.split("\n") for h in headers]
    widths = [max(max(map(len, h)) + HEADER_PAD, max((len(line) for row in lines for line in row[i]), default=0))
              for i, h in enumerate(head)]
    pads = [str.rjust if i < len(right) and right[i] else str.ljust for i in range(len(widths))]
    out = _lines(head, widths, pads) + ["  ".join("-" * w for w in widths)]
    for row in lines:
        out += _lines(row, widths, pads)
    return "\n".join(out)


def _lines(cells: Sequence[Sequence[str]], widths: Sequence[int], pads: Sequence[Callable[[str, int], str]]) -> list[str]:
    """The text lines of one table row of cell lines, each padded to its column's width, a short
    cell's missing lines blank."""
    n = max(map(len, cells))
    return ["  ".join(pad(c[i], w) if i < len(c) else " " * w for c, w, pad in zip(cells, widths, pads)).rstrip()
            for i in range(n)]


def _wrapped_rows(rows: Sequence[Sequence[str]], wrappers: Sequence["_TabulateWrap | None"]) -> list[list[str]]:
    """The rows with each cell of a column with a wrapper wrapped as tabulate wraps it."""
    out = []
    for row in rows:
        cells = list(row)
        for i, w in enumerate(wrappers[:len(cells)]):
            if w is not None:
                cells[i] = _wrapped(_as_tabulate_reads(cells[i]), w)
        out.append(cells)
    return out


def _as_tabulate_reads(cell: str) -> str:
    """A cell of a wrapped column as tabulate reads it before wrapping it: as a number where it
    is one, else through the type it guesses (a "False" is a bool, ``str(bool("False"))``: "True";
    digits too large for a float an int); a number with thousands separators, which tabulate
    fails to read, as it is."""
    if cell in ("True", "False"):
        return "True"
    first = cell.strip()[:1]
    if not first or (first.isascii() and first not in _NUMBER_STARTS):
        return cell  # float() would refuse it (and raising costs more than this test)
    try:
        number = float(cell)
    except ValueError:
        pass
    else:
        if not (math.isinf(number) or math.isnan(number)) or cell.lower() in ("inf", "-inf", "nan"):
            return cell
    if _THOUSANDS.match(cell):
        return cell
    try:
        return str(int(cell))
    except ValueError:
        return cell


#: what a number float() reads can start with, but for a non-ASCII digit (whitespace stripped)
_NUMBER_STARTS = frozenset("0123456789+-.iInN")
#: tabulate's number with thousands separators (which it then fails to read as an int)
_THOUSANDS = re.compile(r"^(([+-]?[0-9]{1,3})(?:,([0-9]{3}))*)?(?(1)\.[0-9]*|\.[0-9]+)?$")


def _wrapped(cell: str, wrapper: "_TabulateWrap") -> str:
    """A cell as tabulate's ``maxcolwidths`` wraps it: each non-blank line wrapped; a line that
    fits and ends in no whitespace is itself (what textwrap gives it, without the work)."""
    lines = []
    width = wrapper.width
    for line in cell.splitlines():
        if not line.strip():
            continue
        if len(line) <= width and not line[-1].isspace():
            lines.append(line)
        elif _WORDS.fullmatch(line) and not _HYPHEN_BREAK.search(line) and max(map(len, words := line.split(" "))) <= width:
            lines.append(_greedy(words, width))
        else:
            lines.append("\n".join(wrapper.wrap(line)))
    return "\n".join(lines)


#: words each after one space, none with a hyphen textwrap may break after (between letters,
#: or a dash of two): textwrap fills their lines greedily (:func:`_greedy`)
_WORDS = re.compile(r"\S+(?: \S+)*")
_HYPHEN_BREAK = re.compile(r"[^\d\W]-[^\d\W]|--")


def _greedy(words: Sequence[str], width: int) -> str:
    """``words`` on lines of at most ``width`` (none longer), as many on a line as fit, one
    space between them: what textwrap makes of them, without its chunking (the report wraps
    17,000 cells of 1,000 cells' tables)."""
    lines, line = [], words[0]
    for word in words[1:]:
        if len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    lines.append(line)
    return "\n".join(lines)


class _TabulateWrap(textwrap.TextWrapper):
    """textwrap as tabulate wraps a cell: a word longer than the line is cut at the line's end,
    never after a hyphen in it."""

    def _handle_long_word(self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int) -> None:
        space_left = 1 if width < 1 else width - cur_len
        if self.break_long_words and space_left > 0:
            chunk = reversed_chunks[-1]
            cur_line.append(chunk[:space_left])
            reversed_chunks[-1] = chunk[space_left:]
        elif not cur_line:
            cur_line.append(reversed_chunks.pop())
