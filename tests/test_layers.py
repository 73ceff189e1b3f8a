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


# The stages of analysis/, in reading order; what each stage may import of analysis/ besides itself. A
# module directly in analysis/ is a stage of its own named after it (report.py). Words (sentences and
# number words) are the ground every stage may stand on; the presenters read what derive made and never
# the findings, and the findings never a presenter. No stage imports one listed after it.
STAGES = ("words", "read", "fold", "derive", "findings", "present", "report", "export")
STAGE_ALLOWED = {
    "words": (),
    "read": ("words",),
    "fold": ("words", "read"),
    "derive": ("words", "read", "fold"),
    "findings": ("words", "read", "fold", "derive"),
    "present": ("words", "read", "fold", "derive"),
    "report": ("words", "read", "fold", "derive", "findings"),
    "export": ("words", "read", "fold", "derive", "findings", "present", "report"),
}
ANALYSIS = PKG / "analysis"


def _layer_of(path: Path) -> str:
    return path.relative_to(PKG).parts[0]


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if _layer_of(p) in LAYERS)


def _stage_of_path(path: Path) -> str | None:
    """The stage of an analysis/ module: its folder, or its own name when it sits in analysis/ itself."""
    rel = path.relative_to(ANALYSIS).parts
    if rel == ("__init__.py",):
        return None
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _stage_of_module(mod: str) -> str | None:
    """The stage of an imported module name under wp_autotrace.analysis (None for the package itself)."""
    parts = mod.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["wp_autotrace", "analysis"] else None


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


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_layer_imports(path: Path) -> None:
    layer = _layer_of(path)
    bad = [f"{path.name}:{line} imports {mod}" for mod, line in _imports(path) if not _allowed(layer, mod)]
    assert not bad, f"layer {layer} may import only {ALLOWED[layer] or 'itself'}: {bad}"


@pytest.mark.parametrize("path", [p for p in _modules() if _layer_of(p) in HOST_LAYERS],
                         ids=lambda p: str(p.relative_to(PKG)))
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


def _stage_violations(path: Path, package: str | None = None) -> list[str]:
    own = _stage_of_path(path) if package is None else package.split(".")[2]
    bad = []
    for mod, line in _imports(path, package):
        stage = _stage_of_module(mod)
        if stage is not None and stage != own and stage not in STAGE_ALLOWED[own or ""]:
            bad.append(f"{path.name}:{line} imports {mod} (stage {stage})")
    return bad


def test_every_analysis_module_has_a_stage() -> None:
    stages = {_stage_of_path(p) for p in ANALYSIS.rglob("*.py")} - {None}
    assert stages == set(STAGES), f"analysis/ holds stages the order does not name: {stages ^ set(STAGES)}"
    assert list(STAGE_ALLOWED) == list(STAGES)
    # The order is an order: each stage may import only stages listed before it.
    assert all(set(STAGE_ALLOWED[s]) <= set(STAGES[:i]) for i, s in enumerate(STAGES))


@pytest.mark.parametrize("path", [p for p in ANALYSIS.rglob("*.py") if _stage_of_path(p)],
                         ids=lambda p: str(p.relative_to(ANALYSIS)))
def test_stage_imports(path: Path) -> None:
    """The analysis reads, folds, derives, finds, words and presents in that order: no import goes back."""
    bad = _stage_violations(path)
    assert not bad, f"stage {_stage_of_path(path)} may import only {STAGE_ALLOWED[_stage_of_path(path) or '']}: {bad}"


def test_the_stage_rule_catches_an_arrow_back(tmp_path: Path) -> None:
    """The checker itself: the fold importing the report is found, as is words importing a presenter."""
    bad = tmp_path / "fold.py"
    bad.write_text((ANALYSIS / "fold" / "fold.py").read_text() + "\nfrom ..report import report_of\n")
    assert _stage_violations(bad, "wp_autotrace.analysis.fold")
    worse = tmp_path / "fmt.py"
    worse.write_text("from ..present import render\n")
    assert _stage_violations(worse, "wp_autotrace.analysis.words")
    assert not _stage_violations(worse, "wp_autotrace.analysis.export")


# The presenters: each lays the report out its own way and none imports another (shared lines live in
# words/). The page's pieces are its own: html draws with svg (the page's drawing kit, which imports no
# presenter). The page's input is the report dict alone: it imports nothing the dict is made from.
PRESENT = ANALYSIS / "present"
PRESENTER_MAY_IMPORT = {"html": {"svg"}}
DICT_ONLY = {"html", "svg"}
MADE_FROM = ("read", "fold", "derive", "findings", "report")


def _presenter_violations(path: Path, package: str = "wp_autotrace.analysis.present") -> list[str]:
    own, bad = path.stem, []
    for mod, line in _imports(path, package):
        parts = mod.split(".")
        if parts[:3] == ["wp_autotrace", "analysis", "present"] and len(parts) > 3:
            if parts[3] != own and parts[3] not in PRESENTER_MAY_IMPORT.get(own, set()):
                bad.append(f"{path.name}:{line} imports the presenter {mod}")
        elif own in DICT_ONLY and _stage_of_module(mod) in MADE_FROM:
            bad.append(f"{path.name}:{line} imports {mod}: the page reads the report dict alone")
    return bad


@pytest.mark.parametrize("path", [p for p in PRESENT.glob("*.py") if p.name != "__init__.py"], ids=lambda p: p.name)
def test_presenters_import_no_other_presenter_and_the_page_reads_the_dict(path: Path) -> None:
    """Text, page and SVG each their own room: no presenter imports another (but the page its SVG pieces), and
    the page and its pieces import nothing the report dict is made from (no View, no model: the dict alone)."""
    bad = _presenter_violations(path)
    assert not bad, bad


def test_the_presenter_rule_catches_a_crossing(tmp_path: Path) -> None:
    """The checker itself: the page importing the text presenter, or the View, is found; svg into html is not."""
    page = tmp_path / "html.py"
    page.write_text("from .render import render_text\nfrom ..derive.view import View\nfrom .svg import rect\n")
    assert len(_presenter_violations(page)) == 2
    text = tmp_path / "render.py"
    text.write_text("from .svg import esc\n")
    assert _presenter_violations(text)


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
