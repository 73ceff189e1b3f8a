"""watch --once on a log over 64 MiB (one refresh's read) decides from the whole log, read streamed: the
leftover whose process_start and the watcher's verdict lie past the first 64 MiB are shown, never
"0 process(es) alive" or "verdict pending" from a prefix (issue 28 item 5)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from wp_autotrace.cli import watch as W

from .conftest import clean_env

PAST_ONE_READ = W.READ_PER_REFRESH + 4 * 2**20  # padding records: the decisive ones come after


def _rec(event: str, pid: int, **fields: Any) -> bytes:
    base = {"v": 1, "event": event, "ts": time.time(), "pid": pid, "ppid": 1, "host": os.uname().nodename,
            "role": "main", "seq": 0}
    return json.dumps({**base, **fields}).encode() + b"\n"


def test_once_reads_a_log_over_64_mib_to_its_end(tmp_path: Path) -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    leftover = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=clean_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    me = os.getpid()  # the watcher: alive, so only its leftover record can say the verdict is written
    run = {"run": "gg", "root_pid": dead.pid}
    try:
        log = tmp_path / "big.jsonl"
        filler = _rec("import", dead.pid, module="m" * 4000)
        with open(log, "wb") as f:
            f.write(_rec("process_start", dead.pid, forked=False, **run))
            f.write(_rec("watcher_start", me, role="watcher", interval=0.1, linger=60.0, **run))
            f.write(filler * (PAST_ONE_READ // len(filler) + 1))
            f.write(_rec("process_start", leftover.pid, ppid=dead.pid, forked=False, role="compile-sidecar", **run))
            f.write(_rec("process_exit", dead.pid, how="exit"))
            f.write(_rec("leftover", me, role="watcher", how="root-exit", count=1, pids=[leftover.pid],
                         procs=[{"pid": leftover.pid, "ppid": 1}], **run))
        assert log.stat().st_size > W.READ_PER_REFRESH
        out = io.StringIO()
        assert W.watch(str(log), once=True, interval=1.0, out=out) == 0
        text = out.getvalue()
        assert "(reading the log...)" not in text, text[:500]
        assert "the watcher's verdict: 1 left behind" in text and "1 process(es) alive" in text, text[:500]
        assert str(leftover.pid) in text
    finally:
        leftover.kill()
        leftover.wait(10)
