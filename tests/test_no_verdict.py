"""When no verdict will come, the model says so instead of "verdict pending" (review 1, items 2, 4, 5, 18):
the watcher ended without one (its pid gone, on this host; or long overdue, read from elsewhere), no
watcher ran (a pid-1 root, WP_AUTOTRACE_SAMPLE_INTERVAL=0), and `run`'s waited status (items 11, 20)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from wp_autotrace.analysis.fold.fold import Builder
from wp_autotrace.analysis.fold.model import Model, Waited
from wp_autotrace.analysis.fold.verdict import NO_WATCHER, WATCHER_ENDED, Reader, judge
from wp_autotrace.analysis.present.render import render_text
from wp_autotrace.analysis.read.logread import read_logs
from wp_autotrace.analysis.report import analyze
from wp_autotrace.cli.cleanup.candidates import find_candidates

from .logs import T0, LogWriter, kinds, report, start
from .test_model import GONE_WATCHER, clean_run, with_root_killed, with_verdict_pending, with_watcher_gone
from .test_report_text import finding

PID1_NOTE = ("not started: the main process is pid 1, which would adopt it as its child; no tree or leftover "
             "records")


def fold(w: LogWriter, tmp_path: Path, now: float, host: str = "elsewhere") -> Model:
    """The model as a reader on `host` at `now` folds w's log."""
    return judge(Builder().fold(read_logs([str(w.write(tmp_path / "log.jsonl"))]).records), Reader(now, host))


def test_a_gone_watcher_on_this_host_means_no_verdict_will_come(tmp_path: Path) -> None:
    """Its pid is gone and it wrote neither leftover nor watcher_exit: "ended without a verdict", never
    "pending"; the left-behind list still comes from the last sample, and says so."""
    rep = report(with_watcher_gone(), tmp_path)
    (run,) = rep["runs"]
    assert run["no_verdict"].startswith(WATCHER_ENDED) and "4000000 is gone" in run["no_verdict"]
    assert not run["verdict_pending"] and not rep["verdict_pending"]
    assert "no-verdict" in kinds(rep) and "verdict-pending" not in kinds(rep)
    out = render_text(rep, {})
    assert "verdict pending" not in out
    # its last sample was before the main process's end: what was left is not known, and said so
    assert "left behind at main exit: not known (no verdict will come: the watcher ended without a verdict" in out


def test_a_live_watcher_on_this_host_is_still_pending(tmp_path: Path) -> None:
    """The watcher's pid is alive and started before its watcher_start: its verdict may still come."""
    w = LogWriter(host=os.uname().nodename)
    for r in with_verdict_pending().lines:
        w.lines.append({**r, "host": w.host, "pid": os.getpid() if r["role"] == "watcher" else r["pid"]})
    (run,) = fold(w, tmp_path, now=T0 + 3600, host=w.host).runs.values()
    assert run.verdict_pending and not run.no_verdict


def test_read_elsewhere_a_long_overdue_verdict_will_not_come(tmp_path: Path) -> None:
    """From another host (no /proc to ask), the log decides: no verdict a while after it was due."""
    (run,) = fold(with_verdict_pending(), tmp_path, now=T0 + 4 + 5).runs.values()
    assert run.verdict_pending and not run.no_verdict  # 5 s after the end: may still come
    (run,) = fold(with_verdict_pending(), tmp_path, now=T0 + 4 + 600).runs.values()
    assert run.no_verdict.startswith(WATCHER_ENDED) and not run.verdict_pending
    assert run.provisional_from == "" and run.leftover_count == 0  # nothing seen after the end


def pid_one_run() -> LogWriter:
    """A pid-1 main (a container's init): no watcher, the root's note saying so, a child alive at its exit."""
    w = LogWriter()
    w.add(0, 1, 0, "main", "process_start", argv=["python", "orphan.py"], python="3.11.7", forked=False, env={},
          run="r1", root_pid=0)
    w.add(0.01, 1, 0, "main", "tracer_error", where="watcher", error=PID1_NOTE)
    w.add(1, 1, 0, "main", "process_exit", how="exit", code=0, counts={}, dropped=0, below_count=1,
          below=[{"pid": 2, "ppid": 1, "create_time": T0 + 0.5, "name": "sleep"}])
    return w


def test_a_pid_one_root_leaves_nothing_and_no_verdict_is_pending(tmp_path: Path) -> None:
    """Its exit killed its pid namespace: nothing left behind, no "pending", its note is no tracer fault,
    and cleanup (from outside that namespace) says the pids are that namespace's and finds nothing."""
    rep = report(pid_one_run(), tmp_path)
    (run,) = rep["runs"]
    assert run["no_verdict"].startswith(NO_WATCHER) and "pid 1" in run["no_verdict"]
    assert rep["leftover_count"] == 0 and not rep["verdict_pending"]
    assert kinds(rep) == {"no-verdict"}, rep["findings"]  # neither leftovers nor "2 error(s) … disk was full"
    model = fold(pid_one_run(), tmp_path, now=T0 + 5)
    found, _, notes = find_candidates(model, None)
    assert found == [] and any("its own pid namespace" in n and "nothing to clean up" in n for n in notes), notes


def test_no_watcher_record_long_after_the_end_means_none_ran(tmp_path: Path) -> None:
    """WP_AUTOTRACE_SAMPLE_INTERVAL=0: the log has no watcher record; right after the end a watcher may
    still be starting, long after none ran."""
    w = clean_run()
    w.lines = [r for r in w.lines if r["event"] != "leftover"]
    w.lines[-1]["below"], w.lines[-1]["below_count"] = [], 0
    (run,) = fold(w, tmp_path, now=T0 + 4.5).runs.values()
    assert run.verdict_pending and not run.no_verdict
    (run,) = fold(w, tmp_path, now=T0 + 4 + 60).runs.values()
    assert run.no_verdict.startswith(NO_WATCHER) and "WP_AUTOTRACE_SAMPLE_INTERVAL=0" in run.no_verdict
    assert not run.verdict_pending


def waited_report(tmp_path: Path, waited: Waited) -> dict[str, object]:
    return analyze(read_logs([str(with_root_killed().write(tmp_path / "log.jsonl"))]), None, waited)


def test_run_knows_an_os_exit_is_no_kill(tmp_path: Path) -> None:
    """`run` saw exit code 0 and no process_exit: os._exit, said as such, never "killed"."""
    rep = waited_report(tmp_path, Waited(100, 0))
    assert rep["runs"][0]["state"] == "ended"  # type: ignore[index]
    assert "root-killed" not in kinds(rep) and "root-os-exit" in kinds(rep)  # type: ignore[arg-type]
    assert "killed" not in render_text(rep, {}).split("== Findings")[1].split("outlived")[0]


def test_run_knows_the_signal_it_forwarded(tmp_path: Path) -> None:
    """A SIGTERM `run` passed on ended the program: said so, no OOM-killer advice."""
    rep = waited_report(tmp_path, Waited(100, -signal.SIGTERM, (signal.SIGTERM,)))
    text = render_text(rep, {})
    assert "was ended by SIGTERM at 3.5 s (wp-autotrace run was sent it and passed it on)" in text
    assert "OOM" not in text
    rep = waited_report(tmp_path, Waited(100, -signal.SIGKILL))
    assert "was killed by SIGKILL" in render_text(rep, {})
    rep = waited_report(tmp_path, Waited(555, -signal.SIGKILL))  # another process: not this run's root
    assert "(killed, or os._exit)" in render_text(rep, {})


def test_without_a_waited_status_both_causes_are_said(tmp_path: Path) -> None:
    w = with_root_killed()
    start(w, 0, 300, 100, "child")  # nothing about it matters here: a second process in the run
    text = render_text(report(w, tmp_path), {})
    assert "ended without process_exit (killed, or os._exit)" in text and "find what killed it" not in text


def test_a_watcher_that_left_without_a_verdict_says_why(tmp_path: Path) -> None:
    """watcher_exit log-gone (the log was moved) and no leftover: "ended without a verdict (it left:
    log-gone)", with the list from the root's own, never "nothing left" nor "pending"."""
    w = clean_run()
    w.lines = [r for r in w.lines if r["event"] != "leftover"]
    w.lines[-1]["below"] = [{"pid": 200, "ppid": 100, "create_time": T0 + 1.2, "name": "python"}]
    w.lines[-1]["below_count"] = 1
    w.lines = [r for r in w.lines if not (r["pid"] == 200 and r["event"] == "process_exit")]
    w.add(0.01, 900, 100, "watcher", "watcher_start", interval=0.1, linger=5.0, run="r1", root_pid=100)
    w.add(4.2, 900, 100, "watcher", "watcher_exit", reason="log-gone", samples=3, cpu_s=0.0, run="r1", root_pid=100)
    rep = report(w, tmp_path)
    (run,) = rep["runs"]
    assert run["no_verdict"] == f"{WATCHER_ENDED} (it left: log-gone)" and not run["verdict_pending"]
    assert rep["leftover_count"] == 1 and "no-verdict" in kinds(rep)


def _left_then_ended() -> LogWriter:
    """with_root_killed, and the watcher later saw the left-behind sidecar 200 end: nothing is left."""
    w = with_root_killed()
    # well after the main's end at 3.5 s (LEFTOVER_ENDED_S): left running, then ended
    w.add(9.0, 900, 1, "watcher", "tree", run="r1", root_pid=100, count=0, started=[],
          ended=[{"pid": 200, "end": T0 + 9.0}])
    return w


def test_no_cleanup_advice_when_what_was_left_has_ended(tmp_path: Path) -> None:
    """Review 2 #3: the main process left by os._exit, its sidecar outlived it and then ended. Neither the
    Answer's "First:" (report read later, no waited status) nor the main-exit finding (`run`, exit 0) says
    to run cleanup; and no finding says "it was killed" for a main that exited 0 by os._exit."""
    log = str(_left_then_ended().write(tmp_path / "log.jsonl"))
    rep = analyze(read_logs([log]))
    assert "all have ended since" in finding(rep, "leftovers")["text"]
    assert "cleanup" not in finding(rep, "root-killed")["advice"]
    assert "cleanup" not in str(rep["answer"]) and "Fix first: nothing" in str(rep["answer"])  # nothing is left to end
    assert "it was killed" not in finding(rep, "leftovers")["text"]
    rep = analyze(read_logs([log]), None, Waited(100, 0))
    assert "cleanup" not in finding(rep, "root-os-exit")["advice"]
    assert "cleanup" not in render_text(rep, {})
    assert "killed" not in finding(rep, "leftovers")["text"]
    # while the sidecar is still alive, cleanup is the advice in both
    log = str(with_root_killed().write(tmp_path / "alive.jsonl"))
    assert "cleanup LOG" in finding(analyze(read_logs([log])), "root-killed")["advice"]
    assert "cleanup LOG" in finding(analyze(read_logs([log]), None, Waited(100, 0)), "root-os-exit")["advice"]


def test_no_verdict_from_the_last_sample_says_what_to_do(tmp_path: Path) -> None:
    """The watcher sampled after the main process's end, then went without a verdict: what was left comes from
    that sample, which may be stale; the finding says what to do about it (never an empty advice)."""
    w = with_watcher_gone()
    w.add(4.5, GONE_WATCHER, 100, "watcher", "tree", count=1, started=[], ended=[], run="r1", root_pid=100,
          rss=[{"pid": 200, "rss": 5 << 20}])
    rep = report(w, tmp_path)
    (run,) = rep["runs"]
    assert run["no_verdict"].startswith(WATCHER_ENDED)
    f = next(f for f in rep["findings"] if f["kind"] == "no-verdict")
    assert "comes from the last sample" in f["text"], f["text"]
    assert f["advice"].strip(), f


def test_every_finding_of_every_scenario_says_what_to_do(tmp_path: Path) -> None:
    """Each finding the scenarios make has its 'what to do', except the kinds whose table entry has none."""
    from wp_autotrace.analysis.findings.kinds import KINDS

    from .test_model import SCENARIOS

    for name, make in SCENARIOS.items():
        (tmp_path / name).mkdir()
        for f in report(make(), tmp_path / name)["findings"]:
            assert f["advice"] or not KINDS[f["kind"]][1], (name, f["kind"], f["text"])


def test_what_was_left_is_null_where_no_verdict_says_it(tmp_path: Path) -> None:
    """No watcher ran and the main exited, or the main's end is not in the log: how many processes were left is
    not known, so --json says null (report, costs, the run, the node) and the text "not known", never a forged 0;
    where the main's exit is not in the log, neither is how long it waited at exit. With the watcher's verdict the
    same log says its count (0). Fails where the model's 0 for no verdict passed as a figure."""
    reader = Reader(T0 + 3600, "elsewhere")
    no_watcher = clean_run()
    no_watcher.lines = [r for r in no_watcher.lines if r["event"] != "leftover"]
    killed = clean_run()
    killed.lines = [r for r in killed.lines if r["event"] not in ("leftover", "process_exit")]
    for w, state in ((no_watcher, "ended"), (killed, "end not seen")):
        rep = report(w, tmp_path, reader=reader)
        (run,) = rep["runs"]
        assert run["state"] == state
        (node,) = rep["jobs"][0]["per_node"]
        assert (rep["leftover_count"], rep["costs"]["leftover_count"], run["left_running"], node["leftovers"],
                rep["leftover_rss_bytes"], rep["costs"]["leftover_real_bytes"], node["leftover_real_bytes"]) == \
            (None,) * 7, state
        out = render_text(rep, {})
        assert "left behind at main exit: not known" in out and "left behind at main exit: none" not in out
        assert ("main's wait at exit not known" in out) == (state != "ended"), out
        assert (rep["costs"]["exit_wait_s"] is None) == (state != "ended")
    rep = report(clean_run(), tmp_path, reader=reader)
    (node,) = rep["jobs"][0]["per_node"]
    assert (rep["leftover_count"], rep["runs"][0]["left_running"], node["leftovers"]) == (0, 0, 0)
    assert rep["costs"]["exit_wait_s"] == 0.0
    assert "left behind at main exit: none" in render_text(rep, {})


def test_a_leftover_gone_from_this_host_is_not_to_be_ended_again(tmp_path: Path) -> None:
    """A leftover cleanup ended (it writes no record), read again on its host: the report said "end them now
    with `wp-autotrace cleanup LOG`" for a process long gone. Its pid is checked as the log is read: alive, the
    advice stays; gone, "all have ended since (gone from this host ...)" and no cleanup advice."""
    import subprocess

    from wp_autotrace.common.procfs import ProcReader

    from .logs import watcher

    left = subprocess.Popen(["sleep", "60"])
    try:
        created = ProcReader(strict=True).stat(left.pid)["create_time"]
        w = LogWriter(host=os.uname().nodename)
        w.add(0, 100, 1, "main", "process_start", argv=["python", "train.py"], forked=False, run="r1", root_pid=100)
        watcher(w, 0.01, "watcher_start", interval=0.1, linger=5.0)
        w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        watcher(w, 1.5, "leftover", how="root-exit", count=1,
                procs=[{"pid": left.pid, "ppid": 1, "name": "sleep", "cmd": "sleep 60", "rss": 1 << 20,
                        "create_time": created}])
        log = str(w.write(tmp_path / "log.jsonl"))
        text = finding(analyze(read_logs([log])), "leftovers")
        assert "ended since" not in text["text"] and "cleanup" in text["advice"], text
    finally:
        left.kill()
        left.wait(10)
    text = finding(analyze(read_logs([log])), "leftovers")
    assert "all have ended since (gone from this host" in text["text"] and "cleanup" not in text["advice"], text
