"""pytorch/pytorch#126311 ("torch.compile hang/crashes with worker_start_method=spawn"): with
`torch._inductor.config.worker_start_method = 'spawn'` the user's program crashes with a traceback from
multiprocessing/spawn.py `_fixup_main_from_path` (each spawned compile worker re-runs the main script as
`__mp_main__`), and the ColossalAI report (hpcaitech/ColossalAI#5987) calls it "Torch compile causes multi-process
to hang". The user asks: why does a compile crash or hang with spawn, and what do I change?

Stand-in on torch 2.13 CPU: the script sets the start method at its top, as in the report, and its compile is
at the top level too (no `if __name__ == "__main__":` guard, as in many notebooks-turned-scripts): each spawn
worker re-runs it. The pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready()), then
a kernel compile is sent and waited for (bounded here). Standalone: `python bench/users/spawn_main.py`.
"""
import os
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
import torch._inductor.config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

torch._inductor.config.worker_start_method = "spawn"
print(f"{os.getpid()} running as {__name__}", flush=True)
start = time.monotonic()
try:
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    pool = AsyncCompile.process_pool()
    r = pool.submit(os.getpid).result(timeout=60)
    print(f"{os.getpid()}: compile ran in worker {r} after {time.monotonic() - start:.1f} s", flush=True)
except Exception as e:  # noqa: BLE001 - the user sees whatever the pool raised
    print(f"{os.getpid()}: compile failed after {time.monotonic() - start:.1f} s: {type(e).__name__}: {e}",
          flush=True)
    sys.exit(1)
