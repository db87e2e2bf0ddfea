"""The scenario reference page (docs/scenario-reference.md) and the code agree: the page is what
vmbench.scenario.reference renders, every key the loader takes has a row, every row names a key
the loader takes, and the example scenarios use no key the page leaves out."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from vmbench.scenario import reference
from vmbench.scenario.axes import AXES, Axis
from vmbench.scenario.hosts import PROXMOX_KEYS, STORAGE_KEYS
from vmbench.scenario.jobs import JOB_KEYS, JOBFILE_KEYS, RATE_KEYS
from vmbench.scenario.loader import REPEAT_KEYS, TOP_KEYS
from vmbench.scenario.tune import ADVISE_KEYS, BUDGET_KEYS, FROM_KEYS, TUNE_KEYS
from vmbench.scenario.zfsprops import PROPERTY_NAMES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "vmbench" / "scenario"
REGENERATE = f"regenerate it: {reference.COMMAND} > {reference.PAGE}"
VM_SECTION = "VM settings (vm:, cells, journey, vary)"
#: the functions that read keys vmbench writes itself (tune.round of a round's stored scenario):
#: one internal row (tune.round) stands for them
INTERNAL = {("tune.py", "_round")}

# a loader constant, the section that documents its keys, and the path prefix of their rows
SECTIONS = [
    ("TOP_KEYS", TOP_KEYS, "Top level", ""),
    ("STORAGE_KEYS", STORAGE_KEYS, "storage", "storage."),
    ("JOB_KEYS", JOB_KEYS, "jobs", "jobs[]."),
    ("JOBFILE_KEYS", JOBFILE_KEYS, "jobs", "jobs[]."),
    ("RATE_KEYS", RATE_KEYS, "jobs", "jobs[]."),
    ("REPEAT_KEYS", REPEAT_KEYS, "repeats", "repeats."),
    ("PROXMOX_KEYS", PROXMOX_KEYS, "hypervisor (proxmox)", "hypervisor."),
    ("TUNE_KEYS", TUNE_KEYS, "tune and advise", "tune."),
    ("ADVISE_KEYS", ADVISE_KEYS, "tune and advise", "advise."),
    ("BUDGET_KEYS", BUDGET_KEYS, "tune and advise", "tune.budget."),
    ("FROM_KEYS", FROM_KEYS, "tune and advise", "tune.from."),
]
# hosts.py's readers whose done(...) tuples are the hypervisor's keys (no constant names them)
#: (module:function reading a section, its page section, the keys' prefix); a bare function is in hosts.py
HYPERVISOR_READERS = [
    ("read_hypervisor", "hypervisor (libvirt)", "hypervisor."),
    ("pvenodes.py:read_ssh", "hypervisor (libvirt)", "hypervisor.ssh."),  # the libvirt host's ssh: (hosts._ssh)
    ("pvenodes.py:read_ssh", "hypervisor (proxmox)", "hypervisor.ssh."),  # the node's ssh: (hosts._pve_ssh)
    ("_pve_token", "hypervisor (proxmox)", "hypervisor.token."),
    ("_pve_tls", "hypervisor (proxmox)", "hypervisor.tls."),
]


def _rows(title: str) -> tuple[reference.Row, ...]:
    tables = {t.title: t for t in reference.tables()}
    assert title in tables, f"no section {title!r}; sections: {', '.join(tables)}"
    return tables[title].rows


def _all_rows() -> list[reference.Row]:
    return [r for t in reference.tables() for r in t.rows]


# ---- the scenario package's done(...) calls ----------------------------------------------------


def _strings(node: ast.expr, module: ModuleType) -> set[str]:
    """The keys a done() argument names: a tuple of strings, a module constant holding one, a +
    of them, either branch of an if-else; what is not known statically (a parameter) names none."""
    if isinstance(node, (ast.Tuple, ast.List)):
        return {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
    if isinstance(node, ast.Name):
        value = getattr(module, node.id, None)
        return set(value) if isinstance(value, tuple) and all(isinstance(v, str) for v in value) else set()
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _strings(node.left, module) | _strings(node.right, module)
    if isinstance(node, ast.IfExp):
        return _strings(node.body, module) | _strings(node.orelse, module)
    return set()


def _taken(func: ast.AST, receiver: str) -> set[str]:
    """The keys a function takes from ``receiver`` (get, raw, section, has): what a done() without
    arguments accepts."""
    out = set()
    for call in ast.walk(func):
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("get", "raw", "section", "has")
                and isinstance(call.func.value, ast.Name) and call.func.value.id == receiver and call.args
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
            out.add(call.args[0].value)
    return out


def _done_calls() -> list[tuple[str, str, set[str], bool]]:
    """Every ``X.done(...)`` in the scenario package: (file, function, keys, whether the keys
    are the function's taken ones, done() having no argument)."""
    out = []
    for path in sorted(PACKAGE.glob("*.py")):
        if path.name == "reference.py":
            continue
        module = importlib.import_module("vmbench.scenario" + ("" if path.stem == "__init__" else f".{path.stem}"))
        for func in ast.walk(ast.parse(path.read_text())):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(func):
                if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "done"):
                    continue
                if call.args:
                    out.append((path.name, func.name, _strings(call.args[0], module), False))
                elif isinstance(call.func.value, ast.Name):
                    out.append((path.name, func.name, _taken(func, call.func.value.id), True))
    return out


# ---- the tests -------------------------------------------------------------------------------------


def test_the_page_on_disk_is_the_modules_output() -> None:
    page = ROOT / reference.PAGE
    assert page.exists(), f"{reference.PAGE} is missing: {REGENERATE}"
    assert page.read_text() == reference.reference_markdown(), f"{reference.PAGE} and the code disagree: {REGENERATE}"


def test_the_page_says_how_it_is_made() -> None:
    text = reference.reference_markdown()
    assert f"Generated by `{reference.COMMAND}`; do not edit: `{reference.TEST}` fails" in text.splitlines()[2]
    assert Path(__file__).relative_to(ROOT).as_posix() == reference.TEST


def test_sections_are_in_order_and_rows_are_whole() -> None:
    assert [t.title for t in reference.tables()] == [
        "Top level", "hypervisor (libvirt)", "hypervisor (proxmox)", "storage", VM_SECTION, "jobs", "stacks", "repeats",
        "targets", "load", "tune and advise"]
    for table in reference.tables():
        keys = [r.key for r in table.rows]
        assert len(keys) == len(set(keys)), f"{table.title}: a key has two rows"
        for row in table.rows:
            assert all((row.key, row.values, row.default, row.drivers, row.what)), f"{table.title}: {row} has an empty cell"
            assert "\n" not in row.values + row.default + row.drivers + row.what, f"{row.key}: a cell spans lines"


def test_every_axis_has_a_row() -> None:
    keys = [r.key for r in _rows(VM_SECTION)]
    assert [k for k in keys if "." not in k] == [a.name for a in AXES]


def test_every_axis_says_what_it_does() -> None:
    """Its row of the axis table gives the page's sentence (not the fallback "a VM setting")."""
    assert [a.name for a in AXES if a.what == Axis.what] == []


@pytest.mark.parametrize("keys, title, prefix", [s[1:] for s in SECTIONS], ids=[s[0] for s in SECTIONS])
def test_every_key_of_a_loader_constant_has_a_row_in_its_section(keys: tuple[str, ...], title: str, prefix: str) -> None:
    have = {r.key for r in _rows(title)}
    missing = [prefix + k for k in keys if prefix + k not in have]
    assert not missing, f"section {title!r} has no row for {', '.join(missing)}"


@pytest.mark.parametrize("function, title, prefix", HYPERVISOR_READERS, ids=[f"{r[0]}-{r[1]}" for r in HYPERVISOR_READERS])
def test_every_hypervisor_key_has_a_row_in_its_section(function: str, title: str, prefix: str) -> None:
    module, _, function = function.rpartition(":")
    module = module or "hosts.py"
    keys = set().union(*(k for f, fn, k, _ in _done_calls() if f == module and fn == function))
    assert keys, f"{module[:-3]}.{function} calls done() with no keys"
    have = {r.key for r in _rows(title)}
    missing = sorted(prefix + k for k in keys if prefix + k not in have)
    assert not missing, f"section {title!r} has no row for {', '.join(missing)}"


def test_every_key_a_done_tuple_accepts_has_a_row() -> None:
    leaves = {r.leaf for r in _all_rows()}
    missing = sorted({f"{k} ({f}: {fn})" for f, fn, keys, taken in _done_calls()
                      if not taken and (f, fn) not in INTERNAL for k in keys if k not in leaves})
    assert not missing, f"keys the loader accepts with no row on the page: {', '.join(missing)}"


def test_every_row_names_a_key_the_loader_accepts() -> None:
    accepted = set().union(*(keys for _, _, keys, _ in _done_calls())) | {a.name for a in AXES} | set(PROPERTY_NAMES)
    stale = sorted(r.key for r in _all_rows() if r.leaf not in accepted)
    assert not stale, f"rows for keys the loader does not accept: {', '.join(stale)}"


def test_the_scan_finds_the_loaders_keys() -> None:
    """The scan is not vacuous: it sees the constants, the literal tuples and the taken keys."""
    accepted = set().union(*(keys for _, _, keys, _ in _done_calls()))
    assert set(TOP_KEYS) | set(JOB_KEYS) | {"known_hosts", "mount_options", "measure", "min_iops", "align"} <= accepted


EXAMPLES = sorted((ROOT / "scenarios").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_every_key_an_example_uses_has_a_row(path: Path) -> None:
    data = yaml.safe_load(path.read_text())
    top = {r.key for r in _rows("Top level")}
    vm = {r.key for r in _rows(VM_SECTION)}
    assert not set(data) - top, f"{path.name}: top-level keys with no row: {sorted(set(data) - top)}"
    assert not set(data.get("vm") or {}) - vm, f"{path.name}: vm: keys with no row: {sorted(set(data['vm']) - vm)}"
    assert not set(data.get("vary") or {}) - vm, f"{path.name}: vary: axes with no row: {sorted(set(data['vary']) - vm)}"
    for where in ("cells", "journey"):
        for entry in data.get(where) or []:
            unknown = {k for k in entry if k not in vm and f"{where}[].{k}" not in top}
            assert not unknown, f"{path.name}: {where} entry keys with no row: {sorted(unknown)}"
