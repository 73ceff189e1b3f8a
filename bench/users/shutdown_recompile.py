"""meta-pytorch/tnt#713 "Shut down compile workers after compilation" (and pytorch/pytorch#117664, "allow the
trainer to explicitly shutdown the compile-worker pools to save CPU resource"): a trainer shuts the pool down
once the model compiled; then the eval loop compiles a new graph, and the pool comes back. The user asks: what
did the shutdown free, and what does the later compile cost?

Stand-ins on torch 2.13 CPU: the first Triton kernel of each compile is AsyncCompile.wait_pool_ready();
training and eval are short sleeps. Standalone: `python bench/users/shutdown_recompile.py`.
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile, shutdown_compile_workers  # noqa: E402

TRAIN_S = 4
EVAL_S = 4


def compile_step(n: int) -> None:
    AsyncCompile.wait_pool_ready()  # first Triton kernel
    torch.compile(lambda x: (x @ x).relu())(torch.randn(n, n))


t0 = time.monotonic()
compile_step(8)
print(f"train: compiled at {time.monotonic() - t0:.1f} s; shutting the pool down (tnt#713)", flush=True)
shutdown_compile_workers()
time.sleep(TRAIN_S)  # training steps, no compile
t1 = time.monotonic()
compile_step(16)  # the eval loop compiles a new graph: the pool comes back
print(f"eval: recompiled, the pool came back; that compile took {time.monotonic() - t1:.1f} s", flush=True)
time.sleep(EVAL_S)
print("done", flush=True)
