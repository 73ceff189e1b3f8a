"""Start-up and traced-call cost as user-space instruction counts (valgrind cachegrind), old code against new.

A count does not move with the machine's load, where times do (issue 32: two CPU hogs share the
machine on purpose), so a small change is seen without hundreds of rounds; the kernel's part
(open, fstat, write of the log) is not counted, which bench/startup_cost.py and bench/run.py's
micro group time. Figures:

- start-up: ``python -c pass`` in pip-less venvs made as bench/startup_cost.py makes them:
  installed with WP_AUTOTRACE unset, and enabled in a non-root process (a descendant of a run),
  for this working tree and a git ref (default main); instructions added over unset.
- call: a shallow traced classmethod (call and return records, the default stack limit, a held
  log), instructions per call: (count of N2 calls - count of N1 calls) / (N2 - N1); called from
  the module's top level, and from a function (one more user frame walked).

Usage: python bench/instructions.py [--ref REF] [--json]   (needs valgrind; about a minute)
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
CALLS = (1000, 5000)  # the two call counts whose difference is divided
CALL_CODE = """
import sys, tempfile
from pathlib import Path
from wp_autotrace.common.targets import Target
from wp_autotrace.runtime.finder import TargetFinder
from wp_autotrace.runtime.recorder import Probes
from wp_autotrace.runtime.sink import Sink
from wp_autotrace.runtime.bootstrap import DEFAULT_STACK
tmp = Path(tempfile.mkdtemp())
sys.path.insert(0, str(tmp))
(tmp / "wp_bench_synth.py").write_text("class Pool:\\n    @classmethod\\n    def traced(cls, x):\\n        return x\\n")
sink = Sink(str(tmp / "log.jsonl"), "h", "main")
probes = Probes(sink, DEFAULT_STACK, False, lambda info: None)
finder = TargetFinder((Target("wp_bench_synth", "Pool.traced"),), probes.make_wrapper, probes.notify, print)
finder.install()
from wp_bench_synth import Pool
finder.uninstall()
from wp_autotrace.runtime.held import hold
hold(sink)
Pool.traced(1)  # the first call fills the caches


def calls(n):  # the caller a function, one frame below the module: two user frames walked
    for _ in range(n):
        Pool.traced(1)


if sys.argv[2] == "function":
    calls(int(sys.argv[1]))
else:
    for _ in range(int(sys.argv[1])):
        Pool.traced(1)
"""


def instructions(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """User-space instructions of one run (PYTHONHASHSEED fixed: the count is then repeatable). cwd: not
    the repository, whose wp_autotrace `-c` would import instead of the venv's."""
    out = subprocess.run(["valgrind", "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null",
                          *argv], env={**env, "PYTHONHASHSEED": "0"}, capture_output=True, text=True,
                         timeout=600, cwd=cwd).stderr
    found = re.search(r"I\s+refs:\s+([\d,]+)", out)
    if found is None:
        raise RuntimeError(f"no count from valgrind: {out[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ref", default="main")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-instr-"))
    try:
        log = tmp / "log.jsonl"
        os.close(os.open(log, os.O_WRONLY | os.O_CREAT, 0o600))  # a descendant opens the log its root made
        on = startup_cost._clean(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_RUN="x",
                                 WP_AUTOTRACE_ROOT_PID="1")
        packages = {"new": REPO / "wp_autotrace", "old": startup_cost.export_ref(args.ref, tmp / "ref")}
        out: dict[str, object] = {"ref": args.ref, "calls": CALLS}
        for name, package in packages.items():
            python = str(startup_cost.make_venv(tmp, name, sys.executable, package) / "bin" / "python")
            instructions([python, "-c", "pass"], on, tmp)  # the first run writes nothing cached that counts; warm
            unset = instructions([python, "-c", "pass"], startup_cost._clean(), tmp)
            enabled = instructions([python, "-c", "pass"], on, tmp)
            per_call = {}
            for caller in ("module", "function"):
                few, many = (instructions([python, "-c", CALL_CODE, str(n), caller], startup_cost._clean(), tmp)
                             for n in CALLS)
                per_call[caller] = round((many - few) / (CALLS[1] - CALLS[0]))
            out[name] = {"unset": unset, "enabled_nonroot": enabled, "startup_added": enabled - unset,
                         "per_traced_call": per_call["module"], "per_traced_call_in_function": per_call["function"]}
        new, old = out["new"], out["old"]
        assert isinstance(new, dict) and isinstance(old, dict)
        out["startup_added_new_over_old"] = round(new["startup_added"] / old["startup_added"], 3)
        for key in ("per_traced_call", "per_traced_call_in_function"):
            out[f"{key}_new_over_old"] = round(new[key] / old[key], 3)
        print(json.dumps(out, indent=None if args.json else 1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
