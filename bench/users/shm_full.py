"""A container whose /dev/shm is full: the next job's first compile hangs.

Public reports: sgl-project/sglang#38638 ("use private --shm-size instead of --ipc=host to stop /dev/shm leak": CI
jobs that were cancelled or SIGKILLed left their shared-memory buffers behind, "over weeks filling /dev/shm to 100%.
Later jobs then ... died") and vllm-project/vllm#1125 ("When the shared memory allocated for a docker container is
too small ... vLLM can hang"). Docker gives a container a private /dev/shm of 64 MB.

On torch 2.13 a compile pool needs /dev/shm too: its sidecar's ProcessPoolExecutor makes a multiprocessing queue,
whose lock is a POSIX semaphore, a file in /dev/shm. On a full /dev/shm that raises OSError (ENOSPC) in the
sidecar, which logs it and exits; the main process, whose first Triton kernel waits for the pool to become ready,
never hears of it (it holds the other end of the sidecar's pipe itself, so the pipe never reports EOF:
pytorch/pytorch#189290) and waits for ever. The user asks: why does the job hang at its first compile in the
container, and not on the host?

Run by bench/users/run_more.sh in a mount namespace whose /dev/shm is a 64 MB tmpfs that an earlier job's leftover
buffers fill (`unshare -rm`, `mount -t tmpfs -o size=64m`, dd). The job's step timeout (pytest-timeout's signal
method does the same) ends the wait after STEP_TIMEOUT_S with TimeoutError in the main thread. The control is the
same run with room in /dev/shm (it compiles in a few seconds).
Standalone: `python bench/users/shm_full.py` (on a host with room in /dev/shm: the control).
"""
import os
import shutil
import signal
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

STEP_TIMEOUT_S = 90  # the job's step timeout; the pool is ready in well under a minute on this box, loaded


def step_timeout(signum: int, frame: object) -> None:
    raise TimeoutError(f"the first compile was still waiting after {STEP_TIMEOUT_S} s")


shm = shutil.disk_usage("/dev/shm")
print(f"/dev/shm: {shm.used // 2**10} KiB used of {shm.total // 2**10} KiB "
      f"({len(os.listdir('/dev/shm'))} files)", flush=True)
signal.signal(signal.SIGALRM, step_timeout)
signal.alarm(STEP_TIMEOUT_S)
start = time.monotonic()
AsyncCompile.wait_pool_ready()  # first Triton kernel
signal.alarm(0)
print(f"pool ready after {time.monotonic() - start:.1f} s", flush=True)
pool = AsyncCompile.process_pool()
print(f"compiled: {pool.submit(os.getpid).result(timeout=60)} after {time.monotonic() - start:.1f} s", flush=True)
