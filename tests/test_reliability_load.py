"""Fault injection, load and size: many writers at once, records near the size cap.

How every case runs, and docs/reliability.md: tests/reliability_plugin.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from wp_autotrace.runtime.reads import ERROR_CUT, ERROR_HEAD, ERROR_TAIL
from wp_autotrace.runtime.sink import MAX_RECORD_BYTES

from .conftest import (
    SYNTH,
    SYNTH_TARGETS,
    check_lines,
    clean_env,
    events,
    run_python,
    seq_complete,
    traced_env,
    wait_until,
)

# -- load ------------------------------------------------------------------

LOAD_WRITER = textwrap.dedent('''
    import os, sys, threading, time
    from wp_autotrace.runtime.sink import Sink
    log, go, n, nthreads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    sink = Sink(log, "h", "child")
    open(f"{go}.ready.{os.getpid()}", "w").close()  # the test starts them all at once when each is here
    deadline = time.monotonic() + 60
    while not os.path.exists(go) and time.monotonic() < deadline:
        time.sleep(0.005)
    def work(t):
        for i in range(t, n, nthreads):
            # every 500th record is big (~20 KB), so long writes overlap short ones
            sink.emit("call", target="m:f", call_id=i, thread=str(t), big="b" * (20000 if i % 500 == 0 else 8))
    threads = [threading.Thread(target=work, args=(t,)) for t in range(nthreads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    sys.exit(1 if sink.dropped else 0)
''')


def spawn_all(argvs: list[list[str]], env: dict[str, str], timeout: float) -> list[int]:
    """Start every command at once in its own session; return exit codes (-9: killed at timeout)."""
    procs = [subprocess.Popen([sys.executable, *argv], env=env, stdin=subprocess.DEVNULL,
                              start_new_session=True) for argv in argvs]
    deadline = time.monotonic() + timeout
    codes: list[int] = []
    try:
        for p in procs:
            try:
                codes.append(p.wait(max(0.1, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                codes.append(-9)
    finally:
        for p in procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            p.wait()
    return codes


@pytest.mark.slow
def test_load_64_processes_640k_records(tmp_path: Path) -> None:
    """64 processes x 4 threads append 10,000 records each: 640,000 whole lines, every seq present."""
    nproc, per_proc = 64, 10_000
    log, go = tmp_path / "load.jsonl", tmp_path / "go"
    script = tmp_path / "writer.py"
    script.write_text(LOAD_WRITER)
    env = clean_env()
    argvs = [[str(script), str(log), str(go), str(per_proc), "4"] for _ in range(nproc)]
    with ThreadPoolExecutor(1) as pool:
        codes = pool.submit(spawn_all, argvs, env, 150)
        # every writer waits on the go file, so they all write at once
        wait_until(lambda: len(list(tmp_path.glob("go.ready.*"))) == nproc, 120, interval=0.2,
                   what=f"{nproc} writers waiting on the go file")
        go.touch()
        assert codes.result() == [0] * nproc
    seqs: dict[int, bytearray] = {}
    ids: dict[int, bytearray] = {}
    total = 0
    with open(log, "rb") as f:
        for line in f:
            assert line.endswith(b"\n") and len(line) <= MAX_RECORD_BYTES
            if line == b"\n":  # the blank line that frames each record
                continue
            r = json.loads(line)  # a torn or interleaved line fails here
            total += 1
            pid = r["pid"]
            if pid not in seqs:
                seqs[pid], ids[pid] = bytearray(per_proc), bytearray(per_proc)
            seqs[pid][r["seq"]] += 1
            ids[pid][r["call_id"]] += 1
            assert r["thread"] == str(r["call_id"] % 4)
            assert len(r["big"]) == (20000 if r["call_id"] % 500 == 0 else 8)
    assert total == nproc * per_proc
    assert len(seqs) == nproc
    for pid in seqs:
        assert seqs[pid] == bytearray([1]) * per_proc, pid
        assert ids[pid] == bytearray([1]) * per_proc, pid


NEAR_CAP = textwrap.dedent('''
    import sys, threading
    import synthmod
    print(synthmod.rec(300))
    t = threading.Thread(target=synthmod.work, args=(1,), name="n" * 100_000)
    t.start(); t.join()
    try:
        synthmod.fail("m" * 1_000_000)
    except ValueError as exc:
        print("caught", len(str(exc)))
''')


def test_records_near_the_size_cap(tmp_path: Path, synth: Path) -> None:
    """Huge argv, env, thread name, error and 256-frame stacks of long paths: each line valid JSON within the cap."""
    deep = synth
    for part in ("d" * 200, "e" * 200):  # long file names make each stack frame big
        deep = deep / part
    deep.mkdir(parents=True)
    (deep / "synthmod.py").write_text(SYNTH)
    script = tmp_path / "near_cap.py"
    script.write_text(NEAR_CAP)
    args = [str(script)] + ["a" * 3000] * 40
    extra = {"PYTHONPATH": str(deep), "TORCH_WARM_POOL": "w" * 100_000}
    log = tmp_path / "cap.jsonl"
    plain = run_python(args, clean_env(**extra))
    traced = run_python(args, traced_env(log, WP_AUTOTRACE_TARGETS=SYNTH_TARGETS, WP_AUTOTRACE_STACK="256",
                                         WP_AUTOTRACE_SAMPLE_INTERVAL="0.01", **extra), timeout=120)
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    assert plain.stdout == "300\ncaught 1000000\n"
    recs = check_lines(log)
    seq_complete(recs)
    calls = events(recs, "call")
    assert len(calls) == 301 + 2
    deep_calls = [c for c in calls if len(c.get("stack", [])) > 30]
    assert deep_calls, "no stack was kept"
    for c in calls:
        if c["target"] == "synthmod:rec":
            assert c["stack"][-1] == c["caller"], "the innermost frames must survive shrinking"
    names = [c["thread"] for c in calls if c["thread"].startswith("nnn")]
    assert names and all(len(n) < 3000 and n.endswith("[truncated]") for n in names)
    errors = [r["error"] for r in events(recs, "return") if r.get("error")]
    # a million-character error keeps its head and its tail (runtime/reads.py), never the whole
    assert len(errors) == 1 and len(errors[0]) <= ERROR_HEAD + len(ERROR_CUT) + ERROR_TAIL, len(errors[0])
    assert ERROR_CUT in errors[0]
    (start,) = events(recs, "process_start")
    assert "truncated" in start or all(len(a) <= 2100 for a in start.get("argv", []))


def test_huge_argv_keeps_process_identity(tmp_path: Path) -> None:
    """A process_start over the cap keeps run, root_pid, forked and a truncated argv."""
    log = tmp_path / "argv.jsonl"
    res = run_python(["-c", "pass", *(["a" * 3000] * 40)], traced_env(log, WP_AUTOTRACE_SAMPLE_INTERVAL="0"))
    assert res.returncode == 0
    (start,) = events(check_lines(log), "process_start")
    for key in ("run", "root_pid", "forked", "argv"):
        assert key in start, key
    assert start["argv"][1:3] == ["-c", "pass"]
