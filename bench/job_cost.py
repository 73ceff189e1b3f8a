"""What a pool worker pays per job for its job records, and a traced AsyncCompile.wait for the per-pool pending read.

Per job: the worker loop's call queue as runtime/jobs.py watches it (a start record as get() hands a job over, an
end record at the next get()) against the bare queue, both over a stand-in queue whose get() returns at once (the
cost is all the tracer's: a real get() waits on a pipe for milliseconds at least). A real Sink appends to a log file
on this machine's disk, as in a traced worker. Rounds alternate bare and watched; the figure is the median of the
per-round differences of this process's CPU time (time.process_time) per job, with its p25-p75.

Per wait: runtime/reads.read_pool_pending over a stand-in `_pool_set` of two pools (a SubprocPool-like with 3
pending jobs, an executor-like with 2 workers and 1): CPU per call, median over rounds.

Usage: python bench/job_cost.py [--rounds N] [--jobs N]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from wp_autotrace.runtime import reads  # noqa: E402
from wp_autotrace.runtime.held import hold  # noqa: E402
from wp_autotrace.runtime.jobs import JobQueue  # noqa: E402
from wp_autotrace.runtime.sink import Sink  # noqa: E402


class Item:
    """concurrent.futures' _CallItem: a torch Triton job's shape (a function, a partial with the kernel's name)."""

    def __init__(self, work_id: int) -> None:
        self.work_id = work_id
        self.fn = os.path.join
        self.args = (functools.partial(os.path.join, "triton_poi_fused_add_0", "src"), {}, {})
        self.kwargs: dict[str, object] = {}


class Queue:
    def __init__(self, items: list[Item]) -> None:
        self.items = iter(items)

    def get(self, block: bool = True) -> Item:
        return next(self.items)


def loop(queue: object, n: int) -> float:
    """CPU seconds for n gets, as the worker loop makes them."""
    get = queue.get  # type: ignore[attr-defined]
    start = time.process_time()
    for _ in range(n):
        get(block=True)
    return time.process_time() - start


def per_job(rounds: int, jobs: int, sink: Sink) -> list[float]:
    diffs = []
    for r in range(rounds):
        items = [Item(i) for i in range(jobs + 1)]
        order = ("bare", "watched") if r % 2 == 0 else ("watched", "bare")
        took = {}
        for kind in order:
            q: object = Queue(list(items))
            took[kind] = loop(JobQueue(q, sink) if kind == "watched" else q, jobs)
        diffs.append((took["watched"] - took["bare"]) / jobs)
    return diffs


def per_wait(rounds: int, calls: int) -> list[float]:
    side = types.SimpleNamespace(process=types.SimpleNamespace(pid=1234), pending_futures={1: 0, 2: 0, 3: 0})
    executor = types.SimpleNamespace(_pending_work_items={7: 0}, _processes={11: 0, 12: 0})
    home = types.ModuleType("torch._inductor.async_compile")
    home._pool_set = [side, executor]  # type: ignore[attr-defined]  # torch: an OrderedSet; iterated only
    sys.modules["torch._inductor.async_compile"] = home
    out = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            reads.read_pool_pending()
        out.append((time.process_time() - start) / calls)
    return out


def show(name: str, values: list[float]) -> None:
    q = statistics.quantiles(values, n=4)
    print(f"{name}: median {statistics.median(values) * 1e6:.2f} us (p25 {q[0] * 1e6:.2f}, p75 {q[2] * 1e6:.2f})")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=40)
    ap.add_argument("--jobs", type=int, default=2000)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sink = Sink(str(Path(tmp) / "log.jsonl"), "bench", "compile-worker")
        hold(sink)
        show("per job, two job records (start + end) over the bare queue", per_job(a.rounds, a.jobs, sink))
        print(f"log bytes per job: {os.path.getsize(Path(tmp) / 'log.jsonl') / (a.rounds * a.jobs):.0f}")
    show("per AsyncCompile.wait, read_pool_pending (2 pools)", per_wait(a.rounds, 2000))


if __name__ == "__main__":
    main()
