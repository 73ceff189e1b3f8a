"""When the watcher reads a pool process's memory: once more as it ends, so a process that grew after the last
periodic reading and then ended is not under-read (no torch: a stand-in autotune subprocess, its role from its
command line as torch's own). Figures against the program's own smaps_rollup reading, never the tool's log."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from wp_autotrace.analysis.derive.counts import counts_at
from wp_autotrace.analysis.derive.mempeak import peak_at_once
from wp_autotrace.analysis.derive.memseries import at_once
from wp_autotrace.analysis.fold.fold import build
from wp_autotrace.analysis.fold.model import Process
from wp_autotrace.watcher import memory
from wp_autotrace.watcher.tree import make_entry

from .conftest import clean_env, run_python, wait_for_watcher

MIB = 1 << 20

# The stand-in: small at first; on "grow" it takes 200 MiB (every page written: resident); on "exit" it returns.
# Its process_exit record is written by the tracer's atexit; then, in the interpreter's teardown (a global's
# __del__, after every atexit handler), it holds on until the watcher has read it after that record (bounded):
# the window a torch process's own teardown gives. Its 200 MiB are still held then (cleared after `hold`).
STANDIN = textwrap.dedent('''
    import json, os, sys, time

    def wait_for_a_reading_after_my_exit(log=os.environ["WP_AUTOTRACE_LOG"], pid=os.getpid(), loads=json.loads,
                                         monotonic=time.monotonic, sleep=time.sleep, open=open):
        deadline = monotonic() + 120  # a niced watcher on a loaded box: bounded, never a guessed time
        while monotonic() < deadline:
            with open(log, "rb") as f:
                lines = f.read().split(b"\\n")
            exited = False
            for line in lines:
                try:
                    rec = loads(line)
                except ValueError:
                    continue
                if rec.get("event") == "process_exit" and rec.get("pid") == pid:
                    exited = True
                elif exited and rec.get("event") == "memory" and any(e["pid"] == pid for e in rec["procs"]):
                    return
            sleep(0.02)

    class Hold:
        def __del__(self, wait=wait_for_a_reading_after_my_exit):
            wait()

    hold = Hold()
    print("ready", flush=True)
    sys.stdin.readline()
    big = bytearray(200 << 20)
    big[::4096] = b"x" * len(big[::4096])
    print("grown", flush=True)
    sys.stdin.readline()
''')

MAIN = textwrap.dedent('''
    import json, subprocess, sys
    child = subprocess.Popen([sys.executable, sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline() == "ready\\n"
    child.stdin.write("grow\\n"); child.stdin.flush()
    assert child.stdout.readline() == "grown\\n"
    with open(f"/proc/{child.pid}/smaps_rollup") as f:  # the probe: its own reading, the moment it has grown
        pss = next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
    child.stdin.write("exit\\n"); child.stdin.flush()  # at once: no periodic reading is due in between
    child.wait()
    print(json.dumps({"child": child.pid, "pss": pss}))
''')


def test_a_pool_process_that_grew_and_ended_is_read_at_its_end(tmp_path: Path) -> None:
    """A stand-in autotune subprocess grows by 200 MiB and is told to end at once, between two of the
    watcher's periodic readings. Its last reading, taken as it wrote its process_exit, counts in its memory at
    once: the peak is within 10 % of the program's own smaps_rollup reading of it (before, every reading after
    the process's own process_exit was dropped, and its peak was its size before it grew, ~10x under)."""
    fake = tmp_path / "fake" / "_inductor" / "__autotune_main__.py"
    fake.parent.mkdir(parents=True)
    fake.write_text(STANDIN)
    script = tmp_path / "main.py"
    script.write_text(MAIN)
    log = tmp_path / "log.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_LINGER="0")
    res = run_python([str(script), str(fake)], env, timeout=300)
    assert res.returncode == 0, res.stderr
    probe = json.loads(res.stdout.splitlines()[-1])
    recs = wait_for_watcher(log, timeout=120)
    (child,) = [p for p in build(recs).processes if p.pid == probe["child"]]
    assert child.role == "autotune-worker" and child.exited
    peak = peak_at_once([child])[0]
    assert peak is not None and 0.9 * probe["pss"] <= peak <= 1.1 * probe["pss"], (peak / MIB, probe["pss"] / MIB)


def _proc(pid: int, start: float, mem: list[tuple[float, int]], parent: Process | None = None,
          end: float | None = None, gone: float | None = None) -> Process:
    p = Process("h", pid, pid)
    p.gone = gone
    p.start, p.mem = start, [(ts, pss * MIB, 0) for ts, pss in mem]
    if end is not None:
        p.end, p.exited = end, True
    if parent is not None:
        p.parent, p.forked = parent, True
        parent.children.append(p)
    return p


def test_a_reading_before_a_fork_or_an_exit_is_not_summed_with_readings_after_it() -> None:
    """Memory at once sums only readings no fork or end came between (D29: a pool 11.5 % over the probe under
    pytest-xdist). A sidecar read alone at 10 s (238 MiB) forks two workers at 10.5 s, read at 11 s (40 MiB
    each, their pages shared with it since) and the sidecar again at 12 s (160 MiB): at 11 s the sidecar's
    pre-fork figure is left out (2 of 3 read), never 238 + 80. Then the workers write process_exit at 20.1 s
    (the watcher sees them gone at 21.5 s) and the sidecar, read alone at 20.5 s, holds their once-shared pages
    (230 MiB): their 19 s readings are left out then, never summed with it. The counts told beside a figure
    (derive/counts.py) take the same readings."""
    side = _proc(200, 1.0, [(10.0, 238), (12.0, 160), (19.0, 160), (20.5, 230)])
    w1 = _proc(301, 10.5, [(11.0, 40), (12.0, 40), (19.0, 40)], side, end=20.1, gone=21.5)
    w2 = _proc(302, 10.5, [(11.0, 40), (12.0, 40), (19.0, 40)], side, end=20.1, gone=21.5)
    points = {pt.ts: pt for pt in at_once([side, w1, w2])}
    assert (points[11.0].pss, points[11.0].read, points[11.0].alive) == (80 * MIB, 2, 3)
    assert (points[20.5].pss, points[20.5].read, points[20.5].alive) == (230 * MIB, 1, 3)
    assert peak_at_once([side, w1, w2])[:3] == (240 * MIB, 3, 3)  # at 12 s, and again at 19 s: all read
    for t in (11.0, 12.0, 20.5):  # the counts told beside a figure take the readings the figure took
        c = counts_at([side, w1, w2], None, t)
        assert c is not None and (c["pool_pss_bytes"], c["read"]) == (points[t].pss, points[t].read), t


SPAWNED = ["/usr/bin/python3", "-c", "from multiprocessing.spawn import spawn_main; spawn_main(tracker_fd=5, "
           "pipe_handle=7)", "--multiprocessing-fork"]
SIDECAR = ["/usr/bin/python3", "/x/torch/_inductor/compile_worker/__main__.py", "--workers=2"]
FORKSERVER = ["/usr/bin/python3", "-c", "from multiprocessing.forkserver import main; main(8, 9, ['__main__'])"]


def _entry_of(argv: list[str], ppid: int, live: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The watcher's tree entry for a process with this command line and parent, among these live entries."""
    reader = SimpleNamespace(environ=lambda pid: b"", argv=lambda pid: argv)
    tree = SimpleNamespace(secrets=(), patterns=(), reader=reader, live=live)
    info = {"pid": 50, "ppid": ppid, "name": "python3", "create_time": 5.0, "rss": 1 << 20}
    return make_entry(tree, info, "child")  # type: ignore[arg-type]


def test_a_worker_a_sidecar_spawned_is_a_compile_worker_while_it_still_imports() -> None:
    """A sidecar's spawn (or forkserver) pool's worker re-imports torch for seconds before torch's initializer
    writes its role record: from its first look it is a compile worker (the memory sampler reads it, and the
    pool's figure counts it or says it is unread), by its command line and its parent. The same command line
    under the main process (a user's own multiprocessing) is not, nor the sidecar's resource tracker."""
    live: dict[int, dict[str, Any]] = {
        1: {"pid": 1, "ppid": 0, "role": "main", "cmd": "python3 train.py"},
        10: {"pid": 10, "ppid": 1, "role": "compile-sidecar", "cmd": " ".join(SIDECAR)},
        11: {"pid": 11, "ppid": 10, "role": "forkserver", "cmd": " ".join(FORKSERVER)}}
    assert _entry_of(SPAWNED, 10, live).get("role") == "compile-worker"
    assert _entry_of(FORKSERVER, 11, live).get("role") == "compile-worker"  # forked by the sidecar's forkserver
    assert _entry_of(SPAWNED, 1, live).get("role") is None
    tracker = ["/usr/bin/python3", "-c", "from multiprocessing.resource_tracker import main;main(5)"]
    assert _entry_of(tracker, 10, live).get("role") == "resource-tracker"
    assert _entry_of(FORKSERVER, 10, live).get("role") == "forkserver"  # the forkserver itself
    assert memory.MemorySampler().pool_pids({50: _entry_of(SPAWNED, 10, live) | {"pid": 50}}) == [50]


def _rollup(pss_kb: int) -> bytes:
    return f"0-1 ---p 00000000 00:00 0 [rollup]\nRss: {2 * pss_kb} kB\nPss: {pss_kb} kB\n".encode()


def test_a_pools_resource_tracker_and_forkserver_are_read_in_its_sweep(tmp_path: Path) -> None:
    """A spawn pool's sidecar starts multiprocessing's resource tracker beside its worker (torch's FX-subprocess
    pool): alive for the pool's life, one of its processes as ps lists them. It is read in the same sweep as the
    sidecar and worker (one record: a moment's sum of all three), and so is a sidecar's forkserver and the
    worker it forked; the main's own resource tracker (its parent no pool process) is not read. A crafted /proc
    stands in (each process's smaps_rollup)."""
    live: dict[int, dict[str, Any]] = {
        1: {"role": "main", "ppid": 0, "rss": 1 << 20},
        2: {"role": "resource-tracker", "ppid": 1},  # the main's own: no pool's
        10: {"role": "fx-compile-sidecar", "ppid": 1},
        11: {"role": "compile-worker", "ppid": 10},
        12: {"role": "resource-tracker", "ppid": 10},
        20: {"role": "compile-sidecar", "ppid": 1},
        21: {"role": "forkserver", "ppid": 20},
        22: {"role": "compile-worker", "ppid": 21}}
    for pid, entry in live.items():
        entry.update(pid=pid, create_time=5.0)
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "smaps_rollup").write_bytes(_rollup(1000 + pid))
    s = memory.MemorySampler(proc=str(tmp_path), burst=1.0)
    assert s.pools(live) == {10: [10, 11, 12], 20: [20, 21, 22]}
    got = s.tick(0.0, live)
    assert got is not None
    read = {e["pid"]: e["pss"] for e in got["procs"]}
    assert set(read) == {1, 10, 11, 12, 20, 21, 22}, read  # the pools whole, their creator; not pid 2
    assert read[12] == (1000 + 12) * 1024 and read[21] == (1000 + 21) * 1024
    # its process_exit has its pool swept at once, like any pool process's
    again = s.tick(0.01, live, ending={12: 6.0})
    assert again is not None and {10, 11, 12} <= {e["pid"] for e in again["procs"]}
