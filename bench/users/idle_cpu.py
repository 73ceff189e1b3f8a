"""pytorch/pytorch#164594 "Increase subprocess parent death check interval to lower cpu": "we're seeing elevated
rates of cpu usage in idle worker threads. This causes ... a large amount of spikeness in qps" (and #156187:
"the huge number of threads on a box: N threads = 8 ranks * 32 subprocs * M threads"). An operator asks:
while the server serves, what do its idle compile processes cost in CPU and threads, beside the server itself?

Stand-ins on torch 2.13 CPU: warm the pool and compile (the first Triton kernel: wait_pool_ready()), then
serve: the main process does CPU work for SERVE_S while the pool idles. Standalone:
`python bench/users/idle_cpu.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

SERVE_S = 20

AsyncCompile.warm_pool()
AsyncCompile.wait_pool_ready()  # first Triton kernel
step = torch.compile(lambda x: (x @ x).relu())
step(torch.randn(8, 8))
print("serving", flush=True)
end = time.monotonic() + SERVE_S
served = 0
while time.monotonic() < end:  # requests: CPU-bound work in the server
    step(torch.randn(8, 8))
    served += 1
    time.sleep(0.05)
print(f"served {served} requests", flush=True)
