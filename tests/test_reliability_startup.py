"""Fault injection, the start-up files: the installed .pth line and the environment values it reads.

How every case runs, and docs/reliability.md: tests/reliability_plugin.py.
"""

from __future__ import annotations

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


# The whole line. site compiles every .pth import line in every interpreter start (exec of its text), traced or
# not, and compiling costs by the token: the line holds one test, whether either variable is set at all (the
# common case: neither), and hands over to wp_autotrace._preload.start(), which reads their values (a false word
# starts nothing) as compiled code, tests for the main interpreter (site runs the line again in every
# subinterpreter) and runs start() once (site reads a venv's site-packages twice). The test reads os.environ's
# own bytes-keyed dict (POSIX; the .pth line runs on 3.9-3.14 only, PEP 829's .start after): dict lookups,
# where environ.get raised and caught a KeyError per unset name. Values are never part of any code here.
PTH_LINE = ('import os; {b"WP_AUTOTRACE", b"WP_AUTOTRACE_GUARD"} & os.environ._data.keys()'
            ' and __import__("wp_autotrace._preload")._preload.start()')


def check_pth_line(text: str) -> None:
    """The .pth holds one import line, PTH_LINE: it reads only our two variables' presence and imports only
    wp_autotrace._preload."""
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert lines == [PTH_LINE], lines


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
            # our entry module (an install older than the top-level wp_autotrace_start named wp_autotrace._site)
            assert all(e.partition(":")[0] in ("wp_autotrace_start", "wp_autotrace._site") for e in entries), entries


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
