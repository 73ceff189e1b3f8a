"""Costs of issue 12's trace-time facts: caller attribution, rank read, error capture set-up.

Usage: python bench/trace_facts.py [--torch]   (about 10 s; medians of repeated runs)

- dists.attribute: first call for a file (cold caches: folder listing and one
  metadata read), later calls for the same file (dict lookup), and a caller
  that is not attributed, against the bare frame dict it starts from.
- env.rank_env / process_start: the rank read added to every process's start.
- target_patches.install_error_capture in a fresh interpreter (a pool role loads logging and
  threading early; the process would load them with torch anyway).
With --torch, torch is imported first (as in a real traced process: importlib.metadata is then loaded).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "examples" / "standin_backend"
ROUNDS = 7
CHILD_TIMEOUT_S = 120  # a fresh interpreter importing torch on a loaded machine


def _median_us(samples: list[float]) -> str:
    return f"{statistics.median(samples) * 1e6:9.1f} us"


STANDIN_FILE = str(STANDIN / "wp_standin_backend" / "_inductor" / "__init__.py")


def child_first_call(with_torch: bool, target: str = STANDIN_FILE) -> float:
    """One cold first attribution, in a fresh interpreter."""
    code = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(STANDIN)!r})\n"
        + ("import torch\n" if with_torch else "")
        + "from wp_autotrace.runtime import dists\n"
        f"f = {{'file': {target!r}, 'line': 3, 'func': 'm'}}\n"
        "t = time.perf_counter(); r = dists.attribute(f); t = time.perf_counter() - t\n"
        f"assert r.get('dist') == ('wp-standin-backend' if {target == STANDIN_FILE} else None), r\n"
        "print(t)\n"
    )
    # No auto-load: the stand-in backend would start an (untraced) sidecar chain.
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=CHILD_TIMEOUT_S)
    return float(out.stdout.split()[-1])


def child_capture_setup() -> float:
    code = ("import time; t = time.perf_counter()\nfrom wp_autotrace.runtime import catch, target_patches\n"
            "target_patches.install_error_capture(catch.LOGGERS, catch._on_log, catch._record)\n"
            "print(time.perf_counter() - t)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("WP_AUTOTRACE")}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         timeout=CHILD_TIMEOUT_S)
    return float(out.stdout.split()[-1])


def per_call(fn, arg, n: int = 20000) -> float:  # type: ignore[no-untyped-def]
    best = []
    for _ in range(ROUNDS):
        t = time.perf_counter()
        for _ in range(n):
            fn(arg)
        best.append((time.perf_counter() - t) / n)
    return statistics.median(best)


def main() -> None:
    with_torch = "--torch" in sys.argv
    sys.path.insert(0, str(STANDIN))
    from wp_autotrace.common import env
    from wp_autotrace.runtime import dists

    first = [child_first_call(with_torch) for _ in range(ROUNDS)]
    print(f"dists.attribute first call (cold, fresh process{', torch loaded' if with_torch else ''}): "
          f"{_median_us(first)}")
    lost = [child_first_call(with_torch, "/tmp/no-such-dir/script.py") for _ in range(ROUNDS)]
    print(f"  same, for a file no distribution holds (scans for editable installs): {_median_us(lost)}")
    frame = {"file": str(STANDIN / "wp_standin_backend" / "_inductor" / "__init__.py"), "line": 3, "func": "m"}
    dists.attribute(frame)
    later = per_call(dists.attribute, frame)
    other = {"file": "/nowhere/x.py", "line": 1, "func": "f"}
    dists.attribute(other)
    unknown = per_call(dists.attribute, other)
    baseline = per_call(dict, frame)
    print(f"dists.attribute later call (attributed):   {later * 1e6:9.2f} us")
    print(f"dists.attribute later call (unattributed): {unknown * 1e6:9.2f} us")
    print(f"  for scale, copying the frame dict:      {baseline * 1e6:9.2f} us")
    os.environ.pop("RANK", None)
    none = per_call(lambda _: env.rank_env(), None)
    os.environ.update(RANK="1", LOCAL_RANK="1", WORLD_SIZE="2", TORCHELASTIC_RUN_ID="x")
    some = per_call(lambda _: env.rank_env(), None)
    watched = per_call(lambda _: env.pool_env(), None)
    print(f"rank_env() no launcher: {none * 1e6:6.2f} us; under torchrun: {some * 1e6:6.2f} us "
          f"(pool_env(), already in process_start: {watched * 1e6:6.2f} us)")
    setup = [child_capture_setup() for _ in range(ROUNDS)]
    print("target_patches.install_error_capture in a fresh interpreter (imports logging, threading): "
          f"{_median_us(setup)}")


if __name__ == "__main__":
    main()
