"""What the watcher's log reading would cost through analysis/read/records.parse_line instead of its own reader.

Usage: python bench/watcher_parse.py [--lines 20000] [--starts 20]

Two figures, each for the watcher's own minimal reader (watcher/logwatch.py: json.loads and the few
isinstance checks it acts on) and for records.parse_line (schema-checked, argv re-redacted):
- start-up: a fresh ``python -I -S`` importing the watcher (as runtime/spawn.py starts it), without and
  with analysis.logread, median wall time of --starts runs each (the watcher's first sample, which
  decides what is alive under the root, waits for it);
- per line: microseconds per record for the lines the watcher reads, a traced run's process_start and
  the call/return records the live export reads (tests/logs.py's seed scenario writes them).
Nothing here asserts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

IMPORT = "import sys;sys.path.append({repo!r});import wp_autotrace.watcher.main{extra}"


def start_ms(extra: str, runs: int) -> float:
    """Median wall ms of a fresh `python -I -S` that imports the watcher (and extra)."""
    code = IMPORT.format(repo=str(REPO), extra=extra)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-I", "-S", "-c", code], check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def sample_lines(n: int) -> dict[str, list[bytes]]:
    """Lines as the sink writes them: process_start (argv, as a real root writes it) and call/return."""
    from tests.logs import seed_log

    w = seed_log()
    recs = [json.loads(json.dumps(r)) for r in w.lines]
    calls = [r for r in recs if r["event"] in ("call", "return")]
    start = {"v": 1, "event": "process_start", "ts": 1.8e9, "pid": 4242, "ppid": 1, "host": "h1", "role": "main",
             "seq": 0, "argv": [sys.executable, "-m", "torch.distributed.run", "--nproc", "8", "train.py"] * 3,
             "run": "r1", "create_time": 1.8e9, "cwd": "/home/u/job", "python": sys.version.split()[0]}
    enc = json.JSONEncoder(separators=(",", ":"))

    def lines(records: list[dict[str, object]]) -> list[bytes]:
        return [("\n" + enc.encode(records[i % len(records)])).encode() for i in range(n)]

    return {"process_start": lines([start]), "call/return": lines(calls)}


def minimal(line: bytes) -> object:
    """The watcher's own reader, as LogWatch._read_record decodes and checks."""
    try:
        rec = json.loads(line[line.find(b"{"):])
    except ValueError:
        return None
    if not isinstance(rec, dict) or rec.get("host") != "h1":
        return None
    pid = rec.get("pid")
    return rec if isinstance(pid, int) and isinstance(rec.get("create_time", 0.0), float) else rec


def through_logread(line: bytes) -> object:
    from wp_autotrace.analysis.read.records import parse_line

    fixed: dict[str, int] = {}
    rec = parse_line(line.lstrip(b"\n"), lambda _why: None, fixed)
    return rec if rec is None or rec.get("host") == "h1" else None


def us_per_line(parse: object, lines: list[bytes]) -> float:
    t = time.perf_counter()
    for line in lines:
        parse(line)  # type: ignore[operator]
    return (time.perf_counter() - t) / len(lines) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=20000)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    os.nice(0)
    print(f"start-up, median of {args.starts} (ms): watcher alone "
          f"{start_ms('', args.starts):.1f}, with analysis.logread "
          f"{start_ms(';import wp_autotrace.analysis.read.logread', args.starts):.1f}")
    through_logread(b"{}")  # its imports outside the timing
    for kind, lines in sample_lines(args.lines).items():
        a, b = us_per_line(minimal, lines), us_per_line(through_logread, lines)
        print(f"{kind}: {len(lines[0])} bytes a line; minimal {a:.1f} us, parse_line {b:.1f} us ({b / a:.1f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
