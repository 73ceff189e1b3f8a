"""pytorch/rl#4262 ("AsyncBatchedCollector needs a quiescent pause boundary"): "Running the first lazy torch.compile
call after AsyncBatchedCollector has started can overlap compiler-runtime initialization with the collector's
coordinator and inference threads. On highly threaded collectors, this can stall compilation and collection
together; stacks commonly show the main thread waiting for compiler-worker results". Its advice: compile and
warm up before starting collection.

Stand-ins on torch 2.13 CPU: THREADS collector threads run Python work (they hold the GIL in turns, as the
collector's coordinator and inference threads do); then the first lazy compile starts the pool
(wait_pool_ready(), a GPU host's first Triton kernel) and sends JOBS kernel compiles to it, waiting for each. The
main's waits are printed; the control is `COLLECT_FIRST=0` (compile first, then collect).
Standalone: `python bench/users/collector_threads.py`.
"""
import os
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

THREADS = 3
JOBS = 30
COLLECT_S = 8
stop = threading.Event()


def collect() -> None:  # an environment step / inference in pure Python: holds the GIL in turns
    n = 0
    while not stop.is_set():
        n += sum(i * i for i in range(2000))


def start_collector() -> None:
    for i in range(THREADS):
        threading.Thread(target=collect, name=f"collector-{i}", daemon=True).start()


def first_compile() -> None:
    t0 = time.monotonic()
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    pool = AsyncCompile.process_pool()
    t1 = time.monotonic()
    for _ in range(JOBS):  # the kernels of one graph, each waited for (async_compile.wait)
        pool.submit(os.getpid).result(timeout=120)
    t2 = time.monotonic()
    print(f"pool ready after {t1 - t0:.1f} s; {JOBS} compile results waited {t2 - t1:.1f} s", flush=True)


if os.environ.get("COLLECT_FIRST", "1") == "1":
    start_collector()
    first_compile()
else:
    first_compile()
    start_collector()
time.sleep(COLLECT_S)  # collection goes on
stop.set()
