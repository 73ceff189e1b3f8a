"""Write the joined start module: START's code modules as ONE module, a generated file (python tools/join_start.py).

Why: a traced start made each of START's code modules on its own (its spec, its module, its globals, its imports of
the others), and each of their functions and classes kept a docstring and its annotations that the start unmarshals
and the collector walks at every start and at exit. One module made from the pack, without either, costs a traced
child ~0.7M instructions less (BENCHMARKS.md, "start, eighteenth round"). The rooms stay the sources, divided by job;
this file is an artefact of them (tests/test_join_start.py fails while it is not current: run this tool).

What the join keeps (else the tool fails, naming the line, and the source is changed by hand, once, in its home):
- Each source's lines at their own line numbers after its banner (what is left out becomes an empty line), so a
  traceback's line in the joined file is its source's line plus the banner's offset.
- Names: a top-level name is bound by one source, or by several with the same statement (an `import os`; kept
  once); a name a source takes from a builtin is bound by no other source; the names a source imports from
  another START module are that module's own (no `as`): the import is left out, the name is the same global.
- What the module's own attributes meant: `__name__` and `__package__` become their source's strings; `__file__`
  only as os.path.dirname's argument and only where the source is in the joined file's folder; `__spec__`,
  `__loader__`, `__path__`, `__cached__`, `__doc__`, `globals()` and `vars()` are refused.
- Relative imports (in functions: a module loaded at first need) are made absolute: the joined module's package is
  not each source's.
Left out: each source's module docstring, its `if TYPE_CHECKING:` block, function and class docstrings (a body of
only a docstring becomes `pass`), annotations on one line (arguments, returns, annotated assignments: a bare one
goes, one with a value keeps the value). No START code reads a docstring or an annotation of its own.
"""

from __future__ import annotations

import ast
import re
import symtable
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import wp_autotrace  # noqa: E402  (the loader: START, PACKAGES and the joined file's name are its facts)
from wp_autotrace import packwrite  # noqa: E402  (the banner's fingerprints: the pack's writer checks them)

PKG = ROOT / "wp_autotrace"
OUT = PKG.joinpath(*wp_autotrace.JOINED.split(".")[1:]).with_suffix(".py")
SOURCES = tuple(name for name in wp_autotrace.START if name not in wp_autotrace.PACKAGES)
_SUBSTITUTED = ("__name__", "__package__")
_REFUSED = ("__spec__", "__loader__", "__path__", "__cached__", "__doc__")
_NO_ARGS = ("globals", "vars", "locals", "dir")  # at module level, each the joined module's
_RELATIVE = re.compile(rb"from\s+(\.+)([\w.]*)\s+import")


class JoinError(Exception):
    """A source the join would change the meaning of: the message names its line and why."""


def source_path(name: str) -> Path:
    return PKG.joinpath(*name.split(".")[1:]).with_suffix(".py")


def _absolute(node: ast.ImportFrom, package: str) -> str:
    parts = package.split(".")
    return ".".join(parts[: len(parts) - node.level + 1]) + ("." + node.module if node.module else "")


class _Source:
    """One source's lines (bytes: ast's columns are UTF-8 offsets) and what the join does to them."""

    def __init__(self, name: str, text: str | None = None) -> None:
        self.name, self.package, self.path = name, name.rpartition(".")[0], source_path(name)
        self.text = self.path.read_text() if text is None else text
        self.lines = self.text.encode().splitlines(keepends=True)
        self.tree = ast.parse(self.text, str(self.path))
        self.cut: set[int] = set()  # line indexes left out (kept as empty lines)
        self.edits: dict[int, list[tuple[int, int, bytes]]] = {}  # line index -> (start, end, new bytes)

    def where(self, node: ast.AST) -> str:
        return f"{self.path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"

    def edit(self, line: int, start: int, end: int, new: bytes = b"") -> None:
        self.edits.setdefault(line, []).append((start, end, new))

    def cut_lines(self, node: ast.AST) -> None:
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])  # type: ignore[attr-defined]
        self.cut.update(range(first - 1, node.end_lineno))  # type: ignore[attr-defined]

    def statement(self, node: ast.stmt) -> str:
        """node's text as the join leaves it (substitutions made): what two sources' bindings are compared by."""
        return b"".join(self.render(i) for i in range(node.lineno - 1, node.end_lineno or node.lineno)).decode()

    def render(self, i: int) -> bytes:
        if i in self.cut:
            return b"\n"
        line = self.lines[i]
        for start, end, new in sorted(self.edits.get(i, ()), reverse=True):
            line = line[:start] + new + line[end:]
        return line


def _whole_lines(src: _Source, node: ast.AST) -> bool:
    """node alone on its lines (nothing before it on its first, nothing but a comment after it on its last)."""
    first, last = src.lines[node.lineno - 1], src.lines[node.end_lineno - 1]  # type: ignore[attr-defined]
    return (not first[:node.col_offset].strip()  # type: ignore[attr-defined]
            and last[node.end_col_offset:].strip()[:1] in (b"", b"#"))  # type: ignore[attr-defined]


def _names_and_imports(src: _Source) -> None:
    """Substitute the module's own names, refuse the rest, make relative imports absolute."""
    parents = {child: node for node in ast.walk(src.tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(src.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _NO_ARGS and not (
                node.args or node.keywords):
            raise JoinError(f"{src.where(node)}: {node.func.id}() would be the joined module's, not this source's")
        if isinstance(node, ast.Name) and node.id in _REFUSED:
            raise JoinError(f"{src.where(node)}: {node.id} would be the joined module's, not this source's")
        if isinstance(node, ast.Name) and node.id in _SUBSTITUTED:
            value = src.name if node.id == "__name__" else src.package
            if node.lineno != node.end_lineno or not isinstance(node.ctx, ast.Load):
                raise JoinError(f"{src.where(node)}: {node.id} not read on one line")
            src.edit(node.lineno - 1, node.col_offset, node.end_col_offset or 0, repr(value).encode())
        if isinstance(node, ast.Name) and node.id == "__file__":
            call = parents.get(node)
            while isinstance(call, ast.Call) and ast.unparse(call.func) == "os.path.abspath":
                call = parents.get(call)
            if not (isinstance(call, ast.Call) and ast.unparse(call.func) == "os.path.dirname"
                    and src.path.parent == OUT.parent):
                raise JoinError(f"{src.where(node)}: __file__ other than its folder's, or outside {OUT.parent}")
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            raise JoinError(f"{src.where(node)}: a __future__ import would hold for every source")
        if isinstance(node, ast.ImportFrom) and node.level:
            match = _RELATIVE.match(src.lines[node.lineno - 1], node.col_offset)
            if match is None:
                raise JoinError(f"{src.where(node)}: a relative import this tool cannot read")
            src.edit(node.lineno - 1, match.start(), match.end(),
                     f"from {_absolute(node, src.package)} import".encode())


def _docstrings_and_annotations(src: _Source) -> None:
    for node in ast.walk(src.tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            first = node.body[0]
            if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                    and isinstance(first.value.value, str) and _whole_lines(src, first)):
                src.cut_lines(first)
                if len(node.body) == 1:  # the body keeps a statement
                    src.cut.discard(first.lineno - 1)
                    src.edit(first.lineno - 1, first.col_offset, len(src.lines[first.lineno - 1]), b"pass\n")
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, args.vararg, *args.kwonlyargs, args.kwarg):
                ann = arg.annotation if arg is not None else None
                if ann is not None and arg.lineno == ann.end_lineno:  # type: ignore[union-attr]
                    start = arg.col_offset + len(arg.arg.encode())  # type: ignore[union-attr]
                    src.edit(arg.lineno - 1, start, ann.end_col_offset or 0)  # type: ignore[union-attr]
            ret = node.returns
            if ret is not None and ret.lineno == ret.end_lineno:
                line = src.lines[ret.lineno - 1]
                arrow = line.rfind(b"->", 0, ret.col_offset)
                if arrow > 0:
                    src.edit(ret.lineno - 1, len(line[:arrow].rstrip()), ret.end_col_offset or 0)
        if isinstance(node, ast.AnnAssign) and node.target.end_lineno == node.annotation.end_lineno:
            if node.value is not None and node.value.lineno == node.annotation.end_lineno:
                src.edit(node.target.end_lineno - 1, node.target.end_col_offset or 0,  # type: ignore[operator]
                         node.value.col_offset, b" = ")
            elif node.value is None and _whole_lines(src, node):
                src.cut_lines(node)


def _top_level(src: _Source, seen: dict[str, tuple[_Source, str]]) -> None:
    """Leave out the docstring, the TYPE_CHECKING block, imports of START modules and bindings made before."""
    body = src.tree.body
    for node in body:
        if node is body[0] and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
            src.cut_lines(node)
            continue
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING" and not node.orelse:
            src.cut_lines(node)
            continue
        if isinstance(node, ast.ImportFrom):
            target = _absolute(node, src.package) if node.level else node.module
            if target in SOURCES:
                for alias in node.names:
                    if alias.asname is not None or alias.name not in _bindings_of(seen, target):
                        raise JoinError(f"{src.where(node)}: {alias.name} is not {target}'s own name as it is")
                src.cut_lines(node)
                continue
        names = _bound(node)
        text = ast.dump(ast.parse(src.statement(node)))  # the same code, comments and layout aside
        earlier = {seen[n][1] for n in names if n in seen}
        if earlier and earlier == {text} and all(n in seen for n in names):
            src.cut_lines(node)  # the same statement bound these names before: made once
            continue
        if earlier:
            clash = next(n for n in names if n in seen)
            raise JoinError(f"{src.where(node)}: {clash} is bound by {seen[clash][0].name} too, otherwise: rename one")
        for name in names:
            seen[name] = (src, text)


def _bindings_of(seen: dict[str, tuple[_Source, str]], module: str) -> set[str]:
    return {name for name, (src, _) in seen.items() if src.name == module}


def _bound(node: ast.AST) -> set[str]:
    """The top-level names a statement binds (a def, a class, an import, an assignment's names, an if's, a with's...),
    not those local to a function, class, lambda or comprehension inside it."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    names: set[str] = set()
    todo = list(ast.iter_child_nodes(node))
    while todo:
        sub = todo.pop()
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom)):
            names |= _bound(sub)
        elif isinstance(sub, ast.comprehension):  # its targets are its own; a walrus in it binds here
            todo.extend([sub.iter, *sub.ifs])
        elif isinstance(sub, ast.NamedExpr) or not isinstance(sub, ast.Lambda):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
                names.add(sub.id)
            todo.extend(ast.iter_child_nodes(sub))
    return names


def _global_reads(src: _Source) -> set[str]:
    """The names the source's code reads or writes as globals (`global x`; a builtin where the source binds none)."""
    names: set[str] = set()
    tables = [symtable.symtable(src.text, str(src.path), "exec")]
    while tables:
        table = tables.pop()
        tables.extend(table.get_children())
        for sym in table.get_symbols():
            if (sym.is_referenced() or sym.is_assigned()) and (sym.is_global() or table.get_type() == "module"):
                names.add(sym.get_name())
    return names


def _shadowing(sources: list[_Source], seen: dict[str, tuple[_Source, str]]) -> None:
    """A source that reads a builtin (or its own global) must not find another source's global of that name."""
    for src in sources:
        own = set().union(*(_bound(node) for node in src.tree.body))
        for name in sorted(_global_reads(src) - own):
            if name in seen and seen[name][0] is not src:
                raise JoinError(f"{src.path.relative_to(ROOT)}: uses {name}, which {seen[name][0].name} binds:"
                                " rename one")


def join(texts: dict[str, str] | None = None) -> str:
    """The joined module's text (raises JoinError); texts: a source's text in place of its file's (tests)."""
    sources = [_Source(name, (texts or {}).get(name)) for name in SOURCES]
    seen: dict[str, tuple[_Source, str]] = {}
    for src in sources:
        _names_and_imports(src)
        _docstrings_and_annotations(src)
        _top_level(src, seen)
    _shadowing(sources, seen)
    out = [packwrite.joined_from([str(source_path(n)) for n in SOURCES]),
           f'"""GENERATED by tools/join_start.py from {", ".join(SOURCES)}: do not edit; edit them and run the tool.'
           "\n\nEach source's lines follow its banner at their own numbers (a line here is its source's line plus the"
           " banner's).\n\"\"\"\n"]
    for src in sources:
        offset = len("".join(out).splitlines()) + 1  # the banner's line
        out.append(f"# ---- {src.path.relative_to(ROOT)}: its line N is line N + {offset} here\n")
        out.extend(src.render(i).decode() for i in range(len(src.lines)))
    return "".join(out)


def main() -> int:
    try:
        text = join()
    except JoinError as exc:
        print(f"join_start: {exc}", file=sys.stderr)
        return 1
    OUT.write_text(text)
    print(f"{OUT.relative_to(ROOT)}: {len(text.splitlines())} lines from {len(SOURCES)} sources")
    return 0


if __name__ == "__main__":
    sys.exit(main())
