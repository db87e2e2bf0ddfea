"""VM settings: read through the axis table, and the combinations QEMU or libvirt refuse."""

from __future__ import annotations

from ..settings import Accel, Aio, CpuMode, DetectZeroes, Discard
from .axes import AXES, VM_AXES
from .model import Hypervisor, VmConfig
from .reader import Context, Section


def _vm(sec: Section, base: VmConfig, allow: tuple[str, ...] = ()) -> VmConfig:
    """``base`` with the axes ``sec`` sets; any key not an axis (nor in ``allow``) is refused."""
    vm = base
    for axis in AXES:  # table order: cpu before aes
        if sec.has(axis.name):
            vm = axis.parse(sec, axis.name, vm)
    sec.done(VM_AXES + allow)
    return vm


def _check_vm(sec: Section, where: str, vm: VmConfig, hv: Hypervisor) -> None:
    """Impossible combinations of VM settings."""
    problems = vm_problems(vm, hv)
    if problems:
        raise sec.fail(where, problems[0][0], problems[0][1])


def _check_cell_vm(ctx: Context, path: str, line: int, vm: VmConfig, hv: Hypervisor, name: str) -> None:
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
    if vm.cpu.mode is CpuMode.HOST_PASSTHROUGH and hv.accel is Accel.TCG:
        out.append(("cpu host-passthrough needs KVM; this scenario asks for accel: tcg", "use a named model (kvm64, qemu64, ...) or max"))
    return out
