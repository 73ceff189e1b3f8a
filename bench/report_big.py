"""`report --json` of a 1M-record log against the bare parse, side by side (issue 23).

Usage: python bench/report_big.py [--records 1000000] [--rounds 3] [--ref main]

Writes bench/report_scale.py's synthetic run at --records records, then, alternating,
in fresh interpreters: a bare ``json.loads`` of each line (the floor: no checks, no
model, nothing kept), ``wp-autotrace report --json`` of this working tree, and the
same command of --ref (git archive, on PYTHONPATH). Prints CPU (user+sys) and peak
RSS (ru_maxrss from wait4) of each, medians, and their ratios to the bare parse and to
the log's size. Nothing here asserts.
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
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
BARE = ("import json, sys\n"
        "with open(sys.argv[1], 'rb') as f:\n"
        "    for line in f:\n"
        "        if line.strip():\n"
        "            json.loads(line)\n")


# Where the report's CPU goes, each stage timed cumulatively in one process (CPU s): the file's
# lines, our decoder, + the field checks, + the time-order stream, + the run model (fold).
PARTS = """
import json, sys, time
from wp_autotrace.analysis import logread as L
from wp_autotrace.analysis.model import Builder
path = sys.argv[1]
def lines():
    with open(path, "rb") as f:
        for raw in L._lines(f, {}):
            raw.strip()
def decode():
    with open(path, "rb") as f:
        for raw in L._lines(f, {}):
            if raw.strip():
                L._decode(raw)
def check():
    with open(path, "rb") as f:
        fixed = {}
        for raw in L._lines(f, {}):
            if raw.strip():
                L.parse_line(raw, lambda reason: None, fixed)
def stream():
    for _ in L.stream_logs([path]):
        pass
def fold():
    Builder().fold(L.stream_logs([path]))
out = {}
for fn in (lines, decode, check, stream, fold):
    t = time.process_time()
    fn()
    out[fn.__name__] = round(time.process_time() - t, 2)
print(json.dumps(out))
"""


def run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, peak RSS bytes) of one command, stdout to /dev/null; in cwd, as `-m` puts cwd
    first on sys.path (never the repository, whose package would shadow --ref's)."""
    t0 = time.perf_counter()
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, env=env, stdout=null, stdin=subprocess.DEVNULL, cwd=cwd)
        _, status, ru = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) not in (0, 3):  # 3: some input unreadable (not here)
        raise RuntimeError(f"{argv} exited {status}")
    return time.perf_counter() - t0, ru.ru_utime + ru.ru_stime, ru.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ref", default="main")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-big-"))
    try:
        log = tmp / "big.jsonl"
        # In a child: the lines it builds would otherwise count in every later child's peak RSS
        # (ru_maxrss includes what a child inherited before it exec'd).
        made = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                               "from report_scale import make_log; print(make_log(__import__('pathlib').Path("
                               "sys.argv[2]), 2000, 20, int(sys.argv[3])))", str(REPO / "bench"), str(log),
                               str(args.records)], check=True, capture_output=True, text=True)
        n = int(made.stdout)
        size = log.stat().st_size
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.ref, "wp_autotrace"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
        py = sys.executable
        variants = {
            "bare json.loads of each line": ([py, "-c", BARE, str(log)], env),
            "report --json (new)": ([py, "-m", "wp_autotrace", "report", "--json", str(log)],
                                    dict(env, PYTHONPATH=str(REPO))),
            f"report --json ({args.ref})": ([py, "-m", "wp_autotrace", "report", "--json", str(log)],
                                            dict(env, PYTHONPATH=str(old))),
        }
        got: dict[str, list[tuple[float, float, int]]] = {k: [] for k in variants}
        names = list(variants)
        for r in range(args.rounds):
            k = r % len(names)
            for name in names[k:] + names[:k]:
                got[name].append(run(*variants[name], tmp))
        bare_cpu = statistics.median(c for _, c, _ in got[names[0]])
        parts = subprocess.run([py, "-c", PARTS, str(log)], env=dict(env, PYTHONPATH=str(REPO)), check=True,
                               capture_output=True, text=True, cwd=tmp).stdout
        out = {"records": n, "log_bytes": size, "rounds": args.rounds, "load": os.getloadavg(), "rows": {}}
        for name, samples in got.items():
            cpu = statistics.median(c for _, c, _ in samples)
            rss = statistics.median(m for _, _, m in samples)
            wall = statistics.median(w for w, _, _ in samples)
            out["rows"][name] = {"cpu_s": round(cpu, 2), "wall_s": round(wall, 2),
                                 "cpu_over_bare": round(cpu / bare_cpu, 2), "peak_rss_mib": round(rss / 2**20),
                                 "peak_over_log": round(rss / size, 2)}
        out["new_stages_cpu_s"] = json.loads(parts)
        print(json.dumps(out, indent=1))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
