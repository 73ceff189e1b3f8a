"""Under pytest, the tests that used a pool are named, not only the one that made it, and the first advice for
a pool later tests reuse is one that stops the reuse (a fixture that shuts the pool down only has the next
compile make a new one).

Real torch 2.13 on CPU: test_a's AsyncCompile.wait_pool_ready() (a GPU host's first Triton kernel) makes the
sidecar; test_b and test_c reach the same cached pool; test_d compiles nothing while the pool idles. Each test that
reached the pool writes its own record (its nodeid, the sidecar psutil shows under the process), and the report is
checked against those records, never against the tool's own log.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, needs_torch, report_json, run_python, wait_for_watcher

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

TESTS = textwrap.dedent('''
    import json, os, time
    import psutil
    from torch._inductor.async_compile import AsyncCompile

    def _use(name):
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        AsyncCompile.process_pool().submit(time.sleep, 0.2).result(timeout=60)
        with open(os.environ["PROBE"], "a") as f:
            f.write(json.dumps({"test": name, "sidecars": [c.pid for c in psutil.Process().children()]}) + "\\n")

    def test_a():
        _use("test_share.py::test_a")

    def test_b():
        _use("test_share.py::test_b")

    def test_c():
        _use("test_share.py::test_c")

    def test_d():
        time.sleep(5.5)  # no compile: the pool idles past the idle-pool threshold
''')


def test_the_tests_that_used_a_pool_are_named_and_the_advice_stops_the_reuse(tmp_path: Path) -> None:
    (tmp_path / "test_share.py").write_text(TESTS)
    log, probe = tmp_path / "log.jsonl", tmp_path / "probe.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), PROBE=str(probe))
    res = run_python(["-m", "pytest", "-q", "-p", "no:cacheprovider", "test_share.py"], env, timeout=240,
                     cwd=tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    seen = [json.loads(x) for x in probe.read_text().splitlines()]
    # the tests' own records: three tests reached the pool, one sidecar under the process each time
    assert [s["test"] for s in seen] == ["test_share.py::test_a", "test_share.py::test_b", "test_share.py::test_c"]
    assert len({tuple(s["sidecars"]) for s in seen}) == 1 and len(seen[0]["sidecars"]) == 1
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert pool["sidecar_pid"] == seen[0]["sidecars"][0]
    assert pool["test"] == seen[0]["test"]
    assert pool["tests_used"] == [s["test"] for s in seen[1:]]  # test_d, which compiled nothing, is not one
    assert "test_share.py::test_d" in pool["tests_outlived"]
    answer = " ".join(rep["answer"].split())
    assert ("used again by 2 later tests: test_share.py::test_b and test_share.py::test_c") in answer, answer
    fix = answer[answer.index("Fix first: "):]
    # the first advice stops the reuse; a shutdown fixture is named as what does not
    assert fix.startswith("Fix first: stop the tests sharing the pool: run each compile test in its own process"), fix
    assert fix.index("--forked") < fix.index("shutdown_compile_workers()"), fix
