"""Trace the bundled seed scenario for a bounded time, then print the report.

The scenario never ends by itself (every compile sidecar starts another),
so this runner gives it a fixed time, interrupts the main process so its
exit handlers run (and wp-autotrace's watcher lists what is left), then kills
what the run left behind and waits until the watcher has seen them end, so
the report knows they are gone. The program's own stderr (torch's expected
KeyboardInterrupt tracebacks from the interrupt) goes to a file beside the
log; its wp-autotrace lines are repeated here.
Usage: python examples/run_example.py [SECONDS] [--guard]
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Bounds on waits for the watcher's records, not sleeps: each ends as soon as its record is in the log (at
# once on a quiet host; its sampling interval is 0.1 s). They are generous because on a host loaded several
# times over the watcher (niced) can be seconds late, and a report read before its verdict says the killed
# sidecars are still running.
LEFTOVER_WAIT_S = 60.0
FIRST_SIDECAR_WAIT_S = 120.0  # torch's import and the first warm_pool, however loaded the host
FIRST_SIDECAR = b'"role":"compile-sidecar"'  # the first record a compile sidecar writes (common/vocab.py)
WATCHER_END_WAIT_S = 60.0


def _bytes(log: Path) -> bytes:
    return log.read_bytes() if log.exists() else b""


def main() -> int:
    seconds = float(next((a for a in sys.argv[1:] if not a.startswith("-")), 45))
    guard = "--guard" in sys.argv
    log = Path.cwd() / ("wp_autotrace-example-guard.jsonl" if guard else "wp_autotrace-example.jsonl")
    log.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    env.update(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), PYTHONPATH=str(HERE / "standin_backend"),
               TORCHINDUCTOR_COMPILE_THREADS="2")
    if guard:
        env["WP_AUTOTRACE_GUARD"] = "nested-pools"
    stderr_path = log.with_suffix(".stderr.txt")
    print(f"running examples/train.py traced for at most {seconds:.0f}s after its first pool (log: {log}; the "
          f"program's stderr: {stderr_path})", flush=True)
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen([sys.executable, str(HERE / "train.py"), "3"], env=env, start_new_session=True,
                                stderr=stderr)
    # The scenario's SECONDS count from its first compile sidecar: on a loaded host importing torch alone can
    # take most of them, and an interrupt before any pool shows nothing of what the example is about.
    deadline = time.monotonic() + FIRST_SIDECAR_WAIT_S
    while proc.poll() is None and time.monotonic() < deadline and FIRST_SIDECAR not in _bytes(log):
        time.sleep(0.2)
    deadline = time.monotonic() + seconds
    while proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.5)
    if proc.poll() is None:
        print(f"[run_example] {seconds:.0f}s are up: interrupting the main process (Ctrl-C), as torch's exit "
              f"handler would wait up to 300 s on the sidecar chain (its KeyboardInterrupt tracebacks, expected, "
              f"are in {stderr_path.name})", flush=True)
    for _ in range(3):
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(3)
        except subprocess.TimeoutExpired:
            pass
    # The watcher process writes what the main process left behind a moment after it ends.
    deadline = time.monotonic() + LEFTOVER_WAIT_S  # only once the main ended: no verdict comes before
    while proc.poll() is not None and time.monotonic() < deadline and b'"event":"leftover"' not in _bytes(log):
        time.sleep(0.2)
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the orphaned sidecars
    except ProcessLookupError:
        pass
    proc.wait()
    # The watcher sees the killed sidecars end within a few of its samples, then writes watcher_exit:
    # report after that, so the report knows they are gone (not "still running, end them with cleanup").
    deadline = time.monotonic() + WATCHER_END_WAIT_S
    while time.monotonic() < deadline and b'"event":"watcher_exit"' not in _bytes(log):
        time.sleep(0.2)
    for line in stderr_path.read_text(errors="replace").splitlines():
        if line.startswith("wp-autotrace:"):
            print(line, flush=True)  # the tracer's own lines (a guard notice), from the program's stderr
    print(f"main process exit status {proc.returncode}; report:\n", flush=True)
    cli = [sys.executable, "-m", "wp_autotrace"]
    status = subprocess.call([*cli, "report", str(log)])
    subprocess.call([*cli, "export", str(log), "-o", str(log.with_suffix(".trace.json")), "--force"])  # our own file
    return status


if __name__ == "__main__":
    sys.exit(main())
