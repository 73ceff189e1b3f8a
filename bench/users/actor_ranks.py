"""Ray-style actors that each torch.compile: every actor process makes its own compile pool, then the driver kills
the actors the way `ray.kill(actor)` does (SIGKILL to the actor's process alone, no atexit in the actor).

Public reports: pytorch/pytorch#190941 ("Right now every rank launches its own set of compile workers - this results
in 32 * 8 workers all competing. We should have a mode that shares them across ranks"), Lightning-AI/lightning-thunder
#837 (`ps` listing compile workers under several `--parent=` pids) and pytorch/pytorch#153791 (torch.compile in Ray
workers). Ray itself is not installed here (too big for this box); multiprocessing "spawn" processes stand in for the
actors: like Ray's workers they are fresh interpreters that live between tasks, and ray.kill's default (no_restart,
force) is a SIGKILL to the actor process only, so nothing in the actor shuts its pool down.

The user asks: how many processes and how much memory do the actors' compile pools take (it grows with the actors),
and what is left of them after the actors are killed?

Flow: the driver starts ACTORS actors; each makes its pool as a GPU host's first Triton kernel does
(AsyncCompile.wait_pool_ready()), compiles a small function, reports ready and serves (waits for work). The driver
prints what psutil sees (the independent reading), lets the actors sit idle IDLE_S, SIGKILLs each actor, watches their
pools for KEEP_S, prints what is left, and ends anything left by pid. Standalone:
`python bench/users/actor_ranks.py`.
"""
import multiprocessing as mp
import os
import signal
import time

ACTORS = 3
IDLE_S = 6
KEEP_S = 8


def actor(rank: int, ready: "mp.Queue[tuple[int, int, int]]", stop: "mp.Event") -> None:  # type: ignore[type-arg]
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "2")
    import torch
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel
    torch.compile(lambda x: (x * rank).sin() + 1)(torch.ones(4))
    ready.put((rank, os.getpid(), AsyncCompile.process_pool().process.pid))
    stop.wait(300)  # serves until killed


def show(label: str, procs: list) -> None:  # type: ignore[type-arg]
    import psutil

    rows, rss = [], 0
    for p in procs:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                rows.append(f"{p.pid}(zombie, ppid {p.ppid()})")
                continue
            rss += p.memory_info().rss
            rows.append(f"{p.pid}(ppid {p.ppid()}, {p.num_threads()} thr)")
        except psutil.Error:
            rows.append(f"{p.pid}(gone)")
    print(f"[{time.monotonic() - T0:6.1f} s] {label}: {len(rows)} processes, rss {rss / 2**20:.0f} MiB: "
          f"{', '.join(rows) or 'none'}", flush=True)


if __name__ == "__main__":
    import psutil

    T0 = time.monotonic()
    ctx = mp.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    actors = [ctx.Process(target=actor, args=(r, ready, stop), name=f"actor-{r}") for r in range(ACTORS)]
    for a in actors:
        a.start()
    try:
        for _ in actors:
            rank, pid, sidecar = ready.get(timeout=400)
            print(f"[{time.monotonic() - T0:6.1f} s] actor {rank} (pid {pid}) compiled; its pool's sidecar {sidecar}",
                  flush=True)
        pools = [p for a in actors for p in psutil.Process(a.pid).children(recursive=True)]
        show("the actors' compile pools", pools)
        time.sleep(IDLE_S)
        show(f"idle {IDLE_S} s later", pools)
        for a in actors:
            os.kill(a.pid, signal.SIGKILL)  # ray.kill(actor)
        print(f"[{time.monotonic() - T0:6.1f} s] killed the {ACTORS} actors (SIGKILL, as ray.kill)", flush=True)
        for a in actors:
            a.join(30)
        deadline = time.monotonic() + KEEP_S
        while time.monotonic() < deadline and any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE
                                                  for p in pools):
            time.sleep(0.25)
        show(f"the pools' processes after the kill (watched up to {KEEP_S} s)", pools)
    finally:
        for p in [psutil.Process(a.pid) for a in actors if a.is_alive()] + locals().get("pools", []):
            try:
                if p.is_running():
                    p.kill()
            except psutil.Error:
                pass
