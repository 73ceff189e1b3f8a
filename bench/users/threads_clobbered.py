"""An exported TORCHINDUCTOR_COMPILE_THREADS that an imported library overwrites: no compile pool, every kernel
compiled one after another in the main process.

Public reports: vllm-project/vllm#53891 and its fix vllm-project/vllm#53892 ("`env_override.py` sets
`TORCHINDUCTOR_COMPILE_THREADS = "1"` with a plain assignment, so an explicit setting in the environment is silently
overwritten — exporting the variable does nothing today": "on an 8-core host, compiling a 128-expert fused-MoE graph
... takes 26 minutes at one Inductor thread ... with every core but one idle"), and pytorch/pytorch#139771 ("[inductor]
Log how compile_threads is set": internal jobs "didn't seem to get the parallel compile enabled", "because something
was setting `torch._inductor.config.compile_threads` directly"). The user asks: I exported
TORCHINDUCTOR_COMPILE_THREADS=2, why does no compile worker ever appear and every kernel compile in the main, and what
do I change?

Run by bench/users/run_more.sh with TORCHINDUCTOR_COMPILE_THREADS=2 in the job's environment (the user's export).
The job imports a serving library first (serving_site/fastserve_env.py, a stand-in for vllm.env_override: a plain
os.environ assignment), then torch, as a server does. Stand-ins on torch 2.13 CPU: with compile_threads above 1 the
pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready()) and each of KERNELS kernels is a
job in it; with compile_threads 1, torch compiles each kernel in the calling process, one after another, as here.
The job prints what its user checks first (the variable as exported and as torch read it, compile_threads) and the
kernels' time. The control is the same run without the library's import (WP_USERS_NO_LIBRARY=1).
Standalone: `TORCHINDUCTOR_COMPILE_THREADS=2 python bench/users/threads_clobbered.py`.
"""
import os
import sys
import time

T0 = time.monotonic()
EXPORTED = os.environ.get("TORCHINDUCTOR_COMPILE_THREADS")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "serving_site"))
if not os.environ.get("WP_USERS_NO_LIBRARY"):
    import fastserve_env  # noqa: E402,F401  (the serving library, imported before torch as a server does)
import torch  # noqa: E402,F401
from kernels import KERNELS, compile_kernels  # noqa: E402  (this folder, the script's own sys.path[0])
from torch._inductor import config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

print(f"exported TORCHINDUCTOR_COMPILE_THREADS={EXPORTED}; as torch read it: "
      f"{os.environ.get('TORCHINDUCTOR_COMPILE_THREADS')}; compile_threads {config.compile_threads}; "
      f"cpus {len(os.sched_getaffinity(0))}", flush=True)
t0, t1 = compile_kernels(config, AsyncCompile)
print(f"{KERNELS} kernels compiled in {time.monotonic() - t1:.1f} s; first compile {time.monotonic() - t0:.1f} s "
      f"in all; {time.monotonic() - T0:.1f} s since start", flush=True)
