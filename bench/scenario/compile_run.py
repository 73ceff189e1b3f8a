"""The benchmark's compile workload: a cold torch.compile of a several-kernel function.

Run by bench/run.py with TORCHINDUCTOR_FORCE_DISABLE_CACHES=1, a fresh
TORCHINDUCTOR_CACHE_DIR and this folder on PYTHONPATH, so ``import torch``
auto-loads the stand-in backend (wp_bench_backend), which calls warm_pool in
the main process and in the first compile sidecar (main -> sidecar 1 ->
sidecar 2, then it stops). With WP_BENCH_CHAIN_MARKER set, it waits (at
most WP_BENCH_CHAIN_TIMEOUT s) after the compile until sidecar 2 has loaded
the backend, so every run does the same work.

``--seed-log PATH`` is the seed's hand-written approach: monkeypatch
AsyncCompile.warm_pool in this script, after ``import torch``, and append
``[warm_pool] pid=... ppid=...`` to PATH on every call it sees.
Prints one JSON line: import and compile seconds.
"""

from __future__ import annotations

import json
import os
import sys
import time

t0 = time.perf_counter()
import torch  # noqa: E402

t1 = time.perf_counter()

if "--seed-log" in sys.argv:
    from torch._inductor.async_compile import AsyncCompile

    seed_log = sys.argv[sys.argv.index("--seed-log") + 1]
    _original = AsyncCompile.warm_pool

    def _patched_warm_pool(*args: object, **kwargs: object) -> object:
        with open(seed_log, "a") as f:
            f.write(f"[warm_pool] pid={os.getpid()} ppid={os.getppid()}\n")
        return _original(*args, **kwargs)

    AsyncCompile.warm_pool = _patched_warm_pool  # type: ignore[method-assign]


def f(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """Pointwise, reduction, softmax, matmul, scan: several C++ kernels around an extern mm."""
    a = (x * 3).cos().relu() + x.sin()
    b = a.softmax(-1)
    c = b @ w
    d = (c.tanh() * 2).cumsum(0)
    e = d.sum(0) + a.mean(0)
    return e.sigmoid().log1p().max() + b.std()


x = torch.randn(256, 256)
w = torch.randn(256, 256)
y = torch.compile(f)(x, w)
t2 = time.perf_counter()
# Wait (bounded) until the second sidecar has imported torch and the backend:
# the chain is then complete, whichever tool slowed which process.
marker = os.environ.get("WP_BENCH_CHAIN_MARKER", "")
deadline = t2 + float(os.environ.get("WP_BENCH_CHAIN_TIMEOUT") or 300)
while marker and not os.path.exists(marker) and time.perf_counter() < deadline:
    time.sleep(0.05)
t3 = time.perf_counter()
print(json.dumps({"import_s": round(t1 - t0, 3), "compile_s": round(t2 - t1, 3), "chain_wait_s": round(t3 - t2, 3),
                  "chain_complete": bool(marker) and os.path.exists(marker), "ok": bool(torch.isfinite(y))}))
