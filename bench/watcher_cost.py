"""The watcher process's CPU with N live run processes, this tree against a git ref, side by side (issue 23).

Usage: python bench/watcher_cost.py [--procs 40,1000] [--duration 20] [--rounds 2] [--ref main]

For each N and round, alternating old and new: a driver (a fresh interpreter with the
code on PYTHONPATH) starts N `sleep` children (the run's processes, idle: steady
state), starts the run's real watcher (runtime/spawn.py) at the default interval
0.1 s, waits past its first samples, then reads the watcher's utime+stime from
/proc/PID/stat over --duration seconds, and the log's growth over the same time (rss
heartbeats, keep-alives: use --duration 60 or more to include one). Prints % of one core
and KB per minute per variant (median of rounds) and the host's process count. Nothing
here asserts.
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

REPO = Path(__file__).resolve().parent.parent

DRIVER = r"""
import json, os, signal, subprocess, sys, time
from wp_autotrace.runtime.spawn import spawn
n, duration, log = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
kids = [subprocess.Popen(["sleep", "600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL) for _ in range(n)]
def cpu(pid):
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
try:
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    assert spawn(fd, log, "bench", 0.0, 0.1, 0.0)
    wpid, deadline = 0, time.time() + 60
    while not wpid and time.time() < deadline:
        time.sleep(0.1)
        with open(log, "rb") as f:
            wpid = next((json.loads(l)["pid"] for l in f if b'"watcher_start"' in l), 0)
    time.sleep(3 + n / 500)  # past the first samples (every stat and command line read once)
    c0, t0, s0 = cpu(wpid), time.perf_counter(), os.path.getsize(log)
    time.sleep(duration)
    c1, t1, s1 = cpu(wpid), time.perf_counter(), os.path.getsize(log)
    hosts = sum(1 for p in os.listdir("/proc") if p.isdigit())
    print(json.dumps({"cpu_pct": round((c1 - c0) / (t1 - t0) * 100, 3), "host_procs": hosts,
                      "log_kb_per_min": round((s1 - s0) / 1000 / (t1 - t0) * 60, 1)}))
finally:
    for k in kids:
        k.kill()
    for k in kids:
        k.wait()
    os.unlink(log)  # the watcher leaves when its log is gone
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="40,1000")
    parser.add_argument("--duration", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--ref", default="main")
    parser.add_argument("--host", type=int, default=0, help="extra idle processes outside the run (a busy host)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-watcher-"))
    strangers = [subprocess.Popen(["sleep", "3600"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True) for _ in range(args.host)]
    try:
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", args.ref, "wp_autotrace"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
        code = {"new": str(REPO), args.ref: str(old)}
        env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
        out: dict[str, dict[str, list[dict[str, float]]]] = {}
        for n in (int(x) for x in args.procs.split(",")):
            for r in range(args.rounds):
                names = list(code) if r % 2 == 0 else list(code)[::-1]
                for name in names:
                    res = subprocess.run([sys.executable, "-c", DRIVER, str(n), str(args.duration),
                                          str(tmp / f"w{n}-{name}.jsonl")], env=dict(env, PYTHONPATH=code[name]),
                                         cwd=tmp, capture_output=True, text=True, timeout=args.duration + 300)
                    if res.returncode:
                        raise RuntimeError(res.stderr[-2000:])
                    out.setdefault(str(n), {}).setdefault(name, []).append(json.loads(res.stdout))
        summary = {n: {name: {"cpu_pct_median": statistics.median(s["cpu_pct"] for s in samples),
                              "samples": [s["cpu_pct"] for s in samples],
                              "log_kb_per_min": statistics.median(s["log_kb_per_min"] for s in samples),
                              "host_procs": samples[0]["host_procs"]}
                       for name, samples in per.items()} for n, per in out.items()}
        print(json.dumps({"duration_s": args.duration, "load": os.getloadavg(), "procs": summary}, indent=1))
    finally:
        for p in strangers:
            p.kill()
            p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
