"""The report's wording and shape on synthetic logs: run states, labels, ranks, costs, advice, short text."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from wp_autotrace.analysis.derive.plugins import advice_for
from wp_autotrace.analysis.findings import NESTED_ADVICE
from wp_autotrace.analysis.fold.verdict import Reader
from wp_autotrace.analysis.present.render import render_text, summary_lines
from wp_autotrace.cli.run import short_answer

from .logs import AC, SP, T0, LogWriter, call, kinds, report, seed_log, start, watcher
from .test_model import (
    clean_run,
    with_early_wakeup,
    with_root_killed,
    with_run_in_progress,
    with_slow_exit,
    with_unreturned,
    without_root_end,
)


def finding(rep: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(f for f in rep["findings"] if f["kind"] == kind)


def test_root_killed_is_said_with_what_was_seen_after(tmp_path: Path) -> None:
    """A main process the watcher saw end without process_exit: killed, when, and what stayed alive."""
    rep = report(with_root_killed(), tmp_path)
    assert rep["runs"][0]["state"] == "killed"
    text = finding(rep, "root-killed")["text"]
    assert "main process 100 ended without process_exit at 3.5 s (killed, or os._exit)" in text
    assert "1 process(es) of the run still alive" in text
    assert 100 not in rep["no_exit_pids"]  # explained: killed
    out = render_text(rep, {})
    assert "main process ended without process_exit (killed, or os._exit; 1 process(es) left running after it)" in out
    assert "left behind after the main process ended without process_exit: 1: 200" in out
    assert "Nothing unusual" not in out


def test_end_not_seen_without_a_watcher(tmp_path: Path) -> None:
    """No process_exit and no watcher, an old log: nothing explains the end, and the report says that."""
    rep = report(without_root_end(clean_run()), tmp_path)
    assert rep["runs"][0]["state"] == "end not seen"
    assert "nothing saw it end" in finding(rep, "root-killed")["text"]
    assert 100 in rep["no_exit_pids"]


def test_run_in_progress_says_so_not_no_process_exit(tmp_path: Path) -> None:
    """The watcher's latest tree record is not final, read on another host right after it: in progress;
    the live main is running, not missing."""
    rep = report(with_run_in_progress(), tmp_path, reader=Reader(T0 + 4, "elsewhere"))
    assert rep["runs"][0]["state"] == "in progress"
    assert rep["running_pids"] == [100] and rep["no_exit_pids"] == []
    assert kinds(rep) == {"in-progress"}  # its open warm_pool call is not "never returned": it is running
    out = render_text(rep, {})
    assert "in progress" in out.split("== Findings")[0]
    assert "left behind at main exit: not known yet (the run is in progress)" in out
    assert "no process_exit" not in out and "ended unseen" not in out


def test_run_in_progress_without_a_watcher_by_a_fresh_log(tmp_path: Path) -> None:
    """Without watcher records, a log whose last record is seconds old is a live run; an old one is not."""
    w = without_root_end(clean_run())
    shift = time.time() - 10 - (T0 + 4)
    for r in w.lines:
        r["ts"] += shift
    rep = report(w, tmp_path)
    assert rep["runs"][0]["state"] == "in progress"
    assert "no watcher record confirms it" in finding(rep, "in-progress")["text"]
    assert report(without_root_end(clean_run()), tmp_path)["runs"][0]["state"] == "end not seen"


def test_wakeup_that_woke_nothing_is_shown(tmp_path: Path) -> None:
    """AsyncCompile.wakeup() returning early is a finding naming its caller; one that woke the pool is not."""
    rep = report(with_early_wakeup(), tmp_path)
    f = finding(rep, "wakeup-no-pool")
    assert f["pids"] == [100] and "/site/plugin/_inductor/__init__.py:5" in f["text"]
    w = with_early_wakeup()
    w.add(2.0005, 100, 1, "main", "call", target=f"{SP}:SubprocPool.wakeup", call_id=6, parent_call=5,
          thread="MainThread", stack=[], caller=None)
    w.add(2.0008, 100, 1, "main", "return", call_id=6, duration_s=0.0003, sidecar_pid=200)
    rep = report(w, tmp_path)
    assert "wakeup-no-pool" not in kinds(rep) and rep["pools"][0]["wakeups"] == 1


def nested_with_frame(frame: dict[str, Any]) -> LogWriter:
    w = seed_log()
    for r in w.lines:
        if r["event"] == "call":
            r["caller"] = dict(frame)
    return w


def test_known_plugin_release_gets_its_advice(tmp_path: Path) -> None:
    """A nested warm_pool caller in a release plugins.py knows: that release's behaviour and fix first."""
    frame = {"file": "/site/torch_npu/_inductor/__init__.py", "line": 18, "func": "<module>", "dist": "torch_npu",
             "dist_version": "2.8.0.post5", "rel": "torch_npu/_inductor/__init__.py"}
    rep = report(nested_with_frame(frame), tmp_path)
    advice = finding(rep, "nested-pools")["advice"]
    known = advice_for("torch_npu", "2.8.0.post5")
    assert known and advice.startswith(known) and NESTED_ADVICE in advice
    assert finding(rep, "warm-pool-bypass")["advice"].startswith(known)  # an import-time call, same release
    text = finding(rep, "nested-pools")["text"]
    assert "torch_npu 2.8.0.post5: torch_npu/_inductor/__init__.py:18 (<module>)" in text
    caller = rep["warm_pool_callers"][0]["caller"]
    assert caller["file"] == frame["file"]  # JSON keeps the full path
    rep = report(nested_with_frame({**frame, "dist_version": "9.9.9"}), tmp_path)
    assert finding(rep, "nested-pools")["advice"] == NESTED_ADVICE


def test_unreturned_call_says_where_the_process_was(tmp_path: Path) -> None:
    """A call never returned: how long it was open, where it was called from, the process's last record."""
    f = finding(report(with_unreturned(), tmp_path), "call-never-returned")
    assert "open 0.0 s until the process ended (exit)" in f["text"]
    assert "called from /site/plugin/_inductor/__init__.py:5 (<module>)" in f["text"]
    assert "last record call SubprocMain._shutdown_pool at 3.5 s" in f["text"]


def labelled_run() -> LogWriter:
    """main, traced children (-m, -c, resource tracker, ISA probe, forked), untraced g++ chains under main."""
    w = clean_run()
    kids = [(101, ["/usr/bin/python3", "-m", "mytool.serve", "--x"]), (102, ["python3", "-c", "import os\nx=1"]),
            (103, ["python3", "-c", "from multiprocessing.resource_tracker import main;main(8)"]),
            (104, ["python3", "-c", "import ctypes; cdll.LoadLibrary('x.so')"])]
    for pid, argv in kids:
        w.add(1.1, pid, 100, "child", "process_start", argv=argv, forked=False, run="r1", root_pid=100)
        w.add(1.2, pid, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    tools = [{"pid": 500 + i, "ppid": 100 if i % 3 == 0 else 500 + i - i % 3, "name": name, "cmd": f"{name} -c x.c",
              "create_time": T0 + 2, "rss": (i + 1) << 20}
             for i, name in enumerate(["g++", "cc1plus", "as", "g++", "cc1plus", "collect2", "g++", "cc1plus", "ld"])]
    watcher(w, 2.1, "tree", count=10, started=tools, ended=[])
    return w


def test_labels_and_toolchain_folded(tmp_path: Path) -> None:
    """Children are named by what they run; the toolchain under a parent is one line unless --verbose."""
    rep = report(labelled_run(), tmp_path)
    labels = {p["pid"]: p["label"] for p in rep["processes"]}
    assert labels[101] == "-m mytool.serve" and labels[102] == "-c import os"
    assert labels[103] == "multiprocessing resource_tracker" and labels[104].startswith("torch ISA probe")
    assert labels[505] == "collect2" and labels[508] == "ld"
    text = render_text(rep, {})
    folded = [line for line in text.splitlines() if "toolchain:" in line]
    assert len(folded) == 1 and "9 process(es) (3 cc1plus, 3 g++, 1 as, 1 collect2, 1 ld)" in folded[0]
    assert "peak rss 9 MiB" in folded[0] and "cc1plus (untraced)" not in text
    verbose = render_text(rep, {}, verbose=True)
    assert "toolchain:" not in verbose and verbose.count("cc1plus (untraced)") == 3


def test_forks_seen_only_before_their_exec_are_folded_with_the_helpers(tmp_path: Path) -> None:
    """On a loaded box the watcher lists a g++ run or an ISA probe between its fork and its exec and never after:
    an untraced child still running its parent's command line that ended within FORK_SEEN_S is folded into one
    line under its parent, not listed as a process of its own (a CI run's tree had '13923 train.py (untraced)'
    beside the folded probes). A fork that lived longer (a worker of the program's own) stays its own line, and
    --verbose lists each."""
    w = labelled_run()
    main_cmd = " ".join(next(r["argv"] for r in w.lines if r["event"] == "process_start" and r["pid"] == 100))
    forks = [{"pid": 600 + i, "ppid": 100, "name": "python", "cmd": main_cmd, "create_time": T0 + 3 + i * 0.01,
              "rss": 300 << 20} for i in range(3)]
    watcher(w, 3.0, "tree", count=13, started=forks, ended=[])
    watcher(w, 3.2, "tree", count=12, started=[], ended=[{"pid": 600, "create_time": T0 + 3, "end": T0 + 3.15},
                                                          {"pid": 601, "create_time": T0 + 3.01, "end": T0 + 3.15}])
    watcher(w, 6.0, "tree", count=11, started=[], ended=[{"pid": 602, "create_time": T0 + 3.02, "end": T0 + 6.0}])
    rep = report(w, tmp_path)
    main_label = next(p["label"] for p in rep["processes"] if p["pid"] == 100)
    assert next(p["label"] for p in rep["processes"] if p["pid"] == 600) == main_label
    tree = render_text(rep, {}).split("== Process tree")[1].split("\n\n")[0].splitlines()
    folded = [line for line in tree if f"forks of {main_label} seen only before their exec" in line]
    assert len(folded) == 1 and "2 process(es)" in folded[0], tree
    assert not any(" 600 " in line or " 601 " in line for line in tree), tree
    assert any(" 602 " in line for line in tree), tree  # lived 3 s: a process of its own
    verbose = render_text(rep, {}, verbose=True)
    assert "seen only before their exec" not in verbose and " 600 " in verbose


def ranked_run(hosts: tuple[str, ...]) -> list[LogWriter]:
    """torchrun (traced, no rank) on each host, 2 ranks per host, each rank with one nested sidecar."""
    logs = []
    for h, host in enumerate(hosts):
        w = LogWriter(host)
        start(w, 0, 100, 1, "main", run="r1")
        w.lines[-1]["argv"] = ["/usr/bin/python3", "-m", "torch.distributed.run", "--nproc_per_node=2", "t.py"]
        for local in range(2):
            rank, pid = str(h * 2 + local), 200 + local * 10
            start(w, 0.5, pid, 100, "child", rank={"RANK": rank, "LOCAL_RANK": str(local)})
            w.warm(1, pid, 100, "child", pid + 1)
            start(w, 1.5, pid + 1, pid, "compile-sidecar", rank={"RANK": rank})
            w.warm(2, pid + 1, pid, "compile-sidecar", pid + 2)
            start(w, 2.5, pid + 2, pid + 1, "compile-sidecar")  # rank variables cleared: inherits its rank
        w.add(5, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
        logs.append(w)
    return logs


def test_ranks_labelled_and_grouped_launcher_named(tmp_path: Path) -> None:
    """Ranks are labelled (host:rank across hosts), pools grouped per rank, torchrun shown as launcher."""
    (w,) = ranked_run(("h1",))
    rep = report(w, tmp_path)
    procs = {p["pid"]: p for p in rep["processes"]}
    assert procs[100]["launcher"] and procs[100]["label"] == "torchrun"
    assert procs[210]["rank_label"] == "rank 1" and procs[212]["rank_label"] == "rank 1"
    assert [(e["rank"], e["pid"], e["pools"], e["sidecars"]) for e in rep["ranks"]] == [
        ("rank 0", 200, 2, 2), ("rank 1", 210, 2, 2)]
    text = render_text(rep, {})
    assert "== Ranks (2), launched by torchrun 100" in text
    assert "100 launcher (torchrun)" in text and "210 child (t.py) rank 1" not in text
    assert "in ranks 0, 1" in finding(rep, "nested-pools")["text"]
    paths = [x.write(tmp_path / f"{x.host}.jsonl") for x in ranked_run(("h1", "h2"))]
    from wp_autotrace.analysis.read.logread import read_logs
    from wp_autotrace.analysis.report import analyze

    rep = analyze(read_logs([str(p) for p in paths]))
    assert [e["rank"] for e in rep["ranks"]] == ["rank h1:0", "rank h1:1", "rank h2:2", "rank h2:3"]


def example_shape(sidecars: int = 30) -> LogWriter:
    """The bundled example's shape: main warms a pool at import, each sidecar nests another and dies in main()."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    w.lines[-1]["argv"] = ["/venv/bin/python", "examples/train.py", "3"]
    origin = {"file": "/site/torch/utils/_functools.py", "line": 50, "func": "set_val"}
    parent, role = 100, "main"
    for d in range(sidecars):
        side = 1000 + d
        w.warm(1 + d, parent, 1 if parent == 100 else parent - 1 if d > 1 else 100, role, side, cid=10 + d * 2)
        start(w, 1.5 + d, side, parent, "compile-sidecar")
        w.add(1.8 + d, side, parent, "compile-sidecar", "error", source="logging", logger="__main__",
              level="ERROR", exc_type="RuntimeError", message="prefetchable_cache value already set",
              frames=[origin], origin=origin)
        parent, role = side, "compile-sidecar"
    call(w, 3, 100, 1, "main", f"{AC}:AsyncCompile.wakeup", 90, 3.001)
    tools = [{"pid": 5000 + i, "ppid": 100, "name": n, "cmd": n, "create_time": T0 + 4, "rss": 30 << 20}
             for i, n in enumerate(["g++", "cc1plus", "as", "collect2", "ld"] * 8)]
    watcher(w, 4.1, "tree", count=40, started=tools, ended=[])
    call(w, 40, 100, 1, "main", f"{AC}:shutdown_compile_workers", 91, 45, error="KeyboardInterrupt: ")
    w.lines[-2].update(stack=[], caller=None)  # torch's atexit handler calls it from no frame (torch 2.13)
    w.add(45.1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    left = [{"pid": 1000 + d, "ppid": 1, "rss": 280 << 20} for d in range(sidecars)]
    watcher(w, 45.2, "leftover", how="root-exit", count=sidecars, pids=[x["pid"] for x in left], procs=left)
    return w


def test_default_text_is_short_at_30_nested_sidecars(tmp_path: Path) -> None:
    """The example's shape at 30 nested sidecars: about 65 lines, the Answer first, a few bullets led by the worst
    problem; --verbose lists everything."""
    rep = report(example_shape(), tmp_path)
    text = render_text(rep, {})
    lines = text.splitlines()
    assert len(lines) <= 65, text
    # the cause first (the nesting), its symptoms under it: what was left running, with its memory
    assert lines[0] == "== Answer" and lines[1].startswith("- main 100 made a compile pool")
    answer = text.split("\n\n")[0]
    assert "nested 30 deep" in answer and "  - 30 processes were left running" in answer and "8.2 GiB" in answer
    findings = text.split("== Findings\n")[1].split("\n\n")[0].splitlines()
    assert len(findings) <= 12
    assert "RuntimeError: prefetchable_cache value already set" in text and "AsyncCompile.wakeup()" in text
    assert "… 25 more (--verbose, or --json)" in text
    assert rep["costs"]["exit_wait_s"] == 5.0 and rep["costs"]["leftover_rss_bytes"] == 30 * (280 << 20)
    assert rep["costs"]["never_served_cpu_s"] is None  # not recorded: never guessed
    verbose = render_text(rep, {}, verbose=True)
    assert verbose.count("- sidecar ") == 30 and "more (--verbose" not in verbose


def test_short_answer_is_the_answer_and_findings(tmp_path: Path) -> None:
    """`wp-autotrace run`'s summary: the Answer's bullets, then each finding and its advice."""
    path = with_slow_exit().write(tmp_path / "slow.jsonl")
    lines = short_answer(str(path))
    rep = report(with_slow_exit(), tmp_path)
    assert lines == summary_lines(rep, 100)  # not a terminal: 100 columns
    assert lines[0].startswith("- The main process waited 12.0 s in shutdown_compile_workers")
    finding = next(i for i, x in enumerate(lines) if i and x.startswith("- The main process waited 12.0 s"))
    assert finding > 1 and lines[finding + 1].startswith("  what to do:") and max(map(len, lines)) <= 100


def test_leftover_advice_names_pools_only_when_a_pool_process_is_left(tmp_path: Path) -> None:
    """Review 1 #14: a plain orphan (`sleep`) left behind: its cause is what started it, not pools."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.5, "tree", count=2, started=[{"pid": 300, "ppid": 100, "name": "sleep", "cmd": "sleep 60",
                                                "create_time": T0 + 0.4, "rss": 2 << 20}], ended=[])
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 1.2, "leftover", how="root-exit", count=1, pids=[300],
            procs=[{"pid": 300, "ppid": 1, "rss": 2 << 20, "name": "sleep"}])
    rep = report(w, tmp_path)
    (left,) = [f for f in rep["findings"] if f["kind"] == "leftovers"]
    assert "pools" not in left["advice"] and "what started them" in left["advice"]


def test_a_leftover_has_one_memory_figure_everywhere(tmp_path: Path) -> None:
    """Review 1 #16: a child sampled as the fork of Python (12 MiB) before it exec'd `sleep` (2 MiB at the
    leftover record): the finding, the tree, the Answer (run's summary) and the JSON all say 2 MiB."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    watcher(w, 0.2, "tree", count=2, started=[{"pid": 300, "ppid": 100, "name": "python3", "cmd": "python3 x.py",
                                                "create_time": T0 + 0.1, "rss": 12 << 20}], ended=[])
    w.add(1, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    watcher(w, 1.2, "leftover", how="root-exit", count=1, pids=[300],
            procs=[{"pid": 300, "ppid": 1, "name": "sleep", "cmd": "sleep 7", "create_time": T0 + 0.1,
                    "rss": 2 << 20}])
    rep = report(w, tmp_path)
    text = render_text(rep, {})
    (left,) = [f for f in rep["findings"] if f["kind"] == "leftovers"]
    # and what the figure is: its RSS (shared pages counted in full), no sweep having read its own share
    assert "holding about 2 MiB (RSS, its own share not read)" in left["text"]
    assert "(about 2 MiB: RSS, its own share not read)" in rep["answer"]
    (tree_line,) = [line for line in text.splitlines() if " 300 " in line and "left behind" in line]
    assert "rss 2 MiB" in tree_line and "12 MiB" not in text, tree_line
    (proc,) = [p for p in rep["processes"] if p["pid"] == 300]
    assert (proc["held_bytes"], proc["held_kind"]) == (2 << 20, "rss") and rep["leftover_rss_bytes"] == 2 << 20


def test_a_parent_cycle_of_reused_pids_still_shows_the_tree(tmp_path: Path) -> None:
    """The main's parent's pid (1 here) taken later by one of the main's children: no process is a root, and
    the tree section said only '… 5 more process(es)'. Every process has its line, under its parent."""
    w = seed_log()
    run = {"run": "r1", "root_pid": 100}
    w.add(2.0, 1, 100, "child", "process_start", argv=["python", "c.py"], python="3.11.7", forked=False, env={}, **run)
    w.add(2.5, 1, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    out = render_text(report(w, tmp_path), {})
    tree = out.split("== Process tree")[1].split("\n\n")[0]
    assert "more process(es)" not in tree, tree
    # main's link to the "1" that started after it is no parent link (report.parent_links): main is the root, and
    # the child 1 sits under it, after the pool (the pool first: the tree's own order)
    assert [line.split()[2] for line in tree.splitlines()[1:]] == ["100", "200", "300", "400", "1"], tree
    rows = {line.split()[2]: line for line in tree.splitlines()[1:]}
    assert rows["1"].index(" 1 child") == rows["200"].index(" 200 compile-sidecar"), tree


def test_the_tree_shows_the_pool_before_short_lived_helpers(tmp_path: Path) -> None:
    """A CPU compile starts a dozen ISA probes and the compiler before the first Triton kernel makes the pool: the
    default Process tree listed the probes one per line in start order, and the sidecar was among '… N more
    process(es)'. Now the pool's processes come first, and the probes and the toolchain are one line each."""
    w = LogWriter()
    start(w, 0, 100, 1, "main")
    code = "import ctypes; ctypes.cdll.LoadLibrary('/tmp/x.so')"  # torch's cpu_vec_isa check, one per ISA
    for i in range(12):
        w.add(0.1 + 0.1 * i, 300 + i, 100, "child", "process_start", argv=["python3", "-c", code], python="3.11.7",
              forked=False, env={}, run="r1", root_pid=100)
        w.add(0.15 + 0.1 * i, 300 + i, 100, "child", "process_exit", how="exit", counts={}, dropped=0)
    gxx = {"pid": 500, "ppid": 100, "name": "g++", "cmd": "g++ -c k.cpp", "create_time": T0 + 1.5, "rss": 9 << 20}
    watcher(w, 1.6, "tree", count=2, started=[gxx], ended=[])
    watcher(w, 2.0, "tree", count=1, started=[], ended=[{"pid": 500, "create_time": T0 + 1.5, "end": T0 + 1.9}])
    start(w, 3.0, 200, 100, "compile-sidecar")
    w.add(4.0, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    tree = render_text(report(w, tmp_path), {}).split("== Process tree")[1].split("\n\n")[0].splitlines()[1:]
    assert "more process(es)" not in "\n".join(tree), tree
    assert tree[0].split()[2] == "100" and tree[1].split()[2:4] == ["200", "compile-sidecar"], tree
    (folded,) = [line for line in tree if "torch ISA probe" in line]
    assert "12 process(es)" in folded, tree
    assert len(tree) == 4 and "toolchain: 1 process(es) (1 g++)" in tree[3], tree


def test_a_process_that_renamed_itself_keeps_its_peak_rss(tmp_path: Path) -> None:
    """An untraced child that renames itself (prctl PR_SET_NAME, setproctitle: gunicorn's workers) is listed
    again by the watcher with its new name and command line, but the same image (`exec` false): its new name
    names it, and its peak RSS from before the rename stays (it is the same program's memory). One that exec'd
    (`exec` true) starts its memory at the exec, and so does one listed again by an older watcher (no `exec`)."""
    w = clean_run()
    ct = T0 + 2
    for pid, execd in ((300, False), (301, True), (302, None)):
        first = {"pid": pid, "ppid": 100, "name": "python3.11", "cmd": "python3.11 serve.py", "create_time": ct,
                 "rss": 300 << 20}
        again = {**first, "name": "worker", "cmd": "worker: serving", "rss": 120 << 20}
        if execd is not None:
            again["exec"] = execd
        watcher(w, 2.01, "tree", count=2, started=[first], ended=[])
        watcher(w, 2.5, "tree", count=2, started=[again], ended=[])
    rep = report(w, tmp_path)
    got = {p["pid"]: (p["label"], p["peak_rss"] >> 20) for p in rep["processes"] if p["pid"] in (300, 301, 302)}
    assert got == {300: ("worker", 300), 301: ("worker", 120), 302: ("worker", 120)}, got


def test_a_compiler_driver_first_seen_before_its_exec_is_folded_as_the_compiler(tmp_path: Path) -> None:
    """torch forks a g++ driver from the main: the watcher may list it between fork and exec, with the main's
    command line and memory (a real run's "train.py (untraced) rss 3 MiB" beside its own toolchain line, its peak
    351 MiB of the main's pages), then again once it exec'd. The exec's name and command name it: it folds into the
    parent's one toolchain line, its peak from the exec on."""
    w = clean_run()
    ct = T0 + 2
    early = {"pid": 300, "ppid": 100, "name": "python3.11", "cmd": "python3.11 train.py", "create_time": ct,
             "rss": 350 << 20}
    execd = {**early, "name": "g++", "cmd": "g++ k.cpp -shared -o k.so", "rss": 3 << 20}
    cc1 = {"pid": 301, "ppid": 300, "name": "cc1plus", "cmd": "cc1plus k.cpp", "create_time": ct + 0.1,
           "rss": 50 << 20}
    watcher(w, 2.01, "tree", count=2, started=[early], ended=[])
    watcher(w, 2.05, "tree", count=2, started=[execd], ended=[])
    watcher(w, 2.2, "tree", count=3, started=[cc1], ended=[])
    watcher(w, 2.6, "tree", count=1, started=[], ended=[{"pid": p, "create_time": t, "end": T0 + 2.5}
                                                       for p, t in ((300, ct), (301, ct + 0.1))])
    rep = report(w, tmp_path)
    assert {p["pid"]: p["label"] for p in rep["processes"]}[300] == "g++"
    tree = render_text(rep, {}).split("== Process tree")[1].split("\n\n")[0]
    assert "train.py (untraced)" not in tree, tree
    (folded,) = [line for line in tree.splitlines() if "toolchain:" in line]
    assert "2 process(es) (1 cc1plus, 1 g++); peak rss 50 MiB" in folded, tree


def test_a_pid_reused_inside_a_run_keeps_both_processes_and_the_right_parent(tmp_path: Path) -> None:
    """A long run's pid counter wraps: child a.py (300) ends, then b.py gets pid 300 and starts g.py (400). The
    tree (even --verbose) showed only a.py, g.py under it (ended before g.py started), and offered --verbose
    under --verbose itself; the page drew one lane for both. Each row is now its own process, under the parent
    the report links (`parent_index`); only the tree's line cap leaves rows to --json."""
    from wp_autotrace.analysis.present.html import render_html

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for t, pid, ppid, script, end in ((1.0, 300, 100, "a.py", 1.5), (2.0, 300, 100, "b.py", 3.5),
                                      (2.5, 400, 300, "g.py", 3.0)):
        w.add(t, pid, ppid, "child", "process_start", argv=["python", script], python="3.11.7", forked=False,
              env={}, run="r1", root_pid=100)
        w.add(end, pid, ppid, "child", "process_exit", how="exit", counts={}, dropped=0)
    w.add(4.0, 100, 1, "main", "process_exit", how="exit", counts={}, dropped=0)
    rep = report(w, tmp_path)
    procs = rep["processes"]
    at = {p["cmd"].split()[-1]: i for i, p in enumerate(procs)}
    parents = {script: procs[i]["parent_index"] for script, i in at.items()}
    assert parents == {"main.py": None, "a.py": at["main.py"], "b.py": at["main.py"], "g.py": at["b.py"]}, procs
    for verbose in (False, True):
        tree = render_text(rep, {}, verbose=verbose).split("== Process tree")[1].split("\n\n")[0]
        rows = [(len(m[1]), m[2], m[3]) for line in tree.splitlines()[1:]  # (indent, pid, script)
                if (m := re.match(r"\s*\S+\s+\S+ ( *)(\d+) \w+ \((\S+)\)", line))]
        assert "more process(es)" not in tree, tree
        assert [(pid, what) for _, pid, what in rows] == [("100", "main.py"), ("300", "a.py"), ("300", "b.py"),
                                                         ("400", "g.py")], tree
        assert rows[1][0] == rows[2][0] < rows[3][0], tree  # the two 300s siblings, 400 under the second
    lanes = re.findall(r'<g class="lane" data-pid="(\d+)"', render_html(rep, ""))
    assert lanes == ["100", "300", "300", "400"], lanes


def test_the_verbose_tree_at_its_line_cap_offers_only_json(tmp_path: Path) -> None:
    """--verbose stops at MAX_TREE_LINES rows: the rest are in --json only (it offered --verbose there too)."""
    from wp_autotrace.analysis.present.render import MAX_TREE_LINES

    w = LogWriter()
    start(w, 0, 100, 1, "main")
    for i in range(MAX_TREE_LINES + 1):
        start(w, 1 + i * 1e-3, 1000 + i, 100, "child")
    rep = report(w, tmp_path)
    tree = render_text(rep, {}, verbose=True).split("== Process tree")[1].split("\n\n")[0].splitlines()
    assert len(tree) == MAX_TREE_LINES + 2 and tree[-1] == "… 2 more process(es) (--json)", tree[-3:]
    assert render_text(rep, {}).split("== Process tree")[1].split("\n\n")[0].endswith("(--verbose, or --json)")


def test_a_parent_link_to_a_process_first_seen_later_is_not_its_parent() -> None:
    """A child whose fold link names a process of its ppid first seen after it started (no create time: one that took
    the pid later, as a shuffled or merged log gives) nests under the process of that pid alive as it started; one
    with no such process is a top row. Links to parents that had started stay as the fold made them."""
    from types import SimpleNamespace

    from wp_autotrace.analysis.report import parent_links

    def proc(index: int, pid: int, ppid: int, start: float, end: float | None = None) -> Any:
        return SimpleNamespace(index=index, pid=pid, ppid=ppid, start=start, run_id="r1", host="h", parent=None,
                               alive_at=lambda t: start <= t and (end is None or end > t))

    main, early, child, ghost, orphan = (proc(0, 10, 1, 0.0), proc(1, 20, 10, 0.1), proc(2, 30, 20, 23.4),
                                         proc(3, 20, 10, 75.6), proc(4, 40, 50, 30.0))
    early.parent, child.parent, ghost.parent, orphan.parent = main, ghost, main, ghost
    links = parent_links([main, early, child, ghost, orphan])
    assert links == {0: None, 1: 0, 2: 1, 3: 0, 4: None}, links


def test_the_run_line_counts_what_was_left_running_not_what_died_with_it(tmp_path: Path) -> None:
    """A group kill: the watcher's sample as the main process ends still counts the processes dying with it;
    the Run line gives the count left running (the Findings' count), as a user's `ps` after the run shows."""
    w = with_root_killed()
    for r in w.lines:
        if r["event"] == "tree" and r["ts"] >= T0 + 3.6:
            r["count"] = 3  # two more, dying with the main process in that moment, not in the verdict
    rep = report(w, tmp_path)
    assert rep["runs"][0]["alive_after_root"] == 3 and rep["runs"][0]["left_running"] == 1, rep["runs"][0]
    out = render_text(rep, {})
    assert "1 process(es) left running after it" in out and "3 process(es)" not in out, out


def test_the_runs_length_says_its_last_process_ended_only_where_none_was_alive_at_the_last_record(
        tmp_path: Path) -> None:
    """The Run header's 'run 13.0 s (until its last process ended)' is a claim the records must hold: the
    watcher's last look (13 s) still saw the two leftovers alive, so the run lasts beyond the log and the header
    says so; where that look saw them end, the claim stands. Fails where the words were said whenever a process
    outlived the main (a report read while cleanup had not yet ended the leftovers said they had ended)."""
    def header(ended: bool) -> str:
        w = seed_log()
        gone = [{"pid": 300, "end": T0 + 13}, {"pid": 400, "end": T0 + 13}] if ended else []
        w.add(13, 900, 100, "watcher", "tree", count=0 if ended else 2, started=[], ended=gone, run="r1",
              root_pid=100)
        return next(line for line in render_text(report(w, tmp_path), {}).splitlines() if line.startswith("python"))

    assert header(ended=False).endswith("program 11.0 s, run 13.0 s (to its last record, 2 process(es) alive then)")
    assert header(ended=True).endswith("program 11.0 s, run 13.0 s (until its last process ended)")
