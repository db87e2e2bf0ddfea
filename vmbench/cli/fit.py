"""Text that fits a terminal, as the report's does: prose wrapped to
:data:`~vmbench.report.textfit.WIDTH` columns, tables fitted to it
(:func:`~vmbench.report.textfit.fit_columns`: detail columns left out and named, long text
wrapped), or printed whole with ``wide``.  ``vmbench plan`` and ``vmbench doctor`` print
through it."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from typing import Iterable, Sequence

from ..report.textfit import WIDTH, fit_columns, simple_table


@dataclass(frozen=True)
class _Column:
    header: str
    detail: bool = False
    keep: bool = False


def wrapped(text: str, indent: str = "", rest: str | None = None, width: int | None = WIDTH) -> str:
    """``text`` wrapped to ``width`` (None: as is), its first line after ``indent``, the others
    after ``rest`` (default: two more spaces than ``indent``); words are never broken."""
    rest = indent + "  " if rest is None else rest
    if width is None:
        return indent + text
    return "\n".join(indent + line if len(indent) + len(line) <= width else
                     textwrap.fill(line, width, initial_indent=indent, subsequent_indent=rest, break_on_hyphens=False,
                                   break_long_words=False) for line in text.split("\n"))


def say(text: str, indent: str = "", rest: str | None = None, wide: bool = False) -> None:
    """Print ``text`` wrapped (:func:`wrapped`), or as is with ``wide``."""
    print(wrapped(text, indent, rest, None if wide else WIDTH))


def fitted(rows: Sequence[Sequence[object]], headers: Sequence[str], *, wide: bool = False, detail: Sequence[str] = (),
           keep: Sequence[str] = (), right: Sequence[str] = (), more: str = "--wide shows them") -> str:
    """A table in :data:`WIDTH` columns: the ``detail`` columns (by header) left out first and
    named under it (``more`` says how to see them), then long text wrapped, then columns left
    out from the right but the first two and those to ``keep``; with ``wide``, every column as
    is.  Columns named in ``right`` are right-aligned (numbers); nothing is read as a number."""
    cells = [["" if v is None else str(v) for v in row] for row in rows]
    kept: Sequence[int] = range(len(headers))
    wrap: Sequence[int | None] = [None] * len(headers)
    hidden: Sequence[str] = ()
    if not wide:
        fit = fit_columns([_Column(h, h in detail, h in keep) for h in headers], cells, WIDTH,
                          [_longest_word(row[i] for row in cells) for i in range(len(headers))])
        kept, wrap, hidden = fit.kept, fit.wrap, fit.hidden
    body = simple_table([[_wrap_cell(row[i], w) for i, w in zip(kept, wrap)] for row in cells], [headers[i] for i in kept],
                        [headers[i] in right for i in kept])
    if hidden:
        body += "\n" + wrapped(f"not shown, to fit {WIDTH} columns: {', '.join(hidden)} ({more})", "  ", "    ")
    return body


def _wrap_cell(text: str, width: int | None) -> str:
    """A cell wrapped to ``width`` after a space, a comma or a plus (a factorial cell's name:
    "bus=sata,cache=none,..."), never inside a word (tabulate's own wrapping cuts words and,
    like textwrap, is several times slower on a plan of 10,000 cells)."""
    if width is None or len(text) <= width:
        return text
    lines, line = [], ""
    for piece in _BREAKS.split(text):
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = piece
        else:
            line += piece
    return "\n".join(lines + [line.rstrip()])


#: after a space or a comma; after a plus only before a setting (``+cache=none``), so a host
#: key's base64 fingerprint, which holds pluses, stays whole
_BREAKS = re.compile(r"(?<=[ ,])|(?<=\+)(?=[a-z][a-z0-9_.-]*=)")


def _longest_word(cells: Iterable[str]) -> int:
    """The longest piece :func:`_wrap_cell` would not break, among ``cells``."""
    longest = 0
    for cell in cells:
        if len(cell) > longest:  # a cell no longer than the longest word has none longer
            longest = max(longest, max(map(len, _WORDS.findall(cell)), default=0))
    return longest


_WORDS = re.compile(r"(?:[^ ,+]|\+(?![a-z][a-z0-9_.-]*=))+[,+]?")  # what _wrap_cell keeps on one line


#: an error's first line is shorter than this ("error: " included); the rest follows it
FIRST_LINE = 160


def error_lines(message: str, hint: str | None = None) -> list[str]:
    """An error as the command prints it: "error: " and the message's first clause, under
    :data:`FIRST_LINE` characters (cut after a "; ", ": " or ", " when longer), the rest of
    the message below it, then "hint: " and the hint, each wrapped to :data:`WIDTH` columns."""
    first, _, more = message.partition("\n")
    head = "error: " + first
    if len(head) >= FIRST_LINE:
        cut = max(head.rfind(sep, 0, FIRST_LINE - 1) for sep in ("; ", ": ", ", "))
        cut = cut if cut > len("error: ") else head.rfind(" ", 0, FIRST_LINE - 1)
        head, rest = head[:cut + 1].rstrip(), head[cut + 1:].strip()
        more = rest + ("\n" + more if more else "")
    out = [head] if len(head) < FIRST_LINE else [wrapped(head, rest="  ")]
    out += [wrapped(line, "  ", "  ") for line in more.split("\n") if line.strip()]
    if hint:
        out += [wrapped(f"hint: {line}" if i == 0 else line, "" if i == 0 else "  ", "  ") for i, line in enumerate(hint.split("\n"))]
    return "\n".join(out).split("\n")
