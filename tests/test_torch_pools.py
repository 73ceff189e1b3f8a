"""The pools outside _pool_set, and spawn-mode pools, on torch 2.13 (CPU)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from .conftest import clean_env, events, needs_torch, read_log, report_json, run_python
from .procs import run_until

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

FX = textwrap.dedent('''
    import torch
    @torch.compile
    def f(x):
        return (x * 3).cos().relu() + x.sin()
    x = torch.randn(32, 32)
    print("same:", torch.allclose(f(x), (x * 3).cos().relu() + x.sin()), flush=True)
''')


def test_fx_subprocess_compile_pool_has_its_own_role(tmp_path: Path, log: Path) -> None:
    """FX-subprocess compile mode: its sidecar is fx-compile-sidecar, its spawned worker compile-worker."""
    script = tmp_path / "fx.py"
    script.write_text(FX)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_FX_COMPILE_MODE="subprocess",
                    TORCHINDUCTOR_FORCE_DISABLE_CACHES="1", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))

    def compiled(recs: list[dict]) -> bool:
        return any(r["event"] == "return" and r["pid"] == recs[0]["pid"] and r.get("call_id") and
                   any(c.get("call_id") == r["call_id"] and c["pid"] == r["pid"] and
                       c.get("target", "").endswith("_SubprocessFxCompile.process_pool") for c in recs)
                   for r in recs) and any(r["event"] == "role" and r["role"] == "compile-worker" for r in recs)

    # torch 2.13 itself can hang at exit in this mode (untraced too): bounded, then interrupted.
    res, reached = run_until([sys.executable, str(script)], env, log, compiled, timeout=240)
    assert reached, res.stderr[-3000:]
    recs = read_log(log)
    starts = {r["pid"]: r for r in events(recs, "process_start")}
    main = next(s for s in starts.values() if s["role"] == "main")
    fx = [s for s in starts.values() if s["role"] == "fx-compile-sidecar"]
    assert len(fx) == 1 and fx[0]["ppid"] == main["pid"]
    assert "--kind=spawn" in " ".join(fx[0]["argv"])
    # its spawned worker took the compile-worker role when torch's initializer ran
    workers = {r["pid"] for r in recs if r["event"] == "role" and r["role"] == "compile-worker"}
    assert workers and all(starts[w]["ppid"] == fx[0]["pid"] and not starts[w]["forked"] for w in workers)
    assert not events(recs, "tracer_error")
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert pool["sidecar_pid"] == fx[0]["pid"] and set(workers) <= set(pool["worker_pids"])


SPAWN = textwrap.dedent('''
    import torch._inductor.config as c
    from torch._inductor.async_compile import AsyncCompile
    if __name__ == "__main__":
        c.worker_start_method = "spawn"
        print(AsyncCompile.process_pool().submit(abs, -3).result(timeout=120))
''')


def test_spawn_mode_pool_works_traced(tmp_path: Path, log: Path) -> None:
    """Spawn pickles the (wrapped) worker initializer: tracing must not break it."""
    script = tmp_path / "spawn.py"
    script.write_text(SPAWN)
    env = clean_env(TORCHINDUCTOR_COMPILE_THREADS="2")
    plain = run_python([str(script)], env, timeout=180)
    traced = run_python([str(script)], {**env, "WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log)}, timeout=180)
    assert traced.returncode == plain.returncode == 0, traced.stderr[-3000:]
    assert traced.stdout == plain.stdout == "3\n"
    recs = read_log(log)
    assert not events(recs, "tracer_error")
    roles = {s["role"] for s in events(recs, "process_start")} | {r["role"] for r in events(recs, "role")}
    assert {"main", "compile-worker", "resource-tracker"} <= roles
    assert report_json(log)["leftover_pids"] == []
