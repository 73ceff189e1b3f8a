"""Where a traced child's start-up goes, as user-space instruction counts (valgrind cachegrind).

A count does not move with the machine's load, so each part is seen without hundreds of rounds
(bench/host_floor.py gives the CPU figures). One pip-less venv of this tree (bench/startup_cost.py's);
every figure is instructions added over ``python -c pass`` with WP_AUTOTRACE unset:

- ``traced_child``: the whole added cost of a traced child of a traced root (its start, its exit), the
  start modules read from their pack (the loader in wp_autotrace/__init__.py; the warm-up run writes it).
- ``no_pack``: the same with no pack and none written (PYTHONDONTWRITEBYTECODE=1): a first start after an
  install or an edit, or a folder it cannot write.
- ``modules``: loading the start modules untraced as a traced start does (``import wp_autotrace._preload``,
  then ``load()`` from the pack): ``preload_module`` (the package, which holds the loader and is
  ``_preload`` too, with site-packages' first look-up) and ``pack_load``.
- ``plain_imports``: the same modules found and loaded one by one (``import wp_autotrace.runtime.bootstrap``,
  the path before the pack), each module's share as its added count when imported after the ones before it
  (``per_module``; a package's share includes its folder's first look-up), and an empty module in runtime/
  (``one_more_file``): the import system's fixed price of one file.
- ``pth_guard``: what the .pth line's hand-over adds once either variable is set at all:
  ``_preload.start()``'s value, main-interpreter and run-once tests, called twice as the line's two runs in
  a venv call it (site reads a venv's site-packages twice), load_and_start() stubbed.
- ``start_and_exit``: the rest (traced_child - modules - pth_guard): bootstrap.start(), the exit record,
  and the line's second import (found in sys.modules).

With ``--cpu N``, the same parts in CPU too (user+sys from ``os.wait4``'s rusage, N alternating rounds, medians of
the paired differences over off, with p25-p75) and their minor page faults (medians): ``preload_module``,
``modules`` and ``traced_child`` as above; ``fault_us``, what one minor fault costs here (a child touching 400 fresh
pages over one that maps them untouched): on a virtual machine a fault is microseconds, so a start's added faults
(the pack's read buffer, the objects unmarshalled) are a share of its CPU that no instruction count shows.

Usage: python bench/start_phases.py [--json] [--cpu N]   (needs valgrind; about two minutes, and N rounds)
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import startup_cost  # noqa: E402
from instructions import instructions  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
# The modules a traced start loads, in the order it loads them (tests/test_activation.py START_MODULES
# holds the set; a module missing from this tree is skipped).
ORDER = ("wp_autotrace", "wp_autotrace.runtime", "wp_autotrace.common", "wp_autotrace.common.core",
         "wp_autotrace.common.env", "wp_autotrace.common.redact", "wp_autotrace.runtime.host_patches",
         "wp_autotrace.runtime.sink", "wp_autotrace.runtime.bootstrap")


# _preload.start() called as the .pth line's two runs call it, tracing on, load_and_start() stubbed; HANDOVER_BASE
# the same text calling a builtin instead (the same tokens: the difference is the calls').
HANDOVER = ("import os, wp_autotrace._preload as p\nos.environ['WP_AUTOTRACE'] = '1'\np.load_and_start = int\n"
            "q = p.start\n"
            "for f in (q, q): f()")
HANDOVER_BASE = HANDOVER.replace("(q, q)", "(int, int)")
# CPU parts (--cpu): the same code strings as the counts' (each over "pass" with the tracer off)
PRELOAD = "pass\nimport wp_autotrace._preload as p"
MODULES = PRELOAD + "\np.load()"
# One minor fault's price: 400 fresh pages touched, over the same mapping left untouched
PAGES = 400
TOUCH = f"import mmap\nm = mmap.mmap(-1, {PAGES} * 4096)\nfor i in range(0, {PAGES} * 4096, 4096): m[i] = 1"


def cpu_parts(python: str, off: dict[str, str], on: dict[str, str], log: Path, rounds: int) -> dict[str, object]:
    """Each part's CPU ms and minor faults over off (paired medians of alternating rounds), and fault_us."""
    variants = {"off": (["-c", "pass"], off), "preload_module": (["-c", PRELOAD], off),
                "modules": (["-c", MODULES], off), "traced_child": (["-c", "pass"], on),
                "untouched": (["-S", "-c", TOUCH.replace("m[i] = 1", "pass")], off),
                "touched": (["-S", "-c", TOUCH], off)}
    names = list(variants)
    got: dict[str, list[tuple[float, int]]] = {name: [] for name in names}
    for r in range(rounds + 5):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            argv, env = variants[name]
            ru = startup_cost.spawned([python, *argv], env)
            if r >= 5:  # the first rounds warm the page cache
                got[name].append((ru.ru_utime + ru.ru_stime, ru.ru_minflt))
        log.write_bytes(b"")  # appends cost the same from empty

    def over(name: str, base: str) -> dict[str, float]:
        ms = [(a[0] - b[0]) * 1e3 for a, b in zip(got[name], got[base])]
        q = statistics.quantiles(ms, n=4)
        return {"cpu_ms": round(statistics.median(ms), 3), "p25": round(q[0], 3), "p75": round(q[2], 3),
                "minflt": statistics.median(a[1] - b[1] for a, b in zip(got[name], got[base]))}

    fault = over("touched", "untouched")
    return {"rounds": rounds, **{name: over(name, "off") for name in names[1:4]},
            "fault_us": round(fault["cpu_ms"] * 1e3 / max(fault["minflt"], 1), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cpu", type=int, default=0, metavar="N", help="also CPU and faults, N rounds")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-phases-"))
    try:
        log = tmp / "log.jsonl"
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))  # a descendant opens the log its root made
        off = startup_cost._clean()
        on = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="x",
                                 WP_AUTOTRACE_ROOT_PID="1")
        venv = startup_cost.make_venv(tmp, "tree", sys.executable, REPO / "wp_autotrace")
        python = str(venv / "bin" / "python")
        empty = next((venv / "lib").glob("python3*/site-packages")) / "wp_autotrace" / "runtime" / "wp_bench_empty.py"
        empty.write_text('"""An empty module: the fixed price of one file."""\n')
        subprocess.run([python, "-m", "py_compile", str(empty)], check=True, env=startup_cost._clean())

        def count(code: str, env: dict[str, str] = off) -> int:
            return instructions([python, "-c", code], env, tmp)

        count("pass", on)  # warm: the first run of a venv
        # Every code string below is "pass" and lines of equal cost to parse, so the differences are the imports'.
        base = count("pass")
        traced = count("pass", on) - base
        shares: dict[str, int] = {}
        lines = ["pass"]
        before = base
        for name in ORDER:
            if not (REPO / (name.replace(".", "/") + ".py")).exists() and not (REPO / name.replace(".", "/")).is_dir():
                continue
            lines.append(f"import {name}")
            now = count("\n".join(lines))
            shares[name] = now - before
            before = now
        plain_imports = before - base
        one_more = count("\n".join([*lines, "import wp_autotrace.runtime.wp_bench_empty"])) - before
        preload = count("pass\nimport wp_autotrace._preload as p") - base
        modules = count("pass\nimport wp_autotrace._preload as p\np.load()") - base
        guard_cost = count(HANDOVER) - count(HANDOVER_BASE)
        for pack in (venv / "lib").glob("python3*/site-packages/wp_autotrace/__pycache__/_startpack.*.pyc"):
            pack.unlink()
        no_pack = count("pass", {**on, "PYTHONDONTWRITEBYTECODE": "1"}) - base
        out = {"traced_child": traced, "no_pack": no_pack, "modules": modules, "preload_module": preload,
               "pack_load": modules - preload, "plain_imports": plain_imports, "per_module": shares,
               "one_more_file": one_more, "pth_guard": guard_cost, "start_and_exit": traced - modules - guard_cost}
        if args.cpu:  # the pack again first: the no-pack count above removed it
            subprocess.run([python, "-c", "pass"], env=on, cwd=tmp, check=True)
            out["cpu"] = {"load_start": os.getloadavg(), **cpu_parts(python, off, on, log, args.cpu),
                          "load_end": os.getloadavg()}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
