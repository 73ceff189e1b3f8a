"""A job in a container with a pids limit (podman's default 2048, docker --pids-limit, a pod's pid limit): its
compile jobs fail with "Resource temporarily unavailable" though `ulimit -u` says the limit is far away.

Public reports: podman-container-tools/podman#25703 (a privileged podman container; Lightning training fails with
"BlockingIOError: [Errno 11] Resource temporarily unavailable" after "OpenBLAS blas_thread_init: pthread_create
failed ... RLIMIT_NPROC 1048576 current, 1048576 max": the process limit is not what refused), mozilla/translations#630
("can't start new thread", "pthread_create failed ... Resource temporarily unavailable" on CPU workers: "by default
there's a limit of 2048 pids in the container", podman run --pids-limit) and jax-ml/jax#24631 ("pthread_create
failed: Resource temporarily unavailable only when running inside a container"). The pids controller of the
container's cgroup counts every task (each process and each thread) in it, root's too: each compile pool (a sidecar
and its workers, with their threads) and each linker's threads. The user asks: why does compiling fail only in the
container, when ulimit -u is unlimited, what holds the tasks, and what do I change?

Run by bench/users/run_more.sh as root in a pids cgroup (v1, as the container runtime makes one) whose pids.max fits
the job with its pool and not its linkers' threads. Stand-ins on torch 2.13 CPU, as bench/users/nproc_limit.py: the
pool is made the way a GPU host's first Triton kernel makes it (wait_pool_ready()), and each of KERNELS kernels is
linked in the pool by a linker that starts LINK_THREADS threads (ld.lld's --threads). The job prints what its user
would check first (ulimit -u, the container's pids.max and pids.current), waits for the kernels as a compiled module
does (AsyncCompile.wait), reports each kernel's outcome, then ends (1 when a kernel failed). The control is the same
run with no pids limit. Standalone: `python bench/users/pids_limit.py` (no limit: the control).
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


def pids(name: str) -> str:
    """The container's pids cgroup file NAME (v1 here; /sys/fs/cgroup/NAME in a v2 container)."""
    with open("/proc/self/cgroup") as f:
        path = next((ln.split(":", 2)[2].strip() for ln in f if ln.split(":")[1] == "pids"), "/")
    try:
        with open(f"/sys/fs/cgroup/pids{path}/{name}") as f:
            return f.read().strip()
    except OSError:
        return "?"


soft, _ = resource.getrlimit(resource.RLIMIT_NPROC)
print(f"uid {os.getuid()}; ulimit -u: {soft if soft != resource.RLIM_INFINITY else 'unlimited'}; "
      f"container pids.max: {pids('pids.max')}, pids.current: {pids('pids.current')}", flush=True)
AsyncCompile.wait_pool_ready()  # first Triton kernel
print(f"pool ready: pids.current {pids('pids.current')}", flush=True)
pool = AsyncCompile.process_pool()
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
print(f"{failed} of {KERNELS} kernels failed; container pids.peak {pids('pids.peak')}, "
      f"pids.events {pids('pids.events')}", flush=True)
sys.exit(1 if failed else 0)
