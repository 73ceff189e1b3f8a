"""What the repository's own tools leave in a checkout is ignored by git (issue #28, item 16)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import ROOT

# Left by examples/run_example.py (the program's stderr, beside its log) and by the tests'
# per-Python venvs (tests/test_subinterp.py made them in the checkout before they moved to a cache folder).
LEFT_BEHIND = ("wp_autotrace-example.stderr.txt", "wp_autotrace-example-guard.stderr.txt",
               "examples/wp_autotrace-example.stderr.txt", ".venv-subinterp/py3.12/bin/python", ".venv312/x",
               ".hypothesis/examples/x",
               # what the README's commands write where they are run (report --html -o run.html, export -o
               # trace.json, docs/export.md's --format otlp -o spans.json)
               "run.html", "trace.json", "spans.json")


@pytest.mark.parametrize("path", LEFT_BEHIND)
def test_left_behind_files_are_ignored(path: str) -> None:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    res = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, timeout=60)
    assert res.returncode == 0, f"{path} is not ignored by .gitignore"


def test_a_log_kept_as_a_tests_fixture_is_not_ignored() -> None:
    """Logs are ignored (*.jsonl: every traced run writes one), but a log under tests/fixtures is a test's input:
    ignored, `git add` leaves it out without a word and every clone fails that test."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("tests/fixtures/odd/a_new_case.jsonl", "tests/fixtures/x/y/z.jsonl"):
        res = subprocess.run(["git", "check-ignore", "--no-index", "-q", path], cwd=ROOT, timeout=60)
        assert res.returncode == 1, f"{path} is ignored by .gitignore"
    res = subprocess.run(["git", "check-ignore", "--no-index", "-q", "tests/run.jsonl"], cwd=ROOT, timeout=60)
    assert res.returncode == 0, "a log elsewhere in tests/ is no longer ignored"


def test_the_tests_venvs_are_made_outside_the_checkout() -> None:
    """The per-Python venvs of tests/test_subinterp.py (about 76 MB each) are made in a cache folder
    outside the checkout: nothing of theirs can show in `git status`, whatever the ignore rules."""
    from . import test_subinterp

    assert not test_subinterp.VENVS.resolve().is_relative_to(ROOT.resolve()), test_subinterp.VENVS


def _cpython_diff() -> Any:
    spec = importlib.util.spec_from_file_location("cpython_diff", ROOT / "tools" / "cpython_diff.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("keep", [False, True], ids=["temporary", "--out"])
def test_cpython_diff_names_only_an_outputs_folder_that_stays(tmp_path: Path, keep: bool,
                                                             monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """tools/cpython_diff.py with no difference removes its temporary outputs folder: it never prints that
    folder as where the outputs are; with --out it names the folder it keeps. (The regrtest runs are
    stood in for: the same outcome both ways, a log with records.)"""
    tool = _cpython_diff()
    monkeypatch.setattr(tool, "run_tests", lambda *a: {"test.test_x.T.test_a": "pass"})
    monkeypatch.setattr(tool, "log_records", lambda log: 1)
    monkeypatch.setattr(tool.tempfile, "tempdir", str(tmp_path))
    out = tmp_path / "kept"
    assert tool.main([sys.executable, "--tests", "test_x", *(["--out", str(out)] if keep else [])]) == 0
    printed = capsys.readouterr().out
    named = [line.split("outputs in ", 1)[1].strip() for line in printed.splitlines() if "outputs in " in line]
    assert named == ([str(out)] if keep else []), printed
    assert all(Path(folder).is_dir() for folder in named)
    assert keep or not list(tmp_path.glob("cpython-diff-*")), "the temporary folder is left behind"
