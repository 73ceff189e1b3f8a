"""What the repository's own tools leave in a checkout is ignored by git (issue #28, item 16)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from .conftest import ROOT

# Left by examples/run_example.py (the program's stderr, beside its log) and by the tests'
# per-Python venvs (tests/test_subinterp.py), in the directory they ran in.
LEFT_BEHIND = ("wp_autotrace-example.stderr.txt", "wp_autotrace-example-guard.stderr.txt",
               "examples/wp_autotrace-example.stderr.txt", ".venv-subinterp/py3.12/bin/python", ".venv312/x",
               ".hypothesis/examples/x")


@pytest.mark.parametrize("path", LEFT_BEHIND)
def test_left_behind_files_are_ignored(path: str) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    res = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, timeout=60)
    assert res.returncode == 0, f"{path} is not ignored by .gitignore"
