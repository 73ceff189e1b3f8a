"""TORCHINDUCTOR_COMPILE_THREADS=1 set inside the process after torch's inductor config loaded: the pool is made with
the CPU count's workers all the same.

Public reports: vllm-project/vllm#10619 ("torch.compile still generates multiple subprocesses", torch 2.5.1) and its
fix vllm-project/vllm#10620 ("[torch.compile] force inductor threads": the review's "Simply add
`torch._inductor.config.compile_threads = 1` inside `load_general_plugins`"; "now the processes are much less").
torch reads the variable once, into torch._inductor.config.compile_threads, when that config loads (an import of
torch's compile path); a library that sets os.environ after that changes nothing torch reads, and its pool is
made with min(32, CPUs) workers. The user asks: we set TORCHINDUCTOR_COMPILE_THREADS=1, why are there still compile
worker processes, and what do I change?

Stand-ins on torch 2.13 CPU: a serving library (serving_site/fastserve_plugins.py) imports torch at its top and, when
its plugins load, sets the variable; the job then compiles KERNELS kernels as a GPU host's Triton kernels would
(kernels.py: wait_pool_ready() makes the pool when compile_threads is above 1). The job prints what its user
checks first (the variable now, compile_threads as torch has it, the compile processes it has). The control is
`WP_USERS_IN_CODE=1` (the fix: config.compile_threads = 1 where the plugin loads: no pool).
Standalone: `python bench/users/threads_set_late.py` (on a box with 2 or more CPUs).
"""
import os
import sys
import time

import psutil

T0 = time.monotonic()
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_site"))
import fastserve_plugins  # noqa: E402  (the serving library: imports torch)
from kernels import KERNELS, compile_kernels  # noqa: E402  (this folder, the script's own sys.path[0])
from torch._inductor import config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

fastserve_plugins.load_general_plugins()  # the library's plugins load after torch: the variable is set now
if os.environ.get("WP_USERS_IN_CODE"):
    config.compile_threads = 1  # vllm#10620's fix
print(f"TORCHINDUCTOR_COMPILE_THREADS={os.environ.get('TORCHINDUCTOR_COMPILE_THREADS')}; compile_threads "
      f"{config.compile_threads}; cpus {len(os.sched_getaffinity(0))}", flush=True)
t0, t1 = compile_kernels(config, AsyncCompile)
kids = psutil.Process().children(recursive=True)
print(f"{KERNELS} kernels compiled in {time.monotonic() - t1:.1f} s; {len(kids)} compile processes under the job: "
      f"{sorted(k.pid for k in kids)}", flush=True)
