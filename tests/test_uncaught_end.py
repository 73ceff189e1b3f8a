"""A main process an uncaught exception ends: the report says so (the Run line, the Answer, the Findings'
line, runs[].root_error), not "ended" and "Nothing unusual". The truth is read by the test itself: the
program's own return code and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from wp_autotrace.analysis.words.fmt import uncaught_words

PROGRAM = 'import subprocess, sys\nsubprocess.run([sys.executable, "-c", "pass"])\nraise RuntimeError("boom")\n'


def _report(log: Path, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", str(log), *args], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_an_uncaught_exception_is_how_the_run_ended(tmp_path: Path) -> None:
    log = tmp_path / "run.jsonl"
    script = tmp_path / "fails.py"
    script.write_text(PROGRAM)
    env = {**os.environ, "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log)}
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "RuntimeError: boom" in done.stderr  # the truth, as Python told it
    rep = json.loads(_report(log, "--json"))
    (run,) = rep["runs"]
    assert run["root_error"] == "RuntimeError: boom" and run["state"] == "ended", run
    text = _report(log)
    answer = text.split("== Run", 1)[0]
    # Its exit code is known where the watcher read the main's wait status (its pidfd: Linux 6.15+); else only the
    # exception is: the Answer says what is known, the exception as the cause either way
    told = ("The program exited with code 1, after an uncaught RuntimeError: boom." if run["exit_code"] == 1 else
            "The program ended by an uncaught RuntimeError: boom.")
    assert run["exit_code"] in (1, None) and told in answer, (run["exit_code"], text)
    assert "ended by an uncaught RuntimeError: boom" in text.split("== Run", 1)[1].split("== Findings")[0], text
    assert "Nothing unusual" not in text, text


def test_a_keyboard_interrupt_says_what_raises_one() -> None:
    assert uncaught_words("KeyboardInterrupt: ") == "an uncaught KeyboardInterrupt (Ctrl-C, or a SIGINT)"
    assert uncaught_words("ValueError: " + "x" * 300).endswith("…")
    assert uncaught_words("OSError: a\nb") == "an uncaught OSError: a"
    assert uncaught_words("TimeoutError: ") == "an uncaught TimeoutError"  # raised with no message
