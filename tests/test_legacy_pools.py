"""torch 2.1-2.3's default pool, traced in a real interpreter on a stand-in torch (no torch needed).

In those releases the first import of torch._inductor.codecache runs AsyncCompile.warm_pool() at that module's top
level, which forks compile_threads workers at once (a fork ProcessPoolExecutor; no sidecar). The stand-in keeps the
released code's shape where the tracer meets it (2.1.2 codecache.py:1301-1339, 2.3.1 codecache.py:2543-2608,
docs/torch-coverage.md): 2.1's initializer is an inner function of process_pool, 2.2-2.3's a top-level function
defined above AsyncCompile and handed to the pool before the import ends. Live, on torch 2.3.1, the workers had
never said they were compile workers, so the pool was never ready nor idle (docs/users.md, "torch 2.3.1, live").
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from .conftest import read_log, report_json, run_python, traced_env, wait_for_watcher

CODECACHE = '''
import functools
import multiprocessing
import multiprocessing.util
import os
import signal
import sys
from concurrent.futures import ProcessPoolExecutor
from functools import partial
from threading import Thread
from time import sleep

from . import config


def _watch(orig_ppid):
    while True:
        sleep(1)
        if orig_ppid != os.getppid():
            os.kill(os.getpid(), signal.SIGKILL)


def _async_compile_initializer(orig_ppid):  # 2.2-2.3: top-level, above AsyncCompile
    Thread(target=_watch, args=(orig_ppid,), daemon=True).start()
    signal.signal(signal.SIGINT, signal.SIG_IGN)


if config.RELEASE == "2.3":
    _pool_set = set()  # 2.3: every pool made, for shutdown_compile_workers


class AsyncCompile:
    @staticmethod
    @functools.lru_cache(1)
    def process_pool():
        orig_ppid = os.getpid()

        def init():  # 2.1: an inner function
            Thread(target=_watch, args=(orig_ppid,), daemon=True).start()

        initializer = init if config.RELEASE == "2.1" else partial(_async_compile_initializer, orig_ppid)
        pool = ProcessPoolExecutor(config.compile_threads, mp_context=multiprocessing.get_context("fork"),
                                   initializer=initializer)
        if config.RELEASE == "2.3":
            _pool_set.add(pool)
        multiprocessing.util.Finalize(None, pool.shutdown, exitpriority=sys.maxsize)
        return pool

    def wait(self, scope):  # the compiling process waits on its kernels' futures
        for key, result in scope.items():
            scope[key] = result.result()

    @classmethod
    def warm_pool(cls):
        pool = cls.process_pool()
        for _ in range(config.compile_threads):
            pool._adjust_process_count()
        pool._start_executor_manager_thread()


AsyncCompile.warm_pool()
'''

MAIN = textwrap.dedent('''
    import json, os, sys
    import torch._inductor.codecache as cc
    pool = cc.AsyncCompile.process_pool()
    scope = {"kernel": pool.submit(os.getpid)}
    cc.AsyncCompile().wait(scope)
    print(json.dumps({"main": os.getpid(), "workers": sorted(pool._processes), "job": scope["kernel"]}))
''')


def stand_in(root: Path, release: str) -> Path:
    """A torch package of just what the pool code needs, as that release had it; returns the main script."""
    pkg = root / "torch" / "_inductor"
    pkg.mkdir(parents=True)
    (root / "torch" / "__init__.py").write_text(f'__version__ = "{release}.2"\n')
    (pkg / "__init__.py").write_text("")
    (pkg / "config.py").write_text(f'RELEASE = "{release}"\ncompile_threads = 2\nworker_start_method = "fork"\n')
    (pkg / "codecache.py").write_text(CODECACHE)
    (root / "main.py").write_text(MAIN)
    return root / "main.py"


@pytest.mark.parametrize("release", ["2.1", "2.2", "2.3"])
def test_an_import_time_fork_pool_is_a_ready_pool_of_compile_workers(tmp_path: Path, log: Path,
                                                                     release: str) -> None:
    """The workers warm_pool forked at codecache's import are named by their creator as it starts them, say they
    are compile workers, and record the job they ran: the pool is ready as they start, busy with its job, then
    idle. The workers' pids are the executor's own (printed by the program); the job ran in one of them."""
    main = stand_in(tmp_path, release)
    res = run_python([str(main)], traced_env(log, PYTHONPATH=str(tmp_path)), timeout=120, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    recs = wait_for_watcher(log, timeout=60)
    assert {r["worker_pid"] for r in recs if r["event"] == "worker_spawned"} == set(seen["workers"])
    roles = {r["pid"]: r["role"] for r in recs if r["event"] == "role"}
    assert all(roles.get(pid) == "compile-worker" for pid in seen["workers"]), roles
    jobs = [r for r in recs if r["event"] == "job" and r.get("state") == "start"]
    assert [r["pid"] for r in jobs] == [seen["job"]], jobs
    # the main's wait on that job (AsyncCompile.wait lived in codecache up to 2.3), with the job pending as it began
    (wait,) = [r for r in recs if r["event"] == "call" and r.get("tag") == "async-wait"]
    assert wait["target"] == "torch._inductor.codecache:AsyncCompile.wait" and wait["pid"] == seen["main"], wait
    # its pool's pending jobs as it began: from codecache's _pool_set (2.3), the tracer's own set (2.1-2.2 keep none)
    assert isinstance(wait.get("pool_jobs"), int), wait
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert sorted(pool["worker_pids"]) == seen["workers"] and pool["ready_at"] is not None, pool
    assert pool["idle_after"] == "job", pool
    assert "without a process pool" not in rep["answer"] and read_log(log)


# A CPU compile: the kernels compile on AsyncCompile.pool() (threads, in the main) and the main waits on their
# futures while the process pool, made at import, runs nothing.
MAIN_CPU = textwrap.dedent('''
    import json, os
    from concurrent.futures import ThreadPoolExecutor
    import torch._inductor.codecache as cc
    pool = cc.AsyncCompile.process_pool()
    scope = {"kernel": ThreadPoolExecutor(1).submit(os.getpid)}
    cc.AsyncCompile().wait(scope)
    print(json.dumps({"main": os.getpid(), "workers": sorted(pool._processes)}))
''')


@pytest.mark.parametrize("release", ["2.1", "2.2", "2.3"])
def test_a_cpu_wait_keeps_no_import_time_pool_busy(tmp_path: Path, log: Path, release: str) -> None:
    """A wait on kernels compiled in the main (CPU) begins with no job pending in the pool, on every release:
    2.1-2.2 keep no pool set, so the tracer counts the pending jobs of the compile pools it saw start workers. The
    pool, which ran nothing, is idle from its ready, not from the wait's end (live on torch 2.2.2: a 30 s compile
    under load was told as the pool's busy time, its idle 20 s of 48)."""
    main = stand_in(tmp_path, release)
    main.write_text(MAIN_CPU)
    res = run_python([str(main)], traced_env(log, PYTHONPATH=str(tmp_path)), timeout=120, cwd=str(tmp_path))
    assert res.returncode == 0, res.stderr
    seen = json.loads(res.stdout.strip().splitlines()[-1])
    recs = wait_for_watcher(log, timeout=60)
    (wait,) = [r for r in recs if r["event"] == "call" and r.get("tag") == "async-wait"]
    assert wait["pid"] == seen["main"] and wait.get("pool_jobs") == 0, wait
    assert not [r for r in recs if r["event"] == "job"]
    (pool,) = report_json(log)["pools"]
    assert sorted(pool["worker_pids"]) == seen["workers"], pool
    assert pool["idle_after"] == "ready" and pool["busy_until"] == pool["ready_at"], pool
