"""The watcher's CPU with live export (WP_AUTOTRACE_EXPORT=otlp) on vs off, to a local OTLP/HTTP receiver.

Usage (the interpreter must have wp-autotrace installed, e.g. the worktree's .venv):

    python bench/live_export.py [--duration 20] [--rounds 2] [--churn 0.5]

A traced root with 40 sleeping descendants (as bench/watcher.py) that also starts
one traced `python -c pass` every `--churn` seconds: each is a process_start, a
process_exit and, with export on, one span. The watcher's utime+stime from
/proc/PID/stat over `--duration` s, export off and on alternating. The receiver
runs in this process (a thread) and counts what arrives. Prints markdown rows.
"""

from __future__ import annotations

import argparse
import http.server
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

from watcher import clean_env, proc_cpu, watcher_pid  # bench/ is sys.path[0] when a bench script runs

ROOT = textwrap.dedent('''
    import subprocess, sys, time
    shell = "sleep 600 & sleep 600 & sleep 600 & sleep 600 & wait"
    kids = [subprocess.Popen(["sh", "-c", shell]) for _ in range(8)]
    print("ready", flush=True)
    while True:
        subprocess.run([sys.executable, "-c", "pass"])
        time.sleep(float(sys.argv[1]))
''')
WARM_S = 2.5  # past the first samples (every process new) and a heartbeat


class Receiver:
    def __init__(self) -> None:
        self.spans = 0
        self.requests = 0
        rx = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                rx.requests += 1
                rx.spans += sum(len(ss["spans"]) for rs in body["resourceSpans"] for ss in rs["scopeSpans"])
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def watcher_cpu(export: bool, rx: Receiver, duration: float, churn: float, tmp: Path) -> dict[str, Any]:
    script, log = tmp / "root.py", tmp / f"cpu-{export}-{time.monotonic_ns()}.jsonl"
    script.write_text(ROOT)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    if export:
        env.update(WP_AUTOTRACE_EXPORT="otlp", OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{rx.server.server_address[1]}")
    root = subprocess.Popen([sys.executable, str(script), str(churn)], stdout=subprocess.PIPE, env=env,
                            start_new_session=True)
    try:
        assert root.stdout is not None and root.stdout.readline() == b"ready\n"
        wpid = watcher_pid(log)
        time.sleep(WARM_S)
        spans0 = rx.spans
        c0, t0 = proc_cpu(wpid), time.perf_counter()
        time.sleep(duration)
        c1, t1 = proc_cpu(wpid), time.perf_counter()
        starts = sum(1 for line in log.read_bytes().splitlines() if b'"event":"process_start"' in line)
        return {"pct": (c1 - c0) / (t1 - t0) * 100, "spans": rx.spans - spans0, "starts": starts}
    finally:
        os.killpg(root.pid, signal.SIGKILL)
        root.wait()
        log.unlink(missing_ok=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--churn", type=float, default=0.5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-export-"))
    rx = Receiver()
    print(f"load {os.getloadavg()}", flush=True)
    pct: dict[bool, list[float]] = {False: [], True: []}
    spans = []
    for r in range(args.rounds):
        for export in ((False, True) if r % 2 == 0 else (True, False)):
            c = watcher_cpu(export, rx, args.duration, args.churn, tmp)
            pct[export].append(c["pct"])
            if export:
                spans.append(c["spans"])
    off, on = statistics.median(pct[False]), statistics.median(pct[True])
    print(f"| watcher CPU at 0.1 s, 40 run processes + a traced child every {args.churn:g} s, live export off | "
          f"{off:.2f}% of one core (median of {args.rounds}, {args.duration:.0f} s each) | ≤ 1% of one core |")
    print(f"| the same, WP_AUTOTRACE_EXPORT=otlp to a local receiver | {on:.2f}% of one core "
          f"({statistics.median(spans):.0f} spans received per {args.duration:.0f} s) | ≤ 1% of one core |")
    print(f"load {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main()
