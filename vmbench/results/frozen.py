"""A stored JSON object read back as a frozen, read-only mapping (:class:`FrozenMapping`): what
:class:`~vmbench.results.environment.Environment` and
:class:`~vmbench.results.vmsettings.Settings` are, each with the attributes its readers use.
Other values make a new one, never an edit."""

from __future__ import annotations

from typing import Any, ItemsView, Iterator, KeysView, Mapping, TypeVar, ValuesView

V = TypeVar("V")


class FrozenMapping(Mapping[str, V]):
    """The stored object's keys and values, as stored (``dict(m)`` is what a row stores), read
    from its dict directly: a report reads a run's mappings many times over, and the generic
    :class:`~collections.abc.Mapping` methods would go through ``__getitem__`` each time."""

    __slots__ = ("_stored",)
    _stored: dict[str, V]

    def __init__(self, stored: Mapping[str, V] | None = None) -> None:
        object.__setattr__(self, "_stored", dict(stored or {}))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only: {name} cannot be set (make a new one)")

    def __getitem__(self, key: str) -> V:
        return self._stored[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._stored)

    def __len__(self) -> int:
        return len(self._stored)

    def __contains__(self, key: object) -> bool:
        return key in self._stored

    def get(self, key: str, default: Any = None) -> Any:
        return self._stored.get(key, default)

    def keys(self) -> KeysView[str]:
        return self._stored.keys()

    def items(self) -> ItemsView[str, V]:
        return self._stored.items()

    def values(self) -> ValuesView[V]:
        return self._stored.values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenMapping):
            return self._stored == other._stored
        return self._stored == dict(other.items()) if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to a dict of the same items, and as unhashable

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._stored!r})"

    def __reduce__(self) -> tuple[type, tuple[dict[str, V]]]:
        return type(self), (self._stored,)  # copied and pickled as a new one of the same items
