"""pytorch/pytorch#135120 ("[inductor] Catch BrokenProcessPool and print a more helpful message": "BrokenProcessPool
means a parallel-compile subprocess exited, which we never expect. It's likely due to a crash"), #128757 ("If any
subprocess in the pool crashes, we get a BrokenProcessPool exception and the whole pool becomes unusable") and
#117372 ("The error starts to happen for some test, and then the rest of the test suite fails with the same error").
The user asks: which compile process died, of what, what did it cost, and will the next compile work?

Unlike sidecar_killed.py (the sidecar dies), here one of the sidecar's *workers* is SIGKILLed mid-compile (what the
OOM killer does to the largest worker). On torch 2.13 the sidecar's ProcessPoolExecutor is then broken: the job
in flight fails with BrokenProcessPool (the main's future raises it), the executor ends its other worker, and the
next submit makes a new executor (2 new workers). Stand-ins on CPU: the pool is made the way a GPU host's first
Triton kernel makes it (wait_pool_ready()); a slow kernel compile is time.sleep in a worker.
Standalone: `python bench/users/worker_oom.py`.
"""
import os
import signal
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import psutil  # noqa: E402
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

COMPILE_S = 4


def kill_unseen(pid: int, sig: int) -> None:
    """Send sig as the kernel (or a process outside the program) does: through libc, not os.kill, whose traced
    wrapper would log the program itself as the sender (a signal_sent record the user's run never has)."""
    import ctypes
    if ctypes.CDLL(None, use_errno=True).kill(pid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"kill({pid}, {sig})")

AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
job = pool.submit(time.sleep, COMPILE_S)  # a kernel compile in flight
time.sleep(1)
workers = psutil.Process(pool.process.pid).children()
victim = max(workers, key=lambda p: p.memory_info().rss)
print(f"worker {victim.pid} of sidecar {pool.process.pid} SIGKILLed (as by the OOM killer)", flush=True)
kill_unseen(victim.pid, signal.SIGKILL)  # the OOM killer: no process of the program sends it
start = time.monotonic()
try:
    job.result(timeout=30)
    print(f"the compile returned after {time.monotonic() - start:.1f} s", flush=True)
except Exception as e:  # noqa: BLE001 - the user sees whatever the pool raised
    print(f"the compile failed after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}", flush=True)
start = time.monotonic()
print(f"next compile: {pool.submit(os.getpid).result(timeout=60)} after {time.monotonic() - start:.1f} s", flush=True)
time.sleep(6)  # the program goes on (training) with the remade pool
