"""The process-tree sampler: orphans stay visible, leftovers are found (no torch)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from wp_autotrace.sampler import ProcReader, PsutilReader, Sampler
from wp_autotrace.sink import Sink

from .conftest import clean_env, events, read_log, run_python

ORPHANER = textwrap.dedent('''
    import subprocess, sys, time
    # A child that starts a grandchild (not Python) and exits soon after: the
    # grandchild is re-parented, as sidecar chains are. (A process born and
    # orphaned within one sample interval is seen only if it is traced.)
    subprocess.run([sys.executable, "-c",
                    "import subprocess as s, time; s.Popen(['sleep', '30'], stdout=s.DEVNULL, stderr=s.DEVNULL);"
                    " time.sleep(0.5)"], check=True)
    time.sleep(1.0)
    print("main done")
''')


def test_orphan_is_tracked_and_left_over(tmp_path: Path, log: Path) -> None:
    """A re-parented grandchild stays in the sampled tree and is reported as left over."""
    script = tmp_path / "orphaner.py"
    script.write_text(ORPHANER)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="0.02")
    res = run_python([str(script)], env, timeout=60)
    assert res.returncode == 0 and res.stdout == "main done\n", res.stderr
    recs = read_log(log)
    root = events(recs, "process_start")[0]["pid"]
    seen = {p["pid"]: p for tree in events(recs, "tree") for p in tree["procs"]}
    sleepers = [p for p in seen.values() if p["name"] == "sleep"]
    assert len(sleepers) == 1
    (leftover,) = events(recs, "leftover")
    assert leftover["pids"] == [sleepers[0]["pid"]]
    final = [t for t in events(recs, "tree") if t["final"]][0]
    still = {p["pid"]: p for p in final["procs"]}
    assert sleepers[0]["pid"] in still and still[sleepers[0]["pid"]]["ppid"] != root  # re-parented, still seen
    from .conftest import report_json

    rep = report_json(log)
    assert rep["leftover_pids"] == [sleepers[0]["pid"]]
    assert sleepers[0]["pid"] in rep["reparented_pids"]


@pytest.mark.parametrize("reader_cls", [ProcReader, PsutilReader])
def test_readers_agree_with_psutil(reader_cls: type) -> None:
    """The /proc reader and the psutil reader agree with psutil on ppid, name, start time."""
    if reader_cls is ProcReader and not ProcReader.available():
        pytest.skip("no /proc children files here")
    child = subprocess.Popen(["sleep", "10"])
    try:
        reader = reader_cls()
        info = reader.stat(child.pid)
        ps = psutil.Process(child.pid)
        assert info is not None
        assert info["ppid"] == os.getpid() and info["name"] == "sleep"
        assert abs(info["create_time"] - ps.create_time()) < 1.5
        assert child.pid in reader.children(os.getpid())
        # /proc may show an empty command line for a moment right after exec.
        deadline = time.monotonic() + 5
        while not reader.cmdline(child.pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert reader.cmdline(child.pid) == "sleep 10"
        assert reader.stat(2**22 + 12345) is None
    finally:
        child.kill()
        child.wait()
    assert reader.stat(child.pid) is None  # reaped: gone


def test_sampler_writes_on_change_and_stops_promptly(tmp_path: Path) -> None:
    """The sampler writes a tree record on each change and stops within a second."""
    log = tmp_path / "s.jsonl"
    sink = Sink(str(log), "h", "main")
    sampler = Sampler(sink, 0.01)
    sampler.start()
    time.sleep(0.1)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    time.sleep(0.3)
    child.wait()
    time.sleep(0.1)
    t = time.monotonic()
    sampler.stop_and_report_leftovers()
    assert time.monotonic() - t < 1.0
    trees = events(read_log(log), "tree")
    counts = [t["count"] for t in trees if t["changed"]]
    assert counts[:3] == [1, 2, 1]
    assert events(read_log(log), "leftover")[0]["pids"] == []
