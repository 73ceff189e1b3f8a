"""A compile interrupted with Ctrl-C: the job ends, but its kernel's compiler runs on at 100 % of a CPU.

Public reports: crowsonkb/k-diffusion#81 (torch.compile's child processes: "clean exit from a parent app using
ctrl+c is no longer possible ... they do not exit"), pytorch/pytorch#147327 ("Never ending compile": "`100.0 3.6
122:34.20 cc1plus` ... How we are going to debug these cases?"), and the review of pytorch/pytorch#191183 ("their nvcc
or ptxas children remain orphaned and untracked"; pytorch/helion#3341 kills the compilers' process groups on a
timeout for the same reason). torch's compile sidecar and workers set SIGINT to ignored (compile_worker/utils.py:
"Ignore Ctrl-C ... sent to pool workers"), and a program a worker starts inherits the ignored signal through exec:
the terminal's Ctrl-C reaches the whole foreground group, the main process stops, torch's atexit ends the sidecar and
its workers (SIGTERM), and the compiler, whose worker is gone, is re-parented and runs to its end. The user asks: my
job ended, so what is still using a CPU, who started it, why did Ctrl-C not stop it, and what do I do?

Stand-ins on torch 2.13 CPU: the pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready());
one kernel is a job in the pool that runs its compiler (a python without site, so untraced as cc1plus is: a
spinning loop for COMPILE_S seconds, a large C++ kernel); the job waits for it as a compiled module does
(AsyncCompile.wait). INTERRUPT_S after the job is sent, the user presses Ctrl-C: SIGINT to the job's process group, as
a terminal sends it (through libc, as the terminal's line discipline is outside the program).
Standalone: `python bench/users/interrupted_compiler.py` (in a terminal, or a session of its own).
"""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

COMPILE_S = 40
INTERRUPT_S = 3
COMPILER = [sys.executable, "-S", "-c", f"import time\nend = time.time() + {COMPILE_S}\nwhile time.time() < end: pass"]


def ctrl_c() -> None:
    """The terminal's Ctrl-C: SIGINT to the foreground process group (the job's), sent from outside the program."""
    time.sleep(INTERRUPT_S)
    print(f"^C (SIGINT to process group {os.getpgrp()})", flush=True)
    ctypes.CDLL(None, use_errno=True).kill(-os.getpgrp(), signal.SIGINT)


AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
scope = {"cpp_fused_large_kernel_0": pool.submit(subprocess.run, COMPILER, check=True)}
print(f"compiling 1 kernel (its compiler runs {COMPILE_S} s)", flush=True)
threading.Thread(target=ctrl_c, daemon=True).start()
AsyncCompile().wait(scope)  # a compiled module waits for its kernels; the Ctrl-C lands here
print("compiled", flush=True)
