"""What a traced forked child and a large environment cost, over the same untraced (docs/scale.md's rows).

Forked child: a driver in a venv with the package installed (bench/startup_cost.py's venvs), traced (a traced
child of a run: WP_AUTOTRACE=1, the root pid another's) or installed-off, forks --children children one after
another; each ends at once by os._exit(0), or by sys.exit(0) (the interpreter's exit: atexit, the tracer's
process_exit, finalization). Each child's CPU (user+sys) is its own rusage from os.wait4, the parent's per fork
its getrusage(RUSAGE_SELF) around the fork loop. Rounds alternate traced and off; each figure is the median of
the per-round paired differences (traced minus off), with its p25-p75, in ms.

Environment: ``python -c pass`` with --vars extra variables against none, traced child and installed-off each;
the figure is the per-round (traced - off with the variables) - (traced - off without): what the variables add
to a traced start alone (process_start reads the environment and scans it for secret values in argv).

Usage: python bench/fork_cost.py [--rounds N] [--children N] [--vars N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import startup_cost  # noqa: E402
from host_floor import paired  # noqa: E402

WARMUP = 3

# The driver: forks N children that end by os._exit(0) or sys.exit(0); prints the parent's CPU per fork and
# each child's CPU, in s, from rusage (its own reading: the tracer's log is not read).
DRIVER = r'''
import os, resource, sys
n, how = int(sys.argv[1]), sys.argv[2]
children, parent = [], 0.0
for _ in range(n):
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    pid = os.fork()
    if pid == 0:
        if how == "sys.exit":
            sys.exit(0)
        os._exit(0)
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    parent += r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    _, status, ru = os.wait4(pid, 0)
    if status:
        raise SystemExit(f"child exited {status}")
    children.append(ru.ru_utime + ru.ru_stime)
print(parent / n, *children)
'''


def _drive(python: str, script: Path, env: dict[str, str], children: int, how: str) -> tuple[float, float]:
    """(parent CPU per fork, median child CPU) of one driver run, in s."""
    out = subprocess.run([python, str(script), str(children), how], env=env, capture_output=True, text=True,
                         stdin=subprocess.DEVNULL, timeout=300, check=True).stdout.split()
    parent, *each = map(float, out)
    return parent, statistics.median(each)


def forked(python: str, tmp: Path, on: dict[str, str], rounds: int, children: int) -> dict[str, Any]:
    """Traced over off, per forked child (each way of ending) and per fork in the parent."""
    script = tmp / "driver.py"
    script.write_text(DRIVER)
    clean = startup_cost._clean
    variants = [(how, mode) for how in ("os._exit", "sys.exit") for mode in ("traced", "off")]
    got: dict[tuple[str, str], list[tuple[float, float]]] = {v: [] for v in variants}
    for r in range(rounds + WARMUP):
        k = r % len(variants)
        for how, mode in variants[k:] + variants[:k]:
            res = _drive(python, script, clean(**on) if mode == "traced" else clean(), children, how)
            if r >= WARMUP:
                got[(how, mode)].append(res)
            Path(on["WP_AUTOTRACE_LOG"]).write_bytes(b"")  # appends cost the same from empty
    out: dict[str, Any] = {"rounds": rounds, "children_per_round": children}
    for how in ("os._exit", "sys.exit"):
        traced, off = got[(how, "traced")], got[(how, "off")]
        out[f"child_{how}_off_ms"] = round(statistics.median(c for _, c in off) * 1e3, 3)
        out[f"child_{how}_traced_over_off"] = paired([c for _, c in traced], [c for _, c in off])
        out[f"parent_per_fork_{how}_traced_over_off"] = paired([p for p, _ in traced], [p for p, _ in off])
    return out


def environment(python: str, on: dict[str, str], rounds: int, count: int) -> dict[str, Any]:
    """What count extra variables add to a traced start over the same start untraced."""
    clean = startup_cost._clean
    extra = {f"WP_BENCH_VAR_{i}": f"value_{i}" for i in range(count)}
    variants = {"off": clean(), "traced": clean(**on), "off+vars": clean(**extra),
                "traced+vars": clean(**extra, **on)}
    cpu: dict[str, list[float]] = {k: [] for k in variants}
    names = list(variants)
    for r in range(rounds + WARMUP):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            _, c = startup_cost.timed([python, "-c", "pass"], variants[name])
            if r >= WARMUP:
                cpu[name].append(c)
        Path(on["WP_AUTOTRACE_LOG"]).write_bytes(b"")
    with_vars = [t - o for t, o in zip(cpu["traced+vars"], cpu["off+vars"])]
    without = [t - o for t, o in zip(cpu["traced"], cpu["off"])]
    return {"rounds": rounds, "variables": count,
            "cpu_median_ms": {k: round(statistics.median(v) * 1e3, 3) for k, v in cpu.items()},
            "traced_over_off": paired(cpu["traced"], cpu["off"]),
            "traced_over_off_with_vars": paired(cpu["traced+vars"], cpu["off+vars"]),
            "vars_add_to_traced_start": paired(with_vars, without)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--children", type=int, default=20)
    parser.add_argument("--vars", type=int, default=10_000)
    parser.add_argument("--skip", choices=("fork", "env"), default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-fork-"))
    try:
        python = str(startup_cost.make_venv(tmp, "new", sys.executable, BENCH.parent / "wp_autotrace") / "bin"
                     / "python")
        log = tmp / "log.jsonl"
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
        on = {"WP_AUTOTRACE": "1", "WP_AUTOTRACE_LOG": str(log), "WP_AUTOTRACE_RUN": "x",
              "WP_AUTOTRACE_ROOT_PID": "1"}
        out: dict[str, Any] = {"load_start": os.getloadavg()}
        if args.skip != "fork":
            out["fork"] = forked(python, tmp, on, args.rounds, args.children)
        if args.skip != "env":
            out["env"] = environment(python, on, args.rounds, args.vars)
        out["load_end"] = os.getloadavg()
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
