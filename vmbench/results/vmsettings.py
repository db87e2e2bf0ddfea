"""A VM's settings as stored (:class:`Settings`): a cell's, a boot's or a measurement's
``settings_json``, a frozen read-only mapping (axis key -> stored value, in axis order) whose
values read back typed through the axis table (:mod:`vmbench.scenario.axes`)."""

from __future__ import annotations

import functools
import json
from typing import Any, Mapping

from ..scenario.axes import AXIS_BY_SETTING
from ..scenario.model import VmConfig
from ..settings import Cache
from .frozen import FrozenMapping


@functools.lru_cache(maxsize=4096)
def _typed(key: str, _kind: str, value: object) -> object:
    """:meth:`Settings.typed` of a stored value: the same for every row that stores it (a
    run's thousands of rows share a handful), read back once."""
    axis = AXIS_BY_SETTING[key]
    if axis.from_stored is None:
        return None
    try:
        return axis.value(axis.from_stored(VmConfig(), value))
    except (ValueError, TypeError):
        return None


class Settings(FrozenMapping[object]):
    """A VM's settings as stored (``settings_of(vm)``: axis key -> stored value, in axis order),
    read-only: a mapping as stored (``dict(settings)`` is what a row stores), with the values
    read back typed through the axis table: :meth:`typed` (and the properties of the settings
    the report interprets).  Other settings are a new record, never an edit."""

    __slots__ = ()

    @classmethod
    def of(cls, stored: Mapping[str, object] | None) -> "Settings":
        return stored if isinstance(stored, Settings) else cls(stored)

    def value(self, key: str) -> object:
        """The stored value of axis ``key`` (None: not stored: left to the default, or stored
        before the axis existed)."""
        return self._stored.get(key)

    def typed(self, key: str) -> object:
        """Axis ``key``'s stored value read back as the scenario holds it (a :class:`Cache`, a
        flag, a number...); None when not stored or not one of the axis's values."""
        value = self._stored.get(key)
        if value is None or key not in AXIS_BY_SETTING:
            return None
        try:
            return _typed(key, type(value).__name__, value)  # the type too: 1, 1.0 and True are one key to a cache
        except TypeError:  # a value no cache can hold (a list): read back each time
            return _typed.__wrapped__(key, type(value).__name__, value)

    def is_setting_of(self, key: str, vm: VmConfig) -> bool:
        """Whether axis ``key``'s stored value is ``vm``'s: read back typed and compared; a
        value that does not read back as one of the axis's, as stored."""
        axis, typed = AXIS_BY_SETTING.get(key), self.typed(key)
        if axis is not None and typed is not None:
            return typed == axis.value(vm)
        return str(self._stored.get(key)) == str(axis.setting(vm) if axis is not None else None)

    @property
    def cache(self) -> Cache | None:
        """QEMU's cache mode (None: not stored, or not a mode)."""
        got = self.typed("cache")
        return got if isinstance(got, Cache) else None

    @property
    def memory_mib(self) -> int | None:
        got = self._stored.get("memory_mib")
        return None if got is None else int(str(got))

    @property
    def cpu(self) -> str | None:
        """The CPU as its label stores it ("kvm64+aes")."""
        got = self._stored.get("cpu")
        return None if got is None else str(got)


@functools.lru_cache(maxsize=1024)
def _settings(text: str) -> Settings:
    """Settings by their stored text: the rows of a run share a handful, each decoded once."""
    return Settings(json.loads(text) if text else {})


def settings_of_row(row: Mapping[str, Any]) -> Settings:
    """A stored row's settings (its ``settings_json`` text, or decoded under ``settings``)."""
    value = row.get("settings_json", row.get("settings"))
    return _settings(value) if isinstance(value, str) else Settings.of(value)
