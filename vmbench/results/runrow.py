"""A stored run (a ``runs`` row) as a frozen record, like every other stored row
(:mod:`vmbench.results.records`): :meth:`RunRow.from_row` reads a row of any schema version,
:meth:`RunRow.to_row` writes the current one.  A run's row is made when it starts
(:meth:`RunRow.starting`); its environment and its end are written later, each as the columns
the record names (:meth:`RunRow.environment_columns`, :meth:`RunRow.end_columns`).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Mapping

from .environment import Environment
from .plan import StoredPlan, read_plan


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunRow:
    """A stored run: what ran, when, its recorded environment (:class:`Environment`, the
    stored mapping with its facts as attributes) and its plan as stored (``plan``: read).
    ``scenario_text`` is the scenario file as the run ran it (what a resume and a tune read
    again), ``vmbench_version`` the version that ran it."""

    id: int
    tag: str
    scenario_name: str
    scenario_path: str
    status: str
    started_at: str
    finished_at: str | None
    error: str | None
    environment: Environment
    plan_json: Mapping[str, Any]  # the plan as stored: read as ``plan``
    attempts: int = 1
    resumed_at: str | None = None
    scenario_text: str = ""
    vmbench_version: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.environment, Environment):  # a stored mapping, as read
            object.__setattr__(self, "environment", Environment.from_row(self.environment))

    @classmethod
    def starting(cls, *, tag: str, scenario_name: str, scenario_path: str, scenario_text: str,
                 plan: Mapping[str, Any], version: str) -> "RunRow":
        """A run that starts now: running, no environment recorded yet, its plan as stored
        (:meth:`vmbench.results.plan.StoredPlan.to_row`)."""
        return cls(id=0, tag=tag, scenario_name=scenario_name, scenario_path=scenario_path, status="running",
                   started_at=now(), finished_at=None, error=None, environment=Environment(), plan_json=plan,
                   scenario_text=scenario_text, vmbench_version=version)

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> "RunRow":
        """A stored row (the ``X_json`` columns as text)."""
        return cls(
            id=row["id"], tag=row["tag"], scenario_name=row["scenario_name"], scenario_path=row["scenario_path"],
            status=row["status"], started_at=row["started_at"], finished_at=row["finished_at"], error=row["error"],
            environment=Environment.from_row(json.loads(row["environment_json"] or "{}")),
            plan_json=json.loads(row["plan_json"] or "{}"), attempts=row["attempts"], resumed_at=row["resumed_at"],
            scenario_text=row["scenario_text"], vmbench_version=row["vmbench_version"])

    def to_row(self) -> dict[str, Any]:
        """The ``runs`` columns of the current schema (but ``id``)."""
        return dict(tag=self.tag, scenario_name=self.scenario_name, scenario_path=self.scenario_path,
                    scenario_text=self.scenario_text, plan_json=dict(self.plan_json), status=self.status, error=self.error,
                    started_at=self.started_at, finished_at=self.finished_at, vmbench_version=self.vmbench_version,
                    **self.environment_columns(self.environment), attempts=self.attempts, resumed_at=self.resumed_at)

    @staticmethod
    def environment_columns(environment: Environment) -> dict[str, Any]:
        """The columns that store a run's recorded environment."""
        return {"environment_json": environment.to_row()}

    @staticmethod
    def end_columns(status: str, error: str | None) -> dict[str, Any]:
        """The columns that store how a run ended (``ok``, ``failed``, ``interrupted``), now."""
        return {"status": status, "error": error, "finished_at": now()}

    @functools.cached_property
    def plan(self) -> StoredPlan:
        """The run's plan as stored (every version), read once."""
        return read_plan(self.plan_json)

    @property
    def tags(self) -> tuple[str, ...]:
        """The run tag of each attempt, first to last: a resumed attempt names what it makes
        with a tag of its own (recorded in its environment's ``attempts``)."""
        return (self.tag, *self.environment.later_tags)

    @property
    def tag_label(self) -> str:
        """``r1a2b3c4d``, or ``r1a2b3c4d, resumed as r5e6f7a8b`` for a resumed run."""
        first, *later = self.tags
        return first + (f", resumed as {', '.join(later)}" if later else "")
