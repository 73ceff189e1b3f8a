"""What a record costs with the log's descriptor held, and released (issue 34), side by side in one run.

A held sink checks its descriptor (fstat) and writes; a released one opens the path, checks it, writes
and closes. Alternating rounds of each, median µs per record (a ~300-byte record, as process_start's
size order; the log on the temp folder's filesystem), in CPU time. Nothing here asserts.

Usage: python bench/log_fd.py [--rounds N] [--records N] [--dir DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from wp_autotrace.runtime.sink import Sink  # noqa: E402

FIELDS = {"argv": ["/usr/bin/python3", "train.py", "--epochs", "3"], "cwd": "/home/user/job", "python": "3.11.7",
          "run": "0123456789ab", "root_pid": 4242, "forked": False, "env": {"TORCHINDUCTOR_COMPILE_THREADS": "4"}}


def per_record_us(sink: Sink, records: int) -> float:
    """CPU µs per record (this thread's user+sys: what waiting for a core on a busy machine does not inflate)."""
    t0 = time.thread_time()
    for _ in range(records):
        sink.emit("process_start", **FIELDS)
    return (time.thread_time() - t0) / records * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--dir", default=None, help="folder for the log (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        held = Sink(os.path.join(tmp, "held.jsonl"), "h", "main")
        released = Sink(os.path.join(tmp, "released.jsonl"), "h", "main")
        released.release()
        times: dict[str, list[float]] = {"held": [], "released": []}
        for r in range(args.rounds):
            order = (("held", held), ("released", released)) if r % 2 else (("released", released), ("held", held))
            for name, sink in order:
                times[name].append(per_record_us(sink, args.records))
        med = {k: statistics.median(v) for k, v in times.items()}
        q = {k: statistics.quantiles(v, n=4) for k, v in times.items()}
        size = os.path.getsize(os.path.join(tmp, "held.jsonl")) / (args.rounds * args.records)
    print(f"{args.rounds} alternating rounds of {args.records} records of {size:.0f} B; median µs per record "
          "CPU (p25–p75):")
    for name in times:
        print(f"  {name:9s} {med[name]:6.2f}  ({q[name][0]:.2f}–{q[name][2]:.2f})")
    print(f"  released over held: +{med['released'] - med['held']:.2f} µs per record "
          f"(x{med['released'] / med['held']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
