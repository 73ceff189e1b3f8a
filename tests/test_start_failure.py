"""A traced start that fails after the log is open ("tracing disabled") leaves the program as it would run untraced:
the log's descriptor is closed (the program's own opens get the numbers and the count they get untraced) and
nothing more is written to the log. The truth is the test's own: /proc/self/fd read by the program, the log's
lines counted by the test, and the untraced program's count of the descriptors it can open under the same limit.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env

# Started untraced, the program then starts the tracer by hand with the root's import made to fail as a full
# descriptor table fails it (EMFILE), after the log is open and process_start written.
FAILING_START = textwrap.dedent('''
    import json, os, sys
    class Boom:
        def find_spec(self, name, path=None, target=None):
            if name == sys.argv[2]:
                raise OSError(24, "Too many open files")
    sys.meta_path.insert(0, Boom())
    import wp_autotrace.runtime.bootstrap as bootstrap
    before = sorted(os.listdir("/proc/self/fd"))
    os.environ.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=sys.argv[1], **dict(a.split("=") for a in sys.argv[3:]))
    bootstrap._started = False
    bootstrap.start()
    after = sorted(os.listdir("/proc/self/fd"))
    lines = open(sys.argv[1], "rb").read().count(b"\\n") if os.path.exists(sys.argv[1]) else 0
    import signal
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    os.kill(os.getpid(), signal.SIGUSR1)  # a signal the tracer records where it runs
    print(json.dumps({"before": before, "after": after, "lines": lines}))
''')

# How many descriptors the program can open, and the first it gets: the same traced (whatever the tracer's start
# did) as untraced.
OPENER = textwrap.dedent('''
    import os
    fds = []
    try:
        while len(fds) < 64:
            fds.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    print(len(fds), fds[:1])
''')


@pytest.mark.parametrize("fails", [("wp_autotrace.runtime.root",),  # the root's own work, past process_start
                                   ("wp_autotrace.runtime.guard", "WP_AUTOTRACE_GUARD=nested-pools")],  # the notice
                         ids=["root", "guard"])
def test_a_start_that_fails_after_the_log_is_open_closes_it_and_writes_nothing_more(tmp_path: Path,
                                                                                    fails: tuple[str, ...]) -> None:
    log = tmp_path / "run.jsonl"
    out = subprocess.run([sys.executable, "-c", FAILING_START, str(log), *fails], env=clean_env(), capture_output=True,
                         text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, out.stderr
    assert "tracing disabled" in out.stderr, out.stderr
    seen = json.loads(out.stdout)
    assert seen["after"] == seen["before"], f"{seen}; the log is {log}"
    after = log.read_text() if log.exists() else ""
    assert after.count("\n") == seen["lines"], after  # no record after the failure


def _opener(limit: int, env: dict[str, str]) -> str:
    def lower() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    out = subprocess.run([sys.executable, "-c", OPENER], env=env, capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL, preexec_fn=lower)
    return f"rc {out.returncode}: {out.stdout.strip()}"


def test_the_program_opens_as_many_descriptors_traced_as_untraced_under_a_tiny_limit(tmp_path: Path) -> None:
    """Under a limit of a few descriptors the tracer's start may fail (its own imports need one): the program then
    opens as many as untraced, from the same first number."""
    for limit in range(4, 10):
        plain = _opener(limit, clean_env())
        traced = _opener(limit, clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(tmp_path / f"run{limit}.jsonl")))
        assert traced == plain, f"ulimit -n {limit}: untraced {plain}, traced {traced}"
