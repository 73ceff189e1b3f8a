"""pytorch/pytorch#189290 (and the hang it fixes): a compile sidecar dies mid-compilation (the OOM killer, a
crash) and the process that compiles waits forever for the kernel it submitted, "wedging the whole
distributed job until an external stuck-job killer steps in".

Faithful on torch 2.13 CPU: the pool is made the way a GPU host's first Triton kernel makes it
(AsyncCompile.wait_pool_ready()); a kernel compile that takes a while is stood in by time.sleep in a worker;
the sidecar is then SIGKILLed (what the OOM killer does). The wait is bounded here (WAIT_S) so the script
ends; the user's is not. Standalone: `python bench/users/sidecar_killed.py` (2 workers via
TORCHINDUCTOR_COMPILE_THREADS=2, set below when unset).
"""
import os
import signal
import sys
import time
from concurrent.futures import TimeoutError as FutureTimeout

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

WAIT_S = 15       # the user's job waits without bound; we give up after this
COMPILE_S = 4     # a slow kernel compile, in a worker


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
print(f"sidecar {pool.process.pid} killed (as by the OOM killer) with a compile in flight", flush=True)
kill_unseen(pool.process.pid, signal.SIGKILL)  # the OOM killer: no process of the program sends it
start = time.monotonic()
try:
    job.result(timeout=WAIT_S)
    print(f"the compile returned after {time.monotonic() - start:.1f} s", flush=True)
except FutureTimeout:
    print(f"HUNG: the compile never returned ({WAIT_S} s); the user's job would wait forever", flush=True)
except Exception as e:  # noqa: BLE001 - report whatever the pool raised
    print(f"the compile failed after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}", flush=True)
sys.stdout.flush()
