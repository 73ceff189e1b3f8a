"""Costs of the log-safety checks (issue 15): medians, side by side; nothing asserted.

    python bench/logsafe.py

- fstat per write: os.fstat on the log fd alone, and Sink.emit with the identity
  check vs the same emit with the check skipped (identity forced to match).
- redaction at start-up: redact_argv + env_secrets + redact_env for a typical
  command line and this process's environment, and the module's import time.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Callable

from wp_autotrace.common import redact
from wp_autotrace.runtime import sink

ROUNDS = 7


def per_call_us(fn: Callable[[], object], n: int) -> float:
    """Median over ROUNDS of the mean cost of one call, in microseconds."""
    times = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        times.append((time.perf_counter() - t0) / n * 1e6)
    return statistics.median(times)


def main() -> None:
    import argparse

    # No options: --help prints what it measures, and anything else is an error, not ignored.
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        s = sink.Sink(os.path.join(tmp, "b.jsonl"), "h", "main")
        fd = s.fd
        fstat_us = per_call_us(lambda: os.fstat(fd), 100_000)
        emit_checked = per_call_us(lambda: s.emit("role", role="x"), 20_000)
        real_identity = sink.identity_of
        sink.identity_of = lambda fd: s.identity  # type: ignore[assignment]
        try:
            emit_unchecked = per_call_us(lambda: s.emit("role", role="x"), 20_000)
        finally:
            sink.identity_of = real_identity
    print(f"os.fstat(log fd): {fstat_us:.2f} us")
    print(f"Sink.emit: {emit_checked:.2f} us checked vs {emit_unchecked:.2f} us unchecked "
          f"(+{emit_checked - emit_unchecked:.2f} us, x{emit_checked / emit_unchecked:.2f})")
    argv = [sys.executable, "train.py", "--token=abc", "--api-key", "k", "--lr", "0.1", "--epochs", "3",
            "--data", "/data/imagenet", "--model", "resnet50"]
    pats = redact.parse_patterns("")

    def startup() -> object:
        secrets = redact.env_secrets(os.environ, pats)
        return redact.redact_argv(argv, pats, secrets), redact.redact_env({"TORCH_WARM_POOL": "0"}, pats)

    print(f"redaction at start-up ({len(argv)} args, {len(os.environ)} env vars): {per_call_us(startup, 2000):.1f} us")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    selfs: dict[str, list[int]] = {"wp_autotrace.common.redact": [], "wp_autotrace.runtime.sink": []}
    for _ in range(ROUNDS):
        code = "import wp_autotrace.common.redact, wp_autotrace.runtime.sink"
        out = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True,
                             env=env).stderr
        for line in out.splitlines():
            name = line.rsplit("|", 1)[-1].strip()
            if name in selfs:
                selfs[name].append(int(line.split(":", 1)[1].split("|")[0]))
    print("import self time, median us: " + ", ".join(f"{k} {statistics.median(v):.0f}" for k, v in selfs.items()))


if __name__ == "__main__":
    main()
