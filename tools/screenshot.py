"""README's picture of `report --html`: a real run traced, its page rendered, a screenshot taken.

Usage: python tools/screenshot.py [--out docs/report-page.png] [--keep DIR]

Needs torch==2.13.0 in this Python and Debian's `chromium` (apt-get install chromium). The run: torch 2.13
on CPU makes its compile pool as a GPU host's first Triton kernel does (AsyncCompile.wait_pool_ready(), as
tests/test_scenarios.py), 2 workers kept (no quiesce), then 10 s of other work while the pool idles until
torch's atexit shuts it down. The page of that log, 1280 px wide, is the PNG.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPT = textwrap.dedent('''
    import time
    import torch
    import torch._inductor.config as cfg
    from torch._inductor.async_compile import AsyncCompile

    cfg.quiesce_async_compile_pool = False  # the workers stay until shutdown (torch before 2.10 did so)
    AsyncCompile.wait_pool_ready()  # what a GPU host's first Triton kernel does
    x = torch.randn(256, 256)
    start = time.monotonic()
    while time.monotonic() - start < 10:  # training goes on; the pool has nothing more to do
        (x @ x).sum()
        time.sleep(0.05)
''')
WINDOW = "1280,1250"  # the Answer, the findings, the legend, the timeline and the memory chart
RUN_TIMEOUT_S = 300


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "docs" / "report-page.png"))
    parser.add_argument("--keep", metavar="DIR", help="keep the log and the page in DIR (default: a temporary dir)")
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("screenshot: no chromium (apt-get install chromium)", file=sys.stderr)
        return 1
    work = Path(args.keep or tempfile.mkdtemp(prefix="wp-shot-"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "train.py").write_text(SCRIPT)
    log, page = work / "train.jsonl", work / "run.html"
    for stale in (log, page):
        stale.unlink(missing_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("WP_AUTOTRACE", "TORCHINDUCTOR_"))}
    env.update(TORCHINDUCTOR_COMPILE_THREADS="2", TORCHINDUCTOR_CACHE_DIR=str(work / "cache"))
    wp = [sys.executable, "-m", "wp_autotrace"]
    # `run` waits for the watcher's verdict: the log is complete when it returns.
    subprocess.run([*wp, "run", "--log", str(log), "--", sys.executable, "train.py"], cwd=work, env=env,
                   check=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL)
    subprocess.run([*wp, "report", "--html", "-o", str(page), str(log)], check=True, timeout=RUN_TIMEOUT_S)
    out = Path(args.out).resolve()
    subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--user-data-dir={work / 'profile'}", f"--window-size={WINDOW}", f"--screenshot={out}",
                    page.as_uri()], check=True, timeout=RUN_TIMEOUT_S, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    print(f"wrote {out} from {log}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
