"""A peer's per-process start-up beside ours: coverage.py's subprocess measurement (issue 41).

coverage.py measures subprocesses through a .pth line (`import coverage; coverage.process_startup()`)
and COVERAGE_PROCESS_START. This times ``python -c pass`` in a venv that has coverage.py installed,
with that line and the variable (on) and without the line (not installed), rounds alternating; prints
the median of the per-round paired differences of child CPU (os.wait4 rusage), as bench/host_floor.py
does for wp-autotrace. The venv is the caller's (coverage.py is not a dependency of this project).

Usage: python bench/peer_startup.py VENV_PYTHON [--rounds N]
"""

from __future__ import annotations

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import startup_cost  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    site = subprocess.run([args.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    pth = Path(site) / "zz_bench_coverage.pth"
    with tempfile.TemporaryDirectory(prefix="wp-bench-peer-") as tmp:
        rc = Path(tmp) / "rc"
        rc.write_text(f"[run]\nparallel = true\ndata_file = {tmp}/.coverage\n")
        on = startup_cost._clean(COVERAGE_PROCESS_START=str(rc))
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        try:
            for r in range(args.rounds + 3):
                for name in (("off", "on") if r % 2 else ("on", "off")):
                    if name == "on":
                        pth.write_text("import coverage; coverage.process_startup()\n")
                    elif pth.exists():
                        pth.unlink()
                    env = on if name == "on" else startup_cost._clean()
                    _, c = startup_cost.timed([args.python, "-c", "pass"], env)
                    if r >= 3:
                        cpu[name].append(c)
                for f in glob.glob(f"{tmp}/.coverage*"):
                    os.remove(f)
        finally:
            if pth.exists():
                pth.unlink()
    diffs = [(a - b) * 1e3 for a, b in zip(cpu["on"], cpu["off"])]
    q = statistics.quantiles(diffs, n=4)
    print(f"coverage.py subprocess measurement over not installed: {statistics.median(diffs):.1f} ms "
          f"(p25-p75 {q[0]:.1f}-{q[2]:.1f}; {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
