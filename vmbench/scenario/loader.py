"""Scenario YAML -> :class:`~vmbench.scenario.spec.Scenario`, validated fully.

Everything a user can get wrong is refused here, before anything is provisioned, with one
message naming the file, the line, the key and the allowed values.

The sections are read by the modules next to this one: hosts (hypervisor, storage), axes and
vm (VM settings), matrix (cells), stacks, jobs and targets, load (many VMs), tune (tune: and
advise:); parsers holds the small shared ones.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Sequence

from ..errors import ScenarioError
from ..fio.job import FioJob
from ..settings import Telemetry
from .axes import STORAGE_AXES, VM_AXES, changed_axes
from .backend import Storage, storage_problems
from .hosts import read_hypervisor, read_storage, driver_storage_problems
from .jobs import check_jobs_vs_stacks, read_jobs, resolve_sizes
from .matrix import read_cells
from .model import Cell, Hypervisor, RepeatPolicy, Stack, VmConfig, ZfsSettings
from .spec import Scenario
from .load import LoadSpec, parse_load
from .reader import Context, Section, as_bool, as_int, as_name, as_str, load_yaml
from .stacks import read_stacks
from .targets import read_crypto, read_targets
from .tune import TUNE_MIN_REPEATS, AdviseSpec, TuneSpec, parse_advise, parse_tune
from .vm import check_vm, read_vm_section, vm_problems

__all__ = ["load_scenario", "parse_scenario", "vm_problems", "VM_AXES"]

TOP_KEYS = (
    "name", "description", "template", "hypervisor", "storage", "vm", "vary", "mode", "cells",
    "journey", "jobs", "stacks", "targets", "repeats", "host_baseline", "crypto_benchmark", "host_only",
    "load", "tune", "advise", "telemetry",
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
    top.done(TOP_KEYS)  # an unknown key first: `job:` is named as the mistake, not as a scenario without jobs

    name = top.get("name", as_name, Path(filename).stem if filename != "<scenario>" else "scenario")
    description = top.get("description", as_str, "")
    template = top.get("template", as_name, "debian12")
    host_only = top.get("host_only", as_bool, False)
    hypervisor, storage, zfs = _read_hosts(top, host_only)
    baseline = read_vm_section(top.section("vm"), VmConfig(zfs=zfs))
    check_vm(top, "vm", baseline, hypervisor)
    tuning = top.has("tune")
    repeat_policy = _repeat_policy(top, tuning)
    host_baseline = top.get("host_baseline", as_bool, True)
    telemetry = top.get("telemetry", Telemetry.parse, Telemetry.ON)

    stacks = read_stacks(ctx, top)
    jobs = read_jobs(ctx, top, base_dir or Path("."))
    tune, cells, mode, skipped = _read_matrix(ctx, top, baseline, hypervisor, storage, jobs, stacks, tuning)
    jobs = resolve_sizes(ctx, top, jobs, cells, storage, stacks)
    check_jobs_vs_stacks(ctx, top, jobs, stacks)
    _refuse_jobfiles(top, storage, jobs)
    if host_only:
        _refuse_guest_keys(top)
    _check_storage(top, cells, storage, host_only)
    targets = read_targets(ctx, top, jobs, stacks, cells)
    crypto = read_crypto(top, stacks)
    load = parse_load(ctx, top, jobs)
    advise = parse_advise(ctx, top, jobs)
    if advise is None and tune is not None:  # the runs of a tune answer its question
        advise = AdviseSpec((tune.goal,), tune.allow)
    if load is not None:
        _check_load(top, host_only, repeat_policy, jobs)
    _check_many_hosts(top, hypervisor, load, tuning)
    top.done(TOP_KEYS)

    return Scenario(
        name=name, path=filename, text=text, description=description, hypervisor=hypervisor, storage=storage,
        template=template, baseline=baseline, cells=cells, jobs=tuple(jobs), stacks=tuple(stacks),
        targets=tuple(targets), repeats=repeat_policy.min, repeat_policy=repeat_policy, host_baseline=host_baseline,
        plan_mode=mode, crypto_benchmark=crypto, skipped_cells=skipped, host_only=host_only, load=load, tune=tune,
        advise=advise, telemetry=telemetry,
    )


def _read_hosts(top: Section, host_only: bool) -> tuple[Hypervisor, Storage, ZfsSettings]:
    """The hypervisor and the storage, which must go together (a host_only scenario's is ZFS)."""
    hypervisor = read_hypervisor(top.section("hypervisor"), host_only)
    storage, zfs = read_storage(top.section("storage"), hypervisor.driver)
    for key, message, hint in driver_storage_problems(hypervisor, storage):
        raise top.section("storage").fail(key, message, hint)
    if host_only and not storage.backend.host_only:
        raise top.fail("host_only", "measures host storage variants, which needs ZFS storage",
                       "set storage.type: zfs (zvols) or zfs-dataset, with storage.dataset")
    return hypervisor, storage, zfs


def _repeat_policy(top: Section, tuning: bool) -> RepeatPolicy:
    """``repeats:``, of which a tune needs at least TUNE_MIN_REPEATS (its default)."""
    repeat_policy = _repeats(top, TUNE_MIN_REPEATS if tuning else 1)
    if tuning and repeat_policy.min < TUNE_MIN_REPEATS:
        raise top.fail("repeats", f"a tune needs at least {TUNE_MIN_REPEATS} repeats per cell: its decisions are verdicts "
                                  f"(faster, slower, within noise), which need {TUNE_MIN_REPEATS} repeats on each side",
                       f"leave repeats out (a tune repeats {TUNE_MIN_REPEATS} times), or give {TUNE_MIN_REPEATS} or more")
    return repeat_policy


def _read_matrix(ctx: Context, top: Section, baseline: VmConfig, hypervisor: Hypervisor, storage: Storage, jobs: list[FioJob],
                 stacks: list[Stack], tuning: bool) -> tuple[TuneSpec | None, tuple[Cell, ...], str, tuple[tuple[str, str], ...]]:
    """The cells (a tune's first round's, from tune:) and the plan mode: (tune, cells, mode,
    the factorial's cells left out)."""
    if tuning:
        tune, cells = parse_tune(ctx, top, baseline, hypervisor, storage, jobs, tuple(stacks))
        return tune, cells, ("one-factor" if tune.round is not None else "tune"), ()
    stacks_by_name = {s.name: s for s in stacks}
    cells, mode, skipped = read_cells(ctx, top, baseline, hypervisor, stacks, stacks_by_name)
    return None, cells, mode, skipped


def _refuse_jobfiles(top: Section, storage: Storage, jobs: Sequence[FioJob]) -> None:
    """A storage whose host reference is not a job file's target (RBD: fio's rbd engine) refuses job files."""
    named = next((j.name for j in jobs if j.jobfile is not None), None)
    why = storage.backend.jobfile_problem()
    if why is not None and named is not None:
        raise top.fail("jobs", f"job {named!r} is a job file: {why}", "describe the job with rw, bs, iodepth... instead")


def _refuse_guest_keys(top: Section) -> None:
    """A host_only scenario boots no VM: the keys about guests are refused."""
    for key in ("stacks", "targets", "crypto_benchmark", "vm"):
        if top.has(key):
            raise top.fail(key, "does not apply to a host_only scenario (no VM is booted)",
                           "remove it, or drop host_only to measure guests too")


def _check_load(top: Section, host_only: bool, repeat_policy: RepeatPolicy, jobs: list) -> None:
    """load: boots VMs, which repeat together (a fixed count), and runs time-based jobs (a file
    job does each file once: it cannot keep the load on)."""
    files = [j.name for j in jobs if j.file_job]
    if files:
        raise top.fail("load", f"file jobs ({', '.join(files)}) do not run in a load run yet: each does its files once, "
                       "so it cannot keep the load on while the other VMs finish",
                       "measure file jobs in a scenario without load:")
    if host_only:
        raise top.fail("load", "does not apply to a host_only scenario (no VM is booted)")
    if repeat_policy.adaptive:
        raise top.fail("repeats", "adaptive repeats do not go with load: (every VM of a step repeats together)",
                       "give a fixed count, e.g. repeats: 3")


def _check_many_hosts(top: Section, hv: Hypervisor, load: LoadSpec | None, tuning: bool) -> None:
    """A run across several hosts spreads each load step's VMs over them: it needs load:, and
    an explicit placement room for the largest step."""
    if not hv.several:
        return
    sec = top.section("hypervisor")
    if load is None or tuning:
        per_host = str(len(hv.members)) if hv.hosts else "N"  # nodes: all: N, the cluster's online nodes
        raise sec.fail("nodes" if hv.proxmox else "hosts", f"a run across several hosts spreads a load step's VMs over them; this scenario has no load: "
                       f"section" + (" (a tune runs on one host)" if tuning else ""),
                       f"add load: {{vms: [{per_host}]}} for one VM per host (is every host the same?"
                       + ("; N: the number of online nodes" if not hv.hosts else "") + "), or name one host")
    room = sum(n for _, n in hv.place) if hv.place else None
    if room is not None and room < load.max_vms:
        raise sec.fail("place", f"places at most {room} VM(s), but load step "
                       f"{next(s.name for s in load.steps if s.size == load.max_vms)} runs {load.max_vms}",
                       "raise the counts under hypervisor.place, or leave place out (round robin)")


def _check_storage(top: Section, cells: tuple, storage, host_only: bool) -> None:
    """Every cell's storage settings fit the storage type; host-only cells vary storage only."""
    key = next((k for k in ("vary", "cells", "journey") if top.has(k)), "storage")
    for cell in cells:
        problems = storage_problems(cell.vm, storage)
        if problems:
            raise top.fail(key, f"cell {cell.name!r}: {problems[0][0]}", problems[0][1])
        if host_only:
            vm_axes = [a for a in changed_axes(cell.vm, VmConfig(zfs=cell.vm.zfs)) if a not in STORAGE_AXES]
            if vm_axes:
                raise top.fail(key, f"cell {cell.name!r} changes {', '.join(vm_axes)}, a VM setting; a host_only scenario has no VM",
                               "vary storage settings only: " + ", ".join(STORAGE_AXES))


REPEAT_KEYS = ("min", "max", "until_cv")
MAX_REPEATS = 100
_PERCENT = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*%\s*")


def _repeats(top: Section, default: int = 1) -> RepeatPolicy:
    """``repeats: N`` (fixed) or ``repeats: {min: N, max: M, until_cv: 5%}`` (adaptive)."""
    if not isinstance(top.raw("repeats", None), dict):
        n = top.get("repeats", _repeat_count, default)
        return RepeatPolicy(n, n)
    sec = top.section("repeats")
    sec.done(REPEAT_KEYS)  # unknown keys first: a misspelt max is named as such
    lo = sec.get("min", as_int(1, MAX_REPEATS))
    until_cv = sec.get("until_cv", as_cv, None)
    if until_cv is not None and not sec.has("max"):
        raise sec.fail("until_cv", "needs max (the most repeats to run while the CV stays at or above it)",
                       "e.g. repeats: {min: 3, max: 10, until_cv: 5%}")
    hi = sec.get("max", as_int(1, MAX_REPEATS), lo)
    if hi < lo:
        raise sec.fail("max", f"{hi} is below min ({lo})")
    if hi > lo and until_cv is None:
        raise sec.fail("max", f"{hi} is above min ({lo}) but no until_cv says when to stop",
                       "add until_cv (e.g. 5%), or set max to min for a fixed number")
    return RepeatPolicy(lo, hi, until_cv)


def _repeat_count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{_show(value)} is not a whole number 1..{MAX_REPEATS} "
                         "or a mapping {min: N, max: M, until_cv: 5%}")
    return as_int(1, MAX_REPEATS)(value)


def as_cv(value: Any) -> float:
    """A coefficient of variation: a fraction (0.05) or a percentage ("5%"), above 0 and below 100%."""
    if isinstance(value, str):
        m = _PERCENT.fullmatch(value)
        if not m:
            raise ValueError(f"{value!r} is not a percentage (like 5%) or a fraction (like 0.05)")
        frac = float(m.group(1)) / 100
        if not 0 < frac < 1:
            raise ValueError(f"{value.strip()} is not above 0% and below 100%")
        return frac
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{_show(value)} is not a percentage (like 5%) or a fraction (like 0.05)")
    if not 0 < value < 1:
        hint = f" (for {value:g}% write {value:g}%)" if 1 <= value < 100 else ""
        raise ValueError(f"{value!r} is not a fraction above 0 and below 1{hint}")
    return float(value)


def _show(value: Any) -> str:
    return "empty" if value is None else repr(value)
