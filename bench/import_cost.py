"""Import time of torch's target modules, traced vs untraced (issue 14: target bodies run with hooks).

    python bench/import_cost.py [RUNS] [MODULE ...]
        (default: 5 runs; torch._inductor.async_compile, then the autotune and subprocess-pool modules)

Each run is a fresh interpreter that times `import MODULE...` (torch included)
with time.perf_counter; the sampler is off (WP_AUTOTRACE_SAMPLE_INTERVAL=0) so
only the finder, the body hooks and the wrappers are measured. Prints the
median of each side and their difference and ratio. Needs torch.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile

DEFAULT_MODULES = ("torch._inductor.async_compile", "torch._inductor.autotune_process",
                   "torch._inductor.compile_worker.subproc_pool")
CHILD = ("import sys, time\nt = time.perf_counter()\nfor m in sys.argv[1:]:\n    __import__(m)\n"
         "print(time.perf_counter() - t)\n")


# The hooks alone: re-execute already-imported torch target modules (importlib.reload)
# without, then with, the finder installed, in one interpreter.
RELOAD = """
import importlib, os, statistics, sys, tempfile, time
mods = [importlib.import_module(m) for m in sys.argv[2:]]
from wp_autotrace.runtime.finder import TargetFinder
from wp_autotrace.runtime.recorder import Probes
from wp_autotrace.runtime.sink import Sink
from wp_autotrace.common.targets import TARGETS

def timed():
    t = time.perf_counter()
    for m in mods:
        importlib.reload(m)
    return time.perf_counter() - t

runs = int(sys.argv[1])
plain = statistics.median(timed() for _ in range(runs))
probes = Probes(Sink(os.path.join(tempfile.mkdtemp(), "l.jsonl"), "h", "main"), 8, False, lambda i: None)
finder = TargetFinder(TARGETS, probes.make_wrapper, probes.notify, print)
finder.install()
hooked = statistics.median(timed() for _ in range(runs))
print(plain, hooked)
"""


def reload_cost(modules: list[str], runs: int) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    out = subprocess.run([sys.executable, "-c", RELOAD, str(runs), *modules], env=env, capture_output=True,
                         text=True, timeout=300, check=True).stdout.split()
    return float(out[-2]), float(out[-1])


def one(modules: list[str], traced: bool, log: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    if traced:
        env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=log, WP_AUTOTRACE_SAMPLE_INTERVAL="0")
    out = subprocess.run([sys.executable, "-c", CHILD, *modules], env=env, capture_output=True, text=True,
                         timeout=300, check=True).stdout
    return float(out.split()[-1])


DEFAULT_RUNS = 5


def parse_args(argv: list[str]) -> tuple[int, list[str]]:
    """(runs, modules) from the command line; --help prints the module's docstring."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="?", type=int, default=DEFAULT_RUNS, help=f"runs (default {DEFAULT_RUNS})")
    parser.add_argument("modules", nargs="*", default=list(DEFAULT_MODULES), metavar="MODULE",
                        help="modules imported in each run (default: torch's target modules)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("RUNS must be at least 1")
    return args.runs, args.modules


def main() -> None:
    runs, modules = parse_args(sys.argv[1:])
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "bench.jsonl")
        one(modules, False, log)  # warm the page cache and bytecode caches
        pairs = [(one(modules, False, log), one(modules, True, log)) for _ in range(runs)]
    untraced = statistics.median(p[0] for p in pairs)
    traced = statistics.median(p[1] for p in pairs)
    print(f"import {' '.join(modules)}  ({runs} runs, median)")
    print(f"untraced {untraced * 1000:8.1f} ms")
    print(f"traced   {traced * 1000:8.1f} ms   (+{(traced - untraced) * 1000:.1f} ms, x{traced / untraced:.3f})")
    plain, hooked = reload_cost(modules, runs)
    print(f"module bodies alone (reload, median): {plain * 1000:.1f} ms without the finder, "
          f"{hooked * 1000:.1f} ms with it (+{(hooked - plain) * 1000:.2f} ms, x{hooked / plain:.3f})")


if __name__ == "__main__":
    main()
