"""Which stored settings trade safety for speed (:class:`~vmbench.advice.model.Risk`).

Pure: a cell's stored settings (``settings_of(vm)`` keys) or a stack's LUKS layer in,
the risks it carries out.  A change carries the risks of the values it sets (``after``): a
change that keeps ``cache=writeback`` as it was does not carry it, one that sets it does.
What each risk costs, in words, is :data:`~vmbench.advice.model.RISKS`.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Sequence

from ..results.plan import PlannedStack, scenario_perf_flags
from ..results.records import CellRecord
from ..report.zfsfacts import effective_properties, risky, risky_properties
from .model import RISKS, Change, Risk

#: the dm-crypt flags that run encryption in the submitting context (a LUKS layer's perf_flags)
CRYPT_FLAGS = ("no_read_workqueue", "no_write_workqueue")


#: (stored setting, value) -> the risk that value carries: one row per risky setting
VALUE_RISKS: Mapping[tuple[str, str], Risk] = {
    ("cache", "unsafe"): Risk.CACHE_UNSAFE,
    ("cache", "writeback"): Risk.CACHE_WRITEBACK,
}
#: a ZFS property whose value :func:`~vmbench.report.zfsfacts.risky` judges risky -> its risk
ZFS_RISKS: Mapping[str, Risk] = {"sync": Risk.ZFS_SYNC_DISABLED, "checksum": Risk.ZFS_CHECKSUM_OFF, "dedup": Risk.ZFS_DEDUP}


def value_risks(key: str, value: object) -> tuple[Risk, ...]:
    """The risks of one stored setting ``key`` at ``value``."""
    text = str(value).strip().lower() if value is not None else ""
    if key == "perf_flags" and any(f in text for f in CRYPT_FLAGS):
        return (Risk.CRYPT_NO_WORKQUEUE,)
    if key in ZFS_RISKS:
        return (ZFS_RISKS[key],) if risky(key, text) else ()
    risk = VALUE_RISKS.get((key, text))
    return (risk,) if risk is not None else ()


def setting_risks(settings: Mapping[str, object]) -> tuple[Risk, ...]:
    """Every risk a cell's stored settings carry (in :class:`Risk` order)."""
    found = {r for k, v in settings.items() for r in value_risks(k, v)}
    return tuple(r for r in Risk if r in found)


def change_risks(changes: Iterable[Change], stack_flags: Mapping[str, Sequence[str]] | None = None) -> tuple[Risk, ...]:
    """The risks the values a change sets carry; a stack or layer change carries the dm-crypt
    risk when the stack it moves to has workqueue flags (``stack_flags``: by stack name)."""
    found: set[Risk] = set()
    flags = stack_flags or {}
    for c in changes:
        found.update(value_risks(c.axis, c.after))
        if c.axis in ("stack", "stacks", "layer"):
            for name in _names(c.after if c.axis != "layer" else c.before):
                if any(f in CRYPT_FLAGS for f in flags.get(name, ())):
                    found.add(Risk.CRYPT_NO_WORKQUEUE)
    return tuple(r for r in Risk if r in found)


def _names(value: object) -> list[str]:
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [] if value is None else [str(value)]


def volume_risk_notes(cells: Sequence[CellRecord]) -> list[str]:
    """What the run's zvols or datasets carried that trades safety away, set on them or
    inherited from a parent dataset (``zfs-sync-disabled: ...``)."""
    return [f"{ZFS_RISKS[prop].value}: the volumes had {prop}={value} "
            + (f"inherited {src}" if src else "set on them") + f"; {RISKS[ZFS_RISKS[prop]]}"
            for prop, value, src, _ in risky_properties(effective_properties(cells)) if prop in ZFS_RISKS]


def allowed(risks: Iterable[Risk], allow: Iterable[Risk]) -> bool:
    """Every risk was allowed by name (no risk: allowed)."""
    ok = set(allow)
    return all(r in ok for r in risks)


def describe(risks: Iterable[Risk]) -> tuple[str, ...]:
    """Each risk in words, as :data:`RISKS` says it."""
    return tuple(RISKS[r] for r in risks)


def stack_flags(stacks: Sequence[PlannedStack], scenario_text: str = "") -> dict[str, tuple[str, ...]]:
    """Each stack's dm-crypt perf_flags: from the plan's stacks (``luks.perf_flags``) where it
    stores them, else read from the scenario text as run (its ``stacks:`` section; a text that
    does not parse gives none)."""
    out: dict[str, tuple[str, ...]] = {}
    for st in stacks:
        if st.luks is not None and st.luks.perf_flags:
            out[st.name] = st.luks.perf_flags
    return out or scenario_perf_flags(scenario_text)
