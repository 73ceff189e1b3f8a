"""How a run's main process ended, told once: the Run line, the Answer and the Findings read one fact
(findings/mainend.py), and none of them says more than a record shows."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze

from .conftest import clean_env, report_json
from .logs import T0, LogWriter, report, start, watcher
from .test_answer_text import _group_termed_unread_main


def test_findings_tell_a_main_ended_with_its_group_as_the_run_line_does(tmp_path: Path) -> None:
    """A main reaped unread as SIGTERM ended the rest of its process group: the root-killed finding says what the
    Run line and the Answer say (the group's signal, and that its own status was not read), never 'killed, or
    os._exit', and its cause is the sender of that signal, not os._exit in the code."""
    rep = report(_group_termed_unread_main(), tmp_path)
    (run,) = rep["runs"]
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert run["root_ending"] and run["root_ending"].startswith("ended as SIGTERM"), run
    assert "The main process 100 ended as SIGTERM ended the rest of its process group at 6.0 s (2 process(es), " \
           "their wait statuses; its own status was not read)" in killed["text"], killed
    assert "os._exit" not in killed["text"], killed
    assert "find what sent SIGTERM to its process group" in killed["advice"], killed
    # the rest of a group dying of one signal as the main ends is also what a main's own os._exit does to children
    # that set a parent-death signal: that reading stays in the fix
    assert "os._exit in the code" in killed["advice"] and "PR_SET_PDEATHSIG" in killed["advice"], killed


ODD = Path(__file__).parent / "fixtures" / "odd"


def test_a_main_that_chroots_and_exits_before_the_watchers_first_look_is_not_told_os_exit(tmp_path: Path) -> None:
    """review's log (fixtures/odd/chroot_before_first_look.jsonl, `run -- python chroot_noproc.py jail`): the main
    chroots, runs a thread and a fork, and calls sys.exit(3), its exit handlers run, yet the log, outside its new
    root, refused its process_exit; the watcher's first look found it ended, so no root_change says so. The report
    had said 'exited 3 without running its exit handlers (os._exit ...)' as fact: it says what run saw (code 3) and
    that whether its exit handlers ran is not known."""
    rep = analyze(read_logs([str(ODD / "chroot_before_first_look.jsonl")]))
    (run,) = rep["runs"]
    assert run["exit_code"] == 3 and run["end_unread"], run
    text = render_text(rep, {})
    assert "os._exit" not in text and "killed" not in text, text
    found = next(f for f in rep["findings"] if f["kind"] == "root-os-exit")
    assert "exited 3 without a process_exit in the log (the watcher's first look found it ended" in found["text"]
    assert "whether its exit handlers ran is not known" in found["text"], found


def _ended_before_first_look() -> LogWriter:
    """Main 100 (no `run`) leaves no process_exit; the watcher's first sample, at 0.4 s, finds it already ended."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.3, "watcher_start", interval=0.1, linger=5.0)
    watcher(w, 0.4, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + 0.4}])
    watcher(w, 0.6, "leftover", how="root-killed", count=0, pids=[], procs=[])
    watcher(w, 0.7, "tree", count=0, started=[], ended=[], final=True)
    return w


def test_a_main_no_sample_saw_alive_is_told_ended_unknown_not_killed_or_os_exit(tmp_path: Path) -> None:
    """No `run` waited, and no sample saw the main alive: a setuid or chroot it made before the watcher's first look
    would have refused its process_exit unseen. The Answer, the Run line and the finding say how it ended is not
    known, never 'killed, or os._exit'; one sample that saw it alive (and no change) keeps the old words."""
    rep = report(_ended_before_first_look(), tmp_path)
    text = render_text(rep, {})
    assert "(killed, or os._exit" not in text and "its exit handlers did not run" not in text, text
    said = " ".join(rep["answer"].split())
    assert "The main process ended without a process_exit in the log: the watcher's first look found it ended" in said
    assert "how it ended is not known" in said, said
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert "how it ended is not known" in killed["text"] and killed["severity"] == "warning", killed
    seen = _ended_before_first_look()
    seen.lines.insert(2, {**seen.lines[2], "ts": T0 + 0.35, "seq": 99, "ended": [],
                          "started": [{"pid": 100, "ppid": 1, "rss": 10 << 20, "via": "root"}], "count": 1})
    (tmp_path / "seen").mkdir()
    alive = report(seen, tmp_path / "seen")
    assert alive["runs"][0]["end_unread"] is None and "(killed, or os._exit)" in render_text(alive, {})


CRASH = "import ctypes; ctypes.string_at(0)"  # a read of address 0: SIGSEGV, from the process's own fault


def test_a_main_that_crashes_is_told_where_its_stacks_are_not_to_find_a_sender(tmp_path: Path) -> None:
    """`run -- python -c '<a read of address 0>'`: its status is the untraced run's (the test runs it untraced too),
    and the Answer's fix had been "find what sent SIGSEGV (a time limit, a scheduler, a user)": nothing sent it. The
    finding says its signal tells a crash, and the fix is faulthandler and the core dump."""
    untraced = subprocess.run([sys.executable, "-c", CRASH], env=clean_env(), capture_output=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    assert untraced.returncode == -signal.SIGSEGV, untraced
    log = tmp_path / "c.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c",
                          CRASH], env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == untraced.returncode, res.stderr  # run ends as its program did
    rep = report_json(log)
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert "(a crash, by its signal: a segmentation fault in native code" in killed["text"], killed
    fix = next(x for x in rep["answer"].splitlines() if x.startswith("- Fix first: "))
    assert "PYTHONFAULTHANDLER=1" in fix and "find what sent" not in " ".join(rep["answer"].split()), rep["answer"]


# A SIGABRT that no record names a sender of, sent by kill() (posix.kill writes no record, as an outside `kill -ABRT`,
# systemd's WatchdogSec= or `timeout -s ABRT` write none): no crash, nothing on stderr.
OUTSIDE_ABRT = "import posix, time; posix.kill(posix.getpid(), 6); time.sleep(5)"


def test_a_crash_signal_from_outside_is_not_told_as_a_crash_only(tmp_path: Path) -> None:
    """A wait status cannot tell kill() from a fault: the finding says the crash and the signal from outside the run
    both, asserts no message on stderr, and keeps faulthandler as the fix (it prints the stack at either)."""
    log = tmp_path / "a.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", sys.executable, "-c",
                          OUTSIDE_ABRT], env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == -signal.SIGABRT or res.returncode == 128 + signal.SIGABRT, res.stderr
    rep = report_json(log)
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    text = " ".join(killed["text"].split())
    assert "abort() in native code, such as a failed C++ check, whose message is then on stderr; or a signal sent " \
           "from outside the run (kill, timeout -s, a watchdog: systemd's WatchdogSec= sends SIGABRT); no record " \
           "shows a sender" in text, text
    fix = " ".join(next(x for x in rep["answer"].split("- ") if x.startswith("Fix first: ")).split())
    assert "PYTHONFAULTHANDLER=1" in fix and "a crash's or a kill's" in fix, rep["answer"]


def test_a_sidecar_that_crashed_is_told_so_not_as_a_signal_to_find(tmp_path: Path) -> None:
    """The pool's sidecar 200, in a process group of its own, read as a zombie with status SIGSEGV (no signal_sent
    names a sender): pool-died's advice says its signal tells a crash and where its stacks are."""
    w = _group_termed_unread_main()
    for r in w.lines:
        for e in r.get("started") or ():
            if e["pid"] != 100:
                e["pgid"] = 200
        for z in r.get("zombies") or ():
            z["status"] = signal.SIGSEGV if z["pid"] == 200 else signal.SIGTERM
    died = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "pool-died")
    assert died["advice"].startswith("its SIGSEGV tells a crash of the sidecar") and "PYTHONFAULTHANDLER=1" in \
        died["advice"], died
    assert "or a signal sent from outside the run; no record shows a sender" in died["advice"], died


def test_under_run_the_answer_keeps_the_exception_that_ended_the_program(tmp_path: Path) -> None:
    """`run -- python -c "raise ValueError('boom')"`: the Answer said "The program exited with code 1." only, though
    its process_exit names the exception (and without `run` the Answer told it): the code (run's, which the test
    compares with the untraced run's) and the exception (the untraced run's own stderr line), in one sentence."""
    program = [sys.executable, "-c", "raise ValueError('boom')"]
    untraced = subprocess.run(program, env=clean_env(), capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
    assert untraced.returncode == 1 and "ValueError: boom" in untraced.stderr, untraced
    log = tmp_path / "v.jsonl"
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "run", "--log", str(log), "--", *program],
                         env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == untraced.returncode, res.stderr
    said = " ".join(report_json(log)["answer"].split())
    assert "The program exited with code 1, after an uncaught ValueError: boom." in said, said


def _step_ended(sender: str, main_end: float = 3.6) -> LogWriter:
    """Main 100 (no `run`) leaves no process_exit; the watcher, sent SIGTERM by `sender` at 3.5 s, saw the main
    end at main_end with no wait status (its parent reaped it), and nothing else of the run ended by a signal."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.5, linger=10.0)
    watcher(w, 0.1, "tree", count=1, started=[], ended=[])
    watcher(w, 3.5, "watcher_signal", signal="SIGTERM", sender_pid=7, sender_uid=0, sender=sender,
            action="watch-on")
    watcher(w, main_end, "tree", count=0, started=[], ended=[{"pid": 100, "create_time": T0, "end": T0 + main_end}])
    return w


def test_a_main_a_schedulers_step_end_ended_is_told_so_not_os_exit(tmp_path: Path) -> None:
    """A SLURM step's end (slurmstepd's SIGTERM to every process of the step, SIGKILL after KillWait) while the
    main's handler ran: the watcher's watcher_signal record names the scheduler; the main's own status went
    unread. The main's end is told as the step's (who, when, that its own status was not read), its fix the
    step's time, never 'os._exit in the code'; from a shell's kill of the watcher alone (no record shows the
    step ending) and for a main seen ended before the signal, the words stay as they were."""
    rep = report(_step_ended("slurmstepd"), tmp_path)
    (run,) = rep["runs"]
    killed = next(f for f in rep["findings"] if f["kind"] == "root-killed")
    assert run["root_ending"].startswith("ended as its job step was ended (slurmstepd (pid 7, uid 0) sent SIGTERM "
                                         "at 3.5 s; its own status was not read)"), run
    assert "The main process 100 ended as its job step was ended at 3.6 s (slurmstepd (pid 7, uid 0) sent " \
           "SIGTERM at 3.5 s, the watcher's record: a scheduler ending the job step" in killed["text"], killed
    assert "os._exit" not in killed["text"] + killed["advice"] and "sacct -j JOBID" in killed["advice"], killed
    answer = render_text(rep, {}).split("== Run")[0]
    assert "os._exit" not in answer and "The main process ended as its job step was ended" in answer, answer
    # a user's kill of the main, its children and the watcher (`pkill python`): many processes were sent SIGTERM,
    # no scheduler is named: no step's end is told
    pkill = _step_ended("bash")
    start(pkill, 0.5, 101, 100, "child")
    watcher(pkill, 0.6, "tree", count=2, started=[{"pid": 101, "create_time": T0 + 0.5, "ppid": 100}], ended=[])
    watcher(pkill, 3.55, "tree", count=1, started=[], ended=[{"pid": 101, "create_time": T0 + 0.5, "end": T0 + 3.55}],
            zombies=[{"pid": 101, "create_time": T0 + 0.5, "ppid": 1, "since": T0 + 3.55, "status": 15}])
    for w in (_step_ended("bash"), pkill, _step_ended("slurmstepd", main_end=1.0)):
        killed = next(f for f in report(w, tmp_path)["findings"] if f["kind"] == "root-killed")
        assert "job step" not in killed["text"] and "os._exit" in killed["advice"], killed
    # ended 5.1 s after the step's SIGTERM (its handler ran on): killed after the grace, or its own os._exit
    late = report(_step_ended("slurmstepd", main_end=8.6), tmp_path)
    killed = next(f for f in late["findings"] if f["kind"] == "root-killed")
    assert "ended after its job step's end began at 8.6 s" in killed["text"] and "it ended 5.1 s later: killed " \
           "after the grace, or by its own os._exit within it" in killed["text"], killed
    assert "sacct -j JOBID" in killed["advice"] and "os._exit" in killed["advice"], killed
    assert late["runs"][0]["root_ending"].startswith("ended after its job step's end began (slurmstepd"), late["runs"]


def test_the_no_finding_line_names_the_run_whose_program_failed_where_a_log_holds_several() -> None:
    """`run --log L` twice (or an exported WP_AUTOTRACE_LOG): the first program exited 3, the second 0, and the
    summary's last line read 'the program exited with code 3' under the second run's Answer; over several runs it
    names the run, over one it stays 'the program'."""
    from wp_autotrace.analysis.words.lines import no_finding_line

    first, second = {"id": "aaa", "exit_code": 3}, {"id": "bbb", "exit_code": 0}
    assert no_finding_line([first, second]).endswith("; the program of run aaa exited with code 3.")
    assert no_finding_line([second, {"id": "ccc", "root_error": "ValueError: x"}]).startswith(
        "- No finding about its processes or pools; the program of run ccc ended by ")
    assert no_finding_line([first]).endswith("; the program exited with code 3.")
    assert no_finding_line([second]) == "- Nothing unusual."


def test_a_traced_child_that_crashed_under_a_reaping_parent_is_no_nothing_unusual(tmp_path: Path) -> None:
    """main 100 ran two Python children (subprocess.run) that crashed (SIGSEGV, SIGABRT: no process_exit), each
    reaped at once by its parent, so no look read how; the watcher saw them go, and nothing else is amiss. The
    Findings, and `run`'s summary, said "Nothing unusual" under a Timeline that says they ended unseen: they say
    those two ended without an exit record. Fails where the no-finding line reads only the main's ending."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.05, "watcher_start", interval=0.1, linger=5.0)
    for pid, t in ((301, 0.3), (302, 0.6)):
        start(w, t, pid, 100, "child")
        watcher(w, t + 0.2, "tree", count=2, started=[{"pid": pid, "ppid": 100, "via": "child"}],
                ended=[{"pid": pid, "end": T0 + t + 0.1}])
    w.add(1.0, 100, 1, "main", "process_exit", how="exit", code=0, counts={}, dropped=0)
    watcher(w, 1.1, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 1.05}])
    watcher(w, 1.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    rep = report(w, tmp_path)
    assert rep["findings"] == [] and rep["no_exit_pids"] == [301, 302], rep["findings"]
    out = render_text(rep, {})
    assert "Nothing unusual" not in out
    assert "- No finding about its processes or pools; 2 traced processes ended without an exit record: pids 301, " \
           "302, killed or crashed (how, the log does not say)." in out.replace("\n  ", " ")
    clean = [r for r in w.lines if r["pid"] not in (301, 302) and not r.get("started")]
    w.lines = clean
    assert "- Nothing unusual." in render_text(report(w, tmp_path), {})
