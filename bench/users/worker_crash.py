"""pytorch/pytorch#98237 ("inductor `compile_fx_inner()` segfaults": the user sees only concurrent.futures'
"BrokenProcessPool: A process in the process pool was terminated abruptly while the future was running or
pending") and pytorch/torchdynamo#1794 (the worker's own stderr says why: "LLVM ERROR: Broken function found,
compilation aborted!", LLVM's report_fatal_error, which calls abort()). The user asks: which compile process died,
of what, and is it the machine (memory) or the compiler?

Unlike worker_oom.py (a worker SIGKILLed from outside, as the OOM killer does), here the kernel's own compile
crashes its worker: a job that aborts (SIGABRT, no sender), as LLVM does on a kernel it cannot lower. On torch 2.13
the sidecar's ProcessPoolExecutor is then broken: the job fails with BrokenProcessPool in the main, and the next
submit makes a new executor. Stand-ins on CPU: the pool is made the way a GPU host's first Triton kernel makes it
(wait_pool_ready()); the crashing compile is os.abort in a worker (a stdlib function, so the worker can unpickle
it). Standalone: `python bench/users/worker_crash.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
print(f"compile pool of sidecar {pool.process.pid} ready", flush=True)
time.sleep(1)
job = pool.submit(os.abort)  # a kernel whose compile aborts its worker (LLVM ERROR -> abort())
start = time.monotonic()
try:
    job.result(timeout=30)
    print(f"the compile returned after {time.monotonic() - start:.1f} s", flush=True)
except Exception as e:  # noqa: BLE001 - the user sees whatever the pool raised
    print(f"the compile failed after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}", flush=True)
start = time.monotonic()
print(f"next compile: {pool.submit(os.getpid).result(timeout=60)} after {time.monotonic() - start:.1f} s", flush=True)
time.sleep(6)  # the program goes on (training) with the remade pool
