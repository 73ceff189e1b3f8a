"""Instructions of torch's real traced rows (``AsyncCompile.warm_pool``, its 6 environment variables read;
``AsyncCompile.wakeup``, a plain row) per call, traced and untraced, for this tree and a git ref.

bench/host_floor.py times these rows in CPU; this counts them (valgrind callgrind, user space only: the
kernel's part of ``fstat`` and ``write`` is not counted), which does not move with the machine's load.
Only the loop is counted: a tiny C library (built here with the system's C compiler and valgrind's
callgrind.h) asks callgrind to start instrumenting after torch's import and to dump a count per row, so
torch's import (minutes under valgrind with instrumentation) is not paid. Each row: 50 warm-up calls,
then N calls between two client requests, the count divided by N.

Usage: python bench/call_instructions.py [--ref REF] [--calls N] [--json]   (needs valgrind and cc; minutes)
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import startup_cost  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
ROWS = ("traced", "untraced", "plain", "plain untraced")

TOGGLE_C = r"""
#include <valgrind/callgrind.h>
void cg_on(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_zero(void) { CALLGRIND_ZERO_STATS; }
void cg_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""

# The child: the tree's own .pth line, as a traced child of a run, then each row counted alone.
CHILD = r'''
import ctypes, os, sys
tree, lib, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for k, v in [kv.split("=", 1) for kv in sys.argv[4:]]:
    os.environ[k] = v  # set here, not at exec: the venv's own .pth must not start the other tree
exec(open(os.path.join(tree, "wp_autotrace", "_bootstrap.pth")).read().splitlines()[0])
import wp_autotrace
assert wp_autotrace.__file__.startswith(tree), wp_autotrace.__file__
import torch._inductor.async_compile as ac
AC = ac.AsyncCompile
def raw(name):
    f = AC.__dict__[name].__func__
    return getattr(f, "__wrapped__", f).__get__(AC)
rows = {"traced": AC.warm_pool, "untraced": raw("warm_pool"), "plain": AC.wakeup, "plain untraced": raw("wakeup")}
assert AC.warm_pool.__func__ is not raw("warm_pool").__func__, "warm_pool is not traced"
cg = ctypes.CDLL(lib)
for fn in rows.values():
    for _ in range(50):
        fn()
cg.cg_on()
for name, fn in rows.items():
    loops = range(n)
    cg.cg_zero()
    for _ in loops:
        fn()
    cg.cg_dump(name.encode())
'''


def count(tree: Path, tmp: Path, lib: Path, calls: int) -> dict[str, int]:
    """Instructions per call of each row, this tree's .pth line tracing it."""
    log = tmp / f"log-{tree.name}.jsonl"
    os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))
    script = tmp / "child.py"
    script.write_text(CHILD)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WP_AUTOTRACE", "PYTHON", "TORCH"))}
    env.update(PYTHONPATH=str(tree), PYTHONHASHSEED="0", TORCHINDUCTOR_COMPILE_THREADS="1")
    on = ["WP_AUTOTRACE=1", f"WP_AUTOTRACE_LOG={log}", "WP_AUTOTRACE_RUN=x", "WP_AUTOTRACE_ROOT_PID=1",
          "WP_AUTOTRACE_SAMPLE_INTERVAL=0"]
    out = tmp / f"cg-{tree.name}"
    subprocess.run(["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                    sys.executable, str(script), str(tree), str(lib), str(calls), *on],
                   env=env, cwd=tmp, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    got: dict[str, int] = {}
    for dump in tmp.glob(f"cg-{tree.name}.*"):
        text = dump.read_text(errors="replace")
        name = re.search(r"^desc: Trigger: Client Request: (.*)$", text, re.M)
        total = re.search(r"^totals: (\d+)", text, re.M)
        if name and total and name.group(1) in ROWS:
            got[name.group(1)] = int(total.group(1)) // calls
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="main")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-callinstr-"))
    try:
        (tmp / "toggle.c").write_text(TOGGLE_C)
        lib = tmp / "toggle.so"
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(tmp / "toggle.c")], check=True)
        old = startup_cost.export_ref(args.ref, tmp / "old").parent
        trees = {"new": count(REPO, tmp, lib, args.calls), "old": count(old, tmp, lib, args.calls)}
        out = {"ref": args.ref, "calls": args.calls, "per_call": trees,
               "traced_over_untraced": {k: {"warm_pool": v["traced"] - v["untraced"],
                                            "plain": v["plain"] - v["plain untraced"]} for k, v in trees.items()}}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
