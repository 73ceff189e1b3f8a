"""A pre-forking server (gunicorn --preload) that compiles in the master before it forks its workers.

Public reports: pytorch/pytorch#49555 and benoitc/gunicorn#2478 ("Gunicorn preload flag not working with PyTorch
library": workers forked from a master that loaded torch hang), benoitc/gunicorn#2621 ("There is same ram memory usage
for different workers count with preload_app True ... with preload_app False the ram memory usage ... was increasing
as the worker count increase"), pytorch/pytorch#109442 (the compile pool's processes keep the master's memory).
gunicorn is not installed here: os.fork() after the app is loaded is what --preload does, and a worker leaves through
sys.exit(0) on SIGTERM (its exit handlers run), as a gunicorn sync worker does on a graceful stop.

On torch 2.13 a forked child forgets its parent's pool (async_compile.after_fork clears it), so every worker that
compiles again (a new input shape: a recompile, whose first Triton kernel makes a pool) makes its own pool, while the
master's pool, made at preload, serves nobody for the server's whole life. The user asks: why does memory grow with
the workers when the model was loaded once, and which processes are the compile pools?

Flow: the master makes its pool (wait_pool_ready(), a GPU host's first Triton kernel) and compiles the model at
preload, forks WORKERS workers; each serves requests of the preloaded shape (no compile), then one of a new shape (a
recompile: its own pool) and serves SERVE_S more; the master stops them (SIGTERM), or, where one has not answered
in READY_S (gunicorn's worker timeout), kills it (SIGKILL), waits for them, and exits.

What it shows on torch 2.13 CPU: the forked worker's recompile never returns. after_fork resets the process pool but
not AsyncCompile.pool(), the ThreadPoolExecutor the master's C++ compile made; in the child that executor has no
threads (threads do not survive fork) yet counts its idle ones, so the compile job waits for ever.
Standalone: `python bench/users/preload_fork.py` (SHUTDOWN_BEFORE_FORK=1: shut the master's pools down first).
"""
import os
import select
import signal
import sys
import time

os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
import torch  # noqa: E402
from torch._inductor.async_compile import AsyncCompile, get_compile_threads  # noqa: E402

WORKERS = 2
SERVE_S = 8
READY_S = 90  # a worker's recompile takes under a minute on this box, loaded


def first_triton_kernel() -> str:
    """What a GPU host's first Triton kernel does: make the pool and wait for it (none with compile_threads=1)."""
    if get_compile_threads() <= 1:
        return "none (compile_threads=1)"
    AsyncCompile.wait_pool_ready()
    return f"sidecar {AsyncCompile.process_pool().process.pid}"


def worker(n: int, ready_w: int) -> None:
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    model(torch.ones(8))  # the preloaded shape: no compile
    model(torch.ones(8 + n + 1))  # a new shape: a recompile
    pool = first_triton_kernel()  # the recompile's first Triton kernel
    print(f"worker {os.getpid()} recompiled; its pool: {pool}", flush=True)
    os.write(ready_w, b"r")
    deadline = time.monotonic() + 120
    while not stop and time.monotonic() < deadline:
        time.sleep(0.1)  # serves requests
    sys.exit(0)


if __name__ == "__main__":
    pool = first_triton_kernel()  # at preload
    model = torch.compile(lambda x: (x * 2).sin() + 1, dynamic=False)
    model(torch.ones(8))
    print(f"master {os.getpid()} preloaded; its pool: {pool}", flush=True)
    if os.environ.get("SHUTDOWN_BEFORE_FORK") == "1":  # the report's first advice, tried
        torch._inductor.async_compile.shutdown_compile_workers()
        print("master: shutdown_compile_workers() before the fork", flush=True)
    pids, (ready_r, ready_w) = [], os.pipe()
    for n in range(WORKERS):
        pid = os.fork()
        if pid == 0:
            try:
                worker(n, ready_w)
            finally:
                os._exit(0)  # a worker never returns into the master's code
        pids.append(pid)
    got, deadline = 0, time.monotonic() + READY_S
    while got < WORKERS and time.monotonic() < deadline:
        if select.select([ready_r], [], [], 1.0)[0]:
            got += len(os.read(ready_r, 16))
    if got < WORKERS:  # gunicorn's worker timeout: a worker that does not answer is killed
        import psutil

        for pid in pids:
            p = psutil.Process(pid)
            print(f"master: worker {pid} did not answer in {READY_S} s (WORKER TIMEOUT; it runs {p.num_threads()} "
                  f"thread(s), {p.cpu_times().user + p.cpu_times().system:.1f} s of CPU): SIGKILL", flush=True)
            os.kill(pid, signal.SIGKILL)
    else:
        time.sleep(SERVE_S)  # the workers serve
        for pid in pids:
            os.kill(pid, signal.SIGTERM)  # gunicorn's graceful stop
    for pid in pids:
        os.waitpid(pid, 0)
    print("master: workers stopped", flush=True)
