"""Which of the joined start module's functions the join could inline into their one caller (a count, no valgrind).

A traced start pays for each function it defines, whatever its body (BENCHMARKS.md, "start, nineteenth round"), so
one way to fewer functions without larger functions in the sources would be for tools/join_start.py to inline, in the
generated file only, each function called from exactly one place into that place. This counts, in the joined module
as it is (wp_autotrace.JOINED's file, read as text), every function and what would keep it a function:

- ``public``: its name has no leading underscore (another module or a test may import it);
- ``read outside``: its name is a word in another file of the package, tests/, tools/ or bench/ (an import, a
  patch, a test's call): the joined module is that source's module, so the name must stay bound;
- ``sites != 1``: called from no place or from several (a name in the joined module not as a call's function:
  ``value``, a callback, a hook, a handler: it must stay a function object);
- ``method`` / ``nested``: a class's method (reached through an instance) or a function made inside another;
- ``early return``, ``generator``, ``finally``, ``defaults``, ``*args``, ``decorated``, ``global``, ``closure``:
  a body the inlining would have to restructure (a return before its end) or whose meaning it changes;
- ``frames``: it or a function it calls (transitively, in the module) reads frames by depth (``_getframe``,
  ``f_back``): one frame fewer changes what it finds;
- ``recursive``: it calls itself or its caller reaches it again;
- ``name clash``: a local of its own is a local of its caller's too (the call's own argument names aside).

Each function left with no reason is ``inlinable``; the summary counts them and those with only ``early return``
(a restructured body). A function inlined removes its code object and its function (~7.4K instructions each,
measured by hand-inlining: BENCHMARKS.md, "start, twentieth round"), not its body's unmarshal.

Usage: python bench/start_inline.py [--json]
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
import wp_autotrace  # noqa: E402  (JOINED, START: the loader's facts)

JOINED = REPO.joinpath(*wp_autotrace.JOINED.split(".")).with_suffix(".py")
FRAME_WORDS = ("_getframe", "getframe", "f_back")
# What each reason means is in the module's docstring; these are a body's own
_BODY_REASONS = ("early return", "generator", "finally", "defaults", "*args", "decorated", "global", "closure")


def _sources() -> set[Path]:
    names = [n for n in wp_autotrace.START if n not in wp_autotrace.PACKAGES]
    return {REPO.joinpath(*n.split(".")).with_suffix(".py") for n in names} | {JOINED}


def _outside_words() -> set[str]:
    """Every identifier-like word of the files that are not START's sources nor the joined module."""
    skip, words = _sources(), set[str]()
    for folder in ("wp_autotrace", "tests", "tools", "bench"):
        for path in (REPO / folder).rglob("*.py"):
            if path not in skip:
                words.update(re.findall(r"[A-Za-z_]\w*", path.read_text()))
    words.update(re.findall(r"[A-Za-z_]\w*", (REPO / "wp_autotrace_start.py").read_text()))
    return words


def _own_nodes(func: ast.AST) -> list[ast.AST]:
    """The nodes of func's own scope (not those of a function, lambda or class made inside it)."""
    out: list[ast.AST] = []
    todo = list(ast.iter_child_nodes(func))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _locals(func: ast.FunctionDef) -> set[str]:
    args = func.args
    names = {a.arg for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg) if a}
    for node in _own_nodes(func):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def _body_reasons(func: ast.FunctionDef) -> list[str]:
    own, args = _own_nodes(func), func.args
    found = {
        "early return": any(isinstance(n, ast.Return) for n in own if n is not func.body[-1]),
        "generator": any(isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)) for n in own),
        "finally": any(isinstance(n, ast.Try) and n.finalbody for n in own),
        "defaults": bool(args.defaults or any(args.kw_defaults)),
        "*args": bool(args.vararg or args.kwarg),
        "decorated": bool(func.decorator_list),
        "global": any(isinstance(n, (ast.Global, ast.Nonlocal)) for n in own),
        "closure": any(isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)) for n in own),
    }
    return [reason for reason in _BODY_REASONS if found[reason]]


def _calls_in(func: ast.AST) -> set[str]:
    return {n.func.id for n in _own_nodes(func) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}


def _reads_frames(name: str, top: dict[str, ast.FunctionDef], seen: set[str]) -> bool:
    if name in seen or name not in top:
        return False
    seen.add(name)
    func = top[name]
    words = {n.id for n in ast.walk(func) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(func) if isinstance(n, ast.Attribute)}
    return bool(words & set(FRAME_WORDS)) or any(_reads_frames(c, top, seen) for c in _calls_in(func))


def rows(text: str, outside: set[str]) -> list[dict[str, Any]]:
    """One row per function of the joined module's text: its name, line, call sites and the reasons it stays."""
    tree = ast.parse(text)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    top = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    loads: dict[str, list[ast.Name]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            loads.setdefault(node.id, []).append(node)
    out: list[dict[str, Any]] = []
    for func in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        name, reasons = func.name, []
        sites = [n for n in loads.get(name, ()) if isinstance(parents[n], ast.Call)
                 and parents[n].func is n]  # type: ignore[attr-defined]
        values = len(loads.get(name, ())) - len(sites)
        if parents[func] is not tree:
            reasons.append("method" if isinstance(parents[func], ast.ClassDef) else "nested")
        if not name.startswith("_"):
            reasons.append("public")
        if name in outside:
            reasons.append("read outside")
        if len(sites) != 1:
            reasons.append(f"sites {len(sites)}")
        if values:
            reasons.append(f"value {values}")
        if isinstance(func, ast.FunctionDef):
            reasons += _body_reasons(func)
            if _reads_frames(name, top, set()):
                reasons.append("frames")
        caller = _enclosing(sites[0], parents) if len(sites) == 1 else None
        if caller is func or name in _calls_in(func):
            reasons.append("recursive")
        elif caller is not None and isinstance(func, ast.FunctionDef) and isinstance(caller, ast.FunctionDef):
            call = parents[sites[0]]
            passed = {a.id for a in call.args if isinstance(a, ast.Name)} if isinstance(call, ast.Call) else set()
            if (_locals(func) & _locals(caller)) - passed:
                reasons.append("name clash")
        out.append({"name": name, "line": func.lineno, "sites": len(sites), "reasons": reasons})
    return out


def _enclosing(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> ast.AST | None:
    while node in parents:
        node = parents[node]
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    table = rows(JOINED.read_text(), _outside_words())
    inlinable = [r["name"] for r in table if not r["reasons"]]
    restructured = [r["name"] for r in table if r["reasons"] == ["early return"]]
    one_site = [r["name"] for r in table if r["sites"] == 1]
    # The ceiling: private, called once, never a value, whatever else (a word outside may be a comment's)
    ceiling = [r["name"] for r in table if r["sites"] == 1 and not {"public", "method", "nested"} & set(r["reasons"])
               and not any(str(reason).startswith("value") for reason in r["reasons"])]
    out = {"functions": len(table), "called_from_one_site": len(one_site), "inlinable": inlinable,
           "inlinable_if_early_returns_restructured": restructured, "private_one_site_ceiling": ceiling,
           "rows": [f"{r['line']} {r['name']}: {', '.join(map(str, r['reasons'])) or 'inlinable'}" for r in table]}
    print(json.dumps(out, indent=None if args.json else 1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
