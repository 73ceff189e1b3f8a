"""Shared helpers: run a real interpreter with the env set, bounded, and read its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

# Writes docs/reliability.md from the run's results when WP_AUTOTRACE_WRITE_DOCS=1.
pytest_plugins = ["tests.reliability_plugin"]

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "examples" / "standin_backend"


def clean_env(**extra: str) -> dict[str, str]:
    """os.environ without any WP_AUTOTRACE* or torch pool settings, plus extra."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("WP_AUTOTRACE", "TORCHINDUCTOR_", "TORCH_WARM_POOL", "PYTEST_"))}
    env.update(extra)
    return env


class Result:
    def __init__(self, returncode: int, stdout: str, stderr: str, elapsed: float) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed


def run_python(args: list[str], env: dict[str, str], timeout: float = 60, cwd: Any = None,
               interrupt_after: float | None = None, python: str = sys.executable) -> Result:
    """Run python in its own session; always kill the whole group afterwards.

    interrupt_after: send SIGINT to the main process after that many
    seconds (so its atexit handlers run), then wait for it up to timeout.
    """
    start = time.monotonic()
    proc = subprocess.Popen([python, *args], env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        if interrupt_after is not None:
            try:
                proc.wait(interrupt_after)
            except subprocess.TimeoutExpired:
                proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += "\n[test harness: killed after timeout]"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return Result(proc.returncode, out, err, time.monotonic() - start)


def read_log(path: Any) -> list[dict[str, Any]]:
    """Every non-blank line must be a valid record: a torn line fails the test.

    Records are framed as a blank line then the record (sink.RECORD_START).
    """
    with open(path, "rb") as f:
        return [json.loads(line) for line in f if line.strip()]


def events(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == name]


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


needs_torch = pytest.mark.skipif(not torch_available(), reason="torch==2.13.0 not installed")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "run.jsonl"


def run_until(args: list[str], env: dict[str, str], log: Path, ready: Any, timeout: float = 120,
              interrupts: int = 3) -> tuple[Result, bool]:
    """Run python until ready(records) holds (or timeout), then interrupt it.

    SIGINT is sent up to `interrupts` times, 3 s apart, so the program's
    atexit handlers run even when torch's exit handler waits on a sidecar
    chain; then the whole process group is killed. Returns the result and
    whether ready() was reached.
    """
    start = time.monotonic()
    proc = subprocess.Popen([sys.executable, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    reached = False
    try:
        while time.monotonic() - start < timeout and proc.poll() is None:
            time.sleep(0.5)
            if log.exists():
                try:
                    recs = [json.loads(line) for line in log.read_bytes().splitlines() if line.endswith(b"}")]
                except ValueError:
                    continue
                if ready(recs):
                    reached = True
                    break
        for _ in range(interrupts):
            if proc.poll() is not None:
                break
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(3)
            except subprocess.TimeoutExpired:
                pass
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        elif log.exists() and b'"watcher_start"' in log.read_bytes():
            wait_for_watcher(log, 5, event="leftover")  # the watcher lists what the root left, before the kill
        out, err = proc.communicate(timeout=30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return Result(proc.returncode, out, err, time.monotonic() - start), reached


def warm_pool_pids(records: list[dict[str, Any]]) -> set[int]:
    return {r["pid"] for r in records if r["event"] == "call" and r["target"].endswith(".warm_pool")}


def report_json(*logs: Any) -> dict[str, Any]:
    from wp_autotrace.analysis.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    return analyze(read_logs([str(p) for p in logs]))


def wait_for_watcher(log: Any, timeout: float = 20, event: str = "watcher_exit") -> list[dict[str, Any]]:
    """The log's records once the run's watcher process wrote `event` (it writes after the root exits)."""
    deadline = time.monotonic() + timeout
    while True:
        recs = read_log(log) if os.path.exists(log) else []
        if any(r["event"] == event for r in recs) or time.monotonic() > deadline:
            return recs
        time.sleep(0.05)
