"""The seed scenario on a CPU: an unmodified training script.

Run it traced with examples/run.sh (or by hand: PYTHONPATH=examples/standin_backend
WP_AUTOTRACE=1 python examples/train.py). The stand-in backend warms the
compile pool inside ``import torch``, in this process and in every compile
sidecar, so sidecars nest under sidecars.
"""

import os
import sys
import time

import torch
from torch._inductor.async_compile import AsyncCompile

os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"


@torch.compile
def f(x):
    return (x * 3).cos().relu().sum() + (x * 2).sin().sum()


# On a GPU/NPU host, compile jobs go to the pool and fork its workers; on a
# CPU inductor compiles C++ in threads, so wake the pool as such a compile would.
AsyncCompile.wakeup()
t0 = time.time()
y = f(torch.randn(512, 512))
print(f"compiled and ran in {time.time() - t0:.1f}s: {y.item():.3f}")
time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 3)
print("done")
