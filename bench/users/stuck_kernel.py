"""A compile that never ends: one kernel's compiler spins for ever in a compile worker, and the job waits for it
until the CI step's time limit ends it.

Public reports: pytorch/pytorch#147327 ("Never ending compile": "it seems it never going to end `100.0 3.6
122:34.20 cc1plus` ... How we are going to debug these cases?"), pytorch/pytorch#96662 ("torch.compile gets stuck":
`perf top` shows a Triton compile spinning in mlir::multiRootTopologicalSort) and pytorch/pytorch#189485 ("When an
Inductor compile worker wedges, the parent SubprocPool blocks in _read_thread reading the result pipe and the worker
leaves no breadcrumb ... a long stall surfaces only as a lease-timeout kill with no signal about which job was
stuck"). The user asks: which compile is stuck, in which process, for how long, and what do I change?

Run by bench/users/run_more.sh under `timeout` (a CI step's time limit: SIGTERM to the job's process group). Stand-ins
on torch 2.13 CPU: the pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready()); each of
KERNELS kernels is a job in the pool that runs its compiler (a python child: cc1plus, ptxas), and the compiler of
kernel STUCK spins (100 % of a CPU) and never ends. The job waits for its kernels as a compiled module does
(AsyncCompile.wait) and prints what its user sees: the kernels it started, then nothing.
Standalone: `timeout 60 python bench/users/stuck_kernel.py` (exit 124).
"""
import os
import subprocess
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

KERNELS = 4
STUCK = 2
COMPILER = "import time; time.sleep(0.5)"  # a compiler that ends
SPINNING = "while True: pass"  # a compiler stuck in a loop (the report's cc1plus at 100 %)

T0 = time.monotonic()
AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
scope = {f"triton_kernel_{i}": pool.submit(subprocess.run, [sys.executable, "-c", SPINNING if i == STUCK else COMPILER],
                                           check=True)
         for i in range(KERNELS)}
print(f"compiling {KERNELS} kernels ({time.monotonic() - T0:.1f} s in)", flush=True)
AsyncCompile().wait(scope)
print(f"compiled ({time.monotonic() - T0:.1f} s in)", flush=True)
