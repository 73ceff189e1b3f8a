"""What sampling real memory costs the watcher, and what a pool's first/last-job times cost a submit.

Usage (the interpreter must have wp-autotrace installed, e.g. the worktree's .venv):

    python bench/pool_memory.py [--workers 32] [--mib 200] [--rounds 5] [--duration 10]

1. Memory sampling on a 32-worker pool: a "sidecar" touches --mib MiB and forks --workers
   children that keep it (as a compile sidecar's forked workers share its pages: reading their
   smaps_rollup walks all of them). For --duration seconds this process ticks every 0.1 s as the
   watcher does, once with watcher/memory.py's MemorySampler and once without (rounds
   alternate); the CPU (time.process_time: user + system, the kernel's page walk included) per
   wall second of each round. Medians side by side; the difference is the sampler's cost in
   % of one core (issue 22's bound: 0.5 %). Also the sampler's own measured CPU and its reads.
2. A counted SubprocPool.submit: the counting wrapper (runtime/recorder.py) around a no-op, its
   cost per call with the first/last times (today's) vs without (a copy of the old body), median
   of --rounds rounds of 200k calls each.

Prints markdown rows; nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

from wp_autotrace.watcher.memory import MemorySampler

TICK_S = 0.1  # the watcher's default interval (WP_AUTOTRACE_SAMPLE_INTERVAL)


def start_pool(workers: int, mib: int) -> tuple[int, list[int], int]:
    """A forked 'sidecar' holding mib MiB and its forked workers; (sidecar pid, worker pids, pipe to end them)."""
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    sidecar = os.fork()
    if sidecar == 0:
        os.close(w)
        held = bytearray(mib << 20)
        held[::4096] = b"x" * len(held[::4096])  # every page touched: present, shared after the forks
        kids = []
        for _ in range(workers):
            kid = os.fork()
            if kid == 0:
                os.read(r, 1)
                os._exit(0)
            kids.append(kid)
        os.write(ready_w, (",".join(map(str, kids)) + "\n").encode())
        os.read(r, 1)
        for kid in kids:
            os.waitpid(kid, 0)
        os._exit(0)
    os.close(r)
    os.close(ready_w)
    data = b""
    while not data.endswith(b"\n"):
        data += os.read(ready_r, 65536)
    os.close(ready_r)
    return sidecar, [int(x) for x in data.decode().split(",")], w


def live_entries(sidecar: int, kids: list[int]) -> dict[int, dict[str, Any]]:
    live = {sidecar: {"pid": sidecar, "ppid": os.getpid(), "create_time": 1.0, "role": "compile-sidecar"}}
    live.update({k: {"pid": k, "ppid": sidecar, "create_time": 2.0, "role": "compile-worker"} for k in kids})
    return live


def one_round(live: dict[int, dict[str, Any]], duration: float, sample: bool) -> tuple[float, MemorySampler]:
    """CPU seconds per wall second of a watcher-like 0.1 s loop, with or without the sampler."""
    sampler = MemorySampler()
    cpu0, wall0 = time.process_time(), time.monotonic()
    next_tick = wall0
    while time.monotonic() - wall0 < duration:
        if sample:
            sampler.tick(time.time(), live)
        next_tick += TICK_S
        time.sleep(max(0.0, next_tick - time.monotonic()))
    return (time.process_time() - cpu0) / (time.monotonic() - wall0), sampler


def bench_sampling(workers: int, mib: int, rounds: int, duration: float) -> None:
    sidecar, kids, stop = start_pool(workers, mib)
    try:
        live = live_entries(sidecar, kids)
        on: list[float] = []
        off: list[float] = []
        own: list[float] = []
        reads = 0
        for _ in range(rounds):
            share, sampler = one_round(live, duration, True)
            on.append(share)
            own.append(sampler.cpu_s / duration)
            reads += sampler.reads
            off.append(one_round(live, duration, False)[0])
        read_ms = statistics.median(own) * duration / max(1, reads / rounds) * 1e3
        print(f"| 0.1 s watcher loop, {workers}-worker pool of {mib} MiB, {rounds} x {duration:.0f} s "
              "alternating | without sampling | with sampling | sampler's own CPU |")
        print("|---|---|---|---|")
        print(f"| CPU, % of one core (median) | {100 * statistics.median(off):.3f} % | "
              f"{100 * statistics.median(on):.3f} % | {100 * statistics.median(own):.3f} % "
              f"({reads / rounds:.0f} reads per round, {read_ms:.2f} ms each) |")
    finally:
        os.write(stop, b"x" * (workers + 1))
        os.close(stop)
        os.waitpid(sidecar, 0)


def bench_submit(rounds: int, calls: int = 200_000) -> None:
    from wp_autotrace.runtime import recorder

    probes: Any = recorder.Probes.__new__(recorder.Probes)
    probes.counts = {}
    probes.count_times = {}
    now_wrapper = probes._counting_call("torch:SubprocPool.submit", lambda: None)

    def old_wrapper(label: str = "torch:SubprocPool.submit", raw: Any = lambda: None) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            counts = probes.counts
            counts[label] = counts.get(label, 0) + 1
            return raw(*args, **kwargs)
        return call

    old = old_wrapper()
    results: dict[str, list[float]] = {"count only (before)": [], "count + first/last time (now)": []}
    for _ in range(rounds):
        for name, fn in (("count only (before)", old), ("count + first/last time (now)", now_wrapper)):
            t = time.perf_counter()
            for _ in range(calls):
                fn()
            results[name].append((time.perf_counter() - t) / calls * 1e9)
    print()
    print(f"| counted SubprocPool.submit wrapper, {rounds} x {calls} calls | ns per call (median) |")
    print("|---|---|")
    for name, xs in results.items():
        print(f"| {name} | {statistics.median(xs):.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=32)
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--duration", type=float, default=10.0)
    args = ap.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print()
    bench_sampling(args.workers, args.mib, args.rounds, args.duration)
    bench_submit(args.rounds)


if __name__ == "__main__":
    main()
