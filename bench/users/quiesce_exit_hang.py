"""A compile job that timed out: the job fails at once, then its exit hangs in the compile pool's shutdown.

Public reports: pytorch/pytorch#162199 ("inductor's process pool seems to time out while cleaning up after a cold
start": the exit waits in the atexit shutdown_compile_workers(), in SubprocPool.shutdown's process.wait(300)), and
pytorch/pytorch#183884 ("Fix compile worker quiesce draining": quiesce's shutdown(wait=False) lets "each old
ProcessPoolExecutor manager thread and any in-flight work outlive the quiesce cycle ... and could keep the sidecar
alive at interpreter shutdown"; fixes #176968 and #186136). torch 2.13's pool quiesces itself when no job has
answered for quiesce_async_compile_time (60 s): a kernel whose compile is longer than that is still running when its
executor is shut down without waiting, so the sidecar's SHUTDOWN terminates no worker (its executor is already gone)
and the sidecar's exit waits, in the old executor's finalizer, for that kernel to end. CI sets
TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT (300 s) so a stuck compile fails the step: the job's RuntimeError comes at
once, its exit only when the kernel ends (or 300 s later, in an atexit TimeoutExpired). The user asks: my test failed
on the compile timeout, why did the process take so long to exit, what is it waiting for, and what do I change?

Stand-ins on torch 2.13 CPU, with the waits scaled down as in the other cases (the quiesce timer 60 -> QUIESCE_S, the
CI wait 300 -> WAIT_S): the pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready()); two
kernels compile at once, then a large one whose compile takes COMPILE_S (a ptxas on a huge kernel: here a worker
that waits); the job waits for its kernels as a compiled module does (AsyncCompile.wait), with the CI's wait timeout.
Standalone: `python bench/users/quiesce_exit_hang.py` (exits 1 with the RuntimeError, about COMPILE_S s in).
"""
import hashlib
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor import config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

QUIESCE_S = 8  # torch's quiesce_async_compile_time (60 s), scaled
WAIT_S = 16  # the CI's TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT (300 s), scaled
# The large kernel's compile; COMPILE_S=inf: it never ends (#162199's shape: the exit waits 300 s, then atexit's
# TimeoutExpired, and the sidecar and workers end by their parent watchdog up to 2 min later)
COMPILE_S = float(os.environ.get("COMPILE_S", "45"))

config.quiesce_async_compile_time = QUIESCE_S
config.compile_worker_wait_timeout = WAIT_S
T0 = time.monotonic()
AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
small = {f"triton_poi_fused_{i}": pool.submit(hashlib.pbkdf2_hmac, "sha256", b"kernel", b"salt", 200_000)
         for i in range(2)}
AsyncCompile().wait(small)
print(f"2 kernels compiled ({time.monotonic() - T0:.1f} s in)", flush=True)
large = {"triton_red_fused_large_2": pool.submit(time.sleep, min(COMPILE_S, 1e6))}
print(f"compiling the large kernel (its compile takes {COMPILE_S:g} s; wait timeout {WAIT_S} s)", flush=True)
try:
    AsyncCompile().wait(large)
finally:
    print(f"wait ended ({time.monotonic() - T0:.1f} s in); exiting", flush=True)
