"""Every pool kind torch makes is a pool: the fork and spawn start methods (TORCHINDUCTOR_WORKER_START), whose
ProcessPoolExecutor has no sidecar and whose workers are the main process's own children, get the sidecar pool's
story: who made it where, its processes as `ps` lists them, its real memory, how it ended.

Real torch 2.13 on CPU: AsyncCompile.wait_pool_ready() stands in for a GPU host's first Triton kernel (on CPU
torch makes no pool by itself); two jobs of half a second each start two workers under either start method. The
script takes its own figures while the pool idles (psutil's children, each worker's smaps_rollup Pss), and the
report's are checked against them, never against the tool's own log.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from .conftest import clean_env, needs_torch, report_json, run_python, wait_for_watcher

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

MIB = 2**20
SCRIPT = textwrap.dedent('''
    import json, os, sys, time
    import psutil
    import torch
    from torch._inductor.async_compile import AsyncCompile

    def sampled(n):
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            return f.read().count(b'"event":"memory"') >= n

    def wait(cond, limit=30):
        start = time.monotonic()
        while not cond() and time.monotonic() - start < limit:
            time.sleep(0.2)

    def pss(pid):
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(x.split()[1]) * 1024 for x in f if x.startswith("Pss:"))

    def probe():
        """What ps and smaps_rollup show of this process's pool now: its worker children (not the resource
        tracker spawn starts beside them) and their PSS summed."""
        kids = [c for c in psutil.Process().children() if "resource_tracker" not in " ".join(c.cmdline())]
        return {"pids": sorted(c.pid for c in kids), "pss": sum(pss(c.pid) for c in kids),
                "main_pss": pss(os.getpid())}

    if __name__ == "__main__":
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        pool = AsyncCompile.process_pool()
        for job in [pool.submit(time.sleep, 0.5) for _ in range(2)]:
            job.result(timeout=60)
        wait(lambda: sampled(1))
        before = probe()
        wait(lambda: sampled(3))  # the pool idles while the watcher reads it again
        after = probe()
        with open(sys.argv[1], "w") as f:
            json.dump({"before": before, "after": after}, f)
''')


def run_kind(tmp_path: Path, method: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Run SCRIPT traced with TORCHINDUCTOR_WORKER_START=method; (the report, the script's probe, the line)."""
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    line = next(i for i, x in enumerate(SCRIPT.splitlines(), 1) if "# first Triton kernel" in x)
    log, out = tmp_path / "log.jsonl", tmp_path / "probe.json"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START=method, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script), str(out)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    return report_json(log), json.loads(out.read_text()), line


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_fork_and_spawn_pools_get_the_whole_story(tmp_path: Path, method: str) -> None:
    rep, probe, line = run_kind(tmp_path, method)
    script = str(tmp_path / "train.py")
    before, after = probe["before"], probe["after"]
    assert len(before["pids"]) == 2 and before["pids"] == after["pids"]  # the probe's own count: 2 workers
    (pool,) = rep["pools"]
    # who made it, where; its processes as ps lists them: the workers, no sidecar
    assert pool["kind"] == "executor" and pool["start_method"] == method and pool["sidecar_pid"] is None
    assert pool["caller"]["file"] == script and pool["caller"]["line"] == line
    assert pool["worker_pids"] == before["pids"] and pool["processes"] == len(before["pids"])
    # its jobs: the ready probe and the two sleeps
    assert pool["jobs"] == 3 and pool["idle_s"] > 0
    # real memory at once, against the probe's own smaps_rollup sum taken while it idled (PSS moves a little
    # as pages are touched: the probe's two readings bound it, with 5 % either way)
    low, high = sorted((before["pss"], after["pss"]))
    assert pool["held_pss_bytes"] and low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool, probe)
    # how it ended: the workers ended as the main exited (concurrent.futures' exit handler), never "unknown"
    assert pool["ending"]["kind"] == "ended-at-exit"
    answer = rep["answer"]
    worded = "forked" if method == "fork" else "spawned"
    assert f"made a compile pool (2 {worded} workers, no sidecar) at {script}:{line}" in answer, answer
    assert "without a process pool" not in answer and "sidecar not seen" not in answer
    assert f"holding {round(pool['held_pss_bytes'] / MIB)} MiB real memory (PSS)" in " ".join(answer.split())
    assert "concurrent.futures stops an executor's workers at exit" in " ".join(answer.split())
