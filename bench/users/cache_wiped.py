"""A compile cache directory shared with another job, which wipes it while this job's compile pool loads kernels.

Public reports: sgl-project/sglang#34231 ("On runner pools that pack several GPU runners onto one host, that cache
directory is a single shared mount, so the wipe unlinks files a concurrent job is compiling against. It surfaces
from inductor's compile workers as: OSError: source code not available -> ValueError: @jit functions should be
defined in a Python file -> torch._inductor.exc.InductorError: SubprocException"), triton-lang/triton#11512
(concurrent compiles with a shared TRITON_CACHE_DIR on a network filesystem: FileNotFoundError reading back
just-published files; "giving each rank its own TRITON_CACHE_DIR ... avoids" it) and pytorch/pytorch#167725 (a
pool's subprocesses keep using a cache directory that was deleted under them). The user asks: why do some kernels
fail to compile, only sometimes, and only on the shared runners, and what do I change?

Run by bench/users/run_more.sh with TORCHINDUCTOR_CACHE_DIR on a directory that a concurrent job (outside this
program's tree, as another runner's install step is) wipes a few seconds after this job's first kernel appears in
it. Stand-ins on torch 2.13 CPU: the pool is made the way a GPU host's first Triton kernel makes it
(wait_pool_ready()); each of KERNELS kernels is loaded in the pool by inductor's own job
(codecache._load_triton_kernel_from_source: write the kernel's module into the cache, then import it), and the
module's top level does what `@triton.jit` does once its imports are done (IMPORT_S): it reads the kernel's source
back from its file (inspect.getsource). The job waits as a compiled module does (AsyncCompile.wait), then reports
each kernel's outcome. The control is the same run with no wipe.
Standalone: `python bench/users/cache_wiped.py` (no wipe: the control).
"""
import os
import sys

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402
from torch._inductor.codecache import _load_triton_kernel_from_source  # noqa: E402
from torch._inductor.runtime.cache_dir_utils import cache_dir  # noqa: E402

KERNELS = 6
IMPORT_S = 3.0  # a kernel module's imports (triton and its runtime) on a busy host, before the decorator runs
SOURCE = '''
import inspect
import time


def {name}(in_ptr0, out_ptr0, xnumel, XBLOCK):
    xindex = XBLOCK
    return in_ptr0, out_ptr0, xnumel, xindex


time.sleep({import_s})  # the module's imports
# what @triton.jit does: JITFunction reads the function's source; the job's result pickles back to the main
# as text (a CachingAutotuner pickles as its source too)
{name} = inspect.getsource({name})
'''

print(f"TORCHINDUCTOR_CACHE_DIR: {cache_dir()}", flush=True)
AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
# A compiled module's kernels, each a job of the pool, waited for as the module's own code does
# (`async_compile.wait(globals())`, AsyncCompile.wait: it raises the first kernel's error).
names = [f"triton_poi_fused_add_{i}" for i in range(KERNELS)]
scope = {name: pool.submit(_load_triton_kernel_from_source, name, SOURCE.format(name=name, import_s=IMPORT_S))
         for name in names}
kernels = list(scope.values())
try:
    AsyncCompile().wait(scope)
    print("compiled", flush=True)
except Exception as e:  # noqa: BLE001 - the user sees whatever the wait raised
    print(f"compile failed: {type(e).__name__}: {str(e).strip().splitlines()[-1][-100:]}", flush=True)
failed = 0
for name, kernel in zip(names, kernels):
    error = kernel.exception(timeout=120)
    failed += error is not None
    print(f"{name}: " + (f"{type(error).__name__}: ...{str(error).strip()[-70:]}" if error else "loaded"), flush=True)
print(f"{failed} of {KERNELS} kernels failed", flush=True)
sys.exit(1 if failed else 0)
