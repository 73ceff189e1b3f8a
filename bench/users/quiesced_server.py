"""vllm-project/vllm#36028 "Use Inductor Process Pool in Compilation": vLLM warms the pool at the end of
load_model(), compiles, and quiesces it before CUDA-graph capture; "after quiesce, the sidecar subprocess
settles to 0% CPU ... just a sleeping process waiting on a pipe read". An operator's question: what does that
quiesced sidecar hold while the server serves, and what ends it?

Stand-ins on torch 2.13 CPU: warm_pool() + wait_pool_ready() (load_model's warm-up), one compiled step,
pool.quiesce() (vLLM's quiesce before capture), then "serving" for SERVE_S. Standalone:
`python bench/users/quiesced_server.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

SERVE_S = 6


def load_model() -> None:
    AsyncCompile.warm_pool()  # vLLM: warm the pool at the end of load_model()
    AsyncCompile.wait_pool_ready()  # first Triton kernel


load_model()
step = torch.compile(lambda x: (x @ x).relu())
step(torch.randn(8, 8))
AsyncCompile.process_pool().quiesce()  # vLLM: quiesce before cudagraph capture
print("serving", flush=True)
time.sleep(SERVE_S)  # the server serves requests
print("server exits", flush=True)
