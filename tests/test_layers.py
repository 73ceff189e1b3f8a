"""The package's layers: this module is the rule's one authoritative statement (ALLOWED, HOST_LAYERS,
COSTLY_AT_TOP), enforced on every import statement; docs/architecture.md and common/__init__.py describe it.

Every ``import`` and ``from ... import`` anywhere in a module counts (inside
functions and under ``if TYPE_CHECKING`` too): a lazy import still puts the
other layer's code into the process that runs it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "wp_autotrace"
LAYERS = ("common", "runtime", "watcher", "analysis", "cli")
# What each layer may import from the package, besides itself (module prefixes).
ALLOWED = {
    "common": (),
    "runtime": ("wp_autotrace.common",),
    # Never analysis/: the watcher decodes the log itself, deliberately (docs/architecture.md, "The data path").
    "watcher": ("wp_autotrace.common", "wp_autotrace.runtime.sink", "wp_autotrace.runtime.spawn"),
    "analysis": ("wp_autotrace.common", "wp_autotrace.__init__"),
    "cli": ("wp_autotrace",),
}
# Costly stdlib modules a host-side module must not import at its top level (each costs every
# traced process start-up time; bench/import_cost.py measures it).
HOST_LAYERS = ("common", "runtime")
COSTLY_AT_TOP = {"typing", "json", "re", "dataclasses", "logging", "inspect", "importlib.metadata"}


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if p.parent.name in LAYERS)


def _name_of(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, package: str | None = None) -> list[tuple[str, int]]:
    """(absolute module imported, line) for every import in the file; `from . import x` names x."""
    tree = ast.parse(path.read_text(), str(path))
    if package is None:
        package = _name_of(path) if path.name == "__init__.py" else _name_of(path).rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if node.module is None:
                found += [(f"{mod}.{a.name}", node.lineno) for a in node.names]
            else:
                found.append((mod, node.lineno))
    return found


def _allowed(layer: str, mod: str) -> bool:
    if not mod.startswith("wp_autotrace"):
        return True
    if mod == "wp_autotrace.__version__":
        mod = "wp_autotrace.__init__"
    own = f"wp_autotrace.{layer}"
    return any(mod == p or mod.startswith(p + ".") for p in (own, *ALLOWED[layer]))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_layer_imports(path: Path) -> None:
    layer = path.parent.name
    bad = [f"{path.name}:{line} imports {mod}" for mod, line in _imports(path) if not _allowed(layer, mod)]
    assert not bad, f"layer {layer} may import only {ALLOWED[layer] or 'itself'}: {bad}"


@pytest.mark.parametrize("path", [p for p in _modules() if p.parent.name in HOST_LAYERS],
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_host_side_top_level_stays_cheap(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    costly = []
    for node in tree.body:  # the module's top level only; `if TYPE_CHECKING:` bodies never run
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        costly += [f"{path.name}:{node.lineno} {n}" for n in names if n in COSTLY_AT_TOP]
    assert not costly, f"a host-side module imports at its top level: {costly}"


def test_the_rule_catches_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself: a runtime module importing analysis is found (mutation of the rule's input)."""
    fake = PKG / "runtime" / "recorder.py"
    src = tmp_path / "runtime"
    src.mkdir()
    bad = src / "recorder.py"
    bad.write_text(fake.read_text() + "\nfrom ..analysis import model\n")
    # Read as if it lived in the package: same relative resolution.
    found = [m for m, _ in _imports(bad, "wp_autotrace.runtime") if m == "wp_autotrace.analysis"]
    assert found and not _allowed("runtime", found[0])
