"""wp-autotrace run and doctor, end to end (no torch needed)."""

from __future__ import annotations

import os
import sys
import venv
from pathlib import Path

from .conftest import clean_env, events, read_log, run_python


def test_run_sets_env_execs_and_says_where(tmp_path: Path) -> None:
    """`wp-autotrace run --log P -- cmd` execs cmd traced (exit code kept) and says where the log goes."""
    log = tmp_path / "via-run.jsonl"
    res = run_python(["-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c",
                      "import os; print(os.environ['WP_AUTOTRACE']); raise SystemExit(7)"], clean_env())
    assert res.returncode == 7 and res.stdout == "1\n"
    assert f"wp-autotrace: logging to {log}" in res.stderr
    starts = events(read_log(log), "process_start")
    assert len(starts) == 1 and starts[0]["role"] == "main"


def test_run_default_log_and_bad_command(tmp_path: Path) -> None:
    """`run` without --log logs in the cwd; a missing program exits 127, no command 64."""
    res = run_python(["-m", "wp_autotrace", "run", "--", sys.executable, "-c", "pass"], clean_env(), cwd=tmp_path)
    assert res.returncode == 0
    (log,) = tmp_path.glob("wp_autotrace-*.jsonl")
    assert str(log) in res.stderr
    res = run_python(["-m", "wp_autotrace", "run", "--", "/nonexistent/prog"], clean_env(), cwd=tmp_path)
    assert res.returncode == 127 and "cannot run" in res.stderr
    res = run_python(["-m", "wp_autotrace", "run"], clean_env(), cwd=tmp_path)
    assert res.returncode == 64


def test_doctor_ok_here() -> None:
    """`doctor` in a good install: .pth found, a child really traces, exit 0."""
    res = run_python(["-m", "wp_autotrace", "doctor"], clean_env(), timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "[ok  ] .pth file:" in res.stdout
    assert "wrote 1 process_start record(s)" in res.stdout
    assert res.stdout.rstrip().endswith("all good")


def test_doctor_explains_a_venv_without_the_package(tmp_path: Path) -> None:
    """`doctor --python` on a venv without the package says so and exits 1."""
    env_dir = tmp_path / "bare"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    res = run_python(["-m", "wp_autotrace", "doctor", "--python", str(python)], clean_env(), timeout=120)
    assert res.returncode == 1
    assert "wp_autotrace importable there: no" in res.stdout
    assert "wrote 0 process_start record(s)" in res.stdout


def test_usage_errors_exit_64() -> None:
    """Unknown or missing subcommands exit 64 with usage."""
    res = run_python(["-m", "wp_autotrace", "frobnicate"], clean_env())
    assert res.returncode == 64 and "usage:" in res.stderr
    res = run_python(["-m", "wp_autotrace"], clean_env())
    assert res.returncode == 64
    assert os.path.exists(sys.executable)
