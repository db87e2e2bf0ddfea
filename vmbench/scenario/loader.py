"""Scenario YAML -> :class:`~vmbench.scenario.model.Scenario`, validated fully.

Everything a user can get wrong is refused here, before anything is provisioned, with one
message naming the file, the line, the key and the allowed values.
"""

from __future__ import annotations

import configparser
import itertools
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import ScenarioError
from ..fio import profiles
from ..fio.job import IOENGINES, MIXED_MODES, RW_MODES, TARGET_ENV, FioJob, JobFile
from ..settings import Accel, Aio, Bus, Cache, CpuMode, Feature, Filesystem, ImageFormat, PlanMode
from ..units import format_size, parse_duration, parse_size
from .model import (
    Cell,
    CpuConfig,
    FilesystemLayer,
    Hypervisor,
    Layer,
    LuksLayer,
    LvmLayer,
    PartitionLayer,
    Scenario,
    Stack,
    Storage,
    Target,
    VmConfig,
    layer_path,
)
from .reader import (
    Context,
    LineDict,
    Section,
    as_bool,
    as_float,
    as_int,
    as_name,
    as_str,
    as_str_list,
    items,
    join,
    load_yaml,
)

MiB = 1 << 20
VM_AXES = ("bus", "cache", "iothread", "aio", "cpu", "aes", "format", "vcpus", "memory")
TOP_KEYS = (
    "name", "description", "template", "hypervisor", "storage", "vm", "vary", "mode", "cells",
    "journey", "jobs", "stacks", "targets", "repeats", "host_baseline", "crypto_benchmark",
)
JOB_KEYS = ("rw", "bs", "iodepth", "numjobs", "rwmixread", "runtime", "ramp", "size", "direct", "sync", "fsync", "ioengine")
LUKS_PERF_FLAGS = ("no_read_workqueue", "no_write_workqueue")
# Options a job file may not set: they run commands, load code, or name host paths and
# devices other than the target vmbench gives it.
FORBIDDEN_JOBFILE_OPTIONS = (
    "exec_prerun", "exec_postrun", "output", "output-format", "directory", "opendir", "filename_format",
    "replay_redirect", "read_iolog", "write_iolog", "write_bw_log", "write_lat_log", "write_iops_log",
    "write_hist_log", "ioscheduler", "cgroup", "trigger", "trigger-file", "trigger-remote", "trigger-timeout",
    "ioengine_lib", "lockfile", "create_only",
)
JOBFILE_IOENGINES = ("libaio", "io_uring", "psync", "sync", "pvsync", "pvsync2", "posixaio", "mmap")
DEFAULT_CRYPTO = (("aes-xts-plain64", 256), ("aes-xts-plain64", 512), ("aes-cbc-essiv:sha256", 256), ("serpent-xts-plain64", 512), ("twofish-xts-plain64", 512))
STACK_SLACK = 128 * MiB  # room for partition table, LVM, LUKS and filesystem metadata


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


# ---- hypervisor, storage -----------------------------------------------------------------


def _hypervisor(sec: Section) -> Hypervisor:
    driver = sec.get("driver", _choice(("libvirt",)), "libvirt")
    uri = sec.get("uri", _libvirt_uri, "qemu:///system")
    accel = sec.get("accel", Accel.parse, Accel.AUTO)
    boot_timeout = sec.get("boot_timeout", _duration(10), None)
    machine = sec.get("machine", _choice(("pc", "q35")), "pc")
    sec.done()
    return Hypervisor(driver=driver, uri=uri, accel=accel, boot_timeout=boot_timeout, machine=machine)


def _libvirt_uri(value: Any) -> str:
    text = as_str(value)
    if not re.match(r"^[a-z0-9+]+://", text):
        raise ValueError(f"{text!r} is not a libvirt URI (example: qemu:///system)")
    return text


def _storage(sec: Section) -> Storage:
    pool = sec.get("pool", as_name, "vmbench")
    scratch = sec.get("scratch_size", _size(64 * MiB), 1 << 30)
    sec.done()
    return Storage(pool=pool, scratch_size=scratch)


# ---- VM configuration ----------------------------------------------------------------------


def _vm(sec: Section, base: VmConfig, allow: tuple[str, ...] = ()) -> VmConfig:
    vm = base
    if sec.has("vcpus"):
        vm = replace(vm, vcpus=sec.get("vcpus", as_int(1, 64)))
    if sec.has("memory"):
        vm = replace(vm, memory_mib=sec.get("memory", _memory))
    if sec.has("bus"):
        vm = replace(vm, bus=sec.get("bus", Bus.parse))
    if sec.has("cache"):
        vm = replace(vm, cache=sec.get("cache", Cache.parse))
    if sec.has("iothread"):
        vm = replace(vm, iothread=sec.get("iothread", as_bool))
    if sec.has("aio"):
        vm = replace(vm, aio=sec.get("aio", Aio.parse))
    if sec.has("format"):
        vm = replace(vm, format=sec.get("format", ImageFormat.parse))
    if sec.has("cpu"):
        vm = replace(vm, cpu=_cpu(sec, "cpu", sec.raw("cpu"), vm.cpu))
    if sec.has("aes"):
        vm = replace(vm, cpu=replace(vm.cpu, aes=sec.get("aes", _feature)))
    sec.done(VM_AXES + allow)
    return vm


def _memory(value: Any) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        mib = value  # a bare number is MiB, as in libvirt and Proxmox
    else:
        mib = parse_size(value) // MiB
    if mib < 384:
        raise ValueError(f"{mib} MiB is too little; the guest needs at least 384 MiB")
    if mib > 1 << 20:
        raise ValueError(f"{mib} MiB is more than 1 TiB")
    return mib


def _feature(value: Any) -> Feature:
    if isinstance(value, bool):
        return Feature.ON if value else Feature.OFF
    return Feature.parse(value)


def _cpu(sec: Section, key: str, value: Any, base: CpuConfig) -> CpuConfig:
    """``cpu: kvm64`` | ``cpu: host-passthrough`` | ``cpu: max`` | ``cpu: {model:, aes:, features:}``"""
    if isinstance(value, str):
        return _cpu_from_name(sec, key, value, base)
    if isinstance(value, dict):
        sub = Section(sec.ctx, value, join(sec.path, key), sec.line_of(key))
        cpu = base
        if sub.has("model"):
            cpu = _cpu_from_name(sub, "model", sub.get("model", as_str), cpu)
        if sub.has("aes"):
            cpu = replace(cpu, aes=sub.get("aes", _feature))
        if sub.has("features"):
            feats = sub.section("features")
            parsed = []
            for flag in list(feats.data):
                if not re.fullmatch(r"[a-z0-9_.-]+", str(flag)):
                    raise feats.fail(flag, "is not a CPU feature name")
                if flag == "aes":
                    raise feats.fail(flag, "set aes with cpu.aes, not under features")
                parsed.append((str(flag), feats.get(flag, _feature)))
            cpu = replace(cpu, features=tuple(sorted(parsed)))
        sub.done(("model", "aes", "features"))
        return cpu
    raise sec.fail(key, f"must be a model name (kvm64, qemu64, host-passthrough, max, ...) or a mapping with model/aes/features, not {value!r}")


def _cpu_from_name(sec: Section, key: str, name: str, base: CpuConfig) -> CpuConfig:
    name = name.strip()
    if name in ("host-passthrough", "host"):
        return replace(base, mode=CpuMode.HOST_PASSTHROUGH, model=None)
    if name == "max":
        return replace(base, mode=CpuMode.MAX, model=None)
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise sec.fail(key, f"{name!r} is not a CPU model name")
    return replace(base, mode=CpuMode.MODEL, model=name)


def _check_vm(sec: Section, where: str, vm: VmConfig, hv: Hypervisor) -> None:
    """Impossible combinations of VM settings."""
    problems = vm_problems(vm, hv)
    if problems:
        raise sec.fail(where, problems[0][0], problems[0][1])


def vm_problems(vm: VmConfig, hv: Hypervisor) -> list[tuple[str, str]]:
    out = []
    if vm.aio is Aio.NATIVE and not vm.cache.direct:
        out.append((
            f"aio=native needs a direct cache mode (none or directsync); cache={vm.cache.value} goes through the host page cache, and QEMU refuses it",
            "use aio: io_uring or aio: threads with this cache mode",
        ))
    if vm.iothread and not vm.bus.takes_iothread:
        out.append((f"iothread is not possible on bus {vm.bus.value}", "use virtio-blk or virtio-scsi for an iothread"))
    if vm.cpu.mode is CpuMode.HOST_PASSTHROUGH and hv.accel is Accel.TCG:
        out.append(("cpu host-passthrough needs KVM; this scenario asks for accel: tcg", "use a named model (kvm64, qemu64, ...) or max"))
    return out


# ---- cells: baseline, one-factor, factorial, explicit cells, journey ----------------------


def _cells(ctx: Context, top: Section, baseline: VmConfig, hv: Hypervisor, stacks: list[Stack],
           by_name: dict[str, Stack]) -> tuple[tuple[Cell, ...], str, tuple[tuple[str, str], ...]]:
    present = [k for k in ("vary", "cells", "journey") if top.has(k)]
    if len(present) > 1:
        raise top.fail(present[1], f"use one of vary, cells or journey, not both {present[0]} and {present[1]}")
    if top.has("mode") and not top.has("vary"):
        raise top.fail("mode", "mode only applies to vary (one-factor or factorial)")
    all_stacks = tuple(stacks)
    base_cell = Cell(name="baseline", vm=baseline, stacks=all_stacks)

    if top.has("vary"):
        mode = top.get("mode", PlanMode.parse, PlanMode.ONE_FACTOR)
        vary = top.section("vary")
        axes: list[tuple[str, list[tuple[str, VmConfig]]]] = []
        for axis in list(vary.data):
            if axis not in VM_AXES:
                vary.done(VM_AXES)  # refuses the unknown axis, suggesting the closest
            values = []
            for path, line, value in items(ctx, vary.raw(axis), join(vary.path, axis), vary.line_of(axis)):
                one = LineDict({axis: value})
                one.line, one.key_lines = line, {axis: line}
                vm = _vm(Section(ctx, one, vary.path, line), baseline)
                values.append((_value_label(axis, value, vm), vm, path, line))
            if not values:
                raise vary.fail(axis, "needs at least one value")
            axes.append((axis, values))
        cells = [base_cell]
        seen = {baseline.key(): "baseline"}
        skipped: list[tuple[str, str]] = []
        if mode is PlanMode.ONE_FACTOR:
            for axis, values in axes:
                for label, vm, path, line in values:
                    if vm.key() in seen:
                        continue
                    _check_cell_vm(ctx, path, line, vm, hv, f"{axis}={label}")
                    seen[vm.key()] = label
                    cells.append(Cell(name=f"{axis}={label}", vm=vm, stacks=all_stacks, changed=(axis,)))
        else:
            for combo in itertools.product(*[values for _, values in axes]):
                vm = baseline
                labels = []
                # a cpu value replaces the whole CPU, so it goes before aes
                for (axis, _), (label, one, path, line) in sorted(zip(axes, combo), key=lambda p: p[0][0] == "aes"):
                    vm = _merge_axis(vm, one, axis)
                for (axis, _), (label, one, path, line) in zip(axes, combo):
                    labels.append(f"{axis}={label}")
                if vm.key() in seen:
                    continue
                name = ",".join(labels)
                impossible = vm_problems(vm, hv)
                if impossible:  # a factorial may cross incompatible values: leave those out, and say so
                    skipped.append((name, impossible[0][0]))
                    continue
                seen[vm.key()] = name
                changed = tuple(a for a, _ in axes if _axis_value(vm, a) != _axis_value(baseline, a))
                cells.append(Cell(name=name, vm=vm, stacks=all_stacks, changed=changed))
            if len(cells) == 1 and skipped:
                raise top.fail("vary", f"every combination is impossible, e.g. {skipped[0][0]}: {skipped[0][1]}")
        return tuple(cells), mode.value, tuple(skipped)

    if top.has("cells"):
        cells = []
        for path, line, value in items(ctx, top.raw("cells"), "cells", top.line_of("cells")):
            sec = Section(ctx, value, path, line)
            name = sec.get("name", as_name)
            cell_stacks = _cell_stacks(sec, by_name, all_stacks)
            vm = _vm(sec, baseline, allow=("name", "stacks"))
            _check_cell_vm(ctx, path, line, vm, hv, name)
            changed = tuple(a for a in VM_AXES if _axis_value(vm, a) != _axis_value(baseline, a))
            cells.append(Cell(name=name, vm=vm, stacks=cell_stacks, changed=changed))
        if not cells:
            raise top.fail("cells", "needs at least one cell")
        _unique(ctx, top, "cells", [c.name for c in cells])
        return tuple(cells), "cells", ()

    if top.has("journey"):
        cells = []
        prev_vm, prev_stacks = baseline, all_stacks
        for i, (path, line, value) in enumerate(items(ctx, top.raw("journey"), "journey", top.line_of("journey"))):
            sec = Section(ctx, value, path, line)
            name = sec.get("name", as_name)
            cell_stacks = _cell_stacks(sec, by_name, prev_stacks)
            vm = _vm(sec, prev_vm, allow=("name", "stacks"))
            _check_cell_vm(ctx, path, line, vm, hv, name)
            changed = tuple(a for a in VM_AXES if _axis_value(vm, a) != _axis_value(prev_vm, a))
            if cell_stacks != prev_stacks:
                changed += ("stacks",)
            if i > 0 and not changed:
                raise ctx.fail(path, line, f"step {name!r} changes nothing from the previous step", "each journey step changes one or more settings")
            cells.append(Cell(name=name, vm=vm, stacks=cell_stacks, changed=changed))
            prev_vm, prev_stacks = vm, cell_stacks
        if not cells:
            raise top.fail("journey", "needs at least one step")
        _unique(ctx, top, "journey", [c.name for c in cells])
        return tuple(cells), "journey", ()

    return (base_cell,), "baseline", ()


def _merge_axis(vm: VmConfig, one: VmConfig, axis: str) -> VmConfig:
    if axis == "memory":
        return replace(vm, memory_mib=one.memory_mib)
    if axis == "aes":
        return replace(vm, cpu=replace(vm.cpu, aes=one.cpu.aes))
    if axis == "cpu":
        return replace(vm, cpu=one.cpu)
    return replace(vm, **{axis: getattr(one, axis)})


def _axis_value(vm: VmConfig, axis: str) -> object:
    if axis == "memory":
        return vm.memory_mib
    if axis == "aes":
        return vm.cpu.aes
    if axis == "cpu":
        return (vm.cpu.mode, vm.cpu.model, vm.cpu.features)
    return getattr(vm, axis)


def _value_label(axis: str, value: Any, vm: VmConfig) -> str:
    if axis == "cpu":
        return vm.cpu.label
    if axis == "memory":
        return f"{vm.memory_mib}M"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _check_cell_vm(ctx: Context, path: str, line: int, vm: VmConfig, hv: Hypervisor, name: str) -> None:
    problems = vm_problems(vm, hv)
    if problems:
        raise ctx.fail(path, line, f"cell {name!r}: {problems[0][0]}", problems[0][1])


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


def _unique(ctx: Context, sec: Section, key: str, names: list[str]) -> None:
    seen = set()
    for n in names:
        if n in seen:
            raise sec.fail(key, f"the name {n!r} is used twice")
        seen.add(n)


# ---- jobs ------------------------------------------------------------------------------------


def _jobs(ctx: Context, top: Section, base_dir: Path) -> list[FioJob]:
    entries = items(ctx, top.raw("jobs", None), "jobs", top.line_of("jobs"))
    if not entries:
        raise top.fail("jobs", "the scenario needs at least one job (a profile, a job or a fio job file)",
                       f"built-in profiles: {', '.join(profiles.PROFILES)}")
    jobs: list[FioJob] = []
    for path, line, value in entries:
        sec = Section(ctx, value, path, line)
        if sec.has("profile"):
            profile = sec.get("profile", _choice(tuple(profiles.PROFILES)))
            select = sec.get("select", as_str_list, ())
            overrides = _job_overrides(sec)
            sec.done(("profile", "select") + JOB_KEYS)
            try:
                expanded = profiles.expand(profile, overrides, select)
            except ValueError as exc:
                raise sec.fail("select", str(exc)) from None
            jobs.extend(_check_job(sec, j) for j in expanded)
        elif sec.has("file"):
            jobs.append(_jobfile(sec, base_dir))
        else:
            name = sec.get("name", as_name)
            overrides = _job_overrides(sec)
            if "rw" not in overrides or "bs" not in overrides:
                raise ctx.fail(path, line, "a job needs rw and bs (or use profile: or file:)",
                               f"rw is one of: {', '.join(RW_MODES)}")
            sec.done(("name", "profile", "file") + JOB_KEYS)
            jobs.append(_check_job(sec, FioJob(name=name, **overrides)))
    _unique(ctx, top, "jobs", [j.name for j in jobs])
    return jobs


def _job_overrides(sec: Section) -> dict:
    out: dict[str, Any] = {}
    parsers = {
        "rw": _choice(RW_MODES),
        "bs": _size(512),
        "iodepth": as_int(1, 1024),
        "numjobs": as_int(1, 64),
        "rwmixread": as_int(0, 100),
        "runtime": _duration(1),
        "ramp": _duration(0),
        "size": _size(1 * MiB),
        "direct": as_bool,
        "sync": as_bool,
        "fsync": as_int(0),
        "ioengine": _choice(IOENGINES),
    }
    for key, parse in parsers.items():
        if sec.has(key):
            out[key] = sec.get(key, parse)
    return out


def _check_job(sec: Section, job: FioJob) -> FioJob:
    if job.rwmixread is not None and job.rw not in MIXED_MODES:
        raise sec.fail("rwmixread", f"only applies to mixed jobs ({', '.join(MIXED_MODES)}); job {job.name} is {job.rw}")
    if job.direct and job.bs % 512:
        raise sec.fail("bs", f"job {job.name}: bs {job.bs} is not a multiple of 512, which direct I/O needs")
    if job.bs > job.size:
        raise sec.fail("bs", f"job {job.name}: bs {format_size(job.bs)} is larger than size {format_size(job.size)}")
    return job


def _jobfile(sec: Section, base_dir: Path) -> FioJob:
    rel = sec.get("file", as_str)
    name = sec.get("name", as_name, Path(rel).stem)
    sec.done(("file", "name"))
    path = (base_dir / rel) if not Path(rel).is_absolute() else Path(rel)
    try:
        text = path.read_text()
    except OSError as exc:
        raise sec.fail("file", f"cannot read fio job file {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise sec.fail("file", f"{path} is not a text file (it is not UTF-8)") from None
    parser = configparser.ConfigParser(allow_no_value=True, strict=False, interpolation=None, delimiters=("=",))
    try:
        parser.read_string(text)
    except configparser.Error as exc:
        raise sec.fail("file", f"{path} is not a fio job file: {exc}") from None
    uses_target = False
    runtime = None
    ramp = 0.0
    if re.search(r"^\s*include\b", text, re.MULTILINE):
        raise sec.fail("file", f"{path} includes other files; vmbench runs one self-contained job file")
    for section in parser.sections():
        for key, value in parser.items(section):
            if key in FORBIDDEN_JOBFILE_OPTIONS:
                raise sec.fail("file", f"{path} [{section}] sets {key}; vmbench sets the target and the output itself, and job files may not run commands")
            if key == "filename":
                if value != "${%s}" % TARGET_ENV:
                    raise sec.fail("file", f"{path} [{section}] filename={value}: a job file must use filename=${{{TARGET_ENV}}} so vmbench points it at each layer")
                uses_target = True
            if key == "ioengine" and (value or "").strip() not in JOBFILE_IOENGINES:
                raise sec.fail("file", f"{path} [{section}]: ioengine={value} is not allowed; use one of: {', '.join(JOBFILE_IOENGINES)}")
            if key == "runtime" and value:
                try:
                    runtime = parse_duration(value)
                except ValueError:
                    pass
            if key == "ramp_time" and value:
                try:
                    ramp = parse_duration(value)
                except ValueError:
                    pass
    if not uses_target:
        raise sec.fail("file", f"{path} never sets filename=${{{TARGET_ENV}}}", "vmbench runs the file unchanged and passes each layer's device or file in that variable")
    size = 256 * MiB
    m = re.search(r"^\s*size\s*=\s*(\S+)", text, re.MULTILINE)
    if m:
        try:
            size = parse_size(m.group(1))
        except ValueError:
            pass
    return FioJob(name=name, size=size, jobfile=JobFile(path=str(path), text=text, runtime=runtime, ramp=ramp), profile="file")


def _resolve_sizes(ctx: Context, top: Section, jobs: list[FioJob], cells: tuple[Cell, ...], storage: Storage, stacks: list[Stack]) -> list[FioJob]:
    """Cache-buster jobs get a working set of several times the largest VM's RAM; every job
    must fit the scratch disk (with room for layer metadata when there are stacks)."""
    out = []
    max_mem = max(c.vm.memory_mib for c in cells) * MiB
    room = storage.scratch_size - (STACK_SLACK if stacks else 0)
    for job in jobs:
        if job.profile == "cache-buster" and job.size == FioJob.size:
            job = replace(job, size=profiles.CACHE_BUSTER_RAM_FACTOR * max_mem)
        if job.size > room:
            raise top.fail(
                "jobs",
                f"job {job.name} needs {format_size(job.size)} but the scratch disk leaves {format_size(max(room, 0))}"
                + (" after layer metadata" if stacks else ""),
                f"raise storage.scratch_size to at least {format_size(job.size + (STACK_SLACK if stacks else 0))} or lower the job's size",
            )
        out.append(job)
    return out


# ---- stacks --------------------------------------------------------------------------------


def _stacks(ctx: Context, top: Section) -> list[Stack]:
    stacks = []
    for path, line, value in items(ctx, top.raw("stacks", None), "stacks", top.line_of("stacks")):
        sec = Section(ctx, value, path, line)
        name = sec.get("name", as_name)
        layers: list[Layer] = []
        for lpath, lline, lvalue in items(ctx, sec.raw("layers"), join(path, "layers"), sec.line_of("layers")):
            layers.append(_layer(ctx, lpath, lline, lvalue, layers))
        if sec.has("device") or sec.has("disk"):
            key = "device" if sec.has("device") else "disk"
            dev = sec.raw(key)
            if dev != "scratch":
                raise sec.fail(key, f"{dev!r}: stacks are only ever built on vmbench's scratch disk; the root disk and other devices are refused",
                               "leave this key out, or write 'scratch'")
        measure = sec.get("measure", _choice(("all", "top")), "all")
        sec.done(("name", "layers", "device", "measure"))
        if not layers:
            raise sec.fail("layers", "needs at least one layer (partition, lvm, luks, ext2/3/4, xfs, btrfs)")
        stacks.append(Stack(name=name, layers=tuple(layers), measure_all=measure == "all"))
    _unique(ctx, top, "stacks", [s.name for s in stacks])
    return stacks


def _layer(ctx: Context, path: str, line: int, value: Any, below: list[Layer]) -> Layer:
    kinds = ("partition", "lvm", "luks") + tuple(f.value for f in Filesystem) + ("filesystem",)
    if isinstance(value, str):
        kind, opts = value.strip(), None
    elif isinstance(value, dict) and len(value) == 1:
        kind, opts = next(iter(value.items()))
        line = value.line_of(kind) if isinstance(value, LineDict) else line
    else:
        raise ctx.fail(path, line, f"a layer is a name ({', '.join(kinds)}) or a one-key mapping name: {{options}}")
    if kind not in kinds:
        raise ctx.fail(path, line, f"{kind!r} is not a layer; layers: {', '.join(kinds)}")
    sec = Section(ctx, opts, join(path, kind), line)

    if below and isinstance(below[-1], FilesystemLayer):
        raise ctx.fail(path, line, f"nothing can be layered on top of a filesystem ({below[-1].label})",
                       "the filesystem is always the last layer")
    if kind == "partition":
        if below:
            raise ctx.fail(path, line, "partition must be the first layer (on the raw scratch disk)")
        layer: Layer = PartitionLayer(align=sec.get("align", _size(4096), 1 * MiB))
        if layer.align % 4096:
            raise sec.fail("align", "must be a multiple of 4 KiB")
        sec.done()
        return layer
    if kind == "lvm":
        if any(isinstance(l, LvmLayer) for l in below):
            raise ctx.fail(path, line, "only one lvm layer per stack")
        thin = sec.get("type", _choice(("linear", "thin")), "linear") == "thin"
        extent = sec.get("extent_size", _size(1 * MiB), 4 * MiB)
        if extent & (extent - 1):
            raise sec.fail("extent_size", "must be a power of two")
        sec.done()
        return LvmLayer(thin=thin, extent_size=extent)
    if kind == "luks":
        if any(isinstance(l, LuksLayer) for l in below):
            raise ctx.fail(path, line, "only one luks layer per stack")
        version = sec.get("version", _choice((1, 2)), 2)
        cipher = sec.get("cipher", _cipher, "aes-xts-plain64")
        key_size = sec.get("key_size", _choice((128, 256, 512)), 512)
        sector = sec.get("sector_size", _choice((512, 1024, 2048, 4096)), None)
        flags = sec.get("perf_flags", as_str_list, ())
        for f in flags:
            if f not in LUKS_PERF_FLAGS:
                raise sec.fail("perf_flags", f"{f!r} is not one of: {', '.join(LUKS_PERF_FLAGS)}")
        if version == 1 and sector not in (None, 512):
            raise sec.fail("sector_size", f"LUKS1 only has 512-byte sectors; {sector} needs version: 2")
        if "xts" in cipher and key_size == 128:
            raise sec.fail("key_size", "XTS needs two keys: use 256 (AES-128) or 512 (AES-256)")
        sec.done()
        return LuksLayer(version=version, cipher=cipher, key_size=key_size, sector_size=sector, perf_flags=tuple(flags))
    # a filesystem
    if kind == "filesystem":
        fs = sec.get("type", Filesystem.parse)
    else:
        fs = Filesystem.parse(kind)
    mkfs = sec.get("mkfs_options", _safe_options, ())
    mount = sec.get("mount_options", _mount_options, ())
    sec.done(("type", "mkfs_options", "mount_options") if kind == "filesystem" else ("mkfs_options", "mount_options"))
    return FilesystemLayer(fs=fs, mkfs_options=mkfs, mount_options=mount)


def _cipher(value: Any) -> str:
    text = as_str(value)
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*(-[a-z0-9]+(:[a-z0-9]+)?)?", text):
        raise ValueError(f"{text!r} is not a cipher spec (example: aes-xts-plain64)")
    return text


def _safe_options(value: Any) -> tuple[str, ...]:
    opts = as_str_list(value)
    for o in opts:
        if "/" in o:
            raise ValueError(f"{o!r}: options may not name devices or paths; vmbench passes the scratch device itself")
    return opts


def _mount_options(value: Any) -> tuple[str, ...]:
    opts = as_str_list(value)
    for o in opts:
        if not re.fullmatch(r"[A-Za-z0-9_=.:,+-]+", o) or "/" in o:
            raise ValueError(f"{o!r} is not a mount option")
    return opts


def _check_jobs_vs_stacks(ctx: Context, top: Section, jobs: list[FioJob], stacks: list[Stack]) -> None:
    for stack in stacks:
        luks = stack.luks
        if luks and luks.sector_size and luks.sector_size > 512:
            for job in jobs:
                if job.jobfile is None and job.direct and job.bs % luks.sector_size:
                    raise top.fail("stacks", f"stack {stack.name}: LUKS sector size {luks.sector_size} cannot take job {job.name}'s direct {format_size(job.bs)} I/O",
                                   f"use bs a multiple of {luks.sector_size}, or sector_size: 512")


# ---- targets, crypto ------------------------------------------------------------------------


def _targets(ctx: Context, top: Section, jobs: list[FioJob], stacks: list[Stack], cells: tuple[Cell, ...]) -> list[Target]:
    out = []
    job_names = {j.name for j in jobs}
    stack_names = {s.name: s for s in stacks}
    cell_names = {c.name for c in cells}
    for path, line, value in items(ctx, top.raw("targets", None), "targets", top.line_of("targets")):
        sec = Section(ctx, value, path, line)
        job = sec.get("job", as_str)
        if job not in job_names:
            raise sec.fail("job", f"no job named {job!r}; jobs: {', '.join(sorted(job_names))}")
        stack = sec.get("stack", as_str, None)
        if stack is not None and stack not in stack_names:
            raise sec.fail("stack", f"no stack named {stack!r}; stacks: {', '.join(stack_names) or '(none)'}")
        layer = sec.get("layer", as_str, None)
        if layer is not None:
            candidates = [stack_names[stack]] if stack else list(stack_names.values())
            paths = {"raw"} | {layer_path(s, d) for s in candidates for d in range(1, len(s.layers) + 1)}
            if layer not in paths:
                raise sec.fail("layer", f"no layer {layer!r}; layers: {', '.join(sorted(paths))}")
        cell = sec.get("cell", as_str, None)
        if cell is not None and cell not in cell_names:
            raise sec.fail("cell", f"no cell named {cell!r}; cells: {', '.join(sorted(cell_names))}")
        t = Target(
            job=job, layer=layer, stack=stack, cell=cell,
            min_iops=sec.get("min_iops", as_float(0), None),
            min_mb_s=sec.get("min_mb_s", as_float(0), None),
            max_p99_ms=sec.get("max_p99_ms", as_float(0), None),
        )
        sec.done()
        if t.min_iops is None and t.min_mb_s is None and t.max_p99_ms is None:
            raise ctx.fail(path, line, "a target needs at least one of min_iops, min_mb_s, max_p99_ms")
        out.append(t)
    return out


def _crypto(top: Section, stacks: list[Stack]) -> tuple[tuple[str, int], ...]:
    """Ciphers for ``cryptsetup benchmark``: given, or the stacks' LUKS ciphers plus a default set."""
    if top.has("crypto_benchmark"):
        out = []
        for spec in top.get("crypto_benchmark", as_str_list):
            m = re.fullmatch(r"([a-z0-9:-]+)/(\d+)", spec)
            if not m:
                raise top.fail("crypto_benchmark", f"{spec!r}: write cipher/keybits, e.g. aes-xts-plain64/512")
            out.append((m.group(1), int(m.group(2))))
        return tuple(out)
    if not any(s.luks for s in stacks):
        return ()
    wanted = [(s.luks.cipher, s.luks.key_size) for s in stacks if s.luks]
    for c in DEFAULT_CRYPTO:
        if c not in wanted:
            wanted.append(c)
    return tuple(dict.fromkeys(wanted))


# ---- small parsers ---------------------------------------------------------------------------


def _choice(options: tuple) -> Any:
    def parse(value: Any) -> Any:
        for o in options:
            if value == o or (isinstance(o, int) and isinstance(value, str) and value.strip() == str(o)):
                return o
        raise ValueError(f"{value!r} is not one of: {', '.join(str(o) for o in options)}")

    return parse


def _size(minimum: int) -> Any:
    def parse(value: Any) -> int:
        n = parse_size(value)
        if n < minimum:
            raise ValueError(f"{value!r} is below the minimum {format_size(minimum)}")
        return n

    return parse


def _duration(minimum: float) -> Any:
    def parse(value: Any) -> float:
        n = parse_duration(value)
        if n < minimum:
            raise ValueError(f"{value!r} is below the minimum {minimum:g}s")
        return n

    return parse
