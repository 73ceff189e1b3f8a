"""Figures the records hold only in part are told as floors, and counts at once come from every record.

Crafted logs (tests/logs.py): a pool whose forked workers lived between two of the watcher's looks (no memory
sweep read them), two ranks' pools alive together between two passes, and a failed compile under `ulimit -u`
whose workers and linkers no sweep read. Each is checked in the text, --json and the page (one model read by
every command), beside a control where the watcher read everything (no "at least").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from wp_autotrace.analysis.present.html import render_html
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.runtime.reads import error_text

from .logs import SP, LogWriter, call, report, start, watcher

MIB = 2**20


def _outputs(w: LogWriter, tmp_path: Path) -> tuple[dict[str, Any], str, str]:
    rep = report(w, tmp_path)
    text = render_text(rep, {}, width=None)
    return rep, text, render_html(rep, text)


def _flat(text: str) -> str:
    return " ".join(text.split())


def _fork(w: LogWriter, t: float, pid: int, ppid: int, role: str) -> None:
    """pid forked by ppid at t (its process_start: forked, no exec)."""
    w.add(t, pid, ppid, role, "process_start", argv=["python", f"{role}.py"], python="3.11.7", forked=True,
          env={}, run="r1", root_pid=100)


def _mem(w: LogWriter, t: float, **pss: int) -> None:
    """One memory sweep at t reading each pid (p200=...) at that many MiB, one thread each."""
    watcher(w, t, "memory", procs=[{"pid": int(k[1:]), "pss": v * MIB, "uss": MIB, "threads": 1}
                                   for k, v in pss.items()])


def _short_workers(read_workers: bool) -> LogWriter:
    """main 100's pool: sidecar 200 (read at 1.5 s, 100 MiB), whose 2 forked workers 300 and 301 lived 2.0 -> 2.3 s,
    between the watcher's looks (read_workers: a sweep at 2.1 s read all three)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.1, sidecar_pid=200)
    start(w, 1.05, 200, 100, "compile-sidecar")
    call(w, 1.1, 200, 100, "compile-sidecar", f"{SP}:SubprocMain.main", 1, None)  # serving until its exit
    _mem(w, 1.5, p200=100)
    for k, pid in enumerate((300, 301)):
        _fork(w, 2.0, pid, 200, "compile-worker")
        w.add(2.05, pid, 200, "compile-worker", "job", state="start", work_id=k, fn="subprocess:run")
    if read_workers:
        _mem(w, 2.1, p200=60, p300=50, p301=50)
    for k, pid in enumerate((300, 301)):  # busy until the shutdown: no idle span, its peak is told
        w.add(2.29, pid, 200, "compile-worker", "job", state="end", work_id=k)
        w.add(2.3, pid, 200, "compile-worker", "process_exit", how="exit", counts={}, dropped=0)
    call(w, 2.3, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 2.35, sidecar_pid=200)
    call(w, 2.31, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 2, 2.32)
    w.add(2.4, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(4, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_pool_peak_whose_workers_were_never_read_is_a_floor(tmp_path: Path) -> None:
    """The pool's peak (100 MiB, read while it was only its sidecar) is "at least", with the 2 workers never read,
    in the pool's sentence, the Pools section, the Timeline's cost, --json and the page; read, it is whole."""
    rep, text, page = _outputs(_short_workers(False), tmp_path)
    pool = rep["pools"][0]
    assert pool["peak_pss_bytes"] == 100 * MIB and pool["peak_never_read"] == 2, pool
    said = "peak at least 100 MiB real memory (PSS, 2 processes never read)"
    assert said in _flat(rep["answer"]) and said in page, rep["answer"]
    assert "real memory peak at least 100 MiB (PSS, 2 processes never read)" in text, text
    assert "pools' peak real memory at least 100 MiB (PSS)" in text and rep["costs"]["pool_peak_at_least"]
    assert rep["pools_across"]["at_once_never_read"] == 2, rep["pools_across"]
    peak = rep["runs"][0]["memory_at_once"][0]["peak"]
    assert peak[1] == 100 * MIB and peak[4] == 2, peak
    assert "peak at least 100 MiB at once (PSS, 2 processes never read)" in page
    (tmp_path / "read").mkdir()
    rep, text, page = _outputs(_short_workers(True), tmp_path / "read")
    pool = rep["pools"][0]
    assert pool["peak_pss_bytes"] == 160 * MIB and pool["peak_never_read"] == 0, pool
    assert "peak at least" not in text + page and "memory at least" not in text + page, text
    assert not rep["costs"]["pool_peak_at_least"]


def _two_ranks(together: bool) -> LogWriter:
    """main 100 and its child 500 (a rank) each make a pool: sidecar 200 (read whole at 100 MiB at 1.5 and 4.0 s,
    ended at 6.0 s) and sidecar 400 (made at 3.0 s: 20 MiB at 4.0 s, 100 MiB at 6.5 s, after 200 ended). Both
    lived 4.0 -> 6.0 s at their readings' sizes, but no pass read them together: the peak one moment read is
    120 MiB, their passes on either side of 4.0 s sum to 200. together: a pass at 5.5 s read both whole."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 0.5, 500, 100, "child")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.1, sidecar_pid=200)
    start(w, 1.05, 200, 100, "compile-sidecar")
    _mem(w, 1.5, p200=100)
    call(w, 2.9, 500, 100, "child", f"{SP}:SubprocPool.__init__", 1, 3.1, sidecar_pid=400)
    start(w, 3.0, 400, 500, "compile-sidecar")
    _mem(w, 4.0, p200=100, p400=20)
    if together:
        _mem(w, 5.5, p200=100, p400=100)
    call(w, 5.7, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 5.8, sidecar_pid=200)
    w.add(5.9, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 6.0, "tree", count=3, started=[], ended=[{"pid": 200, "end": w.lines[0]["ts"] + 6.0}])
    _mem(w, 6.5, p400=100)
    call(w, 7, 500, 100, "child", f"{SP}:SubprocPool.shutdown", 2, 7.1, sidecar_pid=400)
    w.add(7.2, 400, 500, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(7.5, 500, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(8, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(8, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_pools_alive_together_between_passes_are_a_floor(tmp_path: Path) -> None:
    """The two pools' memory at once (120 MiB, the most one pass read) is "at least", with the 2 pools alive
    together at 4.0 s read in different passes, in the Answer, the Timeline, --json and the page; with a pass that
    read both whole it is that pass's 200 MiB, whole. Each pool's own peak is whole either way."""
    rep, text, page = _outputs(_two_ranks(False), tmp_path)
    across = rep["pools_across"]
    assert across["at_once_bytes"] == 120 * MIB and across["at_once_all_read"], across
    assert across["at_once_split"] == {"pools": 2, "at": 4.0} and across["at_once_never_read"] == 0, across
    said = "at least 120 MiB together at once (2 pools alive together at 4.0 s read in different passes)"
    assert said in _flat(rep["answer"]) and said in page, rep["answer"]
    assert "pools' peak real memory at least 120 MiB (PSS)" in text and rep["costs"]["pool_peak_at_least"]
    assert [p["peak_pss_bytes"] for p in rep["pools"]] == [100 * MIB, 100 * MIB]
    assert "peak at least" not in text, text
    (tmp_path / "together").mkdir()
    rep, text, page = _outputs(_two_ranks(True), tmp_path / "together")
    across = rep["pools_across"]
    assert across["at_once_bytes"] == 200 * MIB and across["at_once_split"] is None, across
    assert "at least" not in _flat(rep["answer"]) and not rep["costs"]["pool_peak_at_least"], rep["answer"]


def _kernel_failed_between_sweeps() -> LogWriter:
    """uid 65534 under ulimit -u 24 (the tree's entries for main 100 and sidecar 200; their children inherit the
    uid): a sweep at 1.5 s read main (2 threads) and sidecar (1 thread); workers 300, 301 forked at 2.0 s and each
    ran two linkers (310-313, 2.05 -> 2.25 s), all gone by 2.3 s, between the watcher's looks; the compiled
    module's wait raised the linker's bare exit status at 2.3 s."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.1, sidecar_pid=200)
    start(w, 1.05, 200, 100, "compile-sidecar")
    watcher(w, 1.2, "tree", count=2, started=[
        {"pid": pid, "ppid": ppid, "name": "python", "cmd": "python", "role": role, "via": "child", "nproc": 24,
         "uid": 65534} for pid, ppid, role in ((100, 1, "main"), (200, 100, "compile-sidecar"))], ended=[])
    watcher(w, 1.5, "memory", procs=[{"pid": 100, "pss": 200 * MIB, "uss": MIB, "threads": 2},
                                     {"pid": 200, "pss": 100 * MIB, "uss": MIB, "threads": 1}])
    for pid in (300, 301):
        _fork(w, 2.0, pid, 200, "compile-worker")
    for k, pid in enumerate((310, 311, 312, 313)):
        start(w, 2.05 + 0.01 * k, pid, 300 + k % 2, "child")
    for k, pid in enumerate((310, 311, 312, 313)):
        w.add(2.25, pid, 300 + k % 2, "child", "process_exit", how="exit", counts={}, dropped=0)
    for pid in (300, 301):
        w.add(2.3, pid, 200, "compile-worker", "process_exit", how="exit", counts={}, dropped=0)

    class SubprocException(Exception):
        pass

    line = "subprocess.CalledProcessError: Command '['ld.lld']' returned non-zero exit status 1"
    details = f"An exception occurred in a subprocess:\n\nName=triton_poi_fused_add_0\nTraceback:\n{line}\n"
    call(w, 2.1, 100, 1, "main", "torch._inductor.async_compile:AsyncCompile.wait", 5, 2.35,
         error=error_text(SubprocException(details)))
    call(w, 3, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 3.1, sidecar_pid=200)
    w.add(3.2, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(4, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_failed_compile_counts_the_processes_no_sweep_read(tmp_path: Path) -> None:
    """The most alive at once under ulimit -u 24 is 8 (main, sidecar, 2 workers, 4 linkers, from their own
    records), not the 3 one sweep read: the limit is told beside the failure (within NEAR_FACTOR), as a floor,
    with whether it was reached unknown (the job's line is a bare exit status)."""
    rep = report(_kernel_failed_between_sweeps(), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "compile-failed")
    for said in ("its processes ran under ulimit -u 24; its records show at least 8 processes and threads of uid "
                 "65534 alive at once at 2.1 s (8 of them processes counted as one thread each",
                 "whether the limit was reached, no record shows"):
        assert said in f["text"] and said in _flat(rep["answer"]), f["text"]
    assert f["cost"]["nproc_limit"] == 24 and not f["cost"]["limit_reached"], f["cost"]


def _eagain_failure() -> LogWriter:
    """_kernel_failed_between_sweeps with the job's line EAGAIN-marked (8 tasks of uid 65534 under ulimit -u 24)."""
    w = _kernel_failed_between_sweeps()

    class SubprocException(Exception):
        pass

    line = "BlockingIOError: [Errno 11] Resource temporarily unavailable"
    for r in w.lines:
        if r.get("error"):
            r["error"] = error_text(SubprocException(f"An exception occurred in a subprocess:\n\nName=k\n"
                                                     f"Traceback:\n{line}\n"))
    return w


def _others(w: LogWriter, host: str, run: str, root: int, end: float | None) -> None:
    """Another run's main `root` on host (uid 65534, ulimit -u 24) with 20 children alive 0.5 s -> end; end None:
    killed with its watcher at ~1 s, no record of any end."""
    o = LogWriter(host)
    start(o, 0, root, 1, "main", run=run)
    o.add(0.2, root + 1, root, "watcher", "tree", run=run, root_pid=root, count=1, ended=[], started=[
        {"pid": root, "ppid": 1, "name": "python", "cmd": "python", "role": "main", "via": "child", "nproc": 24,
         "uid": 65534}])
    for pid in range(1000, 1020):
        start(o, 0.5, pid, root, "child", run=run)
        if end is not None:
            o.add(end, pid, root, "child", "process_exit", how="exit", counts={}, dropped=0)
    if end is not None:
        o.add(end + 1, root, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.lines = sorted(w.lines + o.lines, key=lambda r: r["ts"])


def _told(w: LogWriter, tmp_path: Path) -> dict[str, Any]:
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "compile-failed")
    assert "at least 8 processes and threads of uid 65534 alive at once" in f["text"], f["text"]
    assert "limit (ulimit -u 24) was reached" not in f["text"] and not f["cost"]["limit_reached"], f["text"]
    return f


def test_the_uid_count_is_one_hosts(tmp_path: Path) -> None:
    """RLIMIT_NPROC counts one host's tasks: another node's 21 processes of the same uid alive at the failure (its
    own log read beside, run r2 on host h2) are not counted, so an EAGAIN failure with 8 tasks of h1 under
    ulimit -u 24 is no reached limit (h1 and h2's 29 summed would read as reached)."""
    w = _eagain_failure()
    _others(w, "h2", "r2", 100, 5.0)
    _told(w, tmp_path)


def test_a_process_whose_end_no_record_shows_counts_until_its_runs_last_record(tmp_path: Path) -> None:
    """An earlier run on the same host, killed with its watcher at ~1 s (no exit, no tree end of its 21 processes),
    and the failing run 100 s later: no record shows those processes alive then, so they are not counted (29 would
    read as the limit reached)."""
    w = _eagain_failure()
    for r in w.lines:
        r["ts"] += 100.0
    _others(w, "h1", "r0", 50, None)
    _told(w, tmp_path)


def test_pools_read_by_the_same_passes_are_no_floor(tmp_path: Path) -> None:
    """Two pools every pass read whole (4.0 and 5.5 s), one growing as the other shrinks: their passes' larger
    sides sum to 400 MiB, yet each pass read both at 300. No record shows a pass that missed either, and what one
    pool may hold between its own passes is never told as a floor: 300 MiB together at once, whole."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 0.5, 500, 100, "child")
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.1, sidecar_pid=200)
    start(w, 1.05, 200, 100, "compile-sidecar")
    call(w, 2.9, 500, 100, "child", f"{SP}:SubprocPool.__init__", 1, 3.1, sidecar_pid=400)
    start(w, 3.0, 400, 500, "compile-sidecar")
    _mem(w, 4.0, p200=100, p400=200)
    _mem(w, 5.5, p200=200, p400=100)
    call(w, 5.7, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 5.8, sidecar_pid=200)
    w.add(5.9, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    call(w, 7, 500, 100, "child", f"{SP}:SubprocPool.shutdown", 2, 7.1, sidecar_pid=400)
    w.add(7.2, 400, 500, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(7.5, 500, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(8, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(8, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep, text, page = _outputs(w, tmp_path)
    across = rep["pools_across"]
    assert across["at_once_bytes"] == 300 * MIB and across["at_once_split"] is None, across
    assert "300 MiB together at once;" in _flat(rep["answer"]), rep["answer"]
    assert "at least" not in _flat(rep["answer"]) and not rep["costs"]["pool_peak_at_least"], rep["answer"]


def killed_run_then_a_later_run(*reads: tuple[float, int]) -> LogWriter:
    """Run r0: main 50 makes a pool (sidecar 60), read at 1.0 s (100 MiB), then everything SIGKILLed with its
    watcher: no end records. Run r1 100 s later: main 100's pool (sidecar 200) read at each (t, MiB) of reads,
    shut down by its creator at 104 s, and r1's verdict and exit."""
    w = LogWriter()
    w.add(0, 50, 1, "main", "process_start", argv=["python", "a.py"], python="3.11.7", forked=False, env={},
          run="r0", root_pid=50)
    call(w, 0.5, 50, 1, "main", f"{SP}:SubprocPool.__init__", 1, 0.6, sidecar_pid=60)
    w.add(0.55, 60, 50, "compile-sidecar", "process_start", argv=["python", "sidecar.py"], python="3.11.7",
          forked=False, env={}, run="r0", root_pid=50)
    w.add(1.0, 59, 50, "watcher", "memory", run="r0", root_pid=50,
          procs=[{"pid": 60, "pss": 100 * MIB, "uss": MIB, "threads": 1}])
    start(w, 100, 100, 1, "main")
    call(w, 100.5, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 100.6, sidecar_pid=200)
    start(w, 100.55, 200, 100, "compile-sidecar")
    for t, mib in reads:
        _mem(w, t, p200=mib)
    call(w, 104, 100, 1, "main", f"{SP}:SubprocPool.shutdown", 2, 104.1, sidecar_pid=200)
    w.add(104.2, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(105, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(105, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_killed_runs_pool_is_not_alive_together_with_a_later_runs(tmp_path: Path) -> None:
    """Run r0's pool, read once at 1.0 s, then killed with its watcher (no exit, no tree end), lives for the
    split rule until r0's last record: run r1's pool 100 s later was not alive together with it."""
    rep, text, page = _outputs(killed_run_then_a_later_run((101, 50), (103, 60)), tmp_path)
    assert rep["pools_across"]["at_once_split"] is None, rep["pools_across"]
    assert "read in different passes" not in text, text
