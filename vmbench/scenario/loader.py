"""Scenario YAML -> :class:`~vmbench.scenario.model.Scenario`, validated fully.

Everything a user can get wrong is refused here, before anything is provisioned, with one
message naming the file, the line, the key and the allowed values.

The sections are read by the modules next to this one: hosts (hypervisor, storage), axes and
vm (VM settings), matrix (cells), stacks, jobs and targets; parsers holds the small shared ones.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import ScenarioError
from .axes import VM_AXES
from .hosts import _hypervisor, _storage
from .jobs import _check_jobs_vs_stacks, _jobs, _resolve_sizes
from .matrix import _cells
from .model import Scenario, VmConfig
from .reader import Context, Section, as_bool, as_int, as_name, as_str, load_yaml
from .stacks import _stacks
from .targets import _crypto, _targets
from .vm import _check_vm, _vm, vm_problems

__all__ = ["load_scenario", "parse_scenario", "vm_problems", "VM_AXES"]

TOP_KEYS = (
    "name", "description", "template", "hypervisor", "storage", "vm", "vary", "mode", "cells",
    "journey", "jobs", "stacks", "targets", "repeats", "host_baseline", "crypto_benchmark",
)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file."""
    path = Path(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such scenario file", "scenarios/ has examples to copy") from None
    except OSError as exc:
        raise ScenarioError(f"{path}: cannot read: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ScenarioError(f"{path}: not a text file (it is not UTF-8)") from None
    return parse_scenario(text, str(path), base_dir=path.parent)


def parse_scenario(text: str, filename: str = "<scenario>", base_dir: Path | None = None) -> Scenario:
    ctx = Context(filename)
    data = load_yaml(text, filename)
    top = Section(ctx, data, "", 1)
    if not isinstance(data, dict):
        raise ctx.fail("", 1, "a scenario is a mapping of keys (name, vm, jobs, ...)")

    name = top.get("name", as_name, Path(filename).stem if filename != "<scenario>" else "scenario")
    description = top.get("description", as_str, "")
    template = top.get("template", as_name, "debian12")
    hypervisor = _hypervisor(top.section("hypervisor"))
    storage = _storage(top.section("storage"))
    baseline = _vm(top.section("vm"), VmConfig())
    _check_vm(top, "vm", baseline, hypervisor)
    repeats = top.get("repeats", as_int(1, 100), 1)
    host_baseline = top.get("host_baseline", as_bool, True)

    stacks = _stacks(ctx, top)
    stacks_by_name = {s.name: s for s in stacks}
    jobs = _jobs(ctx, top, base_dir or Path("."))

    cells, mode, skipped = _cells(ctx, top, baseline, hypervisor, stacks, stacks_by_name)
    jobs = _resolve_sizes(ctx, top, jobs, cells, storage, stacks)
    _check_jobs_vs_stacks(ctx, top, jobs, stacks)
    targets = _targets(ctx, top, jobs, stacks, cells)
    crypto = _crypto(top, stacks)
    top.done(TOP_KEYS)

    return Scenario(
        name=name,
        path=filename,
        text=text,
        description=description,
        hypervisor=hypervisor,
        storage=storage,
        template=template,
        baseline=baseline,
        cells=cells,
        jobs=tuple(jobs),
        stacks=tuple(stacks),
        targets=tuple(targets),
        repeats=repeats,
        host_baseline=host_baseline,
        plan_mode=mode,
        crypto_benchmark=crypto,
        skipped_cells=skipped,
    )
