"""Something a run created and did not remove (found by ``vmbench cleanup``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Leftover:
    kind: str  # "domain", "volume", "file"
    name: str
    run_tag: str
    detail: str = ""
