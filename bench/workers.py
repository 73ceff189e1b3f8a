"""Measurements that run inside a bench venv (with the installed wp_autotrace).

Invoked by bench/run.py as ``VENV/bin/python bench/workers.py KIND [ARGS]``;
prints one JSON object on its last stdout line. Nothing here asserts timing.

Kinds:
  pth    REPEATS                what site pays for wp_autotrace.pth with the tracer off
  micro  REPEATS CALLS          traced / counted / untraced call cost (in-process)
  sink   WRITERS RECORDS        writer processes appending through Sink, then a tear/loss check
  sampler DURATION_S REPEATS    Watcher.tree.sample (children files) vs psutil children(recursive=True),
                                and the watcher process's CPU at the default interval
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from wp_autotrace.common.targets import COUNT, Target
from wp_autotrace.runtime.bootstrap import DEFAULT_STACK
from wp_autotrace.runtime.finder import TargetFinder
from wp_autotrace.runtime.held import hold
from wp_autotrace.runtime.recorder import Probes
from wp_autotrace.runtime.sink import Sink

HOST = os.uname().nodename

SYNTH = '''
class Pool:
    @classmethod
    def traced(cls, x):
        return x

    @classmethod
    def counted(cls, x):
        return x

    @classmethod
    def plain(cls, x):
        return x
'''

# Compiled under a file name inside the stdlib folder, which the probe skips
# like torch's own frames: the caller search walks DEPTH frames, as it does
# for a warm_pool reached through torch.compile's deep stack.
DESCEND = '''
def descend(n, fn, loops):
    if n:
        return descend(n - 1, fn, loops)
    t0 = perf_counter()
    for _ in loops:
        fn(1)
    return perf_counter() - t0
'''
DEPTH = 60


def _median_us(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1e6, 3)


def micro(repeats: int, calls: int) -> dict[str, Any]:
    """Per-call cost of a TRACE target (call+return records, stack kept) and a
    COUNT target, against the same untraced classmethod, at two stack depths."""
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-micro-"))
    (tmp / "benchsynth").mkdir()
    (tmp / "benchsynth" / "__init__.py").write_text("")
    (tmp / "benchsynth" / "pool.py").write_text(SYNTH)
    sys.path.insert(0, str(tmp))
    log = tmp / "micro.jsonl"
    sink = Sink(str(log), HOST, "main")
    hold(sink)  # as a traced process's first wrapper holds it (bootstrap.Runtime.probes): placed high, marked
    probes = Probes(sink, DEFAULT_STACK, False, lambda info: None)
    errors: list[BaseException] = []
    targets = (Target("benchsynth.pool", "Pool.traced"), Target("benchsynth.pool", "Pool.counted", mode=COUNT))
    finder = TargetFinder(targets, probes.make_wrapper, probes.notify, lambda where, exc: errors.append(exc))
    finder.install()
    try:
        from benchsynth.pool import Pool  # type: ignore[import-not-found]
    finally:
        finder.uninstall()
    fake = os.path.join(os.path.dirname(os.__file__), "_wp_bench_library_frames.py")
    ns: dict[str, Any] = {"perf_counter": time.perf_counter}
    exec(compile(DESCEND, fake, "exec"), ns)
    descend: Callable[[int, Any, range], float] = ns["descend"]

    def shallow(n: int, fn: Any, loops: range) -> float:
        t0 = time.perf_counter()
        for _ in loops:
            fn(1)
        return time.perf_counter() - t0

    floor_fd = os.open(str(tmp / "floor.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    frame = {"file": "/site-packages/plugin/_inductor/__init__.py", "line": 5, "func": "<module>"}

    def floor(n: int, fn: Any, loops: range) -> float:
        """The work no tracer of this design avoids: two ~10-field records, json.dumps, os.write."""
        t0 = time.perf_counter()
        for i in loops:
            for event in ("call", "return"):
                rec = {"v": 1, "event": event, "ts": time.time(), "pid": 1, "ppid": 1, "host": HOST,
                       "role": "main", "seq": i, "call_id": i, "target": "m:Pool.traced"}
                if event == "call":
                    rec["stack"] = [frame] * DEFAULT_STACK
                os.write(floor_fd, json.dumps(rec).encode() + b"\n")
        return time.perf_counter() - t0

    variants = {"plain": Pool.plain, "traced": Pool.traced, "counted": Pool.counted, "floor": None}
    results: dict[str, dict[str, list[float]]] = {"shallow": {}, "deep": {}}
    for r in range(repeats):
        names = list(variants)
        names = names[r % len(names):] + names[:r % len(names)]  # rotate: no variant always runs first
        for name in names:
            n = calls if name in ("traced", "floor") else calls * 20
            for depth_name, run in (("shallow", shallow), ("deep", descend)):
                depth = DEPTH if depth_name == "deep" else 0
                if name == "floor":
                    run = floor
                results[depth_name].setdefault(name, []).append(run(depth, variants[name], range(n)) / n)
    parts = _call_parts(probes, sink, log, floor_fd, repeats, calls)
    size = log.stat().st_size
    records = sum(1 for line in log.open("rb") if line != b"\n")
    shutil.rmtree(tmp)
    out: dict[str, Any] = {"errors": [repr(e) for e in errors], "record_bytes": round(size / max(records, 1)),
                           "depth": DEPTH, "stack_limit": DEFAULT_STACK, "parts_us": parts}
    for depth_name, per in results.items():
        med = {name: _median_us(v) for name, v in per.items()}
        # traced minus plain of the same repeat (they alternate): its spread is the figure's p25-p75
        over = [(t - p) * 1e6 for t, p in zip(per["traced"], per["plain"])]
        q = statistics.quantiles(over, n=4) if len(over) > 1 else [over[0]] * 3
        out[depth_name] = {**{f"{k}_us": v for k, v in med.items()},
                           "traced_over_us": round(med["traced"] - med["plain"], 3),
                           "traced_over_p25_p75_us": [round(q[0], 3), round(q[2], 3)],
                           "counted_over_us": round(med["counted"] - med["plain"], 3),
                           "floor_us": med["floor"]}
    return out


def _call_parts(probes: Probes, sink: Sink, log: Path, fd: int, repeats: int, calls: int) -> dict[str, float]:
    """Where a traced call's microseconds go, each part timed alone in the same process:
    median µs per traced call (a call record and a return record) of each step."""
    from wp_autotrace.runtime import unseen
    from wp_autotrace.runtime.held import mark
    from wp_autotrace.runtime.sink import _identity

    lines = [line for line in log.read_bytes().split(b"\n") if line][-2:]  # the last call + return record
    call_rec, ret_rec = (b"\n" + line + b"\n" for line in lines)
    stack_json = probes.stacks.stack()[2]

    def write2() -> None:
        os.write(fd, call_rec)
        os.write(fd, ret_rec)

    def limit4() -> None:
        unseen.adjust_limit(64)
        unseen.adjust_limit(-63)
        unseen.adjust_limit(63)
        unseen.adjust_limit(-64)

    held_mark = sink._mark  # the held descriptor's check before each record: its mark (held.mark), else fstat

    def check2() -> None:
        if held_mark is not None:
            held_mark[0](sink.fd, held_mark[1], held_mark[2])
            held_mark[0](sink.fd, held_mark[1], held_mark[2])
        else:
            _identity(sink.fd)
            _identity(sink.fd)

    devnull = os.open(os.devnull, os.O_WRONLY)
    real = (sink.fd, sink.identity, held_mark)
    null = (devnull, _identity(devnull), mark(devnull) if held_mark is not None else None)

    def assemble2() -> None:  # both records built and encoded, written to /dev/null
        sink.emit_encoded("call", '"target":"m:Pool.traced","tag":"user","call_id":1,"thread":"MainThread",'
                          + stack_json, dict)
        sink.emit_encoded("return", '"call_id":1,"duration_s":3e-06', dict)

    steps: dict[str, Callable[[], Any]] = {
        "os.write of the two records": write2, "stack walk (cache hit)": probes.stacks.stack,
        f"log identity check x2 ({'mark' if held_mark is not None else 'fstat'})": check2,
        "recursion limit x4": limit4, "record assembly x2 (to /dev/null, with its check)": assemble2}
    samples: dict[str, list[float]] = {k: [] for k in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            if name.startswith("record assembly"):
                sink.fd, sink.identity, sink._mark = null
            t0 = time.perf_counter()
            for _ in range(calls):
                step()
            samples[name].append((time.perf_counter() - t0) / calls)
            sink.fd, sink.identity, sink._mark = real
    os.close(devnull)
    return {k: _median_us(v) for k, v in samples.items()}


def pth(repeats: int) -> dict[str, Any]:
    """What site does for our .pth at every start (WP_AUTOTRACE unset): µs per addpackage call."""
    import site

    sitedir = next(d for d in site.getsitepackages() if os.path.exists(os.path.join(d, "wp_autotrace.pth")))
    out: dict[str, Any] = {}
    for name in ("wp_autotrace.pth", "distutils-precedence.pth"):
        if not os.path.exists(os.path.join(sitedir, name)):
            continue
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            site.addpackage(sitedir, name, set())
            times.append(time.perf_counter() - t0)
        out[name] = _median_us(times)
    return out


def _writer(path: str, gate: int, records: int) -> None:
    """One writer process: wait for the gate, then append `records` records."""
    os.read(gate, 1)  # returns b"" when the parent closes the write end: everyone starts together
    sink = Sink(path, HOST, "child")
    frame = {"file": "/opt/venv/lib/python3.11/site-packages/torch/_inductor/async_compile.py",
             "line": 348, "func": "warm_pool"}
    big_stack = [dict(frame, line=i) for i in range(64)]  # ~7 KB: some records are big
    for i in range(records):
        stack = big_stack if i % 100 == 0 else [frame, frame]
        sink.emit("call", target="torch._inductor.async_compile:AsyncCompile.warm_pool", call_id=i,
                  thread="MainThread", stack=stack, caller=frame)
    os._exit(0 if sink.dropped == 0 else 1)


def sink(writers: int, records: int) -> dict[str, Any]:
    """`writers` forked processes append `records` records each to one log;
    then every line must parse and every (pid, seq) must be there exactly once."""
    import json as _json

    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-sink-"))
    log = tmp / "sink.jsonl"
    read_end, write_end = os.pipe()
    pids = []
    for _ in range(writers):
        pid = os.fork()
        if pid == 0:
            os.close(write_end)
            try:
                _writer(str(log), read_end, records)
            finally:
                os._exit(2)
        pids.append(pid)
    os.close(read_end)
    time.sleep(0.5)  # let every writer reach the gate
    t0 = time.perf_counter()
    os.close(write_end)
    bad_exit = 0
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        bad_exit += status != 0
    elapsed = time.perf_counter() - t0
    torn = 0
    seen: dict[int, set[int]] = {}
    size = log.stat().st_size
    with log.open("rb") as f:
        for line in f:
            if line == b"\n":  # the blank line framing each record (sink.RECORD_START)
                continue
            try:
                rec = _json.loads(line)
                seen.setdefault(rec["pid"], set()).add(rec["seq"])
            except (ValueError, KeyError, TypeError):
                torn += 1
    found = sum(len(s) for s in seen.values())
    log.unlink()
    tmp.rmdir()
    total = writers * records
    return {"writers": writers, "records_each": records, "elapsed_s": round(elapsed, 3),
            "records_per_s": round(total / elapsed), "torn": torn, "lost": total - found,
            "bad_exit": bad_exit, "mb": round(size / 1e6, 1)}


def _host_procs() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def sampler(duration: float, repeats: int) -> dict[str, Any]:
    """~40 descendants under this process; time one Watcher.tree.sample (children files)
    against psutil's children(recursive=True), then run the real watcher process
    (this process as its root) for `duration` seconds and read its CPU time from
    /proc/PID/stat."""
    import psutil

    from wp_autotrace.common.procfs import ProcReader
    from wp_autotrace.runtime.spawn import spawn
    from wp_autotrace.watcher.main import Watcher

    # 8 shells, each with 4 sleeping children: 40 descendants, 2 deep.
    shell = "sleep 600 & sleep 600 & sleep 600 & sleep 600 & wait"
    kids = [subprocess.Popen(["sh", "-c", shell], start_new_session=True) for _ in range(8)]
    tmp = Path(tempfile.mkdtemp(prefix="wp-bench-sampler-"))
    try:
        time.sleep(0.5)
        me = psutil.Process()
        descendants = len(me.children(recursive=True))
        watcher = Watcher(Sink(str(tmp / "s.jsonl"), HOST, "watcher"), "bench", os.getpid(), 0.0, 0.1, 0,
                          reader=ProcReader())
        watcher.tree.exclude = set()  # this process is the root here, not the watcher
        watcher.tick()  # the first sample reads every stat and command line; later ones do not
        proc_s: list[float] = []
        psutil_s: list[float] = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            watcher.tree.sample(time.time())
            t1 = time.perf_counter()
            me.children(recursive=True)
            t2 = time.perf_counter()
            proc_s.append(t1 - t0)
            psutil_s.append(t2 - t1)
        host = _host_procs()
        log = tmp / "t.jsonl"
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
        assert spawn(fd, str(log), "bench", 0.0, 0.1, 0.0)
        wpid = 0
        while not wpid:
            time.sleep(0.1)
            wpid = next((json.loads(line)["pid"] for line in log.read_bytes().splitlines()
                         if b'"watcher_start"' in line), 0)
        time.sleep(2.5)  # past the first samples (every stat and command line read once)
        cpu0, t0 = _proc_cpu_s(wpid), time.perf_counter()
        time.sleep(duration)
        cpu1, t1 = _proc_cpu_s(wpid), time.perf_counter()
        os.close(fd)
        log.unlink()  # the watcher leaves when its log is gone
        cpu_pct = (cpu1 - cpu0) / (t1 - t0) * 100
        return {"host_procs": host, "descendants": descendants,
                "proc_walk_ms": round(statistics.median(proc_s) * 1e3, 3),
                "psutil_ms": round(statistics.median(psutil_s) * 1e3, 3),
                "thread_cpu_pct": round(cpu_pct, 3), "thread_samples": round((t1 - t0) / 0.1),
                "thread_s": round(t1 - t0, 1)}
    finally:
        for k in kids:
            try:
                os.killpg(k.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            k.wait()
        for p in tmp.iterdir():
            p.unlink()
        tmp.rmdir()


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of a process, from /proc/PID/stat fields (14) and (15), in seconds."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    kind, *args = sys.argv[1:]
    if kind == "micro":
        result = micro(int(args[0]), int(args[1]))
    elif kind == "pth":
        result = pth(int(args[0]))
    elif kind == "sink":
        result = sink(int(args[0]), int(args[1]))
    elif kind == "sampler":
        result = sampler(float(args[0]), int(args[1]))
    else:
        raise SystemExit(f"unknown kind {kind!r}")
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
