"""Every pool kind torch makes is a pool: the fork and spawn start methods (TORCHINDUCTOR_WORKER_START), whose
ProcessPoolExecutor has no sidecar and whose workers are the main process's own children, get the sidecar pool's
story: who made it where, its processes as `ps` lists them, its real memory, how it ended.

Real torch 2.13 on CPU: AsyncCompile.wait_pool_ready() stands in for a GPU host's first Triton kernel (on CPU
torch makes no pool by itself); two jobs of half a second each start two workers under either start method. The
script takes its own figures while the pool idles (psutil's children, each worker's smaps_rollup Pss), and the
report's are checked against them, never against the tool's own log.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.analysis.findings.idle import IDLE_POOL_S

from .conftest import clean_env, needs_torch, report_json, run_python, wait_for_watcher, wait_until
from .procs import PROBE_PRELUDE

pytestmark = [needs_torch, pytest.mark.torch, pytest.mark.slow]

MIB = 2**20
SLACK_S = 2.0  # a worker's job end record against the script's own clock: written after the result went back
SCRIPT = PROBE_PRELUDE + textwrap.dedent('''
    import torch
    from torch._inductor.async_compile import AsyncCompile

    def probe():
        """What ps and smaps_rollup show of this process's pool now: its worker children (not the resource
        tracker spawn starts beside them) and their PSS summed."""
        kids = [c for c in psutil.Process().children() if "resource_tracker" not in " ".join(c.cmdline())]
        return {"pids": sorted(c.pid for c in kids), "pss": sum(pss(c.pid) for c in kids),
                "main_pss": pss(os.getpid()), "main_rss": psutil.Process().memory_info().rss}

    if __name__ == "__main__":
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        pool = AsyncCompile.process_pool()
        sent = time.time()  # the script's own clock (the log's too): the jobs start after it, end before done
        for job in [pool.submit(time.sleep, 0.5) for _ in range(2)]:
            job.result(timeout=60)
        done = time.time()
        # Settled first: a spawned worker the second job started may still be importing torch (8-18 s on a loaded
        # box; its PSS grew 14 -> 242 MiB meanwhile), and the watcher reads it as the pool's from its start (the
        # main's worker_spawned record). So: until every worker said its role (torch's initializer ran in it: its
        # import is done) and the watcher has read them all, then the probe, then until it has read them all
        # again (the pool idles meanwhile), then the probe again.
        kids = probe()["pids"]

        def said_role():
            """When the last of kids wrote its role record, or None while one has not."""
            with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
                recs = [json.loads(x) for x in f.read().split(b"\\n") if b'"event":"role"' in x and x.endswith(b"}")]
            said = {r["pid"]: r["ts"] for r in recs if r["pid"] in kids}
            return max(said.values()) if len(said) == len(kids) else None

        wait(said_role, limit=120)
        wait(lambda: read_all(kids, said_role() or time.time()), limit=120)
        before, at = probe(), time.time()
        wait(lambda: read_all(kids, at))
        after = probe()
        from multiprocessing import resource_tracker  # spawn starts it beside the workers: its pid, if running
        tracker = getattr(resource_tracker._resource_tracker, "_pid", None)
        with open(sys.argv[1], "w") as f:
            json.dump({"before": before, "after": after, "sent": sent, "done": done, "idled_to": time.time(),
                       "tracker": tracker}, f)
''')


# A defunct process gone this soon after the main's end was brief (the report's bar for a zombie that stays, 5 s).
BRIEF_ZOMBIE_S = 5.0


def run_kind(tmp_path: Path, method: str) -> tuple[dict[str, Any], dict[str, Any], int]:
    """Run SCRIPT traced with TORCHINDUCTOR_WORKER_START=method; (the report, the script's probe, the line). The
    probe gains `tracker_gone_s`: how soon after the main's end (its stdout closed: the resource tracker, which
    inherits it, had ended too) psutil saw multiprocessing's resource tracker gone (reaped), where one ran."""
    import psutil

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    line = next(i for i, x in enumerate(SCRIPT.splitlines(), 1) if "# first Triton kernel" in x)
    log, out = tmp_path / "log.jsonl", tmp_path / "probe.json"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START=method, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script), str(out)], env, timeout=240, cwd=tmp_path)
    ended = time.monotonic()
    assert res.returncode == 0, res.stderr[-3000:]
    probe = json.loads(out.read_text())
    if probe["tracker"] is not None:
        wait_until(lambda: not psutil.pid_exists(probe["tracker"]), BRIEF_ZOMBIE_S * 4,
                   what="the resource tracker reaped")
        probe["tracker_gone_s"] = time.monotonic() - ended
    wait_for_watcher(log, timeout=30)
    return report_json(log), probe, line


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_fork_and_spawn_pools_get_the_whole_story(tmp_path: Path, method: str) -> None:
    rep, probe, line = run_kind(tmp_path, method)
    script = str(tmp_path / "train.py")
    before, after = probe["before"], probe["after"]
    assert len(before["pids"]) == 2 and before["pids"] == after["pids"]  # the probe's own count: 2 workers
    (pool,) = rep["pools"]
    # who made it, where; its processes as ps lists them: the workers, no sidecar
    assert pool["kind"] == "executor" and pool["start_method"] == method and pool["sidecar_pid"] is None
    assert pool["caller"]["file"] == script and pool["caller"]["line"] == line
    assert pool["worker_pids"] == before["pids"] and pool["processes"] == len(before["pids"])
    # its jobs: the ready probe and the two sleeps; busy and idle against the script's own clock: the last job
    # (a 0.5 s sleep sent at `sent`) ended no sooner than sent + 0.5 and by the script's `done` (its end record
    # is written as the worker asks for its next job: a descheduled worker writes it late, hence the slack); the
    # pool then idled at least until the script's last reading, and its workers ended after that
    t0 = rep["t0"]
    assert pool["jobs"] == 3
    assert probe["sent"] + 0.5 <= t0 + pool["busy_until"] <= probe["done"] + SLACK_S, (pool, probe)
    assert pool["idle_s"] >= probe["idled_to"] - probe["done"] - SLACK_S, (pool, probe)
    assert t0 + pool["ending"]["at"] >= probe["idled_to"], (pool, probe)
    # each worker named by the main as concurrent.futures started it (the watcher's sign while it imports)
    recs = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines() if x.strip()]
    named = sorted(r["worker_pid"] for r in recs if r["event"] == "worker_spawned" and r["role"] == "main")
    assert named and all(r["pid"] == pool["creator_pid"] for r in recs if r["event"] == "worker_spawned"), named
    assert named == sorted(pool["worker_pids"]), (named, pool["worker_pids"])
    # real memory at once, against the probe's own smaps_rollup sum taken while it idled (PSS moves a little
    # as pages are touched: the probe's two readings bound it, with 5 % either way)
    low, high = sorted((before["pss"], after["pss"]))
    assert pool["held_pss_bytes"] and low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool, probe)
    # how it ended: the workers ended as the main exited (concurrent.futures' exit handler), never "unknown"
    assert pool["ending"]["kind"] == "ended-at-exit"
    # no job kept the exit: its join's capture found none pending and no worker held one (spawned workers' own
    # exit took 7.9 s at load 20, once told as a hang at exit)
    assert "exit-hang" not in {f["kind"] for f in rep["findings"]}, rep["answer"]
    answer = rep["answer"]
    worded = "forked" if method == "fork" else "spawned"
    assert f"made a compile pool (2 {worded} workers, no sidecar) at {script}:{line}" in answer, answer
    assert "without a process pool" not in answer and "sidecar not seen" not in answer
    assert f"holding {round(pool['held_pss_bytes'] / MIB)} MiB real memory (PSS)" in " ".join(answer.split())
    assert "concurrent.futures stops an executor's workers at exit" in " ".join(answer.split())
    # the main's own memory beside the pool's, read in the pool's sweep (derive/counts.py): against the script's
    # own smaps_rollup of itself while the pool idled (5 % either way: pages come and go between readings)
    own = pool["counts"]["creator_pss_bytes"]
    low, high = sorted((before["main_pss"], after["main_pss"]))
    assert low * 0.95 <= own <= high * 1.05, (own, probe)
    assert f"held {round(own / MIB)} MiB of its own beside the pool's" in " ".join(answer.split()), answer
    # a defunct process seen briefly at exit (spawn's resource tracker: psutil saw it reaped soon after the main's
    # end) never reaches the Answer nor its Fix first; where the watcher saw it defunct, it is listed at info
    if probe["tracker"] is not None and probe["tracker_gone_s"] < BRIEF_ZOMBIE_S:
        assert str(probe["tracker"]) not in answer and "--init" not in answer, answer
        for f in (f for f in rep["findings"] if f["kind"] == "zombies"):
            assert f["severity"] == "info" and not f["cost"]["zombies"], f
        if any(p["pid"] == probe["tracker"] and (p.get("zombie") or {}).get("since") for p in rep["processes"]):
            (z,) = [f for f in rep["findings"] if f["kind"] == "zombies"]  # the watcher saw it defunct
            assert probe["tracker"] in z["pids"], z


STALL = textwrap.dedent('''
    import os, sys, time
    if "--multiprocessing-fork" in sys.orig_argv:  # a spawned worker, importing the main script again (__mp_main__)
        with open(os.environ["STALL_MARK"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(600)  # stands in for an import that takes long (torch's: 8-18 s on a loaded box)
''')
IMPORTING = textwrap.dedent('''
    import stall  # noqa: F401
    import torch
    from torch._inductor.async_compile import AsyncCompile

    if __name__ == "__main__":
        AsyncCompile.warm_pool()  # torch.compile's inductor backend makes the pool (spawn starts no worker yet)
        AsyncCompile.wait_pool_ready()  # first Triton kernel: its ready job starts a worker
''')


def test_a_spawn_worker_killed_while_it_imports_is_its_pools(tmp_path: Path) -> None:
    """A spawn pool's worker killed (SIGKILL, as the OOM killer would) while it still imports, before torch's
    initializer ran in it: it never writes its role record, yet it is its pool's, from the record its creator
    wrote as concurrent.futures started it. The test finds the worker itself (its marker; psutil: the main's child
    on multiprocessing's spawn command line; its /proc maps: no libtorch loaded yet), reads its PSS (smaps_rollup)
    around the watcher's reading, kills it by pid and checks the report's pool: its processes as ps listed them,
    its memory, and its end as the pool's breaking (the kill has no record: how is not known, unless the watcher
    read the worker defunct, with the kernel's wait status)."""
    import os
    import signal
    import subprocess

    import psutil

    from .conftest import read_log, wait_until

    (tmp_path / "stall.py").write_text(STALL)
    script, mark, log = tmp_path / "train.py", tmp_path / "worker.txt", tmp_path / "log.jsonl"
    script.write_text(IMPORTING)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START="spawn", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"),
                    STALL_MARK=str(mark))
    main = subprocess.Popen([sys.executable, str(script)], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True)

    def pss(pid: int) -> int:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            return next(int(x.split()[1]) * 1024 for x in f if x.startswith("Pss:"))

    def read_since(pid: int, since: float) -> bool:
        """A watcher memory record after `since` holds pid."""
        recs = [json.loads(x) for x in log.read_bytes().split(b"\n") if b'"event":"memory"' in x and x.endswith(b"}")]
        return any(r["ts"] > since and pid in {e["pid"] for e in r["procs"]} for r in recs)

    try:
        pid = int(wait_until(lambda: mark.exists() and mark.read_text(), 150, what="the worker's marker"))
        worker = psutil.Process(pid)
        kids = [c.pid for c in psutil.Process(main.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
        assert kids == [pid] and worker.cmdline()[-1] == "--multiprocessing-fork", (kids, worker.cmdline())
        with open(f"/proc/{pid}/maps") as f:  # still importing: torch's library not loaded in it yet
            assert "libtorch" not in f.read()
        before, at = pss(pid), time.time()
        wait_until(lambda: read_since(pid, at), 60, what="the watcher's reading of the importing worker")
        after = pss(pid)
        os.kill(pid, signal.SIGKILL)
        # the main got BrokenProcessPool and exited through its handlers (its process_exit): its teardown of torch
        # takes seconds more on a loaded box and is not what this test reads, so it ends here
        wait_until(lambda: any(r["event"] == "process_exit" and r["pid"] == main.pid
                               for r in read_log(log, partial=True)), 120, what="the main's process_exit")
    finally:
        try:
            os.killpg(main.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        err = main.communicate()[1]
    assert "BrokenProcessPool" in err, err[-3000:]  # the program's own word
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    (pool,) = rep["pools"]
    # counted as ps listed it, its memory in the pool's (the probe's two readings bound it, 5 % either way)
    assert pool["worker_pids"] == [pid] and pool["processes"] == 1 and pool["counts"]["pids"] == [pid], pool
    low, high = sorted((before, after))
    assert low * 0.95 <= pool["peak_pss_bytes"] <= high * 1.05, (pool, before, after)
    # its end, under its pool: the kill itself left no record; where the watcher read the worker defunct (its
    # creator not yet reaping), the kernel's wait status says SIGKILL, else how is not known. The pool broke.
    assert pool["ending"]["kind"] == "broke", pool["ending"]
    own = next(p["ending"] for p in rep["processes"] if p["pid"] == pid)
    if own["kind"] == "signal":
        assert own["signal"] == "SIGKILL" and any("wait status 9" in e for e in own["evidence"]), own
    said = {"unknown": "ended (how is not known)", "signal": "was killed by SIGKILL"}[own["kind"]]
    answer = " ".join(rep["answer"].split())
    assert "made a compile pool (1 spawned worker, no sidecar)" in answer, answer
    assert f"it broke: worker {pid} {said} while it still imported" in answer, answer
    assert "AsyncCompile.wait_pool_ready() got BrokenProcessPool" in answer, answer


HANG = textwrap.dedent('''
    import os, signal, sys, threading, time
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's child inherits it ignored
    import psutil
    import torch
    from torch._inductor.async_compile import AsyncCompile

    lock, held = threading.Lock(), threading.Event()

    def hold():
        with lock:
            held.set()
            time.sleep(600)

    def job(marker):
        with open(marker, "w") as f:  # the worker that took the job, by its own word
            f.write(str(os.getpid()))
        with lock:  # the forked worker's copy of the lock stays held: no thread there will release it
            return 1

    if __name__ == "__main__":
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        before = psutil.Process().num_threads()
        pool = AsyncCompile.process_pool()  # first Triton kernel
        after = psutil.Process().num_threads()
        with open(sys.argv[1], "w") as f:
            f.write(f"{before} {after}")
        def exiting():  # the script's own reading of when its exit began (runs before concurrent.futures' join)
            with open(sys.argv[1] + ".exit", "w") as f:
                f.write(repr(time.time()))

        threading._register_atexit(exiting)
        future = pool.submit(job, sys.argv[1] + ".worker")
        with open(sys.argv[1] + ".workers", "w") as f:  # the pool's workers as ps lists them (fork starts all)
            f.write(str(len(psutil.Process().children())))
        AsyncCompile().wait({"k": future})  # blocks: the job never ends
''')


def blocked(recs: list[dict[str, Any]]) -> bool:
    """The main has waited on the job for two of the watcher's memory sweeps, the last 2 s after the wait began,
    when Ctrl-C comes: two sweeps alone may be one look apart (a worker seen after the wait began has its pool
    swept again at once), and a wait interrupted within a second is no hang. The records' times are the wait's
    clock, so the wait surely lasted 2 s."""
    wait = next((r["ts"] for r in recs if r["event"] == "call" and r.get("target", "").endswith(
        "AsyncCompile.wait")), None)
    sweeps = [r["ts"] for r in recs if r["event"] == "memory" and wait is not None and r["ts"] > wait]
    return wait is not None and len(sweeps) >= 2 and sweeps[-1] >= wait + 2.0


def test_a_fork_pool_made_beside_a_thread_hangs_and_is_told(tmp_path: Path) -> None:
    """A fork pool made while another thread holds a lock: the job that needs it never ends in the worker, the
    main blocks in AsyncCompile.wait, a Ctrl-C raises KeyboardInterrupt there but the process does not end
    (concurrent.futures' exit handler waits for the job). The report says how many threads ran at the pool's
    making (the script's own psutil count), that the wait was interrupted and the process lived on, and advises
    the subprocess start method or compile_threads=1."""
    from .procs import run_until

    script, out, log = tmp_path / "hang.py", tmp_path / "threads.txt", tmp_path / "log.jsonl"
    script.write_text(HANG)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START="fork", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))

    # children first: the workers end before the main, as they would by its group's kill on a quiet box (one
    # kill after another, under load they outlived it by a descheduled moment and were rightly told left running)
    res, reached = run_until([sys.executable, str(script), str(out)], env, log, blocked, timeout=180, cwd=tmp_path,
                             interrupts=1, interrupt_wait=6.0, children_first=True)
    ended_by = time.time()  # the run's processes are gone: the hang at exit ended before this
    assert reached, res.stderr[-3000:]
    # the watcher writes the killed main's end after this (niced, on a loaded box: seconds); a report read
    # before had no exit-hang (its end unseen yet): read the log once the watcher is done with it
    wait_for_watcher(log, timeout=60)
    before, after = map(int, out.read_text().split())
    assert before >= 2  # the main thread and the one holding the lock, at least
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert pool["start_method"] == "fork"
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    told = int(hang["text"].split(" while it ran ")[1].split()[0])
    # busy with the job, then killed: idle at most between the holding worker's kill and the pool's last worker's
    # (the test kills them one after another: 0.097 s apart once under load)
    (held,) = pool["unended_jobs"]
    assert pool["ending"]["kind"] != "ended-at-exit" and pool["busy_until"] == held["until"], pool
    assert pool["idle_s"] == 0 or abs(pool["idle_s"] - (pool["ending"]["at"] - held["until"])) <= 0.002, pool
    assert before <= told <= after, (before, told, after)
    assert "AsyncCompile.wait() on its fork compile pool was interrupted by Ctrl-C (KeyboardInterrupt)" in hang["text"]
    # (whether it lived on after the Ctrl-C depends on the host's timing here: tests/test_model.py's
    # with_fork_hang scenario checks those words on a log where it did)
    assert 'worker_start_method="subprocess"' in hang["advice"] and "compile_threads=1" in hang["advice"]
    # which worker held the job: the one the job itself says ran it, of the workers the script counted
    worker, workers = (Path(str(out) + x).read_text() for x in (".worker", ".workers"))
    assert f"1 of its {workers} workers held a job then: worker {worker} ran __main__:job from " in hang["text"]
    assert f"worker {worker} ran __main__:job" in " ".join(hang["text"].split()) and "never ended it" in hang["text"]
    assert "fork-pool-hang" in {f["kind"] for f in rep["findings"][:2]} and "on its fork compile pool" in rep["answer"]
    assert f"worker {worker} held its job (__main__:job) from " in " ".join(rep["answer"].split())
    assert 'worker_start_method="subprocess"' in rep["answer"].split("Fix first: ")[1]
    # the hang at exit: concurrent.futures' join, from the script's own reading of its exit's start to the kill
    exit_began = float(Path(str(out) + ".exit").read_text())
    (at_exit,) = [f for f in rep["findings"] if f["kind"] == "exit-hang"]
    waited = at_exit["cost"]["exit_wait_s"]
    assert 1.0 <= waited <= ended_by - exit_began + 0.5, (waited, ended_by - exit_began)
    assert f"waited {waited:.1f} s in concurrent.futures' join" in rep["answer"]
    # the exit join's capture, as it began: the pool it joins (by its workers), the job still pending, by name
    assert "1 job(s) were pending in this pool as the exit join began" in " ".join(at_exit["text"].split())
    recs = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]
    (join,) = [r for r in recs if r["event"] == "call" and r.get("target", "").endswith(":_python_exit")
               and r["role"] == "main"]
    (entry,) = join["pool_pending"]
    assert entry["pending"] == 1 and entry["jobs"] == [{"work_id": 0, "fn": "__main__:job"}], entry


# HANG's program, but one that catches the KeyboardInterrupt and lives on (saving its work, say) until the test
# says go, then ends its pool's workers itself (their job can never end: concurrent.futures' exit join would wait
# on it) and exits with code 3. Its own clock: when its wait began, when it caught the interrupt, when it left.
CAUGHT = HANG.split('if __name__ == "__main__":')[0] + textwrap.dedent('''
    if __name__ == "__main__":
        import json
        out = sys.argv[1]
        threading.Thread(target=hold, daemon=True).start()
        held.wait()
        pool = AsyncCompile.process_pool()  # first Triton kernel
        future = pool.submit(job, out + ".worker")
        began = time.time()
        try:
            AsyncCompile().wait({"k": future})  # blocks: the job never ends
        except KeyboardInterrupt:
            caught = time.time()
        workers = [c.pid for c in psutil.Process().children()]
        with open(out + ".caught", "w") as f:
            json.dump({"began": began, "caught": caught, "workers": workers}, f)
        limit = time.monotonic() + 60  # bounded: the test says go
        while not os.path.exists(out + ".go") and time.monotonic() < limit:
            time.sleep(0.05)
        for pid in workers:
            os.kill(pid, signal.SIGKILL)
        with open(out + ".leaving", "w") as f:
            f.write(repr(time.time()))
        sys.exit(3)
''')
# How late an end is seen at most, past the test's own reading of it: the watcher notes a process gone at its
# next look (every 0.1 s, niced: seconds late under load).
SEEN_LATE_S = 5.0


def test_a_ctrl_c_the_program_caught_is_told_with_how_long_it_lived_on_and_how_it_ended(tmp_path: Path) -> None:
    """A Ctrl-C during a wait on a job that never ends (a fork pool's, made beside a thread holding a lock), whose
    KeyboardInterrupt the program catches: it lives on until the test says go, then kills its pool's workers and
    exits with code 3. The test sends SIGINT itself and sees the process alive after it (psutil); the Answer tells
    the interrupted wait with its seconds (within the script's own clock: its wait began, it caught the interrupt),
    that the process lived on (at least as long as the test saw it alive after the catch, at most to the end the
    test saw) and how it ended (its exit code, the one the test got), and that the program ended its own pool."""
    import psutil

    from .procs import kill_run, records

    script, out, log = tmp_path / "caught.py", tmp_path / "run", tmp_path / "log.jsonl"
    script.write_text(CAUGHT)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START="fork", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    caught_file = Path(str(out) + ".caught")
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen([sys.executable, str(script), str(out)], env=env, cwd=tmp_path,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    try:
        wait_until(lambda: proc.poll() is not None or blocked(records(log)), 180, interval=0.5,
                   what=lambda: (tmp_path / "stderr").read_text()[-3000:])
        assert proc.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
        sent = time.time()
        proc.send_signal(signal.SIGINT)
        wait_until(lambda: caught_file.exists() and caught_file.read_text(), 60, what="the script's catch")
        mine = json.loads(caught_file.read_text())
        # lived on: the test's own looks at the process after the catch, until 2 s past it by the script's clock
        seen_alive = 0.0
        while seen_alive < mine["caught"] + 2.0:
            assert psutil.Process(proc.pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
            seen_alive = time.time()
            wait_until(lambda at=seen_alive: time.time() >= min(at + 0.2, mine["caught"] + 2.0), 5)
        Path(str(out) + ".go").write_text("")
        rc = wait_until(lambda: proc.poll() is not None, 60, what="the script's exit")
        ended_by = time.time()  # ended before this (polled every 0.05 s)
        del rc
    finally:
        kill_run(log)
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)
    assert proc.returncode == 3, (tmp_path / "stderr").read_text()[-3000:]
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    (hang,) = [f for f in rep["findings"] if f["kind"] == "fork-pool-hang"]
    text = " ".join(hang["text"].split())
    # the interrupted wait: from its call (after the script's `began`) to the KeyboardInterrupt it raised (after
    # the test's SIGINT, before the script's `caught`); 0.05 s for the text's rounding
    waited = hang["cost"]["hang_s"]
    assert sent - 0.05 <= mine["began"] + waited <= mine["caught"] + 0.05, (waited, mine, sent)
    told = f"interrupted by Ctrl-C (KeyboardInterrupt) after {waited:.1f} s; the process did not end then: it ran "
    assert told in text, text
    lived = float(text.split(told)[1].split()[0])
    # at least as long as the test saw it alive after the catch; at most to the end the test saw, seen late
    assert seen_alive - mine["caught"] - 0.05 <= lived <= ended_by - sent + SEEN_LATE_S, (lived, seen_alive, mine)
    assert f"it ran {lived:.1f} s more, then exited (code 3)" in text, text
    words = " ".join(rep["answer"].split())
    assert f"after {waited:.1f} s; the process lived on {lived:.1f} s after it, then exited (code 3)" in words, words
    # its pool: the workers the script counted and killed, ended by the program itself, not by its exit
    (pool,) = rep["pools"]
    assert sorted(pool["worker_pids"]) == sorted(mine["workers"]), (pool, mine)
    assert pool["ending"]["kind"] == "ended-by-creator", pool["ending"]
    assert f"main {proc.pid} ended its workers itself, sending SIGKILL (os.kill at caught.py:" in words, words


SLOWJOB = textwrap.dedent('''
    import os, time

    def hang(marker):
        with open(marker, "w") as f:  # the worker that took the job, by its own word
            f.write(str(os.getpid()))
        time.sleep(600)
''')
SIDECAR_HANG = textwrap.dedent('''
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a background job's child inherits it ignored
    import torch
    from torch._inductor.async_compile import AsyncCompile
    import slowjob

    if __name__ == "__main__":
        AsyncCompile.wait_pool_ready()  # first Triton kernel
        pool = AsyncCompile.process_pool()
        AsyncCompile().wait({"k": pool.submit(slowjob.hang, sys.argv[1])})  # blocks: the job never ends
''')


def test_a_hung_sidecar_job_names_the_worker_that_held_it(tmp_path: Path) -> None:
    """A SubprocPool job that never returns: the main's wait blocks until Ctrl-C, seconds into the job. The report
    names the worker that held the job (the job's own marker says which pid ran it; psutil, while it hung, that
    this pid was a live child of the sidecar, asleep), what the job was, and the pool's one pending job as the wait
    began; a Ctrl-C seconds into a job is told as an interrupted wait, never a hang (no record shows one: the
    crafted logs of tests/test_held_jobs.py check the 300 s bar)."""
    import psutil

    from .procs import run_until

    (tmp_path / "slowjob.py").write_text(SLOWJOB)
    script, marker, log = tmp_path / "main.py", tmp_path / "worker.txt", tmp_path / "log.jsonl"
    script.write_text(SIDECAR_HANG)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    seen: dict[str, Any] = {}

    def hung(recs: list[dict[str, Any]]) -> bool:
        """The job started in a worker and the main has waited 2 s (the log's times are this host's time.time(),
        the clock read here); then the test's own look at the worker the job names."""
        wait = next((r["ts"] for r in recs if r["event"] == "call" and r.get("target", "").endswith(
            "AsyncCompile.wait")), None)
        started = any(r["event"] == "job" and r.get("fn") == "slowjob:hang" for r in recs)
        if not (started and wait is not None and marker.exists() and marker.read_text()
                and time.time() >= wait + 2.0):
            return False
        worker = psutil.Process(int(marker.read_text()))
        seen.update(pid=worker.pid, status=worker.status(), parent=" ".join(worker.parent().cmdline()))
        return True

    res, reached = run_until([sys.executable, str(script), str(marker)], env, log, hung, timeout=180,
                             cwd=tmp_path, interrupts=1, interrupt_wait=6.0)
    assert reached, res.stderr[-3000:]
    assert seen["status"] == psutil.STATUS_SLEEPING and "compile_worker/__main__.py" in seen["parent"], seen
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    (pool,) = rep["pools"]
    assert "pool-job-hang" not in {f["kind"] for f in rep["findings"]}, rep["answer"]
    (hang,) = [f for f in rep["findings"] if f["kind"] == "pool-wait-interrupted"]
    text = " ".join(hang["text"].split())
    assert f"on its compile pool (sidecar {pool['sidecar_pid']}) was interrupted by Ctrl-C" in text, text
    assert "nothing in the log shows a hang" in text and "hang_s" not in hang["cost"], text
    assert f"worker {seen['pid']} ran slowjob:hang from " in text and "never ended it" in text, text
    assert "1 job(s) were pending in this pool as the wait began" in text, text
    assert seen["pid"] in hang["pids"] and seen["pid"] in pool["worker_pids"]
    assert [(j["worker_pid"], j["fn"]) for j in pool["unended_jobs"]] == [(seen["pid"], "slowjob:hang")]
    assert f"worker {seen['pid']} ran its job (slowjob:hang) from " in " ".join(rep["answer"].split())


LIBRARY = 'import os\nos.environ["TORCHINDUCTOR_COMPILE_THREADS"] = "1"  # a library that pins it at import\n'
OVERRIDDEN = textwrap.dedent('''
    import sys, time
    import somelib  # noqa: F401
    import torch
    import torch._inductor.config as cfg

    @torch.compile
    def f(x):
        return (x * 3).cos().relu() + x.sin()

    x = torch.randn(16, 16)
    start = time.perf_counter()
    f(x)
    took = time.perf_counter() - start
    with open(sys.argv[1], "w") as out:
        out.write(f"{cfg.compile_threads} {took}")
''')


def test_a_library_that_overwrites_compile_threads_is_told(tmp_path: Path) -> None:
    """The user exports TORCHINDUCTOR_COMPILE_THREADS=4; a library's import sets it to 1 before torch's config
    loads. The report says both values, that the library's import changed it, and what the compile then took;
    the script reads the setting in effect and times its own first call (compile and run), which bounds the
    report's compile seconds."""
    (tmp_path / "somelib.py").write_text(LIBRARY)
    script, out, log = tmp_path / "train.py", tmp_path / "probe.txt", tmp_path / "log.jsonl"
    script.write_text(OVERRIDDEN)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="4",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    res = run_python([str(script), str(out)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    in_effect, took = out.read_text().split()
    assert in_effect == "1"  # the probe: what inductor really used
    rep = report_json(log)
    (found,) = [f for f in rep["findings"] if f["kind"] == "setting-overridden"]
    text = found["text"]
    assert "started with TORCHINDUCTOR_COMPILE_THREADS=4" in text and "compile_threads was 1" in text
    seconds = float(text.split(" then took ")[1].split(" s")[0])
    assert 0 < seconds <= float(took) + 0.1, (seconds, took)
    assert "torch._inductor.config.compile_threads = 4 " in found["advice"]
    # who changed it: somelib's import (the only code that sets it here), as the imports around the change show
    assert "but the import of somelib changed it to '1'" in text, text
    assert "the import of somelib" in rep["answer"] and "then took" in rep["answer"], rep["answer"]
    # the user's question (why one process compiled) is answered first: the override leads the Answer
    assert rep["answer"].startswith("- main ") and "the import of somelib" in rep["answer"].splitlines()[0]


UNGUARDED = textwrap.dedent('''
    import torch
    from torch._inductor.async_compile import AsyncCompile
    AsyncCompile.wait_pool_ready()  # first Triton kernel
''')


def test_a_spawn_pool_under_an_unguarded_script_is_told(tmp_path: Path) -> None:
    """With the spawn start method each worker imports the main script again (as __mp_main__); a script without
    `if __name__ == "__main__":` runs its top level there, the worker dies as it starts and the pool breaks
    (the program's own stderr shows BrokenProcessPool). The Answer leads with it and the fix is the guard."""
    script, log = tmp_path / "train.py", tmp_path / "log.jsonl"
    script.write_text(UNGUARDED)
    line = next(i for i, x in enumerate(UNGUARDED.splitlines(), 1) if "# first Triton kernel" in x)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START="spawn", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script)], env, timeout=240, cwd=tmp_path)
    assert res.returncode != 0 and "BrokenProcessPool" in res.stderr, res.stderr[-3000:]  # the program's own word
    wait_for_watcher(log, timeout=30)
    rep = report_json(log)
    (found,) = [f for f in rep["findings"] if f["kind"] == "spawn-main-reimport"]
    assert found["severity"] == "problem" and "died as it started, breaking its pool" in found["text"]
    assert f"AsyncCompile.wait_pool_ready() at {script}:{line} (<module>)" in found["text"]
    assert 'if __name__ == "__main__":' in found["advice"]
    first = rep["answer"].splitlines()[0]
    assert "died as it started" in first and 'if __name__ == "__main__":' in rep["answer"].split("Fix first:")[1]


TOO_LATE = textwrap.dedent('''
    import os
    import torch
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel: the pool of the first test
    os.environ["TORCHINDUCTOR_WORKER_START"] = "fork"  # a later test's setUp

    @torch.compile
    def f(x):
        return (x * 3).cos().relu() + x.sin()

    f(torch.randn(8, 8))
    print(AsyncCompile.process_pool().__class__.__name__)
''')


def test_a_start_method_set_after_the_pool_exists_is_told(tmp_path: Path) -> None:
    """TORCHINDUCTOR_WORKER_START set after the pool exists changes nothing (the program itself prints the pool
    it still uses: a SubprocPool); the report says so and why, and what works."""
    script, log = tmp_path / "train.py", tmp_path / "log.jsonl"
    script.write_text(TOO_LATE)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"), TORCHINDUCTOR_FORCE_DISABLE_CACHES="1")
    res = run_python([str(script)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0 and res.stdout.strip() == "SubprocPool", res.stderr[-3000:]  # the program's own view
    wait_for_watcher(log, timeout=30)
    rep = report_json(log)
    (found,) = [f for f in rep["findings"] if f["kind"] == "setting-too-late"]
    assert "TORCHINDUCTOR_WORKER_START=fork was set" in found["text"] and "changed nothing" in found["text"]
    assert "kept its subprocess workers" in found["text"] and "before torch is imported" in found["advice"]


THREADS_TOO_LATE = textwrap.dedent('''
    import psutil
    import torch
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.wait_pool_ready()  # first Triton kernel: the pool, made with compile_threads=2
    torch._inductor.config.compile_threads = 4  # set in code after the pool exists
    AsyncCompile().wait({})  # the wait each compiled graph makes
    side = psutil.Process(AsyncCompile.process_pool().process.pid)
    print(len(side.children()))  # the workers the pool still has, as the program sees them
''')


def test_compile_threads_set_after_the_pool_exists_is_told(tmp_path: Path) -> None:
    """compile_threads set in code after the pool exists changes nothing (the program counts its sidecar's
    workers itself with psutil: still 2); the report says so, with the pool's own worker count, why, and what
    works (set it before the pool is made, or shut the pool down after changing it)."""
    script, log = tmp_path / "train.py", tmp_path / "log.jsonl"
    script.write_text(THREADS_TOO_LATE)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2")
    res = run_python([str(script)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    workers = int(res.stdout.strip())
    assert workers == 2
    wait_for_watcher(log, timeout=30)
    rep = report_json(log)
    (found,) = [f for f in rep["findings"] if f["kind"] == "setting-too-late"]
    assert found["text"].startswith("compile_threads=4 was set in main") and "changed nothing" in found["text"]
    assert f"kept its {workers} workers" in found["text"] and "compile_threads=4 was set" in rep["answer"]
    assert "shutdown_compile_workers()" in found["advice"] and "before the first compile" in found["advice"]


AUTOTUNE = PROBE_PRELUDE + textwrap.dedent('''
    import functools
    import torch
    from torch._inductor.autotune_process import TuningProcess

    if __name__ == "__main__":
        proc = TuningProcess(device=None)  # max-autotune's subprocess (TORCHINDUCTOR_AUTOTUNE_IN_SUBPROC=1)
        killed = proc.process.pid
        held = proc.process  # a Popen reaps its child in __del__ if dead by then: hold it, so the zombie stays
        proc.put(functools.partial(time.sleep, 600))  # a candidate whose benchmark hangs
        try:
            proc.get(timeout=1)  # the benchmark's wait: torch kills the subprocess on its timeout
        except TimeoutError:
            pass
        proc.put(functools.partial(sum, [1, 2, 3]))  # the next candidate: torch starts a new subprocess
        new = proc.process.pid
        assert proc.get(timeout=120) == 6
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            seen = f.read().count(b'"event":"memory"')
        first = pss(new)
        wait(lambda: sampled(seen + 1))  # the watcher reads the new subprocess while it idles, torch imported
        zombie = psutil.Process(killed)
        probe = {"killed": killed, "new": new, "status": zombie.status(), "ppid": zombie.ppid(),
                 "children": sorted(c.pid for c in psutil.Process().children()), "pss": [first, pss(new)]}
        proc.shutdown()
        with open(sys.argv[1], "w") as f:
            json.dump(probe, f)
''')


def test_an_autotune_subprocess_killed_on_its_timeout_is_told(tmp_path: Path) -> None:
    """max-autotune's benchmark subprocess (torch's TuningProcess) whose benchmark hangs: torch SIGKILLs it on
    get's timeout and starts another for the next candidate; kill() never waits, so the killed one stays defunct
    under the living main. The autotune subprocesses are a pool (who made it, where, its processes as ps lists
    them, its memory); the Answer tells the hang and the kill first, the zombie under it, and the setting that
    bounds what a hang costs. Checked against the script's own psutil and smaps_rollup readings."""
    script, out, log = tmp_path / "tune.py", tmp_path / "probe.json", tmp_path / "log.jsonl"
    script.write_text(AUTOTUNE)
    line = next(i for i, x in enumerate(AUTOTUNE.splitlines(), 1) if "# max-autotune's subprocess" in x)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script), str(out)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    probe = json.loads(out.read_text())
    rep = report_json(log)
    main = rep["runs"][0]["root_pid"]
    assert probe["status"] == "zombie" and probe["ppid"] == main  # ps: <defunct> under the living main
    assert probe["children"] == sorted((probe["killed"], probe["new"]))
    (pool,) = rep["pools"]
    assert pool["kind"] == "autotune" and pool["sidecar_pid"] is None
    assert pool["caller"]["file"] == str(script) and pool["caller"]["line"] == line
    assert pool["worker_pids"] == probe["children"] and pool["processes"] == 2
    (kill,) = pool["kills"]
    assert kill["pid"] == probe["killed"] and kill["replacement_pid"] == probe["new"]
    assert kill["signal"] == "SIGKILL" and kill["zombie_under_creator"] and kill["waited_s"] >= 1.0
    # memory: what the pool held at once, against the script's own smaps_rollup of the new subprocess (the
    # killed one died importing torch, the zombie holds none): 10 % either way, the readings bound the moment
    low, high = sorted(probe["pss"])
    assert pool["peak_pss_bytes"] and low * 0.9 <= pool["peak_pss_bytes"] <= high * 1.1, (pool, probe)
    answer = " ".join(rep["answer"].split())
    assert answer.startswith(f"- Autotune subprocess {probe['killed']} gave no answer to a benchmark for "), answer
    assert f"main {main} killed it with SIGKILL" in answer and f"started {probe['new']} in its place" in answer
    assert f"- {probe['killed']} stayed a zombie under main {main} (`ps` lists it <defunct>)" in answer
    assert f"made an autotune pool (2 autotune subprocesses in all, no sidecar) at {script}:{line}" in answer
    assert "No compile pool was made" not in answer
    assert "max_autotune_subproc_result_timeout_seconds" in answer.split("Fix first:")[1]


TUNING = PROBE_PRELUDE + textwrap.dedent('''
    import functools
    import torch
    from torch._inductor.autotune_process import TuningProcessPool

    def probe():
        """What ps and smaps_rollup show of this process's autotune subprocesses now: pids, threads, PSS summed."""
        kids = psutil.Process().children()
        return {"pids": sorted(c.pid for c in kids), "threads": {str(c.pid): c.num_threads() for c in kids},
                "pss": sum(pss(c.pid) for c in kids)}

    if __name__ == "__main__":
        pool = TuningProcessPool()  # max-autotune's benchmark pool (its device list is [None] without CUDA)
        proc = pool.process_queue.get()
        proc.put(functools.partial(sum, [1, 2, 3]))  # a benchmark's stand-in, run in the subprocess
        assert proc.get(timeout=120) == 6
        done = time.time()
        pool.process_queue.put(proc)
        kids, since = probe()["pids"], time.time()
        wait(lambda: read_all(kids, since), limit=60)  # the watcher read the idle subprocess, torch imported
        before, at = probe(), time.time()
        wait(lambda: read_all(kids, at), limit=60)
        after, shut = probe(), time.time()
        pool.shutdown()  # kills nothing: asks each subprocess to end and waits for it
        with open(sys.argv[1], "w") as f:
            json.dump({"before": before, "after": after, "done": done, "shut": shut, "shut_done": time.time(),
                       "alive_after": [p for p in kids if psutil.pid_exists(p)]}, f)
''')


def _run_autotune(tmp_path: Path, text: str, marker: str, timeout: int, *args: str) -> tuple[Path, int, Any, Any]:
    """Run an autotune scenario traced (args: its own, after the probe's file): its script, the line marked
    `marker` (where it makes the pool), the script's own probe readings and the report of its log."""
    script, out, log = tmp_path / "tune.py", tmp_path / "probe.json", tmp_path / "log.jsonl"
    script.write_text(text)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if marker in x)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script), str(out), *args], env, timeout=timeout, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    return script, line, json.loads(out.read_text()), report_json(log)


def test_a_tuning_process_pool_gets_the_whole_story(tmp_path: Path) -> None:
    """max-autotune's TuningProcessPool (one benchmark subprocess per device; [None] on CPU) made, given a job,
    left idle, then shut down by the program: who made it where, its processes and threads as ps shows them,
    its real memory, how it ended (the program's own shutdown, not torch's exit) and nothing left over, against
    the script's own psutil and smaps_rollup readings."""
    script, line, probe, rep = _run_autotune(tmp_path, TUNING, "# max-autotune's benchmark pool", 240)
    before, after = probe["before"], probe["after"]
    assert len(before["pids"]) == 1 and before["pids"] == after["pids"]  # the probe's own count: 1 subprocess
    (pool,) = rep["pools"]
    assert pool["kind"] == "autotune" and pool["sidecar_pid"] is None
    assert pool["caller"]["file"] == str(script) and pool["caller"]["line"] == line
    assert pool["worker_pids"] == before["pids"] and pool["processes"] == 1
    (pid,) = before["pids"]
    assert pool["counts"]["threads"][str(pid)] in {before["threads"][str(pid)], after["threads"][str(pid)]}, pool
    # real memory at once while it idled: the probe's two smaps_rollup sums bound it, 5 % either way
    low, high = sorted((before["pss"], after["pss"]))
    assert pool["held_pss_bytes"] and low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool, probe)
    # its one job, then idle until the program's shutdown, which ended it (the script saw it gone)
    t0 = rep["t0"]
    assert pool["jobs"] == 1 and t0 + pool["busy_until"] <= probe["done"] + SLACK_S, (pool, probe)
    assert pool["idle_s"] >= probe["shut"] - probe["done"] - SLACK_S, (pool, probe)
    assert pool["ending"]["kind"] == "shutdown-completed" and pool["ending"]["by"] == "user code", pool["ending"]
    assert probe["shut"] <= t0 + pool["ending"]["at"] <= probe["shut_done"] + SLACK_S, (pool, probe)
    assert probe["alive_after"] == [] and rep["leftover_count"] == 0 and rep["leftover_pids"] == []
    assert not {"exit-hang", "zombies"} & {f["kind"] for f in rep["findings"]}, rep["answer"]
    answer = " ".join(rep["answer"].split())
    assert f"made an autotune pool (1 autotune subprocess in all, no sidecar) at {script}:{line}" in answer, answer
    assert "user code shut it down" in answer, answer


PIPELINED = PROBE_PRELUDE + textwrap.dedent('''
    import torch
    import torch._inductor.config as config
    from torch._inductor.autotune_process import AutotuneProcessPool

    def probe():
        """ps and smaps_rollup of this process's autotune worker now (not spawn's resource tracker beside it)."""
        kids = [c for c in psutil.Process().children() if "resource_tracker" not in " ".join(c.cmdline())]
        return {"pids": sorted(c.pid for c in kids), "threads": {str(c.pid): c.num_threads() for c in kids},
                "pss": sum(pss(c.pid) for c in kids)}

    def last_job_end(pid):
        """When the worker's end record of its second job says it ended (None until written): its idle is told
        from that record, which a descheduled worker writes late (as it asks for its next job)."""
        with open(os.environ["WP_AUTOTRACE_LOG"], "rb") as f:
            recs = [json.loads(x) for x in f.read().split(b"\\n") if b'"event":"job"' in x and x.endswith(b"}")]
        ends = [r["ts"] for r in recs if r["pid"] == pid and r["state"] == "end"]
        return ends[1] if len(ends) > 1 else None

    if __name__ == "__main__":
        config.pipeline_max_autotune_gemm = True
        pool = AutotuneProcessPool.get_instance()  # max-autotune's pipelined GEMM autotuning
        asked = time.time()  # the script's own clock (the log's too) around each job
        pool.warm_up().result(timeout=240)  # its one spawned worker; touches CUDA only where it is available
        warmed = sent = time.time()
        assert pool.submit(time.sleep, 0.5).result(timeout=60) is None
        done = time.time()
        kids = probe()["pids"]
        wait(lambda: read_all(kids, done), limit=60)  # idle, read by the watcher, then probed
        before, at = probe(), time.time()
        wait(lambda: last_job_end(kids[0]) is not None, limit=60)
        ended = last_job_end(kids[0]) or done + float(sys.argv[3])
        # left idle past the idle-pool finding's bar from the job's end record (the log's clock is the script's),
        # not from `done` plus the record's worst lateness: read by the watcher then, probed
        wait(lambda: read_all(kids, max(at, ended + float(sys.argv[2]))), limit=60)
        after = probe()
        with open(sys.argv[1], "w") as f:
            json.dump({"before": before, "after": after, "asked": asked, "warmed": warmed, "sent": sent,
                       "done": done, "ended": ended, "exit_at": time.time()}, f)
        # no shutdown: concurrent.futures' exit join, then the pool's own atexit _shutdown
''')


def test_an_autotune_process_pool_left_to_exit_gets_the_whole_story(tmp_path: Path) -> None:
    """torch's AutotuneProcessPool (pipelined GEMM autotuning; a ProcessPoolExecutor of one spawned worker)
    made, warmed up, given a job and left idle to the program's exit: who made it where, its process and threads
    as ps shows them, its jobs as its worker recorded them (its loop is watched in the role warm_up handed it), busy
    and idle against the script's own clock, its real memory held idle against the script's smaps_rollup, the
    idle-pool advice, how it ended (concurrent.futures' exit join ended the worker before torch's atexit _shutdown
    ran; that join, which waited on the worker's teardown, is no hang), and nothing left."""
    # the script idles past the idle-pool finding's bar counted from its job's end record, which may come late
    script, line, probe, rep = _run_autotune(tmp_path, PIPELINED, "# max-autotune's pipelined", 300, str(IDLE_POOL_S),
                                             str(SLACK_S))
    before, after = probe["before"], probe["after"]
    assert len(before["pids"]) == 1 and before["pids"] == after["pids"]
    (pool,) = rep["pools"]
    assert pool["kind"] == "autotune" and pool["sidecar_pid"] is None
    assert pool["caller"]["file"] == str(script) and pool["caller"]["line"] == line
    assert pool["worker_pids"] == before["pids"] and pool["processes"] == 1
    (pid,) = before["pids"]
    assert pool["counts"]["threads"][str(pid)] in {before["threads"][str(pid)], after["threads"][str(pid)]}, pool
    # each job as the worker took and ended it, within the script's own marks around its call and its result
    # (an end record is written as the worker asks for its next job: a descheduled worker writes it late)
    t0 = rep["t0"]
    recs = [json.loads(x) for x in (tmp_path / "log.jsonl").read_text().splitlines() if x.strip()]
    jobs = [(r["state"], r["ts"], r.get("fn")) for r in recs if r["event"] == "job" and r["pid"] == pid]
    (_, warm_a, warm_fn), (_, warm_b, _), (_, job_a, job_fn), (_, job_b, _) = jobs
    assert [s for s, _, _ in jobs] == ["start", "end"] * 2, jobs
    assert warm_fn.endswith(":_init_autotune_subprocess") and job_fn == "time:sleep", jobs
    assert probe["asked"] <= warm_a <= warm_b <= probe["warmed"] + SLACK_S, (jobs, probe)
    assert probe["sent"] <= job_a and job_a + 0.5 <= job_b <= probe["done"] + SLACK_S, (jobs, probe)
    # busy while a job ran, then idle (known: every job handed was recorded) at least until the script's readings;
    # the worker's import before its first job (queued all along) is no idle gap
    assert pool["idle_known"] is True and pool["jobs"] == 2 and pool["idle_gaps"] == [], pool
    assert probe["sent"] + 0.5 <= t0 + pool["busy_until"] <= probe["done"] + SLACK_S, (pool, probe)
    assert probe["exit_at"] >= probe["ended"] + IDLE_POOL_S, probe  # the script idled past the bar
    assert pool["idle_s"] >= max(probe["exit_at"] - probe["done"] - SLACK_S, IDLE_POOL_S), (pool, probe)
    assert t0 + pool["busy_until"] + pool["idle_s"] <= t0 + pool["ending"]["at"], pool
    # real memory held idle, at once: the probe's two smaps_rollup sums bound it, 5 % either way
    low, high = sorted((before["pss"], after["pss"]))
    assert pool["held_pss_bytes"] and low * 0.95 <= pool["held_pss_bytes"] <= high * 1.05, (pool, probe)
    assert 0 < pool["idle_mib_s"] <= pool["held_pss_bytes"] / MIB * pool["idle_s"], pool  # its area under the peak
    main = rep["runs"][0]["root_pid"]
    assert pool["ending"]["kind"] == "ended-at-exit" and pool["ending"]["by"] == f"main {main}'s exit", pool["ending"]
    assert t0 + pool["ending"]["at"] >= probe["exit_at"], (pool, probe)
    assert rep["leftover_count"] == 0 and "exit-hang" not in {f["kind"] for f in rep["findings"]}, rep["answer"]
    (idle,) = [f for f in rep["findings"] if f["kind"] == "idle-pool"]
    assert idle["pids"] == [pid] and "AutotuneProcessPool.shutdown_instance()" in idle["advice"], idle
    answer = " ".join(rep["answer"].split())
    assert f"made an autotune pool (1 autotune subprocess in all, no sidecar) at {script}:{line}" in answer, answer
    assert f"its subprocess ended as main {main} exited" in answer and "idle not known" not in answer, answer
    assert f"idle {pool['idle_s']:.1f} s after its last job" in answer, answer
    assert f"holding {round(pool['held_pss_bytes'] / MIB)} MiB real memory (PSS)" in answer, answer


FORK_CHILD = textwrap.dedent('''
    import multiprocessing as mp
    import sys
    import time

    import torch
    from torch._inductor.async_compile import AsyncCompile


    def work():
        pool = AsyncCompile.process_pool()  # first Triton kernel
        pool.submit(time.sleep, 3)  # a compile job still running as the child's work returns


    if __name__ == "__main__":
        child = mp.get_context("fork").Process(target=work)
        child.start()
        start = time.monotonic()
        child.join()
        with open(sys.argv[1], "w") as f:
            f.write(f"{child.pid} {time.monotonic() - start:.3f}")
''')


def test_a_fork_pools_shutdown_at_a_childs_exit_is_a_child_exit_wait(tmp_path: Path) -> None:
    """A multiprocessing child makes a fork pool (TORCHINDUCTOR_WORKER_START=fork) and returns while its job runs:
    at its exit multiprocessing's finalizer calls the pool's ProcessPoolExecutor.shutdown (torch 2.13 registers
    it), which waits for the job, and the parent's join() waits as long. The finding says so, as it does for a
    SubprocPool's shutdown; its seconds are bounded by the parent's own timing of the join."""
    script, out, log = tmp_path / "train.py", tmp_path / "join.txt", tmp_path / "log.jsonl"
    script.write_text(FORK_CHILD)
    line = next(i for i, x in enumerate(FORK_CHILD.splitlines(), 1) if "# first Triton kernel" in x)
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), TORCHINDUCTOR_COMPILE_THREADS="2",
                    TORCHINDUCTOR_WORKER_START="fork", TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    res = run_python([str(script), str(out)], env, timeout=240, cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    wait_for_watcher(log, timeout=30)
    pid, joined = out.read_text().split()
    rep = report_json(log)
    (found,) = [f for f in rep["findings"] if f["kind"] == "child-exit-wait"]
    assert found["pids"] == [int(pid)]
    assert found["text"].startswith(f"Forked child {pid} (train.py) spent ")
    assert "in ProcessPoolExecutor.shutdown at its exit" in found["text"]
    assert f"the pool it made at {script}:{line} (work)" in found["text"]
    # the job ran 3 s: well over the 1 s bar, and never longer than the parent's own join
    assert 1.5 <= found["cost"]["exit_wait_s"] <= float(joined), (found, joined)
