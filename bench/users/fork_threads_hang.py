"""A fork compile pool made by a process with threads: a worker forked while another thread held a lock never gets
that lock, so the kernel compile that needs it never ends, and the job is stuck until its time limit.

Public reports: pytorch/pytorch#121197 ("Inductor gets stuck compiling code, unbounded RAM usage": "OK I was wrong,
torch._dynamo doesn't work, but `TORCHINDUCTOR_COMPILE_THREADS=1` does"; "detect if there are threads before we fork
for torch.compile and either error or disable multithreaded compilation"), pytorch/pytorch#108586 ("TorchInductor
workers use "fork" which doesn't work in a multithreaded environment": "creates non-deterministic situations where
application code deadlocks or crashes"), and pytorch/pytorch#148651 ("Avoid fork for TORCHINDUCTOR_COMPILE_THREADS >
1": "inductor combines multithreading with forking ... a notorious pitfall"). A fork copies the process with one
thread, the one that forked: a lock another thread held at that moment stays held in the child for ever. The user
asks: why does my compile hang (its workers at 0 % CPU), and what do I change?

Stand-ins on torch 2.13 CPU, with the fork start method the reports had (TORCHINDUCTOR_WORKER_START=fork, set below
when unset; 2.13's default, subprocess, forks the workers from its sidecar instead): the program runs a telemetry
thread (serving_site/fasttelemetry.py) that holds its lock while it flushes (nearly always); the pool is made the
way a GPU host's first Triton kernel makes it (wait_pool_ready(), which forks the workers now), and a kernel's
compile that logs through the same library (takes the lock) is sent and waited for as a compiled module does
(AsyncCompile.wait, no timeout: torch's default). Run by bench/users/run_more.sh under a CI step's time limit
(`timeout 60`: SIGTERM to the job's group).
The control is TORCHINDUCTOR_WORKER_START=subprocess (the workers forked from the single-threaded sidecar: served).
Standalone: `timeout 60 python bench/users/fork_threads_hang.py`.
"""
import os
import sys
import threading
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
os.environ.setdefault("TORCHINDUCTOR_WORKER_START", "fork")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_site"))
import fasttelemetry  # noqa: E402  (the metrics library: serving_site/, importable by the pool's processes)
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

T0 = time.monotonic()
fasttelemetry.start()
time.sleep(0.2)
AsyncCompile.wait_pool_ready()  # first Triton kernel: the fork pool forks its workers here
pool = AsyncCompile.process_pool()
print(f"{time.monotonic() - T0:5.1f} s pool ready ({type(pool).__name__}, {threading.active_count()} threads in the "
      "main at its fork)", flush=True)
kernels = {"triton_poi_fused_add_0": pool.submit(fasttelemetry.compile_kernel, "triton_poi_fused_add_0")}
AsyncCompile().wait(kernels)
print(f"{time.monotonic() - T0:5.1f} s compiled", flush=True)
