"""What a log holds never crashes a reader, and an output that fails is removed: a run id that is not UTF-8
(a child given WP_AUTOTRACE_RUN as raw bytes: Python holds the byte as a lone surrogate, the log keeps it
escaped) goes through every export and the report; an export that fails for any reason removes the file it
created (an empty 0600 file left behind made the rerun need --force)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wp_autotrace.cli.outfile import open_output, write_file

from .conftest import run_python, traced_env, wait_for_watcher

WP = [sys.executable, "-m", "wp_autotrace"]
# The traced main starts a traced child whose run id is b"caf\xe9" (not UTF-8): the child's records name that run.
ODD_RUN_CHILD = (
    "import os, subprocess, sys\n"
    "env = dict(os.environb); env[b'WP_AUTOTRACE_RUN'] = b'caf\\xe9'\n"
    "subprocess.run([sys.executable, '-c', 'pass'], env=env, check=True)\n")


@pytest.fixture
def odd_log(tmp_path: Path) -> Path:
    log = tmp_path / "run.jsonl"
    res = run_python(["-c", ODD_RUN_CHILD], traced_env(log))
    assert res.returncode == 0, res.stderr
    wait_for_watcher(log)
    assert "caf\\udce9" in log.read_text(encoding="utf-8")  # the odd id is in the log, escaped
    return log


@pytest.mark.parametrize("command", [["export", "--format", "otlp"], ["export"], ["report", "--html"]],
                         ids=["otlp", "chrome", "html"])
def test_a_run_id_that_is_not_utf8_is_exported(odd_log: Path, command: list[str]) -> None:
    out = odd_log.parent / "out"
    res = subprocess.run([*WP, *command, "-o", str(out), str(odd_log)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    text = out.read_text(encoding="utf-8")
    if command[0] == "export":
        doc = json.loads(text)
        if "otlp" in command:  # the odd run's process has its span, with the run's id as written
            spans = [s for rs in doc["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]]
            runs = {a["value"]["stringValue"] for s in spans for a in s["attributes"] if a["key"] == "wp.run"}
            assert "caf\udce9" in runs, runs
    res = subprocess.run([*WP, "report", "--json", str(odd_log)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr


def test_an_output_that_fails_for_any_reason_is_removed(tmp_path: Path) -> None:
    """A writer that raises (a reader's bug, not only a full disk) leaves no file behind: the error is not
    hidden, and the next try needs no --force."""
    path = tmp_path / "spans.json"

    def broken(write: object) -> None:
        write("{\"partial\": ")  # type: ignore[operator]
        raise UnicodeEncodeError("utf-8", "\udce9", 0, 1, "surrogates not allowed")

    with pytest.raises(UnicodeEncodeError):
        write_file(open_output(str(path), []), str(path), broken)
    assert not path.exists()
