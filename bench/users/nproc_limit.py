"""A job under a process limit (`ulimit -u`): its compile jobs fail with "Resource temporarily unavailable".

Public report: AMDResearch/hpcfund#49 ("Resource temporarily unavailable When Running DeepSeek-R1 with SGLang on AMD
GPUs": an 8-GPU node, the server in an Apptainer container; "the process fails with 'Resource temporarily
unavailable' errors during compilation. The system hits process/thread limits": ld.lld, which a compile worker's
job runs to link a kernel, aborts with std::system_error "Resource temporarily unavailable", and the job's error is
logged by subproc_pool.py), and #40 on the same cluster. The kernel counts every thread of every process of the
user against RLIMIT_NPROC (`ulimit -u`), inside a user namespace (Apptainer's) too: each rank's compile pool (a
sidecar and its workers, each with its threads) and each linker's threads. The user asks: why does compiling fail,
what holds the processes, and what do I change?

Run by bench/users/run_more.sh in a user namespace under `prlimit --nproc=NPROC` (the node's limit; root outside a
user namespace is exempt from it). Stand-ins on torch 2.13 CPU: the pool is made the way a GPU host's first Triton
kernel makes it (wait_pool_ready()), and each of KERNELS kernels is linked in the pool by a linker that starts
LINK_THREADS threads (ld.lld's --threads), a Python stand-in run with subprocess. The job waits for them as a
compiled module does (AsyncCompile.wait) and reports each kernel's outcome as the user saw it (the linker's own
error goes to the job's stderr, as ld.lld's does), then ends (1 when a kernel failed). The control is the same run
with no limit.
Standalone: `python bench/users/nproc_limit.py` (no limit: the control).
"""
import os
import resource
import subprocess
import sys

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402,F401
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

KERNELS = 4
LINK_THREADS = 16
LINKER = (  # a linker whose LINK_THREADS threads (ld.lld --threads=16) all run at once before it is done
    "import threading\n"
    "go = threading.Event()\n"
    f"ts = [threading.Thread(target=go.wait, daemon=True) for _ in range({LINK_THREADS})]\n"
    "[t.start() for t in ts]\n"
    "go.set()\n"
)

soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
print(f"ulimit -u: {soft if soft != resource.RLIM_INFINITY else 'unlimited'}", flush=True)
AsyncCompile.wait_pool_ready()  # first Triton kernel
pool = AsyncCompile.process_pool()
# A compiled module's kernels: each a future of the pool, waited for as the module's own code does
# (`async_compile.wait(globals())`, AsyncCompile.wait: it raises the first kernel's error).
scope = {f"triton_kernel_{i}": pool.submit(subprocess.run, [sys.executable, "-c", LINKER], check=True)
         for i in range(KERNELS)}
links = list(scope.values())
try:
    AsyncCompile().wait(scope)
    print("compiled", flush=True)
except Exception as e:  # noqa: BLE001 - the user sees whatever the wait raised
    print(f"compile failed: {type(e).__name__}: {str(e).strip().splitlines()[-1][-80:]}", flush=True)
failed = 0
for i, link in enumerate(links):
    error = link.exception(timeout=120)
    failed += error is not None
    print(f"kernel {i}: " + (f"{type(error).__name__}: ...{str(error).strip()[-60:]}" if error else "linked"),
          flush=True)
print(f"{failed} of {KERNELS} kernels failed", flush=True)
sys.exit(1 if failed else 0)
