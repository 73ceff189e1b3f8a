"""A batch job's memory limit (SLURM's job cgroup): the compile pool's processes count against it.

Public reports: ArjunaCluster/ArjunaUsers#52 ("job killed abnormally ... slurmstepd: error: Detected 1 oom-kill
event(s) in StepId=191.batch cgroup. Some of your processes may have been killed by the cgroup out-of-memory
handler." -- "There is no information printed by main.py"), lanl/PyBNF#118 (the same slurmstepd line) and
Emmi-AI/noether#190 ("When a SLURM cgroup OOM kill fires, it picks the largest memory consumer (the trainer or one
of its mp children)"); pytorch/pytorch#191183 (a memory limit for compile workers: cgroup memory.max counts "the
worker + all its children"). A job that fit its `--mem` before torch.compile is killed once the compile pool (a
sidecar and its workers, each a python that imported torch) is charged to the same cgroup. The user asks: which of
my processes was killed, by what, what held the memory at that moment, and what do I change?

Run by bench/users/run_more.sh in a memory cgroup (v1, as slurmstepd makes one per step) whose limit fits this
job without a compile pool and not with one; the box has no swap, so the kernel's OOM killer of that cgroup ends
the process it picks. Stand-ins on torch 2.13 CPU: the model is a tensor of MODEL_MIB; the pool is made the way a
GPU host's first Triton kernel makes it (wait_pool_ready()); training allocates STEP_MIB of activations a step,
as a growing batch does. The job prints its cgroup's charge as it goes (what `sstat` reads). The control is the
same job with TORCHINDUCTOR_COMPILE_THREADS=1 (no pool): it fits.
Standalone: `python bench/users/slurm_oom.py` (no limit: it finishes).
"""
import os
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile  # noqa: E402

MODEL_MIB = 128
STEP_MIB = 32
STEPS = 10


def charged_mib() -> str:
    """The job cgroup's charge (memory.usage_in_bytes of this process's memory cgroup, v1)."""
    with open("/proc/self/cgroup") as f:
        path = next((ln.split(":", 2)[2].strip() for ln in f if ln.split(":")[1] == "memory"), None)
    try:
        with open(f"/sys/fs/cgroup/memory{path}/memory.usage_in_bytes") as f:
            return f"{int(f.read()) / 2**20:.0f} MiB"
    except (OSError, TypeError, ValueError):
        return "?"


weights = torch.ones(MODEL_MIB * 2**18)  # float32, every page touched
print(f"model loaded ({MODEL_MIB} MiB): job cgroup {charged_mib()}", flush=True)
AsyncCompile.wait_pool_ready()  # first Triton kernel
print(f"compiled (compile threads {os.environ['TORCHINDUCTOR_COMPILE_THREADS']}): job cgroup {charged_mib()}",
      flush=True)
activations = []
for step in range(STEPS):
    activations.append(torch.ones(STEP_MIB * 2**18))
    print(f"step {step}: activations {STEP_MIB * len(activations)} MiB, job cgroup {charged_mib()}", flush=True)
    time.sleep(0.5)
print("training done", flush=True)
