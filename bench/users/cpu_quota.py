"""A job in a container with a CPU quota (docker --cpus, a pod's limits.cpu): inductor sizes its compile pool by the
CPUs the job can see, not by the CPU time its cgroup may spend, and the pool's start and kernels are throttled.

Public reports: pytorch/pytorch#191385 ("The nested test container sees the **host** CPU count (`nproc` = 192)
instead of the pod's CPU allocation ... `decide_compile_threads()` ... defaults `compile_threads` to
`min(32, cpu_count())` ... this pins to **32 per test process**": Inductor shards hit the 270-minute step cap; the
fix sets TORCHINDUCTOR_COMPILE_THREADS), pytorch/pytorch#124727 ("`nproc` when run in a container always reports
the host system's available CPU count so does not match the CPU limit set in the container": a build with NPROC=62
in a 16-CPU runner took 4m27s against 3m33s with 14) and pytorch/serve#3150 (a pod with limits cpu '1' where
`os.cpu_count()` returns 16). torch._utils.cpu_count() reads os.sched_getaffinity, which a cpuset narrows and a
CFS quota (cpu.cfs_quota_us, v2 cpu.max) does not. The user asks: why is the first compile so slow in the
container, how many compile processes did torch start for the CPU the job may use, and what do I change?

Run by bench/users/run_more.sh in a cpu cgroup (v1, as the container runtime makes one) whose quota is a fifth of a CPU:
the pool is sized by the box's CPUs (compile_threads at its default), and its sidecar and workers (each a python
that imports torch) start inside the quota. Stand-ins on torch 2.13 CPU: the pool is made the way a GPU host's first
Triton kernel makes it (wait_pool_ready()); each of KERNELS kernels is a job in the pool that spends about half a
CPU-second (a Triton compile). The job prints what its user checks first (os.cpu_count(), the affinity, compile_threads,
the container's quota and its throttling), times the first compile and the kernels, and ends. The control is the
same run with TORCHINDUCTOR_COMPILE_THREADS=1 (no pool: the kernels compile in the main).
Standalone: `python bench/users/cpu_quota.py` (no quota).
"""
import os
import time

T0 = time.monotonic()
import torch  # noqa: E402,F401
from kernels import KERNELS, compile_kernels  # noqa: E402  (this folder, the script's own sys.path[0])
from torch._inductor import config  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402


def cgroup_cpu(name: str) -> str:
    """The container's cpu cgroup file NAME (v1 here; /sys/fs/cgroup/cpu.max, cpu.stat in a v2 container)."""
    with open("/proc/self/cgroup") as f:
        path = next((ln.split(":", 2)[2].strip() for ln in f if "cpu" in ln.split(":")[1].split(",")), "/")
    try:
        with open(f"/sys/fs/cgroup/cpu{path}/{name}") as f:
            return " ".join(f.read().split())
    except OSError:
        return "?"


def quota() -> str:
    q, p = cgroup_cpu("cpu.cfs_quota_us"), cgroup_cpu("cpu.cfs_period_us")
    return "none" if q in ("-1", "?") else f"{int(q) / int(p):g} CPU ({q}/{p} us)"


print(f"os.cpu_count() {os.cpu_count()}; affinity {len(os.sched_getaffinity(0))} CPUs; "
      f"compile_threads {config.compile_threads}; container CPU quota: {quota()}; "
      f"import torch {time.monotonic() - T0:.1f} s", flush=True)
t0, t1 = compile_kernels(config, AsyncCompile)
print(f"{KERNELS} kernels compiled in {time.monotonic() - t1:.1f} s; "
      f"first compile {time.monotonic() - t0:.1f} s in all", flush=True)
print(f"container cpu.stat: {cgroup_cpu('cpu.stat')}", flush=True)
