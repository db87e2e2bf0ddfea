"""VM settings: read through the axis table, and the combinations QEMU or libvirt refuse."""

from __future__ import annotations

from ..settings import Accel, Aio, CpuMode, DetectZeroes, Discard
from .axes import AXES, VM_AXES
from .model import LIMIT_BURSTS, Hypervisor, IoLimits, VmConfig, limit_bytes
from .reader import Context, Section


def read_vm_section(sec: Section, base: VmConfig, allow: tuple[str, ...] = ()) -> VmConfig:
    """``base`` with the axes ``sec`` sets; any key not an axis (nor in ``allow``) is refused."""
    vm = base
    for axis in AXES:  # table order: cpu before aes
        if sec.has(axis.name):
            vm = axis.parse(sec, axis.name, vm)
    sec.done(VM_AXES + allow)
    return vm


def check_vm(sec: Section, where: str, vm: VmConfig, hv: Hypervisor) -> None:
    """Impossible combinations of VM settings."""
    problems = vm_problems(vm, hv)
    if problems:
        raise sec.fail(where, problems[0][0], problems[0][1])


def check_cell_vm(ctx: Context, path: str, line: int, vm: VmConfig, hv: Hypervisor, name: str) -> None:
    problems = vm_problems(vm, hv)
    if problems:
        raise ctx.fail(path, line, f"cell {name!r}: {problems[0][0]}", problems[0][1])


def vm_problems(vm: VmConfig, hv: Hypervisor) -> list[tuple[str, str]]:
    """What makes ``vm`` impossible on ``hv``, as (message, hint); empty if it can boot."""
    out = []
    if vm.aio is Aio.NATIVE and not vm.cache.direct:
        out.append((
            f"aio=native needs a direct cache mode (none or directsync); cache={vm.cache.value} goes through the host page cache, and QEMU refuses it",
            "use aio: io_uring or aio: threads with this cache mode",
        ))
    if vm.iothread and not vm.bus.takes_iothread:
        out.append((f"iothread is not possible on bus {vm.bus.value}", "use virtio-blk or virtio-scsi for an iothread"))
    if vm.detect_zeroes is DetectZeroes.UNMAP and vm.discard is not Discard.UNMAP:
        out.append(("detect_zeroes unmap turns zero writes into discards, so it needs discard: unmap "
                     f"({'the hypervisor default ignore' if vm.discard is None else 'discard: ' + vm.discard.value} drops them; "
                     "QEMU refuses it, libvirt quietly uses on)", "add discard: unmap, or use detect_zeroes: on"))
    out += limit_problems(vm.limits)
    default = VmConfig()
    for axis in AXES:
        if axis.drivers and hv.driver.value not in axis.drivers and axis.value(vm) != axis.value(default):
            out.append((f"{axis.name} applies to driver {', '.join(axis.drivers)} only ({axis.what}); driver "
                        f"{hv.driver.value} has no such setting", f"remove {axis.name}, or measure it with driver "
                        f"{' or '.join(axis.drivers)}"))
    if vm.cpu.mode is CpuMode.HOST_PASSTHROUGH and hv.accel is Accel.TCG:
        out.append(("cpu host-passthrough needs KVM; this scenario asks for accel: tcg", "use a named model (kvm64, qemu64, ...) or max"))
    return out


#: QEMU's ceiling for a burst's rate times its length (THROTTLE_VALUE_MAX)
THROTTLE_VALUE_MAX = 10**15


def limit_problems(limits: IoLimits) -> list[tuple[str, str]]:
    """I/O limits qemu-server, libvirt or QEMU refuse, as (message, hint): a total with its
    read or write rate (qemu-server's Drive.pm parse_drive: "unable to parse drive options"),
    a burst without its rate or not above it (Drive.pm; QEMU throttle_is_valid refuses one
    below it, and one equal to it is no burst), ``burst_length`` without a burst, a burst too
    long for its rate (QEMU: "burst length too high for this burst rate")."""
    out = []
    for total in ("iops", "mbps"):
        parts = [k for k in (f"{total}_rd", f"{total}_wr") if limits.get(k) is not None]
        if limits.get(total) is not None and parts:
            out.append((f"{total} cannot be given with {' or '.join(parts)}: {total} limits reads and writes together "
                        "(qemu-server refuses the disk: unable to parse drive options; libvirt and QEMU refuse it too)",
                        f"use {total} alone, or {total}_rd and/or {total}_wr"))
    for burst in LIMIT_BURSTS:
        value, rate_name = limits.get(burst), burst.removesuffix("_max")
        rate = limits.get(rate_name)
        if value is None:
            continue
        if rate is None:
            out.append((f"{burst} is a burst above {rate_name}, so it needs {rate_name}",
                        f"add {rate_name} below {value}, or remove {burst}"))
        elif _qemu_value(burst, value) <= _qemu_value(rate_name, rate):
            out.append((f"{burst} ({value}) must be above {rate_name} ({rate}): a burst is a higher rate for a while",
                        f"raise {burst} above {rate}, or remove it"))
        elif _qemu_value(burst, value) * (limits.burst_length or 1) > THROTTLE_VALUE_MAX:
            out.append((f"burst_length {limits.burst_length} is too long for {burst} {value}: QEMU refuses a burst of more "
                        f"than {THROTTLE_VALUE_MAX:.0e} {'operations' if burst.startswith('iops') else 'bytes'}",
                        "shorten burst_length"))
    if limits.burst_length is not None and not limits.bursts():
        out.append(("burst_length is how long a burst lasts, but no burst is given",
                    "add a burst (iops_max, iops_rd_max, iops_wr_max, mbps_max, mbps_rd_max or mbps_wr_max), or remove burst_length"))
    return out


def _qemu_value(name: str, value: float) -> int:
    """A limit as QEMU gets it: IOPS, or bytes per second."""
    return int(value) if name.startswith("iops") else limit_bytes(value)
