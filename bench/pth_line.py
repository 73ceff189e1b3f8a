"""What the `.pth` line costs an interpreter started with WP_AUTOTRACE unset, and what other forms of it would.

site compiles every `.pth` import line at each start-up (exec of the line's text), whether or not the line
then does anything: with the variables unset our line runs two dict lookups, and its cost is the compile.
Each form below is one line in a `.pth` of its own pip-less venv (bench/startup_cost.make_venv, no package:
no form is run with a variable set here); each is measured over a venv without it, `python -c pass`:

- instructions (valgrind cachegrind, user space, PYTHONHASHSEED fixed; the second of two runs): load-proof;
- CPU (user+sys from os.wait4's rusage), the median of per-round paired differences with its p25-p75, rounds
  alternating and rotating over the venvs.

Forms: `import os` (the floor: what site pays for any import line), the tree's own line, and the one-variable
form: only `WP_AUTOTRACE`'s presence decides whether the guard is compiled (the same guard text, which reads
both variables' values): an interface change (WP_AUTOTRACE_GUARD alone would no longer start anything), and
the cheapest form that leaves off importing nothing and keeps the guard inline; and one presence test
alone, which hands over nothing: a lower bound for any line that decides by a variable's presence.

Usage: python bench/pth_line.py [--rounds N] [--json]   (needs valgrind; a minute or two)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
import startup_cost  # noqa: E402
from instructions import instructions  # noqa: E402

WARMUP = 5


def forms() -> dict[str, str]:
    """Each form's line (with its newline)."""
    line = (BENCH.parent / "wp_autotrace" / "_bootstrap.pth").read_text().splitlines()[0]
    outer, sep, guard = line.partition(" and exec(")
    if not sep or not outer.startswith("import os; ("):
        raise RuntimeError("the .pth line's form changed: update bench/pth_line.py")
    return {"import os": "import os\n", "this tree's line": line + "\n",
            "one variable decides": 'import os; b"WP_AUTOTRACE" in os.environ._data and exec(' + guard + "\n",
            "one presence test alone": 'import os; b"WP_AUTOTRACE" in os.environ._data\n'}


def paired(a: list[float], b: list[float]) -> dict[str, float]:
    """Median and p25-p75 of a[i] - b[i], in ms (inputs in s)."""
    diffs = [(x - y) * 1e3 for x, y in zip(a, b)]
    q = statistics.quantiles(diffs, n=4)
    return {"median": round(statistics.median(diffs), 3), "p25": round(q[0], 3), "p75": round(q[2], 3)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-pth-"))
    try:
        lines = forms()
        venvs = {"bare": startup_cost.make_venv(tmp, "bare", sys.executable, None)}
        for i, (name, text) in enumerate(lines.items()):
            venvs[name] = startup_cost.make_venv(tmp, f"form{i}", sys.executable, None)
            (next((venvs[name] / "lib").glob("python3*/site-packages")) / "zz.pth").write_text(text)
        off = startup_cost._clean()
        counts = {}
        for name, venv in venvs.items():
            argv = [str(venv / "bin" / "python"), "-c", "pass"]
            instructions(argv, off, tmp)
            counts[name] = instructions(argv, off, tmp)
        cpu: dict[str, list[float]] = {k: [] for k in venvs}
        names = list(venvs)
        for r in range(args.rounds + WARMUP):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                _, c = startup_cost.timed([str(venvs[name] / "bin" / "python"), "-c", "pass"], off)
                if r >= WARMUP:
                    cpu[name].append(c)
        bare_ms = statistics.median(cpu["bare"]) * 1e3
        out = {"rounds": args.rounds, "load": os.getloadavg(), "chars": {k: len(v) - 1 for k, v in lines.items()},
               "bare": {"instructions": counts["bare"], "cpu_median_ms": round(bare_ms, 3),
                        "ns_per_instruction": round(bare_ms * 1e6 / counts["bare"], 3)},
               "instructions_over_bare": {k: counts[k] - counts["bare"] for k in lines},
               "cpu_over_bare_ms": {k: paired(cpu[k], cpu["bare"]) for k in lines}}
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
