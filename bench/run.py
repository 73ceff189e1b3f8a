"""Measure wp-autotrace's costs side by side and write BENCHMARKS.md.

Usage (from anywhere; any Python 3.9+ can drive it):

    python bench/run.py [--quick] [--only NAME,...] [--out BENCHMARKS.md] [--python PATH]

NAME is one of: startup, rss, micro, sink, sampler, watcher, report, compile,
peers (default: all; --quick leaves out peers unless --only names it; "peers"
alone also runs the untraced and traced baselines). The table's first rows are
issue 32's six figures, each measured side by side in this run (alternating
rounds; median, p25-p75) and, where it misses its target, the floor the same
run measured. --quick uses fewer repeats and smaller loads (a 100k-record log
for the report; about 3 minutes, plus about 3 for peers) and marks the file
preliminary; the full run takes about 20 minutes on 2 quiet cores. --python
is the base interpreter of the venvs (default: the one running this script).

The venvs live in bench/.venvs (about 2 GB; keep it out of git) and are made
from scratch on first use, which needs PyPI (see bench/venvs.py); the
repository is installed from a freshly built wheel on every run. Variants are
measured in alternating order, round by round, and compared by their medians.
Nothing here asserts a time: each figure is reported with its target and
whether it was met, beside the machine's load and a speed check.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
import venvs  # noqa: E402
from run_common import Report, speed_check  # noqa: E402
from run_compile import bench_compile  # noqa: E402
from run_inproc import bench_micro, bench_report, bench_sampler, bench_sink, bench_watcher  # noqa: E402
from run_output import machine, summary, versions, write_markdown  # noqa: E402
from run_procs import bench_rss, bench_startup  # noqa: E402

GROUPS = ("startup", "rss", "micro", "sink", "sampler", "watcher", "report", "compile", "peers")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller loads (< 3 min); preliminary")
    parser.add_argument("--only", default="", help=f"comma-separated subset of {','.join(GROUPS)}")
    parser.add_argument("--out", default=str(venvs.REPO / "BENCHMARKS.md"), help="markdown file to write")
    parser.add_argument("--python", default=sys.executable, help="base interpreter for the venvs")
    args = parser.parse_args(argv)
    groups = [g for g in GROUPS if g != "peers" or not args.quick]
    if args.only:
        groups = [g.strip() for g in args.only.split(",") if g.strip()]
        unknown = set(groups) - set(GROUPS)
        if unknown:
            parser.error(f"unknown group(s) {', '.join(sorted(unknown))}; choose from {', '.join(GROUPS)}")
    quick = args.quick
    started = time.monotonic()
    meta: dict[str, Any] = {"quick": quick, "groups": groups, "machine": machine(), "load0": _load(),
                            "speed0": speed_check(), "command": " ".join([sys.executable, *sys.argv]),
                            "date": datetime.datetime.now().astimezone().isoformat("T", "seconds")}
    need = {"pkg"} | ({"bare"} if {"startup", "rss"} & set(groups) else set())
    if {"compile", "peers"} & set(groups):
        need.add("torch")
    made = venvs.prepare(need, args.python)
    print(f"venvs ready ({time.monotonic() - started:.0f} s)", flush=True)
    meta["versions"] = versions(made)
    rep = Report()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-"))
    steps: list[tuple[str, Callable[[], None]]] = [
        ("startup", lambda: bench_startup(made, 40 if quick else 200, tmp, rep)),
        ("rss", lambda: bench_rss(made, 5 if quick else 15, tmp, rep)),
        ("micro", lambda: bench_micro(made, 10 if quick else 30, 1000 if quick else 2000, rep)),
        ("sink", lambda: bench_sink(made, 64, 2_000 if quick else 20_000, rep)),
        ("sampler", lambda: bench_sampler(made, [0, 1000] if quick else [0, 1000, 3000], 5 if quick else 20,
                                          20 if quick else 50, rep)),
        ("watcher", lambda: bench_watcher(made, 5 if quick else 20, 2 if quick else 3, tmp, rep)),
        ("report", lambda: bench_report(made, 100_000 if quick else 1_000_000, 3, rep)),
        ("compile", lambda: bench_compile(made, 1 if quick else 5, "peers" in groups, not quick, 600, tmp, rep)),
    ]
    if "peers" in groups and "compile" not in groups:
        steps[-1] = ("peers", steps[-1][1])
    try:
        for name, step in steps:
            if name in groups:
                print(f"== {name}", flush=True)
                t0 = time.monotonic()
                step()
                print(f"   ({time.monotonic() - t0:.0f} s)", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    meta.update(load1=_load(), speed1=speed_check(), elapsed=time.monotonic() - started)
    write_markdown(Path(args.out), rep, meta)
    print("\n" + "\n".join(summary(rep)) + f"\n\nwrote {args.out} ({meta['elapsed']:.0f} s)")
    return 0


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


if __name__ == "__main__":
    sys.exit(main())
