"""The watcher process end to end: invisible to the host, and what it records (no torch).

Differential tests run one program untraced, guard-only and traced, and
compare exit code, stdout and stderr. The rest read the raw watcher records
(`tree`, `leftover`, `watcher_start`, `watcher_exit`), not the report.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from wp_autotrace.runtime.sink import MAX_RECORD_BYTES
from wp_autotrace.runtime.spawn import ARGV_MARK, WATCHER_ARGS, from_argv, to_argv

from .conftest import WaitTimeout, clean_env, events, read_log, run_python, wait_for_watcher, wait_until

MODES = ("untraced", "guard", "traced")


def mode_env(mode: str, log: Path, **extra: str) -> dict[str, str]:
    if mode == "untraced":
        return clean_env(**extra)
    if mode == "guard":
        return clean_env(WP_AUTOTRACE_GUARD="nested-pools", **extra)
    return clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), **extra)


def differential(code: str, tmp_path: Path, args: tuple[str, ...] = (), timeout: float = 30) -> list[Any]:
    """Run code in the three modes; assert identical (exit code, stdout, stderr); the traced log's records."""
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent(code))
    log = tmp_path / "run.jsonl"
    results = {m: run_python([*args, str(script)], mode_env(m, log), timeout=timeout) for m in MODES}
    seen = {m: (r.returncode, r.stdout, r.stderr) for m, r in results.items()}
    assert seen["guard"] == seen["untraced"], seen
    assert seen["traced"] == seen["untraced"], seen
    assert "killed after timeout" not in results["untraced"].stderr
    return wait_for_watcher(log)


def test_join_all_threads_and_active_count(tmp_path: Path) -> None:
    """The join-every-thread idiom returns and active_count() is the host's own, in every mode."""
    recs = differential('''
        import threading
        t = threading.Thread(target=lambda: None)
        t.start()
        for th in threading.enumerate():
            if th is not threading.main_thread():
                th.join()
        print("threads", threading.active_count(), [th.name for th in threading.enumerate()])
    ''', tmp_path)
    assert events(recs, "watcher_start"), "the traced run had no watcher"


def test_fork_warns_nothing(tmp_path: Path) -> None:
    """os.fork() in the root: no 'multi-threaded' DeprecationWarning (3.12+), in every mode."""
    differential('''
        import os
        pid = os.fork()
        if pid == 0:
            print("child", flush=True)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
        print("parent", os.waitstatus_to_exitcode(status))
    ''', tmp_path, args=("-W", "always::DeprecationWarning"))


def test_waitpid_all_returns_like_untraced(tmp_path: Path) -> None:
    """A host that reaps every child (waitpid(-1) until ECHILD) gets exactly its own children, round after round,
    even one that had ended (a zombie) before the host spawned and forked again, when the tracer's own code (its
    fork hooks, its spawn and exec patches) runs.

    Every Popen is held: a Popen dropped while its child runs is polled by subprocess itself (its __del__, and
    each later Popen's _cleanup), which reaps that child once it has ended, in every mode; holding none, as this
    test once did, made its count a race between the child's exit and the next Popen (seen on 3.12, untraced
    as well as traced)."""
    differential('''
        import os, signal, subprocess, sys

        def reap_all():
            reaped = set()
            while True:
                try:
                    reaped.add(os.waitpid(-1, 0)[0])
                except ChildProcessError:
                    return reaped

        got = []
        try:
            got.append(os.waitpid(-1, os.WNOHANG))  # nothing of ours is its child, not even a zombie
        except ChildProcessError:
            got.append("no children")
        held, rounds = [], []
        for _ in range(5):
            first = subprocess.Popen([sys.executable, "-c", "pass"])
            os.waitid(os.P_PID, first.pid, os.WEXITED | os.WNOWAIT)  # it has ended: a zombie, the host's to reap
            second = subprocess.Popen([sys.executable, "-c", "pass"])
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            held += [first, second]
            rounds.append(reap_all() == {first.pid, second.pid, pid})
        print(got, rounds, signal.getsignal(signal.SIGCHLD))
    ''', tmp_path)


def test_sigchld_ignored_by_the_parent(tmp_path: Path) -> None:
    """SIGCHLD inherited as ignored (children reaped by the kernel): no warning, same output, watcher runs."""
    script = tmp_path / "host.py"
    script.write_text("import signal, subprocess\n"
                      "print(signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN, subprocess.call(['true']))\n")
    log = tmp_path / "run.jsonl"
    seen = {}
    for mode in MODES:
        res = subprocess.run([sys.executable, str(script)], env=mode_env(mode, log), capture_output=True, text=True,
                             timeout=30, preexec_fn=lambda: signal.signal(signal.SIGCHLD, signal.SIG_IGN))
        seen[mode] = (res.returncode, res.stdout, res.stderr)
    assert seen["traced"] == seen["guard"] == seen["untraced"] == (0, "True 0\n", ""), seen
    assert events(wait_for_watcher(log), "watcher_start")


def test_gevent_patch_all(tmp_path: Path) -> None:
    """gevent's monkey.patch_all(): no KeyError traceback from threading at exit, in every mode."""
    pytest.importorskip("gevent")
    differential('''
        from gevent import monkey
        monkey.patch_all()
        import threading, time
        t = threading.Thread(target=time.sleep, args=(0.05,))
        t.start()
        t.join()
        print("gevent ok", threading.active_count())
    ''', tmp_path)


def start_root(code: str, tmp_path: Path, **extra: str) -> tuple[subprocess.Popen[str], Path]:
    """A traced root in its own session (the caller kills the session)."""
    script = tmp_path / "root.py"
    script.write_text(textwrap.dedent(code))
    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), **extra)
    proc = subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    return proc, log


def kill_session(proc: subprocess.Popen[str]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.communicate(timeout=30)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rpartition(b")")[2].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def watcher_pid(log: Path) -> int:
    found = wait_until(lambda: [r["pid"] for r in read_log(log, partial=True) if r["event"] == "watcher_start"], 15,
                       what="the watcher_start record")
    return int(found[0])


# A traced program calls wait_until_sampled() to go on once the watcher has sampled it: the watcher's `tree`
# record lists its pid. The event, not a sleep that a loaded box outlasts. Without a log (untraced, guard-only)
# there is nothing to wait for, so a differential run prints the same in every mode. Bounded: a watcher that
# never samples ends the program with a message (the test then fails on it), never a hang.
SAMPLED_WAIT_S = 20  # well inside the runs' 30 s
WAIT_SAMPLED = textwrap.dedent(f"""
    def wait_until_sampled():
        import json, os, sys, time
        log = os.environ.get("WP_AUTOTRACE_LOG")
        deadline = time.monotonic() + {SAMPLED_WAIT_S}
        while log and time.monotonic() < deadline:
            try:
                with open(log, "rb") as f:
                    lines = [line for line in f if line.startswith(b'{{"') and b'"tree"' in line]
            except OSError:
                lines = []
            for line in lines:
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue  # a line being written
                if any(e["pid"] == os.getpid() for e in rec.get("started", [])):
                    return
            time.sleep(0.02)
        if log:
            sys.exit("the watcher never listed this process in a tree record")
""")


def test_watcher_is_no_child_of_the_host_and_shows_in_ps(tmp_path: Path) -> None:
    """The watcher: not the root's child, its own session, niced, `wp-autotrace-watch RUN` in argv, stdio on
    /dev/null and no fd of the log held between its reads and writes."""
    proc, log = start_root('''
        import time
        time.sleep(2)
    ''', tmp_path)
    try:
        pid = watcher_pid(log)
        start = events(read_log(log), "process_start")[0]
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        i = argv.index(ARGV_MARK.encode())
        assert argv[i + 1].decode() == start["run"]
        # The named contract read back from what the watcher really got (spawn.to_argv's order).
        got = from_argv([a.decode() for a in argv[i:-1]])  # /proc's cmdline ends in a NUL: a last empty item
        assert (got["run"], int(got["root_pid"]), got["log"]) == (start["run"], proc.pid, str(log))
        assert "-S" in [a.decode() for a in argv[:i]]  # no site: the .pth never runs in it
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rpartition(b")")[2].split()
        ppid, sid, nice = int(fields[1]), int(fields[3]), int(fields[16])
        assert ppid != proc.pid and sid not in (proc.pid, os.getsid(0)) and nice > 0
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert b"WP_AUTOTRACE" not in f.read()
        assert all(os.readlink(f"/proc/{pid}/fd/{n}") == "/dev/null" for n in (0, 1, 2))

        def log_not_held() -> bool:  # between its reads and writes (a tick holds it for microseconds)
            names = set()
            for n in os.listdir(f"/proc/{pid}/fd"):
                try:
                    names.add(os.readlink(f"/proc/{pid}/fd/{n}"))
                except OSError:
                    continue  # closed while listed
            return str(log) not in names

        wait_until(log_not_held, 10, what="no fd of the log held by the watcher while the root runs")
        assert proc.poll() is None  # seen while the root still ran
    finally:
        kill_session(proc)


def test_watcher_args_round_trip() -> None:
    """to_argv/from_argv: every name once, in WATCHER_ARGS's order; floats read back exactly; a short argv refused."""
    values: dict[str, object] = {name: name.upper() for name in WATCHER_ARGS}
    values.update(root_ct=1234.5678901234, interval=0.1, log_fd=3)
    argv = to_argv(values)
    assert argv[0] == ARGV_MARK and len(argv) == len(WATCHER_ARGS) + 1
    back = from_argv(argv)
    assert float(back["root_ct"]) == values["root_ct"] and back["log_fd"] == "3" and back["run"] == "RUN"
    with pytest.raises(ValueError):
        from_argv(argv[:-1])
    with pytest.raises(ValueError):
        to_argv({k: v for k, v in values.items() if k != "export"})


LEFTOVER_AFTER_KILL_S = 10


@pytest.mark.timing
def test_root_sigkill_orphans_in_leftover(tmp_path: Path) -> None:
    """SIGKILL the root: its orphan's pid is in a `leftover` record (how=root-killed) within seconds."""
    proc, log = start_root('''
        import subprocess, time
        p = subprocess.Popen(["sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(p.pid, flush=True)
        time.sleep(30)
    ''', tmp_path)
    try:
        assert proc.stdout is not None
        orphan = int(proc.stdout.readline())
        watcher_pid(log)
        # A member is a process seen under the root (descent): kill once the watcher has seen it.
        wait_until(lambda: orphan in tree_started(read_log(log)), 15, what=f"a tree record listing {orphan}")
        proc.kill()
        proc.wait(10)
        # "within seconds": the wait's bound (it fails past 10 s); no clock of the test's is compared
        recs = wait_for_watcher(log, LEFTOVER_AFTER_KILL_S, event="leftover")
        (left,) = events(recs, "leftover")
        assert left["how"] == "root-killed" and left["pids"] == [orphan] and left["count"] == 1
        assert left["role"] == "watcher" and left["run"] == events(recs, "process_start")[0]["run"]
        assert left["procs"][0]["name"] == "sleep"
    finally:
        kill_session(proc)


@pytest.mark.timing  # the watcher leaves within 1 s of the run's last end, on its own clock
def test_root_exit_then_run_end_then_watcher_gone(tmp_path: Path) -> None:
    """Root exits normally leaving a child: leftover how=root-exit; the watcher leaves when the child ends."""
    proc, log = start_root('''
        import subprocess
        print(subprocess.Popen(["sleep", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)
    ''', tmp_path, WP_AUTOTRACE_LINGER="30")
    try:
        out, _ = proc.communicate(timeout=30)
        child = int(out)
        wpid = watcher_pid(log)
        recs = wait_for_watcher(log, 15)
        (left,) = events(recs, "leftover")
        assert left["how"] == "root-exit" and left["pids"] == [child]
        (done,) = events(recs, "watcher_exit")
        assert done["reason"] == "run-ended"
        ended = {e["pid"]: e["end"] for t in events(recs, "tree") for e in t["ended"]}
        assert child in ended and done["ts"] - ended[child] < 1.0  # gone soon after the run's last process
        assert [t["final"] for t in events(recs, "tree")][-1] is True
        assert wpid not in tree_started(recs)  # never part of the run
        assert {r["pid"] for r in recs if r["event"] in ("tree", "leftover")} == {wpid}
        wait_until(lambda: not alive(wpid), 5, what=f"the watcher {wpid} gone")
    finally:
        kill_session(proc)


def test_linger_bounds_the_watcher(tmp_path: Path) -> None:
    """A leftover that outlives WP_AUTOTRACE_LINGER: leftover how=linger-end, then the watcher exits."""
    proc, log = start_root('''
        import subprocess
        print(subprocess.Popen(["sleep", "30"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).pid)
    ''', tmp_path, WP_AUTOTRACE_LINGER="1")
    out = "0"
    try:
        out, _ = proc.communicate(timeout=30)
        wpid = watcher_pid(log)
        recs = wait_for_watcher(log, 10)
        assert [r["how"] for r in events(recs, "leftover")] == ["root-exit", "linger-end"]
        assert events(recs, "leftover")[-1]["pids"] == [int(out)]
        assert events(recs, "watcher_exit")[0]["reason"] == "linger-end"
        wait_until(lambda: not alive(wpid), 5, what=f"the watcher {wpid} gone")
    finally:
        if int(out):
            os.kill(int(out), signal.SIGKILL)
        kill_session(proc)


def test_log_removed_watcher_leaves(tmp_path: Path) -> None:
    """The log removed while the run goes on: the watcher exits at once."""
    proc, log = start_root('''
        import time
        time.sleep(30)
    ''', tmp_path)
    try:
        wpid = watcher_pid(log)
        log.unlink()
        wait_until(lambda: not alive(wpid), 5, what=f"the watcher {wpid} gone")
        assert not log.exists()
    finally:
        kill_session(proc)


def tree_started(recs: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {p["pid"]: p for t in events(recs, "tree") for p in t["started"]}


def test_thread_forked_children_and_end_time(tmp_path: Path) -> None:
    """Children started by a non-main thread are seen; an untraced child's end is within one interval."""
    proc, log = start_root(WAIT_SAMPLED + textwrap.dedent('''
        import json, subprocess, threading, time
        wait_until_sampled()  # the watcher has seen the root single-threaded
        pids = []
        def start():
            for _ in range(3):
                pids.append(subprocess.Popen(["sleep", "0.6"]).pid)
        t = threading.Thread(target=start)
        t.start()
        t.join()
        p = subprocess.Popen(["sleep", "1.8"])
        p.wait()
        print(json.dumps({"threaded": pids, "sleeper": p.pid}))
        time.sleep(0.5)
    '''), tmp_path, WP_AUTOTRACE_SAMPLE_INTERVAL="0.1")
    try:
        out, err = proc.communicate(timeout=30)
        import json

        facts = json.loads(out)
        recs = wait_for_watcher(log, 15)
        started = tree_started(recs)
        assert set(facts["threaded"]) <= set(started), (facts, sorted(started))
        ends = {e["pid"]: e["end"] for t in events(recs, "tree") for e in t["ended"]}
        end, ct = ends[facts["sleeper"]], started[facts["sleeper"]]["create_time"]
        (left,) = events(recs, "leftover")
        # The end is the first sample without it. Never before its death: `sleep 1.8` cannot end sooner than
        # 1.8 s after its create time (2 decimals). And at the first sample after it, read on the watcher's own
        # clock: before the sample that saw the root gone (its leftover), though the root lived 0.5 s longer.
        # A niced watcher late under load is late for both; one that looked at the sleeper only after a
        # back-off would write its end after the root's. No bound on the test's wall clock.
        tick = 1 / os.sysconf("SC_CLK_TCK")  # a create time is whole ticks, then 2 decimals
        assert ct + 1.8 - 1.5 * tick <= end < left["ts"], (ct, end, left["ts"])
        root = events(recs, "process_start")[0]
        assert started[root["pid"]]["create_time"] == root["create_time"]  # one identity in both records
    finally:
        kill_session(proc)


def test_many_leftovers_all_recorded(tmp_path: Path) -> None:
    """150 leftovers with ~300-char command lines (and their 150 children): every one in `leftover` records."""
    pad = "x" * 280
    proc, log = start_root(f'''
        import subprocess
        for _ in range(150):
            subprocess.Popen(["sh", "-c", "sleep 30; :", "{pad}"], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        print("started")
    ''', tmp_path)
    try:
        out, err = proc.communicate(timeout=60)
        assert out == "started\n", err
        recs = wait_for_watcher(log, 30, event="leftover")
        # the watcher lives on while the leftovers do: each read of the log is of one still being written
        wait_until(lambda: len(events(read_log(log, partial=True), "leftover")) >= events(
            read_log(log, partial=True), "leftover")[0].get("parts", 1), 10, what="every part of the leftover record")
        recs = read_log(log, partial=True)
        parts = [r for r in events(recs, "leftover") if r["how"] == "root-exit"]
        assert {r.get("parts", 1) for r in parts} == {len(parts)} and len(parts) > 1
        procs = [p for r in parts for p in r["procs"]]
        assert all(r["count"] == 300 for r in parts) and len(procs) == 300
        assert sorted(p["pid"] for p in procs) == sorted(pid for r in parts for pid in r["pids"])
        # The shells are the ones whose parent (the root) is gone; by name, a child forked by sh and not yet
        # exec'd into sleep at its last stat read would count as a shell.
        pids = {p["pid"] for p in procs}
        shells = {p["pid"] for p in procs if p["ppid"] not in pids}
        assert len(shells) == 150 and all(p["cmd"].endswith(pad) for p in procs if p["pid"] in shells)
        assert sum(1 for p in procs if p["ppid"] in shells) == 150
        with open(log, "rb") as f:
            assert all(len(line) <= MAX_RECORD_BYTES and b'"truncated"' not in line for line in f)
    finally:
        kill_session(proc)


@pytest.mark.slow
def test_a_thousand_processes_none_cut(tmp_path: Path) -> None:
    """1,000 processes in the run (a 2-core box; the issue asks 3,000 where feasible): each in a tree record."""
    proc, log = start_root('''
        import subprocess, time
        kids = [subprocess.Popen(["sleep", "20"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                for _ in range(1000)]
        print(" ".join(str(k.pid) for k in kids), flush=True)
        time.sleep(2)
    ''', tmp_path)
    try:
        out, err = proc.communicate(timeout=120)
        kids = {int(p) for p in out.split()}
        assert len(kids) == 1000, err
        recs = wait_for_watcher(log, 30, event="leftover")
        assert kids <= set(tree_started(recs))
        assert max(t["count"] for t in events(recs, "tree")) == 1001
    finally:
        kill_session(proc)


# The late poster starts after the root exits and sleeps 1 s first: generous on a loaded 2-core box.
LATE_POST_WAIT_S = 30


def test_guard_notice_file_relative_tmpdir_and_late_post(tmp_path: Path) -> None:
    """Guard notice: absolute path under a relative TMPDIR, printed by the root at exit; a post
    after the root exited creates nothing."""
    (tmp_path / "rel").mkdir()
    code = textwrap.dedent('''
        import os, subprocess, sys
        post = ("import os, sys, time; from wp_autotrace.runtime.guard import post_notice;"
                "time.sleep(float(sys.argv[1]));"
                "post_notice({'pid': os.getpid(), 'role': 'compile-sidecar', 'target': 'x:AsyncCompile.warm_pool'});"
                "print(os.environ['WP_AUTOTRACE_NOTICE']);"
                "sys.argv[2:] and open(sys.argv[2], 'w').close()")  # the marker: posted (or tried to)
        print(subprocess.run([sys.executable, "-c", post, "0"], capture_output=True, text=True).stdout.strip())
        subprocess.Popen([sys.executable, "-c", post, "1.0", "late-posted"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    ''')
    env = clean_env(WP_AUTOTRACE_GUARD="nested-pools", TMPDIR="rel")
    res = run_python(["-c", code], env, cwd=tmp_path, timeout=30)
    path = Path(res.stdout.strip())
    assert path.is_absolute() and path.parent.parent == tmp_path / "rel", res.stdout  # in its private dir
    assert res.returncode == 0
    assert res.stderr.startswith("wp-autotrace: guard nested-pools refused AsyncCompile.warm_pool"), res.stderr
    assert len(res.stderr.splitlines()) == 1
    wait_until((tmp_path / "late-posted").exists, LATE_POST_WAIT_S, what="the late poster's marker")
    assert not list((tmp_path / "rel").iterdir())


def test_guard_root_that_execs_itself(tmp_path: Path) -> None:
    """Guard on, a root that execs a new interpreter of itself: stderr as untraced, the new image still
    prints a refusal posted after the exec, and no notice file is left."""
    (tmp_path / "tmp").mkdir()
    code = textwrap.dedent('''
        import os, subprocess, sys
        if len(sys.argv) == 1:
            os.execv(sys.executable, [sys.executable, "-c", CODE, "again"])
        post = ("from wp_autotrace.runtime.guard import post_notice;"
                "post_notice({'pid': 7, 'role': 'compile-sidecar', 'target': 'x:AsyncCompile.warm_pool'})")
        subprocess.run([sys.executable, "-c", post])
        print("done")
    ''')
    code = "CODE = " + repr(code) + "\n" + code
    plain = run_python(["-c", code], clean_env(TMPDIR=str(tmp_path / "tmp")), timeout=30)
    guarded = run_python(["-c", code], clean_env(WP_AUTOTRACE_GUARD="nested-pools", TMPDIR=str(tmp_path / "tmp")),
                         timeout=30)
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "done\n", "")
    assert (guarded.returncode, guarded.stdout) == (0, "done\n")
    assert guarded.stderr.startswith("wp-autotrace: guard nested-pools refused AsyncCompile.warm_pool"), \
        guarded.stderr
    assert len(guarded.stderr.splitlines()) == 1
    assert not list((tmp_path / "tmp").iterdir())


def test_interval_clamped_and_linger_validated(log: Path) -> None:
    """A tiny interval is clamped to 0.01 s with one warning; a bad LINGER warns and takes the default."""
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log), WP_AUTOTRACE_SAMPLE_INTERVAL="1e-9",
                    WP_AUTOTRACE_LINGER="soon")
    res = run_python(["-c", "print('ran')"], env)
    assert res.stdout == "ran\n" and len(res.stderr.splitlines()) == 2, res.stderr
    start = events(wait_for_watcher(log), "watcher_start")[0]
    assert start["interval"] == 0.01 and start["linger"] == 60


def test_fast_orphan_found_by_its_process_start(tmp_path: Path) -> None:
    """Root not leading its group (started by a shell), a traced grandchild orphaned within a millisecond,
    the root gone before the watcher's first sample: found through its process_start, left over."""
    script = tmp_path / "root.py"
    script.write_text(textwrap.dedent('''
        import os, time
        if os.fork() == 0:
            if os.fork() == 0:
                time.sleep(4)
            os._exit(0)
        os.wait()
    '''))
    log = tmp_path / "run.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    # sh leads the session and the group; the root is a member only
    proc = subprocess.Popen(["sh", "-c", f"{sys.executable} {script}; sleep 2"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    try:
        recs = wait_for_watcher(log, 20, event="leftover")
        starts = events(recs, "process_start")
        root = starts[0]["pid"]
        child = [s["pid"] for s in starts if s["ppid"] == root]
        grandchild = [s["pid"] for s in starts if s["ppid"] in child]
        assert len(grandchild) == 1, starts
        (left,) = [r for r in events(recs, "leftover") if r["how"] == "root-exit"]
        assert left["pids"] == grandchild
    finally:
        kill_session(proc)


def test_command_lines_are_redacted(tmp_path: Path) -> None:
    """Secret option values and secret environment values in a child's command line never reach the log."""
    proc, log = start_root('''
        import subprocess
        subprocess.run(["sh", "-c", "sleep 0.5", "x", "--api-key", "key-SECRET-1", "--note=env-SECRET-2"])
    ''', tmp_path, HF_TOKEN="env-SECRET-2")
    try:
        proc.communicate(timeout=30)
        recs = wait_for_watcher(log, 15)
        shells = [p for p in tree_started(recs).values() if p["name"] == "sh"]
        assert shells and shells[0]["cmd"] == "sh -c sleep 0.5 x --api-key *** --note=***", shells
        assert b"SECRET" not in log.read_bytes()
    finally:
        kill_session(proc)


def test_pid_one_root_starts_no_watcher(tmp_path: Path) -> None:
    """A root that is pid 1 (a container's init) would adopt the watcher: none is started, the log says why,
    and a host that waits for all its children sees none (as untraced) instead of waiting forever."""
    import shutil

    unshare = shutil.which("unshare")
    if os.geteuid() != 0 or unshare is None:
        pytest.skip("needs root and unshare (a pid namespace)")
    script = tmp_path / "init.py"
    script.write_text(textwrap.dedent('''
        import os
        try:
            print(os.wait())
        except ChildProcessError:
            print("no children")
    '''))
    log = tmp_path / "init.jsonl"

    def run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        # Bounded, and the session killed: before the fix the traced init waited for the watcher forever.
        proc = subprocess.Popen([unshare, "-fp", "--mount-proc", sys.executable, str(script)], env=env, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            out, err = "", "[timed out]"
        finally:
            kill_session(proc)
        return subprocess.CompletedProcess(proc.args, proc.wait(), out, err)

    plain = run(clean_env())
    traced = run(clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)))
    assert (plain.returncode, plain.stdout, plain.stderr) == (0, "no children\n", "")
    assert (traced.returncode, traced.stdout, traced.stderr) == (plain.returncode, plain.stdout, plain.stderr)
    recs = read_log(log)
    assert [r["pid"] for r in events(recs, "process_start")] == [1]
    assert any(r["where"] == "watcher" and "pid 1" in r["error"] for r in events(recs, "tracer_error"))
    assert not events(recs, "watcher_start")


def possible_of(recs: list[dict[str, Any]]) -> dict[int, str]:
    return {p["pid"]: p["via"] for t in events(recs, "tree") for p in t.get("possible", [])}


def kill_pids(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def test_tasks_in_task_zeros_group_are_not_the_run(tmp_path: Path) -> None:
    """slurmstepd's layout: a launcher forks 4 tasks and puts them all in task 0's process group; only task 0
    is the traced root. Tasks 1-3 outlive it: never started, never left over; listed as `possible` (group)."""
    root = tmp_path / "task0.py"
    root.write_text("import time\ntime.sleep(1)\n")
    log = tmp_path / "run.jsonl"
    launcher = tmp_path / "launcher.py"
    launcher.write_text(textwrap.dedent(f'''
        import json, os, sys
        env = dict(os.environ, WP_AUTOTRACE="1", WP_AUTOTRACE_LOG={str(log)!r})
        task0 = os.fork()
        if task0 == 0:
            os.setpgid(0, 0)
            os.execve(sys.executable, [sys.executable, {str(root)!r}], env)
        try:
            os.setpgid(task0, task0)
        except OSError:
            pass  # the task did it first
        tasks = []
        for _ in range(3):
            pid = os.fork()
            if pid == 0:
                os.setpgid(0, task0)
                os.execvp("sleep", ["sleep", "30"])
            try:
                os.setpgid(pid, task0)
            except OSError:
                pass
            tasks.append(pid)
        print(json.dumps(tasks), flush=True)
        os.waitpid(task0, 0)
    '''))
    proc = subprocess.Popen([sys.executable, str(launcher)], env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    tasks: list[int] = []
    try:
        assert proc.stdout is not None
        tasks = json.loads(proc.stdout.readline())
        recs = wait_for_watcher(log, 20)
        assert all(alive(t) for t in tasks)  # the other ranks still run
        assert not set(tasks) & set(tree_started(recs)), tree_started(recs)
        left = [p for r in events(recs, "leftover") for p in r["pids"]]
        assert not set(tasks) & set(left), left
        assert events(recs, "watcher_exit")[0]["reason"] == "run-ended"
        assert possible_of(recs) == {t: "group" for t in tasks}
        assert tree_started(recs)[events(recs, "process_start")[0]["pid"]]["via"] == "root"
    finally:
        kill_pids(tasks)
        kill_session(proc)


def test_pager_of_a_job_control_pipeline_is_not_the_run(tmp_path: Path) -> None:
    """`set -m; python train.py | pager`: the pager leads no group of its own but shares the root's; it
    outlives the root and is not a leftover."""
    root = tmp_path / "train.py"
    root.write_text("print('step 1')\n")
    log = tmp_path / "run.jsonl"
    pager = "cat >/dev/null; echo $$ > pager.pid; exec sleep 30"
    # Only the root is traced: WP_AUTOTRACE reaches python alone (the pager runs with a clean env).
    script = f"set -m; env WP_AUTOTRACE=1 WP_AUTOTRACE_LOG={log} {sys.executable} {root} | sh -c '{pager}'"
    proc = subprocess.Popen(["bash", "-c", script], env=clean_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True, text=True)
    pager_pid = 0
    try:
        pidfile = tmp_path / "pager.pid"
        wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 20, what="the pager's pid file")
        pager_pid = int(pidfile.read_text())
        recs = wait_for_watcher(log, 20)
        assert alive(pager_pid)
        starts = events(recs, "process_start")
        assert [s["argv"][-1] for s in starts] == [str(root)]
        with open(f"/proc/{pager_pid}/stat", "rb") as f:
            assert int(f.read().rpartition(b")")[2].split()[2]) == starts[0]["pid"]  # the root's group
        assert pager_pid not in tree_started(recs)
        assert not [p for r in events(recs, "leftover") for p in r["pids"]]
        assert events(recs, "watcher_exit")[0]["reason"] == "run-ended"
        assert possible_of(recs) == {pager_pid: "group"}
    finally:
        kill_pids([pager_pid] if pager_pid else [])
        kill_session(proc)


def test_root_records_what_is_alive_below_it_at_exit(tmp_path: Path) -> None:
    """The root's process_exit lists its live descendants (a first verdict, before the watcher's leftover),
    with the create times the watcher writes; one that the watcher never sampled still joins by it."""
    proc, log = start_root('''
        import subprocess, time
        child = subprocess.Popen(["sh", "-c", "sleep 30 & wait"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # until the shell has forked its sleep
            with open(f"/proc/{child.pid}/task/{child.pid}/children") as f:
                if f.read().strip():
                    break
            time.sleep(0.001)
        print(child.pid, flush=True)
    ''', tmp_path)
    try:
        out, _ = proc.communicate(timeout=30)
        child = int(out)
        recs = wait_for_watcher(log, 15, event="leftover")
        (done,) = [r for r in events(recs, "process_exit") if r["role"] == "main"]
        below = {p["pid"]: p for p in done["below"]}
        assert done["below_count"] == 2 and set(below) - {child} and below[child]["name"] == "sh"
        (grandchild,) = set(below) - {child}
        assert below[grandchild]["ppid"] == child  # its name: sh, or sleep once it exec'd
        started = tree_started(recs)
        assert {p: started[p]["create_time"] for p in below} == {p: e["create_time"] for p, e in below.items()}
        (left,) = events(recs, "leftover")
        assert sorted(left["pids"]) == sorted(below)
    finally:
        for pid in pids_of_session(proc.pid):
            kill_pids([pid])
        kill_session(proc)


def pids_of_session(sid: int) -> list[int]:
    found = []
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and os.getsid(int(name)) == sid:
                found.append(int(name))
        except OSError:
            continue
    return found


def test_start_times_are_on_the_records_clock(tmp_path: Path) -> None:
    """One clock: an untraced `sleep 1` starts when Popen ran (to the tick, not up to 1 s early with btime)
    and lasts about 1 s from its create time to its recorded end (one interval of slack)."""
    proc, log = start_root(WAIT_SAMPLED + textwrap.dedent('''
        import json, subprocess, time
        wait_until_sampled()
        before = time.time()
        p = subprocess.Popen(["sleep", "1"])
        after = time.time()
        p.wait()
        print(json.dumps({"pid": p.pid, "before": before, "after": after}))
        time.sleep(0.5)
    '''), tmp_path, WP_AUTOTRACE_SAMPLE_INTERVAL="0.1")
    try:
        out, _ = proc.communicate(timeout=30)
        facts = json.loads(out)
        recs = wait_for_watcher(log, 15)
        ct = tree_started(recs)[facts["pid"]]["create_time"]
        tick = 1 / os.sysconf("SC_CLK_TCK")
        # starttime counts whole ticks (floor), then 2-decimal rounding: at most a tick and a half early
        assert facts["before"] - 1.5 * tick <= ct <= facts["after"] + 0.005, (ct, facts)
        end = {e["pid"]: e["end"] for t in events(recs, "tree") for e in t["ended"]}[facts["pid"]]
        # The end: never before the sleep's 1 s is up, and at the first sample after it, read on the watcher's
        # own clock: before the sample that saw the root (which lived 0.5 s longer) gone. No wall-clock window.
        (left,) = events(recs, "leftover")
        assert 1.0 - 1.5 * tick <= end - ct and end < left["ts"], (end - ct, left["ts"] - end, facts)
    finally:
        kill_session(proc)


def test_job_filesystem_unmounts_while_the_watcher_lingers(tmp_path: Path) -> None:
    """An epilog's umount of the job's filesystem (its cwd and log on a tmpfs) succeeds while the watcher
    lingers for a leftover: the watcher holds no cwd there, and no fd between writes once the root ended."""
    import shutil

    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    mnt = tmp_path / "job"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    script = tmp_path / "root.py"
    script.write_text(textwrap.dedent('''
        import subprocess
        # the leftover holds nothing on the job's filesystem: only the watcher could keep it busy
        print(subprocess.Popen(["sleep", "30"], cwd="/", stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL).pid)
    '''))
    log = mnt / "run.jsonl"
    leftover = 0
    try:
        res = subprocess.run([sys.executable, str(script)], env=clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log)),
                             cwd=str(mnt), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
        leftover = int(res.stdout)
        recs = wait_for_watcher(log, 15, event="leftover")
        wpid = [r["pid"] for r in recs if r["event"] == "watcher_start"][0]
        assert alive(wpid) and [r["pids"] for r in events(recs, "leftover")] == [[leftover]]
        assert os.readlink(f"/proc/{wpid}/cwd") == "/"

        def unmounted() -> bool:  # a write or read in flight holds the file for microseconds: retry
            return subprocess.run(["umount", str(mnt)], capture_output=True).returncode == 0

        try:
            wait_until(unmounted, 5, what=f"umount {mnt}")
        except WaitTimeout as exc:  # say why umount refuses
            why = subprocess.run(["umount", str(mnt)], capture_output=True, text=True).stderr
            raise AssertionError(f"{exc}: {why}") from None
        wait_until(lambda: not alive(wpid), 10, what=f"the watcher {wpid} gone")  # the log left its path: it leaves
    finally:
        if leftover:
            kill_pids([leftover])
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)
