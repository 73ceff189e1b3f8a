"""House rules the code keeps: small functions, modules and classes, and every file a comment cites exists.

Both are read off the source with ast/tokenize, like the layer rule (tests/test_layers.py).
"""

from __future__ import annotations

import ast
import io
import os
import re
import tokenize
from pathlib import Path

import pytest

from wp_autotrace import JOINED

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "wp_autotrace"
# Not the joined start module: generated from START's sources (tools/join_start.py), which are the rooms
_JOINED = PKG.joinpath(*JOINED.split(".")[1:]).with_suffix(".py")
SOURCES = sorted(p for p in PKG.rglob("*.py") if p != _JOINED)
# A function longer than this does several things: split it.
MAX_FUNCTION_LINES = 80
# Folders a citation may start from: the repository's own, or a layer of the package.
REPO_PREFIXES = ("docs/", "tests/", "bench/", "tools/", "examples/", "wp_autotrace/", "common/", "runtime/",
                 "watcher/", "analysis/", "cli/", "../")
# File names cited from torch's own tree (the target table describes them).
EXTERNAL_NAMES = {"__autotune_main__.py"}
_CITED = re.compile(r"(?<![\w/.-])((?:\.\./)?[\w][\w./-]*\.(?:md|py))\b")
_STDLIB = Path(os.__file__).parent
_NAMES = {p.name for p in ROOT.rglob("*") if not {".git", ".venv", "bench"} & set(p.parts)}


def _long_functions(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno is not None and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_function_over_80_lines(path: Path) -> None:
    assert not _long_functions(path)


# A module over this many lines holds several rooms; a class over this many, several jobs (the function
# rule alone pushed code into ever larger classes). A class counts with the package's classes it extends:
# spreading one object over files by inheritance is not dividing it (compose instead: the object has a part).
MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 300
# Over their limit and being split elsewhere: each entry is over today, and the stale-entry test below
# fails once one no longer is, so the lists only shrink.
BEING_SPLIT_MODULES: set[str] = set()
BEING_SPLIT_CLASSES: set[str] = set()


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())


def _class_index() -> dict[str, tuple[int, list[str]]]:
    """Every class of the package by name: (its own lines, the names of its bases as their modules spell
    them, an `import X as Y` undone)."""
    index: dict[str, tuple[int, list[str]]] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text(), str(path))
        alias = {a.asname: a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names if a.asname}
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                bases = [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases
                         if isinstance(b, (ast.Name, ast.Attribute))]
                index[node.name] = (node.end_lineno - node.lineno + 1, [alias.get(b, b) for b in bases])
    return index


def _class_lines(name: str, index: dict[str, tuple[int, list[str]]], seen: frozenset[str] = frozenset()) -> int:
    """A class's lines with those of every base it has in the package (transitively)."""
    own, bases = index[name]
    return own + sum(_class_lines(b, index, seen | {name}) for b in bases if b in index and b not in seen | {name})


def _long_classes(path: Path, index: dict[str, tuple[int, list[str]]] | None = None) -> list[str]:
    index = _class_index() if index is None else index
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(PKG)}:{node.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ClassDef) and _class_lines(node.name, index) > MAX_CLASS_LINES]


def test_a_class_counts_with_its_bases() -> None:
    """The measure itself: a class's lines add those of the package classes it extends."""
    index = {"A": (200, ["B", "object"]), "B": (90, ["C"]), "C": (30, []), "D": (10, ["D"])}
    assert _class_lines("A", index) == 320 and _class_lines("B", index) == 120 and _class_lines("D", index) == 10


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_module_over_600_lines(path: Path) -> None:
    if str(path.relative_to(PKG)) not in BEING_SPLIT_MODULES:
        assert _lines(path) <= MAX_MODULE_LINES, f"{path.relative_to(PKG)}: {_lines(path)} lines"


CLASS_INDEX = _class_index()


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_class_over_300_lines(path: Path) -> None:
    assert not [c for c in _long_classes(path, CLASS_INDEX) if c not in BEING_SPLIT_CLASSES]


def test_being_split_lists_only_what_is_still_over() -> None:
    """An entry whose module or class is back under its limit (or gone) is stale: remove it."""
    stale = [m for m in BEING_SPLIT_MODULES if not (PKG / m).exists() or _lines(PKG / m) <= MAX_MODULE_LINES]
    long_classes = {c for path in SOURCES for c in _long_classes(path, CLASS_INDEX)}
    stale += [c for c in BEING_SPLIT_CLASSES if c not in long_classes]
    assert not stale, f"no longer over the limit: remove from BEING_SPLIT_*: {stale}"


def _import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (every import statement, lazy ones included)."""
    from .test_layers import _imports, _name_of

    modules = {_name_of(p): p for p in SOURCES}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for mod, _ in _imports(path):
            while mod and mod not in modules:  # `from .x import name`: the module x
                mod = mod.rpartition(".")[0]
            if mod and mod != name:
                deps.add(mod)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle() -> None:
    """The data path is linear (logread -> model -> view -> findings -> report -> render), and so is the rest."""
    graph = _import_graph()
    assert "wp_autotrace.analysis.fold.model" in graph["wp_autotrace.analysis.derive.view"]  # the graph is really read
    assert _cycles(graph) == []
    assert _cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]  # and a cycle would be seen


def _missing_citations(path: Path, strings: bool = True) -> list[str]:
    """Files named in path's comments (and strings: docstrings) that exist nowhere they could mean."""
    missing = []
    kinds = (tokenize.COMMENT, tokenize.STRING) if strings else (tokenize.COMMENT,)
    for tok in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
        if tok.type not in kinds:
            continue
        for cited in _CITED.findall(tok.string):
            if "/" in cited and not cited.startswith(REPO_PREFIXES) and not cited.endswith(".md"):
                continue  # a path in another project's tree (torch's, a plugin's)
            bases = (ROOT, PKG, path.parent)
            # Inside the repository: a checkout has nothing beside it.
            found = any((base / cited).exists() and (base / cited).resolve().is_relative_to(ROOT) for base in bases)
            if "/" not in cited:
                found = found or cited in _NAMES or (_STDLIB / cited).exists() or cited in EXTERNAL_NAMES
            if not found:
                missing.append(f"{path.relative_to(ROOT)}:{tok.start[0]} cites {cited}")
    return missing


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_every_cited_file_exists(path: Path) -> None:
    assert not _missing_citations(path)


# Tests, benches and tools: their strings are mostly the scripts they write, so comments only.
OTHER_SOURCES = sorted(p for folder in ("tests", "bench", "tools", "examples") for p in (ROOT / folder).rglob("*.py")
                       if not {"fixtures", ".venvs", "scenario"} & set(p.parts))


@pytest.mark.parametrize("path", OTHER_SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_file_cited_in_a_comment_exists(path: Path) -> None:
    assert not _missing_citations(path, strings=False)


def test_no_citation_of_a_contracts_file_that_does_not_exist() -> None:
    """The contracts the code cites are docs/contracts.md's sections, cited by that name."""
    cites = [f"{p.relative_to(ROOT)}:{n}" for p in [*SOURCES, *sorted((ROOT / "tests").glob("*.py"))]
             for n, line in enumerate(p.read_text().splitlines(), 1)
             if re.search(r"CONTRACTS\b", line) and p.name != "test_house.py"]
    assert not cites


def test_every_cited_contract_is_a_section_of_docs_contracts() -> None:
    """A comment citing docs/contracts.md and a quoted name names one of that page's sections."""
    sections = {line[3:].strip() for line in (ROOT / "docs" / "contracts.md").read_text().splitlines()
                if line.startswith("## ")}
    cited = {(f"{p.relative_to(ROOT)}", name) for p in [*SOURCES, *OTHER_SOURCES]
             for name in re.findall(r'docs/contracts\.md, "([^"]+)"', p.read_text())}
    assert cited and not {c for c in cited if c[1] not in sections}


ARCHITECTURE = ROOT / "docs" / "architecture.md"
# What a module index entry may name besides Python modules: the start-up files beside the package.
INDEXED_SUFFIXES = (".py", ".pth", ".start")


def module_index(text: str) -> set[str]:
    """The files docs/architecture.md's "## Modules" index names, as paths under wp_autotrace/.

    Each bullet opens with its folder (`wp_autotrace/` for the package root, else `common/`, `analysis/`, …);
    every later `name.py` (or `sub/name.py`) in it is a file of that folder, and every `sub/` a package, whose
    `__init__.py` it names (the folder that opens a bullet names its own)."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    named: set[str] = set()
    for bullet in re.split(r"\n(?=- `)", section):
        tokens = re.findall(r"`([^`\s]+)`", bullet)
        if not bullet.startswith("- `") or not tokens or not tokens[0].endswith("/"):
            continue
        folder = "" if tokens[0] == "wp_autotrace/" else tokens[0]
        for token in tokens:
            if token.endswith("/"):
                named.add(f"{folder}{'' if token == tokens[0] else token}__init__.py")
            elif token.endswith(INDEXED_SUFFIXES):
                named.add(folder + token)
    return named


def test_the_module_index_names_every_module() -> None:
    """docs/architecture.md's module index names every .py file of the package, and every file it names
    exists: a module added (or moved, or removed) without its line in the index fails here, saying which."""
    named = module_index(ARCHITECTURE.read_text())
    files = {str(p.relative_to(PKG)) for p in SOURCES}
    unnamed, stale = sorted(files - named), sorted(f for f in named if not (PKG / f).exists())
    assert not unnamed, f"docs/architecture.md's module index (## Modules) does not name: {unnamed}"
    assert not stale, f"docs/architecture.md's module index names files that do not exist: {stale}"
    # the reading itself: a bullet's folder, a sub-package, a file in it
    sample = module_index("\n## Modules\n\n- `analysis/`: `fold.py`, `findings/` (`findings/runs.py`)\n\n## Next\n")
    assert sample == {"analysis/__init__.py", "analysis/fold.py", "analysis/findings/__init__.py",
                      "analysis/findings/runs.py"}


# Names that have one home besides vocab.py's: the package defines each once (a module-level assignment, a
# function or a class), and every other module imports it.
ONE_HOME = {"MIB", "POOL_ROLES", "signal_name", "STALE_S", "run_id"}


def _top_level_names(path: Path) -> set[str]:
    """Names path defines at its top level (assignments, functions, classes), and as properties of its classes."""
    tree = ast.parse(path.read_text(), str(path))
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            if isinstance(node, ast.ClassDef):
                names.update(f.name for f in node.body if isinstance(f, ast.FunctionDef)
                             and any(isinstance(d, ast.Name) and d.id == "property" for d in f.decorator_list))
    return names


def _definitions(names: set[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in SOURCES:
        for name in _top_level_names(path) & names:
            found.setdefault(name, []).append(str(path.relative_to(PKG)))
    return found


def test_one_definition_per_vocabulary_name() -> None:
    """common/vocab.py (with core.py, the part a traced start loads, which it re-exports) is the vocabulary's one
    home: no other module defines a name either defines (an event, a role, POOL_ROLES, ...), neither defines one
    the other does, and the few names with another home (ONE_HOME) are each defined once."""
    vocab_names = _top_level_names(PKG / "common" / "vocab.py") | _top_level_names(PKG / "common" / "core.py")
    twice = {n: where for n, where in _definitions(vocab_names | ONE_HOME).items() if len(where) > 1}
    assert not twice, f"defined in more than one module (import it from its home): {twice}"
    assert {"POOL_ROLES", "COMPILE_WORKER", "MEMORY_STALE_S"} <= vocab_names  # the scan reads the module
    assert set(_definitions(ONE_HOME)) == ONE_HOME  # each still has its home


def test_the_compile_worker_role_is_spelled_through_vocab() -> None:
    """The role is the vocabulary's: outside core.py (its home; and the target table, data) no string spells it."""
    from wp_autotrace.common.vocab import COMPILE_WORKER

    spelled = [f"{p.relative_to(PKG)}:{node.lineno}" for p in SOURCES if p.name not in ("core.py", "targets.py")
               for node in ast.walk(ast.parse(p.read_text())) if isinstance(node, ast.Constant)
               and node.value == COMPILE_WORKER]
    assert not spelled, f"spell it vocab.COMPILE_WORKER: {spelled}"


# A comment explains the code, not its history: an issue tracker's numbers mean nothing to a reader of
# the package (they stay in commit messages); cite the docs section that holds the reason instead.
_HISTORY = re.compile(r"(issue|Issue)s? #?[0-9]+|review [0-9]+ #[0-9]+")
# Modules whose citations wait for another change to their file to land first; the stale-entry check
# below fails once one has none, so the set only shrinks.
HISTORY_PENDING: set[str] = set()


def _history(path: Path) -> list[str]:
    return [f"{path.relative_to(PKG)}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if _HISTORY.search(line)]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_issue_number_cited_in_the_package(path: Path) -> None:
    if str(path.relative_to(PKG)) not in HISTORY_PENDING:
        assert not _history(path), "cite the docs section that holds the reason, not an issue number"


def test_history_pending_lists_only_modules_still_citing() -> None:
    assert not [m for m in HISTORY_PENDING if not (PKG / m).exists() or not _history(PKG / m)]
    assert _HISTORY.search("see issue 30's model") and _HISTORY.search("(review 2 #4)")
    assert not _HISTORY.search("docs/evidence.md, \"Memory at once\"")


# Modules that still import a private name of another module, waiting for another change to their
# file to land first; the stale-entry check fails once one imports none, so the set only shrinks.
PRIVATE_IMPORT_PENDING: set[str] = set()


def _private_imports(path: Path) -> list[str]:
    """`from X import _name` where X is a module of the package: a name private to X used elsewhere."""
    tree = ast.parse(path.read_text(), str(path))
    return [f"{path.relative_to(PKG)}:{node.lineno} imports {a.name}" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("wp_autotrace"))
            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(PKG)))
def test_no_private_name_imported_from_another_module(path: Path) -> None:
    """A name with a leading underscore is its module's own: another module that needs it needs a public
    name (or the function belongs with it)."""
    if str(path.relative_to(PKG)) not in PRIVATE_IMPORT_PENDING:
        assert not _private_imports(path)


def test_private_import_pending_lists_only_modules_still_importing() -> None:
    assert not [m for m in PRIVATE_IMPORT_PENDING if not (PKG / m).exists() or not _private_imports(PKG / m)]
