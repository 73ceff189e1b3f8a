"""A pool is busy only while its creator waits on pool jobs: real torch 2.13 on CPU.

AsyncCompile.wait_pool_ready() makes the pool (a GPU host's first Triton kernel). Then the main waits twice in
AsyncCompile.wait: once on a job it sent to the pool (its jobs pending as the wait begins: 1), then on a future
of the in-process thread pool (0 pending: the shape of CPU torch's C++ compiles, done in the process). The pool's
idle span starts after the first wait and before the second; the old rule (every wait keeps the pool busy) put
it at the second wait's end.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, needs_torch, read_log, report_json, run_python, wait_for_watcher

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

WAIT = "torch._inductor.async_compile:AsyncCompile.wait"
MADE = "torch._inductor.compile_worker.subproc_pool:SubprocPool.__init__"

SCRIPT = textwrap.dedent('''
    import time
    from torch._inductor.async_compile import AsyncCompile

    if __name__ == "__main__":
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        pool = AsyncCompile.process_pool()
        AsyncCompile().wait({"on_pool": pool.submit(time.sleep, 0.2)})
        # torch's reader thread drops a job from pending_futures just after setting its result: until it has
        # (bounded), the next wait could still count it
        limit = time.monotonic() + 30
        while pool.pending_futures and time.monotonic() < limit:
            time.sleep(0.01)
        # in-process work (the caller's thread pool), no pool job pending: long enough to tell its end apart
        AsyncCompile().wait({"in_process": AsyncCompile.pool().submit(time.sleep, 0.5)})
        # then the pool idles until torch's shutdown at exit
''')


def test_a_wait_on_in_process_work_does_not_keep_the_pool_busy(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    recs = read_log(log)
    made = next(r for r in recs if r["event"] == "call" and r.get("target") == MADE)
    waits = [r for r in recs if r["event"] == "call" and r.get("target") == WAIT and r["pid"] == made["pid"]]
    ends = {r["call_id"]: r["ts"] for r in recs if r["event"] == "return" and r["pid"] == made["pid"]}
    on_pool, in_process = waits
    assert (on_pool.get("pool_jobs"), in_process.get("pool_jobs")) == (1, 0), json.dumps(waits)
    (pool,) = report_json(log)["pools"]
    # the report's times from the pool's making, against the log's own (rounding: 0.01 s)
    busy = pool["busy_until"] - pool["created_at"]
    assert ends[on_pool["call_id"]] - made["ts"] - 0.01 <= busy <= in_process["ts"] - made["ts"] + 0.01, (
        pool, waits, made)
