"""pytorch/pytorch#136833 ("Thread safety issue with torch.compile()": a crash "when two threads call
torch.compile()", from the dev-discuss thread "Impact of multithreading and local caching on torch.compile").
One lazy first compile per request thread is that pattern in a server: each thread's first request compiles, and
the first kernel of each asks inductor for its compile pool at the same moment. `AsyncCompile.process_pool()` is
a `functools.lru_cache(1)`, which does not hold other callers back while the first call runs, so both threads
start a pool: the operator's `ps` shows 2 compile sidecars and 4 workers under one server process that has one
pool's worth of work. The operator asks: why two pools, what do they cost, and which one is used?

Stand-ins on torch 2.13 CPU: THREADS request threads meet at a barrier (the server's first requests arrive
together), each makes the first Triton kernel's call (wait_pool_ready()), compiles its own graph and sends JOBS
jobs to the pool inductor hands out; then the server serves for SERVE_S. It prints how many compile sidecars
it has. The control is `WARM=1` (the pool warmed in the main thread before the request threads start).
Standalone: `python bench/users/threads_race.py`.
"""
import os
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import psutil  # noqa: E402
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

THREADS = 2
JOBS = 10
SERVE_S = 20
SIDECAR = "compile_worker/__main__.py"
arrive = threading.Barrier(THREADS)


def first_request(i: int) -> None:
    arrive.wait()
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    pool = AsyncCompile.process_pool()
    for _ in range(JOBS):  # the kernels of this request's graph, each waited for
        pool.submit(os.getpid).result(timeout=120)
    step = torch.compile(lambda x: (x * (i + 1)).relu().sum())
    step(torch.randn(16))


if os.environ.get("WARM") == "1":
    AsyncCompile.warm_pool()
    AsyncCompile.wait_pool_ready()
threads = [threading.Thread(target=first_request, args=(i,), name=f"request-{i}") for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
sidecars = [c.pid for c in psutil.Process().children() if SIDECAR in " ".join(c.cmdline())]
print(f"server: {len(sidecars)} compile sidecar(s) {sidecars} after {THREADS} first requests", flush=True)
time.sleep(SERVE_S)  # serving: no more compiles
print("server: done", flush=True)
