"""Peak memory of `wp-autotrace export` (OTLP and Chrome trace) over the log's size (issue 28 item 7).

Usage: python bench/export_memory.py [--records 1000000] [--ref main] [--formats otlp chrome] [--skip-new]
       [--keep-log PATH]

Writes bench/report_scale.py's synthetic run at --records records (1M records: about 200 MiB), then runs
``wp-autotrace export LOG --format F -o OUT`` of this working tree and of --ref (git archive, on
PYTHONPATH) in fresh interpreters, one at a time, and prints each one's peak RSS (ru_maxrss from wait4),
CPU and wall time, the output's size, and peak RSS / log size (the target: at most 1.5). Nothing here
asserts; tests/test_export_stream.py holds the checks.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TARGET = 1.5  # peak RSS over the log's size


def make_log(path: Path, records: int) -> int:
    """The synthetic run, written in a child: its lines would otherwise count in every later child's peak
    (ru_maxrss includes what a child inherited before it exec'd)."""
    made = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                           "from report_scale import make_log; print(make_log(__import__('pathlib').Path("
                           "sys.argv[2]), 2000, 20, int(sys.argv[3])))", str(REPO / "bench"), str(path),
                           str(records)], check=True, capture_output=True, text=True)
    return int(made.stdout)


def measure(argv: list[str], env: dict[str, str], cwd: Path) -> dict[str, float]:
    """wall s, CPU s and peak RSS (MiB) of one command, stdout and stderr to /dev/null."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, env=env, stdout=null, stderr=null, stdin=subprocess.DEVNULL, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv} exited {status}")
    return {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
            "peak_rss_mib": round(ru.ru_maxrss / 1024)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--ref", default="main", help="the git ref to compare with ('' for none)")
    parser.add_argument("--formats", nargs="+", default=["otlp", "chrome"], choices=["otlp", "chrome"])
    parser.add_argument("--skip-new", action="store_true", help="measure --ref only")
    parser.add_argument("--keep-log", default="", help="write (or reuse) the log here instead of a temp dir")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-export-"))
    try:
        log = Path(args.keep_log) if args.keep_log else tmp / "big.jsonl"
        if log.exists():
            with open(log, "rb") as f:
                n = sum(1 for line in f if line.strip())
        else:
            n = make_log(log, args.records)
        size = log.stat().st_size
        env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
        trees = {} if args.skip_new else {"new": REPO}
        if args.ref:
            old = tmp / "old"
            old.mkdir()
            archive = subprocess.run(["git", "-C", str(REPO), "archive", args.ref, "wp_autotrace"], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees[args.ref] = old
        rows = {}
        for fmt in args.formats:
            for name, tree in trees.items():
                out = tmp / f"{fmt}-{name}.json"
                row = measure([sys.executable, "-m", "wp_autotrace", "export", str(log), "--format", fmt, "-o",
                               str(out)], dict(env, PYTHONPATH=str(tree)), tmp)
                row["output_mib"] = round(out.stat().st_size / 2**20)
                row["peak_over_log"] = round(row["peak_rss_mib"] * 2**20 / size, 2)
                out.unlink()
                rows[f"export --format {fmt} ({name})"] = row
        print(json.dumps({"records": n, "log_mib": round(size / 2**20), "target_peak_over_log": TARGET,
                          "load": os.getloadavg(), "rows": rows}, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
