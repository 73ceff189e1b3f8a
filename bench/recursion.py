"""How deep a traced recursive function gets, as a share of the same function untraced.

    python bench/recursion.py [PYTHON ...]     (default: this interpreter)

Each interpreter runs the tracer's finder and wrappers from this checkout (no
install needed) on a throwaway module whose recursive function is a target,
and on an identical module that is not; it prints both depths at the default
recursion limit and their ratio (issue 14 asks for >= 0.95 on 3.9 - 3.13).
The median of RUNS runs is shown.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUNS = 3

MODULE = '''
DEPTH = [0]
def down(n):
    DEPTH[0] = n
    down(n + 1)
'''

CHILD = '''
import importlib, json, os, sys, tempfile
sys.path.insert(0, sys.argv[1])
from wp_autotrace.runtime.finder import TargetFinder
from wp_autotrace.runtime.recorder import Probes
from wp_autotrace.runtime.sink import Sink
from wp_autotrace.common.targets import Target

tmp = tempfile.mkdtemp()
for name in ("recplain", "rectraced"):
    with open(os.path.join(tmp, name + ".py"), "w") as f:
        f.write(sys.argv[2])
sys.path.insert(0, tmp)
probes = Probes(Sink(os.path.join(tmp, "log.jsonl"), "bench", "main"), 8, False, lambda info: None)
finder = TargetFinder((Target("rectraced", "down"),), probes.make_wrapper, probes.notify, print)
finder.install()

def depth(name):
    mod = importlib.import_module(name)
    try:
        mod.down(0)
    except RecursionError:
        pass
    return mod.DEPTH[0]

limit = sys.getrecursionlimit()
print(json.dumps({"plain": depth("recplain"), "traced": depth("rectraced"),
                  "limit_after": sys.getrecursionlimit(), "limit": limit}))
'''


def measure(python: str) -> dict[str, object]:
    """Median depths over RUNS runs of one interpreter."""
    runs = []
    for _ in range(RUNS):
        out = subprocess.run([python, "-c", CHILD, str(REPO), MODULE], capture_output=True, text=True,
                             timeout=120, check=True).stdout
        runs.append(json.loads(out))
    plain = statistics.median(r["plain"] for r in runs)
    traced = statistics.median(r["traced"] for r in runs)
    version = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, check=True).stdout.strip()
    return {"python": version, "plain": plain, "traced": traced, "ratio": traced / plain,
            "limit_restored": all(r["limit_after"] == r["limit"] for r in runs)}


def main() -> None:
    pythons = sys.argv[1:] or [sys.executable]
    print(f"{'python':<10} {'untraced':>9} {'traced':>8} {'ratio':>6}  limit restored")
    for python in pythons:
        r = measure(python)
        print(f"{r['python']:<10} {r['plain']:>9.0f} {r['traced']:>8.0f} {r['ratio']:>6.3f}  {r['limit_restored']}")


if __name__ == "__main__":
    main()
