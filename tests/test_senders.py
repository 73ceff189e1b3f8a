"""Endings by the signals the run's traced processes sent (analysis/derive/senders.py, from signal_sent records):
a kill of one process is told as that, with its sender and line, never as a signal to the process group; a
program that ends its own pool is no pool that died; an interrupt of a pool's creator while a worker held a job
is told; and without a record the group rule stands (systemd, SLURM: a sender the log cannot see)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.fold.model import Waited
from wp_autotrace.analysis.present.render import render_text

from .logs import AC, SP, T0, LogWriter, call, kinds, report, start, watcher

DRIVER = {"file": "/home/u/actors.py", "line": 79, "func": "<module>"}
PSUTIL = {"file": "/venv/lib/python3.11/site-packages/psutil/__init__.py", "line": 1273, "func": "_send_signal"}
KERNEL = {"file": "/venv/lib/python3.11/site-packages/ipykernel/kernelbase.py", "line": 1586,
          "func": "_signal_children"}
CLIENT = {"file": "/venv/lib/python3.11/site-packages/jupyter_client/provisioning/local_provisioner.py",
          "line": 91, "func": "send_signal"}


def proc(pid: int, ppid: int, pgid: int, t: float, role: str = "child") -> dict[str, Any]:
    return {"pid": pid, "ppid": ppid, "name": "python", "cmd": role, "create_time": T0 + t, "rss": 5 << 20,
            "pgid": pgid, "role": role}


def sent(w: LogWriter, t: float, pid: int, ppid: int, role: str, how: str, target: int, sig: int,
         frames: list[dict[str, Any]], error: str | None = None) -> None:
    w.add(t, pid, ppid, role, "signal_sent", how=how, target=target, signal=sig, frames=frames,
          **({"error": error} if error else {}))


def actors(records: bool = True) -> LogWriter:
    """Ray-style: main 100 (group 100) starts actors 110-112 (same group), each makes a pool (sidecar 21x); at
    5.0 s main SIGKILLs each actor by pid (os.kill); the actors end in one tick; their sidecars, which a group
    signal would have reached, end 7.5 s later by their parent watchdog (exit code 0)."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    actors_, sides = (110, 111, 112), (210, 211, 212)
    for a in actors_:
        start(w, 0.2, a, 100, "child")
    for i, (a, s) in enumerate(zip(actors_, sides)):
        call(w, 1 + i * 0.1, a, 100, "child", f"{SP}:SubprocPool.__init__", 1, 1.5 + i * 0.1, sidecar_pid=s)
    watcher(w, 2.0, "tree", count=7, ended=[], started=[proc(100, 1, 100, 0, "main")]
            + [proc(a, 100, 100, 0.2) for a in actors_]
            + [proc(s, a, 100, 1.2, "compile-sidecar") for a, s in zip(actors_, sides)])
    if records:
        for a in actors_:
            sent(w, 5.0, 100, 1, "main", "kill", a, 9, [DRIVER])
    watcher(w, 5.5, "tree", count=4, started=[], ended=[{"pid": a, "create_time": T0 + 0.2, "end": T0 + 5.4}
                                                        for a in actors_])
    watcher(w, 12.5, "tree", count=1, started=[],
            ended=[{"pid": s, "create_time": T0 + 1.2, "end": T0 + 12.5 + i * 0.1} for i, s in enumerate(sides)],
            zombies=[{"pid": s, "create_time": T0 + 1.2, "ppid": 1, "since": T0 + 12.5, "status": 0}
                     for s in sides])
    w.add(13, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(13, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def texts(rep: dict[str, Any]) -> str:
    return json.dumps([rep["answer"], rep["findings"], [p["ending"] for p in rep["processes"]]])


def test_actors_killed_by_pid_are_told_as_killed_by_their_driver_all_three(tmp_path: Path) -> None:
    """Each actor: 'killed by SIGKILL, sent by main 100 (os.kill at actors.py:79)', not a group signal; the
    finding about the pools that outlived them names all three actors, counted."""
    rep = report(actors(), tmp_path)
    ends = {p["pid"]: p["ending"] for p in rep["processes"] if p["pid"] in (110, 111, 112)}
    for e in ends.values():
        assert e["kind"] == "signal" and e["signal"] == "SIGKILL" and not e["group"], e
        assert e["words"] == "killed by SIGKILL, sent by main 100 (os.kill at actors.py:79 in <module>)", e
        assert "(os.kill at /home/u/actors.py:79 in <module>)" in e["evidence"][0], e
        assert e["sender"] == 100 and "signal_sent: main 100 sent SIGKILL to pid" in e["evidence"][0], e
    assert "process group" not in texts(rep)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-outlived-creator")
    assert "killed by SIGKILL, sent by main 100" in f["text"], f["text"]
    assert f["text"].startswith("Child 112 and 2 more (110, 111) ended at 5.4 s, killed by SIGKILL, sent by main "
                                "100"), f["text"]  # the longest-lived pool's creator first
    assert "outlived it by 7.3 s (theirs by 7.1-7.2 s)" in f["text"], f["text"]
    assert {210, 211, 212} <= set(f["pids"]), f["pids"]
    assert 110 not in rep["no_exit_pids"] and 111 not in rep["no_exit_pids"], rep["no_exit_pids"]


def test_without_a_record_the_group_rule_stands(tmp_path: Path) -> None:
    """The same ends with no signal_sent record (a sender the log cannot see: systemd, SLURM, `kill`): three
    siblings ending in one tick while their group lived on is read as before, a signal to the process group."""
    rep = report(actors(records=False), tmp_path)
    ends = [p["ending"] for p in rep["processes"] if p["pid"] in (110, 111, 112)]
    assert all(e["kind"] == "with-group" and "sender" not in e for e in ends), ends


def test_a_failed_kill_and_a_late_one_explain_nothing(tmp_path: Path) -> None:
    """A kill whose call failed (ESRCH: the record's error), and one sent before the process started (to an
    earlier process with its pid), are no evidence: the group rule is back."""
    w = actors()
    lines = []
    for r in w.lines:
        lines.append(r)
        if r["event"] == "signal_sent" and r["target"] == 110:
            r["ts"] = T0 + 0.1  # before actor 110 started (0.2 s): a process that had its pid before
        elif r["event"] == "signal_sent":
            lines.append({**r, "seq": 99, "error": "ESRCH"})
    w.lines = lines
    rep = report(w, tmp_path)
    ends = {p["pid"]: p["ending"]["kind"] for p in rep["processes"] if p["pid"] in (110, 111, 112)}
    assert set(ends.values()) == {"with-group"}, ends


def kernel(interrupt: bool = True) -> LogWriter:
    """A Jupyter kernel: main 100 (the driver, group 100) starts kernel 110 in its own group 110; the kernel
    makes a pool (sidecar 210 + worker 310, group 110); worker 310 takes a job at 5.5 s (ends at 9.0 s); main
    interrupts the kernel at 6.0 s (killpg(110, SIGINT)); at Restart the kernel SIGTERMs its children by pid
    (psutil, from ipykernel) at 10.0 s, they end (statuses 15), and main SIGTERMs group 110 at 12.0 s: the
    kernel ends. Nothing is left."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    start(w, 0.2, 110, 100, "child")
    call(w, 1, 110, 100, "child", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=210)
    watcher(w, 2.0, "tree", count=4, ended=[], started=[
        proc(100, 1, 100, 0, "main"), proc(110, 100, 110, 0.2), proc(210, 110, 110, 1.2, "compile-sidecar"),
        proc(310, 210, 110, 1.6, "compile-worker")])
    w.add(5.5, 310, 210, "compile-worker", "job", state="start", work_id=1, fn="time:sleep")
    if interrupt:
        sent(w, 6.0, 100, 1, "main", "killpg", 110, 2, [CLIENT])
    w.add(9.0, 310, 210, "compile-worker", "job", state="end", work_id=1)
    for t in (10.0, 10.05):
        for pid in (210, 310):
            sent(w, t, 110, 100, "child", "kill", pid, 15, [PSUTIL, KERNEL])
    watcher(w, 10.5, "tree", count=2, started=[], ended=[
        {"pid": 210, "create_time": T0 + 1.2, "end": T0 + 10.4}, {"pid": 310, "create_time": T0 + 1.6,
                                                                  "end": T0 + 10.4}],
            zombies=[{"pid": 210, "create_time": T0 + 1.2, "ppid": 110, "since": T0 + 10.4, "status": 15}])
    sent(w, 12.0, 100, 1, "main", "killpg", 110, 15, [CLIENT])
    watcher(w, 12.5, "tree", count=1, started=[], ended=[{"pid": 110, "create_time": T0 + 0.2, "end": T0 + 12.2}])
    w.add(13, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(13, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    return w


def test_a_kernel_that_ends_its_own_pool_is_no_pool_death_and_no_group_signal(tmp_path: Path) -> None:
    """The kernel's own SIGTERMs to its children (by pid) end its pool: 'child 110 ended it itself', no
    pool-died finding, no setsid advice; the kernel's own end is the driver's signal to its group, with the
    driver named."""
    rep = report(kernel(), tmp_path)
    (pool,) = rep["pools"]
    assert pool["ending"]["kind"] == "ended-by-creator", pool["ending"]
    assert pool["ending"]["words"].startswith("child 110 ended it itself, sending SIGTERM to its sidecar (os.kill "
                                              "at ipykernel/kernelbase.py:1586 in _signal_children)"), pool["ending"]
    assert "pool-died" not in kinds(rep)
    assert "setsid" not in texts(rep) and "own session" not in texts(rep)
    ends = {p["pid"]: p["ending"] for p in rep["processes"]}
    assert ends[210]["words"].startswith("killed by SIGTERM, sent by child 110") and not ends[210]["group"]
    assert ends[310]["words"].startswith("ended on SIGTERM, sent by child 110"), ends[310]  # no status read
    assert ends[110]["words"].startswith("ended on SIGTERM, with the rest of its process group: main 100 "
                                         "signalled group 110 (os.killpg at jupyter_client/"), ends[110]
    assert ends[110]["group"] and ends[110]["sender"] == 100


def test_an_interrupt_while_a_worker_held_a_job_is_told(tmp_path: Path) -> None:
    """SIGINT to the kernel's group at 6.0 s (the driver's killpg) while worker 310 held a job since 5.5 s:
    the job ran on until 9.0 s. Without the record, nothing is said."""
    rep = report(kernel(), tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "interrupted-job")
    assert "Child 110 got SIGINT at 6.0 s (main 100 signalled its process group 110 (os.killpg at" in f["text"], f
    assert "compile worker 310 of its pool held a job (time:sleep), since 5.5 s: the job ran on until 9.0 s (3.0 s " \
           "after the interrupt)" in f["text"], f["text"]
    assert f["pids"] == [110, 310]
    assert "Child 110 got SIGINT at 6.0 s (main 100's os.killpg), but the job compile worker 310 held ran on until " \
           "9.0 s (3.0 s after the interrupt)" in rep["answer"], rep["answer"]
    (tmp_path / "none").mkdir()
    assert "interrupted-job" not in kinds(report(kernel(interrupt=False), tmp_path / "none"))


def test_an_interrupted_traced_wait_is_told_once(tmp_path: Path) -> None:
    """Where the interrupt ended a traced wait of the creator (AsyncCompile.wait raising KeyboardInterrupt),
    that wait's own finding tells it and its job: interrupted-job stays silent (one story, one finding)."""
    w = kernel()
    call(w, 5.6, 110, 100, "child", "torch._inductor.async_compile:AsyncCompile.wait", 7, 6.1,
         error="KeyboardInterrupt: ")
    rep = report(w, tmp_path)
    assert "interrupted-job" not in kinds(rep), kinds(rep)


def test_a_process_that_sigkilled_itself_is_told_so(tmp_path: Path) -> None:
    """Actor 110 SIGKILLs itself (os.kill(os.getpid(), SIGKILL): its record is written before the call, and no
    handler outlives the signal): 'killed by SIGKILL, sent by itself'. A SIGTERM it sent itself is no such proof
    (a handler may catch it, and the process write its exit): its own record of one says nothing of its end."""
    for sig, told in ((9, True), (15, False)):
        w = actors(records=False)
        sent(w, 5.0, 110, 100, "child", "kill", 110, sig, [DRIVER])
        w.lines.sort(key=lambda r: r["ts"])
        (tmp_path / str(sig)).mkdir()
        end = next(p["ending"] for p in report(w, tmp_path / str(sig))["processes"] if p["pid"] == 110)
        assert end["words"].startswith("killed by SIGKILL, sent by itself (os.kill at actors.py:79") == told, end
        assert ("sent by" not in end["words"]) == (not told), end


def test_a_main_that_sigkilled_itself_leads_with_that_line(tmp_path: Path) -> None:
    """A traced main's os.kill(os.getpid(), SIGKILL) (no process_exit): the Answer says it was killed by SIGKILL
    sent by itself at that line, and Fix first points there, not 'killed, or os._exit'."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    watcher(w, 1.0, "tree", count=1, ended=[], started=[proc(100, 1, 100, 0, "main")])
    sent(w, 5.0, 100, 1, "main", "kill", 100, 9, [DRIVER])
    watcher(w, 5.5, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 5.1}])
    watcher(w, 5.6, "watcher_exit", reason="root-exit")
    answer = report(w, tmp_path)["answer"]
    assert ("- The main process was killed by SIGKILL, sent by itself (os.kill at actors.py:79 in <module>)."
            in answer and "os._exit" not in answer), answer
    assert "Fix first: the main process sent it: read why at that line." in answer, answer


def test_an_exit_code_wins_over_a_signal_sent(tmp_path: Path) -> None:
    """A worker SIGTERMed by pid whose wait status is an exit code (it handled the signal and exited) exited:
    the status says how it ended; the record does not make it a kill."""
    w = kernel()
    for r in w.lines:
        if r["event"] == "tree" and r.get("zombies"):
            r["zombies"].append({"pid": 310, "create_time": T0 + 1.6, "ppid": 210, "since": T0 + 10.4, "status": 0})
    rep = report(w, tmp_path)
    end = next(p["ending"] for p in rep["processes"] if p["pid"] == 310)
    assert end["kind"] != "signal" and "SIGTERM" not in end["words"] and end["code"] == 0, end


def test_a_pool_killed_by_a_process_of_the_run_is_advised_about_that_sender(tmp_path: Path) -> None:
    """Child 110 makes a pool (sidecar 210); its sibling 120 (a watchdog) SIGKILLs the sidecar by pid: the pool
    died, and the advice names the sender that the report already names, never 'find what sent SIGKILL'."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    start(w, 0.2, 110, 100, "child")
    start(w, 0.3, 120, 100, "child")
    call(w, 1, 110, 100, "child", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=210)
    watcher(w, 2.0, "tree", count=4, ended=[], started=[
        proc(100, 1, 100, 0, "main"), proc(110, 100, 100, 0.2), proc(120, 100, 100, 0.3),
        proc(210, 110, 100, 1.2, "compile-sidecar")])
    sent(w, 5.0, 120, 100, "child", "kill", 210, 9, [DRIVER])
    watcher(w, 5.5, "tree", count=3, started=[], ended=[{"pid": 210, "create_time": T0 + 1.2, "end": T0 + 5.4}],
            zombies=[{"pid": 210, "create_time": T0 + 1.2, "ppid": 110, "since": T0 + 5.4, "status": 9}])
    for pid in (110, 120):
        w.add(8, pid, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(9, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(9, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    f = next(f for f in rep["findings"] if f["kind"] == "pool-died")
    assert "sent by child 120" in f["text"], f["text"]
    assert f["advice"].startswith("child 120 sent the SIGKILL itself (os.kill at actors.py:79 in <module>): "), \
        f["advice"]
    assert "find what sent" not in texts(rep)


def test_the_cleanup_of_a_broken_pool_is_no_workers_cause(tmp_path: Path) -> None:
    """Worker 310 of sidecar 210's pool ends abruptly at 5.0 s (nothing recorded: an OOM kill); the sidecar's
    ProcessPoolExecutor then runs terminate_broken, SIGTERMing both workers; both ends are seen in one tick.
    Those records explain neither end (the cleanup follows the break): no worker is told as ended by the sidecar."""
    broken = {"file": "/usr/lib/python3.11/concurrent/futures/process.py", "line": 507, "func": "terminate_broken"}
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=210)
    watcher(w, 2.0, "tree", count=4, ended=[], started=[
        proc(100, 1, 100, 0, "main"), proc(210, 100, 100, 1.2, "compile-sidecar"),
        proc(310, 210, 100, 1.6, "compile-worker"), proc(311, 210, 100, 1.6, "compile-worker")])
    for pid in (310, 311):
        sent(w, 5.05, 210, 100, "compile-sidecar", "kill", pid, 15, [broken])
    watcher(w, 5.5, "tree", count=2, started=[], ended=[{"pid": q, "create_time": T0 + 1.6, "end": T0 + 5.4}
                                                        for q in (310, 311)])
    w.add(9, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(9, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    ends = {p["pid"]: p["ending"] for p in rep["processes"] if p["pid"] in (310, 311)}
    assert len(ends) == 2 and all("sender" not in e and "sent by" not in e["words"] for e in ends.values()), ends


def test_a_sigkill_after_its_exit_record_ended_its_teardown(tmp_path: Path) -> None:
    """A worker whose exit handlers ran (its process_exit at 2.0 s) and whose teardown its parent cut short with
    SIGKILL 5 s later (a bounded wait on a torch process under load), its wait status unread: killed by SIGKILL
    in its teardown, the sender named, never a plain 'exited'. One SIGKILLed before its exit record, still
    writing it after, exited: the record says its handlers ran after the signal went."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    for pid in (110, 111):
        start(w, 0.2, pid, 100, "child")
    watcher(w, 1.0, "tree", count=3, ended=[], started=[proc(100, 1, 100, 0, "main"), proc(110, 100, 100, 0.2),
                                                        proc(111, 100, 100, 0.2)])
    w.add(2.0, 110, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    sent(w, 6.0, 100, 1, "main", "kill", 111, 9, [DRIVER])
    w.add(6.1, 111, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    sent(w, 7.0, 100, 1, "main", "kill", 110, 9, [DRIVER])
    watcher(w, 7.5, "tree", count=1, started=[], ended=[{"pid": 110, "create_time": T0 + 0.2, "end": T0 + 7.2},
                                                        {"pid": 111, "create_time": T0 + 0.2, "end": T0 + 6.2}])
    w.add(8, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    w.add(8, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    ends = {p["pid"]: p["ending"] for p in rep["processes"]}
    assert ends[110]["kind"] == "signal" and ends[110]["signal"] == "SIGKILL" and ends[110]["sender"] == 100, ends
    assert ends[110]["words"] == ("killed by SIGKILL 5.0 s after its exit record (in its teardown), sent by main 100 "
                                  "(os.kill at actors.py:79 in <module>)"), ends[110]
    assert "its wait status was not read" in " ".join(ends[110]["evidence"]), ends[110]
    assert ends[111]["kind"] == "exit" and ends[111]["signal"] is None, ends[111]


def test_a_main_its_wait_status_shows_killed_with_no_sender_is_never_told_os_exit(tmp_path: Path) -> None:
    """A job step killed by group (`kill -9 -- -PGID`, a scheduler): no traced process sent it, no process_exit, and
    the watcher read the main's zombie's wait status, SIGKILL. That status is the evidence: the Answer, the run's
    header and root-killed say it was killed by SIGKILL, and Fix first finds its sender, never "os._exit"."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    start(w, 0.2, 110, 100, "child")
    watcher(w, 1.0, "tree", count=2, ended=[], started=[proc(100, 1, 100, 0, "main"), proc(110, 100, 100, 0.2)])
    watcher(w, 2.0, "tree", count=0, started=[], ended=[{"pid": q, "create_time": T0 + t, "end": T0 + 1.9}
                                                        for q, t in ((100, 0), (110, 0.2))],
            zombies=[{"pid": 100, "create_time": T0, "ppid": 1, "since": T0 + 1.9, "status": 9}])
    w.add(2.2, 901, 100, "watcher", "leftover", pids=[], procs=[], count=0, how="root-killed", run="r1")
    rep = report(w, tmp_path)
    (run,) = rep["runs"]
    assert run["state"] == "killed" and run["root_ending"] == "killed by SIGKILL", run
    text = texts(rep)
    assert "os._exit" not in text and "os._exit" not in render_text(rep, {}), text
    assert rep["answer"].splitlines()[1] == "- The main process was killed by SIGKILL.", rep["answer"]
    assert "main process killed by SIGKILL, without process_exit" in render_text(rep, {})
    f = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert "was killed by SIGKILL" in f["text"] and "find what sent SIGKILL" in f["advice"], f


# A deployed server's own file, its path as long as a real one's.
SERVER = {"file": "/home/svc/deploy/inference-server/src/serving/graceful_drain.py", "line": 80, "func": "main"}


def group_stopped_server(pgid: int, drained: int = 0) -> LogWriter:
    """A server 100 (process group `pgid`: its own where 100, a launcher's where not) makes a pool (sidecar 200 +
    workers 301, 302, in the same group); at 5.0 s a stop with no record (systemd's, scancel) ends the three with
    SIGTERM (their zombies' statuses) while the server, whose handler caught it, drains until 13 s, sending
    `drained` more compiles to the dead pool (its last submit at 8.0 s, from graceful_drain.py:65), whose stop at exit
    (torch's atexit) then finds it dead."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    watcher(w, 2.0, "tree", count=4, ended=[], started=[proc(100, 1, pgid, 0, "main"),
                                                         proc(200, 100, pgid, 1.2, "compile-sidecar")]
            + [proc(q, 200, pgid, 1.6, "compile-worker") for q in (301, 302)])
    watcher(w, 5.5, "tree", count=1, started=[],
            ended=[{"pid": q, "create_time": T0 + c, "end": T0 + 5.1} for q, c in ((200, 1.2), (301, 1.6), (302, 1.6))],
            zombies=[{"pid": q, "create_time": T0 + c, "ppid": pp, "since": T0 + 5.1, "status": 15}
                     for q, c, pp in ((200, 1.2, 100), (301, 1.6, 200), (302, 1.6, 200))])
    if drained:  # torch's atexit (no user frame) asks the dead pool to stop as the server exits
        w.add(12.8, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
              stack=[], caller=None, pending_jobs=[])
        w.add(12.9, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_returncode=-15)
    w.add(13, 100, 1, "main", "leftover", pids=[], procs=[], count=0, how="root-exit", run="r1")
    label = f"{SP}:SubprocPool.submit"
    sends = {"counts": {label: 1 + drained}, "count_times": {label: [T0 + 2.0, T0 + 8.0]},
             "count_callers": {label: {**SERVER, "line": 65, "func": "request"}}} if drained else {}
    w.add(13, 100, 1, "main", "process_exit", how="exit", **{"counts": {}, **sends}, dropped=0)
    return w


def test_a_group_stop_the_pools_creator_outlived_is_fixed_by_signalling_the_creator_alone(tmp_path: Path) -> None:
    """A server that leads its own process group, whose pool a stop to that group killed while its handler drained
    (ai-dynamo/dynamo#791): the fix is a stop that signals the server alone (systemd KillMode=mixed, `kill PID`),
    not "its own session" (it has one: the signal was meant for it). A server in its launcher's group is also told
    the own-session way (the launcher's group signal then misses it)."""
    rep = report(group_stopped_server(100), tmp_path)
    died = next(f for f in rep["findings"] if f["kind"] == "pool-died")
    assert "KillMode=mixed" in died["advice"] and "`kill PID`" in died["advice"], died["advice"]
    assert "own session" not in died["advice"] and "own session" not in rep["answer"], died["advice"]
    rep = report(group_stopped_server(50), tmp_path)
    died = next(f for f in rep["findings"] if f["kind"] == "pool-died")
    assert "KillMode=mixed" in died["advice"] and "own session" in died["advice"], died["advice"]


def test_a_pool_a_group_stop_killed_leads_the_answer_with_how_and_the_lost_jobs_under_it(tmp_path: Path) -> None:
    """The cause first, its symptoms under it: the Answer's first bullet says how the pool died (its sidecar killed
    by the group's SIGTERM), not only that it died; the compile the drain sent to it after follows from it, told
    under it, never as a bullet of its own before the cause."""
    w = group_stopped_server(100, drained=1)
    # a server's own line, as long as a deployed one's: the finding's text then passes a bullet's length before
    # its clause after the how (torch's atexit finding the pool dead), which a cut at a clause would drop with it
    for r in w.lines:
        if r["event"] == "call" and r["call_id"] == 1:
            r.update(caller=SERVER, stack=[SERVER])
    rep = report(w, tmp_path)
    lines = rep["answer"].splitlines()
    assert lines[0].startswith("- The compile pool of sidecar 200 "), lines
    assert "died at 5.1 s: its sidecar was killed by SIGTERM, with the rest of its process group" in lines[0], lines
    assert lines[0].endswith(" What follows from it:"), lines
    assert "found it already dead" not in lines[0], lines  # what came after the death is the Findings' to tell
    assert lines[1].startswith("  - 1 job(s) went to a compile pool whose sidecar 200 had ended"), lines
    assert lines[1].endswith("/src/serving/graceful_drain.py:65 (request)."), lines  # its site whole, not cut
    lost = next(f for f in rep["findings"] if f["kind"] == "jobs-lost")
    assert lost["cost"]["lost_in"] == [200], lost["cost"]
    # the Findings read as the Answer does: the pool's death, then the jobs lost in it
    order = [f["kind"] for f in rep["findings"] if f["severity"] == "problem"]
    assert order[:2] == ["pool-died", "jobs-lost"], order


def test_a_main_that_signalled_itself_under_run_is_told_so(tmp_path: Path) -> None:
    """Under `wp-autotrace run` (its waited status names the signal) a main's os.kill(os.getpid(), S) is told as
    without run: sent by itself at that line, Fix first there, for SIGKILL and for a SIGTERM or SIGSEGV that its
    status proves it did not handle; never 'find what sent it (a time limit, a user, a scheduler)'. A status naming
    another signal than the one it sent itself leaves that record out (control). Fails where the waited status
    alone was told (the record was read only where `run` had not run the program)."""
    for sig, status in ((9, 9), (15, 15), (11, 11), (15, 9)):
        w = LogWriter()
        start(w, 0, 100, 1, "main")
        watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
        watcher(w, 1.0, "tree", count=1, ended=[], started=[proc(100, 1, 100, 0, "main")])
        sent(w, 5.0, 100, 1, "main", "kill", 100, sig, [DRIVER])
        watcher(w, 5.5, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 5.1}])
        watcher(w, 5.6, "watcher_exit", reason="root-exit")
        w.add(5.7, 99, 1, "run", "run_exit", root_pid=100, status=-status, forwarded=[])  # run's, as it writes it
        w.waited = Waited(100, -status)  # type: ignore[attr-defined]
        (tmp_path / f"{sig}-{status}").mkdir()
        rep = report(w, tmp_path / f"{sig}-{status}")
        answer, told = rep["answer"], sig == status
        name = {9: "SIGKILL", 15: "SIGTERM", 11: "SIGSEGV"}[sig]
        own = ("the main process sent it: read why at that line." if sig == 9 else
               f"the main process sent {name} to itself: read why at that line; where it re-raises a {name} its "
               "handler caught, find what sent the first")
        assert (own in " ".join(answer.split())) == told, answer
        assert ("sent by itself (os.kill at actors.py:79 in <module>)" in texts(rep)) == told, texts(rep)
        # a signal it could catch may be its handler's re-raise of one sent from outside: that sender is asked for
        assert ("find what sent" in answer) == (not told or sig != 9), answer


def sidecar_killed_alone(strays: tuple[int, ...] = ()) -> LogWriter:
    """pytorch#189290: main 100 makes a pool (sidecar 200 + workers 301, 302); at 5.0 s a kill no record names (the
    OOM killer's) ends the sidecar alone (its zombie's status, under main 100); its workers run on past the main's
    exit at 13 s (torch's atexit finds the pool dead), left running; `strays`: children of the main's left with them."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    call(w, 1, 100, 1, "main", f"{SP}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    watcher(w, 2.0, "tree", count=4 + len(strays), ended=[],
            started=[proc(100, 1, 100, 0, "main"), proc(200, 100, 100, 1.2, "compile-sidecar")]
            + [proc(q, 200, 100, 1.6, "compile-worker") for q in (301, 302)] + [proc(q, 100, 100, 1.8) for q in strays])
    watcher(w, 5.5, "tree", count=3 + len(strays), started=[],
            ended=[{"pid": 200, "create_time": T0 + 1.2, "end": T0 + 5.1}],
            zombies=[{"pid": 200, "create_time": T0 + 1.2, "ppid": 100, "since": T0 + 5.1, "status": 9}])
    w.add(12.8, 100, 1, "main", "call", target=f"{SP}:SubprocPool.shutdown", call_id=2, thread="MainThread",
          stack=[], caller=None, pending_jobs=[])
    w.add(12.9, 100, 1, "main", "return", call_id=2, duration_s=0.1, sidecar_returncode=-9)
    w.add(13, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 13.2, "tree", count=2 + len(strays), started=[], ended=[{"pid": 100, "end": T0 + 13.1}])
    left = [301, 302, *strays]
    watcher(w, 13.4, "leftover", how="root-exit", count=len(left), pids=left,
            procs=[{"pid": q, "ppid": 1, "rss": 100 << 20} for q in left])
    return w


def test_the_workers_a_dead_sidecar_left_running_are_told_under_its_pools_death(tmp_path: Path) -> None:
    """The cause first, its symptoms under it: a sidecar killed alone leaves its workers running (nothing stops a
    dead sidecar's workers, and torch's atexit finds the pool dead); they are told under the pool's death, as the
    dead pool's workers, never as a bullet beside it blaming a pool left running. Others left with them (the main's
    own child) are no symptom of that death: told on their own."""
    rep = report(sidecar_killed_alone(), tmp_path)
    lines = rep["answer"].splitlines()
    assert lines[0].startswith("- The compile pool of sidecar 200 ") and "killed by SIGKILL" in lines[0], lines
    assert lines[0].endswith(" What follows from it:"), lines
    under = [ln for ln in lines[1:] if ln.startswith("  - ")]
    assert any(ln.startswith("  - 2 processes were left running after the main process") for ln in under), lines
    assert "the dead pool's workers, which nothing stopped" in " ".join(rep["answer"].split()), lines
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "whose sidecar died before them" in left["advice"], left["advice"]
    assert "compile pools left running" not in left["advice"], left["advice"]
    order = [f["kind"] for f in rep["findings"] if f["severity"] == "problem"]
    assert order.index("leftovers") == order.index("pool-died") + 1, order
    (tmp_path / "stray").mkdir()
    mixed = report(sidecar_killed_alone(strays=(400,)), tmp_path / "stray")
    assert not any(ln.startswith("  - 3 processes were left running") for ln in mixed["answer"].splitlines()), \
        mixed["answer"]
    left = next(f for f in mixed["findings"] if f["kind"] == "leftovers")
    assert "compile pools left running" in left["advice"] and "dead_pool_workers" not in left["cost"], left


def test_the_waits_a_dead_pool_cost_are_told_whole_with_torchs_own_timeout(tmp_path: Path) -> None:
    """A server's drain sends two compiles to its pool after a group stop killed it, each waited for as a compiled
    module does (AsyncCompile.wait, bounded by torch's compile_worker_wait_timeout): the lost jobs' cost is both
    waits together (the one in flight at the death and the one begun after it, before anything stopped the pool),
    ended by torch's timeout, said as that setting and its value, not as its message cut short."""
    w = group_stopped_server(100, drained=1)
    err = ("RuntimeError: Inductor compile-worker future for 'triton_poi_fused_{}' did not complete within 3s. "
           "Override with TORCHINDUCTOR_COMPILE_WORKER_WAIT_TIMEOUT=<seconds>.")
    for cid, (t, key) in enumerate(((4.5, "16_128"), (8.0, "24_128")), start=5):
        w.add(t, 100, 1, "main", "call", target=f"{AC}:AsyncCompile.wait", call_id=cid, thread="MainThread",
              stack=[SERVER], caller=SERVER, pool_jobs=1)
        w.add(t + 3.0, 100, 1, "main", "return", call_id=cid, duration_s=3.0, error=err.format(key))
    w.lines.sort(key=lambda r: r["ts"])
    rep = report(w, tmp_path)
    lost = next(f for f in rep["findings"] if f["kind"] == "jobs-lost")
    said = ("main 100 waited 6.0 s in 2 wait() calls (4.5 -> 11.0 s), each until torch's compile_worker_wait_timeout "
            "(3 s)")
    assert said in lost["text"] and said in lost["headline"], lost
    assert said in " ".join(rep["answer"].split()), rep["answer"]
    assert "(3 s) raised: they never return; in torch" in lost["text"] and "for ever" not in lost["text"], lost
