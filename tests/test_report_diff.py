"""tools/report_diff.py, the check a change meant to keep every output runs before it lands."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from .conftest import ROOT


def test_logs_are_named_whole_for_drivers_that_run_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A log named by a relative path (`tests/fixtures`) reaches each tree's driver, which runs in a folder of its
    own, as an absolute path: else no file was found there, both trees wrote the same refusal, and a changed output
    read as '0 differ'."""
    spec = importlib.util.spec_from_file_location("report_diff", ROOT / "tools" / "report_diff.py")
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.jsonl").write_text("{}\n")
    (tmp_path / "b.jsonl").write_text("{}\n")
    monkeypatch.chdir(tmp_path)
    named = tool.logs_of(["logs", "b.jsonl"])
    assert named == [str((tmp_path / "logs" / "a.jsonl").resolve()), str((tmp_path / "b.jsonl").resolve())]
