"""Shared helpers: run a real interpreter with the env set, bounded, and read its log."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable, TypeVar

import pytest
from hypothesis import settings

# Hypothesis keeps no example database in any run of this suite, CI or not: a failure saved
# in .hypothesis/ was replayed by every later run in that checkout (the same checkout serves
# .ci/run, which sets no CI variable, and the engineers' runs), so one unlucky draw became a
# failure that looked permanent. A failure still prints its example and a @reproduce_failure
# blob to replay it; `pytest --hypothesis-profile=keep-failures` keeps the database when wanted.
# And no deadline (hypothesis's default fails an example that runs over 200 ms): a timed assert, which a
# loaded 2-core box breaks; test_sink's 80 KB over-the-cap example ran 251 ms in CI's matrix (3.9, 3.10, 3.12).
settings.register_profile("no-database", database=None, print_blob=True, deadline=None)
settings.register_profile("keep-failures", print_blob=True, deadline=None)
settings.load_profile("no-database")

# The programs the tests start get SIGINT's default action, whatever this pytest inherited: a shell without job
# control starts a background job (`.ci/run &`, nohup) with SIGINT ignored, an ignored signal survives exec,
# and a program started so cannot be interrupted (Python then installs no KeyboardInterrupt handler): the
# Ctrl-C, run_until and bundled-example tests failed only when the suite itself was started that way.
# Python's own handler here is reset to the default in every child at exec.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)



@pytest.fixture(autouse=True)
def fresh_boot_time() -> None:
    """Each test reads the wall clock's boot time anew, as each command a user runs does.

    The project computes its boot time once per process (env.boot_time); this pytest process hosts the project's
    code for the whole suite, so after a wall-clock step (NTP, a VM resumed) every later test read create times on
    the old clock while the programs it started read the new one, and each comparison was off by the step. Only
    where the module is loaded already: a test that never imports the project keeps its imports as they are.
    """
    env = sys.modules.get("wp_autotrace.common.env")
    if env is not None:
        env._boot_time = None


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


T = TypeVar("T")

# How often wait_until asks again by default: fine enough that a test waits about as long as the event takes.
POLL_S = 0.05


class WaitTimeout(AssertionError):
    """wait_until ran out of time: the test fails, naming what it waited for (an AssertionError, so pytest
    shows it as a failed check, and a caller for whom the wait is best-effort can catch it)."""


def wait_until(predicate: Callable[[], T], timeout: float, interval: float = POLL_S,
               what: str | Callable[[], str] = "") -> T:
    """Call predicate until it returns something truthy, and return that value.

    The suite's one home for waits (as psutil's tests have `call_until`/`wait_for_pid`): a test waits for the
    event itself, never sleeps in its place. After `timeout` seconds without a truthy value it raises
    WaitTimeout naming `what` and the last value seen; the predicate is always asked once more at the
    deadline, so a wait overruns its bound by one call of the predicate at most. `what` may be a function,
    called only on failure, to say what the world looked like then (which processes were still alive).
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        left = deadline - time.monotonic()
        if left <= 0:
            name = (what() if callable(what) else what) or getattr(predicate, "__name__", "a condition")
            raise WaitTimeout(f"waited {timeout:g} s for {name}; last saw {value!r:.300}")
        time.sleep(min(interval, left))


@contextlib.contextmanager
def tiny_tmpfs(mnt: Path, size: str = "64k") -> Iterator[Path]:
    """A tmpfs of `size` mounted at mnt (made here) for a disk that fills; skips where it cannot be mounted
    (needs root), lazily unmounted after."""
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)]).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)])


def read_log(path: Any, partial: bool = False) -> list[dict[str, Any]]:
    """The log's records; the suite's one reader of raw log lines.

    Records are framed as a blank line then the record (sink.RECORD_START). By default every non-blank line
    must be a valid record: a torn line fails the test. partial=True reads a log that is still being
    written: no file yet is no records, and a line that does not parse (its writer is mid-write) is skipped.
    """
    if partial and not os.path.exists(path):
        return []
    with open(path, "rb") as f:
        lines = [line for line in f if line.strip()]
    if not partial:
        return [json.loads(line) for line in lines]
    out = []
    for line in lines:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def events(records: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == name]


def torch_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch") is not None


needs_torch = pytest.mark.skipif(not torch_available(), reason="torch==2.13.0 not installed")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "run.jsonl"


# -- fault injection (tests/test_reliability_*.py): a traced environment, log checks, a module to trace --


def traced_env(log: Path, **extra: str) -> dict[str, str]:
    """A clean environment with tracing on, logging to `log`."""
    return clean_env(**{"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), **extra})


def check_lines(log: Path) -> list[dict[str, Any]]:
    """Every non-blank line is one complete JSON record within the size cap; return the records."""
    from wp_autotrace.runtime.sink import MAX_RECORD_BYTES

    data = log.read_bytes()
    assert data.endswith(b"\n")
    lines = [line for line in data.split(b"\n")[:-1] if line]  # blank lines frame records
    for line in lines:
        assert len(line) + 1 <= MAX_RECORD_BYTES, len(line)
    return [json.loads(line) for line in lines]


def seq_complete(records: list[dict[str, Any]]) -> None:
    """Each process's sequence numbers are 0..n-1 with none missing or repeated."""
    by_pid: dict[int, list[int]] = {}
    for r in records:
        by_pid.setdefault(r["pid"], []).append(r["seq"])
    for pid, seqs in by_pid.items():
        assert sorted(seqs) == list(range(len(seqs))), pid


SYNTH = textwrap.dedent('''
    import time

    def work(n):
        return n + 1

    def outer(n):
        return inner(n) * 2

    def inner(n):
        return n + 1

    def rec(n):
        return 0 if n == 0 else rec(n - 1) + 1

    def fail(message):
        raise ValueError(message)

    def slow(seconds):
        time.sleep(seconds)
        return seconds
''')
SYNTH_TARGETS = "synthmod:work,synthmod:outer,synthmod:inner,synthmod:rec,synthmod:fail,synthmod:slow"


@pytest.fixture
def synth(tmp_path: Path) -> Path:
    """A directory holding synthmod, a module of functions to trace."""
    where = tmp_path / "synth"
    where.mkdir()
    (where / "synthmod.py").write_text(SYNTH)
    return where


def warm_pool_pids(records: list[dict[str, Any]]) -> set[int]:
    return {r["pid"] for r in records if r["event"] == "call" and r["target"].endswith(".warm_pool")}


def report_json(*logs: Any) -> dict[str, Any]:
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    return analyze(read_logs([str(p) for p in logs]))


def wait_for_watcher(log: Any, timeout: float = 20, event: str = "watcher_exit") -> list[dict[str, Any]]:
    """The log's records once the run's watcher process wrote `event` (it writes after the root exits);
    WaitTimeout if it has not within timeout. Read as a log still being written (a record of several KB is
    more than one page: a read beside its write can see part of it), so a torn last line is not yet a record."""
    def written() -> list[dict[str, Any]]:
        recs = read_log(log, partial=True)
        return recs if any(r["event"] == event for r in recs) else []

    return wait_until(written, timeout, what=f"the watcher's {event!r} record in {log}")
