"""Check which targets exist in an installed (or unpacked) torch, without importing it.

Importing torch to look would run its backends' auto-load (and so the very
warm_pool calls we are looking for), so the sources are read with ``ast``.
Used by ``wp-autotrace doctor`` and tools/check_targets.py.
"""

from __future__ import annotations

import ast
import os
from typing import Any, NamedTuple

from ...common.targets import CONFIG, IMPORT, TARGETS, Target


class Resolution(NamedTuple):
    """Whether one target's module and name exist under a source tree."""

    target: Target
    module_found: bool
    name_found: bool
    line: int | None


def module_file(root: str, module: str) -> str | None:
    """Path of a dotted module under root (the folder holding the top package)."""
    base = os.path.join(root, *module.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def top_level_defs(path: str) -> dict[str, Any]:
    """qualname -> line, for top-level functions, classes and their methods."""
    with open(path, "rb") as f:
        tree = ast.parse(f.read(), filename=path)
    names: dict[str, Any] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            names[node.name] = node.lineno
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names[f"{node.name}.{item.name}"] = item.lineno
    return names


def resolve(root: str, targets: tuple[Target, ...] = TARGETS, prefix: str = "torch") -> list[Resolution]:
    """Resolve the targets whose module starts with prefix against sources under root."""
    cache: dict[str, dict[str, Any] | None] = {}
    out = []
    for t in targets:
        if not t.module.startswith(prefix + ".") and t.module != prefix:
            continue
        if t.module not in cache:
            path = module_file(root, t.module)
            try:
                cache[t.module] = top_level_defs(path) if path else None
            except (OSError, SyntaxError, ValueError):
                cache[t.module] = None
        defs = cache[t.module]
        if defs is None:
            out.append(Resolution(t, False, False, None))
        elif t.mode in (IMPORT, CONFIG):
            out.append(Resolution(t, True, True, None))
        else:
            out.append(Resolution(t, True, t.qualname in defs, defs.get(t.qualname)))
    return out
