"""The cells to measure: the baseline alone, ``vary:`` (one-factor or factorial), explicit
``cells:``, or a ``journey:`` of steps each changing something from the one before."""

from __future__ import annotations

import itertools

from ..settings import PlanMode
from .axes import AXIS_BY_NAME, VM_AXES, changed_axes, vm_key
from .model import Cell, Hypervisor, Stack, VmConfig
from .parsers import refuse_duplicates
from .reader import Context, LineDict, Section, as_name, as_str_list, items, join
from .vm import check_cell_vm, read_vm_section, vm_problems

Cells = tuple[tuple[Cell, ...], str, tuple[tuple[str, str], ...]]  # cells, plan mode, skipped (name, why)


def read_cells(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, stacks: list[Stack],
           by_name: dict[str, Stack]) -> Cells:
    present = [k for k in ("vary", "cells", "journey") if top.has(k)]
    if len(present) > 1:
        raise top.fail(present[1], f"use one of vary, cells or journey, not both {present[0]} and {present[1]}")
    if top.has("mode") and not top.has("vary"):
        raise top.fail("mode", "mode only applies to vary (one-factor or factorial)")
    all_stacks = tuple(stacks)
    if top.has("vary"):
        return _vary(ctx, top, baseline, hv, all_stacks)
    if top.has("cells"):
        return _explicit_cells(ctx, top, baseline, hv, by_name, all_stacks)
    if top.has("journey"):
        return _journey(ctx, top, baseline, hv, by_name, all_stacks)
    return (Cell(name="baseline", vm=baseline, stacks=all_stacks),), "baseline", ()


def _vary(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, all_stacks: tuple[Stack, ...]) -> Cells:
    mode = top.get("mode", PlanMode.parse, PlanMode.ONE_FACTOR)
    vary = top.section("vary")
    axes: list[tuple[str, list[tuple[str, VmConfig, str, int]]]] = []
    for axis in list(vary.data):
        if axis not in AXIS_BY_NAME:
            vary.done(VM_AXES)  # refuses the unknown axis, suggesting the closest
        values = []
        raws: list[tuple[object, int]] = []
        for path, line, value in items(ctx, vary.raw(axis), join(vary.path, axis), vary.line_of(axis)):
            given = LineDict({axis: value})
            given.line, given.key_lines = line, {axis: line}
            vm = read_vm_section(Section(ctx, given, vary.path, line), baseline)
            values.append((AXIS_BY_NAME[axis].label(vm, value), vm, path, line))
            raws.append((value, line))
            _refuse_repeated_value(ctx, path, line, raws, values)
        if not values:
            raise vary.fail(axis, "needs at least one value", f"{axis} is {AXIS_BY_NAME[axis].describe}")
        axes.append((axis, values))
    cells = [Cell(name="baseline", vm=baseline, stacks=all_stacks)]
    seen = {vm_key(baseline): "baseline"}
    skipped: list[tuple[str, str]] = []
    if mode is PlanMode.ONE_FACTOR:
        for axis, values in axes:
            for label, vm, path, line in values:
                if vm_key(vm) in seen:
                    continue
                check_cell_vm(ctx, path, line, vm, hv, f"{axis}={label}")
                seen[vm_key(vm)] = label
                cells.append(Cell(name=f"{axis}={label}", vm=vm, stacks=all_stacks, changed=(axis,)))
        return tuple(cells), mode.value, ()

    names = [axis for axis, _ in axes]
    # merged in table order (cpu replaces the whole CPU, so it goes before aes); named in vary order
    order = sorted(range(len(axes)), key=lambda i: VM_AXES.index(names[i]))
    merged: dict[tuple[int, ...], VmConfig] = {(): baseline}  # a prefix of picks in table order: its VM, made once
    for picks in itertools.product(*[range(len(values)) for _, values in axes]):
        vm = baseline
        prefix: tuple[int, ...] = ()
        for i in order:
            prefix += (picks[i],)
            made = merged.get(prefix)
            if made is None:
                made = merged[prefix] = AXIS_BY_NAME[names[i]].merge(vm, axes[i][1][picks[i]][1])
            vm = made
        name = ",".join(f"{axis}={values[p][0]}" for (axis, values), p in zip(axes, picks))
        key = vm_key(vm)
        if key in seen:
            if seen[key] != "baseline":  # the baseline's own combination is its cell: nothing is lost
                raise top.fail("vary", f"cells {seen[key]!r} and {name!r} are the same VM",
                               "give each setting on one axis only (cpu: {model:, aes:} and an aes axis both set aes)")
            continue
        impossible = vm_problems(vm, hv)
        if impossible:  # a factorial may cross incompatible values: leave those out, and say so
            skipped.append((name, impossible[0][0]))
            continue
        seen[key] = name
        cells.append(Cell(name=name, vm=vm, stacks=all_stacks, changed=changed_axes(vm, baseline, [a for a, _ in axes])))
    if len(cells) == 1 and skipped:
        raise top.fail("vary", f"every combination is impossible, e.g. {skipped[0][0]}: {skipped[0][1]}")
    return tuple(cells), mode.value, tuple(skipped)


def _refuse_repeated_value(ctx: Context, path: str, line: int, raws: list[tuple[object, int]],
                           values: list[tuple[str, VmConfig, str, int]]) -> None:
    """A value given twice under one ``vary:`` axis, or two spellings of one value (``1G`` and
    ``1024``, ``host`` and ``host-passthrough``), is refused naming the axis and the value."""
    vm = values[-1][1]
    shown = shown_value(raws[-1][0])
    for (other_raw, other_line), (_, other_vm, _, _) in zip(raws[:-1], values[:-1]):
        if vm_key(other_vm) != vm_key(vm):
            continue
        other = shown_value(other_raw)
        lines = f" (lines {other_line} and {line})" if other_line != line else ""
        message = (f"the value {shown} is given twice{lines}" if other == shown
                   else f"{shown} is the same value as {other}" + (f" (line {other_line})" if other_line != line else ""))
        raise ctx.fail(path.rpartition("[")[0], line, message, "give each value once")


def shown_value(raw: object) -> str:
    """A vary value as the scenario wrote it (true/false read as on/off)."""
    if isinstance(raw, bool):
        return "on" if raw else "off"
    if isinstance(raw, dict):
        return "{" + ", ".join(f"{k}: {shown_value(v)}" for k, v in raw.items()) + "}"
    return str(raw)


def _explicit_cells(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, by_name: dict[str, Stack],
                    all_stacks: tuple[Stack, ...]) -> Cells:
    cells = []
    same: dict[tuple[str, tuple[Stack, ...]], str] = {}
    for path, line, value in items(ctx, top.raw("cells"), "cells", top.line_of("cells")):
        sec = Section(ctx, value, path, line)
        name = sec.get("name", as_name)
        cell_stacks = _cell_stacks(sec, by_name, all_stacks)
        vm = read_vm_section(sec, baseline, allow=("name", "stacks"))
        check_cell_vm(ctx, path, line, vm, hv, name)
        first = same.setdefault((vm_key(vm), cell_stacks), name)
        if first != name and name not in same.values():  # a repeated name is refused below, as such
            raise ctx.fail(path, line, f"cell {name!r} is the same VM with the same stacks as cell {first!r}",
                           "change a setting in one of them, or remove one (repeats: N measures a cell again)")
        cells.append(Cell(name=name, vm=vm, stacks=cell_stacks, changed=changed_axes(vm, baseline)))
    if not cells:
        raise top.fail("cells", "needs at least one cell")
    refuse_duplicates(ctx, top, "cells", [c.name for c in cells])
    return tuple(cells), "cells", ()


def _journey(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, by_name: dict[str, Stack],
             all_stacks: tuple[Stack, ...]) -> Cells:
    cells = []
    prev_vm, prev_stacks = baseline, all_stacks
    for i, (path, line, value) in enumerate(items(ctx, top.raw("journey"), "journey", top.line_of("journey"))):
        sec = Section(ctx, value, path, line)
        name = sec.get("name", as_name)
        cell_stacks = _cell_stacks(sec, by_name, prev_stacks)
        vm = read_vm_section(sec, prev_vm, allow=("name", "stacks"))
        check_cell_vm(ctx, path, line, vm, hv, name)
        changed = changed_axes(vm, prev_vm)
        if cell_stacks != prev_stacks:
            changed += ("stacks",)
        if i > 0 and not changed:
            raise ctx.fail(path, line, f"step {name!r} changes nothing from the previous step", "each journey step changes one or more settings")
        cells.append(Cell(name=name, vm=vm, stacks=cell_stacks, changed=changed))
        prev_vm, prev_stacks = vm, cell_stacks
    if not cells:
        raise top.fail("journey", "needs at least one step")
    refuse_duplicates(ctx, top, "journey", [c.name for c in cells])
    return tuple(cells), "journey", ()


def _cell_stacks(sec: Section, by_name: dict[str, Stack], default: tuple[Stack, ...]) -> tuple[Stack, ...]:
    if not sec.has("stacks"):
        return default
    names = sec.get("stacks", as_str_list)
    out = []
    for n in names:
        if n not in by_name:
            raise sec.fail("stacks", f"no stack named {n!r}; stacks: {', '.join(by_name) or '(none defined)'}")
        out.append(by_name[n])
    return tuple(out)
