"""A shallow traced call, old code against new, side by side in one process (issue 32).

The package of a git ref (default main) is unpacked as ``wp_autotrace_old`` (its imports are
relative), so both tracers wrap their own copy of one synthetic classmethod in the same
interpreter; rounds alternate old, new and an untraced call, and each round times a loop with
the process's CPU clock (user+sys: waiting for a core on a loaded machine does not count). Prints
the median µs per call over untraced of each side and their ratio. The log is a real file
(held descriptor), or /dev/null with --devnull (the tracer's own CPU without the file system's).

--pool-jobs: both sides' target captures AsyncCompile.wait's "process.pool_jobs" as the call starts, with a
stand-in torch._inductor.async_compile whose _pool_set holds two pools with jobs pending (a ref that knows no
such fact resolves it to None: a dict lookup), so new over old is that fact's cost.

Usage: python bench/call_cost.py [--rounds N] [--ref REF] [--devnull] [--pool-jobs] [--json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SYNTH = "class Pool:\n    @classmethod\n    def traced(cls, x):\n        return x\n\n    @classmethod\n" \
        "    def plain(cls, x):\n        return x\n"
TRACED_LOOP, PLAIN_LOOP = 1000, 20000  # calls per timed loop


POOL_JOBS = (("pool_jobs", "process.pool_jobs"),)


def stand_in_pools() -> None:
    """torch's pool module as the pool_jobs fact reads it: a SubprocPool (pending_futures) and a fork/spawn
    executor (_pending_work_items), 2 and 1 jobs pending."""
    import types

    pools = [types.SimpleNamespace(pending_futures={1: None, 2: None}),
             types.SimpleNamespace(_pending_work_items={1: None})]
    module = types.ModuleType("torch._inductor.async_compile")
    module._pool_set = pools  # type: ignore[attr-defined]
    sys.modules[module.__name__] = module


def wrapped_pool(package: str, tmp: Path, devnull: bool, capture: tuple[tuple[str, str], ...] = ()) -> Any:
    """The synthetic Pool class of module synth_<package>, its traced method wrapped by that package."""
    module = f"synth_{package}"
    (tmp / f"{module}.py").write_text(SYNTH)
    target = importlib.import_module(package + ".common.targets").Target
    finder_cls = importlib.import_module(package + ".runtime.finder").TargetFinder
    probes_cls = importlib.import_module(package + ".runtime.recorder").Probes
    sink = importlib.import_module(package + ".runtime.sink").Sink(str(tmp / f"{package}.jsonl"), "h", "main")
    probes = probes_cls(sink, 8, False, lambda info: None)
    finder = finder_cls((target(module, "Pool.traced", capture_call=capture),), probes.make_wrapper, probes.notify,
                        print)
    finder.install()
    try:
        pool = importlib.import_module(module).Pool
    finally:
        finder.uninstall()
    importlib.import_module(package + ".runtime.held").hold(sink)
    if devnull:
        fd = os.open(os.devnull, os.O_WRONLY)
        sink.fd, sink.identity = fd, (os.fstat(fd).st_dev, os.fstat(fd).st_ino)
    pool.traced(1)  # the first call fills the caches
    return pool


def per_call(fn: Any, n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn(1)
    return (time.process_time() - t0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--ref", default="main")
    parser.add_argument("--devnull", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pool-jobs", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-call-"))
    try:
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.ref, "wp_autotrace"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
        (tmp / "wp_autotrace").rename(tmp / "wp_autotrace_old")
        sys.path[:0] = [str(tmp), str(REPO)]
        capture = POOL_JOBS if args.pool_jobs else ()
        if args.pool_jobs:
            stand_in_pools()
        pools = {"old": wrapped_pool("wp_autotrace_old", tmp, args.devnull, capture),
                 "new": wrapped_pool("wp_autotrace", tmp, args.devnull, capture)}
        samples: dict[str, list[float]] = {"old": [], "new": [], "untraced": []}
        for r in range(args.rounds):
            order = ["old", "new", "untraced"]
            for name in order[r % 3:] + order[:r % 3]:
                fn = pools["old"].plain if name == "untraced" else pools[name].traced
                samples[name].append(per_call(fn, PLAIN_LOOP if name == "untraced" else TRACED_LOOP))
        med = {k: statistics.median(v) * 1e6 for k, v in samples.items()}
        over = {k: round(med[k] - med["untraced"], 3) for k in ("old", "new")}
        out = {"ref": args.ref, "pool_jobs": args.pool_jobs, "rounds": args.rounds,
               "log": "/dev/null" if args.devnull else "file",
               "load": os.getloadavg(), "cpu_us_over_untraced": over,
               "new_over_old": round(over["new"] / over["old"], 3)}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
