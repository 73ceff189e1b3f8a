"""A torchrun restart told as its user counts it (analysis/derive/attempts.py): ranks, each started once per
attempt, not more ranks; the restart, what it followed and what it cost. And the pools' counts at one moment
as what they are: every process of the run alive then, of which the ranks and their pools were read.

The log is crafted as torch 2.13's torchrun writes it (bench/users/torchrun_restart.py ran it live; the
Answer before and after is in docs/users.md, D44 and D34): launcher 100 (`python -m torch.distributed.run`)
starts ranks 110 and 120 (TORCHELASTIC_RESTART_COUNT 0), each makes its pool (sidecar + 2 workers); rank 1
exits with code 1 at 20 s; the launcher sends SIGTERM to rank 0's process group (os.killpg), which ends rank 0
and its pool; it starts ranks 130 and 140 (count 1) at 22 s, each makes its pool again (ready 2 s later) and
compiles again; both end normally at 30 s. multiprocessing's resource tracker of the launcher lives throughout.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .logs import AC, SP, T0, LogWriter

MIB = 2**20
USER = {"file": "/home/u/train.py", "line": 50, "func": "main"}
RUN = {"run": "r1", "root_pid": 100}
# (rank, attempt): (rank pid, sidecar pid, start)
RANKS = {(0, 0): (110, 210, 1.0), (1, 0): (120, 220, 1.0), (0, 1): (130, 230, 22.0), (1, 1): (140, 240, 22.0)}
THREADS = {"rank": 3, "compile-sidecar": 4, "compile-worker": 2}
PSS_MIB = {"rank": 250, "compile-sidecar": 200, "compile-worker": 15}


def _start(w: LogWriter, t: float, pid: int, ppid: int, role: str, rank: dict[str, str] | None,
           argv: list[str], forked: bool = False) -> None:
    w.add(t, pid, ppid, role, "process_start", argv=argv, python="3.11.7", forked=forked, env={},
          create_time=T0 + t, **({"rank": rank} if rank else {}), **RUN)


def _call(w: LogWriter, t: float, pid: int, ppid: int, role: str, target: str, cid: int, end: float,
          parent: int | None = None, **ret: Any) -> None:
    w.add(t, pid, ppid, role, "call", target=target, call_id=cid, thread="MainThread", stack=[USER], caller=USER,
          **({"parent_call": parent} if parent is not None else {}))
    w.add(end, pid, ppid, role, "return", call_id=cid, duration_s=end - t, **ret)


def _mem(w: LogWriter, t: float, procs: list[tuple[int, float, str]]) -> None:
    """A watcher memory sweep: each (pid, start, kind) with its PSS and its threads."""
    w.add(t, 900, 1, "watcher", "memory", procs=[
        {"pid": pid, "create_time": T0 + st, "pss": PSS_MIB[kind] * MIB, "uss": PSS_MIB[kind] * MIB // 2,
         "rss": 2 * PSS_MIB[kind] * MIB, "threads": THREADS[kind]} for pid, st, kind in procs], devices=[], **RUN)


def _attempt(w: LogWriter, attempt: int, with_count: bool) -> list[tuple[int, float, str]]:
    """Both ranks of one attempt: each makes its pool (ready 2 s after it is made), then compiles."""
    procs = []
    for rank in (0, 1):
        pid, side, t = RANKS[(rank, attempt)]
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2",
               "TORCHELASTIC_RUN_ID": "x1", "MASTER_ADDR": "localhost", "MASTER_PORT": "29500",
               **({"TORCHELASTIC_RESTART_COUNT": str(attempt)} if with_count else {})}
        _start(w, t, pid, 100, "child", env, ["python", "-u", "train.py"])
        w.add(t + 0.2, pid, 100, "child", "config", settings={"compile_threads": 2}, torch_version="2.13.0+cpu")
        _call(w, t + 1, pid, 100, "child", f"{AC}:AsyncCompile.wait_pool_ready", 1, t + 3)
        _call(w, t + 1.1, pid, 100, "child", f"{SP}:SubprocPool.__init__", 2, t + 1.5, parent=1, sidecar_pid=side)
        _start(w, t + 1.2, side, pid, "compile-sidecar", env, ["python", "x/compile_worker/__main__.py"])
        _call(w, t + 2.5, side, pid, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 1, t + 2.9,
              worker_pids=[side + 1, side + 2])
        for k in (1, 2):
            _start(w, t + 2.6, side + k, side, "compile-worker", env, ["python", "x/compile_worker/__main__.py"],
                   forked=True)
        _call(w, t + 3.1, pid, 100, "child", "torch._dynamo.convert_frame:_compile", 3, t + 5)
        procs += [(pid, t, "rank"), (side, t + 1.2, "compile-sidecar"), (side + 1, t + 2.6, "compile-worker"),
                  (side + 2, t + 2.6, "compile-worker")]
    return procs


def restart_log(with_count: bool = True, launcher_rank: dict[str, str] | None = None) -> LogWriter:
    """The module docstring's run; with_count False: a tracer that did not record TORCHELASTIC_RESTART_COUNT;
    launcher_rank: the launcher's own rank variables (torchrun under srun carries SLURM_PROCID)."""
    w = LogWriter()
    _start(w, 0, 100, 1, "main", launcher_rank, ["python", "-m", "torch.distributed.run", "--nproc-per-node=2",
                                                 "--max-restarts=1", "train.py"])
    w.add(0.05, 900, 1, "watcher", "watcher_start", interval=0.5, linger=5.0, **RUN)
    _start(w, 0.5, 101, 100, "resource-tracker", None, ["python", "-c", "from multiprocessing.resource_tracker "
                                                                           "import main;main(5)"])
    first = _attempt(w, 0, with_count)
    _mem(w, 8.0, first)
    _mem(w, 12.0, first)
    w.add(20.0, 120, 100, "child", "error", source="excepthook", exc_type="RuntimeError", message="loss is NaN")
    w.add(20.0, 120, 100, "child", "process_exit", how="exit", code=1, counts={}, dropped=0)
    ended = [{"pid": p, "end": T0 + 20.0} for p in (120, 220, 221, 222)]
    w.add(20.1, 900, 1, "watcher", "tree", count=8, started=[], ended=ended, **RUN)
    w.add(20.5, 100, 1, "main", "signal_sent", how="killpg", target=110, signal=15, frames=[
        {"file": "/site/torch/distributed/elastic/multiprocessing/subprocess_handler/subprocess_handler.py",
         "line": 85, "func": "close"}])
    ended = [{"pid": p, "end": T0 + 21.0} for p in (110, 210, 211, 212)]
    w.add(21.1, 900, 1, "watcher", "tree", count=2, started=[], ended=ended, **RUN)
    second = _attempt(w, 1, with_count)
    _mem(w, 28.0, second)
    for rank in (0, 1):
        pid, side, _ = RANKS[(rank, 1)]
        _call(w, 29.0, pid, 100, "child", f"{AC}:shutdown_compile_workers", 4, 29.5)
        _call(w, 29.01, pid, 100, "child", f"{SP}:SubprocPool.shutdown", 5, 29.4, parent=4, sidecar_pid=side)
        for q in (side + 1, side + 2, side):
            w.add(29.3, q, side if q != side else pid, "compile-worker" if q != side else "compile-sidecar",
                  "process_exit", how="exit", code=0, counts={}, dropped=0)
        w.add(30.0, pid, 100, "child", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(30.5, 101, 100, "resource-tracker", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(31.0, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(31.2, 900, 1, "watcher", "leftover", how="root-exit", count=0, pids=[], procs=[], **RUN)
    return w


def _report(w: LogWriter, tmp_path: Path) -> dict[str, Any]:
    return analyze(read_logs([str(w.write(tmp_path / "log.jsonl"))]))


@pytest.mark.parametrize("launcher_rank", [None, {"SLURM_PROCID": "0", "SLURM_JOB_ID": "7"}], ids=["torchrun", "srun"])
def test_a_restart_counts_ranks_once_and_tells_the_restart_and_its_cost(tmp_path: Path,
                                                                       launcher_rank: dict[str, str] | None) -> None:
    """Two ranks started twice are 2 ranks that each made a pool twice, not 4 ranks; each attempt's memory at once
    is its own pools' sum at one moment (2 x (200 + 2 x 15) MiB); the restart follows rank 1's exit (code 1), and
    its cost is told: the pools made again, each ready 1.9 s after it was made (SubprocPool.__init__ to
    wait_pool_ready's return), the compiles done again at 27.0 s, 7.0 s after the failure; nothing of the first
    attempt's pools was alive when the new ranks started. The same where torchrun runs under srun and carries a
    rank of its own (SLURM_PROCID): its children are still the ranks it started, each attempt's."""
    rep = _report(restart_log(launcher_rank=launcher_rank), tmp_path)
    across = rep["pools_across"]
    story = across["restart"]
    assert (story["launcher"], story["restarts"], story["ranks"]) == ("torchrun", 1, 2), story
    first, second = story["attempts"]
    for a in (first, second):
        assert (a["ranks"], a["pools"], a["sidecars"], a["workers"], a["processes"]) == (2, 2, 2, 4, 6), a
        assert a["at_once_bytes"] == 2 * (200 + 2 * 15) * MIB and a["at_once_all_read"], a
    assert first["failed"] == {"rank": "rank 1", "pid": 120, "at": 20.0, "words": "exited (code 1)"}, first
    assert first["left_alive"] == 0 and second["left_alive"] is None
    assert (second["started_at"], second["ready_s"], second["compiled_at"]) == (22.0, [1.9, 1.9], 27.0), second
    lead = rep["answer"].splitlines()[0]
    assert lead.startswith("- 2 ranks each made a compile pool, twice: torchrun restarted them once, after rank 1 "
                           "exited (code 1) at 20.0 s. Each time 2 sidecars + 4 workers = 6 compile processes, "
                           "460 MiB together at once; at 8.0 s"), lead
    assert "it grows with the rank count." in lead and "4 processes" not in lead and "per rank" not in lead
    assert ("The restart made 2 pools again: the new ranks started at 22.0 s, their pools ready 1.9 s and 1.9 s "
            "after they were made, and their compiles done again at 27.0 s (7.0 s after rank 1 ended); none of the "
            "first attempt's pool processes was alive when they started.") in lead, lead
    json.dumps(rep)
    # the Ranks section: each rank once, with the processes torchrun started as it (under srun torchrun's own
    # SLURM_PROCID 0 is no rank 0: before, rank 0's row was torchrun, started once)
    assert [(r["rank"], r["started"]) for r in rep["ranks"]] == [("rank 0", [110, 130]), ("rank 1", [120, 140])]
    assert "- rank 0: child 110 (train.py), started 2 times (110, 130); " in render_text(rep, {})
    json.dumps(rep)


def test_the_counts_at_one_moment_say_what_ps_lists_and_what_was_read(tmp_path: Path) -> None:
    """At the pools' memory peak (8.0 s, the first attempt's) ps lists every process of the run alive then: the
    launcher, its resource tracker, the 2 ranks and their 6 pool processes, 10 (the old words said "ps listed 16
    processes": the pools' processes of both attempts and all 4 ranks' processes, never alive together). The
    threads and memory told are those read: the 2 ranks' and their pools' (2 x 3 + 2 x (4 + 2 + 2) = 22 threads;
    2 x 250 + 460 MiB)."""
    rep = _report(restart_log(), tmp_path)
    across = rep["pools_across"]
    assert (across["counted_at"], across["run_processes"], across["pool_processes_alive"],
            across["creators_alive"]) == (8.0, 10, 6, 2), across
    assert (across["pool_threads"], across["creators_threads"]) == (16, 6), across
    assert across["creators_pss_bytes"] == 500 * MIB
    lead = rep["answer"].splitlines()[0]
    assert ("; at 8.0 s the run had 10 processes: the 2 ranks and their 6 pool processes ran 22 threads and held "
            "960 MiB together (PSS; the ranks 500 MiB of their own)") in lead, lead
    assert "ps listed" not in lead


def test_without_the_restart_count_no_attempt_is_guessed(tmp_path: Path) -> None:
    """A log whose ranks carry no TORCHELASTIC_RESTART_COUNT (an older tracer): no restart is told, but the 4
    processes are counted as what they were started as, 2 ranks (RANK 0 and 1, each twice)."""
    rep = _report(restart_log(with_count=False), tmp_path)
    across = rep["pools_across"]
    assert across["restart"] is None and across["ranks"] == 2
    lead = rep["answer"].splitlines()[0]
    assert lead.startswith("- 4 processes of 2 ranks each made a compile pool (per rank): 4 sidecars + 8 workers "
                           "= 12 compile processes, 460 MiB together at once"), lead
    assert "restart" not in lead


def _ranks(w: LogWriter, launcher: int, base: int, t: float, count: int, workers: int = 2,
           fail: int | None = None) -> float:
    """One launcher's 2 ranks started at t with restart count `count` (pids from base): each makes its pool
    (a sidecar and `workers` workers), compiles, and ends at t + 8 (rank `fail` first, with code 1)."""
    procs = []
    for rank in (0, 1):
        pid, side = base + rank * 10, base + 100 + rank * 10
        env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "TORCHELASTIC_RESTART_COUNT": str(count)}
        _start(w, t, pid, launcher, "child", env, ["python", "-u", "train.py"])
        _call(w, t + 1, pid, launcher, "child", f"{AC}:AsyncCompile.wait_pool_ready", 1, t + 3)
        _call(w, t + 1.1, pid, launcher, "child", f"{SP}:SubprocPool.__init__", 2, t + 1.5, parent=1, sidecar_pid=side)
        _start(w, t + 1.2, side, pid, "compile-sidecar", env, ["python", "x/compile_worker/__main__.py"])
        kids = [side + k for k in range(1, workers + 1)]
        _call(w, t + 2.5, side, pid, "compile-sidecar", f"{SP}:SubprocMain._start_pool", 1, t + 2.9, worker_pids=kids)
        for q in kids:
            _start(w, t + 2.6, q, side, "compile-worker", env, ["python", "x/compile_worker/__main__.py"], forked=True)
        _call(w, t + 3.1, pid, launcher, "child", "torch._dynamo.convert_frame:_compile", 3, t + 5)
        procs += [(pid, t, "rank"), (side, t + 1.2, "compile-sidecar")] + [(q, t + 2.6, "compile-worker") for q in kids]
        for q in [*kids, side]:
            w.add(t + 7.9, q, side if q != side else pid, "compile-worker" if q != side else "compile-sidecar",
                  "process_exit", how="exit", code=0, counts={}, dropped=0)
        w.add(t + (8 if fail == rank else 8.5), pid, launcher, "child", "process_exit", how="exit",
              code=1 if fail == rank else 0, counts={}, dropped=0)
    _mem(w, t + 6, procs)
    return t + 9


def _runs(runs: list[list[tuple[int, int, int | None]]]) -> LogWriter:
    """A root that runs one torchrun after another (pids 100, 500, ...): each run a list of attempts
    (restart count, workers per pool, the rank that fails or None), one after the other in time."""
    w = LogWriter()
    _start(w, 0, 50, 1, "main", None, ["python", "run_all.py"])
    w.add(0.05, 900, 1, "watcher", "watcher_start", interval=0.5, linger=5.0, run="r1", root_pid=50)
    t, base = 0.5, 1000
    for i, attempts in enumerate(runs):
        launcher = 100 + 400 * i
        _start(w, t, launcher, 50, "child", None, ["python", "-m", "torch.distributed.run", "train.py"])
        for count, workers, fail in attempts:
            t = _ranks(w, launcher, base, t + 0.5, count, workers, fail)
            base += 1000
        w.add(t, launcher, 50, "child", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(t + 1, 50, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    w.add(t + 1.2, 900, 1, "watcher", "leftover", how="root-exit", count=0, pids=[], procs=[], run="r1", root_pid=50)
    return w


def _lead(rep: dict[str, Any]) -> str:
    return next(line for line in rep["answer"].splitlines() if "compile pool" in line)


def test_two_torchrun_runs_in_one_log_are_no_restart(tmp_path: Path) -> None:
    """A script that runs torchrun twice (the first restarts once, the second not): the second run's ranks are
    no restart of the first's, and no attempt holds both runs' ranks (the old story said 'their launcher
    restarted them once ... the first time 4 sidecars + 8 workers')."""
    rep = _report(_runs([[(0, 2, 1), (1, 2, None)], [(0, 2, None)]]), tmp_path)
    assert rep["pools_across"]["restart"] is None, rep["pools_across"]["restart"]
    lead = _lead(rep)
    assert "restart" not in lead and lead.startswith("- 6 processes of 2 ranks each made a compile pool"), lead


def test_restart_counts_out_of_time_order_tell_no_restart(tmp_path: Path) -> None:
    """Ranks of count 1 that started before those of count 0 (a log no one launcher writes): no story, where the
    old one said 'compiles done again at 6.0 s (-12.5 s after rank 0 ended)'."""
    rep = _report(_runs([[(1, 2, 1), (0, 2, None)]]), tmp_path)
    assert rep["pools_across"]["restart"] is None
    assert " s after" not in _lead(rep)


def test_attempts_of_other_shapes_keep_their_units_and_ordinals(tmp_path: Path) -> None:
    """Five attempts whose pools differ (2 and 3 workers): each told with its own parts, 'MiB' as written (the
    old text lowercased all of it: '460 mib'), and 'the fourth time' (the old: "the attempt 4's time")."""
    rep = _report(_runs([[(n, 2 + n % 2, 1 if n < 4 else None) for n in range(5)]]), tmp_path)
    lead = _lead(rep)
    assert ("The first time 2 sidecars + 4 workers = 6 compile processes, 460 MiB together at once; the second "
            "time 2 sidecars + 6 workers = 8 compile processes, 490 MiB together at once; the third time") in lead, lead
    assert "the fourth time 2 sidecars + 6 workers" in lead and "the fifth time" in lead and "mib" not in lead
    assert "torchrun restarted them 4 times" in lead and "The second restart made 2 pools again" in lead


def test_a_restart_after_an_attempt_without_pools_is_named_and_timed_by_its_own_failure(tmp_path: Path) -> None:
    """Attempt 1's ranks died (code 1) before making pools, attempt 2's made them: that is the second restart, and
    its compiles are timed from attempt 1's failure, not attempt 0's (the old text: 'The restart made 2 pools
    again ... (7.0 s after rank 1 ended)', from attempt 0's rank 1 at 9.0 s)."""
    w = _runs([[(0, 2, 1), (2, 2, None)]])
    # attempt 1 (count 1): its ranks start at 9.6 s, exit with code 1 at 10.0 s, no pool; attempt 2 at 10.5 s
    for r in (0, 1):
        env = {"RANK": str(r), "TORCHELASTIC_RESTART_COUNT": "1"}
        _start(w, 9.6, 1500 + r, 100, "child", env, ["python", "train.py"])
        w.add(10.0 + r / 10, 1500 + r, 100, "child", "process_exit", how="exit", code=1, counts={}, dropped=0)
    w.lines.sort(key=lambda rec: rec["ts"])
    rep = _report(w, tmp_path)
    story = rep["pools_across"]["restart"]
    assert story["restarts"] == 2 and [a["attempt"] for a in story["attempts"]] == [0, 2], story
    assert story["attempts"][1]["after"] == {"rank": "rank 0", "pid": 1500, "at": 10.0, "words": "exited (code 1)"}
    lead = _lead(rep)
    assert "torchrun restarted them twice, after rank 1 exited (code 1) at 9.0 s" in lead, lead
    assert "The second restart made 2 pools again: the new ranks started at 10.5 s" in lead, lead
    assert "(5.5 s after rank 0 ended)" in lead, lead


def test_the_first_restart_is_told_after_attempt_0s_failure_where_attempt_0_made_no_pool(tmp_path: Path) -> None:
    """Attempt 0's ranks died (code 1) before making pools; attempts 1 and 2 made them: the lead's 'after ...' is
    attempt 0's failure, the one the first restart followed (the old text named attempt 1's, at 9.0 s)."""
    w = _runs([[(1, 2, 1), (2, 2, None)]])
    for r in (0, 1):  # attempt 0 (count 0): its ranks start at 0.6 s, exit with code 1 at 0.8 and 0.9 s, no pool
        _start(w, 0.6, 700 + r, 100, "child", {"RANK": str(r), "TORCHELASTIC_RESTART_COUNT": "0"}, ["python", "x.py"])
        w.add(0.8 + r / 10, 700 + r, 100, "child", "process_exit", how="exit", code=1, counts={}, dropped=0)
    w.lines.sort(key=lambda rec: rec["ts"])
    rep = _report(w, tmp_path)
    story = rep["pools_across"]["restart"]
    assert story["restarts"] == 2 and [a["attempt"] for a in story["attempts"]] == [1, 2], story
    lead = _lead(rep)
    assert "torchrun restarted them twice, after rank 0 exited (code 1) at 0.8 s." in lead, lead
    assert "The second restart made 2 pools again" in lead, lead


def test_ranks_restarted_with_the_same_count_tell_no_restart(tmp_path: Path) -> None:
    """torchrun restarts its ranks for a node that joins (elastic membership) without raising the count: count 0
    started each rank twice, then a failure restart (count 1). The counts cannot tell the attempts apart, so no
    story (the old one said '2 ranks made 6 compile pools in 2 attempts', the first '4 sidecars + 8 workers')."""
    rep = _report(_runs([[(0, 2, None), (0, 2, 1), (1, 2, None)]]), tmp_path)
    assert rep["pools_across"]["restart"] is None, rep["pools_across"]["restart"]
    assert "restart" not in _lead(rep)


def test_a_later_attempts_pools_read_in_different_passes_are_told_as_a_floor(tmp_path: Path) -> None:
    """The second attempt's pools were read whole only in passes 3 s apart (rank 0's at 25.5 s, rank 1's at
    28.5 s); at one moment only as their sidecars, before the workers forked (24.0 s: 2 x 200 MiB). Its sum at one
    moment, 400 MiB, is then a floor (the pools' own passes sum to 460), and the restart sentence says so: "at
    least 400 MiB the second time", never "400 MiB" as if both pools had held no more together."""
    w = restart_log()
    w.lines = [r for r in w.lines if not (r["event"] == "memory" and r["ts"] == T0 + 28.0)]
    _mem(w, 24.0, [(230, 23.2, "compile-sidecar"), (240, 23.2, "compile-sidecar")])
    _mem(w, 25.5, [(130, 22.0, "rank"), (230, 23.2, "compile-sidecar"), (231, 24.6, "compile-worker"),
                   (232, 24.6, "compile-worker")])
    _mem(w, 28.5, [(140, 22.0, "rank"), (240, 23.2, "compile-sidecar"), (241, 24.6, "compile-worker"),
                   (242, 24.6, "compile-worker")])
    w.lines.sort(key=lambda r: r["ts"])
    rep = _report(w, tmp_path)
    first, later = rep["pools_across"]["restart"]["attempts"]
    assert later["at_once_bytes"] < first["at_once_bytes"] and later["at_once_split"], later
    lead = rep["answer"].splitlines()[0]
    assert "460 MiB together at once (at least " in lead and " the second time)" in lead, lead
    # read whole at one moment, the second attempt's figure is told as it is (no clause where it equals the first)
    (tmp_path / "whole").mkdir()
    assert "(at least" not in _report(restart_log(), tmp_path / "whole")["answer"].splitlines()[0]
