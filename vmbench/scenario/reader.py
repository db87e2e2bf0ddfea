"""Reading YAML with line numbers, and walking it with messages that name file, key and line.

``load_yaml`` returns plain dicts/lists whose mappings remember the line of each key.
``Section`` takes keys one by one with a parser each and, at ``done()``, refuses any key
nobody took, suggesting the closest known one.
"""

from __future__ import annotations

import difflib
import math
import re
from typing import Any, Callable, Iterable, TypeVar

import yaml

from ..errors import ScenarioError

T = TypeVar("T")
_MISSING = object()


class LineDict(dict):
    """A dict that knows the YAML line (1-based) of itself and of each key."""

    line: int = 0
    key_lines: dict

    def line_of(self, key: str) -> int:
        return self.key_lines.get(key, self.line)


class LineList(list):
    line: int = 0
    item_lines: list


class _Loader(yaml.SafeLoader):
    pass


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LineDict:
    loader.flatten_mapping(node)
    out = LineDict()
    out.line = node.start_mark.line + 1
    out.key_lines = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise yaml.constructor.ConstructorError(None, None, "keys must be plain words", key_node.start_mark)
        key = str(key) if not isinstance(key, str) else key
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
        out.key_lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LineList:
    out = LineList(loader.construct_object(child, deep=True) for child in node.value)
    out.line = node.start_mark.line + 1
    out.item_lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def load_yaml(text: str, filename: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{filename}:{mark.line + 1}" if mark else filename
        raise ScenarioError(f"{where}: not valid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ScenarioError(f"{filename}: not valid YAML: {exc}") from None


class Context:
    """Where we are in the file: for error messages."""

    def __init__(self, filename: str) -> None:
        self.filename = filename

    def fail(self, path: str, line: int, message: str, hint: str | None = None) -> ScenarioError:
        where = f"{self.filename}:{line}" if line else self.filename
        key = f" {path}:" if path else ""
        return ScenarioError(f"{where}:{key} {message}", hint)


def join(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


class Section:
    """A mapping in the scenario, read key by key."""

    def __init__(self, ctx: Context, data: Any, path: str, line: int = 0) -> None:
        self.ctx = ctx
        self.path = path
        if data is None:
            data = LineDict()
            data.line, data.key_lines = line, {}
        if not isinstance(data, dict):
            raise ctx.fail(path, getattr(data, "line", line), f"must be a mapping of keys to values, not {_kind(data)}")
        self.data = data
        self.line = getattr(data, "line", line)
        self.taken: set[str] = set()

    def line_of(self, key: str) -> int:
        if isinstance(self.data, LineDict):
            return self.data.line_of(key)
        return self.line

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self.taken.add(key)
        if key not in self.data:
            if default is _MISSING:
                close = difflib.get_close_matches(key, [str(k) for k in self.data if k not in self.taken], n=1)
                if close:  # a misspelt required key is named as the mistake, not as a missing key
                    raise self.unknown(close[0], [key])
                raise self.ctx.fail(join(self.path, key), self.line, "is required")
            return default
        return self.data[key]

    def get(self, key: str, parse: Callable[[Any], T], default: Any = _MISSING, *, hint: str | None = None) -> T:
        """Parse ``key`` with ``parse`` (which raises ValueError with a reason)."""
        value = self.raw(key, default)
        if key not in self.data:
            return value
        try:
            return parse(value)
        except ScenarioError:
            raise
        except (ValueError, TypeError) as exc:
            raise self.fail(key, str(exc), hint) from None

    def section(self, key: str, required: bool = False) -> "Section":
        value = self.raw(key, _MISSING if required else None)
        return Section(self.ctx, value, join(self.path, key), self.line_of(key))

    def fail(self, key: str, message: str, hint: str | None = None) -> ScenarioError:
        return self.ctx.fail(join(self.path, key), self.line_of(key), message, hint)

    def done(self, known: Iterable[str] | None = None) -> None:
        """Refuse keys nobody took (with ``known``: keys not in it, taken or not, so a section can
        refuse its unknown keys before it reads any); ``known`` (default: the taken ones) feeds
        suggestions."""
        allowed = sorted(set(known) if known is not None else self.taken)
        for key in self.data:
            if key not in self.taken and (known is None or key not in allowed):
                raise self.unknown(str(key), allowed)

    def unknown(self, key: str, allowed: Iterable[str]) -> ScenarioError:
        """``key`` is not one of ``allowed``: the closest one named in the message, every one in the hint."""
        allowed = sorted(allowed)
        close = difflib.get_close_matches(key, allowed, n=1)
        return self.ctx.fail(join(self.path, key), self.line_of(key),
                             "unknown key" + (f"; did you mean {close[0]!r}?" if close else " (vmbench reads no such key here)"),
                             f"allowed here: {', '.join(allowed) or '(none)'}")


def items(ctx: Context, data: Any, path: str, line: int) -> list[tuple[str, int, Any]]:
    """The elements of a YAML list as (path, line, value); a non-list is refused."""
    if data is None:
        return []
    if not isinstance(data, list):
        raise ctx.fail(path, getattr(data, "line", line), f"must be a list, not {_kind(data)}")
    lines = getattr(data, "item_lines", [line] * len(data))
    return [(join(path, i), lines[i], v) for i, v in enumerate(data)]


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"the text {value!r}"
    if value is None:
        return "empty"
    return f"{value!r}"


# ---- value parsers (raise ValueError with the reason) -----------------------------------


def as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("on", "yes", "true", "1"):
        return True
    if isinstance(value, str) and value.lower() in ("off", "no", "false", "0"):
        return False
    raise ValueError(f"{value!r} is not one of: true, false")


def as_int(lo: int | None = None, hi: int | None = None) -> Callable[[Any], int]:
    def parse(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a whole number")
        if lo is not None and value < lo:
            raise ValueError(f"{value} is below the minimum {lo}")
        if hi is not None and value > hi:
            raise ValueError(f"{value} is above the maximum {hi}")
        return value

    return parse


def as_float(lo: float | None = None) -> Callable[[Any], float]:
    def parse(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ValueError(f"{value!r} is not a number")
        if lo is not None and value < lo:
            raise ValueError(f"{value} is below the minimum {lo}")
        return float(value)

    return parse


def as_str(value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{value!r} is not a non-empty text")
    return value.strip()


def as_name(value: Any) -> str:
    """A name used in reports and resource names: letters, digits, - _ . = + ,"""
    text = as_str(value)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._=+,-]{0,63}", text):
        raise ValueError(f"{text!r} is not a valid name (letters, digits and . _ = + , - ; at most 64)")
    return text


def as_str_list(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        return tuple(value.split())
    if not isinstance(value, list) or not all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{value!r} is not a list of words")
    return tuple(str(v) for v in value)
