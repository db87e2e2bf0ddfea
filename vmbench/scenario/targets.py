"""``targets:`` (throughput/latency goals) and ``crypto_benchmark:`` (ciphers for cryptsetup benchmark)."""

from __future__ import annotations

import re

from ..fio.job import FioJob
from .model import Cell, Stack, Target, layer_path
from .reader import Context, Section, as_float, as_str, as_str_list, items

DEFAULT_CRYPTO = (("aes-xts-plain64", 256), ("aes-xts-plain64", 512), ("aes-cbc-essiv:sha256", 256), ("serpent-xts-plain64", 512), ("twofish-xts-plain64", 512))


def read_targets(ctx: Context, top: Section, jobs: list[FioJob], stacks: list[Stack], cells: tuple[Cell, ...]) -> list[Target]:
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


def read_crypto(top: Section, stacks: list[Stack]) -> tuple[tuple[str, int], ...]:
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
