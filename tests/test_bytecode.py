"""PYTHONDONTWRITEBYTECODE (or -B) in the root reaches the watcher (issue #28, item 16): the watcher runs
with -I, which ignores PYTHON* variables, so without -B of its own it wrote __pycache__ into the package."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from .conftest import ROOT, clean_env, events, run_python, wait_for_watcher


def _pycaches(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("__pycache__"))


@pytest.mark.parametrize("how", ["env", "flag"])
def test_watcher_writes_no_bytecode_when_the_root_does_not(how: str, tmp_path: Path) -> None:
    """A fresh copy of the package (no __pycache__) on PYTHONPATH; the root runs with
    PYTHONDONTWRITEBYTECODE=1 or -B: after the run's watcher has ended, the copy holds no __pycache__."""
    pkg = tmp_path / "pkg"
    shutil.copytree(ROOT / "wp_autotrace", pkg / "wp_autotrace", ignore=shutil.ignore_patterns("__pycache__"))
    log = tmp_path / "run.jsonl"
    extra = {"PYTHONDONTWRITEBYTECODE": "1"} if how == "env" else {}
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="0",
                    PYTHONPATH=str(pkg), **extra)
    res = run_python([*(["-B"] if how == "flag" else []), "-c", "import wp_autotrace; print(wp_autotrace.__file__)"],
                     env, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.startswith(str(pkg)), (res.stdout, res.stderr)
    recs = wait_for_watcher(log, 60)
    assert events(recs, "watcher_start") and events(recs, "watcher_exit"), "the watcher did not run to its end"
    assert _pycaches(pkg) == []
