"""The Answer's shape on synthetic logs (issue 31): bullets ranked by cost, lines that fit the width, the
pytest plugin's zero cost when tracing is off."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from wp_autotrace.analysis.findings.rank import ranked
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.cli.main import main

from .conftest import clean_env
from .logs import AC, T0, LogWriter, call, report, seed_log, start, watcher
from .test_report_text import example_shape

WIDTH = 100  # the report's width when stdout is not a terminal
TICK_S = 0.3  # the watcher's sampling interval (0.1 s) and its clock read after a pidfd wakes it


def answer_and_findings(text: str) -> list[str]:
    """The lines of the text report's Answer and Findings sections."""
    lines, keep = [], False
    for line in text.splitlines():
        if line.startswith("== "):
            keep = line in ("== Answer", "== Findings")
            continue
        if keep:
            lines.append(line)
    return lines


def test_answer_and_findings_fit_100_columns(tmp_path: Path) -> None:
    """Every line of the Answer and the Findings fits 100 columns when not a terminal, at 30 nested
    sidecars and on the seed's shape; the Answer is a few bullets, never one long paragraph."""
    for w in (example_shape(30), seed_log()):
        rep = report(w, tmp_path)
        text = render_text(rep, {}, width=WIDTH)
        lines = answer_and_findings(text)
        assert lines and all(len(line) <= WIDTH for line in lines), [x for x in lines if len(x) > WIDTH]
        answer = text.split("== Answer\n", 1)[1].split("\n\n", 1)[0].splitlines()
        # a few bullets: the cause, up to three symptoms under it, what more there is, the fix
        assert answer[0].startswith("- ") and len(answer) <= 14
        assert all(line.startswith(("- ", "  ")) for line in answer)


def test_cli_report_fits_100_columns_in_a_pipe(tmp_path: Path) -> None:
    """`wp-autotrace report` into a pipe: 100 columns whatever COLUMNS says."""
    log = tmp_path / "log.jsonl"
    example_shape(30).write(log)
    res = subprocess.run([sys.executable, "-m", "wp_autotrace", "report", str(log)], env=clean_env(COLUMNS="250"),
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    lines = answer_and_findings(res.stdout)
    assert lines and max(map(len, lines)) <= WIDTH


def test_pytest_plugin_is_inert_when_tracing_is_off() -> None:
    """With tracing off the pytest plugin defines no hook and imports nothing of ours but itself."""
    code = ("import sys, wp_autotrace.pytest_plugin as p; "
            "print(sorted(n for n in dir(p) if n.startswith('pytest_')), "
            "sorted(m for m in sys.modules if m.startswith('wp_autotrace')))")
    res = subprocess.run([sys.executable, "-c", code], env=clean_env(), capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    # wp_autotrace._preload is the package under a second name (the one the .pth line calls), no module of its own
    assert res.stdout.strip() == "[] ['wp_autotrace', 'wp_autotrace._preload', 'wp_autotrace.pytest_plugin']"


def test_a_failed_live_export_is_said_as_such_not_as_lost_records(tmp_path: Path) -> None:
    """A receiver answering HTTP 500: the report says the export failed, with the receiver's answer, apart from
    records lost; nothing about a full disk or missed events (0 records were dropped)."""
    from .conftest import report_json
    from .test_live_export import Receiver, run_job

    rx = Receiver("500", tmp_path / "seen")
    try:
        proc, recs = run_job(tmp_path, "x", rx.port)
    finally:
        rx.close()
    assert proc.returncode == 3
    rep = report_json(tmp_path / "x.jsonl")
    kinds = {f["kind"] for f in rep["findings"]}
    assert "export-failed" in kinds and "tracer-errors" not in kinds and "records-lost" not in kinds, kinds
    f = next(f for f in rep["findings"] if f["kind"] == "export-failed")
    assert f"http://127.0.0.1:{rx.port}" in f["text"] and "answered HTTP 500" in f["text"]
    assert "not sent" in f["text"] and f["cost"]["spans_unsent"] >= 2
    text = render_text(rep, {}, width=WIDTH)
    assert "disk" not in text and "may miss events" not in text and "dropped" not in text


RUN = [sys.executable, "-m", "wp_autotrace", "run"]


def test_run_summary_names_a_non_zero_exit(tmp_path: Path) -> None:
    """`run` on a program that exits 7 with nothing else unusual: the summary says it exited with code 7, once
    (the Answer's bullet; the no-finding line does not say it again), never "Nothing unusual" alone."""
    log = tmp_path / "x.jsonl"
    res = subprocess.run([*RUN, "--log", str(log), "--", sys.executable, "-c", "raise SystemExit(7)"],
                         env=clean_env(), cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         stdin=subprocess.DEVNULL)
    assert res.returncode == 7, res.stderr
    assert "The program exited with code 7." in res.stderr and "Nothing unusual" not in res.stderr
    assert res.stderr.count("code 7") == 1, res.stderr
    assert "- No finding about its processes or pools.\n" in res.stderr, res.stderr


LEAVES_A_SLEEP = ("import subprocess, sys, time\n"
                  "subprocess.Popen(['sleep', sys.argv[1]], stdin=subprocess.DEVNULL,"
                  " stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n")


def test_program_duration_apart_from_the_run(tmp_path: Path) -> None:
    """A program that leaves a 4 s `sleep` behind: the program's duration (against the test's own clock
    around it) is said apart from the run's, which lasts until the leftover ended."""
    import time

    from .conftest import report_json, wait_for_watcher

    log = tmp_path / "x.jsonl"
    env = clean_env(WP_AUTOTRACE="1", WP_AUTOTRACE_LOG=str(log))
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-c", LEAVES_A_SLEEP, "4"], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    took = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    wait_for_watcher(log, timeout=60)
    rep = report_json(log)
    (run,) = rep["runs"]
    # the watcher sees the main process's end within a tick of the test's own wait returning
    assert 0 < run["program_s"] <= took + TICK_S and run["duration_s"] >= 3.5, (run, took)
    text = render_text(rep, {}, width=WIDTH)
    assert f"program {run['program_s']:.1f} s" in text and f"run {run['duration_s']:.1f} s" in text


def test_watch_stops_when_the_run_has_ended_with_a_leftover_alive(tmp_path: Path) -> None:
    """README: watch stops when the run has ended. The main process ended and the watcher's verdict names a
    leftover still alive (a sleeper this test started): `watch LOG` into a pipe shows it once, says how to
    end it, and exits 0 (it kept redrawing "main ended; 1 left behind" before)."""
    import json

    from .conftest import run_python
    from .test_watch import _rec

    dead = subprocess.Popen([sys.executable, "-c", "pass"], env=clean_env())
    dead.wait()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], env=clean_env(),
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        log = tmp_path / "left.jsonl"
        child = json.loads(_rec("process_start", sleeper.pid, run="ee", root_pid=dead.pid, forked=False,
                                role="compile-sidecar"))
        child["ppid"] = dead.pid
        left = [{"pid": sleeper.pid, "ppid": 1, "name": "python", "cmd": "python", "rss": 1 << 20}]
        records = [_rec("process_start", dead.pid, run="ee", root_pid=dead.pid, forked=False),
                   json.dumps(child).encode(), _rec("process_exit", dead.pid, how="exit"),
                   _rec("leftover", 999999, run="ee", root_pid=dead.pid, role="watcher", how="root-exit",
                        count=1, pids=[sleeper.pid], procs=left)]
        log.write_bytes(b"\n".join(records) + b"\n")
        res = run_python(["-m", "wp_autotrace", "watch", str(log)], clean_env(), timeout=60)
        assert res.returncode == 0, res.stderr
        assert "the watcher's verdict: 1 left behind (1 still alive: wp-autotrace cleanup LOG ends them)" in res.stdout
        assert str(sleeper.pid) in res.stdout and sleeper.poll() is None
    finally:
        sleeper.kill()
        sleeper.wait(10)



def test_ranking_by_cost_keys_puts_a_zombie_after_idle_memory_and_a_hang() -> None:
    """docs/evidence.md's cost keys, worst first: OOM kills, jobs lost, left behind, GiB·s idle, seconds of hang, then
    zombies (a zombie holds only its pid: an orphan pid 1 had not reaped yet by the log's end led the 3-rank
    Answer above 17 GiB·s of idle pools once endings' zombies finding met answer's ranking)."""
    def finding(kind: str, **cost: float) -> dict[str, object]:
        return {"kind": kind, "severity": "warning", "cost": cost}

    found = [finding("zombies", zombies=1), finding("slow-exit-wait", hang_s=30), finding("idle-pool", idle_gib_s=17.5),
             finding("leftovers", procs_left=2, mib_left=600), finding("jobs-lost", jobs_lost=1),
             finding("oom-killed", oom_kills=1), finding("pool-ready-wait", hang_s=7, blocked_s=7)]
    # a first compile's wait for its pool stood the program still (blocked_s): before memory held idle
    assert [f["kind"] for f in ranked(found)] == ["oom-killed", "jobs-lost", "leftovers", "pool-ready-wait",
                                                  "idle-pool", "slow-exit-wait", "zombies"]


def test_an_answer_over_several_runs_says_so(tmp_path: Path) -> None:
    """The Quick start's `report wp_autotrace-*.jsonl` over two runs of two programs: the Answer says first that
    it spans 2 runs (their figures together) and how to get one run's; with --run, one run's Answer says nothing
    of it."""
    import json

    from .conftest import run_python, traced_env, wait_for_watcher

    logs = []
    for name, code in (("a", "pass"), ("b", "raise SystemExit(3)")):
        log = tmp_path / f"wp_autotrace-{name}.jsonl"
        run_python(["-c", code], traced_env(log))
        wait_for_watcher(log)
        logs.append(str(log))
    wp = [sys.executable, "-m", "wp_autotrace", "report", "--json"]
    both = json.loads(subprocess.run([*wp, *logs], capture_output=True, text=True, timeout=120, check=True).stdout)
    assert len(both["runs"]) == 2
    first = both["answer"].splitlines()[0]
    assert "2 runs" in first and "--run" in first, both["answer"]
    one = json.loads(subprocess.run([*wp, "--run", both["runs"][0]["id"], *logs], capture_output=True, text=True,
                                    timeout=120, check=True).stdout)
    assert "runs" not in one["answer"].splitlines()[0] and "--run" not in one["answer"], one["answer"]


def test_the_cause_leads_its_symptoms(tmp_path: Path) -> None:
    """The seed's shape (a backend's import warms a pool in every sidecar): what was left running, the calls
    that never returned and the exit wait cost more than the nesting itself, yet they follow from it. The
    Answer tells the nesting first with them under it, Findings in the same order, and "Fix first" is the
    nesting's fix; no '(…)' or '(KeyboardInterrupt: )' is left in the text."""
    from .test_report_text import example_shape

    for w in (seed_log(), example_shape(30)):
        rep = report(w, tmp_path)
        lines = rep["answer"].splitlines()
        assert "nested" in lines[0] and "made pools of their own" in lines[0], lines
        subs = [x for x in lines if x.startswith("  - ")]
        assert subs and any("left running after the main process" in x for x in subs), lines
        assert not any("left running" in x for x in lines if x.startswith("- ")), lines
        assert rep["findings"][0]["kind"] == "nested-pools"
        fix = next(x for x in lines if x.startswith("- Fix first: "))
        assert "keep it out of the sidecars" in fix and "WP_AUTOTRACE_GUARD=nested-pools" in fix
        assert "(…)" not in rep["answer"] and "KeyboardInterrupt: )" not in rep["answer"]
    assert "interrupted by Ctrl-C (KeyboardInterrupt)" in rep["answer"]


def _zombie_run(since: float, last_look: float, ppid: int) -> LogWriter:
    """main 100 ends at 5 s; its child 300 is defunct under ppid from `since`; the watcher's last look."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 300, 100, "resource-tracker")
    w.add(4, 300, 100, "resource-tracker", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, since, "tree", count=1, started=[], ended=[{"pid": 300, "end": T0 + since}],
            zombies=[{"pid": 300, "ppid": ppid, "since": T0 + since, "status": 0}])
    watcher(w, 5.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    watcher(w, last_look, "tree", count=0, started=[], ended=[], final=True)
    return w


def test_a_zombie_reaches_the_answer_only_when_it_stays(tmp_path: Path) -> None:
    """A resource tracker defunct under pid 1 for a moment at exit (pid 1 reaps late), or under a parent that
    ended right after, is listed, as seen briefly, never in the Answer nor 'Fix first'; one still defunct under
    pid 1 seconds later, or under a live parent that is no init, is told."""
    brief = report(_zombie_run(5.1, 5.3, 1), tmp_path)
    (z,) = [f for f in brief["findings"] if f["kind"] == "zombies"]
    assert z["severity"] == "info" and z["cost"]["zombies"] == 0 and "None was seen to stay" in z["text"]
    assert "defunct" not in brief["answer"] and "--init" not in brief["answer"]
    # under its parent, the main, that ended right after: reaped by it first, or handed to pid 1 (no look tells
    # which; a parent that reaps its children in order and exits within one tick looks so), judged as pid 1's;
    # one look says it was defunct for that moment, never that its parent did not wait for it
    handed = report(_zombie_run(5.1, 5.3, 100), tmp_path)
    (z,) = [f for f in handed["findings"] if f["kind"] == "zombies"]
    assert z["severity"] == "info" and "were seen defunct (zombies: ended, not yet reaped)" in z["text"], z
    assert "reaped it first or handing it to pid 1" in z["text"] and "has not waited" not in z["advice"], z
    assert "--init" not in z["advice"], z
    # still defunct 5 s later under pid 1, or under a live reaper that does not reap (a subreaper outside the run)
    for w in (_zombie_run(5.1, 11.0, 1), _zombie_run(5.1, 5.3, 150)):
        stays = report(w, tmp_path)
        (z,) = [f for f in stays["findings"] if f["kind"] == "zombies"]
        assert z["severity"] == "warning" and z["cost"]["zombies"] == 1
        assert "defunct" in stays["answer"]


def _defunct_main(last_look: float, ppid: int, status: int) -> LogWriter:
    """Main 100 (started under pid 50) exits at 5 s and is seen defunct under ppid, its wait status `status`, from
    5.1 s; the watcher looks last at last_look."""
    w = LogWriter()
    start(w, 0, 100, 50, "main")
    w.add(5, 100, 50, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 5.1, "tree", count=0, started=[], ended=[{"pid": 100, "end": T0 + 5.1}],
            zombies=[{"pid": 100, "ppid": ppid, "since": T0 + 5.1, "status": status}])
    watcher(w, 5.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    watcher(w, last_look, "tree", count=0, started=[], ended=[], final=True)
    return w


def test_the_main_defunct_under_its_launcher_is_the_launchers_to_reap(tmp_path: Path) -> None:
    """The main itself defunct under the program that launched it (outside the run) when the watcher last looked,
    0.5 s after its end: a launcher that polls (a Popen.poll loop) reaps it later than the watcher stays, so it is
    listed, as seen briefly, never the Answer's; still defunct ZOMBIE_STAYS_S later, it is told."""
    brief = report(_defunct_main(5.6, 50, 1), tmp_path)
    (z,) = [f for f in brief["findings"] if f["kind"] == "zombies"]
    assert z["severity"] == "info" and z["cost"]["zombies"] == 0, z
    assert "under the launcher that started the run" in z["text"]
    assert "defunct" not in brief["answer"]
    stays = report(_defunct_main(11.0, 50, 1), tmp_path)
    (z,) = [f for f in stays["findings"] if f["kind"] == "zombies"]
    assert z["severity"] == "warning" and "defunct" in stays["answer"]
    # its launcher (outside the run, alive: a harness that reaps each run in turn) is no container's init
    assert "its parent (50), the launcher that started the run, had not waited for it" in z["advice"], z
    assert "--init" not in stays["answer"] and "--init" not in z["advice"], stays["answer"]


def test_a_main_that_outlived_its_launcher_tells_the_launchers_end(tmp_path: Path) -> None:
    """The main started under pid 50 (its launcher: `wp-autotrace run` killed, say) and was defunct under pid 1 at its
    end: pid 50 ended first (only that hands a child to pid 1). The Answer tells that, with its one question, where
    it said only that a zombie was seen, advice "nothing"; under its launcher still (the test above) it is not."""
    rep = report(_defunct_main(5.6, 1, 0), tmp_path)
    (z,) = [f for f in rep["findings"] if f["kind"] == "zombies"]
    assert "Main 100 outlived the process that started it (pid 50" in z["text"], z
    assert z["advice"].startswith("where pid 50 was to wait for it"), z
    assert "Main 100 outlived the process that started it" in rep["answer"], rep["answer"]


def test_wrapping_never_splits_a_path_or_a_test_id() -> None:
    """A path or a test id longer than the width stays whole on its own line (it can be copied and searched for);
    the words around it wrap as before."""
    from wp_autotrace.analysis.words.fmt import wrap

    path = "/home/user/projects/" + "deeply/nested/" * 8 + "train.py:12"
    test_id = "tests/test_compile.py::TestCompile::test_" + "x" * 90
    for long in (path, test_id):
        lines = wrap(f"- the pool made at {long} (<module>) idled 49.0 s holding 230 MiB", 100)
        assert any(long in line for line in lines), lines
        assert all(len(line) <= 100 for line in lines if long not in line)


def test_fork_pools_across_processes_name_no_sidecar() -> None:
    """Fork/spawn pools made by several processes: their workers are the pools' processes; no '0 sidecars +'."""
    from wp_autotrace.analysis.words.across import across_sentence

    text = across_sentence({"creators": 3, "sidecars": 0, "workers": 6, "processes": 6, "scales_with": "rank"})
    assert text.startswith("3 processes each made a compile pool (per rank): 6 workers, no sidecar: 6 compile "
                           "processes"), text
    assert "0 sidecars" not in text


def test_a_ctrl_c_the_program_handled_is_told_in_user_words(tmp_path: Path) -> None:
    """`run` waited for status -2 (SIGINT) and the main wrote its process_exit (its exit handlers ran): the user
    stopped it with Ctrl-C. The report says so, never 'killed by signal 2' nor 'killed by SIGINT', and it does
    not lead the Answer (it cost nothing)."""
    from wp_autotrace.analysis.present.render import render_text

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    w.add(5.2, 50, 1, "run", "run_exit", root_pid=100, status=-2, forwarded=[2])
    watcher(w, 5.3, "leftover", how="root-exit", count=0, pids=[], procs=[])
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    assert "stopped with Ctrl-C (SIGINT)" in text
    assert "killed by signal 2" not in text and "killed by SIGINT" not in text
    main = next(p for p in rep["processes"] if p["pid"] == 100)
    assert main["ending"]["words"] == "stopped with Ctrl-C (SIGINT; its exit handlers ran)"
    assert "Ctrl-C" not in rep["answer"].splitlines()[0]


def _main_killed(w: LogWriter) -> LogWriter:
    """w with its main process killed: no process_exit of its own, the watcher saw it end, root-killed."""
    root = w.lines[0]["pid"]
    w.lines = [r for r in w.lines if not (r["event"] == "process_exit" and r["pid"] == root)]
    for r in w.lines:
        if r["event"] == "leftover":
            r["how"] = "root-killed"
            end = r["ts"] - 0.05
    watcher(w, end - T0, "tree", count=0, started=[], ended=[{"pid": root, "end": end}])
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_killed_main_is_told_under_the_pools_cause(tmp_path: Path) -> None:
    """A launcher that SIGKILLs a hung main: the pools' cause (the nesting, a fork pool's hang) still leads the
    Answer, the main's ending is one of its symptoms under it, and "Fix first" is the cause's fix; a zombie gone
    a moment after the killed main is never in the Answer."""
    from .test_model import with_fork_hang

    for w in (_main_killed(seed_log()), _main_killed(example_shape(30)), with_fork_hang()):
        rep = report(w, tmp_path)
        assert any(f["kind"] == "root-killed" for f in rep["findings"])
        lines = rep["answer"].splitlines()
        assert "ended without process_exit" not in lines[0], lines
        assert ("nested" in lines[0]) or ("fork compile pool" in lines[0]), lines
        (state,) = [x for x in lines if "ended without process_exit" in x]
        assert state.startswith("  - "), lines
        fix = next(x for x in lines if x.startswith("- Fix first: "))
        assert "find what ended it" not in fix, fix
    brief = report(_main_killed(_zombie_run(5.1, 5.3, 100)), tmp_path)
    assert "defunct" not in brief["answer"] and "--init" not in brief["answer"], brief["answer"]


def test_one_log_holding_two_runs_answers_each_run(tmp_path: Path) -> None:
    """One log, two unrelated runs: r1 the seed's nested pools (leftovers), r2 a later program that made no pool
    and exited 3. The Answer answers each run under its own line (its cause, symptoms and fix: r1's nesting
    and its leftovers, r2's exit code and no pool), never their figures merged; the first bullet says so."""
    w = seed_log()
    run = {"run": "r2", "root_pid": 500}
    w.add(20, 500, 1, "main", "process_start", argv=["other.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(20.05, 901, 500, "watcher", "watcher_start", interval=0.1, linger=60.0, **run)
    w.add(21, 500, 1, "main", "process_exit", how="exit", code=3, counts={}, dropped=0)
    w.add(21.2, 901, 500, "watcher", "leftover", how="root-exit", count=0, procs=[], **run)
    rep = report(w, tmp_path)
    lines = rep["answer"].splitlines()
    assert "2 runs" in lines[0] and "--run" in lines[0], lines
    heads = [i for i, x in enumerate(lines) if x.startswith("Run ")]
    assert [lines[i].split(" (")[0] for i in heads] == ["Run r1", "Run r2"], lines
    first, second = lines[heads[0] + 1:heads[1]], lines[heads[1] + 1:]
    assert "nested" in first[0] and any("left running after the main process" in x for x in first), first
    assert any(x.startswith("- Fix first: ") for x in first), first
    assert not any("code 3" in x for x in first), first
    assert any("exited with code 3" in x for x in second), second
    assert not any("nested" in x or "left running" in x for x in second), second
    assert "other.py" in lines[heads[1]], lines[heads[1]]
    # one run asked for: its own Answer, nothing of the other
    one = report(w, tmp_path, run="r2")
    assert "nested" not in one["answer"] and "Run r1" not in one["answer"], one["answer"]


def _clean_run(w: LogWriter, t: float, run_id: str, pid: int, code: int = 0) -> None:
    """A run of its own in w at t: a program that made no pool and exited with code, nothing left."""
    run = {"run": run_id, "root_pid": pid}
    w.add(t, pid, 1, "main", "process_start", argv=[f"{run_id}.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(t + 0.05, pid + 1, pid, "watcher", "watcher_start", interval=0.1, linger=60.0, **run)
    w.add(t + 1, pid, 1, "main", "process_exit", how="exit", code=code, counts={}, dropped=0)
    w.add(t + 1.2, pid + 1, pid, "watcher", "leftover", how="root-exit", count=0, procs=[], **run)


def test_a_log_of_many_runs_answers_the_runs_with_a_problem_first(tmp_path: Path) -> None:
    """A loop with one fixed log: clean runs, then the one whose pools nested and left processes running. The
    Answer answers only a few runs one by one; the one with a problem is among them and first (it was told only in
    Findings, hundreds of lines below six clean answers), and the runs left out are counted with their problems."""
    # the first clean run's main had a pid the problem run's finding names (pids are reused over days of runs):
    # a finding of one run never counts for another
    shared = ranked([f for f in report(seed_log(), tmp_path)["findings"] if f["severity"] != "info"])[0]["pids"][0]
    w = seed_log()
    for k in range(8):
        _clean_run(w, -100 + 5 * k, f"c{k}", shared if k == 0 else 1000 + 10 * k)
    w.lines.sort(key=lambda r: r["ts"])
    lines = report(w, tmp_path)["answer"].splitlines()
    heads = [x.split(" (")[0] for x in lines if x.startswith("Run ")]
    assert heads[0] == "Run r1" and len(heads) == 6, lines
    assert any("left running after the main process" in x for x in lines[:lines.index(next(
        x for x in lines if x.startswith("Run c")))]), lines
    assert "3 more run(s) not answered here, 0 of them with a problem" in " ".join(lines), lines
    # more runs with a problem than are answered: the rest's count says how many of them had one, named first
    w = seed_log()
    for k in range(8):
        _clean_run(w, -100 + 5 * k, f"c{k}", 1000 + 10 * k, code=3 if k >= 2 else 0)
    w.lines.sort(key=lambda r: r["ts"])
    text = " ".join(report(w, tmp_path)["answer"].split())
    heads = [x.split(" (")[0] for x in report(w, tmp_path)["answer"].splitlines() if x.startswith("Run ")]
    assert heads == ["Run r1", "Run c2", "Run c3", "Run c4", "Run c5", "Run c6"], heads
    assert "3 more run(s) not answered here, 1 of them with a problem (c7, c0, c1)" in text, text


def test_a_cause_that_is_also_a_symptom_is_told_once() -> None:
    """A sidecar that died as it started (the cause of a call that never returned) is also a symptom of the
    nesting that started it: every finding is told once (a torchrun run under load listed sidecar-never-served
    twice, as the lost call's cause and again under the nesting)."""
    from wp_autotrace.analysis.words.causes import in_order

    rep = {"pools": [{"creator_pid": 100, "creator_role": "main", "sidecar_pid": 200, "worker_pids": [201]},
                     {"creator_pid": 200, "creator_role": "compile-sidecar", "sidecar_pid": 300, "worker_pids": []}]}
    died = {"kind": "sidecar-never-served", "severity": "problem", "pids": [200]}
    call = {"kind": "call-never-returned", "severity": "problem", "pids": [100, 200]}
    nested = {"kind": "nested-pools", "severity": "problem", "pids": [200, 300]}
    for order in ([died, call, nested], [call, died, nested], [nested, call, died], [call, nested, died]):
        told = in_order(rep, order)
        assert sorted(map(id, told)) == sorted(map(id, order)), [f["kind"] for f in told]


def test_a_cause_that_follows_from_another_hands_its_symptoms_to_the_first_cause() -> None:
    """The real seed run (torch 2.13, 2 deep): the call its dead sidecar left open follows from the sidecar's failed
    start, which follows from the nesting: the nesting leads with both under it, in whatever order they rank, and
    "Fix first" is the nesting's fix (the Answer led with "1 compile sidecar(s) never served their pool" and told
    the nesting as a second lead beside it)."""
    from wp_autotrace.analysis.words.causes import units
    from wp_autotrace.analysis.words.fix import fix_first

    rep = {"pools": [{"creator_pid": 100, "creator_role": "main", "sidecar_pid": 200, "worker_pids": []},
                     {"creator_pid": 200, "creator_role": "compile-sidecar", "sidecar_pid": 300, "worker_pids": []}],
           "runs": []}
    died = {"kind": "sidecar-never-served", "severity": "problem", "pids": [200], "advice": "fix what it raised",
            "cost": {}}
    call = {"kind": "call-never-returned", "severity": "problem", "pids": [100, 200], "advice": "look", "cost": {}}
    nested = {"kind": "nested-pools", "severity": "problem", "pids": [200], "advice": "keep it out of the sidecars",
              "cost": {}}
    for order in ([died, call, nested], [call, died, nested], [nested, call, died], [call, nested, died]):
        ((lead, symptoms),) = units(rep, order)
        assert lead is nested and sorted(map(id, symptoms)) == sorted(map(id, (died, call))), order
        assert fix_first(rep, order) == "keep it out of the sidecars"


def test_the_mains_open_exit_wait_and_a_nested_call_cut_off_at_the_kill_follow_from_the_nesting() -> None:
    """The seed run killed as its fourth link started a pool (torch 2.13 under load): the calls never returned
    name the main (its exit's shutdown waited on the sidecar below it), the dead sidecars and the last one, killed
    inside its own warm_pool before it could fail to serve: the nesting leads with them under it (the Answer led
    with "9 traced call(s) never returned" and told the nesting second: neither rule took them, the nesting's
    leaving out the main and the failed start's the last sidecar)."""
    from wp_autotrace.analysis.words.causes import units

    rep = {"pools": [{"creator_pid": 100, "creator_role": "main", "sidecar_pid": 200, "worker_pids": []},
                     {"creator_pid": 200, "creator_role": "compile-sidecar", "sidecar_pid": 300, "worker_pids": []},
                     {"creator_pid": 300, "creator_role": "compile-sidecar", "sidecar_pid": 400, "worker_pids": []},
                     {"creator_pid": 400, "creator_role": "compile-sidecar", "sidecar_pid": None, "worker_pids": []}],
           "runs": []}
    call = {"kind": "call-never-returned", "severity": "warning", "pids": [100, 200, 300, 400],
            "cost": {"pool_wait_pids": [100, 400]}}
    died = {"kind": "sidecar-never-served", "severity": "problem", "pids": [200, 300]}
    nested = {"kind": "nested-pools", "severity": "problem", "pids": [200, 300, 400]}
    for order in ([call, nested, died], [nested, call, died], [died, call, nested]):
        ((lead, symptoms),) = units(rep, order)
        assert lead is nested and sorted(map(id, symptoms)) == sorted(map(id, (died, call))), order
    # a call open in a process of no pool stays its own
    stray = dict(call, pids=[100, 500])
    assert [lead["kind"] for lead, _ in units(rep, [stray, nested, died])] == ["call-never-returned", "nested-pools"]
    # the main's own call that is no wait on its pool (a DataLoader wait, a training step) is not the nesting's
    own = dict(call, cost={"pool_wait_pids": [400]})
    assert [lead["kind"] for lead, _ in units(rep, [own, nested, died])] == ["call-never-returned", "nested-pools"]


def _launcher_killed() -> LogWriter:
    """A launcher (main 100) whose 2 children each made a compile pool (sidecar + 2 workers) is SIGKILLed at 5 s
    (`run` waited -9); the children, their sidecars and workers run on (vllm#55510's engines, as
    bench/users/launcher_killed.py reproduces it)."""
    from .test_pools import SP, USER, call, mem
    from .test_pools import start as pstart

    w = LogWriter()
    pstart(w, 0, 100, 1, "main")
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    procs = []
    for child, side in ((110, 210), (120, 220)):
        pstart(w, 0.5, child, 100, "child")
        call(w, 1, child, 100, "child", f"{SP}:SubprocPool.__init__", 1, 1.5, caller=USER, sidecar_pid=side)
        pstart(w, 1.2, side, child, "compile-sidecar")
        for k in (1, 2):
            pstart(w, 2, side + k, side, "compile-worker", forked=True)
        procs += [(child, 0.5, 300), (side, 1.2, 200), (side + 1, 2, 15), (side + 2, 2, 15)]
    mem(w, 3.0, procs)
    watcher(w, 5.1, "tree", count=8, started=[], ended=[{"pid": 100, "end": T0 + 5.0}])
    mem(w, 5.3, procs)
    left = [{"pid": pid, "ppid": 1, "rss": 4 * pss << 20} for pid, _, pss in procs]
    watcher(w, 5.4, "leftover", how="root-killed", count=8, pids=[x["pid"] for x in left], procs=left)
    w.add(5.5, 50, 1, "run", "run_exit", root_pid=100, status=-9, forwarded=[])
    return w


def test_a_killed_launchers_children_are_told_from_the_kill(tmp_path: Path) -> None:
    """A main SIGKILLed alone leaves its children and the pools they made: the Answer leads with the kill (a signal
    to one process ends it alone) and the children that ran on, the pools' processes and memory under it, and
    "Fix first" is the kill's (the process group, children that end with their parent), never "compile pools left
    running". A main killed with only its own pool left keeps the pools' words."""
    from .test_model import with_root_killed

    rep = report(_launcher_killed(), tmp_path)
    lines = rep["answer"].splitlines()
    assert lines[0] == ("- The main process was killed by SIGKILL, which ends that one process: its 2 child processes "
                        "ran on, with the 2 compile pools they made (6 processes, 460 MiB); 8 processes were left "
                        "running after it (about 1.0 GiB)."), lines
    assert not any(x.strip("- ").startswith("The main process was ended by") for x in lines), lines
    fix = next(x for x in lines if x.startswith("- Fix first: "))
    assert "whole process group" in fix and "PR_SET_PDEATHSIG" in fix and "compile pools left running" not in fix
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "its 2 child process(es) ran on, with the 2 compile pool(s) they made (6 processes, 460 MiB of it)" in \
        left["text"], left["text"]
    (tmp_path / "own").mkdir()
    own = report(with_root_killed(), tmp_path / "own")
    fix = next(x for x in own["answer"].splitlines() if x.startswith("- Fix first: "))
    assert "process group" not in fix, own["answer"]


def test_a_launcher_whose_exit_a_full_disk_may_have_lost_is_not_told_killed(tmp_path: Path) -> None:
    """The same launcher's children run on, but no `run` waited for the main and its log refused records (a full
    disk): its missing process_exit may be one of them, so nothing shows a signal ended it alone. The leftovers
    are told as left, never "which ends that one process" with the process-group advice (the kill would be
    inferred from a missing record only)."""
    w = _launcher_killed()
    w.lines = [r for r in w.lines if r["event"] != "run_exit"]
    w.add(4.0, 100, 1, "main", "tracer_error", where="log", error="OSError: [Errno 28] No space left on device",
          dropped=40)
    rep = report(w, tmp_path)
    left = next(f for f in rep["findings"] if f["kind"] == "leftovers")
    assert "which ends that one process" not in left["text"] and "process group" not in left["advice"], left
    assert "children_left" not in left["cost"], left
    assert "which ends that one process" not in rep["answer"], rep["answer"]


def test_a_cut_headline_leaves_no_parenthesis_open() -> None:
    """A symptom's bullet cut to fit ends before a list in parentheses it would cut in the middle ("13 traced
    call(s) never returned (1 AsyncCompile.process_pool, ..., 5 …" was the bundled example's); where that leaves
    the subject alone, the text without its asides is cut instead, and keeps the clause after them."""
    from wp_autotrace.analysis.words.headline import headline

    text = ("13 traced call(s) never returned (1 AsyncCompile.process_pool, 1 AsyncCompile.warm_pool, 1 "
            "SubprocPool.__init__, 5 SubprocPool.shutdown, 5 shutdown_compile_workers), e.g. shutdown_compile_workers "
            "in compile-sidecar 20218, open 32.9 s until the process ended.")
    cut = headline({}, {"kind": "call-never-returned", "text": text}, under_cause=True)
    assert cut == ("13 traced call(s) never returned, e.g. shutdown_compile_workers in compile-sidecar 20218, open "
                   "32.9 s until the process ended."), cut  # the list was an aside: without it the rest fits
    inside = "A wait (" + "; ".join(["the sidecar was still starting"] * 6) + ") was told."
    cut = headline({}, {"kind": "call-never-returned", "text": inside}, under_cause=True)
    assert cut == "A wait was told.", cut


def test_a_cut_that_would_keep_the_subject_alone_keeps_the_clause_after_the_asides() -> None:
    """A sender's words in parentheses after the subject took the room: the Answer said only "Compile worker(s)
    7888, 7889 of sidecar 7383 ended by 41.0 s." Without the asides the clause that answers fits; "worker(s)" is a
    word, not an aside."""
    from wp_autotrace.analysis.words.headline import headline

    text = ("Compile worker(s) 7888, 7889 of sidecar 7383 ended by 41.0 s (7888: ended on SIGTERM, sent by "
            "compile-sidecar 7383 (os.kill at process.py:507 in terminate_broken); 7889: ended on SIGTERM, sent by "
            "compile-sidecar 7383 (os.kill at process.py:507 in terminate_broken)): the job in flight failed "
            "(BrokenProcessPool), and the sidecar started 2 new worker(s) at 41.1 s.")
    cut = headline({}, {"kind": "worker-lost", "text": text})
    assert cut == ("Compile worker(s) 7888, 7889 of sidecar 7383 ended by 41.0 s: the job in flight failed, and the "
                   "sidecar started 2 new worker(s) at 41.1 s."), cut


def _killed_while_idle(kill_at: float) -> LogWriter:
    """torch 2.13's pool (tests/test_pools.py idle_pool: ready at 4 s, no quiesce) whose main is SIGKILLed at
    kill_at: its orphaned sidecar reads the end of its pipe, SIGTERMs its workers (its own signal_sent) and writes
    its own process_exit 0.05 s after the main's end; the watcher sees it gone 2.7 s after (its teardown)."""
    from .test_pools import idle_pool, keep_up

    w = idle_pool(quiesce_at=None)
    w.lines = [r for r in w.lines if r["ts"] < T0 + min(kill_at, 30)]
    if kill_at > 16.0:
        keep_up(w, 16.0, kill_at - 0.5, [(200, 1.2, 200, kill_at + 2.7), (301, 3.6, 15, kill_at),
                                          (302, 3.6, 15, kill_at)])
    made, tree = T0 + 1.2, {"run": "r1", "root_pid": 100}
    w.add(kill_at, 900, 1, "watcher", "tree", count=3, started=[], ended=[{"pid": 100, "create_time": T0,
                                                                            "end": T0 + kill_at}], **tree)
    from .logs import call
    from .test_pools import SP

    call(w, kill_at + 0.01, 200, 100, "compile-sidecar", f"{SP}:SubprocMain._shutdown", 3, kill_at + 0.03, parent=1)
    w.add(kill_at + 0.035, 200, 100, "compile-sidecar", "return", call_id=1, duration_s=kill_at - 3.0)
    for pid in (301, 302):
        w.add(kill_at + 0.02, 200, 100, "compile-sidecar", "signal_sent", how="kill", target=pid, signal=15, frames=[
            {"file": "/site/torch/_inductor/compile_worker/subproc_pool.py", "line": 502,
             "func": "_terminate_process_pool"}])
    w.add(kill_at + 0.04, 900, 1, "watcher", "tree", count=1, started=[], ended=[
        {"pid": pid, "create_time": T0 + 3.6, "end": T0 + kill_at + 0.04} for pid in (301, 302)], **tree)
    w.add(kill_at + 0.05, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    w.add(kill_at + 0.2, 900, 1, "watcher", "leftover", how="root-killed", count=1, pids=[200],
          procs=[{"pid": 200, "ppid": 1, "create_time": made, "rss": 800 * 2**20, "role": "compile-sidecar"}], **tree)
    w.add(kill_at + 2.7, 900, 1, "watcher", "tree", count=0, started=[], ended=[
        {"pid": 200, "create_time": made, "end": T0 + kill_at + 2.7}], **tree)
    w.lines.sort(key=lambda r: r["ts"])
    return w


def test_a_main_killed_while_its_pool_idled_is_told_first_not_under_the_idle_pool(tmp_path: Path) -> None:
    """A main SIGKILLed while its pool idled (its sidecar ended by itself right after): the idle memory is the
    pool's own cost, which ends nothing, so the kill is no symptom of it. The Answer tells the kill first on its
    own, the pool's story after it with no "What follows from it", and "Fix first" is the idle pool's; the same
    first line whether the idle crossed IDLE_POOL_S (38.7 s idle) or not (4.2 s, from its readiness at 4 s to its
    sidecar's end), never "left running"."""
    firsts = []
    for kill_at in (40.0, 5.5):
        (tmp_path / str(kill_at)).mkdir()
        rep = report(_killed_while_idle(kill_at), tmp_path / str(kill_at))
        lines = rep["answer"].splitlines()
        assert ("idle-pool" in {f["kind"] for f in rep["findings"]}) == (kill_at == 40.0), rep["findings"]
        assert lines[0] == "- The main process ended without process_exit (killed, or os._exit).", lines
        assert not any(x.startswith("  - ") for x in lines) and "What follows from it" not in rep["answer"], lines
        assert "left running" not in rep["answer"], lines
        firsts.append(lines[0])
        if kill_at == 40.0:
            fix = next(x for x in lines if x.startswith("- Fix first: "))
            assert "shutdown" in fix and "find what ended it" not in fix, fix
    assert firsts[0] == firsts[1]


def test_what_a_killed_main_left_running_is_told_under_the_kill(tmp_path: Path) -> None:
    """A main killed with its own pool's sidecar left running: the kill is the leftovers' cause (a killed main never
    reaches torch's atexit shutdown), so it leads and the leftovers are told under it (the Answer told the kill
    under the leftovers, as if it followed from them); "Fix first" still ends what is left."""
    from .test_model import with_root_killed

    lines = report(with_root_killed(), tmp_path)["answer"].splitlines()
    assert lines[0] == ("- The main process ended without process_exit (killed, or os._exit). What follows from "
                        "it:"), lines
    assert lines[1] == ("  - 1 process was left running after the main process (about 280 MiB: RSS, its own share not "
                        "read)."), lines
    assert sum("left running after the main process (" in x for x in lines) == 1, lines
    assert "cleanup" in next(x for x in lines if x.startswith("- Fix first: "))


def test_how_the_program_ended_is_told_after_the_pools_cause(tmp_path: Path) -> None:
    """The bundled example's shape ended by a Ctrl-C that interrupted torch's exit wait (an uncaught
    KeyboardInterrupt), or by an exit code: the nesting leads the Answer, how the program ended comes after the
    causes (the user saw it; the tool's news is why), never as the first bullet."""
    for end in ({"code": None, "error": "KeyboardInterrupt: "}, {"code": 3}):
        w = example_shape(30)
        root = next(r["pid"] for r in w.lines if r["event"] == "process_start" and r["role"] == "main")
        (exit_,) = [r for r in w.lines if r["event"] == "process_exit" and r["pid"] == root]
        exit_.update(end)
        lines = report(w, tmp_path)["answer"].splitlines()
        assert "nested" in lines[0], lines
        said = [i for i, x in enumerate(lines) if "ended by an uncaught KeyboardInterrupt" in x
                or "exited with code 3" in x]
        assert len(said) == 1 and said[0] > 0 and lines[said[0]].startswith("- "), lines


def test_a_child_the_watcher_saw_killed_is_not_told_unexplained(tmp_path: Path) -> None:
    """Two children end without process_exit: 300's zombie wait status says SIGKILL (no record names who sent
    it), 301's end has nothing to say it. The Timeline names 300's signal and keeps 'nothing explains it' for
    301 alone."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    start(w, 1, 300, 100, "child")
    start(w, 1, 301, 100, "child")
    watcher(w, 4, "tree", count=2, started=[], ended=[{"pid": 300, "end": T0 + 4}, {"pid": 301, "end": T0 + 4}],
            zombies=[{"pid": 300, "ppid": 100, "since": T0 + 4, "status": 9}])
    w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 5.2, "leftover", how="root-exit", count=0, pids=[], procs=[])
    watcher(w, 5.3, "tree", count=0, started=[], ended=[], final=True)
    rep = report(w, tmp_path)
    assert rep["no_exit_pids"] == [300, 301], rep["no_exit_pids"]  # the model's list is unchanged
    text = render_text(rep, {})
    assert "ended by SIGKILL (its wait status; no record names the sender): 300" in text, text
    assert "ended unseen (no process_exit, nothing explains it): 301\n" in text + "\n", text


def _pool_then_compile(group: bool) -> LogWriter:
    """Main 100 makes a pool (sidecar 200, worker 300) at 1 s and compiles from 4 s (_compile open); group: the
    watcher saw the three in the main's process group (pgid 100) at 2.5 s."""
    sp = "torch._inductor.compile_worker.subproc_pool"
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
    call(w, 1, 100, 1, "main", f"{sp}:SubprocPool.__init__", 1, 1.5, sidecar_pid=200)
    start(w, 1.2, 200, 100, "compile-sidecar")
    start(w, 2, 300, 200, "compile-worker")
    if group:
        procs = [{"pid": p, "ppid": pp, "pgid": 100, "rss": 10 << 20} for p, pp in ((100, 1), (200, 100), (300, 200))]
        watcher(w, 2.5, "tree", count=3, started=[dict(e, via="child") for e in procs], ended=[])
    call(w, 4, 100, 1, "main", "torch._dynamo.convert_frame:_compile", 2, None)
    return w


def _group_killed_mid_compile(sig: int) -> LogWriter:
    """A time limit's signal to the whole group at 6 s while main 100 compiles (_compile open from 4 s): the main,
    its pool's sidecar 200 and worker 300 end by it (the sidecar's and worker's zombie wait statuses; `run` waited
    for the main)."""
    from wp_autotrace.analysis.fold.model import Waited

    w = _pool_then_compile(group=False)
    watcher(w, 6.1, "tree", count=0, started=[], ended=[{"pid": p, "end": T0 + 6} for p in (100, 200, 300)],
            zombies=[{"pid": p, "ppid": pp, "since": T0 + 6, "status": sig} for p, pp in ((200, 100), (300, 200))])
    watcher(w, 6.2, "leftover", how="root-killed", count=0, pids=[], procs=[])
    watcher(w, 6.3, "tree", count=0, started=[], ended=[], final=True)
    w.waited = Waited(100, -sig)  # type: ignore[attr-defined]
    return w


def test_a_group_kill_mid_compile_leads_what_it_ended(tmp_path: Path) -> None:
    """A scheduler's time limit signals the group while the main compiles: the kill leads the Answer, the call it
    cut short and the pool it ended with the main are told under it, and Fix first is the kill's (find what sent
    it), never the open call's 'look for what it was waiting on'."""
    for sig, name in ((15, "SIGTERM"), (9, "SIGKILL")):
        rep = report(_group_killed_mid_compile(sig), tmp_path)
        lines = rep["answer"].splitlines()
        assert lines[0].startswith("- The main process was ") and name in lines[0], lines
        assert lines[0].endswith("What follows from it:"), lines
        under = [x for x in lines[1:] if x.startswith("  - ")]
        assert any("never returned" in x for x in under), lines
        fix = next(x for x in lines if x.startswith("- Fix first: "))
        assert "find what sent" in fix and "waiting on" not in fix, lines



def test_a_spawn_workers_reimported_main_leads_its_warm_pool_bypass_and_its_empty_pool(
        capsys: pytest.CaptureFixture[str]) -> None:
    """A real log (torch 2.13 CPU, TORCHINDUCTOR_WORKER_START=spawn, a script with no `if __name__ == "__main__":`
    calling AsyncCompile.warm_pool() and wait_pool_ready() at its top level): spawned worker 10409 imported the
    script again as __mp_main__, called warm_pool there under the TORCH_WARM_POOL=0 torch gave it, and died as it
    started. The bypass follows from the re-import (its fix is the guard): told under it, never a bullet of its own.
    The pool the re-imported main made never started a process (multiprocessing refused to start one there): no
    pool at all, as `ps` counts, and as the log's own tree and process_start records do (no process was ever a
    child of 10409): one maker, one pool, no "+1 more pool"."""
    log = Path(__file__).parent / "fixtures" / "odd" / "spawn_unguarded_warm_pool.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    parents = {r["ppid"] for r in records if r["event"] == "process_start"} | {
        e["ppid"] for r in records if r["event"] == "tree" for e in r.get("started") or ()}
    assert 10409 not in parents and 9931 in parents  # the test's own reading: only the main's pool had a process
    assert main(["report", "--json", str(log)]) == 0
    rep = json.loads(capsys.readouterr().out)
    bullets = rep["answer"].splitlines()
    assert "died as it started" in bullets[0] and bullets[0].endswith("What follows from it:"), bullets
    assert bullets[1].startswith("  - TORCH_WARM_POOL=0 was set in 1 process(es)"), bullets
    assert not any(b.startswith("- TORCH_WARM_POOL=0") for b in bullets), bullets
    assert rep["pools_across"]["creators"] == 1, rep["pools_across"]
    assert [p["creator_pid"] for p in rep["pools"]] == [9931], rep["pools"]
    assert "2 processes each made a compile pool" not in rep["answer"]
    assert "more pool" not in rep["answer"], rep["answer"]
    assert 'if __name__ == "__main__":' in rep["answer"].split("Fix first:")[1]


@pytest.mark.parametrize("change", ["a-child", "no-refusal"])
def test_a_reimported_mains_pool_not_shown_processless_is_a_pool(tmp_path: Path, change: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """The same log with a process spawned child 10409 started after its re-imported main made its pool (its own
    process_start, ppid 10409, after the making returned: an executor starts its workers at a job): the refusal
    did not keep that pool from a process, so it is a pool, listed and counted, as `ps` would have shown a line
    under 10409. Or with no call of 10409 refused by multiprocessing (another error): nothing says its pool could
    not start a process, so it stays one."""
    src = Path(__file__).parent / "fixtures" / "odd" / "spawn_unguarded_warm_pool.jsonl"
    records = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    for r in records:
        if change == "no-refusal" and r["pid"] == 10409 and "bootstrapping phase" in (r.get("error") or ""):
            r["error"] = "RuntimeError: no compile today"
    (warm,) = [r for r in records if r["pid"] == 10409 and r.get("tag") == "warm-pool"]
    (made,) = [r for r in records if r["pid"] == 10409 and r["event"] == "return" and r["call_id"] == warm["call_id"]]
    (start,) = [r for r in records if r["pid"] == 10409 and r["event"] == "process_start"]
    child = {**start, "ts": made["ts"] + 0.02, "pid": 10500, "ppid": 10409, "seq": 0,
             "create_time": round(made["ts"] + 0.02, 2)}
    if change == "a-child":
        records.insert(records.index(made) + 1, child)
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["report", "--json", str(log)]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert [p["creator_pid"] for p in rep["pools"]] == [9931, 10409], rep["pools"]
    assert "(+1 more pool)" in rep["answer"], rep["answer"]


def test_a_bypass_in_the_main_itself_is_no_symptom_of_the_reimport(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The same log with TORCH_WARM_POOL=0 in the main's own warm_pool call (the user set it): the bypass names
    the main too, whose call the guard would not stop: it stays a bullet of its own, beside the re-import."""
    src = Path(__file__).parent / "fixtures" / "odd" / "spawn_unguarded_warm_pool.jsonl"
    records = [json.loads(line) for line in src.read_text().splitlines() if line.strip()]
    for r in records:
        if r["event"] == "call" and r["pid"] == 9931 and r.get("tag") == "warm-pool":
            r["env"] = {**r["env"], "TORCH_WARM_POOL": "0"}
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in records))
    assert main(["report", "--json", str(log)]) == 0
    rep = json.loads(capsys.readouterr().out)
    (bypass,) = [f for f in rep["findings"] if f["kind"] == "warm-pool-bypass"]
    assert bypass["pids"] == [9931, 10409], bypass
    assert any(b.startswith("- TORCH_WARM_POOL=0 was set in 2 process(es)") for b in rep["answer"].splitlines())
def test_a_killed_nesting_keeps_the_nestings_fix(tmp_path: Path) -> None:
    """The bundled example's chain SIGKILLed whole (a time limit): every sidecar's exit-time shutdown call is cut
    short by the same signal as the main. Those calls follow from the nesting, which leads the Answer with the kill
    under it; Fix first is then the nesting's too (keep the backend out of the sidecars), not the kill's."""
    from wp_autotrace.analysis.fold.model import Waited

    w = example_shape(4)
    # the main neither exits nor reaches its own exit-time call: it is killed; no verdict of a main's exit
    w.lines = [r for r in w.lines if r["event"] != "leftover" and not (r["pid"] == 100 and (
        r["event"] == "process_exit" or r.get("call_id") == 91))]
    sides = [1000 + d for d in range(4)]
    for i, side in enumerate(sides):  # torch's atexit in each sidecar, waiting on the one it nested
        call(w, 40 + i * 0.1, side, side - 1 if i else 100, "compile-sidecar", f"{AC}:shutdown_compile_workers",
             200 + i, None)
    ends = [{"pid": p, "end": T0 + 45} for p in (100, *sides)]
    zombies = [{"pid": p, "ppid": pp, "since": T0 + 45, "status": 9} for p, pp in zip(sides, (100, *sides[:-1]))]
    watcher(w, 45.1, "tree", count=0, started=[], ended=ends, zombies=zombies)
    watcher(w, 45.2, "leftover", how="root-killed", count=0, pids=[], procs=[])
    watcher(w, 45.3, "tree", count=0, started=[], ended=[], final=True)
    w.waited = Waited(100, -9)  # type: ignore[attr-defined]
    rep = report(w, tmp_path)
    lines = rep["answer"].splitlines()
    assert "made pools of their own" in lines[0], lines
    assert any(x.startswith("  - ") and "SIGKILL" in x for x in lines), lines
    fix = next(x for x in lines if x.startswith("- Fix first: "))
    assert "keep it out of the" in fix and "find what sent" not in fix, lines


def _group_termed_unread_main() -> LogWriter:
    """A time limit's SIGTERM to the group at 6 s: main 100's parent (a `timeout`) reaps it at once, so no wait
    status of the main is read; its sidecar 200 and worker 300, in the main's process group, are read as zombies
    killed by SIGTERM. No `run` waited."""
    w = _pool_then_compile(group=True)
    watcher(w, 6.1, "tree", count=0, started=[], ended=[{"pid": p, "end": T0 + 6} for p in (100, 200, 300)],
            zombies=[{"pid": p, "ppid": pp, "since": T0 + 6, "status": 15} for p, pp in ((200, 1), (300, 200))])
    watcher(w, 6.2, "leftover", how="root-killed", count=0, pids=[], procs=[])
    watcher(w, 6.3, "tree", count=0, started=[], ended=[], final=True)
    return w


def test_a_main_reaped_unread_as_its_group_was_termed_is_told_by_the_groups_signal(tmp_path: Path) -> None:
    """The main's own status went unread, but SIGTERM ended the rest of its process group as it ended: the run's
    line and the Answer say so, with the evidence's limit ('its own status was not read'), never only 'killed, or
    os._exit'; a member of another group, or another signal, says nothing of it."""
    rep = report(_group_termed_unread_main(), tmp_path)
    (run,) = rep["runs"]
    assert run["root_ending"] == ("ended as SIGTERM ended the rest of its process group (2 process(es), their wait "
                                  "statuses; its own status was not read)"), run
    said = " ".join(rep["answer"].split())
    assert "The main process ended as SIGTERM ended the rest of its process group" in said, said
    other = _group_termed_unread_main()
    for r in other.lines:
        for e in r.get("started") or ():
            if e["pid"] != 100:
                e["pgid"] = 200  # the pool in a group of its own: its signal is no evidence of the main's
    (tmp_path / "other").mkdir()
    assert report(other, tmp_path / "other")["runs"][0]["root_ending"] is None
    # the sidecar exited by itself as the main ended (torch's orphaned sidecar after a SIGKILL of the main) and
    # SIGTERMed its worker: no signal ended the whole group, whatever the worker's status says
    exited = _group_termed_unread_main()
    for r in exited.lines:
        if r["event"] == "tree":
            r["zombies"] = [z for z in r.get("zombies") or () if z["pid"] != 200]
    exited.add(6.0, 200, 100, "compile-sidecar", "process_exit", how="exit", counts={}, dropped=0)
    exited.lines.sort(key=lambda r: r["ts"])
    (tmp_path / "exited").mkdir()
    assert report(exited, tmp_path / "exited")["runs"][0]["root_ending"] is None
