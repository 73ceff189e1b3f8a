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

Usage: python bench/start_phases.py [--json]   (needs valgrind; about two minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
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
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
