"""vllm-project/vllm#55510 "EngineCore and TP workers survive a SIGKILLed API server, keep the GPUs": a
supervisor force-stops the server with SIGKILL; the engine processes it spawned survive "indefinitely", each
with what it compiled, and "the next engine then ... OOMs, with no hint that an orphan holds the memory".

Stand-ins on torch 2.13 CPU: the API server spawns 2 engine processes (multiprocessing spawn, as vLLM does);
each compiles (its first Triton kernel: AsyncCompile.wait_pool_ready(), so each has its own compile pool) and
then serves; the server is SIGKILLed (a forced stop). The engines serve on, bounded by SERVE_S here.
Standalone: `python bench/users/launcher_killed.py`.
"""
import multiprocessing as mp
import os
import signal
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
ENGINES = 2
SERVE_S = 40  # vLLM's engines serve until killed


def kill_unseen(pid: int, sig: int) -> None:
    """Send sig as the kernel (or a process outside the program) does: through libc, not os.kill, whose traced
    wrapper would log the program itself as the sender (a signal_sent record the user's run never has)."""
    import ctypes
    if ctypes.CDLL(None, use_errno=True).kill(pid, sig) != 0:
        raise OSError(ctypes.get_errno(), f"kill({pid}, {sig})")


def engine(ready) -> None:  # noqa: ANN001 - a multiprocessing queue
    import torch
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel
    torch.compile(lambda x: (x @ x).relu())(torch.randn(8, 8))
    ready.put(os.getpid())
    time.sleep(SERVE_S)  # serving


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    procs = [ctx.Process(target=engine, args=(ready,), name=f"EngineCore_{i}") for i in range(ENGINES)]
    for p in procs:
        p.start()
    pids = [ready.get(timeout=300) for _ in procs]
    print(f"api server: engines {pids} ready; now the supervisor force-stops the server (SIGKILL)", flush=True)
    kill_unseen(os.getpid(), signal.SIGKILL)  # the supervisor (docker, k8s) is outside the program
