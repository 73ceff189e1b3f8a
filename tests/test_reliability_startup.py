"""Fault injection, the start-up files: the installed .pth line and the environment values it reads.

How every case runs, and docs/reliability.md: tests/reliability_plugin.py.
"""

from __future__ import annotations

import ast
import sysconfig
from pathlib import Path

import pytest

from .conftest import (
    ROOT,
    clean_env,
    run_python,
)


def _installed_startup_files() -> list[Path]:
    """wp_autotrace's .pth (and PEP 829 .start) files in this interpreter's site-packages."""
    site = Path(sysconfig.get_paths()["purelib"])
    return sorted(p for p in site.iterdir() if p.name.startswith("wp_autotrace") and p.suffix in (".pth", ".start"))


ENV_NAMES = {"WP_AUTOTRACE", "WP_AUTOTRACE_GUARD"}
PTH_STRINGS = ENV_NAMES | {"", "1", "true", "yes", "on", "0", "false", "no", "off", "wp_autotrace._preload"}
PTH_ATTRS = {"environ", "get", "strip", "lower", "_preload", "start"}
# Issue 35: the line starts the tracer in the main interpreter only (site runs again in every
# subinterpreter). This one expression, and nothing else, may use sys and a lambda: it reads
# _thread._is_main_interpreter (3.12+) or, before 3.12, whether _signal is loaded yet (only the main
# interpreter has it when site runs). The rest of the line is checked node by node below.
MAIN_INTERPRETER_CHECK = ('sys.modules.get("_thread", sys).__dict__.get("_is_main_interpreter", '
                          'lambda: "_signal" in sys.modules)()')


# The line's outer test: whether either variable is set at all (the common case: neither). Only then is the
# guard below compiled (exec of its text): site compiles every .pth line in every interpreter start, and the
# full guard's compile was most of what an installed, untraced interpreter paid (docs/scale.md). The test reads
# os.environ's own bytes-keyed dict (POSIX; the .pth line runs on 3.9-3.14 only, PEP 829's .start after): two
# dict lookups, where environ.get raised and caught a KeyError per unset name, and fewer tokens to parse.
PTH_OUTER = ('import os; (b"WP_AUTOTRACE" in os.environ._data or b"WP_AUTOTRACE_GUARD" in os.environ._data)'
             ' and exec({once})')
# What the outer test execs: the guard, unless bootstrap is loaded already. site reads a venv's site-packages
# twice (site.venv, then site.main; CPython 3.9-3.13), so the line runs twice in every venv start, and
# compiling the guard was the line's largest cost in a traced one (docs/scale.md); bootstrap.start() ran
# once all the same (its run-once flag). The guard in triple quotes: no backslash in the line, whose
# literal site then reads (in every interpreter start, traced or not) without decoding escapes.
PTH_ONCE = 'import sys; "wp_autotrace.runtime.bootstrap" in sys.modules or exec("""{guard}""")'


def check_pth_line(text: str) -> None:
    """The .pth holds one import line that reads only our two variables and imports only our bootstrap:
    PTH_OUTER around PTH_ONCE, whose guard is one string literal checked node by node below."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 1, lines
    once = ast.parse(lines[0]).body[-1].value.values[-1].args[0]  # type: ignore[attr-defined]
    assert isinstance(once, ast.Constant) and isinstance(once.value, str), ast.dump(once)
    assert lines[0] == PTH_OUTER.format(once=repr(once.value)), lines[0]
    guard = ast.parse(once.value).body[-1].value.values[-1].args[0]  # type: ignore[attr-defined]
    assert isinstance(guard, ast.Constant) and isinstance(guard.value, str), ast.dump(guard)
    assert once.value == PTH_ONCE.format(guard=guard.value) and "\\" not in lines[0], once.value
    inner = guard.value
    assert inner.startswith("import sys; "), inner
    assert inner.count(MAIN_INTERPRETER_CHECK) == 1, "the main-interpreter check must stand as written"
    tree = ast.parse(inner.replace(MAIN_INTERPRETER_CHECK, "True"))
    imported: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            assert isinstance(node, ast.Import) and [a.name for a in node.names] == ["sys"]
        elif isinstance(node, ast.Name):
            assert node.id in ("os", "__import__"), node.id
        elif isinstance(node, ast.Attribute):
            assert node.attr in PTH_ATTRS, node.attr
        elif isinstance(node, ast.Constant):
            assert node.value is True or node.value in PTH_STRINGS, node.value
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                assert func.id == "__import__"
                args = [ast.literal_eval(a) for a in node.args]
                assert args == ["wp_autotrace._preload"] and not node.keywords
                imported.append(node.args[0].value)  # type: ignore[attr-defined]
            elif isinstance(func, ast.Attribute) and func.attr == "get":
                assert ast.unparse(func.value) == "os.environ"
                assert ast.literal_eval(node.args[0]) in ENV_NAMES
        elif isinstance(node, (ast.Subscript, ast.Lambda, ast.Starred)):
            raise AssertionError(f"unexpected {type(node).__name__} in the .pth line")
    assert imported == ["wp_autotrace._preload"]
    assert ast.unparse(tree).endswith("_preload.start()")


def test_pth_line_can_only_import_our_bootstrap() -> None:
    """The installed .pth line imports only wp_autotrace._preload and reads only WP_AUTOTRACE(_GUARD)."""
    files = _installed_startup_files()
    pths = [p for p in files if p.suffix == ".pth" and p.name == "wp_autotrace.pth"]
    assert pths, f"wp_autotrace.pth not installed in {sysconfig.get_paths()['purelib']}"
    check_pth_line(pths[0].read_text())
    check_pth_line((ROOT / "wp_autotrace" / "_bootstrap.pth").read_text())
    for other in files:
        if other.suffix == ".pth" and other.name != "wp_autotrace.pth":  # the editable install's path file
            assert not [line for line in other.read_text().splitlines() if line.startswith(("import ", "import\t"))]
        elif other.suffix == ".start":
            entries = [line.strip() for line in other.read_text().splitlines()
                       if line.strip() and not line.startswith("#")]
            assert all(e.startswith("wp_autotrace.") for e in entries), entries


@pytest.mark.parametrize("value", ['1" or __import__("os").system("echo pwned") or "', "__import__('x')",
                                   "1;import antigravity", "$(echo pwned)"])
def test_env_values_are_only_compared_never_run(value: str, tmp_path: Path) -> None:
    """Code-like WP_AUTOTRACE / WP_AUTOTRACE_GUARD values are compared as words, never run (one warning)."""
    res = run_python(["-c", "import sys; print(sorted(m for m in sys.modules if m in ('antigravity', 'x')))"],
                     clean_env(WP_AUTOTRACE=value), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "[]\n"
    assert res.stderr.startswith("wp-autotrace: WP_AUTOTRACE=") and res.stderr.count("\n") == 1, res.stderr
    res = run_python(["-c", "print('ran')"], clean_env(WP_AUTOTRACE_GUARD=value), cwd=tmp_path)
    assert res.returncode == 0 and res.stdout == "ran\n"
    assert all(line.startswith("wp-autotrace: ") for line in res.stderr.splitlines()), res.stderr
    assert not list(tmp_path.iterdir())
