"""Findings about a process's threads and its pools: pools one process made at once from several threads, and a
thread's compile that the interpreter's exit refused.

`AsyncCompile.process_pool()` is a `functools.lru_cache(1)`: while its first call runs (SubprocPool.__init__
starting a sidecar takes a second or more), it holds no other caller back, so threads whose first compiles come
together each make a pool, and the process keeps them all (torch's `_pool_set`, shut down at exit) while inductor
hands out one (the last call's) from then on (pytorch#136833: threads calling torch.compile at once).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...common import targets
from ..derive.callers import user_frame
from ..derive.poolprocs import start_method, workers_of
from ..derive.pools import PoolStory
from ..words.fmt import mib_s_text, pid_text, pool_name, site, size_text
from .base import Finding

if TYPE_CHECKING:
    from ..derive.view import View
    from ..fold.model import Pool

# The ready probe every new pool runs (AsyncCompile.use_process_pool submits it): no job of the program's.
READY_PROBE = "AsyncCompile._get_ready"
# What the user can do about pools made at once by threads: have the pool before the threads compile.
AT_ONCE_ADVICE = ("make the pool once before the threads that compile start: call "
                  "torch._inductor.async_compile.AsyncCompile.warm_pool() (or run a first compile) in the main "
                  "thread at startup; or compile without a pool: compile_threads=1 / TORCHINDUCTOR_COMPILE_THREADS=1")


def _at_once(pools: list[Pool], t_end: float) -> list[Pool]:
    """The first group of pools whose creating calls overlap in time, made by different threads (two or more)."""
    spans = sorted(((p.call.ts, p.call.end if p.call.end is not None else t_end, p) for p in pools),
                   key=lambda x: x[0])
    for i, (_, b, first) in enumerate(spans):
        group = [first] + [p for c, _, p in spans[i + 1:] if c <= b]
        if len(group) > 1 and len({p.call.thread for p in group}) == len(group):
            return group
    return []


def pools_made_at_once(v: View) -> Finding | None:
    """A process made two or more pools at once, one per thread (their creating calls overlap): how many
    processes they are, which one ran jobs since, what the others held idle; the fix: one pool before the
    threads."""
    by_creator: dict[int, list[Pool]] = {}
    for pool in v.pools:
        if pool.sidecar is not None:  # a SubprocPool: AsyncCompile.process_pool's pool
            by_creator.setdefault(pool.creator.index, []).append(pool)
    group = next((g for pools in by_creator.values() if len(pools) > 1 and (g := _at_once(pools, v.t_end))), [])
    if not group:
        return None
    p = group[0].creator
    jobs = {pool.sidecar_pid: sum(1 for w in workers_of(pool) for j in w.jobs_run
                                  if not str(j.fn or "").endswith(READY_PROBE)) for pool in group}
    used = [pool for pool in group if jobs[pool.sidecar_pid]]
    unused = [pool for pool in group if not jobs[pool.sidecar_pid]]
    procs = sum(len(v.story(pool).procs) for pool in group)
    threads = ", ".join(sorted({pool.call.thread or "?" for pool in group}))
    where = site(user_frame(group[0].call.caller) or group[0].call.caller)
    since = ("; since then the jobs went to " + ", ".join(
        f"sidecar {pool.sidecar_pid}'s ({jobs[pool.sidecar_pid]} jobs)" for pool in used)) if used else ""
    idle_mib_s = sum(v.story(pool).idle_total_mib_s or 0.0 for pool in unused)
    held = sum(v.story(pool).held_bytes or 0 for pool in unused)
    spare = (f", and sidecar {pid_text(pool.sidecar_pid for pool in unused)}'s ran none of them"
             + (f", holding {size_text(held)} (PSS)" if held else "")
             + (f": {mib_s_text(idle_mib_s)} idle" if idle_mib_s else "")) if unused and used else ""
    made = (f"{len(group)} threads of {p.role} {p.pid} ({threads}) each made a compile pool at once at {where} "
            f"({v.rel(group[0].call.ts) or 0:.1f} s in)")
    text = (f"{made}: AsyncCompile.process_pool() lets every caller in while its first call starts the sidecar, so "
            f"one process had {len(group)} pools, {procs} processes where one pool serves{since}{spare}.")
    # the Answer's sentence: the race, what it made, and the pool(s) left without work
    short = (f"{made}: {len(group)} pools, {procs} processes, where one pool serves"
             + (f"; sidecar {pid_text(pool.sidecar_pid for pool in unused)}'s ran no job of the program's"
                if unused and used else "") + ".")
    return Finding("pools-made-at-once", "warning", text,
                   sorted({q.pid for pool in group for q in v.story(pool).procs} | {p.pid}),
                   [f"{pool.call.thread or '?'}: SubprocPool made at {v.rel(pool.call.ts)} s, sidecar "
                    f"{pool.sidecar_pid}, {jobs[pool.sidecar_pid]} job(s) recorded" for pool in group],
                   AT_ONCE_ADVICE,
                   {"pools": len(group) - 1, "idle_mib_s": round(idle_mib_s, 1),
                    "idle_gib_s": round(idle_mib_s / 1024, 3)}, short)


# concurrent.futures' refusal once the interpreter's exit has begun (its executors' submit(), thread and process
# pools alike): set by its `_python_exit`, which threading runs as the main thread returns, before it joins the
# other threads.
SHUTDOWN_REFUSAL = "cannot schedule new futures after interpreter shutdown"
# What the user can do when a thread compiles after the main thread returned (huggingface/diffusers#3764).
AFTER_EXIT_ADVICE = ("keep the main thread alive while other threads compile: join them before it returns "
                     "(thread.join() at the end of the main script); or compile without a pool: compile_threads=1 / "
                     "TORCHINDUCTOR_COMPILE_THREADS=1 (the thread then compiles in itself)")


def _name(st: PoolStory) -> str:
    return pool_name({"kind": st.pool.kind, "start_method": start_method(st.pool), "sidecar_pid": st.pool.sidecar_pid,
                      "worker_pids": [q.pid for q in st.workers]})


def compile_after_exit(v: View) -> Finding | None:
    """A compile (dynamo's `_compile`) that raised concurrent.futures' refusal in a thread of a process whose main
    thread had returned (its `_python_exit` call, on the main thread, before the compile ended): the thread, when
    the main thread returned, the error, and what the pools the process made since did (they ran no job of it)."""
    for c in v.tagged(targets.COMPILE):
        if not c.error or SHUTDOWN_REFUSAL not in c.error or c.end is None:
            continue
        p = c.proc
        exits = [x.ts for x in p.calls.values() if x.tag == targets.EXIT_JOIN and x.thread in ("MainThread", "")
                 and x.ts <= c.end]
        if not exits:
            continue
        returned = min(exits)
        made = [pool for pool in p.pools if pool.call.ts >= returned]
        procs = [q for pool in made for q in v.story(pool).procs]
        pools = (f"; the compile pool it made after that ({', '.join(_name(v.story(pool)) for pool in made)}, at "
                 f"{site(user_frame(made[0].call.caller) or made[0].call.caller)}) served none of it") if made else ""
        error = c.error.strip().splitlines()[0]
        told = (f"{p.role.capitalize()} {p.pid}'s thread {c.thread or '?'} compiled after the main thread had "
                f"returned (at {v.rel(returned) or 0:.1f} s), and the compile failed at {v.rel(c.end) or 0:.1f} s: "
                "Python refuses new work to concurrent.futures executors, inductor's compile thread pool included, "
                "once the main thread has returned")
        return Finding(
            "compile-after-exit", "problem",
            f"{told} ({error}; the compile began at {v.rel(c.ts) or 0:.1f} s; the thread ran on, its compile did "
            f"not){pools}.",
            sorted({p.pid, *(q.pid for q in procs)}),
            [f"{p.pid}: _python_exit (the main thread's return) at {v.rel(returned)} s; _compile in thread "
             f"{c.thread or '?'} raised at {v.rel(c.end)} s"], AFTER_EXIT_ADVICE, {"compiles_failed": 1}, f"{told}.")
    return None
